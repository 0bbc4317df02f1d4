"""The released grid synopsis and what can be done with it, all post-processing.

A synopsis is two files: ``grid.json`` (a dpcli envelope of kind
``grid_synopsis``: the chosen level of every used column with its nodes,
T, the pool, the budget split) and ``cells.parquet`` (one row per cell: the
node of each used column, and the noisy ``n_negative`` / ``n_positive``
counts). ``grid.json`` records the cells file's SHA-256, so a model never
pairs a grid with the wrong counts. Nothing here reads private data or
spends budget: the counts were released by :func:`privpfc.noisy_counts`.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dpcli.algorithms.privpfc import (
    HIST_SENSITIVITY,
    HISTOGRAM,
    Synopsis,
    quality_sensitivity,
)
from dpcli.data.encode import EncodedBatch
from dpcli.data.schema import (
    BinaryColumn,
    CategoricalColumn,
    NumericColumn,
    Schema,
    schema_from_dict,
    schema_to_dict,
)
from dpcli.errors import DataError

KIND = "grid_synopsis"
CELLS_FILE = "cells.parquet"
GRID_FILE = "grid.json"
COUNT_COLUMNS = ("n_negative", "n_positive")


# ---------------------------------------------------------------------- writing
def cells_table(syn: Synopsis) -> pa.Table:
    """One row per cell, row-major over the used columns: node names and noisy counts."""
    shape = syn.shape
    index = np.indices(shape).reshape(len(shape), -1) if shape else np.zeros((0, 1), int)
    arrays: dict[str, Any] = {}
    for axis, j in enumerate(syn.used):
        h = syn.hierarchies[j]
        names = np.asarray(h.names[syn.levels[j]], dtype=object)
        arrays[h.column] = pa.array(names[index[axis]], pa.string())
    for k, name in enumerate(COUNT_COLUMNS):
        arrays[name] = pa.array(syn.counts[:, k], pa.int64())
    return pa.table(arrays)


def parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


#: cells per row group of cells.parquet: pyarrow's default largest row group, so the file
#: is byte for byte what ``parquet_bytes(cells_table(syn))`` writes
CELLS_ROW_GROUP = 1 << 20


def cells_parquet(syn: Synopsis) -> bytes:
    """cells.parquet's bytes: :func:`cells_table` written as :func:`parquet_bytes` writes
    it (the same row groups, the same bytes), built one row group at a time.

    Why: the grid may hold up to T = n·ε_hist/10 cells (1.3·10⁶ on 5·10⁷ rows of Adult),
    and the whole table with its object arrays of node names held about 300 MB more
    than the run's statistics pass; one row group at a time bounds that by
    CELLS_ROW_GROUP cells whatever n (docs/scale.md). Releases nothing new.
    """
    shape = syn.shape
    n_cells = int(syn.counts.shape[0])
    names = [pa.array(syn.hierarchies[j].names[syn.levels[j]], pa.string())
             for j in syn.used]
    columns = [syn.hierarchies[j].column for j in syn.used]
    sink = io.BytesIO()
    writer: pq.ParquetWriter | None = None
    for lo in range(0, max(n_cells, 1), CELLS_ROW_GROUP):
        hi = min(lo + CELLS_ROW_GROUP, n_cells)
        flat = np.arange(lo, hi, dtype=np.int64)
        index = np.unravel_index(flat, shape) if shape else ()
        arrays: dict[str, Any] = {
            column: node_names.take(pa.array(axis_index))
            for column, node_names, axis_index in zip(columns, names, index, strict=True)}
        for k, name in enumerate(COUNT_COLUMNS):
            arrays[name] = pa.array(syn.counts[lo:hi, k], pa.int64())
        chunk = pa.table(arrays)
        if writer is None:
            writer = pq.ParquetWriter(sink, chunk.schema)
        writer.write_table(chunk)
        del arrays, chunk, index, flat
    assert writer is not None
    writer.close()
    return sink.getvalue()


def payload(syn: Synopsis, schema: Schema, cells_digest: str,
            decision: str = "balanced") -> dict[str, Any]:
    """The public description of the synopsis (grid.json's payload).

    ``decision`` is how the histogram classifier turns a cell's counts into a
    class (:meth:`GridModel.decide`); it is recorded so predict applies it.
    """
    used = [syn.hierarchies[j] for j in syn.used]
    kept = tuple(schema.column(h.column) for h in used)
    eps_hist = syn.design.plan.step(HISTOGRAM).budget.eps
    totals = syn.counts.sum(axis=0)
    return {
        "grid": [{"column": h.column, "kind": h.kind, "level": syn.levels[j],
                  "height": h.height, "nodes": h.nodes(syn.levels[j])}
                 for j, h in zip(syn.used, used, strict=True)],
        "candidates": [{"column": h.column, "level": level, "height": h.height,
                        "sizes": list(h.sizes)}
                       for h, level in zip(syn.hierarchies, syn.levels, strict=True)],
        "selected_columns": None if syn.selected is None else list(syn.selected),
        "n_cells": int(syn.counts.shape[0]),
        **syn.design.to_json(),
        "pool_scored": syn.pool_size,
        "noise_scale": HIST_SENSITIVITY / eps_hist,
        "quality_sensitivity": quality_sensitivity(eps_hist / HIST_SENSITIVITY),
        "noisy_totals": {"negative": int(totals[0]), "positive": int(totals[1])},
        "decision": decision,
        "cells_file": CELLS_FILE,
        "cells_sha256": cells_digest,
        "schema": schema_to_dict(Schema(columns=kept, label=schema.label,
                                        source=schema.source)),
        # the spec's column names (public): synthesize names those its records lack
        "spec_columns": [c.name for c in schema.columns],
        "breakdown": syn.design.plan.to_json(),
    }


# ---------------------------------------------------------------------- reading
#: how a cell's counts become a class: see :meth:`GridModel.decide`
DECISIONS = ("balanced", "majority")


class GridModel:
    """The synopsis as a histogram classifier.

    Probabilities are (count + π) / (cell total + 1) with π the noisy class
    shares of the whole grid, so an empty cell (or a row whose value is in
    no node) gets the overall shares. The class decision is the payload's
    ``decision``: ``majority`` predicts each cell's noisy majority (best
    accuracy, but on a rare class it predicts the majority nearly everywhere);
    ``balanced`` predicts the class whose share in the cell is highest
    relative to its overall share π (the rule that maximises balanced
    accuracy: both classes weigh the same). Grids written before the key
    existed used ``majority``.
    """

    def __init__(self, payload: dict[str, Any], counts: np.ndarray, path: Path) -> None:
        self.payload = payload
        self.schema = schema_from_dict(payload["schema"], path)
        self.grid = payload["grid"]
        self.columns = tuple(g["column"] for g in self.grid)
        self.shape = tuple(len(g["nodes"]) for g in self.grid)
        self.n = int(payload["n"])
        if counts.shape != (int(np.prod(self.shape)), 2):
            raise ValueError("cells do not match the grid")
        self.counts = counts.astype(float)
        total = self.counts.sum(axis=0)
        self.prior = total / total.sum() if total.sum() > 0 else np.full(2, 0.5)
        self.decision = str(payload.get("decision", "majority"))
        if self.decision not in DECISIONS:
            raise ValueError(f"decision must be one of {', '.join(DECISIONS)}, "
                             f"got {self.decision!r}")
        self._maps = [self._node_map(g) for g in self.grid]

    @classmethod
    def load(cls, path: Path) -> GridModel:
        """grid.json (or the folder holding it) with its cells file, digest checked."""
        from dpcli.io import read_envelope

        path = Path(path)
        if path.is_dir():
            path = path / GRID_FILE
        env = read_envelope(path, KIND)
        return cls.from_payload(env["payload"], path)

    @classmethod
    def from_payload(cls, payload: dict[str, Any], path: Path) -> GridModel:
        cells = Path(path).parent / payload["cells_file"]
        try:
            data = cells.read_bytes()
        except OSError:
            raise DataError(f"{path}: its cells file {cells} is missing (keep grid.json and "
                            f"{payload['cells_file']} together)") from None
        if hashlib.sha256(data).hexdigest() != payload["cells_sha256"]:
            raise DataError(f"{cells}: does not match {path} (SHA-256 differs): the pair was "
                            "mixed up or edited")
        table = pq.read_table(io.BytesIO(data))
        counts = np.column_stack([table.column(c).to_numpy() for c in COUNT_COLUMNS])
        return cls(payload, counts, Path(path))

    def _node_map(self, g: dict[str, Any]) -> Any:
        col = self.schema.column(g["column"])
        if isinstance(col, NumericColumn):
            edges = [n["interval"][0] for n in g["nodes"]] + [g["nodes"][-1]["interval"][1]]
            return np.asarray(edges, dtype=float)
        assert isinstance(col, CategoricalColumn | BinaryColumn)
        code = {v: i for i, v in enumerate(col.levels)}
        table = np.full(len(col.levels), -1, dtype=np.int64)
        for k, node in enumerate(g["nodes"]):
            for v in node["values"]:
                table[code[v]] = k
        return table

    def has_values_in_no_node(self) -> bool:
        """Whether some declared value falls in no node (such a row is scored by the prior)."""
        return any(m.dtype.kind != "f" and bool((m < 0).any()) for m in self._maps)

    def cells(self, batch: EncodedBatch) -> np.ndarray:
        """Cell index per row (−1 for a row with a value in no node)."""
        flat = np.zeros(batch.n, dtype=np.int64)
        bad = np.zeros(batch.n, dtype=bool)
        for g, size, m in zip(self.grid, self.shape, self._maps, strict=True):
            values = batch.columns[g["column"]]
            assert isinstance(values, np.ndarray)
            if m.dtype.kind == "f":
                node = np.clip(np.searchsorted(m, values, side="left") - 1, 0, size - 1)
            else:
                node = m[values.astype(np.int64)]
                bad |= node < 0
            flat = flat * size + np.maximum(node, 0)
        flat[bad] = -1
        return flat

    def shares(self, counts: np.ndarray) -> np.ndarray:
        """(negative, positive) shares of cells with these (negative, positive) counts."""
        return (counts + self.prior) / (counts.sum(axis=1, keepdims=True) + 1.0)

    def decide(self, share: np.ndarray) -> np.ndarray:
        """1 where the cells' (negative, positive) shares give the positive class, else 0.

        A tie (an empty cell under ``balanced``) goes to the overall majority.
        """
        if self.decision == "majority":
            return (share[:, 1] > share[:, 0]).astype(np.int64)
        lift = share / np.maximum(self.prior, 1e-300)   # share relative to the overall share
        majority = int(self.prior[1] > self.prior[0])
        tie = np.isclose(lift[:, 1], lift[:, 0], rtol=1e-12, atol=0.0)
        return np.where(tie, majority, lift[:, 1] > lift[:, 0]).astype(np.int64)

    def in_label_order(self, values: np.ndarray) -> np.ndarray:
        """(negative, positive) columns reordered as the label's declared classes."""
        pos = self.schema.label.positive_index
        pos = 1 if pos is None else pos
        out = np.empty_like(values)
        out[:, pos], out[:, 1 - pos] = values[:, 1], values[:, 0]
        return out

    def _row_shares(self, batch: EncodedBatch) -> np.ndarray:
        cell = self.cells(batch)
        counts = np.where(cell[:, None] >= 0, self.counts[np.maximum(cell, 0)], 0.0)
        return self.shares(counts)

    def predict_proba(self, batch: EncodedBatch) -> np.ndarray:
        return self.in_label_order(self._row_shares(batch))

    def classify(self, batch: EncodedBatch) -> tuple[np.ndarray, np.ndarray]:
        """Class probabilities and each row's class code under the grid's ``decision``."""
        share = self._row_shares(batch)
        positive = self.decide(share)
        pos = self.schema.label.positive_index
        pos = 1 if pos is None else pos
        return self.in_label_order(share), np.where(positive == 1, pos, 1 - pos)


