"""The sparse vector technique with a cap on positives (Lyu, Su & Li, VLDB 2017, Alg. 1).

Why not Stoddard et al.'s *Private Threshold Testing* (PTT): PTT perturbs the
threshold only and compares the *exact* scores with it, for an unlimited
number of queries. With q1 = q2 = 0 on a dataset D and q1 = 1, q2 = 0 on a
neighbour D', the output (1, 0) needs q1 ≥ τ̃ > q2: impossible on D
(probability 0), possible on D' (probability P(0 < τ̃ ≤ 1) > 0). No ε bounds
that ratio, so PTT is not differentially private (docs/design.md rule 7;
``tests/mechanisms/test_sparse_vector.py`` demonstrates it). The version
here adds noise to the threshold *and* to every score, and stops after c
positives; its guarantee holds for any number of queries. It compares
integers (scores on a public grid, discrete Laplace noise), so no float
rounding of a noisy score can depend on the data (Mironov 2012).
"""

from __future__ import annotations

import math

import numpy as np

from dpcli.mechanisms.laplace import MAX_ABS_COUNT, MAX_DISCRETE_SCALE, laplace_grid
from dpcli.mechanisms.rng import check_int, check_positive, check_real, check_real_array, check_rng

# ε1 + ε2 is computed in floating point; shrink both by a hair so that the sum
# never exceeds the ε that was charged.
_SAFETY = 1.0 - 1e-12


def sparse_vector_split(epsilon: float, cap: int) -> tuple[float, float]:
    """(ε1, ε2): threshold and query budgets, ε1 : ε2 = 1 : (2c)^(2/3) (Lyu et al. §4.2).

    That ratio minimises the variance of ν_i − ρ (the comparison noise) for
    the general, non-monotonic case; ε1 + ε2 ≤ ε.
    """
    eps = check_positive("epsilon", epsilon)
    c = check_int("cap", cap, minimum=1)
    ratio = (2.0 * c) ** (2.0 / 3.0)
    eps1 = eps / (1.0 + ratio) * _SAFETY
    return eps1, (eps - eps / (1.0 + ratio)) * _SAFETY


def sparse_vector(
    scores: np.ndarray,
    threshold: float,
    *,
    cap: int,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
    order: np.ndarray | None = None,
) -> np.ndarray:
    """Indices of at most ``cap`` scores judged above ``threshold``: ε-DP.

    Releases: the positions (into ``scores``) of the first ``cap`` queries,
    taken in ``order`` (default: a uniformly random order drawn from
    ``rng``), whose noisy score reaches the noisy threshold — never a score
    or a noisy score.
    Sensitivity: the caller supplies Δ = ``sensitivity``, the largest change
    of any *single* score between replace-one neighbours (not the L1 norm of
    the whole vector: the guarantee does not depend on the number of
    queries).
    Float safety (rule 6): scores and threshold are compared as integers on
    the public grid γ of :func:`dpcli.mechanisms.laplace.laplace_grid`
    (2^⌊log2(Δ/1024)⌋), with integer noise: q_i ↦ k_i = round(q_i/γ),
    τ ↦ t = round(τ/γ) (public). A score moving by at most Δ moves k_i by at
    most D = ⌈Δ/γ⌉ + 1 grid steps (the rounding inflation, ≤ 0.2 % of Δ).
    Noise: ρ ~ DLap(D/ε1) on the threshold once; ν_i ~ DLap(2cD/ε2) on each
    score (discrete Laplace in grid steps); query i is positive when
    k_i + ν_i ≥ t + ρ, an exact integer comparison; the run stops at the
    c-th positive. (ε1, ε2) from :func:`sparse_vector_split`.
    Cost: ε = ``epsilon`` (δ = 0). Proof (Lyu, Su & Li, "Understanding the
    Sparse Vector Technique for Differential Privacy", VLDB 2017, Alg. 1,
    Thm. 2, on the integers): fix an output with positives P (|P| ≤ c) and
    negatives N, and pair the threshold noise z on D with z' = z + D on D'.
    Then P(ρ = z) ≤ e^ε1 · P(ρ = z'); a negative on D (k_i + ν < t + z)
    stays a negative on D' with the same ν, since k_i' ≤ k_i + D; a positive
    needs ν_i at most 2D larger on D' (k_i' ≥ k_i − D, threshold up by D),
    a shift of the integer noise that costs a factor e^(ε2/c) at scale
    2cD/ε2, at most c times. In all e^(ε1 + ε2) ≤ e^ε. This holds for
    replace-one neighbours as for any relation under which each score moves
    by at most Δ.
    The order must not depend on the data; a random order is fine, as is any
    public one (the first queries are favoured once the cap binds).

    Noise is drawn for every query although the mechanism stops at the cap:
    the draws after the stop are never looked at, so the output distribution
    is the stopping algorithm's.
    """
    q = check_real_array("scores", scores)
    if q.ndim != 1:
        raise ValueError("scores must be one-dimensional")
    if not np.all(np.isfinite(q)):
        raise ValueError("scores must be finite")
    tau = check_real("threshold", threshold)
    c = check_int("cap", cap, minimum=1)
    delta = check_positive("sensitivity", sensitivity)
    eps1, eps2 = sparse_vector_split(epsilon, c)
    rng = check_rng(rng)
    m = q.size
    if order is None:
        order = rng.permutation(m)
    else:
        order = np.asarray(order, dtype=np.int64)
        if order.shape != (m,) or not np.array_equal(np.sort(order), np.arange(m)):
            raise ValueError("order must be a permutation of the score positions")
    grid, steps = laplace_grid(delta, 1)
    k = np.rint(q / grid)
    t = round(tau / grid)
    if (k.size and np.max(np.abs(k)) >= MAX_ABS_COUNT) or abs(t) >= MAX_ABS_COUNT:
        raise ValueError("scores and threshold are too large for their grid")
    if 2 * c * steps / eps2 > MAX_DISCRETE_SCALE:
        raise ValueError("epsilon is too small for 64-bit integer noise")
    # discrete Laplace as in discrete_laplace_mechanism (a difference of two geometric
    # variables), drawn directly: this runs once per query set, often in tight loops
    p1 = -math.expm1(-eps1 / steps)
    p2 = -math.expm1(-eps2 / (2 * c * steps))
    rho = int(rng.geometric(p1)) - int(rng.geometric(p1))
    nu = rng.geometric(p2, size=m).astype(np.int64) - rng.geometric(p2, size=m)
    above = k[order].astype(np.int64) + nu >= t + rho
    return order[np.flatnonzero(above)[:c]].astype(np.int64)
