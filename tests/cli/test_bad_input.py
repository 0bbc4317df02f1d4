"""Malformed specs and data files: a specific message, its exit code (78 spec, 65 data,
66 no file), no ledger change.

Each case mutates a valid toy spec (or data file) and runs the real
``dpcli tabulate`` entry point; the ledger file must not even be created.
"""

from __future__ import annotations

import os

import pytest

from tests.cli.conftest import Project, toy_frame


def _set(path: str, value):
    def mutate(spec: dict) -> None:
        *parents, last = path.split(".")
        node = spec
        for key in parents:
            node = node[key]
        node[last] = value
    return mutate


def _drop(path: str):
    def mutate(spec: dict) -> None:
        *parents, last = path.split(".")
        node = spec
        for key in parents:
            node = node[key]
        del node[last]
    return mutate


SPEC_CASES = [
    ("unknown top-level key", _set("epsilon", 1.0), "epsilon: unknown key"),
    ("missing dataset", _drop("dataset"), "dataset: is required"),
    ("bad dataset id", _set("dataset", "a b/c"), "dataset: must be 1-100 letters"),
    ("negative total epsilon", _set("budget.epsilon", -1), "budget.epsilon: must be positive"),
    ("zero total epsilon", _set("budget.epsilon", 0), "budget.epsilon: must be positive"),
    ("epsilon as text", _set("budget.epsilon", "lots"), "budget.epsilon: must be a number"),
    ("delta out of range", _set("budget.delta", 1.5), "budget.delta: must be in [0, 1)"),
    ("positive class not declared", _set("label.positive", 7),
     "label.positive: '7' is not one of the declared classes"),
    ("single class", _set("label.classes", [1]), "label.classes: must list at least 2"),
    ("numeric without bounds", _drop("schema.columns.age.bounds"),
     "schema.columns.age.bounds: is required"),
    ("reversed bounds", _set("schema.columns.age.bounds", [90, 17]),
     "schema.columns.age.bounds: lower bound 90 must be below upper bound 17"),
    ("other listed as category", _set("schema.columns.color.categories", ["red", "other"]),
     "schema.columns.color.categories: must not list 'other'"),
    ("duplicate category", _set("schema.columns.color.categories", ["red", "red"]),
     "schema.columns.color.categories[1]: duplicate value 'red'"),
    ("unknown column type", _set("schema.columns.color.type", "colour"),
     "schema.columns.color.type: must be one of numeric, categorical, binary, tokens"),
    ("unknown column key", _set("schema.columns.age.range", [1, 2]),
     "schema.columns.age.range: unknown key"),
    ("missing vocabulary file", _set("schema.columns.words.vocabulary", "nope.txt"),
     "schema.columns.words.vocabulary: cannot read vocabulary file"),
    ("label declared as a column", _set("schema.columns.label", {"type": "binary"}),
     "schema.columns.label: is the label column"),
    ("undeclared column in section", _set("tabulate.columns", ["color", "shoe_size"]),
     "tabulate.columns[1]: column 'shoe_size' is not declared"),
    ("section without epsilon", _drop("tabulate.epsilon"), "tabulate.epsilon: is required"),
    ("negative section epsilon", _set("tabulate.epsilon", -0.5),
     "tabulate.epsilon: must be positive"),
    ("bins not an integer", _set("tabulate.bins", 2.5), "tabulate.bins: must be an integer"),
    ("schema file missing", _set("schema", "missing.schema.yaml"), "cannot read file"),
    ("invalid missing policy", _set("schema.missing", "ignore"),
     "schema.missing: must be one of error, impute"),
]


@pytest.mark.parametrize(("name", "mutate", "message"), SPEC_CASES, ids=[c[0] for c in SPEC_CASES])
def test_malformed_spec(project: Project, cli, name: str, mutate, message: str) -> None:
    project.write_spec(mutate)
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", project.root / "o.csv")
    assert r.exit_code == 78, r.stderr
    assert message in r.stderr
    assert str(project.spec) in r.stderr
    assert project.no_runs()  # nothing charged
    assert not (project.root / "o.csv").exists()


def test_invalid_yaml(project: Project, cli) -> None:
    project.spec.write_text("dataset: toy\nbudget: {epsilon: 1\n")
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", project.root / "o.csv")
    assert r.exit_code == 78
    assert f"{project.spec}: not valid YAML at line" in r.stderr
    assert project.no_runs()  # nothing charged


def _write_csv(project: Project, text: str):
    path = project.root / "bad.csv"
    path.write_text(text)
    return path


HEADER = "age,color,member,words,label\n"


def _csv_rows(project: Project, bad_row: str):
    """A CSV whose second data row is ``bad_row``."""
    return _write_csv(project, HEADER + "30,red,no,alpha,0\n" + bad_row + "\n")

