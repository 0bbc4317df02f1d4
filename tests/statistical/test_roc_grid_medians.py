"""Statistical tests: the recursive-median thresholds that ``dpcli roc`` streams.

DESIGN.md rule 4 for :class:`dpcli.algorithms.roc.FineHistogram`'s noisy
median and for the released threshold after rounding to the 2^20 grid and
the midpoint fallback (dpcli/algorithms/roc.py, "One pass, bounded memory").
Each goodness-of-fit assertion passes when p > ALPHA = 1e-4, so a correct
mechanism fails it with probability 1e-4 per assertion (the seeds are fixed,
so the outcome is reproducible). Power checks run the same test against the
closed form with a noise scale 30% off and require p < ALPHA; their expected
p-values are far below that, so they do not fail by chance either.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpcli.algorithms import roc
from dpcli.mechanisms import heavy_tailed_cdf, smooth_beta, smooth_noise_scale

pytestmark = pytest.mark.slow

ALPHA = 1e-4  # per-assertion false-failure rate
DRAWS = 20_000  # KS: the 1e-4 critical distance is 0.016; a 30% Cauchy scale error gives 0.042


def _histogram(cells: int = roc.FINE_BINS) -> roc.FineHistogram:
    rng = np.random.default_rng(401)
    scores = np.concatenate([rng.uniform(0.25, 0.55, 45), rng.uniform(0.0, 1.0, 15)])
    return roc.FineHistogram.of_scores(scores, np.zeros(scores.size, dtype=bool), lower=0.0,
                                       upper=1.0, cells=cells)


def _centre_and_scale(h: roc.FineHistogram, epsilon: float, a: int, b: int) -> tuple[float, float]:
    s = h.smooth_sensitivity(a, b, beta=smooth_beta(epsilon))
    return h.median(a, b), smooth_noise_scale(s, epsilon)


def test_grid_noisy_median_is_the_median_plus_cauchy_noise_of_scale_6s_over_epsilon() -> None:
    h = _histogram()
    epsilon = 0.5
    for a, b in [(0, h.cells), (h.cells // 4, 3 * h.cells // 4)]:
        centre, scale = _centre_and_scale(h, epsilon, a, b)
        assert scale > 0
        rng = np.random.default_rng(402 + a)
        z = np.array([(h.noisy_median(a, b, epsilon=epsilon, rng=rng) - centre) / scale
                      for _ in range(DRAWS)])
        assert stats.kstest(z, lambda x: heavy_tailed_cdf(x, gamma=2.0)).pvalue > ALPHA
        # power: the same test rejects a scale 30% off either way
        for wrong in (1.3, 1 / 1.3):
            p = stats.kstest(z, lambda x, w=wrong: heavy_tailed_cdf(x / w, gamma=2.0)).pvalue
            assert p < ALPHA


def _level_one_probabilities(centre: float, scale: float, cells: int) -> np.ndarray:
    """P(threshold index = j), j = 0..cells, for one level on [0, 1] (module docstring).

    The noisy median m = centre + scale·Z is kept as round(m·cells) = j when
    0 < j < cells, i.e. when m·cells is in [j - 1/2, j + 1/2); every other
    outcome (m outside (0, 1), or rounded onto 0 or cells) gives the
    midpoint ceil(cells/2).
    """
    def cdf(t: np.ndarray) -> np.ndarray:
        return heavy_tailed_cdf((t - centre) / scale, gamma=2.0)

    j = np.arange(1, cells)
    p = np.zeros(cells + 1)
    p[1:cells] = cdf((j + 0.5) / cells) - cdf((j - 0.5) / cells)
    p[(cells + 1) // 2] += 1.0 - p.sum()
    return p


def _chi2_pvalue(observed: np.ndarray, probabilities: np.ndarray) -> float:
    """Chi-square with adjacent outcomes pooled until each cell expects at least 20."""
    expected = probabilities * observed.sum()
    groups, start, total = [], 0, 0.0
    for i, e in enumerate(expected):
        total += e
        if total >= 20:
            groups.append((start, i + 1))
            start, total = i + 1, 0.0
    groups[-1] = (groups[-1][0], expected.size)  # the remainder joins the last cell
    obs = np.array([observed[a:b].sum() for a, b in groups])
    exp = np.array([expected[a:b].sum() for a, b in groups])
    assert exp.min() >= 20 and len(groups) >= 10
    return float(stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


def test_released_threshold_follows_the_stated_grid_distribution() -> None:
    """One level: the grid-rounded noisy median or the midpoint, exactly as documented."""
    cells = 256  # a coarse grid, so that rounding and the fallback both carry mass
    h = _histogram(cells)
    epsilon = 1.0  # the part gets ε/2
    centre, scale = _centre_and_scale(h, epsilon / 2, 0, cells)
    rng = np.random.default_rng(403)
    released = np.array([roc.recursive_median_cells(h, levels=1, epsilon=epsilon, rng=rng)[0]
                         for _ in range(DRAWS)])
    observed = np.bincount(released, minlength=cells + 1)
    expected = _level_one_probabilities(centre, scale, cells)
    assert observed[(cells + 1) // 2] > 100  # the fallback is exercised
    assert _chi2_pvalue(observed, expected) > ALPHA
    for wrong in (1.3, 1 / 1.3):
        assert _chi2_pvalue(observed, _level_one_probabilities(centre, wrong * scale,
                                                               cells)) < ALPHA
