"""``dpcli plan``: the workload table, targets solved by the forecasts, the fit, --write.

The forecast of tabulate here is a stand-in with a known closed form (each cell
a discrete-Laplace count with scale 2·tables/ε), so that the command's own
logic is what is tested; the real forecasts have their own tests
(tests/forecast).
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

import dpcli.forecast as fc_registry
from dpcli.api.plan import Target, round_up, with_epsilons
from dpcli.budget import Budget
from dpcli.errors import UsageError
from dpcli.forecast import MetricForecast, laplace_error, make_forecast
from tests.cli.conftest import Project


def _tables(section: Any) -> int:
    return len(section.columns) + 1


def _forecast(spec: Any, section: Any, n: int, **context: Any) -> Any:
    k = _tables(section)

    def at(e: float) -> dict[str, MetricForecast]:
        return {"cell": laplace_error(2 * k / e, "cell count error"),
                "rate": laplace_error(2 * k / e, "cell rate error", sensitivity_scale=1 / n)}

    return make_forecast("tabulate", float(section.epsilon), n, "closed form", at,
                         headline="cell", target=20.0)


def _plan(spec: Any, section: Any, n: int, **context: Any) -> Any:
    from dpcli.algorithms import tabulate as algo

    return algo.plan(spec.schema, section.columns, Budget(section.epsilon))


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    module = SimpleNamespace(forecast=_forecast, plan=_plan)
    real = fc_registry.module_for
    monkeypatch.setattr(fc_registry, "module_for",
                        lambda c: module if c == "tabulate" else real(c))
    monkeypatch.setattr(fc_registry, "has_forecast", lambda c: c == "tabulate")


def test_plan_lists_each_command_with_forecast_and_fits(project: Project, cli,
                                                        stand_in: None) -> None:
    r = cli("plan", "--spec", project.spec, "--rows", 1000, "-v")
    assert r.exit_code == 0, r.stderr
    assert "tabulate" in r.stdout and "cell count error: typically" in r.stdout
    assert "4 steps" in r.stdout            # class counts + three tables
    assert "step counts:color" in r.stdout or "step " in r.stdout
    assert r.stdout.strip().endswith("fits")
    assert project.no_runs()                # read-only: nothing charged


def test_plan_json_is_a_list_with_the_issue_keys(project: Project, cli, stand_in: None) -> None:
    r = cli("plan", "--spec", project.spec, "--rows", 1000, "--json")
    assert r.exit_code == 0, r.stderr
    items = json.loads(r.stdout)
    assert isinstance(items, list) and [i["command"] for i in items] == ["tabulate"]
    item = items[0]
    assert item["epsilon"] == 0.3
    assert set(item["forecast"]["cell"]) >= {"expected", "interval", "level"}
    assert item["verdict"]["usable"] in (True, False)
    # the closed form: median |Laplace(b)| = b ln 2 with b = 2·4/0.3
    assert item["forecast"]["cell"]["expected"] == pytest.approx(8 / 0.3 * math.log(2))


def test_a_target_is_solved_and_meets_itself(project: Project, cli, stand_in: None) -> None:
    r = cli("plan", "--spec", project.spec, "--rows", 1000, "--json",
            "--target", "tabulate.cell=10")
    assert r.exit_code == 0, r.stderr
    item = json.loads(r.stdout)[0]
    needed = item["targets"][0]["epsilon"]
    # b ln 2 <= 10 with b = 8/ε  ⇔  ε >= 0.8 ln 2 = 0.5545…, rounded up to 2 digits
    assert needed == pytest.approx(0.56)
    assert 8 / needed * math.log(2) <= 10
    assert item["planned_epsilon"] == needed


def test_a_workload_that_does_not_fit_is_reported_not_scaled(project: Project, cli,
                                                             stand_in: None) -> None:
    r = cli("plan", "--spec", project.spec, "--rows", 1000, "--target", "tabulate.cell=1")
    assert r.exit_code == 3
    assert "does NOT fit: short by ε" in r.stdout
    assert "needs ε ≥ 5.6" in r.stdout


def test_plan_is_monotone_in_epsilon(project: Project, cli, stand_in: None) -> None:
    errors = []
    for eps in (0.05, 0.1, 0.3, 0.9):
        project.write_spec(lambda s, e=eps: s["tabulate"].update(epsilon=e))
        r = cli("plan", "--spec", project.spec, "--rows", 1000, "--json")
        assert r.exit_code == 0, r.stderr
        errors.append(json.loads(r.stdout)[0]["forecast"]["cell"]["expected"])
    assert errors == sorted(errors, reverse=True)


def test_write_puts_the_solved_epsilon_into_the_spec(project: Project, cli,
                                                     stand_in: None) -> None:
    r = cli("plan", "--spec", project.spec, "--rows", 1000, "--target", "tabulate.cell=10",
            "--write")
    assert r.exit_code == 0, r.stderr
    assert "+  epsilon: 0.56" in r.stderr      # the diff is shown
    spec = yaml.safe_load(project.spec.read_text())
    assert spec["tabulate"]["epsilon"] == 0.56
    assert spec["budget"]["epsilon"] == 1.0   # nothing else changed


def test_rows_come_from_a_parquet_footer_or_a_csv_count(project: Project, cli,
                                                        stand_in: None) -> None:
    for data in (project.data, project.csv):
        r = cli("plan", "--spec", project.spec, "--data", data, "--json")
        assert r.exit_code == 0, r.stderr
    r = cli("plan", "--spec", project.spec, "--data", project.csv)
    assert "n = 400 records" in r.stdout
    # DATA positional, as every other command takes it; not both ways at once
    r = cli("plan", project.csv, "--spec", project.spec)
    assert r.exit_code == 0 and "n = 400 records" in r.stdout, r.stderr
    r = cli("plan", project.csv, "--spec", project.spec, "--data", project.data)
    assert r.exit_code == 64 and "as DATA or with --data" in r.stderr


@pytest.mark.parametrize("args, words", [
    ((), "--rows N"),
    (("--rows", 10, "--target", "tabulate.cell"), "COMMAND.METRIC=VALUE"),
    (("--rows", 10, "--target", "tabulate.cell=-1"), "positive"),
    (("--rows", 10, "--target", "roc.auc=0.1"), "no 'roc' section"),
    (("--rows", 10, "--target", "tabulate.auc=0.1"), "not 'auc'"),
    (("--rows", 10, "--write"), "give a --target"),
])
def test_bad_requests_are_usage_errors(project: Project, cli, stand_in: None,
                                       args: tuple, words: str) -> None:
    r = cli("plan", "--spec", project.spec, *args)
    assert r.exit_code == 64, r.stderr
    assert words in r.stderr


def test_a_command_that_cannot_run_is_named_and_the_rest_planned(project: Project,
                                                                  cli) -> None:
    """Tester 15: a publish-grid section over a schema with no grid axis made `plan` exit 78
    for the whole workload with a message that did not name publish-grid. Now every other
    command is planned and shown, the broken one is named, and the exit code is its error's."""
    def mutate(spec: dict) -> None:
        spec["schema"]["columns"] = {"age": {"type": "numeric", "bounds": [17, 90]}}
        spec["tabulate"]["columns"] = ["age"]
        spec["publish-grid"] = {"epsilon": 0.5}
    project.write_spec(mutate)
    r = cli("plan", "--spec", project.spec, "--rows", 400)
    assert r.exit_code == 78, r.stderr
    assert "tabulate" in r.stdout and "cannot run as the spec stands: publish-grid" in r.stdout
    assert "error: publish-grid: " in r.stderr and "grid axis" in r.stderr
    r = cli("plan", "--spec", project.spec, "--rows", 400, "--json")
    items = {i["command"]: i for i in json.loads(r.stdout)}
    assert r.exit_code == 78 and items["tabulate"]["forecast"] is not None
    assert "grid axis" in items["publish-grid"]["problem"]
    assert items["tabulate"]["workload"]["cannot_run"] == ["publish-grid"]


