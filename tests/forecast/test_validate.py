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
from dpcli.mechanisms import exponential_mechanism, noisy_max_exponential, objective_perturbation
from dpcli.spec import ValidateSection, load_spec
from tests.forecast.adult_project import CONFIGS, adult_project, dry_run_breakdown

Z = 3.9


@pytest.fixture(scope="module")
def spec():
    return load_spec(CONFIGS / "adult.yaml")


def _within(rate: float, p: float, trials: int) -> bool:
    return abs(rate - p) <= Z * math.sqrt(p * (1 - p) / trials)


def test_class_cut_forecast_is_the_exponential_mechanisms_worst_case(spec) -> None:
    """On the worst utility landscape for the exponential mechanism (one best candidate, the
    4,095 others all a gap g below, known truth) the real mechanism loses g with probability
    (K−1)e^(−εg/2)/(1 + (K−1)e^(−εg/2)): 1/3 at the forecast's median (β = ½) and 1/11 at its
    bound (β = 0.1). The forecast is this worst case: an upper bound elsewhere."""
    n = 5000
    f = forecast("validate", spec, spec.sections["validate"], n)
    planned = vf._planned(spec, spec.sections["validate"], n, None, None)
    eps_em = float(planned.decision.epsilon_threshold) * float(tuning.CUT_PART)
    k = tuning.THRESHOLD_CANDIDATES
    metric = f.metrics["threshold"]
    rng = np.random.default_rng(3)
    trials = 3000
    for loss, p in ((metric.expected, 1 / 3), (-metric.interval[0], 1 / 11)):
        gap = loss * planned.n_all
        utility = np.full(k, -gap)
        utility[0] = 0.0
        picks = np.array([exponential_mechanism(utility, sensitivity=1.0, epsilon=eps_em,
                                                rng=rng) for _ in range(trials)])
        theory = (k - 1) * math.exp(-eps_em * gap / 2)
        assert theory / (1 + theory) == pytest.approx(p, rel=0.01)
        assert _within(float(np.mean(picks != 0)), p, trials)


def test_class_cut_on_a_real_landscape_stays_within_the_bound(spec) -> None:
    """The real threshold_index on synthetic logits (known labels): the utility lost, as a
    share of the rows, is below the forecast's 90 % bound in at least 90 % of the draws."""
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


def test_verdict_follows_the_commands_warning(spec) -> None:
    """Usable exactly when the command does not warn that the cut may be far from the best
    (its 95 % bound above 10 % of N)."""
    section = spec.sections["validate"]
    for n in (100, 300, 1000, 3000, 30_000):
        f = forecast("validate", spec, section, n)
        planned = vf._planned(spec, section, n, None, None)
        warns = tuning.threshold_error(planned.n_all, float(planned.decision.epsilon_threshold)
                                       ) > tuning.FORECAST_WARNING
        assert f.verdict.usable == (not warns), n
    small = forecast("validate", spec, section, 100)
    assert small.verdict.epsilon_usable is not None
    assert forecast("validate", spec, replace(section, epsilon=small.verdict.epsilon_usable),
                    100).verdict.usable


def test_plan_equals_the_dry_run(tmp_path: Path) -> None:
    spec_path, data, spec = adult_project(tmp_path)
    section = spec.sections["validate"]
    assert vf.plan(spec, section, 2000).to_json() == dry_run_breakdown("validate", spec_path,
                                                                       data)
    f = forecast("validate", spec, section, 2000)   # no context
    assert f.n == 2000 and f.extra["n_train"] + f.extra["n_validation"] == 2000
