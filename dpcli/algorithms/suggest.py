"""Private suggestions for undeclared domains: numeric bounds and frequent categories.

``dpcli schema suggest`` releases these for the custodian to review, never to be
applied silently. A declared domain from documentation is better when one
exists: it costs nothing, it does not depend on this file (so it fits next
year's file too), and it cannot cut off real values the way a private
quantile does by design. These releases exist for the columns nobody
documented.

Two mechanisms, both under replace-one neighbours (design notes, rule 1):

* **bounds** — two private quantiles of the column over a public grid of
  candidate values (:func:`candidates`: 0 and ± every number of two significant
  digits from 0.10 to 9.9·10⁹ — 1.0, 1.1, …, 9.9 times 10^k for k = −1…9 — a
  grid fixed before any data is seen). The utility of candidate c for the
  quantile q is −|#{x ≤ c} − q·n|; one record changes #{x ≤ c} by at most 1,
  so Δ = 1 and the exponential mechanism releases one candidate with ε. The
  lower bound is the q = 0.005 quantile and the upper the q = 0.995 quantile,
  each with half the column's ε: the suggested interval aims to hold 99 % of
  the values (the rest would be clamped), rounded to a readable number by the
  grid itself. Every candidate below the data has the same utility (and every
  one above it), so a data-independent tie-break is added: w·j for the
  j-th candidate for the lower bound (favouring the largest of the tied
  candidates, the round number just below the data), −w·j for the upper,
  with w = min(2/ε, n/(2K)) records per step (K candidates). A term that does
  not depend on the data (n is public) leaves Δ at 1; its price is a bias of w
  records per grid step towards the inside of the interval. The cap n/(2K)
  keeps the whole tie-break below n/2 records, while a candidate on the wrong
  side of the data loses at least (1 − 2q)·n ≥ 0.9·n of data utility: an
  uncapped 2/ε at a small ε outweighed the data term itself (2·67/0.025 > n at
  n = 2,100 on the grid of 67 candidates) and put the upper bound at −5·10⁹.
* **why two significant digits** — the grid is scale-only (no offset is
  learned), so its spacing near a column's values decides how tight a bound
  can be. A column far from zero, such as a year 2003–2009, got [1000, 5000]
  or at best [2000, 5000] from the earlier grid of 1, 2 and 5 per decade: a
  clamp range 500 times the data's, and naive Bayes' mean noise with it. Two
  significant digits give [1900–2000, 2100–2200]. The price is in ln K (K =
  1,981 candidates against 67): the coverage rule below needs n·ε about
  1.47 times larger for the same coverage. So the two-digit grid is used only
  where n and the column's ε resolve the full 99 % coverage with it (n·ε ≥
  about 8,500, :func:`fine_grid`); below that the 67 round numbers 0,
  ±{1, 2, 5}·10^k (a subset of it) are used as before, and small files are
  suggested exactly what they were. The choice is a function of n and ε, both
  public; the counts are taken once on the fine grid and the coarse one reads
  its subset.
* **how much to cover** — a quantile q is resolved only where its target
  count q·n is large against the noise: the exponential mechanism prefers a
  candidate near the quantile to one of the K − 1 others (each off by up to
  q·n records) with odds at least 1/β when ε_q·q·n/2 ≥ ln K + ln(1/β). So
  the tail q is the least of 0.005 (99 % coverage) and 2(ln K + ln 20)/(ε_q·n)
  (β = 0.05), and a column whose tail would pass 0.05 (less than 90 %
  coverage) is refused before any charge, with the ε that would resolve it
  (:func:`bounds_tail`, :func:`bounds_epsilon`). Both are functions of n and ε,
  public facts.
* **categories** — the values of a column whose noisy count reaches a
  threshold: a stability-based histogram. Counts get discrete Laplace noise
  of scale 2/ε (one record leaves one value's count and enters another's: L1
  sensitivity 2), and only values whose noisy count is at least
  τ = 1 + k are released, with k the smallest integer such that
  P(Z ≥ k) ≤ δ/2 for that noise. A value present in one neighbour and absent
  from the other has count 1 there; at most two values are such (the replaced
  record's and its replacement's), each released with probability ≤ δ/2: the
  release is (ε, δ)-DP. Only the names are released, not the counts.

Missing values are ignored by both (they count in n, which is public).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dpcli.mechanisms.exponential import exponential_mechanism
from dpcli.mechanisms.laplace import discrete_laplace_mechanism

#: the share of values the suggested bounds aim to hold (when n and ε resolve it)
COVERAGE = 0.99
#: below this coverage a bound is not suggested (refused before the charge)
MIN_COVERAGE = 0.90
#: the chance that a quantile lands away from its target that the coverage rule accepts
RESOLVE_FAILURE = 0.05
#: one record changes a count by at most this much under replace-one
QUANTILE_SENSITIVITY = 1
HISTOGRAM_SENSITIVITY = 2


@functools.cache
def candidates() -> np.ndarray:
    """The public grid of candidate bounds: 0 and ±m·10^k for every two-digit mantissa m =
    1.0, 1.1, …, 9.9 and k = −1 … 9, sorted (1,981 values). Each is the double nearest its
    decimal, so a suggestion prints as the round number it is (0.11, not 0.11000000000000001).
    Counts are taken on this grid; :func:`grid_mask` picks the part a release uses."""
    mags = np.array([float(f"{m}e{k - 1}") for k in range(-1, 10) for m in range(10, 100)])
    grid = np.unique(np.concatenate([-mags, [0.0], mags]))
    grid.flags.writeable = False    # cached: one public grid per process
    return grid


@functools.cache
def _coarse_mask() -> np.ndarray:
    """The candidates 0 and ±{1, 2, 5}·10^k (67 of them), a subset of :func:`candidates`."""
    coarse = [float(f"{m}e{k}") for k in range(-1, 10) for m in (1, 2, 5)]
    mask = np.isin(candidates(), [0.0, *coarse, *(-c for c in coarse)])
    mask.flags.writeable = False
    return mask


def _need(k: int) -> float:
    """(ε/2)·q·n at which a quantile over k candidates is resolved (module docstring)."""
    return 2 * (math.log(k) + math.log(1 / RESOLVE_FAILURE))


def fine_grid(n: int, epsilon: float) -> bool:
    """Whether the two-digit grid is used at n records and the column's ε: only where it
    resolves the full COVERAGE; elsewhere the 67 round numbers, whose smaller ln K resolves
    more (public facts only; module docstring, "why two significant digits")."""
    return _need(candidates().size) / ((epsilon / 2) * n) <= (1 - COVERAGE) / 2


def grid_mask(n: int, epsilon: float) -> np.ndarray:
    """The candidates a release at (n, ε) chooses among, as a mask on :func:`candidates`."""
    return np.ones(candidates().size, dtype=bool) if fine_grid(n, epsilon) else _coarse_mask()


def count_at_or_below(values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """#{x ≤ c} for every candidate c (NaN values ignored); additive over batches."""
    values = values[~np.isnan(values)]
    below = np.searchsorted(grid, values, side="left")   # first candidate ≥ x
    hist = np.bincount(below, minlength=grid.size + 1)[:grid.size]
    return np.cumsum(hist)


