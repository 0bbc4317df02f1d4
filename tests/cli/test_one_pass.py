"""One pass over the data (issue 22): the values are checked by the statistics pass.

Before its charge a run reads only the record count (a Parquet footer; a CSV file's record
structure); a bad value met by the pass, before any noise is drawn, ends the run with the
pre-charge check's own message and code, writes nothing, and is recorded reserve → aborted
with the budget unchanged (docs/design.md, rule 5 "aborted runs"). Anything else after the
charge (a signal, an internal error) still records ``failed`` and keeps the charge.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcli.data import DataSource
from dpcli.errors import DataError
from dpcli.spec import load_spec
from tests.cli.conftest import Project, toy_frame


def _csv(project: Project, frame: pd.DataFrame, name: str = "bad.csv") -> Path:
    path = project.root / name
    frame.assign(words=frame["words"].map(" ".join)).to_csv(path, index=False)
    return path


def _parquet(project: Project, frame: pd.DataFrame, name: str = "bad.parquet") -> Path:
    path = project.root / name
    frame.to_parquet(path, index=False)
    return path


def _bad_label(project: Project, fmt: str) -> Path:
    frame = toy_frame()
    frame.loc[250, "label"] = 7
    return _csv(project, frame) if fmt == "csv" else _parquet(project, frame)


def _null_in_strict_column(project: Project, fmt: str) -> Path:
    frame = toy_frame()
    frame["color"] = frame["color"].astype(object)
    frame.loc[123, "color"] = None
    return _csv(project, frame) if fmt == "csv" else _parquet(project, frame)


def _text_in_numeric(project: Project, fmt: str) -> Path:
    frame = toy_frame()
    frame["age"] = frame["age"].astype(object)
    frame.loc[321, "age"] = "old"
    return _csv(project, frame)


CASES = [
    ("csv", "bad label", _bad_label),
    ("parquet", "bad label", _bad_label),
    ("csv", "missing value", _null_in_strict_column),
    ("parquet", "missing value", _null_in_strict_column),
    ("csv", "not a number", _text_in_numeric),
]


def _check_message(project: Project, data: Path) -> str:
    """What the pre-charge check (the full validation pass) says about ``data``."""
    spec = load_spec(project.spec)
    with pytest.raises(DataError) as caught:
        DataSource(data, spec.schema).check_values(spec.schema.names)
    return str(caught.value)


def _remaining(project: Project, cli) -> dict:
    r = cli("ledger", "show", "--spec", project.spec, "--json")
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)["remaining"]


@pytest.mark.parametrize(("fmt", "what", "make"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_a_bad_value_met_by_the_pass_aborts_with_the_checks_message(
        project: Project, cli, fmt: str, what: str, make) -> None:
    data = make(project, fmt)
    expected = _check_message(project, data)
    before = _remaining(project, cli)
    out = project.root / "m.json"
    r = cli("train-nb", data, "--spec", project.spec, "--epsilon", 0.5, "--out", out,
            "--report", "--json")
    assert r.exit_code == 65, r.stderr
    assert expected in r.stderr                          # exactly the check's message
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {
        "error": "data", "message": expected, "exit_code": 65, "charged": False}
    assert not out.exists() and not list(project.root.glob(".m.json*"))   # nothing written
    assert project.run_kinds() == ["reserve", "aborted"]
    assert project.nothing_charged()
    assert _remaining(project, cli) == before
    shown = cli("ledger", "show", "--spec", project.spec, "--json")
    assert [run["status"] for run in json.loads(shown.stdout)["runs"]] == ["aborted"]
    # without --report the row stays withheld, as before
    r = cli("train-nb", data, "--spec", project.spec, "--epsilon", 0.5, "--out", out)
    assert r.exit_code == 65
    assert expected.split(" in data row")[0] in r.stderr
    assert "rerun with --report to see the data row" in r.stderr


def test_a_broken_csv_record_stops_before_the_charge(project: Project, cli) -> None:
    """The count parses the record structure: a broken record is found before the charge,
    with the message of the full check (its first problem in file order)."""
    text = project.csv.read_text().splitlines()
    text[200] = "40,blue"
    data = project.root / "broken.csv"
    data.write_text("\n".join(text) + "\n")
    expected = _check_message(project, data)
    assert "broken CSV: row 201 of the file" in expected
    r = cli("train-nb", data, "--spec", project.spec, "--epsilon", 0.5, "--out",
            project.root / "m.json", "--report")
    assert r.exit_code == 65, r.stderr
    assert expected in r.stderr
    assert project.no_runs()


def test_the_first_problem_in_file_order_wins(project: Project, cli) -> None:
    """A bad label and a later broken record: the message is the full check's (whichever
    step, the count before the charge or the pass after it, meets a problem first)."""
    frame = toy_frame()
    frame.loc[300, "label"] = 9
    data = _csv(project, frame)
    lines = data.read_text().splitlines()
    lines[380] = "1,2"                   # a broken record after the bad label
    data.write_text("\n".join(lines) + "\n")
    expected = _check_message(project, data)
    r = cli("tabulate", data, "--spec", project.spec, "--out", project.root / "o.csv",
            "--report")
    assert r.exit_code == 65
    assert expected in r.stderr
    assert project.nothing_charged()


def test_a_signal_in_the_pass_still_fails_and_keeps_the_charge(project: Project, cli,
                                                                monkeypatch) -> None:
    """A run stopped by a signal (or any error that is not a data error) mid-pass keeps
    its charge, as before: only a data error before any release is aborted."""
    import signal

    from dpcli.signals import Terminated

    def killed(self, *args, **kwargs):
        raise Terminated(signal.SIGTERM)
        yield  # pragma: no cover (a generator, like the real one)

    monkeypatch.setattr(DataSource, "map_encoded", killed)
    r = cli("train-nb", project.data, "--spec", project.spec, "--epsilon", 0.5, "--out",
            project.root / "m.json")
    assert r.exit_code == 143, r.stderr
    assert project.run_kinds() == ["reserve", "failed"]
    assert not project.nothing_charged()


def test_a_data_error_the_check_does_not_reproduce_fails_and_keeps_the_charge(
        project: Project, cli, monkeypatch) -> None:
    """A DataError raised from the statistics (not by the check) is a failure: charge kept."""
    def odd(self, *args, **kwargs):
        raise DataError("something the statistics found")
        yield  # pragma: no cover

    monkeypatch.setattr(DataSource, "map_encoded", odd)
    r = cli("train-nb", project.data, "--spec", project.spec, "--epsilon", 0.5, "--out",
            project.root / "m.json")
    assert r.exit_code == 65
    assert project.run_kinds() == ["reserve", "failed"]


def test_a_data_error_after_a_draw_fails_and_keeps_the_charge(project: Project, cli,
                                                              monkeypatch) -> None:
    """train-nb's threshold pass runs after the model's noise is drawn: a bad value met
    there (the file changed under the run) is a failure, never an abort."""
    import dpcli.algorithms.nb_threshold as nbt

    def changed(*args, **kwargs):
        raise DataError("changed")

    monkeypatch.setattr(nbt, "count", changed)
    monkeypatch.setattr(DataSource, "recheck", lambda self: (_ for _ in ()).throw(
        DataError("the check would say so")))
    r = cli("train-nb", project.data, "--spec", project.spec, "--epsilon", 0.5, "--out",
            project.root / "m.json")
    if project.run_kinds() == ["reserve", "complete"]:
        pytest.skip("this spec's train-nb plans no threshold step")
    assert r.exit_code == 65
    assert project.run_kinds() == ["reserve", "failed"]


@pytest.mark.parametrize("shape", ["plain", "quoted newlines", "empty lines", "crlf",
                                   "no final newline", "header only", "bom"])
def test_the_pre_charge_count_is_the_passs_record_count(tmp_path: Path, shape: str) -> None:
    """n before the charge (the count of records) equals what the full check and the
    statistics pass read, whatever the file's line structure."""
    from tests.cli.conftest import make_project

    project = make_project(tmp_path)
    spec = load_spec(project.spec)
    rng = np.random.default_rng(3)
    rows = [f'{int(a)},{c},{m},"{w}",{y}' for a, c, m, w, y in zip(
        rng.integers(17, 90, 50), rng.choice(["red", "blue"], 50), rng.choice(["no", "yes"], 50),
        rng.choice(["alpha beta", "gamma\ndelta", "omega"] if shape == "quoted newlines"
                   else ["alpha", "beta"], 50), rng.integers(0, 2, 50), strict=True)]
    header = "age,color,member,words,label"
    newline = "\r\n" if shape == "crlf" else "\n"
    if shape == "empty lines":
        rows = [r if i % 7 else r + "\n" for i, r in enumerate(rows)]
    if shape == "header only":
        rows = []
    text = newline.join([header, *rows]) + ("" if shape == "no final newline" else newline)
    if shape == "bom":
        text = "\ufeff" + text
    path = tmp_path / "shape.csv"
    path.write_bytes(text.encode())
    counted = DataSource(path, spec.schema).count_records(spec.schema.names)
    checked = DataSource(path, spec.schema).check_values(spec.schema.names)
    source = DataSource(path, spec.schema)
    read = sum(b.n for b in source.batches(spec.schema.names, rng=np.random.default_rng(0)))
    assert counted == checked == read == len(rows)


