"""validate's forecast against the real mechanisms (class cut, λ selection, perturbation),
its shape in ε, its plan.

Distribution tests wrongly fail with probability at most α = 1e-4 each (binomial
tolerances at z = 3.9, KS at p = 1e-4).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from dpcli.algorithms import validate as tuning
from dpcli.forecast import forecast
from dpcli.forecast import validate as vf
from dpcli.mechanisms import noisy_max_exponential, objective_perturbation
from dpcli.spec import ValidateSection, load_spec
from tests.forecast.adult_project import CONFIGS, adult_project, dry_run_breakdown

Z = 3.9


@pytest.fixture(scope="module")
def spec():
    return load_spec(CONFIGS / "adult.yaml")


def _within(rate: float, p: float, trials: int) -> bool:
    return abs(rate - p) <= Z * math.sqrt(p * (1 - p) / trials)


def test_class_cut_forecast_matches_the_mechanism_on_its_reference(spec) -> None:
    """The real threshold_index on the forecast's reference landscape (known truth: its
    logits, labels, candidates and weights): the loss is at most the forecast's median in
    about half the draws and at most its 90 % bound in about 90 % (the loss is discrete, so
    P(loss ≤ median) ≥ ½ ≥ P(loss < median)); binomial tolerance at z = 3.9."""
    for n in (800, 5000):
        f = forecast("validate", spec, spec.sections["validate"], n)
        planned = vf._planned(spec, spec.sections["validate"], n, None, None)
        eps_em = float(planned.decision.epsilon_threshold) * float(tuning.CUT_PART)
        logits, y, cands, weights = vf.reference(planned.n_all)
        utility = tuning.threshold_utility(logits, y, cands, weights)
        rng = np.random.default_rng(3)
        trials = 3000
        losses = np.array([(utility.max() - utility[tuning.threshold_index(
            logits, y, cands, weights, eps_em, rng)]) / planned.n_all for _ in range(trials)])
        metric = f.metrics["threshold"]
        tol = 1e-12
        for q, value in ((0.5, metric.expected), (0.9, -metric.interval[0])):
            at_most = float(np.mean(losses <= value + tol))
            below = float(np.mean(losses < value - tol))
            slack = Z * math.sqrt(q * (1 - q) / trials)
            assert at_most >= q - slack and below <= q + slack, (n, q, at_most, below)
        assert metric.interval[1] == 0.0


def test_class_cut_forecast_is_below_the_worst_case(spec) -> None:
    """The reference loses less than the mechanism's worst case over landscapes (one best
    cut, every other a gap below), which the forecast once was: 2(ln K + ln 2)/(ε_em·N)."""
    for n in (300, 3000, 30_000):
        f = forecast("validate", spec, spec.sections["validate"], n)
        planned = vf._planned(spec, spec.sections["validate"], n, None, None)
        eps_em = float(planned.decision.epsilon_threshold) * float(tuning.CUT_PART)
        worst = vf.worst_case_loss(0.5) / (eps_em * planned.n_all)
        assert 0 < f.metrics["threshold"].expected <= worst


def test_class_cut_on_another_landscape_stays_within_the_bound(spec) -> None:
    """The real threshold_index on other synthetic logits (30 % positives, accuracy weights,
    candidates on the rows' range: known labels): the utility lost, as a share of the rows,
    is below the forecast's 90 % bound in at least 90 % of the draws."""
    n = 3000
    f = forecast("validate", spec, spec.sections["validate"], n)
    planned = vf._planned(spec, spec.sections["validate"], n, None, None)
    eps_em = float(planned.decision.epsilon_threshold) * float(tuning.CUT_PART)
    rng = np.random.default_rng(4)
    y = np.where(rng.random(n) < 0.3, 1, -1)
    logits = y * 1.0 + rng.normal(0, 1.5, n)
    cands = np.linspace(logits.min(), logits.max(), tuning.THRESHOLD_CANDIDATES)
    utility = tuning.threshold_utility(logits, y, cands, (1.0, 1.0))
    trials = 1000
    losses = np.array([(utility.max() - utility[tuning.threshold_index(
        logits, y, cands, (1.0, 1.0), eps_em, rng)]) / n for _ in range(trials)])
    inside = float(np.mean(losses <= -f.metrics["threshold"].interval[0]))
    assert inside >= 0.9 - Z * math.sqrt(0.09 / trials)


def test_selection_forecast_matches_noisy_max(spec) -> None:
    """λ searched (stability): two validation scores a forecast median apart (in score
    units) are swapped by the real noisy max with probability ½·e^(−ln 2) = 1/4."""
    n = 200_000
    section = replace(spec.sections["validate"], lam="search")
    f = forecast("validate", spec, section, n)
    planned = vf._planned(spec, section, n, None, None)
    assert planned.decision.mode == "select"
    eps2 = float(planned.decision.epsilon_model) / 2
    c = tuning.stability_constants(planned.config, planned.n, planned.m, planned.d, eps2)
    gap = f.metrics["selection"].expected * c.beta2
    rng = np.random.default_rng(8)
    trials = 6000
    swapped = np.mean([noisy_max_exponential(np.array([gap, 0.0]), sensitivity=c.beta,
                                             epsilon=eps2, rng=rng) == 1
                       for _ in range(trials)])
    assert _within(float(swapped), 0.25, trials)
    # no search (λ0): no selection noise
    auto = forecast("validate", spec, spec.sections["validate"], 3000)
    assert auto.extra["lambda_rule"] == "auto" and auto.metrics["selection"].expected == 0


def test_margin_forecast_matches_objective_perturbation(spec) -> None:
    """A fixed λ large next to the logistic loss's curvature (≤ ¼): the real objective
    perturbation moves a unit row's margin by the forecast's distribution (two-sample KS,
    p ≥ 1e-4; the curvature shrinks the move by at most 1/(1 + ¼/λ) = 1.2 %)."""
    rows, lam = 2000, 20.0
    columns = ("age", "education_num", "hours_per_week")
    section = ValidateSection(epsilon=1.0, lam=lam, columns=columns)
    planned = vf._planned(spec, section, rows, columns, None)
    assert planned.decision.mode == "given" and planned.d == 4
    n, eps = planned.decision.n_model, float(planned.decision.epsilon_model)
    f = forecast("validate", spec, section, rows, columns=columns)
    rng = np.random.default_rng(9)
    x = rng.normal(size=(n, 4))
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1.0) * 1.01
    y = np.where(x[:, 1] + rng.normal(0, 0.5, n) > 0, 1.0, -1.0)
    exact = objective_perturbation(x, y, lam, eps, standard_noise=np.zeros(4)).weights
    moves = []
    for _ in range(600):
        w = objective_perturbation(x, y, lam, eps, rng).weights
        u = rng.normal(size=4)
        moves.append(float(u @ (w - exact)) / float(np.linalg.norm(u)))
    scale = f.metrics["margin"].expected / float(np.median(np.abs(vf._unit_margins(4))))
    assert sps.ks_2samp(moves, scale * vf._unit_margins(4)).pvalue >= 1e-4
    assert np.median(np.abs(moves)) == pytest.approx(f.metrics["margin"].expected, rel=0.2)


