"""What the mechanisms are handed equals the plan, for the spending commands whose plan maps
onto mechanism calls directly (train-nb, train-brc and validate have their own such tests in
their modules). Each mechanism a command's algorithm calls is wrapped to record the ε it is
given, and the run goes through the real CLI; the recorded ε must add up to the plan's total
recorded in the ledger, step by step where one step is one call."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from tests.cli.conftest import Project

MECHANISMS = ("discrete_laplace_mechanism", "laplace_mechanism", "exponential_mechanism",
              "exponential_top_k", "noisy_prefix_sums", "recursive_median_cells",
              "release_auc")


class Recorder:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, *modules: Any) -> None:
        self.calls: list[tuple[str, float]] = []
        self.depth = 0   # only the outermost call counts (release_auc calls two mechanisms)
        for module in modules:
            for name in MECHANISMS:
                real = getattr(module, name, None)
                if real is not None:
                    monkeypatch.setattr(module, name, self._wrap(name, real))

    def _wrap(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            if self.depth == 0:
                # release_auc spends two steps in one call: the pair count's and the positives'
                eps = float(kwargs["epsilon"]) + float(kwargs.get("positives_epsilon", 0.0))
                self.calls.append((name, eps))
            self.depth += 1
            try:
                return real(*args, **kwargs)
            finally:
                self.depth -= 1
        return recorded

    @property
    def total(self) -> float:
        return sum(eps for _, eps in self.calls)


def _plan(project: Project) -> list[dict]:
    return project.reserves()[-1]["breakdown"]


def _check_total(project: Project, rec: Recorder) -> list[dict]:
    plan = _plan(project)
    assert rec.calls, "no mechanism was called"
    assert math.isclose(rec.total, sum(s["epsilon"] for s in plan), rel_tol=1e-9)
    return plan


def test_tabulate_hands_each_table_its_step(project: Project, cli,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from dpcli.algorithms import tabulate

    rec = Recorder(monkeypatch, tabulate)
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", project.root / "t.csv")
    assert r.exit_code == 0, r.stderr
    plan = _check_total(project, rec)
    assert sorted(eps for _, eps in rec.calls) == pytest.approx(
        sorted(s["epsilon"] for s in plan))
    assert {name for name, _ in rec.calls} == {"discrete_laplace_mechanism"}


def test_evaluate_hands_its_one_step(project: Project, cli,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from dpcli.algorithms import evaluate

    assert cli("train-nb", project.data, "--spec", project.spec, "--out",
               project.root / "m.json", "--epsilon", 0.3).exit_code == 0
    rec = Recorder(monkeypatch, evaluate)
    r = cli("evaluate", project.data, "--spec", project.spec, "--model", project.root / "m.json",
            "--epsilon", 0.2)
    assert r.exit_code == 0, r.stderr
    plan = _check_total(project, rec)
    assert len(plan) == 1 and rec.calls == [("discrete_laplace_mechanism", pytest.approx(0.2))]


def test_select_features_spends_its_plan(project: Project, cli,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from dpcli.algorithms import feature_selection

    project.write_spec(lambda s: s["budget"].update(epsilon=10.0))
    rec = Recorder(monkeypatch, feature_selection)
    r = cli("select-features", project.data, "--spec", project.spec, "--out",
            project.root / "f.json", "--score", "tc", "--method", "topk", "--k", 2,
            "--epsilon", 2.0, "--columns", "words", "--allow-noise")
    assert r.exit_code == 0, r.stderr
    _check_total(project, rec)
    # topk: one call that runs k rounds of the exponential mechanism with ε/k each
    assert [name for name, _ in rec.calls] == ["exponential_top_k"]


def test_publish_grid_spends_its_plan(project: Project, cli,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from dpcli.algorithms import privpfc

    project.write_spec(lambda s: (s["budget"].update(epsilon=10.0),
                                  s.update({"publish-grid": {"epsilon": 1.0}})))
    rec = Recorder(monkeypatch, privpfc)
    r = cli("publish-grid", project.data, "--spec", project.spec, "--out", project.root / "g",
            "--columns", "color,member")
    assert r.exit_code == 0, r.stderr
    plan = _check_total(project, rec)
    assert len(rec.calls) == len(plan)


def test_schema_suggest_spends_its_plan(project: Project, cli,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from dpcli.algorithms import suggest

    def mutate(spec: dict) -> None:
        spec["budget"] = {"epsilon": 100.0, "delta": 1e-5}
        spec["schema"]["columns"]["age"]["bounds"] = "TODO"
        spec["schema"]["columns"]["color"]["categories"] = "TODO"
        del spec["tabulate"]
    project.write_spec(mutate)
    rec = Recorder(monkeypatch, suggest)
    r = cli("schema", "suggest", project.data, "--spec", project.spec, "--epsilon", 6,
            "--out", project.root / "s.yaml")
    assert r.exit_code == 0, r.stderr
    _check_total(project, rec)
    # the bounds step is two quantiles at half its ε each; the categories step one histogram
    assert [name for name, _ in rec.calls].count("exponential_mechanism") == 2


@pytest.mark.parametrize("thresholds", ["fixed-space", "recursive-medians"])
def test_roc_spends_its_plan(project: Project, cli, monkeypatch: pytest.MonkeyPatch,
                             thresholds: str) -> None:
    from dpcli.algorithms import roc, roc_scale

    project.write_spec(lambda s: s["budget"].update(epsilon=10.0))
    assert cli("train-nb", project.data, "--spec", project.spec, "--out",
               project.root / "m.json", "--epsilon", 0.3).exit_code == 0
    rec = Recorder(monkeypatch, roc, roc_scale)
    r = cli("roc", project.data, "--spec", project.spec, "--model", project.root / "m.json",
            "--out", project.root / "roc", "--epsilon", 1.0, "--thresholds", thresholds)
    assert r.exit_code == 0, r.stderr
    plan = _check_total(project, rec)
    names = [name for name, _ in rec.calls]
    assert names.count("noisy_prefix_sums") == 1 and names.count("release_auc") == 1
    assert names.count("recursive_median_cells") == (thresholds == "recursive-medians")
    assert {s["step"] for s in plan} >= {"counts", "auc", "auc_positives"}
