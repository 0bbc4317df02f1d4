"""The sparse vector technique with a cap, and why Private Threshold Testing is not DP.

Neighbours are replace-one; every score used here moves by at most Δ = 1
between D and D'. The counter-example of the design notes (docs/design.md rule
7, :mod:`dpcli.mechanisms.sparse_vector`): scores q = (0, 0) on D and
q = (1, 0) on D', threshold τ = 0.5.

Statistical assertions and their false-failure rates (seeds are fixed, so
every outcome is reproducible; the rates say how unlucky a seed would have
to be for a correct implementation to fail):

- binomial tests of an empirical frequency against its exact probability
  (a sum over the discrete threshold noise, on the mechanism's grid): pass
  when p > ALPHA = 1e-4;
- chi-square goodness of fit of the output-set distribution: p > ALPHA;
- empirical ε-DP comparisons freq_D(S) ≤ e^ε · freq_D'(S) (both ways):
  one-sided Clopper–Pearson bounds at ALPHA/2 each, so a mechanism that is
  ε-DP fails one comparison with probability ≤ ALPHA = 1e-4;
- "PTT's (1, 0) appears on D'": fails with probability (1 − 0.39)^20000 <
  1e-4000.

Power checks run the same statistics against a wrong model (a wrong noise
scale; PTT itself) and require a rejection; at the sample sizes used the
expected p-values there are below 1e-30.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats

from dpcli.mechanisms import (
    discrete_laplace_cdf,
    discrete_laplace_mechanism,
    discrete_laplace_pmf,
    laplace_grid,
    make_rng,
)
from dpcli.mechanisms.sparse_vector import sparse_vector, sparse_vector_split

ALPHA = 1e-4
EPS = 1.0
TAU = 0.5
Q_D = np.array([0.0, 0.0])
Q_D_PRIME = np.array([1.0, 0.0])   # neighbour: query 0 moved by Δ = 1
ORDER = np.array([0, 1])


# ------------------------------------------------------------------ helpers
def private_threshold_testing(scores: np.ndarray, threshold: float, *, sensitivity: float,
                              epsilon: float, rng: np.random.Generator,
                              runs: int) -> np.ndarray:
    """Stoddard et al. 2014, Algorithm 2, ``runs`` times at once: shape (runs, m) of 0/1.

    τ̃ = τ + Lap(Δ/ε); v[i] = 1 iff q_i ≥ τ̃. No noise on the scores, no cap.
    Defined here only to show that it is not differentially private.
    """
    noisy_threshold = threshold + rng.laplace(0.0, sensitivity / epsilon, size=runs)
    return (scores[None, :] >= noisy_threshold[:, None]).astype(np.int64)


def laplace_sf(x: float, scale: float) -> float:
    """P(Lap(scale) ≥ x)."""
    return 1.0 - 0.5 * math.exp(x / scale) if x < 0 else 0.5 * math.exp(-x / scale)


def laplace_pdf(x: float, scale: float) -> float:
    return math.exp(-abs(x) / scale) / (2.0 * scale)


def discrete_sf(a: np.ndarray, scale: float) -> np.ndarray:
    """P(K ≥ a) for the discrete Laplace K with ``scale`` (= P(K ≤ −a), by symmetry)."""
    return np.asarray(discrete_laplace_cdf(-np.asarray(a, dtype=np.float64), scale))


def sum_over_threshold_noise(f: Callable[[np.ndarray], np.ndarray], scale: float) -> float:
    """Σ_ρ f(ρ) · P(ρ) over the integers, ρ ~ DLap(scale) (beyond 60 scales: < 1e-26)."""
    reach = int(60 * scale) + 1
    rho = np.arange(-reach, reach + 1)
    return float(np.sum(f(rho) * discrete_laplace_pmf(rho, scale)))


def in_steps(scores: np.ndarray, threshold: float, sensitivity: float
             ) -> tuple[np.ndarray, int, int]:
    """(scores, threshold) on the mechanism's grid, and D = ⌈Δ/γ⌉ + 1 (laplace_grid)."""
    grid, steps = laplace_grid(sensitivity, 1)
    return np.rint(np.asarray(scores) / grid), round(threshold / grid), steps