# ------------------------------------------------------------------- synthesize
def synthesize(model: GridModel, rows: int, rng: np.random.Generator) -> pa.Table:
    """``rows`` records drawn from the synopsis: post-processing, no budget.

    A (cell, class) pair is drawn ∝ its noisy count; each used column's
    value is drawn uniformly within the cell's node (a declared category
    of the node — the literal ``other`` only for a node holding nothing
    else — or a number in the node's interval within the declared bounds).
    Only the grid's columns and the label are written: the synopsis says
    nothing about the others.
    """
    flat = model.counts.ravel()
    if flat.sum() <= 0:
        raise DataError("the synopsis has no positive counts to draw from")
    drawn = rng.multinomial(rows, flat / flat.sum())
    pick = np.repeat(np.arange(flat.size), drawn)
    rng.shuffle(pick)
    cell, cls = pick // 2, pick % 2
    index = np.unravel_index(cell, model.shape) if model.shape else ()
    arrays: dict[str, Any] = {}
    for axis, g in enumerate(model.grid):
        col = model.schema.column(g["column"])
        node = index[axis]
        if isinstance(col, NumericColumn):
            lo = np.array([max(n["interval"][0], col.lower) for n in g["nodes"]])
            hi = np.array([min(n["interval"][1], col.upper) for n in g["nodes"]])
            hi = np.maximum(hi, lo)
            arrays[col.name] = pa.array(lo[node] + rng.random(rows) * (hi[node] - lo[node]))
        else:
            values = np.empty(rows, dtype=object)
            for k, n in enumerate(g["nodes"]):
                mine = node == k
                choices = [v for v in n["values"] if v != "other"] or n["values"]
                values[mine] = np.asarray(choices, dtype=object)[
                    rng.integers(len(choices), size=int(mine.sum()))]
            arrays[col.name] = pa.array(values, pa.string())
    label = model.schema.label
    pos = 1 if label.positive_index is None else label.positive_index
    names = np.asarray([label.classes[1 - pos], label.classes[pos]], dtype=object)[cls]
    arrays[label.column] = _label_array(names, label.classes)
    return pa.table(arrays)


def _label_array(values: np.ndarray, classes: tuple[str, ...]) -> pa.Array:
    """The label as integers when every class is an integer literal, else as strings."""
    try:
        ints = {c: int(c) for c in classes}
    except ValueError:
        return pa.array(values, pa.string())
    if all(str(v) == c for c, v in ints.items()):
        return pa.array([ints[v] for v in values], pa.int64())
    return pa.array(values, pa.string())
