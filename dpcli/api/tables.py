"""In-memory tables (pandas, Arrow) as inputs: what a notebook hands the library.

The data layer reads files (its checks, fingerprint and passes all stream a
file), so a table is written once to a private temporary Parquet file (mode
0600 in a 0700 folder, removed when the run ends) and read from there. The
ledger records that temporary path as the run's input, with the keyed digest
of its bytes.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dpcli.errors import UsageError
from dpcli.spec import Schema

Data = Any  # a path, a pandas DataFrame or an Arrow table


def to_arrow(table: Any, what: str = "the table") -> pa.Table:
    """A pandas DataFrame or Arrow table/record batch as an Arrow table (no index)."""
    if isinstance(table, pa.Table):
        return table
    if isinstance(table, pa.RecordBatch):
        return pa.Table.from_batches([table])
    if hasattr(table, "columns") and hasattr(table, "iloc"):   # pandas, without importing it
        return pa.Table.from_pandas(table, preserve_index=False)
    raise UsageError(f"{what}: expected a pandas DataFrame or an Arrow table, got "
                     f"{type(table).__name__} (a 2-D array has no column names to match the "
                     "schema's)")


def check_declared(schema: Schema, names: Sequence[str], what: str = "the table") -> None:
    """Every column must be declared in the schema (an undeclared one has no public domain)."""
    for name in names:
        if not schema.has(name) and name != schema.label.column:
            raise UsageError(f"{what}: column {name!r} is not declared in the schema; declare "
                             "it in the spec or drop it before fitting")


def with_label(schema: Schema, x: Any, y: Any) -> pa.Table:
    """Features ``x`` and labels ``y`` as one table whose label column is the schema's."""
    table = to_arrow(x, "X")
    check_declared(schema, table.column_names, "X")
    label = schema.label.column
    if y is None:
        if label not in table.column_names:
            raise UsageError(f"X has no label column {label!r} and no y was given")
        return table
    if label in table.column_names:
        raise UsageError(f"X holds the label column {label!r} and y was given too: pass one")
    values = np.asarray(y)
    if values.ndim != 1 or len(values) != table.num_rows:
        raise UsageError(f"y: expected {table.num_rows} labels in one column, got shape "
                         f"{values.shape}")
    return table.append_column(label, pa.array(values.tolist()))


@contextmanager
def as_file(data: Data) -> Iterator[Path | str]:
    """A path for ``data``: itself if it is one, else a private temporary Parquet file."""
    if isinstance(data, (str, Path)):
        yield data
        return
    import pyarrow.parquet as pq

    table = to_arrow(data, "data")
    with tempfile.TemporaryDirectory(prefix="dpcli-table-") as folder:   # created 0700
        path = Path(folder) / "table.parquet"
        pq.write_table(table, path)
        path.chmod(0o600)
        yield path