def output_probabilities(scores: np.ndarray, threshold: float, cap: int, epsilon: float,
                         sensitivity: float = 1.0, query_scale: float | None = None
                         ) -> dict[tuple[int, ...], float]:
    """Exact P(output) of the capped sparse vector with order 0, 1, ..., m − 1.

    On the grid (scores k_i, threshold t, D steps per Δ) and given the
    threshold noise ρ the queries are independent: query i is positive with
    p_i(ρ) = P(ν ≥ t + ρ − k_i), ν ~ DLap(2cD/ε2) (``query_scale``, in grid
    steps, overrides that scale). An output is the list of positives until
    the cap; the probability of a list sums over the ways the queries after
    the stop may fall (they are not looked at).
    """
    eps1, eps2 = sparse_vector_split(epsilon, cap)
    k, t, steps = in_steps(scores, threshold, sensitivity)
    b1 = steps / eps1
    b2 = 2.0 * cap * steps / eps2 if query_scale is None else query_scale
    m = len(scores)
    out: dict[tuple[int, ...], float] = {}
    for pattern in range(2 ** m):
        bits = [(pattern >> i) & 1 for i in range(m)]
        positives = [i for i in range(m) if bits[i]]
        # a pattern is reachable as "positives in full" only if it has ≤ cap ones;
        # patterns with more ones are truncated to their first `cap` positives
        key = tuple(positives[:cap])

        def prob(r: np.ndarray, bits: list[int] = bits) -> np.ndarray:
            p = np.ones(r.shape)
            for i in range(m):
                pi = discrete_sf(t + r - k[i], b2)
                p = p * (pi if bits[i] else 1.0 - pi)
            return p

        out[key] = out.get(key, 0.0) + sum_over_threshold_noise(prob, b1)
    return out


def clopper_pearson(k: int, n: int, side: str, alpha: float) -> float:
    """One-sided (1 − alpha) Clopper–Pearson bound for a binomial proportion."""
    if side == "lower":
        return 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))
    return 1.0 if k == n else float(stats.beta.ppf(1.0 - alpha, k + 1, n - k))


def dp_violations(counts_a: Counter, counts_b: Counter, n: int, epsilon: float,
                  alpha: float = ALPHA) -> list[tuple[int, ...]]:
    """Outputs S for which the data show freq_a(S) > e^ε · freq_b(S), at level alpha.

    Flags S when the lower (1 − alpha/2) bound of p_a(S) exceeds e^ε times the
    upper (1 − alpha/2) bound of p_b(S). If p_a(S) ≤ e^ε p_b(S), a flag needs
    one of the two bounds to miss: probability ≤ alpha.
    """
    flagged = []
    for s in set(counts_a) | set(counts_b):
        low = clopper_pearson(counts_a[s], n, "lower", alpha / 2)
        high = clopper_pearson(counts_b[s], n, "upper", alpha / 2)
        if low > math.exp(epsilon) * high:
            flagged.append(s)
    return flagged


def run_sparse_vector(scores: np.ndarray, cap: int, runs: int, seed: int) -> Counter:
    rng = make_rng(seed)
    return Counter(tuple(int(i) for i in sparse_vector(scores, TAU, cap=cap, sensitivity=1.0,
                                                        epsilon=EPS, rng=rng, order=ORDER))
                   for _ in range(runs))


# ---------------------------------------------- PTT is not differentially private
def test_private_threshold_testing_is_not_differentially_private() -> None:
    runs = 20_000
    on_d = private_threshold_testing(Q_D, TAU, sensitivity=1.0, epsilon=EPS, rng=make_rng(1),
                                     runs=runs)
    on_d_prime = private_threshold_testing(Q_D_PRIME, TAU, sensitivity=1.0, epsilon=EPS,
                                           rng=make_rng(2), runs=runs)
    target = np.array([1, 0])
    hits_d = int(np.all(on_d == target, axis=1).sum())
    hits_d_prime = int(np.all(on_d_prime == target, axis=1).sum())

    # Analytically: on D q1 == q2, so "q1 ≥ τ̃" and "q2 ≥ τ̃" are the same event:
    # v1 == v2 for every τ̃, and (1, 0) has probability exactly 0.
    assert np.array_equal(on_d[:, 0], on_d[:, 1])
    for noisy_threshold in np.linspace(-5, 5, 101):
        v = [int(q >= noisy_threshold) for q in Q_D]
        assert v[0] == v[1]
    assert hits_d == 0

    # On D', (1, 0) happens iff 0 < τ̃ ≤ 1, i.e. −0.5 < Lap(1/ε) ≤ 0.5.
    exact = (laplace_sf(-TAU, 1.0 / EPS) - laplace_sf(1.0 - TAU, 1.0 / EPS))
    assert exact == pytest.approx(1.0 - math.exp(-0.5))
    assert hits_d_prime > 0       # false-failure probability (1 − 0.39)^20000
    assert stats.binomtest(hits_d_prime, runs, exact).pvalue > ALPHA
    # P_D'(1, 0) / P_D(1, 0) = ∞: no ε bounds it. The empirical check flags it:
    assert (1, 0) in [tuple(int(b) for b in s) for s in dp_violations(
        Counter(map(tuple, on_d_prime.tolist())), Counter(map(tuple, on_d.tolist())),
        runs, EPS)]


