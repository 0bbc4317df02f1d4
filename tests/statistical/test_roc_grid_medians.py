"""Statistical tests: the recursive-median thresholds that ``dpcli roc`` streams.

docs/design.md rule 4 for :class:`dpcli.algorithms.roc.FineHistogram`'s noisy
median (a grid index: the median cell plus discrete heavy-tailed noise) and
for the released threshold after the midpoint fallback
(dpcli/algorithms/roc.py, "One pass, bounded memory").
Each goodness-of-fit assertion passes when p > ALPHA = 1e-4, so a correct
mechanism fails it with probability 1e-4 per assertion (the seeds are fixed,
so the outcome is reproducible). Power checks run the same test against the
closed form with a noise scale 30% off and require p < ALPHA; their expected
p-values are far below that, so they do not fail by chance either.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpcli.algorithms import roc
from dpcli.mechanisms import smooth_beta, smooth_noise_scale
from dpcli.mechanisms.smooth import discrete_heavy_tailed_pmf
from tests.statistical.pooled import pooled_chi2

pytestmark = pytest.mark.slow

ALPHA = 1e-4  # per-assertion false-failure rate
DRAWS = 20_000  # chi-square over cells expecting >= 20 draws each


def _histogram(cells: int = roc.FINE_BINS) -> roc.FineHistogram:
    rng = np.random.default_rng(401)
    scores = np.concatenate([rng.uniform(0.25, 0.55, 45), rng.uniform(0.0, 1.0, 15)])
    return roc.FineHistogram.of_scores(scores, np.zeros(scores.size, dtype=bool), lower=0.0,
                                       upper=1.0, cells=cells)


def _centre_and_scale(h: roc.FineHistogram, epsilon: float, a: int, b: int) -> tuple[int, float]:
    """The part's median cell and the noise scale t = 6·S/ε in cells (Cauchy-tailed, γ = 2)."""
    s = h.smooth_sensitivity(a, b, beta=smooth_beta(epsilon))
    return h.median_cell(a, b), smooth_noise_scale(s, epsilon)


def _noise_probabilities(scale: float, reach: int) -> np.ndarray:
    """P(K = k) for k = -reach..reach, then the two tails beyond (symmetric), in that order."""
    inner = discrete_heavy_tailed_pmf(np.arange(-reach, reach + 1), gamma=2.0, scale=scale)
    tail = (1.0 - inner.sum()) / 2
    return np.concatenate([[tail], inner, [tail]])


def test_grid_noisy_median_is_the_median_cell_plus_discrete_heavy_tailed_noise() -> None:
    """K = released index - median cell has P(K = k) ∝ 1/(1 + (k/t)²), t = 6·S/ε cells."""
    h = _histogram(4096)
    epsilon = 0.5
    for a, b in [(0, h.cells), (h.cells // 4, 3 * h.cells // 4)]:
        centre, scale = _centre_and_scale(h, epsilon, a, b)
        assert scale > 1
        rng = np.random.default_rng(402 + a)
        noise = np.array([h.noisy_median(a, b, epsilon=epsilon, rng=rng) - centre
                          for _ in range(DRAWS)])
        reach = int(20 * scale)
        observed = np.bincount(np.clip(noise, -reach - 1, reach + 1) + reach + 1,
                               minlength=2 * reach + 3)
        assert _chi2_pvalue(observed, _noise_probabilities(scale, reach)) > ALPHA
        # power: the same test rejects a scale 30% off either way
        for wrong in (1.3, 1 / 1.3):
            assert _chi2_pvalue(observed, _noise_probabilities(wrong * scale, reach)) < ALPHA


def _level_one_probabilities(centre: int, scale: float, cells: int) -> np.ndarray:
    """P(threshold index = j), j = 0..cells, for one level on [0, 1] (module docstring).

    The released index centre + K is kept when 0 < j < cells; every other
    outcome gives the midpoint ceil(cells/2).
    """
    j = np.arange(1, cells)
    p = np.zeros(cells + 1)
    p[1:cells] = discrete_heavy_tailed_pmf(j - centre, gamma=2.0, scale=scale)
    p[(cells + 1) // 2] += 1.0 - p.sum()
    return p


def _chi2_pvalue(observed: np.ndarray, probabilities: np.ndarray) -> float:
    """Chi-square with adjacent outcomes pooled until each cell expects at least 20."""
    pvalue, cells = pooled_chi2(observed, probabilities)
    assert cells >= 10
    return pvalue


def test_released_threshold_follows_the_stated_grid_distribution() -> None:
    """One level: the released grid index or the midpoint, exactly as documented."""
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
