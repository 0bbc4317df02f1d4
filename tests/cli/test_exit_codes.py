"""Exit codes (BSD sysexits, docs/exit-codes.md), ``--json`` on failure, the plan summary,
and standard input: issue 24's shell papercuts, through the real entry point."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import Project


def _error(r) -> dict:
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1, r.stdout  # one JSON object, one line
    obj = json.loads(lines[0])
    assert set(obj) == {"error", "message", "exit_code", "charged"}
    assert obj["exit_code"] == r.exit_code
    return obj


def test_parser_usage_error_exits_64_with_a_json_object(project: Project, cli) -> None:
    r = cli("tabulate", project.data, "--spec", project.spec, "--bogus", "--json")
    assert r.exit_code == 64
    obj = _error(r)
    assert obj["error"] == "usage" and "--bogus" in obj["message"] and not obj["charged"]
    r = cli("tabulate", project.data, "--spec", project.spec, "--bogus")
    assert r.exit_code == 64 and r.stdout == ""  # no --json: nothing on stdout


@pytest.mark.parametrize(("case", "code", "kind"), [
    ("spec", 78, "spec"), ("data", 65, "data"), ("no_input", 66, "no_input"),
    ("spec_missing", 66, "no_input"), ("ledger", 76, "ledger"), ("budget", 3, "budget"),
])
def test_each_failure_has_its_code_and_json_kind(project: Project, cli, case: str, code: int,
                                                 kind: str) -> None:
    data, spec, eps = project.data, project.spec, 0.1
    if case == "spec":
        project.write_spec(lambda s: s.update(epsilon=1))  # an unknown top-level key
    elif case == "data":
        data = project.root / "short.parquet"
        __import__("pandas").read_parquet(project.data).drop(columns=["color"]).to_parquet(data)
    elif case == "no_input":
        data = project.root / "absent.parquet"
    elif case == "spec_missing":
        spec = project.root / "absent.yaml"
    elif case == "ledger":
        project.ledger.write_text(project.ledger.read_text().replace('"genesis"', '"genesys"'))
    elif case == "budget":
        eps = 50
    before = project.ledger.read_bytes()
    r = cli("tabulate", data, "--spec", spec, "--out", project.root / "o.csv",
            "--epsilon", eps, "--json")
    assert r.exit_code == code, r.stderr
    obj = _error(r)
    assert obj["error"] == kind and obj["charged"] is False
    assert obj["message"] in r.stderr
    assert project.ledger.read_bytes() == before  # nothing charged


def test_a_usage_error_after_the_charge_never_exits_64(project: Project, cli,
                                                     monkeypatch) -> None:
    """64 promises that nothing was charged: a usage check met only after the reservation (a
    check that ran too late, dpcli's bug) exits 70 with charged: true, its words kept."""
    import dpcli.algorithms.tabulate as algo
    from dpcli.errors import UsageError

    def late(*_args, **_kwargs):
        raise UsageError("--bins: checked too late")

    monkeypatch.setattr(algo, "release", late)  # runs once the run is charged
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", project.root / "o.csv",
            "--json")
    assert r.exit_code == 70, r.stderr
    obj = _error(r)
    assert obj["error"] == "internal" and obj["charged"] is True
    assert "checked too late" in obj["message"] and "charge stays" in obj["message"]
    assert project.run_kinds() == ["reserve", "failed"]


def test_a_failure_after_the_charge_says_charged(project: Project, cli, monkeypatch) -> None:
    """An internal error after the reservation exits 70 and its JSON says charged: true
    (the ledger records the run failed; the charge stays)."""
    import dpcli.algorithms.tabulate as algo

    def broken(*_args, **_kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(algo, "release", broken)  # runs once the run is charged
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", project.root / "o.csv",
            "--json")
    assert r.exit_code == 70
    obj = _error(r)
    message = obj.pop("message")
    assert obj == {"error": "internal", "exit_code": 70, "charged": True}
    from tests.cli.conftest import run_entries

    entries = run_entries(project.ledger)
    assert [e["kind"] for e in entries] == ["reserve", "failed"]
    # the words say it too: a user without --json learns the charge stays
    assert message == ("unexpected RuntimeError; rerun with -v for a traceback — this run's "
                       f"charge stays (ledger run {entries[0]['run_id']}, recorded as failed)")
    assert message in r.stderr


def test_standard_input_is_refused_with_the_reason(project: Project, cli) -> None:
    r = cli("tabulate", "-", "--spec", project.spec, "--out", project.root / "o.csv")
    assert r.exit_code == 64
    assert "reading standard input is not supported because" in r.stderr
    assert project.no_runs()


def test_the_plan_is_summarised_by_mechanism_and_listed_with_verbose(project: Project,
                                                                     cli) -> None:
    args = ("tabulate", project.data, "--spec", project.spec, "--dry-run")
    r = cli(*args)
    assert r.exit_code == 0, r.stderr
    assert "privacy plan for dataset toy (neighbours: replace-one): 4 steps" in r.stderr
    assert "discrete_laplace    4 steps  ε 0.3" in r.stderr and "total ε=0.3" in r.stderr
    assert "calibration" not in r.stderr  # the per-step table only with -v
    r = cli(*args, "-v")
    assert r.exit_code == 0, r.stderr
    assert "calibration" in r.stderr and "counts:color" in r.stderr
