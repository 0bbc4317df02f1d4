"""Statistical tests: each mechanism's output distribution against its closed form.

docs/design.md rule 4: every mechanism has a test that its output matches the
claimed noise. Each goodness-of-fit test below passes when p > ALPHA = 1e-4,
so a correct sampler fails it with probability 1e-4 per test (per choice of
seed; the seeds are fixed, so the outcome is reproducible). Power checks
(Tumult style) run the same test on a sampler that is wrong on purpose
(scale 30% off, wrong γ, wrong ε) and require p < ALPHA; with the sample
sizes used, the expected p-values there are below 1e-30, so these do not fail
by chance either.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats

from dpcli.mechanisms import (
    discrete_laplace_cdf,
    discrete_laplace_mechanism,
    discrete_laplace_pmf,
    exponential_mechanism,
    exponential_probabilities,
    exponential_top_k,
    grid_laplace_mechanism,
    heavy_tailed_cdf,
    heavy_tailed_noise,
    laplace_grid,
    laplace_mechanism,
    make_rng,
    smooth_noise_scale,
    smooth_sensitivity_mechanism,
)
from dpcli.mechanisms.smooth import discrete_heavy_tailed_noise, discrete_heavy_tailed_pmf
from tests.statistical.pooled import pooled_chi2

pytestmark = pytest.mark.slow

ALPHA = 1e-4  # per-test false-failure rate of every goodness-of-fit assertion
N_CONTINUOUS = 50_000  # KS: the 1e-4 critical distance is 0.0099; 30% scale errors give ~0.05
N_DISCRETE = 100_000


def ks_pvalue(samples: np.ndarray, cdf: Callable[[np.ndarray], np.ndarray]) -> float:
    return float(stats.kstest(samples, cdf).pvalue)


def discrete_laplace_chi2_pvalue(noise: np.ndarray, scale: float) -> float:
    """Chi-square of integer ``noise`` against the discrete Laplace with ``scale``.

    Cells: every k in [-K, K] whose expected count is at least 20, plus the two
    tails (-inf, -K-1] and [K+1, inf) pooled into one cell each.
    """
    n = noise.size
    k_max = math.floor(scale * math.log(n * discrete_laplace_pmf(0, scale) / 20.0))
    inner = np.arange(-k_max, k_max + 1)
    expected = np.concatenate([[discrete_laplace_cdf(-k_max - 1, scale)],
                               discrete_laplace_pmf(inner, scale),
                               [1.0 - discrete_laplace_cdf(k_max, scale)]]) * n
    clipped = np.clip(noise, -k_max - 1, k_max + 1) + k_max + 1
    observed = np.bincount(clipped, minlength=2 * k_max + 3)
    return float(stats.chisquare(observed, expected).pvalue)


def frequencies_chi2_pvalue(observed: np.ndarray, probabilities: np.ndarray) -> float:
    expected = probabilities * observed.sum()
    assert expected.min() >= 20  # the chi-square approximation is sound
    return float(stats.chisquare(observed, expected).pvalue)


# --- Laplace ------------------------------------------------------------------

def _laplace_units(sensitivity: float, epsilon: float, seed: int) -> np.ndarray:
    """Noise of the vector Laplace release (two coordinates may change) in grid units."""
    value = np.full(N_DISCRETE, 10.3)
    grid, _ = laplace_grid(1.0, 2)  # the grid of the CLAIMED calibration, Δ = 1
    out = laplace_mechanism(value, sensitivity=sensitivity, epsilon=epsilon,
                            rng=make_rng(seed), changes=2)
    k = out / grid
    assert np.array_equal(k, np.round(k))  # exact multiples of the grid
    return (k - np.rint(value / grid)).astype(np.int64)


def test_laplace_vector_is_discrete_laplace_on_the_grid() -> None:
    """Δ = 1, c = 2: γ = 2^-11, units = 2048 + 2, so the noise is discrete Laplace with
    scale 2050/ε grid units; ε = 100 keeps every cell's expected count above 20."""
    noise = _laplace_units(1.0, 100.0, seed=101)
    _, units = laplace_grid(1.0, 2)
    assert discrete_laplace_chi2_pvalue(noise, units / 100.0) > ALPHA
    rng = make_rng(102)  # scalar calls: the grid of one changed coordinate
    grid, units = laplace_grid(3.0, 1)
    scalar = np.array([laplace_mechanism(0.25, sensitivity=3.0, epsilon=150.0, rng=rng)
                       for _ in range(20_000)])
    k = scalar / grid
    assert np.array_equal(k, np.round(k))
    assert discrete_laplace_chi2_pvalue((k - round(0.25 / grid)).astype(np.int64),
                                        units / 150.0) > ALPHA


