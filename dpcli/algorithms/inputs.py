"""Rows of declared columns in memory, as the linear learners (brc, validate) read them.

Numeric columns are mapped onto [-1, 1] with their *declared* bounds (never
the data's range, docs/design.md rule 2); categorical and binary columns keep
their codes, one per declared level (``other`` included). Every map here is
fixed by the spec, so it is applied to each record on its own and releases
nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import sparse

from dpcli.data.encode import EncodedBatch
from dpcli.data.schema import BinaryColumn, CategoricalColumn, NumericColumn, Schema


@dataclass
class Inputs:
    """Rows of some columns in memory.

    ``numeric``: (n, d) float64 scaled into [-1, 1] by the declared bounds;
    ``codes``: int codes of categorical / binary columns (``n_levels`` each).
    """

    numeric_names: tuple[str, ...]
    numeric: np.ndarray
    codes: dict[str, np.ndarray] = field(default_factory=dict)
    n_levels: dict[str, int] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.numeric.shape[0])

    @classmethod
    def from_columns(cls, schema: Schema, names: Sequence[str],
                     columns: dict[str, Any], n: int) -> Inputs:
        numeric_names = tuple(c for c in names if isinstance(schema.column(c), NumericColumn))
        numeric = np.empty((n, len(numeric_names)), dtype=np.float64)
        for j, name in enumerate(numeric_names):
            col = schema.column(name)
            assert isinstance(col, NumericColumn)
            numeric[:, j] = scale(np.asarray(columns[name], dtype=np.float64), col)
        codes, levels = {}, {}
        for name in names:
            col = schema.column(name)
            if isinstance(col, CategoricalColumn | BinaryColumn):
                codes[name] = np.asarray(columns[name], dtype=np.int32)
                levels[name] = len(col.levels)
        return cls(numeric_names, numeric, codes, levels)

    @property
    def unit_ball_divisor(self) -> float:
        """√(1 + columns): the largest norm of [1, numeric, one-hot] (each part ≤ 1)."""
        return math.sqrt(1 + len(self.numeric_names) + len(self.codes))

    @property
    def design_width(self) -> int:
        return 1 + len(self.numeric_names) + sum(self.n_levels.values())

    def unit_ball(self) -> np.ndarray:
        """Each row as [1, numeric…, one-hot of each coded column…] / √(1 + columns).

        The constant 1 carries the intercept. A numeric entry lies in
        [-1, 1] and a one-hot block has norm 1, so every row's Euclidean
        norm is at most 1 whatever the data: the bound private linear
        learners (Chaudhuri et al.) assume, met by declaration.
        """
        out = np.zeros((self.n, self.design_width))
        out[:, 0] = 1.0
        k = 1 + len(self.numeric_names)
        out[:, 1:k] = self.numeric
        rows = np.arange(self.n)
        for name, levels in self.n_levels.items():
            out[rows, k + self.codes[name]] = 1.0
            k += levels
        out /= self.unit_ball_divisor
        return out

    def unit_ball_sparse(self) -> sparse.csr_matrix:
        """:meth:`unit_ball` as a scipy.sparse CSR matrix (the same values, exactly).

        Each row stores its 1 + numeric + one entry per coded column, so memory
        grows with the number of columns, not with the number of declared
        levels: a one-hot block of 50 levels costs one entry, not 50.
        """
        n = self.n
        k = 1 + len(self.numeric_names)
        per_row = k + len(self.codes)
        divisor = self.unit_ball_divisor
        values = np.empty((n, per_row))
        index = np.empty((n, per_row), dtype=np.int32)
        values[:, 0] = 1.0
        index[:, 0] = 0
        values[:, 1:k] = self.numeric
        index[:, 1:k] = np.arange(1, k, dtype=np.int32)
        offset = k
        for j, (name, levels) in enumerate(self.n_levels.items()):
            values[:, k + j] = 1.0
            index[:, k + j] = offset + self.codes[name]
            offset += levels
        values /= divisor
        # int32 offsets while they fit: with int64 ones scipy would copy the indices to int64
        wide = (n + 1) * per_row >= 2**31 or self.design_width >= 2**31
        indptr = np.arange(0, (n + 1) * per_row, per_row, dtype=np.int64 if wide else np.int32)
        return sparse.csr_matrix((values.ravel(), index.ravel(), indptr),
                                 shape=(n, self.design_width), copy=False)


def design_width(schema: Schema, columns: Sequence[str]) -> int:
    """The length of :meth:`Inputs.unit_ball` rows for ``columns``: from the schema alone."""
    return 1 + sum(len(c.levels) if isinstance(c, CategoricalColumn | BinaryColumn) else 1
                   for c in (schema.column(name) for name in columns))


def scale(x: np.ndarray, column: NumericColumn) -> np.ndarray:
    """``x`` (already clamped to the declared bounds) mapped linearly onto [-1, 1].

    Computed around the midpoint with halves of the bounds, so that it stays
    finite for any finite bounds (the width of [-1e308, 1e308] overflows,
    and a NaN for some values only would make a run's failure depend on one
    record).
    """
    middle = column.lower / 2 + column.upper / 2
    half = column.upper / 2 - column.lower / 2
    return np.clip((x - middle) / half, -1.0, 1.0)


def usable(column: Any) -> bool:
    """Whether a linear learner can read ``column`` (numeric, categorical or binary)."""
    return isinstance(column, NumericColumn | CategoricalColumn | BinaryColumn)


def model_schema(schema: Schema, columns: Sequence[str]) -> Schema:
    """The spec's schema restricted to ``columns`` (what the model file carries)."""
    return Schema(columns=tuple(schema.column(c) for c in columns), label=schema.label,
                  source=schema.source)


def read_rows(batches: Iterable[EncodedBatch], columns: Sequence[str],
              progress: Callable[[int], None] | None = None
              ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Every row of ``columns`` in memory: the label codes and each column's values."""
    parts: dict[str, list[np.ndarray]] = {c: [] for c in columns}
    labels = []
    for batch in batches:
        for c in columns:
            parts[c].append(np.asarray(batch.columns[c]))
        labels.append(batch.label)
        if progress is not None:
            progress(batch.n)
    label = np.concatenate(labels) if labels else np.zeros(0, dtype=np.int32)
    return label, {c: np.concatenate(p) if p else np.zeros(0) for c, p in parts.items()}