def test_target_parse_and_round_up() -> None:
    assert Target.parse("train-nb.accuracy=0.01") == Target("train-nb", "accuracy", 0.01)
    with pytest.raises(UsageError):
        Target.parse("roc=0.1")
    assert round_up(0.4612) == 0.47 and round_up(0.46) == 0.46 and round_up(12.01) == 13


def test_with_epsilons_keeps_comments_and_adds_a_missing_line() -> None:
    text = ("dataset: x\nroc:                # curve\n  epsilon: 1.0    # all of it\n"
            "  counts: laplace\nevaluate:\n  cutoff: 0.5\n")
    new = with_epsilons(text, {"roc": 0.47, "evaluate": 0.2})
    assert "  epsilon: 0.47   # all of it\n" in new
    assert "evaluate:\n  epsilon: 0.2\n  cutoff: 0.5\n" in new
    assert yaml.safe_load(new)["roc"] == {"epsilon": 0.47, "counts": "laplace"}


def test_session_plan_is_the_same_workload(project: Project, stand_in: None) -> None:
    import dpcli

    w = dpcli.Session(project.spec).plan(rows=1000, targets=["tabulate.cell=10"])
    assert w.fits and w.items[0].solved[0].epsilon == pytest.approx(0.56)
    assert w.to_json()[0]["command"] == "tabulate"


def test_without_a_ledger_the_spec_budget_is_what_remains(project: Project, cli,
                                                          stand_in: None) -> None:
    project.ledger.unlink()
    r = cli("plan", "--spec", project.spec, "--rows", 1000)
    assert r.exit_code == 0, r.stderr
    assert "no ledger yet" in r.stdout
    assert not project.ledger.exists()       # plan creates nothing