@pytest.mark.parametrize("wrong_epsilon", [100.0 / 1.3, 100.0 / 0.7])
def test_laplace_test_rejects_scale_thirty_percent_off(wrong_epsilon: float) -> None:
    noise = _laplace_units(1.0, wrong_epsilon, seed=103)  # scale 30% larger or smaller
    _, units = laplace_grid(1.0, 2)
    assert discrete_laplace_chi2_pvalue(noise, units / 100.0) < ALPHA


# --- discrete Laplace -------------------------------------------------------------

def _discrete_noise(sensitivity: int, epsilon: float, seed: int) -> np.ndarray:
    counts = np.full(N_DISCRETE, 5, dtype=np.int64)
    out = discrete_laplace_mechanism(counts, sensitivity=sensitivity, epsilon=epsilon,
                                     rng=make_rng(seed))
    assert out.dtype == np.int64
    return out - counts


@pytest.mark.parametrize(("sensitivity", "epsilon"), [(2, 1.0), (1, 2.0), (1, 0.1)])
def test_discrete_laplace_matches_pmf(sensitivity: int, epsilon: float) -> None:
    noise = _discrete_noise(sensitivity, epsilon, seed=201)
    assert discrete_laplace_chi2_pvalue(noise, sensitivity / epsilon) > ALPHA


@pytest.mark.parametrize("wrong_epsilon", [1 / 1.3, 1 / 0.7])
def test_discrete_laplace_test_rejects_scale_thirty_percent_off(wrong_epsilon: float) -> None:
    noise = _discrete_noise(2, wrong_epsilon, seed=202)  # scale 2.6 or 1.4 instead of 2
    assert discrete_laplace_chi2_pvalue(noise, 2.0) < ALPHA


def _max_log_ratio(first: np.ndarray, second: np.ndarray, min_count: int) -> float:
    """Largest |ln(freq_first(v) / freq_second(v))| over values seen >= min_count times in both."""
    values, counts_first = np.unique(first, return_counts=True)
    seen_first = dict(zip(values.tolist(), counts_first.tolist(), strict=True))
    values, counts_second = np.unique(second, return_counts=True)
    seen_second = dict(zip(values.tolist(), counts_second.tolist(), strict=True))
    common = [v for v in seen_first
              if seen_first[v] >= min_count and seen_second.get(v, 0) >= min_count]
    assert len(common) >= 5
    return max(abs(math.log(seen_first[v] / seen_second[v])) for v in common)


def test_discrete_laplace_empirical_neighbour_check() -> None:
    """Counts 10 and 12 differ by the sensitivity Δ = 2; at ε = 1 every output's
    probability ratio is at most e^ε, and exactly e^ε for outputs outside (10, 12).

    Tolerance: frequencies seen >= 2000 times in each of 300k draws have a
    log-ratio standard error of at most sqrt(2/2000) = 0.032; we allow a factor
    1.25 (ln 1.25 = 0.22, about 7 standard errors), so the false-failure rate
    over the ~17 values compared is below 1e-10."""
    n, epsilon, tolerance = 300_000, 1.0, 1.25
    x = discrete_laplace_mechanism(np.full(n, 10), sensitivity=2, epsilon=epsilon,
                                   rng=make_rng(301))
    y = discrete_laplace_mechanism(np.full(n, 12), sensitivity=2, epsilon=epsilon,
                                   rng=make_rng(302))
    worst = _max_log_ratio(x, y, min_count=2000)
    assert worst <= epsilon + math.log(tolerance)
    assert worst >= epsilon - math.log(tolerance)  # the bound is attained: the check has teeth
    # Power: a mechanism adding the noise of ε = 2 while claiming ε = 1 fails the check.
    x_leaky = discrete_laplace_mechanism(np.full(n, 10), sensitivity=2, epsilon=2.0,
                                         rng=make_rng(303))
    y_leaky = discrete_laplace_mechanism(np.full(n, 12), sensitivity=2, epsilon=2.0,
                                         rng=make_rng(304))
    assert _max_log_ratio(x_leaky, y_leaky, min_count=2000) > epsilon + math.log(tolerance)


# --- grid Laplace (real values without floating-point artefacts) -------------------

def _grid(sensitivity: float) -> tuple[float, int]:
    grid = 2.0 ** math.floor(math.log2(sensitivity / 1024))
    return grid, math.ceil(sensitivity / grid) + 1