def private_quantile(at_or_below: np.ndarray, n: int, q: float, epsilon: float,
                     rng: np.random.Generator, prefer: int = 0) -> int:
    """The index of a grid candidate near the q-quantile: ε-DP (exponential mechanism).

    Releases: one index into the public grid. Utility −|#{x ≤ c_j} − q·n| +
    prefer·w·j (w = :func:`tie_break`): the first term has Δ = 1 under replace-one (n is public;
    one record moves each count by ≤ 1), the second does not depend on the data
    (it breaks ties towards larger candidates for ``prefer`` = 1, smaller for
    −1). Cost: ``epsilon``.
    """
    j = np.arange(at_or_below.size, dtype=float)
    step = tie_break(n, epsilon, at_or_below.size)
    scores = -np.abs(at_or_below.astype(float) - q * n) + prefer * step * j
    return exponential_mechanism(scores, sensitivity=QUANTILE_SENSITIVITY, epsilon=epsilon,
                                 rng=rng)


def private_bounds(at_or_below: np.ndarray, n: int, epsilon: float,
                   rng: np.random.Generator) -> tuple[float, float]:
    """Suggested [lower, upper] from two private quantiles, ε/2 each: ε-DP in total.
    ``at_or_below`` holds the counts on the whole of :func:`candidates`."""
    mask = grid_mask(n, epsilon)
    grid, at_or_below = candidates()[mask], at_or_below[mask]
    tail = bounds_tail(n, epsilon)
    if tail is None:
        raise ValueError(f"n = {n} and ε = {epsilon} cannot resolve bounds (see bounds_tail)")
    lo = private_quantile(at_or_below, n, tail, epsilon / 2, rng, prefer=1)
    hi = private_quantile(at_or_below, n, 1 - tail, epsilon / 2, rng, prefer=-1)
    lo, hi = min(lo, hi), max(lo, hi)
    if lo == hi:   # a column concentrated on one candidate: widen to its neighbours (public)
        lo, hi = max(lo - 1, 0), min(hi + 1, grid.size - 1)
    return float(grid[lo]), float(grid[hi])