# ------------------------------------------------- the capped sparse vector is
def test_exact_output_probabilities_satisfy_epsilon_dp() -> None:
    """The noise model of the docstring, integrated exactly, obeys e^ε on the example."""
    for cap in (1, 2):
        p_d = output_probabilities(Q_D, TAU, cap, EPS)
        p_dp = output_probabilities(Q_D_PRIME, TAU, cap, EPS)
        assert sum(p_d.values()) == pytest.approx(1.0, abs=1e-9)
        assert sum(p_dp.values()) == pytest.approx(1.0, abs=1e-9)
        for s in p_d:
            assert p_d[s] > 0 and p_dp[s] > 0
            assert p_d[s] <= math.exp(EPS) * p_dp[s]
            assert p_dp[s] <= math.exp(EPS) * p_d[s]
        # the output PTT can never give on D is possible on both here
        assert p_d[(0,)] > 0.05 and p_dp[(0,)] > 0.05


@pytest.mark.slow
@pytest.mark.parametrize("cap", [1, 2])
def test_output_frequencies_respect_epsilon_dp(cap: int) -> None:
    """200,000 seeded runs on D and on D' each (ε = 1, Δ = 1, τ = 0.5, order 0, 1).

    For every output set: chi-square fit to the exact probabilities (p > 1e-4)
    and the empirical ε-DP comparison both ways (false-failure ≤ 1e-4 each).
    """
    runs = 200_000
    on_d = run_sparse_vector(Q_D, cap, runs, seed=10 + cap)
    on_dp = run_sparse_vector(Q_D_PRIME, cap, runs, seed=20 + cap)
    possible = {(), (0,), (1,)} | ({(0, 1)} if cap == 2 else set())
    assert set(on_d) <= possible and set(on_dp) <= possible
    assert on_d[(0,)] > 0 and on_dp[(0,)] > 0   # (1, 0): impossible under PTT on D
    for counts, scores in ((on_d, Q_D), (on_dp, Q_D_PRIME)):
        exact = output_probabilities(scores, TAU, cap, EPS)
        keys = sorted(exact)
        observed = np.array([counts[k] for k in keys])
        expected = np.array([exact[k] for k in keys]) * runs
        assert expected.min() > 1000 and observed.sum() == runs
        assert stats.chisquare(observed, expected).pvalue > ALPHA
    assert dp_violations(on_d, on_dp, runs, EPS) == []
    assert dp_violations(on_dp, on_d, runs, EPS) == []


def test_output_frequencies_power_check() -> None:
    """The goodness-of-fit above rejects the right model with the wrong noise scale."""
    runs = 50_000
    counts = run_sparse_vector(Q_D_PRIME, 1, runs, seed=31)
    right = output_probabilities(Q_D_PRIME, TAU, 1, EPS)
    _, eps2 = sparse_vector_split(EPS, 1)
    wrong = output_probabilities(Q_D_PRIME, TAU, 1, EPS, query_scale=1.0 / eps2)  # no 2c
    keys = sorted(right)
    observed = np.array([counts[k] for k in keys])
    assert stats.chisquare(observed, np.array([right[k] for k in keys]) * runs).pvalue > ALPHA
    assert stats.chisquare(observed, np.array([wrong[k] for k in keys]) * runs).pvalue < ALPHA