def _grid_taxonomy(spec: dict) -> None:
    spec["publish-grid"] = {"epsilon": 0.5}
    spec["schema"]["columns"]["age"]["taxonomy"] = {"bins": [2, 4, 8]}


#: every spending command that reads the data file: (extra arguments, spec change)
COMMANDS = {
    "tabulate": (["--out", "o.csv"], None),
    "select-features": (["--out", "f.json", "--allow-noise", "--epsilon", 0.3], None),
    "train-nb": (["--out", "m.json", "--epsilon", 0.5], None),
    "train-brc": (["--out", "b.json", "--epsilon", 0.3, "--columns", "age,color,member"],
                  None),
    "roc": (["--out", "roc", "--model", "MODEL", "--epsilon", 0.5], None),
    "evaluate": (["--model", "MODEL", "--epsilon", 0.5], None),
    "publish-grid": (["--out", "syn"], _grid_taxonomy),
    "validate": (["--out", "lr.json", "--epsilon", 0.5, "--lambda", "search"], None),
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_spending_command_aborts_on_a_bad_value_in_its_pass(
        project: Project, cli, command: str) -> None:
    """Each spending command reads its data through the one pass (Spend.charged): a bad
    label met there aborts the run with the check's message, nothing written, nothing
    charged."""
    extra, mutate = COMMANDS[command]
    if mutate is not None:
        project.write_spec(mutate)
    model = project.root / "nb.json"
    if "MODEL" in extra:
        r = cli("train-nb", project.data, "--spec", project.spec, "--out", model,
                "--epsilon", 0.3, "-q")
        assert r.exit_code == 0, r.stderr
    before = project.run_kinds()
    data = _bad_label(project, "parquet")
    expected = _check_message(project, data)
    args = [project.root / a if isinstance(a, str) and a.endswith((".csv", ".json", "roc",
                                                                   "syn")) else a
            for a in extra]
    args = [model if a == "MODEL" else a for a in args]
    r = cli(command, data, "--spec", project.spec, *args, "--report")
    assert r.exit_code == 65, r.stderr
    assert expected in r.stderr
    assert project.run_kinds() == [*before, "reserve", "aborted"]
    written = {p.name for p in project.root.iterdir()}
    assert not written & {"o.csv", "f.json", "m.json", "b.json", "roc", "syn", "lr.json"}


def test_a_dry_run_still_checks_every_value(project: Project, cli) -> None:
    """--dry-run spends nothing and is how a file is checked: it keeps the full check."""
    data = _bad_label(project, "parquet")
    r = cli("train-nb", data, "--spec", project.spec, "--epsilon", 0.5, "--dry-run",
            "--report")
    assert r.exit_code == 65
    assert _check_message(project, data) in r.stderr
    assert project.no_runs()


def test_a_bad_value_in_a_companion_input_aborts_too(project: Project, cli) -> None:
    """validate's --validation file is checked by its pass like the main input."""
    vfile = _bad_label(project, "parquet")
    expected = _check_message(project, vfile)
    r = cli("validate", project.data, "--spec", project.spec, "--validation", vfile,
            "--epsilon", 0.5, "--lambda", "search", "--out", project.root / "lr.json",
            "--report")
    assert r.exit_code == 65, r.stderr
    assert expected in r.stderr
    assert project.run_kinds() == ["reserve", "aborted"]
