"""Private domain suggestions (dpcli.algorithms.suggest): sensitivities over replace-one
neighbours, and the distribution of each release against its closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpcli.algorithms import suggest as algo
from dpcli.mechanisms.exponential import exponential_probabilities
from tests.statistical.pooled import pooled_chi2

ALPHA = 1e-4   # every distributional test below fails a correct implementation this rarely


def _neighbour(values: np.ndarray, rng: np.random.Generator, pool: np.ndarray) -> np.ndarray:
    other = values.copy()
    other[rng.integers(values.size)] = rng.choice(pool)
    return other


def test_counts_at_or_below_move_by_at_most_one_between_neighbours() -> None:
    rng = np.random.default_rng(0)
    grid = algo.candidates()
    pool = np.concatenate([grid, grid + 0.3, [np.nan, -1e12, 1e12]])   # ties, gaps, extremes
    for _ in range(300):
        x = rng.choice(pool, size=int(rng.integers(1, 30)))
        y = _neighbour(x, rng, pool)
        change = np.abs(algo.count_at_or_below(x, grid) - algo.count_at_or_below(y, grid))
        assert change.max() <= algo.QUANTILE_SENSITIVITY


def test_value_counts_have_l1_sensitivity_two_and_new_keys_hold_one_record() -> None:
    rng = np.random.default_rng(1)
    pool = np.array(["a", "b", "c", "d", "e", None], dtype=object)
    for _ in range(300):
        x = rng.choice(pool, size=int(rng.integers(1, 12)))
        y = _neighbour(x, rng, pool)
        cx: dict[str, int] = {}
        cy: dict[str, int] = {}
        algo.add_counts(cx, x.tolist())
        algo.add_counts(cy, y.tolist())
        keys = set(cx) | set(cy)
        assert sum(abs(cx.get(k, 0) - cy.get(k, 0)) for k in keys) <= algo.HISTOGRAM_SENSITIVITY
        only = (set(cx) ^ set(cy))
        assert len(only) <= 2
        assert all(cx.get(k, 0) + cy.get(k, 0) == 1 for k in only)


def test_the_quantile_follows_the_exponential_mechanism() -> None:
    """Frequencies of the released index against the closed-form probabilities (with the
    data-independent tie-break): pooled χ², α = 1e-4."""
    grid = algo.candidates()
    x = np.random.default_rng(2).normal(40, 12, 400)
    below = algo.count_at_or_below(x, grid)
    eps = 0.05
    rng = np.random.default_rng(3)
    draws = np.array([algo.private_quantile(below, 400, 0.995, eps, rng, prefer=-1)
                      for _ in range(20_000)])
    j = np.arange(grid.size)
    w = algo.tie_break(400, eps, grid.size)          # min(2/ε, n/(2K)): here n/(2K)
    assert w == pytest.approx(400 / (2 * grid.size))
    p = exponential_probabilities(-np.abs(below - 0.995 * 400) - w * j,
                                  sensitivity=1, epsilon=eps)
    pvalue, _ = pooled_chi2(np.bincount(draws, minlength=grid.size), p)
    assert pvalue > ALPHA


def test_bounds_hold_the_data_when_the_noise_is_small() -> None:
    """Fixed seed. At a large ε the data term decides between the data's side and beyond it;
    among the candidates beyond (all tied), the tie-break favours the nearest, e^-1 per step:
    the two-digit numbers just outside [17, 90] come first."""
    x = np.random.default_rng(4).uniform(17, 90, 5000)
    below = algo.count_at_or_below(x, algo.candidates())
    rng = np.random.default_rng(5)
    drawn = [algo.private_bounds(below, 5000, 50.0, rng) for _ in range(20)]
    assert all(lo <= 17 and hi >= 90 for lo, hi in drawn)          # nothing cut off
    assert all(lo >= -1 and hi <= 10_000 for lo, hi in drawn)
    assert sum(lo == 17 and hi == 90 for lo, hi in drawn) >= 5      # the tightest, most often


def test_a_column_far_from_zero_gets_bounds_near_its_values() -> None:
    """Fixed seed. A year 2003–2009 got [1000, 5000] from the grid of 1, 2, 5 per decade (a
    clamp range 700 times the data's); two significant digits hold it within a few hundred."""
    x = np.random.default_rng(8).uniform(2003, 2009, 5000)
    below = algo.count_at_or_below(x, algo.candidates())
    rng = np.random.default_rng(9)
    drawn = [algo.private_bounds(below, 5000, 50.0, rng) for _ in range(20)]
    assert all(lo <= 2003 and hi >= 2009 for lo, hi in drawn)
    assert all(lo >= 1500 and hi <= 2500 for lo, hi in drawn)
    assert sum(lo == 2000 and hi == 2100 for lo, hi in drawn) >= 5


def test_the_grid_prints_as_round_numbers() -> None:
    grid = algo.candidates()
    assert grid.size == 1981 and 0.11 in grid and 2100.0 in grid and 9.9e9 in grid
    assert all(float(format(c, ".2g")) == c for c in grid)          # two digits, exactly


def test_small_files_keep_the_round_numbers() -> None:
    """The two-digit grid only where it resolves the full coverage (its ln K is larger): a
    column at n·ε below that is suggested among the 67 numbers 0, ±{1, 2, 5}·10^k as before."""
    coarse = algo.candidates()[algo.grid_mask(400, 2.0)]
    assert coarse.size == 67 and {0.1, 2.0, 5e9} <= set(coarse.tolist()) and 1.1 not in coarse
    assert not algo.fine_grid(4000, 2.0) and algo.fine_grid(5000, 2.0)
    assert algo.bounds_tail(5000, 2.0) == pytest.approx((1 - algo.COVERAGE) / 2)
    x = np.random.default_rng(10).uniform(2003, 2009, 400)
    below = algo.count_at_or_below(x, algo.candidates())
    lo, hi = algo.private_bounds(below, 400, 2.0, np.random.default_rng(11))
    assert lo in coarse and hi in coarse and lo <= 2003 and hi >= 2009


def test_the_threshold_is_the_least_that_keeps_a_lone_value_below_delta() -> None:
    for eps, delta in [(0.1, 1e-6), (1.0, 1e-5), (2.0, 0.2), (0.01, 1e-9)]:
        tau = algo.threshold(eps, delta)
        t = math.exp(-eps / 2)           # P(Z ≥ k) = t^k / (1 + t) for k ≥ 0
        assert t ** (tau - 1) / (1 + t) <= delta / 2 * (1 + 1e-12)
        assert tau == 1 or t ** (tau - 2) / (1 + t) > delta / 2


def test_a_value_held_by_one_record_is_released_at_most_delta_over_two() -> None:
    """Binomial test of P(release) for a count-1 value against δ/2 (one-sided, α = 1e-4);
    and a frequent value is always released."""
    eps, delta, trials = 1.0, 0.2, 20_000
    rng = np.random.default_rng(6)
    released = sum("lone" in algo.frequent_values({"lone": 1, "big": 500}, eps, delta, rng)
                   for _ in range(trials))
    assert stats.binomtest(released, trials, delta / 2, alternative="greater").pvalue > ALPHA
    assert algo.frequent_values({"big": 500}, eps, delta, rng) == ["big"]


def test_the_tie_break_never_outweighs_the_data() -> None:
    """At n = 2,100 and the smallest ε the coverage rule accepts, the upper bound's chance of
    a candidate below every value (the uncapped 2/ε tie-break made it all but certain, at
    −5·10⁹) is below 1e-6, from the closed-form probabilities."""
    grid = algo.candidates()
    x = np.random.default_rng(7).uniform(2003, 2009, 2100)
    below = algo.count_at_or_below(x, grid)
    n = 2100
    for eps_column in (algo.bounds_epsilon(n, algo.MIN_COVERAGE), 1.0, 10.0):
        tail = algo.bounds_tail(n, eps_column)
        assert tail is not None
        j = np.arange(grid.size)
        w = algo.tie_break(n, eps_column / 2, grid.size)
        assert w * grid.size <= n / 2
        p = exponential_probabilities(-np.abs(below - (1 - tail) * n) - w * j,
                                      sensitivity=1, epsilon=eps_column / 2)
        assert p[grid < 2003].sum() < 1e-6


def test_the_coverage_is_a_rule_of_n_and_epsilon() -> None:
    assert algo.bounds_tail(100_000, 1.0) == pytest.approx((1 - algo.COVERAGE) / 2)
    mid = algo.bounds_tail(2100, 0.5)
    assert mid is not None and 0.005 < mid <= 0.05
    assert algo.bounds_tail(2100, 0.05) is None          # the transcript's 0.5 over 10 columns
    need = algo.bounds_epsilon(2100, algo.MIN_COVERAGE)
    assert algo.bounds_tail(2100, need * 1.0001) is not None
    assert algo.bounds_tail(2100, need * 0.99) is None
    assert algo.bounds_tail(2100, algo.bounds_epsilon(2100)) == pytest.approx(0.005)