DATA_CASES = [
    ("missing column", lambda p: _frame_without(p, "color"), "missing column(s) 'color'"),
    ("label outside classes", lambda p: _csv_rows(p, "40,blue,yes,beta,7"),
     "bad.csv: column 'label': label value outside the declared classes in data row 2"),
    ("null label", lambda p: _csv_rows(p, "40,blue,yes,beta,"),
     "bad.csv: column 'label': missing label in data row 2"),
    ("broken csv row", lambda p: _csv_rows(p, "40,blue"),
     "bad.csv: broken CSV: row 3 of the file"),
    ("text in numeric column", lambda p: _csv_rows(p, "old,red,no,beta,1"),
     "bad.csv: column 'age': a value is not a number in data row 2"),
    ("null in a missing: error column", lambda p: _csv_rows(p, "30,,no,alpha,0"),
     "bad.csv: column 'color': missing value in data row 2"),
    ("semicolon csv", lambda p: _write_csv(p, HEADER.replace(",", ";") + "30;red;no;alpha;0\n"),
     "the file seems to use ';' as its separator"),
    ("file not found", lambda p: p.root / "absent.parquet", "absent.parquet"),
    ("unknown format", lambda p: _write_csv(p, "").rename(p.root / "data.xlsx"), "data.xlsx"),
]


def _frame_without(project: Project, column: str):
    path = project.root / "partial.parquet"
    toy_frame().drop(columns=[column]).to_parquet(path, index=False)
    return path


@pytest.mark.parametrize(("name", "make", "needle"), DATA_CASES, ids=[c[0] for c in DATA_CASES])
def test_bad_data_file(project: Project, cli, name: str, make, needle: str) -> None:
    """The custodian who asks (--report) sees the data row; without it, the row number (an
    exact private figure) is withheld from stderr and the message says how to see it."""
    data = make(project)
    code = 66 if name == "file not found" else 65  # EX_NOINPUT, else EX_DATAERR
    r = cli("tabulate", data, "--spec", project.spec, "--out", project.root / "o.csv",
            "--report")
    assert r.exit_code == code, r.stderr
    assert needle in r.stderr
    r = cli("tabulate", data, "--spec", project.spec, "--out", project.root / "o.csv")
    assert r.exit_code == code, r.stderr
    located = "row" in needle
    assert "data row" not in r.stderr.replace("to see the data row", "")
    assert needle.split(" in data row")[0].split("row 3 of the file")[0] in r.stderr
    assert ("rerun with --report to see the data row" in r.stderr) is located
    # a bad value is met by the statistics pass (one read of the values): the run is aborted,
    # its reservation given back; a file that can not be counted stops before the charge
    assert project.nothing_charged()
    in_pass = name in ("label outside classes", "null label", "text in numeric column",
                       "null in a missing: error column")
    assert project.run_kinds() == (["reserve", "aborted"] * 2 if in_pass else [])
    assert not (project.root / "o.csv").exists()


@pytest.mark.parametrize("bad_row", [
    "40,blue,yes,beta,SECRET42",          # label
    "SECRET42,blue,yes,beta,1",           # numeric
    "40,blue,yes,beta,1,SECRET42",        # extra field
])
def test_private_value_not_echoed(project: Project, cli, bad_row: str) -> None:
    data = _csv_rows(project, bad_row)
    r = cli("tabulate", data, "--spec", project.spec, "--out", project.root / "o.csv")
    assert r.exit_code == 65
    assert "SECRET42" not in r.stderr + r.stdout
    assert project.nothing_charged()
    assert "SECRET42" not in project.ledger.read_text()


@pytest.mark.parametrize(("args", "needle"), [
    (["--epsilon", "-1"], "--epsilon must be a finite number of at least 1e-06, got -1"),
    (["--epsilon", "inf"], "--epsilon must be a finite number"),
    (["--epsilon", "1e-9"], "--epsilon must be a finite number of at least 1e-06"),
    (["--bins", "100000000"], "less than or equal to 10000"),
    (["--columns", "color,shoe_size"], "'shoe_size' is not declared"),
    (["--columns", "words", "--epsilon", "0.1"], None),  # valid: checks the happy path of overrides
])
def test_bad_options(project: Project, cli, args, needle) -> None:
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", project.root / "o.csv",
            "--seed", 1, *args)
    if needle is None:
        assert r.exit_code == 0, r.stderr
        assert project.ledger.read_bytes() != b""
        return
    assert r.exit_code == 64
    assert needle in r.stderr
    assert project.no_runs()  # nothing charged


def test_a_read_only_output_folder_exits_74_before_charge(project: Project, cli,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # docs/exit-codes.md: 74 is the system refusing I/O (permission, read-only file system)
    folder = project.root / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    if os.access(folder, os.W_OK):  # root writes anyway: stand in for the kernel's answer
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, *a, **k: False if (
            os.fspath(p) == os.fspath(folder) and mode & os.W_OK) else real(p, mode, *a, **k))
    try:
        r = cli("tabulate", project.data, "--spec", project.spec, "--out", folder / "o.csv")
    finally:
        folder.chmod(0o755)
    assert r.exit_code == 74, r.stderr
    assert str(folder) in r.stderr and "not writable" in r.stderr
    assert project.no_runs()  # nothing charged
    assert list(folder.iterdir()) == []


def test_unwritable_output_fails_before_charge(project: Project, cli) -> None:
    (project.root / "taken").write_text("a file, not a folder")
    r = cli("tabulate", project.data, "--spec", project.spec, "--out",
            project.root / "taken" / "o.csv")
    assert r.exit_code == 64
    assert "taken" in r.stderr
    assert project.no_runs()  # nothing charged
