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
  ε-DP under one step (DESIGN.md rule 7; :mod:`dpcli.mechanisms.smooth`).

The window is one order statistic wider than the max over windows of
Nissim et al.'s substitution-only bound; the cost of the add/remove relation
is the factor 2 in the level's budget, not the window. Computation is O(K)
with K the number of distances examined (early stop, as for the trimmed mean).
"""

from __future__ import annotations

import numpy as np

from dpcli.mechanisms.rng import check_positive
from dpcli.mechanisms.smooth import heavy_tailed_noise, smooth_beta, smooth_noise_scale
from dpcli.mechanisms.smooth_stats import check_sorted, order_stat, smooth_max


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
    return _window(x, lower, upper, np.asarray(k, dtype=np.int64))


def smooth_sensitivity_median(sorted_values: np.ndarray, *, lower: float, upper: float,
                              beta: float) -> float:
    """S(x) = max_k e^(-βk)·W_k(x): a β-smooth upper bound on the median's LS (add/remove).

    Private (it depends on the data): use it only to scale noise.
    """
    x, lower, upper = check_sorted(sorted_values, lower, upper)
    beta = check_positive("beta", beta)
    value, _ = smooth_max(lambda k: _window(x, lower, upper, k), beta=beta,
                          global_bound=upper - lower, max_distance=x.size + 1)
    return value


def noisy_median(sorted_values: np.ndarray, *, lower: float, upper: float, epsilon: float,
                 rng: np.random.Generator, gamma: float = 2.0) -> float:
    """Release the lower median plus 2(γ+1)·S/ε · Z: ε-DP under one insertion or deletion.

    Releases: one real number, which may fall outside [lower, upper] (the
    caller may replace it by any function of the released value and public
    bounds, e.g. the midpoint). Sensitivity: S = :func:`smooth_sensitivity_median`
    with β = ε/(2(γ+1)). Noise: heavy-tailed, density ∝ 1/(1+|z|^γ)
    (γ = 2: Cauchy, scale 6·S/ε). Cost: ε (δ = 0) under the add/remove
    relation; a substitution inside the sample is two steps, 2ε.
    """
    epsilon = check_positive("epsilon", epsilon)
    x, lower, upper = check_sorted(sorted_values, lower, upper)
    sensitivity = smooth_sensitivity_median(x, lower=lower, upper=upper,
                                            beta=smooth_beta(epsilon, gamma))
    median = float(order_stat(x, np.array([(x.size + 1) // 2]), lower, upper)[0])
    scale = smooth_noise_scale(sensitivity, epsilon, gamma)
    return median + scale * float(heavy_tailed_noise(1, gamma=gamma, rng=rng)[0])


def _window(x: np.ndarray, lower: float, upper: float, k: np.ndarray) -> np.ndarray:
    c = (x.size - k + 1) // 2
    return order_stat(x, c + k + 1, lower, upper) - order_stat(x, c - 1, lower, upper)
