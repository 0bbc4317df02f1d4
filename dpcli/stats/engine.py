"""What a statistics pass computes, and the engine interface that computes it.

Why an interface: every algorithm in dpcli needs only *sufficient
statistics* — class counts, per-class contingency tables, histograms,
per-class moments, and sometimes the sorted values of a column for order
statistics — computed in ONE streaming pass. Algorithms state what they need
as a :class:`StatsRequest`; an :class:`Engine` computes a :class:`Stats`.
The in-process :class:`~dpcli.stats.local.LocalEngine` is the default; a
distributed engine (Apache Spark, for data that outgrows one machine) can
implement the same interface with the mergeable accumulators of
:mod:`dpcli.stats.accumulators` (update per partition, merge, result).

These statistics are exact and private. Only a mechanism may release them
(docs/design.md rule 3); the L1 sensitivities under replace-one neighbours are
stated on the accumulators and tested in ``tests/stats/test_sensitivity.py``.
"""

from __future__ import annotations

import abc
import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np

from dpcli.data.report import DataReport
from dpcli.data.schema import NumericColumn, Schema
from dpcli.errors import UsageError

if TYPE_CHECKING:
    from dpcli.data.source import Source


def _names(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    return tuple(value)


class LeafMap(Protocol):
    """How one column's encoded values fall into ``n_leaves`` leaves (a taxonomy's)."""

    @property
    def column(self) -> str: ...  # read-only: a frozen dataclass (Hierarchy) satisfies it

    @property
    def n_leaves(self) -> int: ...

    def leaves(self, values: np.ndarray) -> np.ndarray:
        """Leaf index per value (int64), −1 for a value in no leaf."""
        ...


@dataclass(frozen=True)
class StatsRequest:
    """The statistics one pass must produce (lists are converted to tuples).

    - ``contingency``: categorical, binary or tokens columns → counts per
      (class, level), shape (n_classes, n_levels); categorical levels include
      ``other`` (last); tokens levels are the vocabulary.
    - ``histograms``: (numeric column, bins) → counts per (class, bin) over
      ``bins`` equal-width bins of the declared bounds, shape (n_classes,
      bins); bin k is [edge_k, edge_{k+1}) with edges ``np.linspace(lower,
      upper, bins + 1)``, and a value equal to ``upper`` goes to the last bin.
    - ``moments``: numeric columns → per-class count, mean, M2 (sum of squared
      deviations from the class mean) of the clamped values.
    - ``keep_values``: numeric columns whose clamped values are kept per class
      and returned sorted (for order statistics). Memory grows with the
      number of rows (8 bytes per row and column): use only where needed.
    - ``joint``: leaf maps of several columns → the sparse joint histogram:
      every distinct tuple of leaves that occurs, with its per-class counts
      (:class:`JointTable`); a value in no leaf counts as leaf ``n_leaves``.
      Memory grows with the number of distinct tuples (at most the rows).
    - ``joint_limit``: at most this many distinct (tuple, class) keys are kept; a
      table that outgrows it is dropped and ``Stats.joint`` is None (memory stays
      bounded; the caller reads the data again instead). None: no limit.
    """

    contingency: tuple[str, ...] = ()
    histograms: tuple[tuple[str, int], ...] = ()
    moments: tuple[str, ...] = ()
    keep_values: tuple[str, ...] = ()
    joint: tuple[LeafMap, ...] = ()
    joint_limit: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "contingency", _names(self.contingency))
        object.__setattr__(self, "histograms",
                           tuple((str(c), b) for c, b in self.histograms))
        object.__setattr__(self, "moments", _names(self.moments))
        object.__setattr__(self, "keep_values", _names(self.keep_values))
        object.__setattr__(self, "joint", tuple(self.joint))

    def columns(self) -> tuple[str, ...]:
        """Every (feature) column the request reads, in first-mention order.

        The label is always read as well.
        """
        names = [*self.contingency, *(c for c, _ in self.histograms),
                 *self.moments, *self.keep_values, *(m.column for m in self.joint)]
        return tuple(dict.fromkeys(names))

    def validate(self, schema: Schema) -> None:
        """UsageError naming the column for anything the schema can not serve.

        Runs before any data is read.
        """
        def declared(name: str, what: str) -> None:
            if name == schema.label.column:
                raise UsageError(f"column '{name}' is the label; it can not be used for "
                                 f"{what} (class counts are always computed)")
            if not schema.has(name):
                raise UsageError(f"column '{name}' (requested for {what}) is not declared in "
                                 f"the schema (declared: {', '.join(schema.names)})")

        for what, names in (("a contingency table", self.contingency),
                            ("moments", self.moments), ("kept values", self.keep_values),
                            ("a joint histogram", tuple(m.column for m in self.joint)),
                            ("a histogram", tuple(c for c, _ in self.histograms))):
            seen: set[str] = set()
            for name in names:
                declared(name, what)
                if name in seen:
                    raise UsageError(f"column '{name}' is requested twice for {what}")
                seen.add(name)
        for name in self.contingency:
            col = schema.column(name)
            if isinstance(col, NumericColumn):
                raise UsageError(f"column '{name}' is numeric: a contingency table needs a "
                                 "categorical, binary or tokens column (use a histogram)")
        for name, bins in self.histograms:
            col = schema.column(name)
            if not isinstance(col, NumericColumn):
                raise UsageError(f"column '{name}' is {col.kind}: a histogram needs a numeric "
                                 "column (use a contingency table)")
            if isinstance(bins, bool) or not isinstance(bins, int | np.integer) or bins < 1:
                raise UsageError(f"column '{name}': the number of histogram bins must be a "
                                 f"positive integer, got {bins!r}")
        for what, names in (("moments", self.moments), ("kept values", self.keep_values)):
            for name in names:
                col = schema.column(name)
                if not isinstance(col, NumericColumn):
                    raise UsageError(f"column '{name}' is {col.kind}: {what} need a numeric "
                                     "column")