def tie_break(n: int, epsilon: float, k: int) -> float:
    """Records per grid step of the data-independent tie-break: min(2/ε, n/(2k))."""
    return min(2.0 / epsilon, n / (2.0 * k))


def bounds_tail(n: int, epsilon: float) -> float | None:
    """The tail share q each private quantile aims at, from public facts (n, the column's ε):
    (1 − COVERAGE)/2 when ε/2 resolves it, else the least q with (ε/2)·q·n/2 ≥ ln K +
    ln(1/β), K the size of the grid :func:`fine_grid` picks; None when that q passes
    (1 − MIN_COVERAGE)/2 (module docstring)."""
    need = _need(int(grid_mask(n, epsilon).sum()))
    tail = max((1 - COVERAGE) / 2, need / ((epsilon / 2) * n))
    return tail if tail <= (1 - MIN_COVERAGE) / 2 else None


def bounds_epsilon(n: int, coverage: float = COVERAGE) -> float:
    """The column ε at which :func:`bounds_tail` reaches ``coverage`` at n records, on the
    67 round numbers (the two-digit grid is used only above this where coverage is full)."""
    need = _need(int(_coarse_mask().sum()))
    return 2 * need / (n * (1 - coverage) / 2)


def threshold(epsilon: float, delta: float) -> int:
    """τ = 1 + k, k the least integer with P(Z ≥ k) ≤ δ/2 for Z discrete Laplace of scale
    2/ε (P(Z ≥ k) = t^k / (1 + t), t = e^(−ε/2))."""
    t = math.exp(-epsilon / HISTOGRAM_SENSITIVITY)
    k = math.ceil(math.log((delta / 2) * (1 + t)) / math.log(t))
    return 1 + max(k, 0)


def frequent_values(counts: Mapping[str, int], epsilon: float, delta: float,
                    rng: np.random.Generator) -> list[str]:
    """The values whose noisy count reaches :func:`threshold`: (ε, δ)-DP, names only, sorted.

    Releases: a set of values that occur in the data. Counts get discrete
    Laplace noise of scale 2/ε (L1 sensitivity 2); the threshold bounds the
    chance that a value held by a single record is released by δ/2 (see the
    module's docstring). Cost: (``epsilon``, ``delta``).
    """
    if not counts:
        return []
    names = sorted(counts)
    exact = np.array([counts[v] for v in names], dtype=np.int64)
    noisy = discrete_laplace_mechanism(exact, sensitivity=HISTOGRAM_SENSITIVITY,
                                       epsilon=epsilon, rng=rng)
    tau = threshold(epsilon, delta)
    return [v for v, c in zip(names, np.asarray(noisy), strict=True) if c >= tau]


def add_counts(into: dict[str, int], values: pa.Array | Iterable[str | None]) -> None:
    """Count each non-missing value (additive over batches): Arrow counts a batch's distinct
    values, so Python touches each distinct value once per batch, not each row."""
    arr = values if isinstance(values, pa.Array) else pa.array(list(values), pa.string())
    counted = pc.value_counts(arr.drop_null())
    for v, k in zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist(),
                    strict=True):
        into[v] = into.get(v, 0) + k
