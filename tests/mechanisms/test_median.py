"""The noisy lower median by smooth sensitivity (dpcli/mechanisms/median.py).

The neighbouring relation of this mechanism is ONE INSERTION OR DELETION of a
value in [L, U] (the sample size changes), so every brute force below
enumerates deletions of each element and insertions of every grid value,
including the bounds L and U (the most extreme insertions). Restricting
insertions to the grid can only make the brute-force sensitivities smaller,
so "bound >= brute force" stays a valid check.
"""

from __future__ import annotations

import itertools
import math
from functools import cache

import numpy as np
import pytest
from scipy import stats

from dpcli.mechanisms import (
    heavy_tailed_cdf,
    make_rng,
    smooth_beta,
    smooth_noise_scale,
)
from dpcli.mechanisms.median import (
    lower_median,
    median_sensitivity_at,
    noisy_median,
    smooth_sensitivity_median,
)

L, U = 0.0, 1.0
GRID = (0.0, 0.1, 0.25, 0.5, 0.6, 0.9, 1.0)
MAX_SIZE = 5
TOL = 1e-12
ALPHA = 1e-4  # per-test false-failure rate of the goodness-of-fit assertions

Sample = tuple[float, ...]


# --- brute force, independent of the implementation ----------------------------------


def _median(sample: Sample) -> float:
    """x_(floor((n+1)/2)), and L for the empty sample (pure Python)."""
    m = (len(sample) + 1) // 2
    return L if m == 0 else sample[m - 1]


@cache
def _steps(sample: Sample) -> frozenset[Sample]:
    """Every sample one insertion (of a grid value) or one deletion away."""
    out = {tuple(sorted((*sample, v))) for v in GRID}
    out |= {sample[:i] + sample[i + 1:] for i in range(len(sample))}
    out.discard(sample)
    return frozenset(out)


@cache
def _local(sample: Sample) -> float:
    """LS(y) = max over one-step neighbours y' of |median(y') - median(y)|."""
    here = _median(sample)
    return max(abs(_median(y) - here) for y in _steps(sample))


def _ball(sample: Sample, k: int) -> set[Sample]:
    """All samples within k insertions/deletions (BFS)."""
    seen = {sample}
    frontier = {sample}
    for _ in range(k):
        frontier = {y for x in frontier for y in _steps(x)} - seen
        seen |= frontier
    return seen


def _samples(max_size: int) -> list[Sample]:
    return [s for n in range(max_size + 1)
            for s in itertools.combinations_with_replacement(GRID, n)]


@cache
def _smooth(sample: Sample, beta: float) -> float:
    return smooth_sensitivity_median(np.array(sample), lower=L, upper=U, beta=beta)


# --- the statistic ------------------------------------------------------------------------


@pytest.mark.parametrize(("values", "expected"), [
    ([], L),  # empty sample: the lower bound
    ([0.3], 0.3),  # n = 1
    ([0.2, 0.7], 0.2),  # even n: the lower of the two middle values
    ([0.1, 0.2, 0.9], 0.2),
    ([0.1, 0.2, 0.8, 0.9], 0.2),
    ([0.0, 0.0, 0.0, 1.0, 1.0, 1.0], 0.0),
    ([0.0, 0.0, 1.0, 1.0, 1.0], 1.0),
    ([1.0, 1.0], 1.0),
])
def test_lower_median_known_values(values: list[float], expected: float) -> None:
    result = lower_median(np.array(values), lower=L, upper=U)
    assert result == expected
    assert type(result) is float


def test_lower_median_empty_sample_is_lower_for_other_bounds() -> None:
    assert lower_median(np.array([]), lower=-3.0, upper=7.5) == -3.0
    assert lower_median([2, 5, 7], lower=0, upper=10) == 5.0  # lists and ints


