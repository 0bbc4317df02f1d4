"""Smooth sensitivity of the per-class trimmed mean and trimmed variance.

Used by differentially private naive Bayes (Zafarani & Clifton 2021) for the
Gaussian parameters of a numeric attribute within one class, but re-derived
for dpcli's neighbouring relation (docs/design.md rule 1) rather than copied.

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

What the computation reads
--------------------------
T and V read the window's count, mean and sum of squared deviations; the
bounds read n, L, U and the order statistics x_(m-k) and x_(n-m+1+k) for
the distances k that :func:`smooth_max` evaluates (every k of each chunk up
to the one where it stops). Nothing else. The ``*_of`` functions therefore
take an :class:`OrderStatistics` — a sorted array in memory
(:class:`SortedSample`), or a representation holding only those ranks and
the window's moments (:class:`dpcli.stats.order.BandedSample`) — and compute
the SAME terms in the same order from it, so both give the same bound.
:func:`distances_needed` says, from lower and upper bounds on every order
statistic (e.g. a fine histogram's bin edges), how far the evaluation can
reach, before the ranks are gathered.

S depends on the data and is private: use it only to scale noise, e.g.
``smooth_sensitivity_mechanism(T, smooth_sensitivity=S, epsilon=ε, rng=rng, grid=g)``
with ``beta = smooth_beta(ε)`` (Cauchy: β = ε/6, scale 6·S/ε; docs/design.md rule 7).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

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


class OrderStatistics(Protocol):
    """One class sample as the trimmed statistics and their smooth bounds read it.

    ``size`` is n and ``lower``, ``upper`` the declared bounds L < U.
    ``order_stat(j)`` returns x_(j) for an int64 array of ranks j, with
    x_(j) = L for j <= 0 and U for j >= n+1; an implementation that holds
    only some ranks raises LookupError for a rank in 1..n it does not hold.
    ``window_moments(m)`` returns (w, mean, M2) of the window x_(m+1..n-m),
    w = n - 2m >= 1, M2 = the sum of squared deviations from the mean.
    """

    @property
    def size(self) -> int: ...

    @property
    def lower(self) -> float: ...

    @property
    def upper(self) -> float: ...

    def order_stat(self, j: np.ndarray) -> np.ndarray: ...

    def window_moments(self, m: int) -> tuple[int, float, float]: ...


class OrderStatisticBounds(Protocol):
    """Bounds on every order statistic of a class sample whose values are not at hand.

    For every int64 array of ranks j: ``at_least(j)`` <= x_(j) <= ``at_most(j)``
    elementwise, both exact (L, U) outside 1..n. ``size`` is n, the exact size.
    """

    @property
    def size(self) -> int: ...

    @property
    def lower(self) -> float: ...

    @property
    def upper(self) -> float: ...

    def at_least(self, j: np.ndarray) -> np.ndarray: ...

    def at_most(self, j: np.ndarray) -> np.ndarray: ...


class SortedSample:
    """:class:`OrderStatistics` of a sorted array held in memory: every rank, 8 bytes per value.

    The array is validated once (sorted ascending, within [lower, upper]).
    """

    def __init__(self, sorted_values: object, *, lower: object, upper: object) -> None:
        self.values, self._lower, self._upper = check_sorted(sorted_values, lower, upper)

    @property
    def size(self) -> int:
        return int(self.values.size)

    @property
    def lower(self) -> float:
        return self._lower

    @property
    def upper(self) -> float:
        return self._upper

    def order_stat(self, j: np.ndarray) -> np.ndarray:
        return order_stat(self.values, j, self._lower, self._upper)

    def window_moments(self, m: int) -> tuple[int, float, float]:
        """Two-pass: the mean of the slice x[m : n-m], then the sum of squared deviations."""
        window = self.values[m:self.size - m]
        mean = float(np.mean(window))
        deviations = window - mean
        return int(window.size), mean, float(np.dot(deviations, deviations))


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
    sample, m = _sample(sorted_values, m, lower, upper)
    return trimmed_of(sample, m=m)


def trimmed_of(sample: OrderStatistics, *, m: int) -> Trimmed:
    """T, V and the window size of any :class:`OrderStatistics` (see :func:`trimmed_stats`).

    Reads only ``window_moments(m)``, and not even that for an empty window.
    """
    m = check_int("m", m, minimum=0)
    w = sample.size - 2 * m
    if w < 1:
        return Trimmed(mean=(sample.lower + sample.upper) / 2.0, variance=0.0, window=0)
    count, mean, m2 = sample.window_moments(m)
    if count != w:
        raise ValueError(f"window_moments({m}) counted {count} values, expected {w}")
    return Trimmed(mean=mean, variance=m2 / w, window=w)


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
    sample, m = _sample(sorted_values, m, lower, upper)
    distances, scalar = _check_k(k)
    result = _mean_at(_spread(sample, m), sample.size, m, sample.lower, sample.upper, distances)
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
    sample, m = _sample(sorted_values, m, lower, upper)
    distances, scalar = _check_k(k)
    result = _variance_at(_spread(sample, m), sample.size, m, sample.lower, sample.upper,
                          distances)
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
    sample, m = _sample(sorted_values, m, lower, upper)
    return smooth_trimmed_mean_of(sample, m=m, beta=beta)


def smooth_trimmed_variance_with_distances(
    sorted_values: np.ndarray, *, m: int, lower: float, upper: float, beta: float
) -> tuple[float, int]:
    """:func:`smooth_sensitivity_trimmed_variance` and K, the number of distances examined."""
    sample, m = _sample(sorted_values, m, lower, upper)
    return smooth_trimmed_variance_of(sample, m=m, beta=beta)


def smooth_trimmed_mean_of(sample: OrderStatistics, *, m: int, beta: float) -> tuple[float, int]:
    """The trimmed mean's β-smooth bound S and K for any :class:`OrderStatistics`.

    The one implementation behind :func:`smooth_trimmed_mean_with_distances`:
    it reads ``sample.order_stat`` at ranks m-k and n-m+1+k for the distances
    k that :func:`smooth_max` evaluates (at most :func:`distances_needed`).
    Private: only scale noise with S.
    """
    m = check_int("m", m, minimum=0)
    beta = check_positive("beta", beta)
    return _smooth_mean(_spread(sample, m), sample.size, m, sample.lower, sample.upper, beta)


def smooth_trimmed_variance_of(sample: OrderStatistics, *, m: int,
                               beta: float) -> tuple[float, int]:
    """The trimmed variance's β-smooth bound S and K for any :class:`OrderStatistics`.

    Reads the same ranks as :func:`smooth_trimmed_mean_of`. Private: only scale noise with S.
    """
    m = check_int("m", m, minimum=0)
    beta = check_positive("beta", beta)
    return _smooth_variance(_spread(sample, m), sample.size, m, sample.lower, sample.upper, beta)


def distances_needed(bounds: OrderStatisticBounds, *, m: int, mean_beta: float,
                     variance_beta: float) -> int:
    """The largest distance k at which the ``*_of`` functions may read x_(m-k) or x_(n-m+1+k).

    For every sample x of size ``bounds.size`` whose order statistics lie
    within ``bounds``, :func:`smooth_trimmed_mean_of` (β = ``mean_beta``) and
    :func:`smooth_trimmed_variance_of` (β = ``variance_beta``) with this m
    read no rank outside m-K..m and n-m+1..n-m+1+K, K the value returned.

    Why: both run :func:`smooth_max` over terms decay(k)·Â(k), Â(k) a
    non-decreasing function of the spread R_k = x_(n-m+1+k) - x_(m-k) >= 0
    (same denominators; R_k is read only where the denominator is valid, and
    there n-m+1+k > m-k). The spread computed from the bounds,
    max(at_least(n-m+1+k) - at_most(m-k), 0), is at most R_k in floating
    point too (subtraction, the maximum with 0, squaring a non-negative
    number, division by the same positive number, minimum and product with
    the same decay are monotone under rounding; without the maximum with 0 a
    negative spread would square to a large one), so every term, and every
    running maximum, is at most the real one. smooth_max stops at the first k
    where decay(k)·G <= the running maximum: where the bounds' run stops, the
    real one has stopped already, in the same chunk or an earlier one. It
    evaluates whole chunks, so K is the last distance of the chunk where the
    bounds' run stops (or n+1 if it never does). Costs nothing: no data is
    read beyond the bounds, and nothing is released.
    """
    m = check_int("m", m, minimum=0)
    n = bounds.size
    lower, upper = bounds.lower, bounds.upper

    def spread(k: np.ndarray) -> np.ndarray:
        return np.maximum(bounds.at_least(n - m + 1 + k) - bounds.at_most(m - k), 0.0)

    _, stop_mean = _smooth_mean(spread, n, m, lower, upper,
                                check_positive("mean_beta", mean_beta))
    _, stop_variance = _smooth_variance(spread, n, m, lower, upper,
                                        check_positive("variance_beta", variance_beta))
    return max(last_evaluated(stop, max_distance=n + 1) for stop in (stop_mean, stop_variance))


# --- internals (inputs already validated) -------------------------------------------


def _sample(sorted_values: object, m: object, lower: object,
            upper: object) -> tuple[SortedSample, int]:
    return (SortedSample(sorted_values, lower=lower, upper=upper),
            check_int("m", m, minimum=0))


def order_stat(x: np.ndarray, j: np.ndarray, lower: float, upper: float) -> np.ndarray:
    """x_(j) (1-based) with x_(j) = L for j <= 0 and U for j >= n+1."""
    n = x.size
    if n == 0:
        return np.where(j <= 0, lower, upper)
    inside = x[np.clip(j - 1, 0, n - 1)]
    return np.where(j <= 0, lower, np.where(j >= n + 1, upper, inside))


Spread = Callable[[np.ndarray], np.ndarray]


def _spread(sample: OrderStatistics, m: int) -> Spread:
    """k ↦ R_k = x_(n-m+1+k) - x_(m-k)."""
    n = sample.size

    def spread(k: np.ndarray) -> np.ndarray:
        return sample.order_stat(n - m + 1 + k) - sample.order_stat(m - k)

    return spread


def _mean_at(spread: Spread, n: int, m: int, lower: float, upper: float,
             k: np.ndarray) -> np.ndarray:
    bound = upper - lower
    denominator = (n - 2 * m - 1 - k).astype(np.float64)
    valid = denominator >= 1
    result = np.full(k.shape, bound)
    if np.any(valid):
        ratio = spread(k[valid]) / denominator[valid]
        result[valid] = np.minimum(bound, ratio)
    return result


def _variance_at(spread: Spread, n: int, m: int, lower: float, upper: float,
                 k: np.ndarray) -> np.ndarray:
    bound = (upper - lower) ** 2 / 4.0
    denominator = (n - 2 * m - k).astype(np.float64)
    valid = denominator >= 2
    result = np.full(k.shape, bound)
    if np.any(valid):
        r = spread(k[valid])
        result[valid] = np.minimum(bound, 2.0 * r * r / denominator[valid])
    return result


def _smooth_mean(spread: Spread, n: int, m: int, lower: float, upper: float,
                 beta: float) -> tuple[float, int]:
    return smooth_max(lambda k: _mean_at(spread, n, m, lower, upper, k), beta=beta,
                      global_bound=upper - lower, max_distance=n + 1)


def _smooth_variance(spread: Spread, n: int, m: int, lower: float, upper: float,
                     beta: float) -> tuple[float, int]:
    return smooth_max(lambda k: _variance_at(spread, n, m, lower, upper, k), beta=beta,
                      global_bound=(upper - lower) ** 2 / 4.0, max_distance=n + 1)


def last_evaluated(stop: int, *, max_distance: int) -> int:
    """The largest k :func:`smooth_max` evaluated when it returned K = ``stop``.

    It evaluates whole chunks: the last distance of the chunk holding ``stop``,
    or ``max_distance`` when it never stopped (``stop = max_distance + 1``).
    """
    start, chunk = 0, _FIRST_CHUNK
    while start <= max_distance:
        end = min(start + chunk, max_distance + 1)
        if stop < end:
            return end - 1
        start = end
        chunk = min(2 * chunk, _MAX_CHUNK)
    return max_distance


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
