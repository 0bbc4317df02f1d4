"""Order statistics near where they matter, in memory bounded by statistics, not rows.

Why: the smooth-sensitivity release of a trimmed mean and variance
(:mod:`dpcli.mechanisms.smooth_stats`) reads, per class sample of a numeric
column, only

- the count, mean and sum of squared deviations of the window
  x_(m+1) .. x_(n-m) (m the public trimming count), and
- the order statistics x_(m-k) and x_(n-m+1+k) for the distances k its
  maximum evaluates (k = 0 .. K; x_(j) = L for j <= 0, U for j >= n+1).

Keeping every value, sorted, costs 8 bytes per row and column. This module
gets the same numbers from two kinds of statistics instead.

**Pass 1** (the run's statistics pass, :class:`~dpcli.stats.engine.StatsRequest`
``histograms``): per class, the counts of a fine histogram of ``ORDER_BINS``
= 2^16 equal-width bins over the declared [L, U] (exact binning:
:func:`~dpcli.stats.accumulators.bin_index` against
:func:`~dpcli.stats.accumulators.histogram_edges`). It gives n exactly, the
bin of every rank, and for every rank j a lower and an upper bound on x_(j)
(its bin's edges): :class:`HistogramBounds`. From those bounds and the
public m and β, :func:`dpcli.mechanisms.smooth_stats.distances_needed` gives
K, a distance the smooth bound provably never reads beyond.

**Pass 2** (a re-read of the file, once the noisy class counts have given m):
per class, :class:`BandAccumulator` keeps

- *the kept bins*: the values, as sorted DISTINCT values with multiplicities,
  of the bins that hold ranks m-K .. m+1 and n-m .. n-m+1+K (two runs of
  adjacent bins; the window's two boundary bins are among them);
- *the inside bins*: count, mean and M2 (Chan et al.'s merge) of the values
  in the bins strictly between the window's boundary bins — the rest of the
  window, whose values are never needed one by one;
- a second copy of the histogram, compared with pass 1's so that a file that
  changed between the passes is an error, not a wrong rank.

:class:`BandedSample` then answers x_(j) for every rank the bound reads, and
the window's moments (inside bins merged with the window's share of the kept
values): the same order statistics and, up to the order of floating-point
summation, the same moments as the sorted array.

Memory per numeric column and class: two 2^16-bin int64 histograms (1 MiB)
and two masks of the bins (128 KiB), three floats for the inside bins, and
16 bytes per distinct value in the kept bins (value and multiplicity). That
is at most the number of values in those bins, and at most
floor((U - L) / 2^16) + 1 per kept bin for integer-valued data (one for a
declared range under 2^16 units; 23 for Adult's fnlwgt over [0, 1.5e6]): it
does not grow with the rows. Continuous data with all values distinct keep
each kept bin's share of the rows (about n / 2^16 per bin if spread evenly
over [L, U]); continuous values crowded into a few bins of wide declared
bounds keep most of their rows — declare bounds that fit the data. The
kept bins cover about 2(K + 1) ranks, K >= 4,095 (the
first chunk of distances the maximum evaluates, or n + 1 if that is smaller).

Passes: exactly two; K is a guaranteed bound, so no further pass is ever
needed (were it ever wrong, :meth:`BandedSample.order_stat` raises rather
than guess, and nothing is released). Both happen after the run's charge.
Nothing here is released: which bins are kept depends on the private data,
but it only decides what is held in memory — the mechanisms receive the
numbers the sorted sample would give them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dpcli.data.encode import EncodedBatch
from dpcli.data.schema import NumericColumn
from dpcli.errors import DataError
from dpcli.stats.accumulators import Accumulator, bin_index

ORDER_BINS = 1 << 16
"""Bins of the pass-1 histogram per numeric column and class (512 KiB each)."""

_COMPACT_AT = 1 << 16


class HistogramBounds:
    """Bounds on every order statistic of one class sample from its histogram counts.

    For a rank j in 1..n in bin b (the first bin whose cumulative count
    reaches j): edges[b] <= x_(j) < edges[b+1] (<= U in the last bin), because
    :func:`~dpcli.stats.accumulators.bin_index` puts a value in bin b exactly
    when edges[b] <= x < edges[b+1]. Outside 1..n the conventions L and U are
    exact. Satisfies :class:`dpcli.mechanisms.smooth_stats.OrderStatisticBounds`.
    """

    def __init__(self, counts: np.ndarray, edges: np.ndarray, *, lower: float,
                 upper: float) -> None:
        self.cumulative = np.cumsum(np.asarray(counts, dtype=np.int64))
        self.edges = np.asarray(edges, dtype=np.float64)
        if self.edges.size != self.cumulative.size + 1 or self.edges.size < 2:
            raise ValueError("a histogram of b >= 1 bins needs b + 1 edges")
        if not (self.edges[0] == lower and self.edges[-1] == upper):
            raise ValueError("the histogram's outer edges must be the declared bounds")
        self.lower, self.upper = float(lower), float(upper)

    @property
    def size(self) -> int:
        return int(self.cumulative[-1])

    def bin_of(self, j: np.ndarray) -> np.ndarray:
        """The bin of each rank j in 1..n."""
        return np.searchsorted(self.cumulative, j, side="left")

    def at_least(self, j: np.ndarray) -> np.ndarray:
        return self._edge(np.asarray(j, dtype=np.int64), 0)

    def at_most(self, j: np.ndarray) -> np.ndarray:
        return self._edge(np.asarray(j, dtype=np.int64), 1)

    def _edge(self, j: np.ndarray, side: int) -> np.ndarray:
        n = self.size
        out = np.where(j <= 0, self.lower, self.upper)
        held = (j >= 1) & (j <= n)
        if held.any():
            out[held] = self.edges[self.bin_of(j[held]) + side]
        return out


@dataclass(frozen=True)
class Band:
    """Which bins of one class sample pass 2 keeps (``keep``) or only sums (``inside``).

    ``m`` is the public trimming count and ``distances`` the K of
    :func:`~dpcli.mechanisms.smooth_stats.distances_needed`: ranks
    m-K .. m+1 and n-m .. n-m+1+K (within 1..n) lie in kept bins; the bins
    strictly between those of ranks m+1 and n-m are inside the window.
    """

    m: int
    distances: int
    keep: np.ndarray
    inside: np.ndarray

    @classmethod
    def plan(cls, bounds: HistogramBounds, *, m: int, distances: int) -> Band:
        """The band of a sample with these histogram bounds (reads no data)."""
        n = bounds.size
        bins = bounds.cumulative.size
        keep = np.zeros(bins, dtype=bool)
        for first, last in ((m - distances, m + 1), (n - m, n - m + 1 + distances)):
            first, last = max(first, 1), min(last, n)
            if first <= last:
                lo, hi = bounds.bin_of(np.array([first, last]))
                keep[lo:hi + 1] = True
        inside = np.zeros(bins, dtype=bool)
        if n - 2 * m >= 1:
            lo, hi = bounds.bin_of(np.array([m + 1, n - m]))
            inside[lo + 1:hi] = True
        return cls(m=m, distances=distances, keep=keep, inside=inside)


@dataclass(frozen=True)
class BandedSample:
    """One class sample through the ranks pass 2 kept (an ``OrderStatistics``).

    ``values`` are the distinct values of the kept bins, ascending, with
    ``counts``; ``first`` and ``last`` the ranks (1-based) their copies occupy
    in the whole sample. ``inside`` is (count, mean, M2) of the inside bins.
    Private, like the values it holds.
    """

    size: int
    lower: float
    upper: float
    m: int
    values: np.ndarray
    counts: np.ndarray
    first: np.ndarray
    last: np.ndarray
    cumulative: np.ndarray
    keep: np.ndarray
    inside: tuple[int, float, float]

    def order_stat(self, j: np.ndarray) -> np.ndarray:
        """x_(j) (L for j <= 0, U for j >= n+1); LookupError for a rank in no kept bin."""
        j = np.asarray(j, dtype=np.int64)
        out = np.where(j <= 0, self.lower, self.upper)
        held = (j >= 1) & (j <= self.size)
        if held.any():
            ranks = j[held]
            if not bool(self.keep[np.searchsorted(self.cumulative, ranks, side="left")].all()):
                raise LookupError("an order statistic outside the kept bins was asked for")
            out[held] = self.values[np.searchsorted(self.last, ranks, side="left")]
        return out

    def window_moments(self, m: int) -> tuple[int, float, float]:
        """(w, mean, M2) of x_(m+1) .. x_(n-m): the inside bins merged with the kept values."""
        if m != self.m:
            raise ValueError(f"this sample was gathered for m = {self.m}, not {m}")
        top = self.size - m
        share = np.minimum(self.last, top) - np.maximum(self.first, m + 1) + 1
        share = np.maximum(share, 0)
        count_k = int(share.sum())
        mean_k = m2_k = 0.0
        if count_k:
            weights = share.astype(np.float64)
            mean_k = float(np.dot(weights, self.values) / count_k)
            dev = self.values - mean_k
            m2_k = float(np.dot(weights, dev * dev))
        count_i, mean_i, m2_i = self.inside
        count = count_i + count_k
        if count == 0:
            return 0, 0.0, 0.0
        delta = mean_k - mean_i
        mean = mean_i + delta * (count_k / count)
        m2 = m2_i + m2_k + delta * delta * (count_i * (count_k / count))
        return count, mean, m2


class BandAccumulator(Accumulator):
    """Pass 2 for one numeric column: every class's kept values and inside-bin moments.

    ``histogram`` is pass 1's (n_classes, bins) counts with ``edges``;
    ``bands`` one :class:`Band` per class. Mergeable like the other
    accumulators (a distributed engine could fold partitions).
    """

    def __init__(self, column: NumericColumn, edges: np.ndarray, histogram: np.ndarray,
                 bands: Sequence[Band]) -> None:
        self.column = column
        self.edges = np.asarray(edges, dtype=np.float64)
        self.histogram = np.asarray(histogram, dtype=np.int64)
        self.n_classes, self.bins = self.histogram.shape
        if len(bands) != self.n_classes or self.edges.size != self.bins + 1:
            raise ValueError("one band per class and bins + 1 edges are needed")
        self.bands = tuple(bands)
        self.keep = np.stack([b.keep for b in bands]).ravel()
        self.inside_bins = np.stack([b.inside for b in bands]).ravel()
        self.seen = np.zeros(self.histogram.size, dtype=np.int64)
        self.parts: list[list[tuple[np.ndarray, np.ndarray]]] = [
            [] for _ in range(self.n_classes)]
        self.held = [0] * self.n_classes
        self.compacted = [0] * self.n_classes
        self.count = np.zeros(self.n_classes, dtype=np.int64)
        self.mean = np.zeros(self.n_classes, dtype=np.float64)
        self.m2 = np.zeros(self.n_classes, dtype=np.float64)

    def update(self, batch: EncodedBatch) -> None:
        x = batch.columns[self.column.name]
        assert isinstance(x, np.ndarray)
        label = batch.label.astype(np.int64)
        key = label * self.bins + bin_index(x, self.edges)
        self.seen += np.bincount(key, minlength=self.seen.size)
        kept = self.keep[key]
        if kept.any():
            values, classes = x[kept], label[kept]
            for c in np.unique(classes):
                self._add(int(c), *np.unique(values[classes == c], return_counts=True))
        inside = self.inside_bins[key]
        if inside.any():
            values, classes = x[inside], label[inside]
            k = self.n_classes
            count = np.bincount(classes, minlength=k).astype(np.int64)
            mean = np.bincount(classes, weights=values, minlength=k) / np.maximum(count, 1)
            dev = values - mean[classes]
            m2 = np.bincount(classes, weights=dev * dev, minlength=k)
            self._merge_moments(count, mean, m2)

    def merge(self, other: BandAccumulator) -> None:
        self.seen += other.seen
        for c in range(self.n_classes):
            for values, counts in other.parts[c]:
                self._add(c, values, counts)
        self._merge_moments(other.count, other.mean, other.m2)

    def result(self) -> list[BandedSample]:
        """One :class:`BandedSample` per class; DataError if the file changed since pass 1."""
        if not np.array_equal(self.seen, self.histogram.ravel()):
            raise DataError(f"column '{self.column.name}': the data changed between the two "
                            "reads of this run (its class histogram differs)")
        out = []
        for c, band in enumerate(self.bands):
            values, counts = self._compact(c)
            cumulative = np.cumsum(self.histogram[c])
            before_bin = cumulative - self.histogram[c]
            bins = bin_index(values, self.edges)
            running = np.cumsum(counts) - counts               # copies before each value
            group = np.searchsorted(bins, bins, side="left")   # first value of its bin
            first = before_bin[bins] + running - running[group] + 1
            out.append(BandedSample(
                size=int(cumulative[-1]), lower=self.column.lower, upper=self.column.upper,
                m=band.m, values=values, counts=counts, first=first, last=first + counts - 1,
                cumulative=cumulative, keep=band.keep,
                inside=(int(self.count[c]), float(self.mean[c]), float(self.m2[c]))))
        return out

    def _add(self, c: int, values: np.ndarray, counts: np.ndarray) -> None:
        self.parts[c].append((values, counts.astype(np.int64)))
        self.held[c] += values.size
        if self.held[c] > max(2 * self.compacted[c], _COMPACT_AT):
            self._compact(c)

    def _compact(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        """Merge class c's parts into one sorted distinct-value array with multiplicities."""
        parts = self.parts[c]
        if not parts:
            return np.empty(0, dtype=np.float64), np.empty(0, dtype=np.int64)
        values = np.concatenate([v for v, _ in parts])
        counts = np.concatenate([n for _, n in parts])
        order = np.argsort(values, kind="stable")
        values, counts = values[order], counts[order]
        starts = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
        values, counts = values[starts], np.add.reduceat(counts, starts)
        self.parts[c] = [(values, counts)]
        self.held[c] = self.compacted[c] = values.size
        return values, counts

    def _merge_moments(self, count: np.ndarray, mean: np.ndarray, m2: np.ndarray) -> None:
        total = self.count + count
        safe = np.maximum(total, 1).astype(np.float64)
        delta = mean - self.mean
        self.mean = np.where(total > 0, self.mean + delta * (count / safe), 0.0)
        self.m2 = np.where(total > 0,
                           self.m2 + m2 + delta * delta * (self.count * (count / safe)), 0.0)
        self.count = total


def collect(batches: Iterable[EncodedBatch],
            accumulators: Mapping[str, BandAccumulator]) -> dict[str, list[BandedSample]]:
    """Pass 2: fold the re-read batches into every column's accumulator; the samples per class."""
    try:
        for batch in batches:
            for acc in accumulators.values():
                acc.update(batch)
    except pa.ArrowException as exc:
        # pyarrow's text may quote values: only its type is named
        raise DataError(f"could not decode the data on the second read "
                        f"({type(exc).__name__}); the file may have changed") from None
    return {name: acc.result() for name, acc in accumulators.items()}