def test_lower_median_matches_the_definition_on_random_samples() -> None:
    rng = make_rng(31)
    for _ in range(200):
        n = int(rng.integers(0, 40))
        x = np.sort(rng.uniform(-2.0, 3.0, n))
        expected = -2.0 if n == 0 else float(np.sort(x)[(n + 1) // 2 - 1])
        assert lower_median(x, lower=-2.0, upper=3.0) == expected


# --- local sensitivity and the distance-k window -----------------------------------------


def test_window_known_values() -> None:
    """n = 5, m = 3: W_0 = x_(4) - x_(2); c_1 = 2, W_1 = x_(4) - x_(1);
    c_2 = 2, W_2 = x_(5) - x_(1); c_3 = 1, W_3 = x_(5) - x_(0) = x_(5) - L;
    c_6 = 0, W_6 = x_(7) - x_(-1) = U - L."""
    x = np.array([0.1, 0.25, 0.5, 0.6, 0.9])
    w = median_sensitivity_at(x, lower=L, upper=U, k=np.array([0, 1, 2, 3, 4, 5, 6]))
    np.testing.assert_allclose(w, [0.6 - 0.25, 0.6 - 0.1, 0.9 - 0.1, 0.9, 1.0, 1.0, 1.0],
                               rtol=0, atol=TOL)
    # empty sample: every window is U - L
    np.testing.assert_array_equal(
        median_sensitivity_at(np.array([]), lower=L, upper=U, k=np.arange(4)), 1.0)


def test_window_bounds_local_sensitivity_within_k_steps() -> None:
    """For every grid sample x of size 0..5 and k = 0, 1, 2:
    W_k(x) >= A(k) = max{LS(y) : y within k insertions/deletions of x}."""
    tight = {0: 0, 1: 0, 2: 0}
    checked = 0
    for sample in _samples(MAX_SIZE):
        x = np.array(sample)
        windows = median_sensitivity_at(x, lower=L, upper=U, k=np.arange(3))
        assert windows[0] >= _local(sample) - TOL, sample
        for k in range(3):
            worst = max(_local(y) for y in _ball(sample, k))
            assert windows[k] >= worst - TOL, (sample, k)
            checked += 1
            tight[k] += bool(worst < U - L and abs(windows[k] - worst) <= TOL)
    assert checked == 3 * len(_samples(MAX_SIZE))
    # not vacuous: a data-dependent bound (below U - L) is attained at every distance
    assert all(count > 0 for count in tight.values()), tight


def test_local_sensitivity_can_be_zero_and_the_window_sees_it() -> None:
    """Five equal values: no sample within two steps has a median that one more step
    can move, and W_0 = W_1 = W_2 = 0 (tight). W_3 = x_(5) - x_(0) = 0.5 is the first
    non-zero window; four steps away (two deletions, two insertions of 0) the median
    can move."""
    sample = (0.5,) * 5
    x = np.array(sample)
    w = median_sensitivity_at(x, lower=L, upper=U, k=np.arange(5))
    np.testing.assert_array_equal(w, [0.0, 0.0, 0.0, 0.5, 1.0])  # W_4 = x_(6) - x_(0)
    for k in range(3):
        assert max(_local(y) for y in _ball(sample, k)) == 0.0
    assert _local((0.0, 0.0, 0.5, 0.5, 0.5)) == 0.5  # insert 0: the median drops to 0
    assert max(_local(y) for y in _ball(sample, 4)) == 0.5


def test_window_is_non_decreasing_and_reaches_the_global_bound() -> None:
    rng = make_rng(3)
    for _ in range(200):
        n = int(rng.integers(0, 60))
        lower, upper = -1.5, 4.0
        x = rng.uniform(lower, upper, n)
        x[rng.random(n) < 0.2] = lower  # ties and values at the bounds
        x[rng.random(n) < 0.2] = upper
        x = np.sort(x)
        k = np.arange(n + 6)
        w = median_sensitivity_at(x, lower=lower, upper=upper, k=k)
        assert np.all(np.diff(w) >= 0), x
        assert np.all((w >= 0) & (w <= upper - lower))
        assert w[n + 1] == upper - lower  # k = n + 1
        assert np.all(w[n + 1:] == upper - lower)


# --- smoothness ---------------------------------------------------------------------------


@pytest.mark.parametrize("beta", [0.1, 0.5])
def test_smooth_bound_is_beta_smooth_over_single_steps(beta: float) -> None:
    """S(x) <= e^β·S(x') for every grid sample x of size 0..5 and every insertion
    (of each grid value) or deletion x'. The relation is symmetric and x' of size
    <= 4 is itself enumerated, so this also checks S(x') <= e^β S(x) for those."""
    factor = math.exp(beta)
    at_limit = 0
    for sample in _samples(MAX_SIZE):
        s = _smooth(sample, beta)
        assert s >= _local(sample) - TOL  # an upper bound on the local sensitivity
        for y in _steps(sample):
            s_y = _smooth(y, beta)
            assert s <= factor * s_y + TOL, (sample, y)
            assert s_y <= factor * s + TOL, (sample, y)
            at_limit += s > factor * s_y * (1 - 1e-9)
    assert at_limit > 0  # the ratio e^β is attained: the check is not slack


def _plain_max(x: np.ndarray, lower: float, upper: float, beta: float) -> float:
    k = np.arange(x.size + 2)
    return float(np.max(np.exp(-beta * k)
                        * median_sensitivity_at(x, lower=lower, upper=upper, k=k)))


@pytest.mark.parametrize("beta", [1e-3, 0.05, 1 / 6, 1.0, 4.0])
def test_early_stopped_maximum_equals_the_plain_maximum(beta: float) -> None:
    rng = make_rng(17)
    for _ in range(30):
        n = int(rng.integers(150, 251))
        lower, upper = -2.0, 10.0
        spread = float(rng.choice([0.01, 0.5, 5.0]))
        x = np.sort(np.clip(rng.normal(3.0, spread, n), lower, upper))
        value = smooth_sensitivity_median(x, lower=lower, upper=upper, beta=beta)
        assert value == _plain_max(x, lower, upper, beta)
        w0 = median_sensitivity_at(x, lower=lower, upper=upper, k=np.array([0]))[0]
        assert w0 <= value <= upper - lower


def test_smooth_maximum_over_several_chunks() -> None:
    """n = 20,000 with tiny β: the distances run past the first 4,096-distance chunk."""
    x = np.sort(np.clip(make_rng(5).normal(50.0, 0.5, 20_000), 0.0, 100.0))
    for beta in (1e-5, 1e-3):
        assert smooth_sensitivity_median(x, lower=0.0, upper=100.0, beta=beta) == \
            _plain_max(x, 0.0, 100.0, beta)


def test_smooth_bound_of_small_samples() -> None:
    # empty sample: W_0 = U - L already
    assert smooth_sensitivity_median(np.array([]), lower=L, upper=U, beta=0.3) == 1.0
    # n = 1: W_0 = x_(2) - x_(0) = U - L
    assert smooth_sensitivity_median(np.array([0.4]), lower=L, upper=U, beta=0.3) == 1.0
    # concentrated data: the bound falls far below U - L
    x = np.full(1_001, 0.5)
    s = smooth_sensitivity_median(x, lower=L, upper=U, beta=0.1)
    assert s == pytest.approx(math.exp(-0.1 * 1_000), rel=1e-12)
    # W_k = 0 for k <= 998, W_999 = 0.5, W_1000 = 1 and 1 > 0.5·e^β


# --- the released value --------------------------------------------------------------------


def test_noisy_median_is_reproducible_and_centred_on_the_median() -> None:
    x = np.sort(make_rng(8).uniform(0.0, 1.0, 301))
    first = [noisy_median(x, lower=L, upper=U, epsilon=1.0, rng=make_rng(4)) for _ in range(3)]
    second = [noisy_median(x, lower=L, upper=U, epsilon=1.0, rng=make_rng(4)) for _ in range(3)]
    assert first == second
    assert all(type(v) is float for v in first)
    rng = make_rng(9)
    draws = np.array([noisy_median(x, lower=L, upper=U, epsilon=2.0, rng=rng)
                      for _ in range(2_001)])
    # the sample median of 2,001 Cauchy draws with scale 6S/ε has standard error
    # ≈ π/2·scale/√2001 ≈ 0.035·scale; 8 standard errors is far from a false alarm
    scale = smooth_noise_scale(smooth_sensitivity_median(x, lower=L, upper=U,
                                                         beta=smooth_beta(2.0)), 2.0)
    assert abs(np.median(draws) - lower_median(x, lower=L, upper=U)) < 0.3 * scale


@pytest.mark.parametrize(("values", "centre"), [
    ((0.1,) * 50 + (0.9,) * 50, 0.1),  # even n: the LOWER of the two middle values
    ((0.2,) * 3 + (0.7,) * 4, 0.7),
    ((0.3,), 0.3),
    ((), L),  # the empty sample releases noise around L
])
def test_noisy_median_is_centred_on_the_lower_median(values: Sample, centre: float) -> None:
    """At ε = 1000 the Cauchy scale is 6·S/1000 <= 0.006 (S <= U - L = 1), so the median
    of 201 draws (standard error ≈ π/2·0.006/√201 < 0.001) is within 0.05 of the centre,
    and 0.9 (the upper middle value of the first sample) is 0.8 away."""
    x = np.array(values)
    rng = make_rng(10)
    draws = [noisy_median(x, lower=L, upper=U, epsilon=1_000.0, rng=rng) for _ in range(201)]
    assert abs(float(np.median(draws)) - centre) < 0.05


def _standardised_draws(x: np.ndarray, epsilon: float, gamma: float, draws: int,
                        seed: int) -> np.ndarray:
    sensitivity = smooth_sensitivity_median(x, lower=L, upper=U,
                                            beta=smooth_beta(epsilon, gamma))
    scale = smooth_noise_scale(sensitivity, epsilon, gamma)
    median = lower_median(x, lower=L, upper=U)
    rng = make_rng(seed)
    out = np.array([noisy_median(x, lower=L, upper=U, epsilon=epsilon, rng=rng, gamma=gamma)
                    for _ in range(draws)])
    return (out - median) / scale


@pytest.mark.slow
def test_noisy_median_noise_is_cauchy_with_scale_six_s_over_epsilon() -> None:
    """(release - median) / (6·S/ε) is standard Cauchy: KS, 20,000 draws, p > α = 1e-4
    (false-failure rate 1e-4 for this fixed seed). Power: the same draws standardised
    by a scale 30% off give a KS distance ≈ 0.042 against the 1e-4 critical 0.016,
    p ≈ e^-70."""
    x = np.sort(make_rng(11).beta(2.0, 5.0, 101))
    epsilon = 1.0
    s = smooth_sensitivity_median(x, lower=L, upper=U, beta=smooth_beta(epsilon))
    assert s < 0.5 * (U - L)  # data-dependent: the test exercises S, not just U - L
    z = _standardised_draws(x, epsilon, 2.0, 20_000, seed=12)
    assert stats.kstest(z, stats.cauchy.cdf).pvalue > ALPHA
    assert stats.kstest(z / 1.3, stats.cauchy.cdf).pvalue < ALPHA
    assert stats.kstest(z * 1.3, stats.cauchy.cdf).pvalue < ALPHA


@pytest.mark.slow
def test_noisy_median_gamma_three_uses_its_own_beta_and_scale() -> None:
    """γ = 3: β = ε/8, scale 8·S/ε, noise density ∝ 1/(1+|z|³): KS, 10,000 draws,
    p > α = 1e-4; the Cauchy is rejected (CDF distance 0.10, critical 0.022)."""
    x = np.sort(make_rng(13).uniform(0.2, 0.8, 41))
    z = _standardised_draws(x, 0.5, 3.0, 10_000, seed=14)
    assert stats.kstest(z, lambda t: heavy_tailed_cdf(t, gamma=3.0)).pvalue > ALPHA
    assert stats.kstest(z, stats.cauchy.cdf).pvalue < ALPHA


# --- validation -----------------------------------------------------------------------------


SECRET = 0.123457


@pytest.mark.parametrize(("values", "kwargs", "error"), [
    ([0.5, SECRET, 0.9], {}, ValueError),  # unsorted
    ([SECRET, 1.5], {}, ValueError),  # above upper
    ([-SECRET, 0.5], {}, ValueError),  # below lower
    ([SECRET, np.nan], {}, ValueError),  # NaN
    ([[SECRET, 0.5]], {}, ValueError),  # two-dimensional
    ([SECRET], {"lower": 1.0}, ValueError),  # lower >= upper
    ([SECRET], {"upper": np.inf}, ValueError),
    (["a"], {}, TypeError),
])
def test_validation_errors_never_print_values(values: list, kwargs: dict,
                                              error: type[Exception]) -> None:
    params = {"lower": L, "upper": U} | kwargs
    calls = [
        lambda: lower_median(values, **params),
        lambda: median_sensitivity_at(values, k=np.array([0]), **params),
        lambda: smooth_sensitivity_median(values, beta=0.1, **params),
        lambda: noisy_median(values, epsilon=1.0, rng=make_rng(0), **params),
    ]
    for call in calls:
        with pytest.raises(error) as info:
            call()
        assert "0.123" not in str(info.value)


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"epsilon": 0.0}, ValueError), ({"epsilon": -1.0}, ValueError),
    ({"epsilon": np.nan}, ValueError), ({"gamma": 1.0}, ValueError),
    ({"rng": None}, TypeError),
])
def test_noisy_median_rejects_bad_parameters(kwargs: dict, error: type[Exception]) -> None:
    params = {"epsilon": 1.0, "rng": make_rng(0)} | kwargs
    with pytest.raises(error):
        noisy_median(np.array([0.2, 0.4]), lower=L, upper=U, **params)


@pytest.mark.parametrize("beta", [0.0, -0.5, np.nan])
def test_smooth_bound_rejects_bad_beta(beta: float) -> None:
    with pytest.raises(ValueError):
        smooth_sensitivity_median(np.array([0.2]), lower=L, upper=U, beta=beta)