def test_write_refuses_a_workload_that_does_not_fit_and_a_read_only_spec(
        project: Project, cli, stand_in: None) -> None:
    before = project.spec.read_text()
    r = cli("plan", "--spec", project.spec, "--rows", 1000, "--target", "tabulate.cell=1",
            "--write")
    assert r.exit_code == 3 and "left unchanged" in r.stderr
    assert project.spec.read_text() == before
    project.spec.chmod(0o444)
    try:
        r = cli("plan", "--spec", project.spec, "--rows", 1000, "--target", "tabulate.cell=10",
                "--write")
        assert r.exit_code == 64 and "read-only" in r.stderr
        assert project.spec.read_text() == before
    finally:
        project.spec.chmod(0o644)


def test_write_keeps_the_spec_mode(project: Project, cli, stand_in: None) -> None:
    project.spec.chmod(0o640)
    r = cli("plan", "--spec", project.spec, "--rows", 1000, "--target", "tabulate.cell=10",
            "--write")
    assert r.exit_code == 0, r.stderr
    assert project.spec.stat().st_mode & 0o777 == 0o640


def _tabulate_and_evaluate(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    """A spec with tabulate (its forecast the stub above) and evaluate (its real one)."""
    module = SimpleNamespace(forecast=_forecast, plan=_plan)
    real = fc_registry.module_for
    monkeypatch.setattr(fc_registry, "module_for",
                        lambda c: module if c == "tabulate" else real(c))
    monkeypatch.setattr(fc_registry, "has_forecast", lambda c: c in ("tabulate", "evaluate"))
    project.write_spec(lambda s: s.update(evaluate={"epsilon": 0.2}))


def test_roc_auc_forecast_names_the_signed_error(project: Project, cli) -> None:
    # a lopsided interval of the signed AUC error is not worded as an |error| (a size)
    project.write_spec(lambda s: s.update(roc={"epsilon": 0.1}))
    r = cli("plan", "--spec", project.spec, "--rows", 1000)
    assert r.exit_code == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.strip().startswith("roc"))
    assert "AUC error: typically" in line and "|AUC error|" not in line
    assert "between -" in line or "within ±" in line


def test_roc_and_evaluate_are_forecast_on_the_test_set(project: Project, cli,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """They score a released model on held-out rows: --test-rows / --test-data give their n."""
    _tabulate_and_evaluate(project, monkeypatch)
    r = cli("plan", "--spec", project.spec, "--rows", 1000, "--test-rows", 200, "--json")
    assert r.exit_code == 0, r.stderr
    items = {i["command"]: i for i in json.loads(r.stdout)}
    assert items["tabulate"]["n"] == 1000 and items["evaluate"]["n"] == 200
    wide = items["evaluate"]["forecast"]["accuracy"]["expected"]
    r = cli("plan", "--spec", project.spec, "--rows", 1000, "--test-data", project.data,
            "--json")
    assert {i["command"]: i for i in json.loads(r.stdout)}["evaluate"]["n"] == 400
    r = cli("plan", "--spec", project.spec, "--rows", 1000, "--json")
    same = {i["command"]: i for i in json.loads(r.stdout)}["evaluate"]
    assert same["n"] == 1000 and same["forecast"]["accuracy"]["expected"] < wide
    r = cli("plan", "--spec", project.spec, "--rows", 10, "--test-rows", 5, "--test-data",
            project.data)
    assert r.exit_code == 64 and "not both" in r.stderr


def test_plan_json_items_carry_the_same_workload_total(project: Project, cli,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """--json stays a list, one object per command; each has the same ``workload`` object,
    so a script reads the total and whether it fits from any item."""
    _tabulate_and_evaluate(project, monkeypatch)
    r = cli("plan", "--spec", project.spec, "--rows", 1000, "--json")
    assert r.exit_code == 0, r.stderr
    items = json.loads(r.stdout)
    assert isinstance(items, list) and [i["command"] for i in items] == ["tabulate", "evaluate"]
    w = items[0]["workload"]
    assert all(i["workload"] == w for i in items)
    assert w["planned_epsilon"] == pytest.approx(0.5) == w["spec_epsilon"]
    assert w["remaining"] == pytest.approx(1.0) and w["fits"] is True and w["unmet"] == []
    assert w["ledger"] == str(project.ledger)
    # a target raises tabulate's ε past what is left: the total says so, in every item
    r = cli("plan", "--spec", project.spec, "--rows", 1000, "--json",
            "--target", "tabulate.cell=1")
    assert r.exit_code == 3
    items = json.loads(r.stdout)
    w = items[1]["workload"]
    assert all(i["workload"] == w for i in items)
    assert w["planned_epsilon"] == pytest.approx(5.6 + 0.2) and w["spec_epsilon"] == 0.5
    assert w["fits"] is False and w["unmet"] == []
    # before the first release: no ledger, the spec's budget is what remains
    project.ledger.unlink()
    r = cli("plan", "--spec", project.spec, "--rows", 1000, "--json")
    w = json.loads(r.stdout)[0]["workload"]
    assert w["ledger"] is None and w["remaining"] == pytest.approx(1.0) and w["fits"] is True
