"""Mergeable accumulators for the sufficient statistics of one pass.

Why accumulators: a pass is a fold over batches, and a distributed engine
folds partitions independently and combines the partial results. Each
accumulator therefore has ``update(batch)`` (fold one
:class:`~dpcli.data.encode.EncodedBatch`), ``merge(other)`` (combine two
partial results, associative and commutative up to floating-point rounding)
and ``result()``. They hold only numpy arrays, so they pickle.

Counting uses ``np.bincount`` over the combined key ``class * n_levels +
code``: one vectorised pass per column and batch.

Sensitivities (docs/design.md rules 1 and 4): every accumulator that produces a
releasable statistic states its L1 sensitivity under *replace-one*
neighbours (same n, one record replaced by any other record of the declared
domain — the replacement may change the class). They are asserted by
brute-force neighbour tests in ``tests/stats/test_sensitivity.py``.
"""

from __future__ import annotations

import abc
from typing import Any, Protocol

import numpy as np

from dpcli.data.encode import EncodedBatch, TokenSets
from dpcli.data.report import DataReport
from dpcli.data.schema import (
    BinaryColumn,
    CategoricalColumn,
    Column,
    NumericColumn,
    Schema,
    TokensColumn,
)
from dpcli.stats.engine import JointTable, LeafMap, Moments, Stats, StatsRequest


def n_levels(col: Column) -> int:
    """Number of contingency levels: categories + other, 2, or the vocabulary size."""
    if isinstance(col, CategoricalColumn):
        return len(col.categories) + 1
    if isinstance(col, BinaryColumn):
        return 2
    if isinstance(col, TokensColumn):
        return len(col.vocabulary)
    raise TypeError(f"column '{col.name}' is {col.kind}: it has no levels")


class Bounded(Protocol):
    """Anything with declared bounds: a numeric column, a released histogram's parameters."""

    @property
    def lower(self) -> float: ...

    @property
    def upper(self) -> float: ...


def histogram_edges(col: Bounded, bins: int) -> np.ndarray:
    """``bins + 1`` equal-width edges from ``lower`` to ``upper`` (both exact: numpy's
    linspace sets its last point to ``upper``)."""
    return np.linspace(col.lower, col.upper, bins + 1)


