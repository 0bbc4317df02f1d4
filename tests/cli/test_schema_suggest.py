"""``dpcli schema suggest`` through the real entry point: charges like any release, writes
suggestions for review, refuses what it cannot do before any charge.

The toy data (tests/cli/conftest.py): age integers in [10, 100), color red/green/blue/pink
(about 100 rows each), 400 rows."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from tests.cli.conftest import Project


def _todo_spec(project: Project, *, delta: float = 1e-5, budget: float = 100.0) -> Path:
    def mutate(spec: dict) -> None:
        spec["budget"] = {"epsilon": budget, "delta": delta}
        spec["schema"]["columns"]["age"]["bounds"] = "TODO"
        spec["schema"]["columns"]["color"]["categories"] = "TODO"
        del spec["tabulate"]
    return project.write_spec(mutate)


def test_suggest_charges_the_ledger_and_writes_reviewable_domains(project: Project,
                                                                  cli) -> None:
    _todo_spec(project)
    out = project.root / "suggested.yaml"
    r = cli("schema", "suggest", project.data, "--spec", project.spec, "--epsilon", 40,
            "--out", out, "--json")
    assert r.exit_code == 0, r.stderr
    suggested = yaml.safe_load(out.read_text())["columns"]
    lo, hi = suggested["age"]["bounds"]
    assert lo <= 10 and hi >= 99 and hi <= 10_000              # holds the data, not absurdly
    assert set(suggested["color"]["categories"]) == {"red", "green", "blue", "pink"}
    assert "Review each" in out.read_text()
    [reserve] = project.reserves()
    assert reserve["command"] == "schema-suggest"
    assert Fraction(str(reserve["epsilon"])) == 40 and reserve["delta"] == pytest.approx(1e-6)
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["suggestions"]["color"] == sorted(suggested["color"]["categories"])


def test_other_commands_still_refuse_the_todo_spec(project: Project, cli) -> None:
    _todo_spec(project)
    r = cli("tabulate", project.data, "--spec", project.spec, "--epsilon", 0.1,
            "--columns", "member", "--out", project.root / "t.csv")
    assert r.exit_code == 78 and "columns.age.bounds" in r.stderr
    assert project.no_runs()


def test_categories_need_a_delta_budget_and_nothing_is_charged(project: Project, cli) -> None:
    _todo_spec(project, delta=0.0)
    out = project.root / "s.yaml"
    r = cli("schema", "suggest", project.data, "--spec", project.spec, "--epsilon", 1,
            "--out", out)
    assert r.exit_code == 64 and "budget.delta is 0" in r.stderr and "color" in r.stderr
    assert project.no_runs() and not out.exists()
    r = cli("schema", "suggest", project.data, "--spec", project.spec, "--epsilon", 2,
            "--out", out, "--columns", "age")                   # bounds need no δ
    assert r.exit_code == 0, r.stderr
    assert list(yaml.safe_load(out.read_text())["columns"]) == ["age"]


def test_nothing_to_suggest_and_dry_run_charge_nothing(project: Project, cli) -> None:
    r = cli("schema", "suggest", project.data, "--spec", project.spec, "--epsilon", 1,
            "--out", project.root / "s.yaml")
    assert r.exit_code == 64 and "nothing to suggest" in r.stderr
    _todo_spec(project)
    r = cli("schema", "suggest", project.data, "--spec", project.spec, "--epsilon", 4,
            "--dry-run", "-v")  # -v: the plan's every step, by name
    assert r.exit_code == 0 and "bounds:age" in r.stderr and "categories:color" in r.stderr
    r = cli("schema", "suggest", project.data, "--spec", project.spec, "--epsilon", 1,
            "--out", project.root / "s.yaml", "--columns", "member")
    assert r.exit_code == 64 and "'member'" in r.stderr
    assert project.no_runs()


def test_the_output_may_not_replace_the_schema_or_the_data(project: Project, cli) -> None:
    _todo_spec(project)
    before = project.data.read_bytes()
    r = cli("schema", "suggest", project.data, "--spec", project.spec, "--epsilon", 1,
            "--out", project.data)
    assert r.exit_code == 64 and project.data.read_bytes() == before
    assert project.no_runs()


def test_bounds_the_noise_cannot_resolve_are_refused_before_the_charge(project: Project,
                                                                       cli) -> None:
    """n = 400 at ε = 0.01 for a column: the quantiles would be placed by the noise. Refused
    (exit 64) naming the column and the ε that would do, nothing charged, nothing written."""
    _todo_spec(project)
    out = project.root / "s.yaml"
    r = cli("schema", "suggest", project.data, "--spec", project.spec, "--epsilon", 0.01,
            "--columns", "age", "--out", out)
    assert r.exit_code == 64, r.stderr
    assert "refused before any charge" in r.stderr and "'age'" in r.stderr
    assert "--epsilon" in r.stderr
    assert project.no_runs() and not out.exists()


def test_a_value_named_other_is_never_suggested_and_the_suggestion_is_accepted(
        project: Project, cli) -> None:
    """'other' is every categorical column's implicit level: suggest never proposes it (a
    schema may not list it), so its suggestion can be copied into the schema as it is."""
    import pandas as pd

    frame = pd.read_parquet(project.data)
    frame["color"] = frame["color"].replace({"pink": "other"})   # ~100 rows named 'other'
    data = project.root / "with_other.parquet"
    frame.to_parquet(data, index=False)
    _todo_spec(project)
    out = project.root / "suggested.yaml"
    r = cli("schema", "suggest", data, "--spec", project.spec, "--epsilon", 40, "--out", out,
            "--seed", 3)
    assert r.exit_code == 0, r.stderr
    suggested = yaml.safe_load(out.read_text())["columns"]
    assert set(suggested["color"]["categories"]) == {"red", "green", "blue"}
    assert "'other' itself is never listed" in out.read_text()

    def copy(categories: list[str]) -> None:
        def mutate(spec: dict) -> None:
            spec["budget"] = {"epsilon": 100.0, "delta": 1e-5}   # as _todo_spec's
            spec["schema"]["columns"]["color"]["categories"] = categories
        project.write_spec(mutate)

    copy(suggested["color"]["categories"])
    r = cli("inspect", data, "--spec", project.spec)
    assert r.exit_code == 0, r.stderr
    copy([*suggested["color"]["categories"], "other"])   # the refusal says what to do
    r = cli("inspect", data, "--spec", project.spec)
    assert r.exit_code == 78
    assert "must not list 'other'" in r.stderr and "delete 'other' from the list" in r.stderr


def test_the_plan_says_each_once(project: Project, cli) -> None:
    """Two numeric columns share one plan row: "ε/2 per quantile each", not "each each"."""
    import pandas as pd

    frame = pd.read_parquet(project.data)
    frame["height"] = frame["age"] * 2
    data = project.root / "two_numeric.parquet"
    frame.to_parquet(data, index=False)

    def mutate(spec: dict) -> None:
        spec["budget"] = {"epsilon": 100.0, "delta": 1e-5}
        spec["schema"]["columns"]["age"]["bounds"] = "TODO"
        spec["schema"]["columns"]["height"] = {"type": "numeric", "bounds": "TODO"}
        del spec["tabulate"]
    project.write_spec(mutate)
    r = cli("schema", "suggest", data, "--spec", project.spec, "--epsilon", 40, "--out",
            project.root / "s.yaml", "--dry-run")
    assert r.exit_code == 0, r.stderr
    assert "2 steps" in r.stderr and "ε/2 per quantile each)" in r.stderr
    assert "each each" not in r.stderr
    assert project.no_runs()
