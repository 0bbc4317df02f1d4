"""cells.parquet written a row group at a time is byte for byte the whole table's file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from dpcli.algorithms import privpfc as pp
from dpcli.algorithms import synopsis as syn_io
from dpcli.budget import Budget
from dpcli.checks import Where
from dpcli.data.schema import CategoricalColumn, NumericColumn
from dpcli.data.taxonomy import hierarchy

WHERE = Where(Path("spec.yaml"), "columns.x.taxonomy")


def _synopsis(levels: tuple[int, ...], bins: int, seed: int) -> pp.Synopsis:
    cols = [NumericColumn(f"x{i}", 0.0, float(bins), taxonomy={"bins": [bins]})
            for i in range(len(levels) - 1)]
    cols.append(CategoricalColumn("c", ("c1", "c2", "c3")))
    hs = tuple(hierarchy(col, WHERE) for col in cols)
    cells = int(np.prod([h.sizes[lv] for h, lv in zip(hs, levels, strict=True) if lv > 0]))
    rng = np.random.default_rng(seed)
    counts = rng.integers(-5, 50, size=(cells, 2)).astype(np.int64)
    design = pp.design(hs, 10_000, Budget(1.0))
    return pp.Synopsis(hs, levels, counts, design, None, 1)


@pytest.mark.parametrize(("levels", "bins"), [
    ((1, 1, 1), 4),          # one small row group
    ((0, 0, 0), 4),          # no used column: one cell, the counts only
    ((1, 0, 1), 8),          # an unused column in the middle
    ((1, 1, 1), 600),        # 1,080,000 cells: two row groups, the boundary mid-grid
])
def test_cells_parquet_is_the_whole_tables_file_byte_for_byte(
        levels: tuple[int, ...], bins: int) -> None:
    syn = _synopsis(levels, bins, seed=len(levels) + bins)
    old = syn_io.parquet_bytes(syn_io.cells_table(syn))
    new = syn_io.cells_parquet(syn)
    assert new == old
    if syn.counts.shape[0] > syn_io.CELLS_ROW_GROUP:   # the large case does cross a group
        meta = pq.ParquetFile(pa_buffer(new)).metadata
        assert meta.num_row_groups == 2
        assert meta.num_rows == syn.counts.shape[0]


def pa_buffer(data: bytes):  # type: ignore[no-untyped-def]
    import pyarrow as pa

    return pa.BufferReader(data)