@pytest.mark.parametrize(("value", "sensitivity", "epsilon"),
                         [(0.4137, 0.01, 200.0), (-3.25, 1.0, 300.0)])
def test_grid_laplace_is_discrete_laplace_on_the_grid(value: float, sensitivity: float,
                                                       epsilon: float) -> None:
    """Outputs are exact multiples of γ = 2^⌊log2(Δ/1024)⌋; in grid units around
    round(value/γ) they follow discrete Laplace with sensitivity ⌈Δ/γ⌉ + 1 (chi-square)."""
    rng = make_rng(31)
    grid, units = _grid(sensitivity)
    out = np.array([grid_laplace_mechanism(value, sensitivity=sensitivity, epsilon=epsilon,
                                           rng=rng) for _ in range(20_000)])
    k = out / grid
    assert np.array_equal(k, np.round(k))
    noise = (k - round(value / grid)).astype(np.int64)
    assert discrete_laplace_chi2_pvalue(noise, units / epsilon) > ALPHA
    assert units * grid <= sensitivity * (1 + 2 / 1024)


def test_grid_laplace_rounding_keeps_the_integer_sensitivity() -> None:
    """Values Δ apart round to grid points at most ⌈Δ/γ⌉ + 1 steps apart."""
    rng = make_rng(32)
    for sensitivity in (1e-6, 3e-4, 0.0123, 1.0, 7.5):
        grid, units = _grid(sensitivity)
        x = rng.uniform(-10, 10, 50_000)
        y = x + rng.uniform(-sensitivity, sensitivity, x.size)
        assert np.max(np.abs(np.round(x / grid) - np.round(y / grid))) <= units


# --- heavy-tailed noise (smooth sensitivity) ---------------------------------------

@pytest.mark.parametrize("gamma", [1.5, 2.0, 3.0])
def test_heavy_tailed_sampler_matches_cdf(gamma: float) -> None:
    z = heavy_tailed_noise(N_CONTINUOUS, gamma=gamma, rng=make_rng(401))
    assert ks_pvalue(z, lambda x: heavy_tailed_cdf(x, gamma=gamma)) > ALPHA


def test_heavy_tailed_gamma_two_is_the_standard_cauchy() -> None:
    z = heavy_tailed_noise(N_CONTINUOUS, gamma=2.0, rng=make_rng(402))
    assert ks_pvalue(z, stats.cauchy.cdf) > ALPHA


@pytest.mark.parametrize(("true_gamma", "claimed_gamma"), [(3.0, 2.0), (2.0, 3.0), (1.5, 2.0)])
def test_heavy_tailed_test_rejects_wrong_gamma(true_gamma: float, claimed_gamma: float) -> None:
    z = heavy_tailed_noise(N_CONTINUOUS, gamma=true_gamma, rng=make_rng(403))
    assert ks_pvalue(z, lambda x: heavy_tailed_cdf(x, gamma=claimed_gamma)) < ALPHA


def _discrete_heavy_chi2_pvalue(k: np.ndarray, gamma: float, scale: float) -> float:
    """Chi-square of integer draws against P(k) ∝ 1/(1 + |k/t|^γ), adjacent k pooled until
    each cell expects at least 20, the two tails beyond ±50t in one cell each."""
    reach = int(50 * scale) + 1
    inner = discrete_heavy_tailed_pmf(np.arange(-reach, reach + 1), gamma=gamma, scale=scale)
    tail = (1.0 - inner.sum()) / 2
    probabilities = np.concatenate([[tail], inner, [tail]])
    observed = np.bincount((np.clip(k, -reach - 1, reach + 1) + reach + 1).astype(np.int64),
                           minlength=probabilities.size)
    return pooled_chi2(observed, probabilities)[0]


@pytest.mark.parametrize(("gamma", "scale"), [(2.0, 0.7), (2.0, 6.0), (4.0, 3.0), (3.0, 40.0)])
def test_discrete_heavy_tailed_sampler_matches_its_pmf(gamma: float, scale: float) -> None:
    k = discrete_heavy_tailed_noise(N_DISCRETE, gamma=gamma, scale=scale, rng=make_rng(405))
    assert np.array_equal(k, np.round(k))
    assert _discrete_heavy_chi2_pvalue(k, gamma, scale) > ALPHA


@pytest.mark.parametrize("wrong", [1.3, 1 / 1.3])
def test_discrete_heavy_tailed_test_rejects_scale_thirty_percent_off(wrong: float) -> None:
    k = discrete_heavy_tailed_noise(N_DISCRETE, gamma=2.0, scale=6.0 * wrong, rng=make_rng(406))
    assert _discrete_heavy_chi2_pvalue(k, 2.0, 6.0) < ALPHA


