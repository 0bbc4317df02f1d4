"""``dpcli.predict.fold`` and ``collect``: the one pass of ``roc`` and ``evaluate``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpcli.data import DataSource
from dpcli.data.schema import Label, NumericColumn, Schema
from dpcli.errors import DataError
from dpcli.predict import collect, fold

SCHEMA = Schema(columns=(NumericColumn("p", 0.0, 1.0),), label=Label("y", ("0", "1")))


def _source(tmp_path: Path, n: int, batch_rows: int) -> DataSource:
    rng = np.random.default_rng(0)
    table = pa.table({"p": rng.random(n), "y": rng.choice(["0", "1"], n)})
    path = tmp_path / "d.parquet"
    pq.write_table(table, path)
    return DataSource(path, SCHEMA, batch_rows=batch_rows)


def _score(batch) -> np.ndarray:
    return np.asarray(batch.columns["p"], dtype=np.float64)


def test_fold_hands_every_batch_to_add_and_reports_progress(tmp_path: Path) -> None:
    source = _source(tmp_path, 23, batch_rows=5)
    sizes: list[int] = []
    progress: list[int] = []
    total = np.zeros(2, dtype=np.int64)

    def add(scores: np.ndarray, labels: np.ndarray) -> None:
        assert scores.shape == labels.shape
        sizes.append(scores.size)
        total[:] += np.bincount(labels, minlength=2)

    rows = fold(source, ("p",), _score, add, rng=np.random.default_rng(1),
                progress=progress.append)
    assert rows == 23 and sizes == [5, 5, 5, 5, 3] and progress == sizes
    values, labels = collect(source, ("p",), _score, rng=np.random.default_rng(1),
                             progress=lambda n: None)
    np.testing.assert_array_equal(np.bincount(labels, minlength=2), total)
    assert values.size == 23 and np.all((values >= 0) & (values <= 1))


def test_a_file_with_no_rows_is_a_data_error(tmp_path: Path) -> None:
    source = _source(tmp_path, 0, batch_rows=5)
    with pytest.raises(DataError, match="holds no rows"):
        fold(source, ("p",), _score, lambda s, y: None, rng=np.random.default_rng(1),
             progress=lambda n: None)
    with pytest.raises(DataError, match="holds no rows"):
        collect(source, ("p",), _score, rng=np.random.default_rng(1), progress=lambda n: None)
