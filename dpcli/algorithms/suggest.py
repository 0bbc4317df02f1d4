"""Private suggestions for undeclared domains: numeric bounds and frequent categories.

``dpcli schema suggest`` releases these for the custodian to review, never to be
applied silently. A declared domain from documentation is better when one
exists: it costs nothing, it does not depend on this file (so it fits next
year's file too), and it cannot cut off real values the way a private
quantile does by design. These releases exist for the columns nobody
documented.

Two mechanisms, both under replace-one neighbours (design notes, rule 1):

* **bounds** — two private quantiles of the column over a public grid of
  candidate values (:func:`candidates`: 0 and ±{1, 2, 5}·10^k for k = −1…9, a
  grid fixed before any data is seen). The utility of candidate c for the
  quantile q is −|#{x ≤ c} − q·n|; one record changes #{x ≤ c} by at most 1,
  so Δ = 1 and the exponential mechanism releases one candidate with ε. The
  lower bound is the q = 0.005 quantile and the upper the q = 0.995 quantile,
  each with half the column's ε: the suggested interval aims to hold 99 % of
  the values (the rest would be clamped), rounded to a readable number by the
  grid itself. Every candidate below the data has the same utility (and every
  one above it), so a data-independent tie-break is added: 2j/ε for the
  j-th candidate for the lower bound (favouring the largest of the tied
  candidates, the round number just below the data), −2j/ε for the upper.
  A term that does not depend on the data leaves Δ at 1; its price is a bias
  of 2/ε records per grid step towards the inside of the interval (the grid is
  coarse — three candidates a decade — so that few steps separate a bound from the
  data).
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

import math
from collections.abc import Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dpcli.mechanisms.exponential import exponential_mechanism
from dpcli.mechanisms.laplace import discrete_laplace_mechanism

#: the share of values the suggested bounds aim to hold
COVERAGE = 0.99
#: one record changes a count by at most this much under replace-one
QUANTILE_SENSITIVITY = 1
HISTOGRAM_SENSITIVITY = 2


def candidates() -> np.ndarray:
    """The public grid of candidate bounds: 0 and ±{1, 2, 5}·10^k, k = −1 … 9, sorted."""
    mags = np.array([m * 10.0 ** k for k in range(-1, 10) for m in (1, 2, 5)])
    return np.unique(np.concatenate([-mags, [0.0], mags]))


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
    prefer·2j/ε: the first term has Δ = 1 under replace-one (n is public;
    one record moves each count by ≤ 1), the second does not depend on the data
    (it breaks ties towards larger candidates for ``prefer`` = 1, smaller for
    −1). Cost: ``epsilon``.
    """
    j = np.arange(at_or_below.size, dtype=float)
    scores = -np.abs(at_or_below.astype(float) - q * n) + prefer * (2.0 / epsilon) * j
    return exponential_mechanism(scores, sensitivity=QUANTILE_SENSITIVITY, epsilon=epsilon,
                                 rng=rng)


def private_bounds(at_or_below: np.ndarray, n: int, epsilon: float,
                   rng: np.random.Generator) -> tuple[float, float]:
    """Suggested [lower, upper] from two private quantiles, ε/2 each: ε-DP in total."""
    grid = candidates()
    tail = (1 - COVERAGE) / 2
    lo = private_quantile(at_or_below, n, tail, epsilon / 2, rng, prefer=1)
    hi = private_quantile(at_or_below, n, 1 - tail, epsilon / 2, rng, prefer=-1)
    lo, hi = min(lo, hi), max(lo, hi)
    if lo == hi:   # a column concentrated on one candidate: widen to its neighbours (public)
        lo, hi = max(lo - 1, 0), min(hi + 1, grid.size - 1)
    return float(grid[lo]), float(grid[hi])


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