# ------------------------------------------------------------ one-query distribution
def one_query_positive_probability(q: float, tau: float, cap: int, epsilon: float,
                                   sensitivity: float, query_scale: float | None = None
                                   ) -> float:
    """P(k + ν ≥ t + ρ), ρ ~ DLap(D/ε1), ν ~ DLap(2cD/ε2) on the grid, summed over ρ."""
    eps1, eps2 = sparse_vector_split(epsilon, cap)
    k, t, steps = in_steps(np.array([q]), tau, sensitivity)
    b2 = 2.0 * cap * steps / eps2 if query_scale is None else query_scale
    return sum_over_threshold_noise(lambda r: discrete_sf(t + r - k[0], b2), steps / eps1)


def test_one_query_positive_rate_matches_the_exact_sum() -> None:
    q, tau, cap, eps, delta = 0.0, 2.0, 2, 1.0, 1.0
    runs = 100_000
    rng = make_rng(41)
    hits = sum(sparse_vector(np.array([q]), tau, cap=cap, sensitivity=delta, epsilon=eps,
                             rng=rng).size for _ in range(runs))
    exact = one_query_positive_probability(q, tau, cap, eps, delta)
    assert 0.3 < exact < 0.45
    assert stats.binomtest(hits, runs, exact).pvalue > ALPHA
    # power: the query noise without the factor 2c (the monotonic-case scale) is rejected
    _, eps2 = sparse_vector_split(eps, cap)
    _, _, steps = in_steps(np.array([q]), tau, delta)
    wrong = one_query_positive_probability(q, tau, cap, eps, delta, query_scale=steps / eps2)
    assert abs(wrong - exact) > 0.02
    assert stats.binomtest(hits, runs, wrong).pvalue < ALPHA


def test_sum_matches_monte_carlo_of_the_model() -> None:
    """The summation helper itself, against a direct simulation of ν − ρ (α = 1e-4)."""
    rng = np.random.default_rng(3)
    b1, b2, gap = 13.0, 29.0, 17
    runs = 400_000
    rho = discrete_laplace_mechanism(np.zeros(runs, dtype=np.int64), sensitivity=13,
                                     epsilon=1.0, rng=rng)
    nu = discrete_laplace_mechanism(np.zeros(runs, dtype=np.int64), sensitivity=29,
                                    epsilon=1.0, rng=rng)
    hits = int((nu >= gap + rho).sum())
    exact = sum_over_threshold_noise(lambda r: discrete_sf(gap + r, b2), b1)
    assert stats.binomtest(hits, runs, exact).pvalue > ALPHA


def test_comparisons_are_exact_integers_on_the_grid() -> None:
    """Scores that differ below the grid (Δ/1024) are the same query: the output cannot
    depend on their low-order bits. Same seed, same output."""
    base = np.linspace(-3, 3, 50)
    nudged = base + 2.0**-40
    for seed in range(20):
        a = sparse_vector(base, 0.3, cap=3, sensitivity=1.0, epsilon=0.5, rng=make_rng(seed))
        b = sparse_vector(nudged, 0.3, cap=3, sensitivity=1.0, epsilon=0.5, rng=make_rng(seed))
        assert np.array_equal(a, b)


# ---------------------------------------------------------------- behaviour
@pytest.mark.parametrize("cap", [1, 2, 5])
def test_cap_is_respected(cap: int) -> None:
    rng = make_rng(5)
    scores = np.linspace(-3, 3, 40)
    sizes = []
    for _ in range(300):
        out = sparse_vector(scores, 0.0, cap=cap, sensitivity=1.0, epsilon=0.5, rng=rng)
        assert out.dtype == np.int64
        assert out.size <= cap
        assert len(set(out.tolist())) == out.size
        assert np.all((out >= 0) & (out < scores.size))
        sizes.append(out.size)
    assert max(sizes) == cap   # half the scores are above 0: the cap binds


def test_stops_at_the_cth_positive_in_the_given_order() -> None:
    # negligible noise: positives are exactly the scores above the threshold
    scores = np.array([10.0, -10.0, 10.0, 10.0, -10.0, 10.0, 10.0])
    order = np.array([6, 4, 1, 3, 0, 5, 2])          # positives in order: 6, 3, 0, 5, 2
    for cap, expected in ((1, [6]), (2, [6, 3]), (3, [6, 3, 0]), (5, [6, 3, 0, 5, 2]),
                          (7, [6, 3, 0, 5, 2])):
        out = sparse_vector(scores, 0.0, cap=cap, sensitivity=1.0, epsilon=1e9,
                            rng=make_rng(cap), order=order)
        assert out.tolist() == expected


