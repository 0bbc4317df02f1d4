"""dpcli.Session: the CLI's commands as methods, with the CLI's checks and ledger entries."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

import dpcli
from dpcli.algorithms.naive_bayes import NaiveBayesModel
from dpcli.api.report import DpcliWarning
from dpcli.api.spend import DryRun
from dpcli.budget import Budget
from dpcli.errors import BudgetExhausted, UsageError
from tests.cli.conftest import Project, run_entries


def test_train_nb_returns_the_model_charges_once_and_writes_nothing(project: Project) -> None:
    before = set(project.root.iterdir())
    session = dpcli.Session(project.spec)
    assert session.spent() == Budget(0)
    model = session.train_nb(project.data, epsilon=0.5)
    assert isinstance(model, NaiveBayesModel)
    assert set(project.root.iterdir()) == before       # no output file unless asked
    assert session.spent() == Budget(0.5)
    assert session.remaining() == Budget(19.5)
    kinds = [e["kind"] for e in run_entries(project.ledger)]
    assert kinds == ["reserve", "complete"]
    released = session.releases[-1]
    assert released.envelope["ledger_run_id"] == released.run_id
    assert released.envelope["epsilon"] == 0.5
    assert released.payload["breakdown"] == released.plan.to_json()


def test_the_ledger_entry_has_the_cli_s_shape(project: Project, cli) -> None:
    r = cli("train-nb", project.data, "--spec", project.spec, "--out", project.root / "m.json",
            "--epsilon", 0.5)
    assert r.exit_code == 0, r.stderr
    dpcli.Session(project.spec).train_nb(project.data, epsilon=0.5,
                                         out=project.root / "api.json")
    by_cli, by_api = project.reserves()
    assert set(by_cli) == set(by_api)
    for key in ("command", "spec_digest", "input_digest", "epsilon", "delta", "breakdown"):
        assert by_cli[key] == by_api[key], key
    cli_args, api_args = dict(by_cli["arguments"]), dict(by_api["arguments"])
    assert cli_args.pop("out").endswith("m.json") and api_args.pop("out").endswith("api.json")
    assert cli_args == api_args
    assert project.envelope("api.json")["kind"] == "naive_bayes"


def test_a_table_in_memory_is_an_input(project: Project) -> None:
    frame = pd.read_parquet(project.data)
    model = dpcli.Session(project.spec).train_nb(frame, epsilon=0.5)
    assert isinstance(model, NaiveBayesModel)
    reserve = project.reserves()[-1]
    assert reserve["input_file"].endswith("table.parquet")   # the private temporary copy


def test_dry_run_returns_the_plan_and_charges_nothing(project: Project) -> None:
    dry = dpcli.Session(project.spec).train_nb(project.data, epsilon=0.5, dry_run=True)
    assert isinstance(dry, DryRun)
    assert dry.fits and dry.plan.total == Budget(0.5)
    assert project.no_runs()


def test_the_cli_s_errors_come_as_exceptions_before_any_charge(project: Project) -> None:
    session = dpcli.Session(project.spec)
    with pytest.raises(UsageError, match="'height' is not declared"):
        session.train_nb(project.data, epsilon=0.5, columns=["age", "height"])
    with pytest.raises(BudgetExhausted):
        session.train_nb(project.data, epsilon=25)
    assert project.no_runs()


def test_a_seeded_run_warns_as_a_python_warning(project: Project) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dpcli.Session(project.spec).train_nb(project.data, epsilon=0.5, seed=3)
    assert any(issubclass(w.category, DpcliWarning) and "--seed" in str(w.message)
               for w in caught)


def test_roc_of_a_model_the_session_released(project: Project, tmp_path) -> None:
    session = dpcli.Session(project.spec)
    model = session.train_nb(project.data, epsilon=0.5)
    curve = session.roc(project.data, model=model, epsilon=1.0)
    assert 0 <= curve.auc <= 1
    released = session.releases[-1]
    assert released.kind == "roc_curve"
    assert released.payload["model_run_id"] == session.releases[0].run_id
    assert session.spent() == Budget(1.5)
    out = tmp_path / "roc"
    session.roc(project.data, model=model, epsilon=0.5, out=out)
    assert sorted(p.name for p in out.iterdir()) == ["curve.csv", "curve.json", "curve.png"]
    with pytest.raises(UsageError, match="model: give a model"):
        session.roc(project.data, model=object(), epsilon=0.5)


def test_every_spending_command_is_a_method_with_the_cli_s_ledger_entry(project: Project) -> None:
    session = dpcli.Session(project.spec)
    model = session.train_nb(project.data, epsilon=0.5)
    rows = session.tabulate(project.data, epsilon=0.5, columns=["color", "member"])
    assert {r["table"] for r in rows} == {"label", "color", "member"}
    evaluation = session.evaluate(project.data, model=model, epsilon=0.5)
    assert 0 <= evaluation.accuracy <= 1
    selection = session.select_features(project.data, epsilon=2.0, score="tc", method="topk",
                                        k=2, columns=["words"], allow_noise=True)
    assert len(selection.selected) == 2
    grid = session.publish_grid(project.data, epsilon=1.0, columns=["color", "member"])
    assert grid.schema.label.column == "label"
    commands = [e["command"] for e in project.reserves()]
    assert commands == ["train-nb", "tabulate", "evaluate", "select-features", "publish-grid"]
    assert [r.kind for r in session.releases] == [
        "naive_bayes", "tabulate", "evaluation", "feature_selection", "grid_synopsis"]
    assert session.spent() == Budget(4.5)