def test_smooth_sensitivity_mechanism_has_the_claimed_scale() -> None:
    """On the grid 2^-3: K = output/grid − round(value/grid) at t = 6·(S + grid)/(ε·grid)."""
    value, sensitivity, epsilon, grid = 3.0, 0.5, 1.5, 2.0**-3
    out = smooth_sensitivity_mechanism(np.full(N_DISCRETE, value),
                                       smooth_sensitivity=sensitivity, epsilon=epsilon,
                                       rng=make_rng(404), grid=grid)
    scale = smooth_noise_scale(sensitivity + grid, epsilon) / grid  # 6·0.625/1.5/0.125 = 20
    assert scale == pytest.approx(20.0)
    k = out / grid - round(value / grid)
    assert np.array_equal(k, np.round(k))
    assert _discrete_heavy_chi2_pvalue(k, 2.0, scale) > ALPHA
    # Power: the same samples are rejected against a scale 30% off.
    assert _discrete_heavy_chi2_pvalue(k, 2.0, 1.3 * scale) < ALPHA


# --- exponential mechanism --------------------------------------------------------

SCORES = np.array([0.0, 1.0, 2.0, 3.0, 5.0])


def _selection_counts(n: int, seed: int, **kwargs: object) -> np.ndarray:
    rng = make_rng(seed)
    picks = [exponential_mechanism(SCORES, rng=rng, **kwargs) for _ in range(n)]
    return np.bincount(picks, minlength=SCORES.size)


@pytest.mark.parametrize("monotonic", [False, True])
def test_exponential_mechanism_matches_softmax(monotonic: bool) -> None:
    counts = _selection_counts(40_000, 501, sensitivity=2.0, epsilon=1.5, monotonic=monotonic)
    probabilities = exponential_probabilities(SCORES, sensitivity=2.0, epsilon=1.5,
                                              monotonic=monotonic)
    assert frequencies_chi2_pvalue(counts, probabilities) > ALPHA


def test_exponential_test_rejects_a_factor_of_two_in_epsilon() -> None:
    # Samples of the standard mechanism tested against the "monotonic" (2x ε) softmax.
    counts = _selection_counts(40_000, 502, sensitivity=2.0, epsilon=1.5)
    wrong = exponential_probabilities(SCORES, sensitivity=2.0, epsilon=1.5, monotonic=True)
    assert frequencies_chi2_pvalue(counts, wrong) < ALPHA


def test_top_k_first_pick_is_the_exponential_mechanism_at_epsilon_over_k() -> None:
    scores = np.array([0.0, 1.0, 2.0, 4.0, 5.0, 7.0])
    k, epsilon = 3, 3.0
    rng = make_rng(601)
    first = [exponential_top_k(scores, k, sensitivity=1.0, epsilon=epsilon, rng=rng)[0]
             for _ in range(30_000)]
    counts = np.bincount(first, minlength=scores.size)
    probabilities = exponential_probabilities(scores, sensitivity=1.0, epsilon=epsilon / k)
    assert frequencies_chi2_pvalue(counts, probabilities) > ALPHA


def _peeling_pair_probabilities(scores: np.ndarray, round_epsilon: float) -> dict:
    """Exact P(first = i, second = j) of two exponential-mechanism rounds without replacement."""
    weights = np.exp(round_epsilon * scores / 2.0)  # Δ = 1
    total = weights.sum()
    return {(i, j): weights[i] / total * weights[j] / (total - weights[i])
            for i, j in itertools.permutations(range(scores.size), 2)}


def test_top_k_ordered_pairs_match_peeling() -> None:
    scores = np.array([0.0, 1.0, 3.0])
    k, epsilon, n = 2, 2.0, 30_000
    rng = make_rng(602)
    pairs = [tuple(exponential_top_k(scores, k, sensitivity=1.0, epsilon=epsilon, rng=rng))
             for _ in range(n)]
    cells = list(itertools.permutations(range(3), 2))
    observed = np.array([sum(p == cell for p in pairs) for cell in cells])
    assert observed.sum() == n  # every output is an ordered pair of distinct indices
    exact = _peeling_pair_probabilities(scores, epsilon / k)
    assert frequencies_chi2_pvalue(observed, np.array([exact[c] for c in cells])) > ALPHA
    # Power: peeling with the full ε in each round (no division by k) is rejected.
    wrong = _peeling_pair_probabilities(scores, epsilon)
    assert frequencies_chi2_pvalue(observed, np.array([wrong[c] for c in cells])) < ALPHA