def test_far_above_gives_first_c_in_order_and_far_below_gives_nothing() -> None:
    order = np.array([3, 1, 4, 0, 2])
    above = np.full(5, 1e6)
    below = np.full(5, -1e6)
    for seed in range(20):
        out = sparse_vector(above, 0.0, cap=3, sensitivity=1.0, epsilon=1.0,
                            rng=make_rng(seed), order=order)
        assert out.tolist() == [3, 1, 4]
        out = sparse_vector(below, 0.0, cap=3, sensitivity=1.0, epsilon=1.0,
                            rng=make_rng(seed), order=order)
        assert out.size == 0 and out.dtype == np.int64


def test_default_order_is_random() -> None:
    # all far above, cap 1: the output is the first query of a uniformly random order
    picks = Counter(int(sparse_vector(np.full(5, 1e6), 0.0, cap=1, sensitivity=1.0,
                                      epsilon=1.0, rng=make_rng(seed))[0])
                    for seed in range(1000))
    assert set(picks) == set(range(5))               # each missed with prob (4/5)^1000
    assert stats.chisquare([picks[i] for i in range(5)]).pvalue > ALPHA


def test_deterministic_under_a_seed() -> None:
    scores = np.linspace(-2, 2, 30)
    first = [sparse_vector(scores, 0.0, cap=4, sensitivity=1.0, epsilon=0.7,
                           rng=make_rng(seed)).tolist() for seed in range(30)]
    again = [sparse_vector(scores, 0.0, cap=4, sensitivity=1.0, epsilon=0.7,
                           rng=make_rng(seed)).tolist() for seed in range(30)]
    assert first == again
    assert len({tuple(x) for x in first}) > 1        # and the seed matters


@pytest.mark.parametrize("order", [
    np.array([0, 1]),            # too short
    np.array([0, 1, 2, 3]),      # too long
    np.array([0, 0, 1]),         # not a permutation
    np.array([0, 1, 3]),         # out of range
    np.array([-1, 0, 1]),
    np.array([[0, 1, 2]]),       # wrong shape
])
def test_rejects_bad_order(order: np.ndarray) -> None:
    with pytest.raises(ValueError, match="order"):
        sparse_vector(np.zeros(3), 0.0, cap=1, sensitivity=1.0, epsilon=1.0, rng=make_rng(0),
                      order=order)


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"scores": np.zeros((2, 2))}, ValueError),
    ({"scores": np.array([0.0, np.nan])}, ValueError),
    ({"scores": np.array([0.0, np.inf])}, ValueError),
    ({"threshold": np.nan}, ValueError),
    ({"cap": 0}, ValueError),
    ({"cap": 1.5}, TypeError),
    ({"sensitivity": 0.0}, ValueError),
    ({"epsilon": 0.0}, ValueError),
    ({"epsilon": -1.0}, ValueError),
    ({"rng": 0}, TypeError),
])
def test_rejects_bad_arguments(kwargs: dict, error: type[Exception]) -> None:
    params = {"scores": np.zeros(3), "threshold": 0.0, "cap": 1, "sensitivity": 1.0,
              "epsilon": 1.0, "rng": make_rng(0)} | kwargs
    scores, threshold = params.pop("scores"), params.pop("threshold")
    with pytest.raises(error):
        sparse_vector(scores, threshold, **params)


# --------------------------------------------------------------------- the split
@pytest.mark.parametrize("cap", [1, 2, 3, 10, 100])
@pytest.mark.parametrize("eps", [1e-3, 0.1, 1.0, 3.7, 50.0])
def test_split_ratio_and_total(eps: float, cap: int) -> None:
    eps1, eps2 = sparse_vector_split(eps, cap)
    assert eps1 > 0 and eps2 > 0
    assert eps2 / eps1 == pytest.approx((2 * cap) ** (2 / 3), rel=1e-12)
    assert eps1 + eps2 <= eps
    assert eps1 + eps2 == pytest.approx(eps, rel=1e-9)


def test_split_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        sparse_vector_split(0.0, 1)
    with pytest.raises(ValueError):
        sparse_vector_split(1.0, 0)
    with pytest.raises(TypeError):
        sparse_vector_split(1.0, 1.0)
