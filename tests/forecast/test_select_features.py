"""select-features' forecast against the real selection, its monotony, its plan, its verdict.

Distribution tests wrongly fail with probability at most α = 1e-4 each (binomial
tolerances at z = 3.9).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dpcli.algorithms import feature_selection as fs
from dpcli.api.select_features import setup
from dpcli.forecast import forecast
from dpcli.forecast import select_features as fsf
from dpcli.spec import SelectFeaturesSection, load_spec
from tests.forecast.adult_project import CONFIGS, adult_project, dry_run_breakdown

Z = 3.9   # two-sided α = 1e-4


@pytest.fixture(scope="module")
def spec():
    return load_spec(CONFIGS / "adult.yaml")


def _wrong_order_rate(config: fs.FSConfig, m: int, gap: float, eps: float, n: int,
                      trials: int, seed: int) -> float:
    """How often the real selection ranks candidate 1 above candidate 0 when candidate 0's
    exact score is ``gap`` higher (every other candidate far below: known truth)."""
    per, l1 = fs.sensitivity(config.score, m, 1, n)
    scores = np.full(m, -1e12)
    scores[0], scores[1] = gap, 0.0
    rng = np.random.default_rng(seed)
    wrong = 0
    for _ in range(trials):
        chosen, _noisy = fs._by_scores(scores, config, per, l1, eps, rng)
        wrong += int(chosen[0] == 1)
    return wrong / trials


@pytest.mark.parametrize("method,k", [("topk", 8), ("perturb", 3)])
def test_forecast_matches_the_real_selection(spec, method: str, k: int) -> None:
    """At the forecast's median gap the real mechanism orders two candidates wrongly with
    probability 1/4 (|D| > median half the time, one side of it), at its 90 % interval's
    bound with probability 1/20, at the noise check's resolution with probability 1/10."""
    n, eps = 30_000, 0.2
    section = SelectFeaturesSection(epsilon=eps, score="chi2", method=method, k=k)
    f = forecast("select-features", spec, section, n)
    metric = f.metrics["selection"]
    config = fs.FSConfig(score="chi2", method=method, k=k)
    m = f.extra["candidates"]
    trials = 6000
    assert metric.level == 0.9
    for gap, p in ((metric.expected * n, 0.25), (metric.bound * n, 0.05),
                   (f.extra["resolution"] * n, 0.10)):
        rate = _wrong_order_rate(config, m, gap, eps, n, trials, seed=11)
        assert abs(rate - p) <= Z * math.sqrt(p * (1 - p) / trials), (gap, rate, p)


def test_resolution_is_the_noise_check(spec) -> None:
    """The resolution it records is the pre-charge check's, the verdict is its pass and
    the ε the verdict names is the check's needed ε (to the solver's 1 %)."""
    section = spec.sections["select-features"]
    for n in (3_000, 30_000):
        f = forecast("select-features", spec, section, n)
        schema, chosen, config, _ = setup(spec, section)
        check = fs.noise_check(schema, chosen, config, n, section.epsilon)
        assert f.extra["resolution"] * n == pytest.approx(check.resolution, rel=1e-9)
        assert f.verdict.usable == check.passes
        # the verdict names the ε only when not usable; the solver gives it either way
        if not f.verdict.usable:
            assert f.verdict.epsilon_usable == pytest.approx(check.needed_epsilon, rel=0.011)
        assert f.epsilon_for("selection", f.verdict.target) == pytest.approx(
            check.needed_epsilon, rel=0.011)


def test_monotone_in_epsilon_and_in_n(spec) -> None:
    section = spec.sections["select-features"]
    errors = [forecast("select-features", spec, replace(section, epsilon=e), 5_000)
              .metrics["selection"].expected for e in (0.01, 0.05, 0.2, 1.0, 5.0)]
    assert all(a > b for a, b in itertools.pairwise(errors))
    by_n = [forecast("select-features", spec, section, n).metrics["selection"].expected
            for n in (100, 1_000, 10_000)]
    assert all(a > b for a, b in itertools.pairwise(by_n))


def test_total_epsilon_forecasts_the_split_rules_share(spec) -> None:
    section = replace(spec.sections["select-features"], epsilon=1.0)
    whole = forecast("select-features", spec, section, 30_000)
    split = forecast("select-features", spec, section, 30_000, total_epsilon=True)
    assert split.extra["split"]["total"] == 1.0
    share = split.extra["selection_epsilon"]
    assert share < 1.0
    assert split.metrics["selection"].expected == pytest.approx(
        whole.metrics["selection"].expected / share, rel=1e-9)


def test_works_with_no_context(spec) -> None:
    f = forecast("select-features", spec, spec.sections["select-features"], 30_162)
    assert f.verdict.metric == "selection" and f.method == "closed form"
    assert set(f.to_json()["forecast"]) == {"selection"}


def test_plan_equals_the_dry_run(tmp_path: Path) -> None:
    spec_path, data, spec = adult_project(tmp_path)
    section = spec.sections["select-features"]
    shown = dry_run_breakdown("select-features", spec_path, data, "--allow-noise")
    assert fsf.plan(spec, section, 2000).to_json() == shown
    shown = dry_run_breakdown("select-features", spec_path, data, "--allow-noise",
                              "--total-epsilon", 1.0)
    assert fsf.plan(spec, replace(section, epsilon=1.0), 2000,
                    total_epsilon=True).to_json() == shown
