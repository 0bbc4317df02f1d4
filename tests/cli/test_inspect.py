"""``dpcli inspect``: a file against the spec's schema, through the real entry point. It spends
nothing, so every case also checks that the ledger holds no run afterwards."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from tests.cli.conftest import Project


def test_a_matching_file_is_reported_on_stdout(project: Project, cli) -> None:
    r = cli("inspect", project.data, "--spec", project.spec)
    assert r.exit_code == 0, r.stderr
    assert "color" in r.stdout and "ok" in r.stdout           # the table, for > and pipes
    assert "matches the schema" in r.stderr and "(nothing was charged)" in r.stderr
    assert project.no_runs()


def test_a_missing_column_is_named_with_exit_65(project: Project, cli) -> None:
    frame = __import__("pandas").read_parquet(project.data).drop(columns=["color"])
    data = project.root / "short.parquet"
    frame.to_parquet(data, index=False)
    r = cli("inspect", data, "--spec", project.spec)
    assert r.exit_code == 65
    assert "short.parquet" in r.stderr and "'color'" in r.stderr
    assert "missing" in r.stdout
    assert project.no_runs()


def test_json_names_every_column_status(project: Project, cli) -> None:
    r = cli("inspect", project.csv, "--spec", project.spec, "--json")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["ok"] is True and out["format"] == "csv"
    assert set(out["columns"]) == {"age", "color", "member", "words", "label"}
    assert set(out["columns"].values()) == {"ok"}
    assert project.no_runs()


def test_a_failure_with_json_is_one_line_holding_the_report_and_the_error(project: Project,
                                                                          cli) -> None:
    """JSON Lines readers take one object per run: the report carries the error's keys."""
    import pandas as pd

    frame = pd.read_csv(project.csv).astype({"age": object})
    frame.loc[len(frame) - 2, "age"] = "abc"
    data = project.root / "deep.csv"
    frame.to_csv(data, index=False)
    for args in ((), ("--json",)):
        r = cli("inspect", data, "--spec", project.spec, *args)
        assert r.exit_code == 65, r.stderr
        assert r.stderr.count("error:") == 1 and f"{data}: {data}" not in r.stderr, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1, lines
    out = json.loads(lines[0])
    assert out["ok"] is False and out["error"] == "data" and out["exit_code"] == 65
    assert out["charged"] is False and "'age'" in out["message"]
    assert set(out["columns"]) == {"age", "color", "member", "words", "label"}
    # the column the value pass stopped at is not "ok" (it was, above its own error);
    # the others passed the structure check only: the pass did not reach the last row
    assert out["columns"]["age"] == "value check failed"
    assert set(out["columns"].values()) - {"value check failed"} == {"structure ok"}
    assert project.no_runs()


def test_a_missing_value_marks_its_column(project: Project, cli) -> None:
    import pandas as pd

    frame = pd.read_csv(project.csv)
    frame.loc[3, "age"] = None
    data = project.root / "gap.csv"
    frame.to_csv(data, index=False)
    r = cli("inspect", data, "--spec", project.spec, "--json")
    assert r.exit_code == 65, r.stderr
    out = json.loads(r.stdout)
    assert out["columns"]["age"] == "value check failed" and "missing value" in out["message"]


def _remap_project(project: Project):
    import pandas as pd

    frame = pd.DataFrame({"age": [5, 20, 30, 200, None], "color": ["Red", "red", "purple",
                                                                     "blue", "RED"],
                          "member": ["yes", "no", "maybe", "no", "yes"],
                          "words": ["alpha", "beta zzz", "", "gamma", "omega"],
                          "label": [0, 1, 0, 1, 0]})
    data = project.root / "remap.csv"
    frame.to_csv(data, index=False)

    def impute_age(spec: dict) -> None:
        spec["schema"]["columns"]["age"].update(missing="impute", fill=40)
        spec["schema"]["columns"]["words"]["missing"] = "impute"

    project.write_spec(impute_age)
    return data


def test_values_a_run_would_remap_are_counted_per_column_with_report(project: Project,
                                                                      cli) -> None:
    """Issue 24: 'Red' where 'red' is declared, undeclared categories, numbers outside the
    bounds and missing values: counted per column, with what a run does to them."""
    data = _remap_project(project)
    before = project.ledger.read_bytes()
    r = cli("inspect", data, "--spec", project.spec, "--report")
    assert r.exit_code == 0, r.stderr
    out = " ".join(r.stdout.split())
    assert "1 below the bounds → clamped to 17" in out
    assert "1 above the bounds → clamped to 90" in out and "1 missing → imputed" in out
    assert "2 differ only in case from a declared category → 'other'" in out
    assert "1 undeclared → 'other'" in out and "1 undeclared → 'no'" in out
    assert "tokens outside the vocabulary → dropped" in out
    assert "remap values in 4 column(s)" in r.stderr and "values a run will remap:" in r.stdout
    assert project.ledger.read_bytes() == before  # free


def test_without_report_inspect_names_the_kinds_not_the_counts(project: Project, cli) -> None:
    data = _remap_project(project)
    r = cli("inspect", data, "--spec", project.spec)
    assert r.exit_code == 0, r.stderr
    out = " ".join(r.stdout.split())
    assert "some below the bounds" in out and "1 below" not in out
    assert "--report" in r.stderr
    r = cli("inspect", data, "--spec", project.spec, "--json", "--report")
    summary = json.loads(r.stdout)
    assert summary["remapped"]["color"] == ["case", "undeclared"]
    assert "2" not in json.dumps(summary["remapped"])  # --json never holds the counts


def test_a_column_whose_every_value_is_remapped_says_all(project: Project, cli) -> None:
    """A declared-value typo ('no'/'yes' declared, 'No'/'Yes' stored) remaps every value of the
    column: inspect says 'all' and 'only in case' even without --report (a new user's
    finding: it said 'some undeclared')."""
    frame = pd.read_parquet(project.data)
    frame["member"] = frame["member"].str.capitalize()
    data = project.root / "caps.parquet"
    frame.to_parquet(data, index=False)
    r = cli("inspect", data, "--spec", project.spec)
    assert r.exit_code == 0, r.stderr
    out = " ".join(r.stdout.split())
    assert "member: all differ only in case from a declared value → 'no'" in out


def test_a_csv_written_from_floats_matches_declared_integers(tmp_path: Path, cli) -> None:
    """x and the label written "0.0"/"1.0" (pandas writes floats so): inspect finds nothing
    remapped in the CSV, as in the same data's Parquet file; before, every CSV value was
    undeclared and binary x became a constant without a word."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.integers(0, 2, 300).astype(float),
                          "label": rng.integers(0, 2, 300).astype(float)})
    frame.to_csv(tmp_path / "f.csv", index=False)
    frame.to_parquet(tmp_path / "f.parquet", index=False)
    spec = {"dataset": "floats", "budget": {"epsilon": 1.0}, "ledger": "ledger.jsonl",
            "label": {"column": "label", "classes": [0, 1], "positive": 1},
            "schema": {"columns": {"x": {"type": "binary", "values": [0, 1]}}}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    assert "1.0," in (tmp_path / "f.csv").read_text()
    for name in ("f.csv", "f.parquet"):
        r = cli("inspect", tmp_path / name, "--spec", tmp_path / "s.yaml", "--json", "--report")
        assert r.exit_code == 0, r.stderr
        got = json.loads(r.stdout)
        assert got["ok"] and got["remapped"] == {}, (name, got)
