"""A data file's columns and the kind of feature each could be, from its structure alone.

Reads the Parquet footer (names, Arrow types, the row count in the metadata)
or the CSV header line; never a value. ``dpcli init`` builds a starting spec
from this, so it can run on a file before anyone has declared anything.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from dpcli.data.reader import _open_parquet, csv_header, detect_format, parquet_files, refuse_stdin
from dpcli.errors import DataError, NoInput

#: kinds: numeric, categorical, binary, tokens; ``unknown`` (CSV: no types in a header);
#: ``skip`` (a storage type no declared column reads, e.g. a timestamp)
Layout = tuple[list[tuple[str, str]], int | None]


def describe_columns(path: Path) -> Layout:
    """Each column's name and likely kind, and the row count when the metadata holds it."""
    refuse_stdin(path)
    if not path.exists():
        raise NoInput(f"{path}: file not found")
    if detect_format(path) == "csv":
        names = csv_header(path)
        _no_duplicates(path, names)
        return [(n, "unknown") for n in names], None
    files = parquet_files(path)
    if not files:
        raise DataError(f"{path}: holds no Parquet file")
    rows = 0
    with _open_parquet(files[0]) as pf:
        schema = pf.schema_arrow
    for f in files:
        with _open_parquet(f) as pf:
            rows += pf.metadata.num_rows
    _no_duplicates(path, schema.names)
    return [(field.name, kind_of(field.type)) for field in schema], rows


def kind_of(t: pa.DataType) -> str:
    """The feature kind an Arrow storage type suggests (the custodian may change it)."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_boolean(t):
        return "binary"
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "numeric"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "categorical"
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and (
            pa.types.is_string(t.value_type) or pa.types.is_large_string(t.value_type)):
        return "tokens"
    return "skip"


def _no_duplicates(path: Path, names: list[str]) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise DataError(f"{path}: column {n!r} appears twice; name every column once")
        seen.add(n)