@dataclass
class Moments:
    """Per-class count, mean and M2 of one numeric column (arrays of n_classes)."""

    count: np.ndarray
    mean: np.ndarray
    m2: np.ndarray

    @property
    def sum(self) -> np.ndarray:
        return self.mean * self.count

    @property
    def sum_squares(self) -> np.ndarray:
        return self.m2 + self.count * self.mean**2

    @property
    def variance(self) -> np.ndarray:
        """Population variance (ddof=0); NaN for a class with no rows."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.count > 0, self.m2 / np.maximum(self.count, 1), np.nan)


@dataclass
class JointTable:
    """A sparse joint histogram: ``leaves[i]`` (one leaf per column) occurs ``counts[i]`` times.

    ``leaves`` is int32 (rows, columns), rows distinct; ``counts`` int64
    (rows, n_classes). Leaf ``n_leaves`` of a column stands for "in no
    leaf", so every row is counted. Sensitivity (replace-one): L1 ≤ 2 over
    the dense (tuple × class) histogram it represents — a record sits in
    exactly one cell, so replacing it moves one unit.
    """

    columns: tuple[str, ...]
    leaves: np.ndarray
    counts: np.ndarray


@dataclass
class Stats:
    """Exact (private) sufficient statistics of one pass; see :class:`StatsRequest`.

    ``values[c][k]`` is the sorted array of column c's clamped values in class
    k. ``edges[c]`` are the bin edges of histogram c. ``report`` is the
    custodian-only data report (stderr, never outputs).
    """

    n: int
    class_counts: np.ndarray
    contingency: dict[str, np.ndarray] = field(default_factory=dict)
    histograms: dict[str, np.ndarray] = field(default_factory=dict)
    moments: dict[str, Moments] = field(default_factory=dict)
    values: dict[str, list[np.ndarray]] = field(default_factory=dict)
    report: DataReport = field(default_factory=DataReport)
    edges: dict[str, np.ndarray] = field(default_factory=dict)
    joint: JointTable | None = None


class Engine(abc.ABC):
    """Computes the :class:`Stats` of a :class:`StatsRequest` over a data source."""

    name: ClassVar[str]

    @abc.abstractmethod
    def compute(self, source: Source, request: StatsRequest, *,
                rng: np.random.Generator,
                progress: Callable[[int], None] | None = None) -> Stats:
        """One pass over ``source``; ``progress(rows)`` as rows are folded in (after
        each batch locally, each merged partition in Spark).

        ``source`` is the kind of source the engine reads (``source.engine``
        names it: a DataSource for "local", a SparkSource for "spark").
        Implementations validate ``request`` against ``source.schema`` before
        reading any data, and use ``rng`` only for the data layer's per-row
        token cap — drawing from it as the local engine does, so that a
        seeded run's noise does not depend on the engine.
        """


_ENGINES: dict[str, str] = {"local": "dpcli.stats.local:LocalEngine",
                            # PySpark is optional (dpcli[spark]): imported only when asked for
                            "spark": "dpcli.stats.spark:SparkEngine"}


def register_engine(name: str, target: str) -> None:
    """Register an engine as ``"module:Class"`` (imported only when asked for)."""
    _ENGINES[name] = target


def available_engines() -> tuple[str, ...]:
    return tuple(_ENGINES)


def get_engine(name: str = "local") -> Engine:
    """The engine called ``name``; unknown name → UsageError listing the available ones."""
    target = _ENGINES.get(name)
    if target is None:
        raise UsageError(f"unknown statistics engine {name!r} "
                         f"(available: {', '.join(_ENGINES)})")
    module, _, cls = target.partition(":")
    engine = getattr(importlib.import_module(module), cls)()
    if not isinstance(engine, Engine):
        raise TypeError(f"{target} is not an Engine")
    return engine