def bin_index(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bin of each clamped value: k with ``edges[k] <= x < edges[k+1]``, the top edge in the last.

    The same as ``searchsorted(edges, x, side="right") - 1`` clipped to the
    bins, computed by arithmetic (several times faster than a binary search
    per value) and then corrected against the edges themselves, so a value
    that rounding puts one bin off still lands where the edges say.
    """
    bins = len(edges) - 1
    lower, upper = float(edges[0]), float(edges[-1])
    scale = bins / (upper - lower) if upper > lower else 0.0
    b = np.subtract(x, lower)
    b *= scale
    b = b.astype(np.int64)  # x >= lower: truncation is floor
    np.clip(b, 0, bins - 1, out=b)
    # each bin's own lower edge, and its upper edge with the last one at +inf: the top
    # bin never moves up (a value equal to ``upper`` belongs to it), with no bound checks
    low = edges[:-1]
    high = np.append(edges[1:-1], np.inf)
    while True:
        down = x < low.take(b)
        up = x >= high.take(b)
        if not (down.any() or up.any()):
            return b
        b -= down
        b += up


class Accumulator(abc.ABC):
    """Fold of one statistic over batches (update), combinable across partitions (merge)."""

    @abc.abstractmethod
    def update(self, batch: EncodedBatch) -> None: ...

    @abc.abstractmethod
    def merge(self, other: Any) -> None: ...

    @abc.abstractmethod
    def result(self) -> Any: ...


class ClassCountAccumulator(Accumulator):
    """Rows per class, int64 (n_classes,).

    Sensitivity (replace-one): L1 ≤ 2. Replacing one record moves at most one
    unit from its old class to its new class: −1 in one entry, +1 in another.
    """

    l1_sensitivity = 2.0

    def __init__(self, n_classes: int) -> None:
        self.n_classes = n_classes
        self.counts = np.zeros(n_classes, dtype=np.int64)

    def update(self, batch: EncodedBatch) -> None:
        self.counts += np.bincount(batch.label, minlength=self.n_classes).astype(np.int64)

    def merge(self, other: ClassCountAccumulator) -> None:
        self.counts += other.counts

    def result(self) -> np.ndarray:
        return self.counts.copy()


def contingency_sensitivity(column: Column) -> int:
    """L1 sensitivity under replace-one of one column's (class x level) count table.

    A record sits in one cell (at most r cells for a tokens column capped at r
    words per row, at most the vocabulary size uncapped); replacing it empties
    those cells by one and fills as many others: 2, or 2r.
    """
    if isinstance(column, TokensColumn):
        v = len(column.vocabulary)
        return 2 * (v if column.max_per_row is None else min(column.max_per_row, v))
    return 2


class ContingencyAccumulator(Accumulator):
    """Counts per (class, level) of a categorical/binary/tokens column, int64.

    Sensitivity (replace-one), L1 of the whole (n_classes × n_levels) table:

    - categorical / binary: ≤ 2. Each record is counted in exactly one cell
      (undeclared values in ``other``, missing values imputed — rows are never
      dropped); replacing it moves one unit between two cells.
    - tokens with cap r: ≤ 2r. A record adds 1 to each of its at most r
      distinct kept tokens in its class row; replacing it removes ≤ r units and
      adds ≤ r units. (The kept subset of every *other* record is unchanged,
      see :func:`dpcli.data.encode.encode_tokens`.)
    - tokens without a cap: ≤ 2·|vocabulary| (a record may hold every word) —
      declare ``max_per_row`` to get a useful bound.
    """

    def __init__(self, column: Column, n_classes: int) -> None:
        self.column = column
        self.n_classes = n_classes
        self.n_levels = n_levels(column)
        self.table = np.zeros((n_classes, self.n_levels), dtype=np.int64)

    @property
    def l1_sensitivity(self) -> float:
        return float(contingency_sensitivity(self.column))

    def update(self, batch: EncodedBatch) -> None:
        codes = batch.columns[self.column.name]
        size = self.n_classes * self.n_levels
        if isinstance(codes, TokenSets):
            label = np.repeat(batch.label.astype(np.int64), np.diff(codes.offsets))
            key = label * self.n_levels + codes.indices
        else:
            key = batch.label.astype(np.int64) * self.n_levels + codes
        counts = np.bincount(key, minlength=size)
        self.table += counts.reshape(self.n_classes, self.n_levels)

    def merge(self, other: ContingencyAccumulator) -> None:
        self.table += other.table

    def result(self) -> np.ndarray:
        return self.table.copy()


class HistogramAccumulator(Accumulator):
    """Counts per (class, bin) of a numeric column, int64 (n_classes, bins).

    Bins are ``histogram_edges(column, bins)``; bin k holds values in
    [edge_k, edge_{k+1}); ``upper`` goes to the last bin. Values are clamped
    before binning, so every record falls in exactly one bin.

    Sensitivity (replace-one): L1 ≤ 2 (one unit moves between two cells).
    """

    l1_sensitivity = 2.0

    def __init__(self, column: NumericColumn, bins: int, n_classes: int) -> None:
        self.column = column
        self.bins = int(bins)
        self.n_classes = n_classes
        self.edges = histogram_edges(column, self.bins)
        self.table = np.zeros((n_classes, self.bins), dtype=np.int64)

    def update(self, batch: EncodedBatch) -> None:
        x = batch.columns[self.column.name]
        assert isinstance(x, np.ndarray)
        b = bin_index(x, self.edges)
        key = batch.label.astype(np.int64) * self.bins + b
        counts = np.bincount(key, minlength=self.n_classes * self.bins)
        self.table += counts.reshape(self.n_classes, self.bins)

    def merge(self, other: HistogramAccumulator) -> None:
        self.table += other.table

    def result(self) -> np.ndarray:
        return self.table.copy()


def _combine(count_a: np.ndarray, mean_a: np.ndarray, m2_a: np.ndarray,
             count_b: np.ndarray, mean_b: np.ndarray,
             m2_b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Chan, Golub & LeVeque's pairwise update of (count, mean, M2), per class."""
    count = count_a + count_b
    safe = np.maximum(count, 1).astype(np.float64)
    delta = mean_b - mean_a
    mean = mean_a + delta * (count_b / safe)
    m2 = m2_a + m2_b + delta * delta * (count_a * (count_b / safe))
    empty = count == 0
    mean[empty] = 0.0
    m2[empty] = 0.0
    return count, mean, m2


class MomentsAccumulator(Accumulator):
    """Per-class count, mean and M2 of a clamped numeric column.

    Each batch's moments are computed two-pass (mean, then squared
    deviations) and merged with Chan et al.'s parallel formula, which is
    numerically stable for long streams.

    Sensitivities (replace-one), with l, u the declared bounds and
    M = max(|l|, |u|), per-class vectors over all classes:

    - counts: L1 ≤ 2 (as class counts);
    - sums: L1 ≤ 2·M. Record (c, x) → (c', x') with x, x' ∈ [l, u]: if
      c = c' only sum_c changes, by |x' − x| ≤ u − l ≤ 2·M; if c ≠ c',
      sum_c changes by |x| ≤ M and sum_c' by |x'| ≤ M. (Replacements that
      keep the class change the sums by at most u − l.)
    - sums of squares: L1 ≤ 2·M² by the same argument with x².

    Means and variances are ratios: they have no useful global sensitivity
    and are released by algorithms through the counts and sums, or through
    smooth sensitivity.
    """

    def __init__(self, column: NumericColumn, n_classes: int) -> None:
        self.column = column
        self.n_classes = n_classes
        self.count = np.zeros(n_classes, dtype=np.int64)
        self.mean = np.zeros(n_classes, dtype=np.float64)
        self.m2 = np.zeros(n_classes, dtype=np.float64)

    @property
    def l1_sensitivity(self) -> dict[str, float]:
        m = max(abs(self.column.lower), abs(self.column.upper))
        return {"count": 2.0, "sum": 2.0 * m, "sum_squares": 2.0 * m * m,
                "sum_same_class": self.column.upper - self.column.lower}

    def update(self, batch: EncodedBatch) -> None:
        x = batch.columns[self.column.name]
        assert isinstance(x, np.ndarray)
        k = self.n_classes
        count = np.bincount(batch.label, minlength=k).astype(np.int64)
        total = np.bincount(batch.label, weights=x, minlength=k)
        mean = total / np.maximum(count, 1)
        dev = x - mean[batch.label]
        m2 = np.bincount(batch.label, weights=dev * dev, minlength=k)
        self.count, self.mean, self.m2 = _combine(self.count, self.mean, self.m2,
                                                  count, mean, m2)

    def merge(self, other: MomentsAccumulator) -> None:
        self.count, self.mean, self.m2 = _combine(self.count, self.mean, self.m2,
                                                  other.count, other.mean, other.m2)

    def result(self) -> Moments:
        return Moments(count=self.count.copy(), mean=self.mean.copy(), m2=self.m2.copy())


class ValuesAccumulator(Accumulator):
    """Keeps the clamped values of a numeric column per class; result sorted.

    For order statistics (medians, quantile thresholds). Memory grows
    linearly with the number of rows (8 bytes per row). No global
    sensitivity is claimed: order statistics are released through
    mechanisms with their own analysis (e.g. smooth sensitivity).
    """

    def __init__(self, column: NumericColumn, n_classes: int) -> None:
        self.column = column
        self.n_classes = n_classes
        self.parts: list[list[np.ndarray]] = [[] for _ in range(n_classes)]

    def update(self, batch: EncodedBatch) -> None:
        x = batch.columns[self.column.name]
        assert isinstance(x, np.ndarray)
        order = np.argsort(batch.label, kind="stable")
        counts = np.bincount(batch.label, minlength=self.n_classes)
        for k, part in enumerate(np.split(x[order], np.cumsum(counts)[:-1])):
            if len(part):
                self.parts[k].append(part)

    def merge(self, other: ValuesAccumulator) -> None:
        for mine, theirs in zip(self.parts, other.parts, strict=True):
            mine.extend(theirs)

    def result(self) -> list[np.ndarray]:
        out = []
        for parts in self.parts:
            values = np.concatenate(parts) if parts else np.empty(0, dtype=np.float64)
            values.sort()
            out.append(values)
        return out


class JointAccumulator(Accumulator):
    """The sparse joint histogram of several columns' leaves (:class:`JointTable`).

    Each batch is reduced to its distinct (leaf tuple, class) keys with their
    counts; parts are compacted whenever they outgrow the distinct tuples
    seen so far, so memory follows the number of distinct tuples, not rows.
    A value in no leaf gets the extra leaf index ``n_leaves`` of its column.
    Keys are mixed-radix integers when the product of leaf counts fits in 62
    bits, rows of leaves otherwise.

    Sensitivity (replace-one): L1 ≤ 2 (see :class:`JointTable`).
    """

    l1_sensitivity = 2.0

    def __init__(self, maps: tuple[LeafMap, ...], n_classes: int, *,
                 limit: int | None = None) -> None:
        self.maps = maps
        self.n_classes = n_classes
        #: the most distinct (tuple, class) keys kept: past it the table is dropped
        #: (``overflow``; its result is None), so memory stays bounded whatever the data
        self.limit = limit
        self.overflow = False
        self.radix = [m.n_leaves + 1 for m in maps]
        self.packed = float(np.prod([float(r) for r in self.radix])) * n_classes < 2.0**62
        self.keys: list[np.ndarray] = []
        self.counts: list[np.ndarray] = []
        self.pending = 0
        self.compacted = 0

    def _keys(self, leaves: np.ndarray, label: np.ndarray) -> np.ndarray:
        rows = np.column_stack([leaves, label.astype(np.int64)])
        if not self.packed:
            return rows
        key = np.zeros(len(rows), dtype=np.int64)
        for j, r in enumerate([*self.radix, self.n_classes]):
            key = key * r + rows[:, j]
        return key

    def _unkey(self, key: np.ndarray) -> np.ndarray:
        if not self.packed:
            return key
        rows = np.empty((len(key), len(self.radix) + 1), dtype=np.int64)
        for j, r in reversed(list(enumerate([*self.radix, self.n_classes]))):
            rows[:, j] = key % r
            key = key // r
        return rows

    def update(self, batch: EncodedBatch) -> None:
        if self.overflow:   # the table is dropped: no key of this batch would be kept
            return
        parts = []
        for m in self.maps:
            values = batch.columns[m.column]
            assert isinstance(values, np.ndarray)
            leaf = np.asarray(m.leaves(values), dtype=np.int64)
            parts.append(np.where(leaf < 0, m.n_leaves, leaf) if (leaf < 0).any() else leaf)
        if self.packed:
            # the mixed-radix key column by column (as _keys, without a rows × columns copy)
            key = np.zeros(batch.n, dtype=np.int64)
            for leaf, r in zip([*parts, batch.label], [*self.radix, self.n_classes],
                               strict=True):
                key *= r
                key += leaf
            # the batch's distinct keys here, on the worker that folds it (one sort, run
            # lengths for counts): a merge in the consumer's thread then only appends them
            key.sort()
            if len(key):
                starts = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
                self._add(key[starts], np.diff(np.append(starts, len(key))))
            if len(self.keys) == 1:
                self.compacted = self.pending   # one part, sorted and distinct
            return
        leaves = np.column_stack(parts) if parts else np.zeros((batch.n, 0), np.int64)
        self._add(self._keys(leaves, batch.label), np.ones(batch.n, dtype=np.int64))

    def _add(self, keys: np.ndarray, counts: np.ndarray) -> None:
        if self.overflow:
            return
        self.keys.append(keys)
        self.counts.append(counts)
        self.pending += len(keys)
        if self.pending > max(4 * self.compacted, 1 << 20):
            self._compact()

    def _compact(self) -> None:
        if not self.keys or (len(self.keys) == 1 and self.pending == self.compacted):
            return   # nothing, or already distinct
        keys = np.concatenate(self.keys)
        counts = np.concatenate(self.counts)
        if self.packed:
            # sorted keys and their runs' summed counts (what np.unique and a weighted
            # bincount give, integer arithmetic throughout, one sort instead of two)
            order = np.argsort(keys)
            keys = keys[order]
            starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
            unique = keys[starts]
            total = np.add.reduceat(counts[order], starts) if len(starts) else counts[:0]
        else:
            unique, inverse = np.unique(keys, axis=0, return_inverse=True)
            total = np.bincount(inverse.ravel(), weights=counts, minlength=len(unique))
        self.keys, self.counts = [unique], [total.astype(np.int64)]
        self.pending = self.compacted = len(unique)
        if self.limit is not None and len(unique) > self.limit:
            self.overflow = True
            self.keys, self.counts = [], []
            self.pending = self.compacted = 0

    def _distinct(self) -> bool:
        """Whether the keys are one sorted, distinct part (or none)."""
        return not self.keys or (len(self.keys) == 1 and self.pending == self.compacted)

    def merge(self, other: JointAccumulator) -> None:
        if other.overflow:
            self.overflow = True
            self.keys, self.counts = [], []
            self.pending = self.compacted = 0
        if self.overflow:
            return
        other._compact()
        if self.packed and other.packed and self._distinct() and other.keys:
            # both sorted and distinct: add the counts of keys already here, insert the
            # new ones (a search per incoming key, not a sort of everything so far: the
            # merge runs in the pass's consumer thread, once per batch)
            keys, counts = other.keys[0], other.counts[0]
            if not self.keys:
                self.keys, self.counts = [keys.copy()], [counts.copy()]
            else:
                base, total = self.keys[0], self.counts[0]
                at = np.minimum(np.searchsorted(base, keys), len(base) - 1)
                hit = base[at] == keys
                total[at[hit]] += counts[hit]   # distinct keys: distinct positions
                if not hit.all():
                    new = ~hit
                    merged = np.concatenate([base, keys[new]])
                    order = np.argsort(merged, kind="stable")
                    self.keys = [merged[order]]
                    self.counts = [np.concatenate([total, counts[new]])[order]]
            self.pending = self.compacted = len(self.keys[0])
            if self.limit is not None and self.compacted > self.limit:
                self.overflow = True
                self.keys, self.counts = [], []
                self.pending = self.compacted = 0
            return
        for keys, counts in zip(other.keys, other.counts, strict=True):
            self._add(keys, counts)

    def result(self) -> JointTable | None:
        """The table; None when it outgrew ``limit`` (a caller that set one reads again)."""
        self._compact()
        if self.overflow:
            return None
        d = len(self.maps)
        if not self.keys:
            rows = np.zeros((0, d + 1), dtype=np.int64)
            counts = np.zeros(0, dtype=np.int64)
        else:
            rows, counts = self._unkey(self.keys[0]), self.counts[0]
        tuples, inverse = np.unique(rows[:, :d], axis=0, return_inverse=True)
        table = np.zeros((len(tuples), self.n_classes), dtype=np.int64)
        np.add.at(table, (inverse.ravel(), rows[:, d]), counts)
        return JointTable(columns=tuple(m.column for m in self.maps),
                          leaves=tuples.astype(np.int32), counts=table)


class StatsAccumulator(Accumulator):
    """All accumulators of one :class:`StatsRequest`; result is a :class:`Stats`.

    The request must have been validated against the schema.
    """

    def __init__(self, schema: Schema, request: StatsRequest) -> None:
        k = schema.n_classes
        self.n = 0
        self.classes = ClassCountAccumulator(k)
        self.contingency = {c: ContingencyAccumulator(schema.column(c), k)
                            for c in request.contingency}
        self.histograms = {c: HistogramAccumulator(_numeric(schema, c), b, k)
                           for c, b in request.histograms}
        self.moments = {c: MomentsAccumulator(_numeric(schema, c), k) for c in request.moments}
        self.values = {c: ValuesAccumulator(_numeric(schema, c), k)
                       for c in request.keep_values}
        self.joint = (JointAccumulator(request.joint, k, limit=request.joint_limit)
                      if request.joint else None)

    def _all(self) -> list[tuple[str, Accumulator]]:
        out: list[tuple[str, Accumulator]] = [("", self.classes)]
        for group, accs in (("c", self.contingency), ("h", self.histograms),
                            ("m", self.moments), ("v", self.values)):
            out += [(f"{group}:{name}", acc) for name, acc in accs.items()]
        if self.joint is not None:
            out.append(("j", self.joint))
        return out

    def update(self, batch: EncodedBatch) -> None:
        self.n += batch.n
        for _, acc in self._all():
            acc.update(batch)

    def merge(self, other: StatsAccumulator) -> None:
        self.n += other.n
        theirs = dict(other._all())
        for key, acc in self._all():
            acc.merge(theirs[key])

    def result(self, report: DataReport | None = None) -> Stats:
        return Stats(
            n=self.n,
            class_counts=self.classes.result(),
            contingency={c: a.result() for c, a in self.contingency.items()},
            histograms={c: a.result() for c, a in self.histograms.items()},
            moments={c: a.result() for c, a in self.moments.items()},
            values={c: a.result() for c, a in self.values.items()},
            report=report if report is not None else DataReport(rows=self.n),
            edges={c: a.edges.copy() for c, a in self.histograms.items()},
            joint=None if self.joint is None else self.joint.result(),
        )


def _numeric(schema: Schema, name: str) -> NumericColumn:
    col = schema.column(name)
    if not isinstance(col, NumericColumn):
        raise TypeError(f"column '{name}' is not numeric")
    return col