def test_monotone_in_epsilon(spec) -> None:
    section = spec.sections["validate"]
    fs = [forecast("validate", spec, replace(section, epsilon=e), 3000)
          for e in (0.01, 0.05, 0.2, 1.0, 5.0, 50.0)]
    cut = [f.metrics["threshold"].expected for f in fs]
    assert all(a >= b for a, b in itertools.pairwise(cut)) and cut[0] > cut[-1]
    fixed = replace(section, lam=0.01)
    margins = [forecast("validate", spec, replace(fixed, epsilon=e), 3000)
               .metrics["margin"].expected for e in (0.05, 0.2, 1.0, 5.0)]
    assert all(a > b for a, b in itertools.pairwise(margins))


def test_verdict_fires_where_the_reference_is_near_one_class(spec) -> None:
    """Usable exactly when the reference's median loss keeps at least half its edge over
    the better one-class cut; tiny n is not usable, and the ε it names is."""
    section = spec.sections["validate"]
    edge = vf.reference_edge()
    assert 0.02 < edge < 0.5
    for n in (100, 300, 1000, 3000, 30_000):
        f = forecast("validate", spec, section, n)
        assert f.verdict.usable == (f.metrics["threshold"].expected <= vf.EDGE_KEPT * edge), n
    assert forecast("validate", spec, section, 30_000).verdict.usable
    small = forecast("validate", spec, replace(section, epsilon=0.05), 100)
    assert not small.verdict.usable and small.verdict.epsilon_usable is not None
    assert forecast("validate", spec, replace(section, epsilon=small.verdict.epsilon_usable),
                    100).verdict.usable


def test_class_cut_forecast_is_fast(spec) -> None:
    """A forecast runs before every spend: the landscape is drawn once per N (memo keyed on
    public inputs), then each ε is a weighted cumulative sum: the landscape is counted here
    (timings belong to benchmarks/, not to unit tests)."""
    from dpcli.forecast import validate as vf

    section = spec.sections["validate"]
    forecast("validate", spec, section, 30_162)
    drawn = vf._landscape.cache_info().misses
    for e in (0.1, 0.5, 1.0):
        forecast("validate", spec, replace(section, epsilon=e), 30_162)
    assert vf._landscape.cache_info().misses == drawn


def test_plan_equals_the_dry_run(tmp_path: Path) -> None:
    spec_path, data, spec = adult_project(tmp_path)
    section = spec.sections["validate"]
    assert vf.plan(spec, section, 2000).to_json() == dry_run_breakdown("validate", spec_path,
                                                                       data)
    f = forecast("validate", spec, section, 2000)   # no context
    assert f.n == 2000 and f.extra["n_train"] + f.extra["n_validation"] == 2000


def test_the_verdict_says_what_it_leaves_out_on_small_n() -> None:
    """On 184 rows (ISLP Hitters, tester 10) six runs called usable gave test AUCs from 0.54
    to 0.91: the verdict judges the class cut only, and says so below SMALL_N rows."""
    from dpcli.forecast.core import Verdict
    from dpcli.forecast.validate import SMALL_N, _scope

    assert "class cut only" in _scope(184) and "184 training rows" in _scope(184)
    assert _scope(SMALL_N) == ""
    said = Verdict(True, "threshold", 0.1, None, "", _scope(184)).line()
    assert said.startswith("verdict: usable (it judges the class cut only")
    assert Verdict(True, "threshold", 0.1, None).line() == "verdict: usable"
