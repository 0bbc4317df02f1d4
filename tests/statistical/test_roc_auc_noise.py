"""The released AUC's noise (dpcli.algorithms.roc_scale), against its closed form.

Each goodness-of-fit assertion passes when p > ALPHA = 1e-4: a correct
mechanism fails it with probability 1e-4 per test (seeds fixed, so the outcome
is reproducible). Power checks run the same test against a scale 30% off and
require p < ALPHA (expected p far below 1e-10 at these sample sizes).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpcli.algorithms import roc, roc_scale
from dpcli.budget import Budget
from dpcli.mechanisms import discrete_laplace_pmf
from tests.statistical.pooled import pooled_chi2

pytestmark = pytest.mark.slow

ALPHA = 1e-4


def _chi2(noise: np.ndarray, scale: float) -> float:
    """p-value of integer ``noise`` against the discrete Laplace of ``scale`` (pooled cells)."""
    k_max = int(np.abs(noise).max()) + 1
    support = np.arange(-k_max - 1, k_max + 2)
    probs = np.asarray(discrete_laplace_pmf(support, scale), dtype=float)
    probs[0] += 0.5 * (1 - probs.sum())    # the tails beyond the observed range
    probs[-1] += 1 - probs.sum()
    observed = np.bincount(noise - support[0], minlength=support.size).astype(float)
    return pooled_chi2(observed, probs)[0]


def _scores(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    positive = np.arange(n) % 3 == 0
    return np.clip(rng.normal(0.5 + 0.2 * positive, 0.2), 0, 1), positive


def test_released_pair_count_noise_is_discrete_laplace_of_scale_2n_minus_2_over_eps() -> None:
    """Through the whole release (private_roc): noisy D − D against Δ/ε_auc, Δ = 2(n − 1)."""
    n, eps = 12, 1.0
    scores, positive = _scores(n, 1)
    config = roc.ROCConfig(k=2)
    plan = roc.plan(config, n, Budget(eps))
    eps_auc = float(plan.step("auc").budget.epsilon)
    d = int(np.sign(scores[positive][:, None] - scores[~positive][None, :]).sum())
    rng = np.random.default_rng(20)
    noise = np.array([roc.private_roc(scores, positive, lower=0, upper=1, config=config,
                                      run_plan=plan, rng=rng)[0].auc_release.pairs - d
                      for _ in range(20_000)])
    scale = 2 * (n - 1) / eps_auc
    assert _chi2(noise, scale) > ALPHA
    assert _chi2(noise, 1.3 * scale) < ALPHA  # power: a scale 30% off is rejected
    assert _chi2(noise, scale / 1.3) < ALPHA
    # the stated expected error is the mean |noise| / (2 n1 n0)
    assert np.abs(noise).mean() == pytest.approx(roc_scale.abs_noise_mean(scale), rel=0.05)


def test_release_auc_noise_matches_at_scale_for_many_draws() -> None:
    """D's noise at 2(n−1)/ε and n1's at 1/ε_n (n1 = 200 of 500: the clip at [1, n−1] is
    never reached at scale 10)."""
    n, eps = 500, 3.0
    rng = np.random.default_rng(21)
    draws = [roc_scale.release_auc(100, 200, n=n, epsilon=eps, positives_epsilon=0.1, rng=rng)
             for _ in range(50_000)]
    noise = np.array([r.pairs - 100 for r in draws])
    scale = 2 * (n - 1) / eps
    assert _chi2(noise, scale) > ALPHA
    assert _chi2(noise, 1.3 * scale) < ALPHA
    n1 = np.array([r.positives - 200 for r in draws])
    assert _chi2(n1, 10.0) > ALPHA
    assert _chi2(n1, 13.0) < ALPHA


def test_constant_scores_give_an_unbiased_half() -> None:
    """A constant-score model (true AUC ½): the released AUC is symmetric about ½.

    Sign test (runs above ½ vs below, Binomial(·, ½)) and a t-test of the mean,
    each two-sided at ALPHA. The old trapezoid AUC on the same data (auc_share 0)
    is biased, which shows the tests' power.
    """
    n, runs = 200, 3000
    scores = np.full(n, 0.05)
    positive = np.arange(n) % 4 == 0
    rng = np.random.default_rng(22)

    def aucs(config: roc.ROCConfig, eps: float) -> np.ndarray:
        plan = roc.plan(config, n, Budget(eps))
        return np.array([roc.private_roc(scores, positive, lower=0, upper=1, config=config,
                                         run_plan=plan, rng=rng)[0].auc for _ in range(runs)])

    for eps in (0.1, 1.0):
        out = aucs(roc.ROCConfig(), eps)
        above, below = int((out > 0.5).sum()), int((out < 0.5).sum())
        assert stats.binomtest(above, above + below, 0.5).pvalue > ALPHA
        assert stats.ttest_1samp(out, 0.5).pvalue > ALPHA
    old = aucs(roc.ROCConfig(auc_share=0), 1.0)
    assert stats.ttest_1samp(old, 0.5).pvalue < ALPHA and old.mean() > 0.5


def test_expected_error_formula_against_the_mean_absolute_auc_error() -> None:
    n, eps = 400, 0.5
    scores, positive = _scores(n, 3)
    config = roc.ROCConfig()
    plan = roc.plan(config, n, Budget(eps))
    true = roc.true_roc(scores, positive).auc
    rng = np.random.default_rng(23)
    curves = [roc.private_roc(scores, positive, lower=0, upper=1, config=config, run_plan=plan,
                              rng=rng)[0] for _ in range(4000)]
    err = np.array([c.auc_release.unclipped - true for c in curves])
    stated = np.array([c.auc_error for c in curves])
    pairs_only = np.array([roc_scale.expected_error(n, float(plan.step("auc").budget.epsilon),
                                                    c.auc_release.positives,
                                                    n - c.auc_release.positives)
                           for c in curves])
    # the stated error takes |AUC − ½| at its bound ½, so it is an upper estimate, and the
    # noise on D alone is a lower one (4,000 runs: the mean |error| has a relative standard
    # error of about 1.5%, so the 10% margins are many deviations away)
    assert 0.9 * pairs_only.mean() < np.abs(err).mean() < 1.1 * stated.mean()
    assert abs(err.mean()) < 5 * err.std() / math.sqrt(err.size)
