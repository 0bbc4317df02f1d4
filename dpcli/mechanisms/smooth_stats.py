"""Smooth sensitivity of the per-class trimmed mean and trimmed variance.

Used by differentially private naive Bayes (Zafarani & Clifton 2021) for the
Gaussian parameters of a numeric attribute within one class, but re-derived
for dpcli's neighbouring relation (DESIGN.md rule 1) rather than copied.

Setting
-------
dpcli's neighbours replace one record of the whole dataset (n public). The
*class sample* x — the values of one numeric attribute among the records of
class c, already clamped into the declared public bounds [L, U] — therefore
changes by at most ONE EDIT: a substitution (the record stays in class c), a
deletion (it leaves c) or an insertion (it joins c). The class size n = |x|
is private and moves by at most 1 per step. The trimming count m >= 0 is a
fixed public integer (the caller derives it from an already released noisy
class count, e.g. with :func:`trim_count`), not a function of x.

Statistic
---------
x sorted ascending, size n; window W = x_(m+1), ..., x_(n-m) (1-based order
statistics), w = n - 2m. T(x) = mean(W), V(x) = population variance of W
(ddof = 0). If w < 1 (empty window), T = (L+U)/2 and V = 0. Convention for
indices outside 1..n: x_(j) = L for j <= 0 and x_(j) = U for j >= n+1.

Derivation (one edit)
---------------------
An edit moves every order statistic by at most one index: for y one edit from
x, y_(i) ∈ [x_(i-1), x_(i+1)] counting from the bottom and likewise counting
from the top (a deletion shifts the ranks above it down by one, an insertion
shifts them up by one, a substitution is both; the conventions above make
this hold for every integer i), and |n_y - n| <= 1. Hence W(y) = W(x) - {a}
(deletion), W(x) + {b} (insertion) or W(x) - {a} + {b} (substitution): a
deletion below / above the window pulls x_(m+1) / x_(n-m) out of it, an
insertion below / above pushes x_(m) / x_(n-m+1) into it. So a ∈ W and
b ∈ I(x) = [x_(m), x_(n-m+1)], an interval of length
R(x) = x_(n-m+1) - x_(m) that also contains W.

- Mean. A deletion changes T by (T - a)/(w-1), an insertion by
  (b - T)/(w+1), a substitution by (b - a)/w; every numerator is at most R.
  So LS_T(x) <= R(x)/(w-1) when w >= 2. Globally G_T = U - L, since T is
  always in [L, U] (the empty-window fallback included).
- Variance. Inserting b into a multiset of size s with mean μ and variance σ²
  changes the variance by [(s/(s+1))(b-μ)² - σ²]/(s+1); both bracketed terms
  lie in [0, R²] when all points lie in an interval of length R, so the
  change is at most R²/(s+1). A deletion is the reverse (<= R²/w from size w),
  a substitution a deletion then an insertion (<= 2R²/w, all points inside
  I(x)). So LS_V(x) <= 2R(x)²/w when w >= 2. Globally G_V = (U-L)²/4, the
  largest variance of points in [L, U].

Derivation (distance k)
-----------------------
After k edits, y_(i) ∈ [x_(i-k), x_(i+k)] from the bottom and from the top and
n_y >= n - k, so R(y) <= R_k(x) = x_(n-m+1+k) - x_(m-k) and w_y >= n - 2m - k.
The sensitivity at distance k is therefore bounded by

    Â_T(k) = min(G_T, R_k / (n-2m-1-k))   if n-2m-1-k >= 1, else G_T;
    Â_V(k) = min(G_V, 2·R_k² / (n-2m-k))   if n-2m-k >= 2,   else G_V.

Both are non-decreasing in k, and Â(k)(x) <= Â(k+1)(y) for every one-edit
neighbour y: R_k(x) <= R_(k+1)(y) because every order statistic of y is
within one index of x's (from the bottom and from the top), and y's
denominator at k+1 is at most x's at k (n_y <= n + 1), so either y's term is
G or its ratio is at least x's.

Smooth bound (Nissim, Raskhodnikova & Smith 2007, Definition 2.1 of a
β-smooth upper bound): S(x) = max_{k>=0} e^(-βk)·Â(k)(x).
- S >= LS: S(x) >= Â(0)(x) >= LS(x) (the one-edit bound above, and LS <= G).
- Smoothness: for a neighbour y, S(x) = max_k e^(-βk) Â(k)(x)
  <= max_k e^(-βk) Â(k+1)(y) = e^β max_k e^(-β(k+1)) Â(k+1)(y) <= e^β S(y).

Computation
-----------
The paper computes the variance's smooth sensitivity in O(n²) through
k-maximal-variance subsets under a fixed-size relation; the bound here is
valid under the edit relation above and costs O(n log n) for the sort (done
by the caller) plus O(K), K the number of distances examined: the maximum
stops at the first k with e^(-βk)·G <= the current maximum (no later term can
beat it), and k never exceeds n+1 (Â(n+1) = G). Terms are evaluated with
numpy in chunks (4,096 distances, doubling up to 2^20).

S depends on the data and is private: use it only to scale noise, e.g.
``smooth_sensitivity_mechanism(T, smooth_sensitivity=S, epsilon=ε, rng=rng)``
with ``beta = smooth_beta(ε)`` (Cauchy: β = ε/6, scale 6·S/ε; DESIGN.md rule 7).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dpcli.mechanisms.rng import check_int, check_positive, check_real, check_real_array

_FIRST_CHUNK = 4096
_MAX_CHUNK = 1 << 20


@dataclass(frozen=True)
class Trimmed:
    """Trimmed statistics of one class sample (private until released through a mechanism).

    ``mean`` is T, ``variance`` is V (population, ddof = 0) and ``window`` is
    max(n - 2m, 0), the number of values they are computed from.
    """

    mean: float
    variance: float
    window: int


def trim_count(noisy_count: float, fraction: float) -> int:
    """The public trimming count m = floor(fraction · max(noisy_count, 0)).

    ``noisy_count`` must be an already released (noisy) class count, so m is
    post-processing and costs nothing. ``fraction`` must be in [0, 0.5).
    A relative slack of 1e-9 absorbs decimal-to-binary rounding, so that e.g.
    0.29 · 100 gives 29 rather than 28 (0.29 is stored as 0.28999...).
    """
    count = check_real("noisy_count", noisy_count)
    fraction = check_real("fraction", fraction)
    if not 0.0 <= fraction < 0.5:
        raise ValueError("fraction must be in [0, 0.5)")
    product = fraction * max(count, 0.0)
    return math.floor(product + 1e-9 * max(1.0, product))


def trimmed_stats(
    sorted_values: np.ndarray, *, m: int, lower: float, upper: float
) -> Trimmed:
    """T(x), V(x) and the window size; O(n) given sorted input.

    The window is the slice x[m : n-m] of the sorted values; the variance is
    the two-pass mean of squared deviations (numerically stable). An empty
    window gives mean (L+U)/2 and variance 0 (see the module docstring).
    """
    x, m, lower, upper = _check(sorted_values, m, lower, upper)
    return _trimmed(x, m, lower, upper)


def mean_sensitivity_at(
    sorted_values: np.ndarray,
    *,
    m: int,
    lower: float,
    upper: float,
    k: int | np.ndarray,
) -> float | np.ndarray:
    """Â_T(k): bound on the trimmed mean's local sensitivity at every y within k edits.

    Â_T(k) = min(U-L, (x_(n-m+1+k) - x_(m-k)) / (n-2m-1-k)) if n-2m-1-k >= 1,
    else U-L (derivation in the module docstring). ``k`` is a non-negative int
    (float returned) or an integer array (array returned).
    """
    x, m, lower, upper = _check(sorted_values, m, lower, upper)
    distances, scalar = _check_k(k)
    result = _mean_at(x, m, lower, upper, distances)
    return float(result[0]) if scalar else result


def variance_sensitivity_at(
    sorted_values: np.ndarray,
    *,
    m: int,
    lower: float,
    upper: float,
    k: int | np.ndarray,
) -> float | np.ndarray:
    """Â_V(k): bound on the trimmed variance's local sensitivity at every y within k edits.

    Â_V(k) = min((U-L)²/4, 2·(x_(n-m+1+k) - x_(m-k))² / (n-2m-k)) if n-2m-k >= 2,
    else (U-L)²/4 (derivation in the module docstring).
    """
    x, m, lower, upper = _check(sorted_values, m, lower, upper)
    distances, scalar = _check_k(k)
    result = _variance_at(x, m, lower, upper, distances)
    return float(result[0]) if scalar else result


def smooth_sensitivity_trimmed_mean(
    sorted_values: np.ndarray, *, m: int, lower: float, upper: float, beta: float
) -> float:
    """S(x) = max_k e^(-βk)·Â_T(k)(x): a β-smooth upper bound on LS of the trimmed mean.

    Valid under one-edit changes of the class sample, hence under dpcli's
    replace-one neighbours (module docstring). Private: only scale noise with it.
    """
    value, _ = smooth_trimmed_mean_with_distances(
        sorted_values, m=m, lower=lower, upper=upper, beta=beta)
    return value


def smooth_sensitivity_trimmed_variance(
    sorted_values: np.ndarray, *, m: int, lower: float, upper: float, beta: float
) -> float:
    """S(x) = max_k e^(-βk)·Â_V(k)(x): a β-smooth upper bound on LS of the trimmed variance.

    Valid under one-edit changes of the class sample, hence under dpcli's
    replace-one neighbours (module docstring). Private: only scale noise with it.
    """
    value, _ = smooth_trimmed_variance_with_distances(
        sorted_values, m=m, lower=lower, upper=upper, beta=beta)
    return value


def smooth_trimmed_mean_with_distances(
    sorted_values: np.ndarray, *, m: int, lower: float, upper: float, beta: float
) -> tuple[float, int]:
    """:func:`smooth_sensitivity_trimmed_mean` and K, the number of distances examined."""
    x, m, lower, upper = _check(sorted_values, m, lower, upper)
    beta = check_positive("beta", beta)
    return smooth_max(lambda k: _mean_at(x, m, lower, upper, k), beta=beta,
                       global_bound=upper - lower, max_distance=x.size + 1)


def smooth_trimmed_variance_with_distances(
    sorted_values: np.ndarray, *, m: int, lower: float, upper: float, beta: float
) -> tuple[float, int]:
    """:func:`smooth_sensitivity_trimmed_variance` and K, the number of distances examined."""
    x, m, lower, upper = _check(sorted_values, m, lower, upper)
    beta = check_positive("beta", beta)
    return smooth_max(lambda k: _variance_at(x, m, lower, upper, k), beta=beta,
                       global_bound=(upper - lower) ** 2 / 4.0, max_distance=x.size + 1)


# --- internals (inputs already validated) -------------------------------------------


def _trimmed(x: np.ndarray, m: int, lower: float, upper: float) -> Trimmed:
    n = x.size
    w = n - 2 * m
    if w < 1:
        return Trimmed(mean=(lower + upper) / 2.0, variance=0.0, window=0)
    window = x[m:n - m]
    mean = float(np.mean(window))
    deviations = window - mean
    variance = float(np.dot(deviations, deviations) / w)
    return Trimmed(mean=mean, variance=variance, window=w)


def order_stat(x: np.ndarray, j: np.ndarray, lower: float, upper: float) -> np.ndarray:
    """x_(j) (1-based) with x_(j) = L for j <= 0 and U for j >= n+1."""
    n = x.size
    if n == 0:
        return np.where(j <= 0, lower, upper)
    inside = x[np.clip(j - 1, 0, n - 1)]
    return np.where(j <= 0, lower, np.where(j >= n + 1, upper, inside))


def _range_at(x: np.ndarray, m: int, lower: float, upper: float, k: np.ndarray) -> np.ndarray:
    """R_k = x_(n-m+1+k) - x_(m-k)."""
    n = x.size
    return order_stat(x, n - m + 1 + k, lower, upper) - order_stat(x, m - k, lower, upper)


def _mean_at(x: np.ndarray, m: int, lower: float, upper: float, k: np.ndarray) -> np.ndarray:
    bound = upper - lower
    denominator = (x.size - 2 * m - 1 - k).astype(np.float64)
    valid = denominator >= 1
    result = np.full(k.shape, bound)
    if np.any(valid):
        ratio = _range_at(x, m, lower, upper, k[valid]) / denominator[valid]
        result[valid] = np.minimum(bound, ratio)
    return result


def _variance_at(x: np.ndarray, m: int, lower: float, upper: float, k: np.ndarray) -> np.ndarray:
    bound = (upper - lower) ** 2 / 4.0
    denominator = (x.size - 2 * m - k).astype(np.float64)
    valid = denominator >= 2
    result = np.full(k.shape, bound)
    if np.any(valid):
        spread = _range_at(x, m, lower, upper, k[valid])
        result[valid] = np.minimum(bound, 2.0 * spread * spread / denominator[valid])
    return result


def smooth_max(
    at: Callable[[np.ndarray], np.ndarray],
    *,
    beta: float,
    global_bound: float,
    max_distance: int,
) -> tuple[float, int]:
    """max_{0<=k<=max_distance} e^(-βk)·at(k) and the number K of distances needed.

    K is the first k at which e^(-βk)·global_bound <= the maximum over smaller
    k (every later term is at most that), or max_distance + 1. Chunks are
    evaluated whole, so the value is the maximum of every term computed; the
    terms are e^(-βk)·at(k) exactly as a plain maximum over all k computes them.
    """
    best = 0.0
    start = 0
    chunk = _FIRST_CHUNK
    while start <= max_distance:
        k = np.arange(start, min(start + chunk, max_distance + 1), dtype=np.int64)
        decay = np.exp(-beta * k)
        terms = decay * at(k)
        # maximum over all earlier distances, for each k of the chunk
        earlier = np.maximum.accumulate(np.concatenate(([best], terms[:-1])))
        stopped = np.flatnonzero(decay * global_bound <= earlier)
        best = max(best, float(np.max(terms)))
        if stopped.size:
            return best, start + int(stopped[0])
        start += k.size
        chunk = min(2 * chunk, _MAX_CHUNK)
    return best, max_distance + 1


def _check(
    sorted_values: object, m: object, lower: object, upper: object
) -> tuple[np.ndarray, int, float, float]:
    x, lower, upper = check_sorted(sorted_values, lower, upper)
    return x, check_int("m", m, minimum=0), lower, upper


def check_sorted(sorted_values: object, lower: object, upper: object
                 ) -> tuple[np.ndarray, float, float]:
    """A 1-D float array sorted ascending within [lower, upper], lower < upper; else ValueError."""
    lower = check_real("lower", lower)
    upper = check_real("upper", upper)
    if not lower < upper:
        raise ValueError("lower must be less than upper")
    x = check_real_array("sorted_values", sorted_values)
    if x.ndim != 1:
        raise ValueError("sorted_values must be one-dimensional")
    if x.size:
        if not bool(np.all(x[1:] >= x[:-1])):
            raise ValueError("sorted_values must be sorted ascending (and contain no NaN)")
        if not (x[0] >= lower and x[-1] <= upper):
            raise ValueError("sorted_values must lie within [lower, upper] (clamp them first)")
    return x, lower, upper


def _check_k(k: object) -> tuple[np.ndarray, bool]:
    if isinstance(k, numbers.Integral) and not isinstance(k, bool | np.bool_):
        return np.array([check_int("k", k, minimum=0)], dtype=np.int64), True
    array = np.asarray(k)
    if array.dtype.kind not in "iu":
        raise TypeError("k must be an integer or an integer array")
    if array.size and int(array.min()) < 0:
        raise ValueError("k must be non-negative")
    return array.astype(np.int64, copy=False), False
