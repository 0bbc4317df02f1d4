"""The noisy median by smooth sensitivity, private when records move between samples.

Used by k-RecursiveMedians (Stoddard, Chen & Machanavajjhala 2014, Algorithm
4) to choose ROC thresholds, re-derived for dpcli's neighbours.

Why add/remove and not replace-one
----------------------------------
k-RecursiveMedians splits the data at each noisy median and recurses into
the parts. Under replace-one neighbours of the whole test set, the changed
record can leave one part and the new one can join another: each part then
sees an *insertion or a deletion*, not a substitution, and the part sizes
are private. The paper's proof applies parallel composition to medians that
are private under substitution only. Here the median is ε-DP under one
insertion or deletion ("one step"); a replace-one change is at most two
steps in total across the parts of one level (one step in each of two
parts, or two in the same part), so a level whose parts each use ε costs
2ε. Callers give each part half the level's budget.

Statistic
---------
x sorted ascending, size n >= 0, within the public interval [L, U]; the
lower median f(x) = x_(m) with m = floor((n+1)/2), and the conventions
x_(j) = L for j <= 0 and x_(j) = U for j >= n+1 (so f(empty) = L).

Derivation
----------
One step moves every order statistic by at most one index: an insertion
gives y_(j) ∈ [x_(j-1), x_(j)], a deletion y_(j) ∈ [x_(j), x_(j+1)] (for every
integer j, with the conventions). After a insertions and b deletions,
y_(j) ∈ [x_(j-a), x_(j+b)] and y has n + a - b values.

- Local sensitivity at y: a step from y moves the median to within
  [y_(m_y - 1), y_(m_y + 1)], m_y = floor((n_y+1)/2), so
  LS(y) <= y_(m_y+1) - y_(m_y-1).
- Distance k (a + b = k): y_(m_y+1) - y_(m_y-1) <= x_(m_y+1+b) - x_(m_y-1-a).
  With m_y = floor((n + 2a - k + 1)/2) = a + c_k, c_k = floor((n - k + 1)/2),
  both ends are independent of the mix (a, b): every y within k steps has
  LS(y) <= W_k(x) = x_(c_k + k + 1) - x_(c_k - 1), a single window of k + 2
  order statistics around the median (the windows for a + b < k lie inside
  it). W_0 = x_(m+1) - x_(m-1) >= LS(x). W_k is non-decreasing in k and
  reaches U - L at k = n + 1.
- Smoothness: for a one-step neighbour x', W_k(x) <= W_(k+1)(x'). For an
  insertion x'_(j+1) >= x_(j) and x'_(j) <= x_(j), with n' = n + 1 and
  c'_(k+1) = c_k; for a deletion x'_(j) >= x_(j), x'_(j-1) <= x_(j) and
  c'_(k+1) = c_k - 1: either way both ends of x's window at k lie inside
  x''s window at k + 1. So S(x) = max_k e^(-βk)·W_k(x) satisfies S(x) >= LS(x) and
  S(x) <= e^β·S(x') (Nissim, Raskhodnikova & Smith 2007, Definition 2.1),
  and f(x) + 2(γ+1)·S(x)/ε · Z with Z ∝ 1/(1+|z|^γ), β = ε/(2(γ+1)), is
  ε-DP under one step (docs/design.md rule 7; :mod:`dpcli.mechanisms.smooth`).
  What is released is its float-safe version: f rounded to a public grid
  plus integer noise with P(k) ∝ 1/(1+|k/t|^γ), S + grid paying for the
  rounding (:func:`dpcli.mechanisms.smooth.smooth_sensitivity_mechanism`).

The window is one order statistic wider than the max over windows of
Nissim et al.'s substitution-only bound; the cost of the add/remove relation
is the factor 2 in the level's budget, not the window. Computation is O(K)
with K the number of distances examined (early stop, as for the trimmed mean).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dpcli.mechanisms.rng import check_int, check_positive
from dpcli.mechanisms.smooth import smooth_beta, smooth_grid, smooth_sensitivity_mechanism
from dpcli.mechanisms.smooth_stats import check_sorted, order_stat, smooth_max

OrderStat = Callable[[np.ndarray], np.ndarray]
"""j ↦ x_(j) (1-based, integer array), with x_(j) = L for j <= 0 and U for j >= n + 1."""


def lower_median(sorted_values: np.ndarray, *, lower: float, upper: float) -> float:
    """f(x) = x_(floor((n+1)/2)), and ``lower`` for an empty sample (private)."""
    x, lower, upper = check_sorted(sorted_values, lower, upper)
    return float(order_stat(x, np.array([(x.size + 1) // 2]), lower, upper)[0])


def median_sensitivity_at(sorted_values: np.ndarray, *, lower: float, upper: float,
                          k: np.ndarray) -> np.ndarray:
    """W_k(x) = x_(c_k+k+1) - x_(c_k-1), c_k = floor((n-k+1)/2), for an integer array ``k``.

    Bounds the median's local sensitivity at every sample within k insertions
    or deletions of x (module docstring).
    """
    x, lower, upper = check_sorted(sorted_values, lower, upper)
    return _window(_of_array(x, lower, upper), x.size, np.asarray(k, dtype=np.int64))


def smooth_sensitivity_median(sorted_values: np.ndarray, *, lower: float, upper: float,
                              beta: float) -> float:
    """S(x) = max_k e^(-βk)·W_k(x): a β-smooth upper bound on the median's LS (add/remove).

    Private (it depends on the data): use it only to scale noise.
    """
    x, lower, upper = check_sorted(sorted_values, lower, upper)
    return smooth_sensitivity_median_of(_of_array(x, lower, upper), x.size,
                                        global_bound=upper - lower, beta=beta)


def smooth_sensitivity_median_of(order_stats: OrderStat, n: int, *, global_bound: float,
                                 beta: float) -> float:
    """:func:`smooth_sensitivity_median` of a sample of size n known by its order statistics.

    ``order_stats`` follows the conventions of the module docstring on the
    interval [L, U] with U − L = ``global_bound``; e.g. counts per cell of a
    histogram (dpcli.algorithms.roc), never rows. Private: scales noise only.
    """
    n = check_int("n", n, minimum=0)
    beta = check_positive("beta", beta)
    value, _ = smooth_max(lambda k: _window(order_stats, n, k), beta=beta,
                          global_bound=global_bound, max_distance=n + 1)
    return value


def noisy_median(sorted_values: np.ndarray, *, lower: float, upper: float, epsilon: float,
                 rng: np.random.Generator, gamma: float = 2.0) -> float:
    """Release the lower median on a public grid with discrete heavy-tailed noise: ε-DP.

    Releases: one real number, a multiple of the grid g = smooth_grid(U − L)
    (2^-30 of the range, rounded down to a power of two), which may fall
    outside [lower, upper] (the caller may replace it by any function of the
    released value and public bounds, e.g. the midpoint). Sensitivity:
    S = :func:`smooth_sensitivity_median` with β = ε/(2(γ+1)), plus one grid
    step for the rounding (S + g is β-smooth). Noise: g·K with
    P(K = k) ∝ 1/(1 + |k/t|^γ), t = 2(γ+1)(S + g)/(ε·g)
    (:func:`dpcli.mechanisms.smooth.smooth_sensitivity_mechanism`, where the
    discrete version's guarantee is proved). Cost: ε (δ = 0) under the
    add/remove relation; a substitution inside the sample is two steps, 2ε.
    """
    epsilon = check_positive("epsilon", epsilon)
    x, lower, upper = check_sorted(sorted_values, lower, upper)
    return noisy_median_of(_of_array(x, lower, upper), x.size, global_bound=upper - lower,
                           epsilon=epsilon, rng=rng, gamma=gamma,
                           grid=smooth_grid(upper - lower))


def noisy_median_of(order_stats: OrderStat, n: int, *, global_bound: float, epsilon: float,
                    rng: np.random.Generator, grid: float, gamma: float = 2.0,
                    on_grid: bool = False) -> float:
    """:func:`noisy_median` of a sample known by its order statistics, on a public ``grid``.

    ``on_grid=True`` when every order statistic (and L, U) is a multiple of
    ``grid``: the median is then on the grid and the rounding costs nothing
    (e.g. cell indices of a histogram, grid 1: dpcli.algorithms.roc).
    Releases a multiple of ``grid``; ε-DP under one insertion or deletion.

    Floating point: at large n the smooth bound's terms e^(-βk)·A(k) can
    underflow to 0 (with ``on_grid`` the noise is then 0). That happens only
    where the bound's exact value is below ~1e-308 on this sample and, by
    β-smoothness, below e^β·1e-308 on every neighbour, whose median is then the
    same: the two output distributions differ on an event of probability about
    (1e-308)^γ, an additive δ far below anything the ledger records.
    """
    epsilon = check_positive("epsilon", epsilon)
    n = check_int("n", n, minimum=0)
    sensitivity = smooth_sensitivity_median_of(order_stats, n, global_bound=global_bound,
                                               beta=smooth_beta(epsilon, gamma))
    median = float(order_stats(np.array([(n + 1) // 2]))[0])
    return float(smooth_sensitivity_mechanism(median, smooth_sensitivity=sensitivity,
                                              epsilon=epsilon, gamma=gamma, rng=rng,
                                              grid=grid, on_grid=on_grid))


def _of_array(x: np.ndarray, lower: float, upper: float) -> OrderStat:
    return lambda j: order_stat(x, j, lower, upper)


def _window(order_stats: OrderStat, n: int, k: np.ndarray) -> np.ndarray:
    c = (n - k + 1) // 2
    return order_stats(c + k + 1) - order_stats(c - 1)
