"""``dpcli inspect``: a file against the spec's schema, through the real entry point. It spends
nothing, so every case also checks that the ledger holds no run afterwards."""

from __future__ import annotations

import json

from tests.cli.conftest import Project


def test_a_matching_file_is_reported_on_stdout(project: Project, cli) -> None:
    r = cli("inspect", project.data, "--spec", project.spec)
    assert r.exit_code == 0, r.stderr
    assert "color" in r.stdout and "ok" in r.stdout           # the table, for > and pipes
    assert "matches the schema" in r.stderr and "(nothing was charged)" in r.stderr
    assert project.no_runs()


def test_a_missing_column_is_named_with_exit_2(project: Project, cli) -> None:
    frame = __import__("pandas").read_parquet(project.data).drop(columns=["color"])
    data = project.root / "short.parquet"
    frame.to_parquet(data, index=False)
    r = cli("inspect", data, "--spec", project.spec)
    assert r.exit_code == 2
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
