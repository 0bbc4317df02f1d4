"""Reading private data under the declared public schema (see docs/design.md, Architecture).

The names below are imported on first use (PEP 562): importing a light submodule
(``dpcli.data.schema``, ``dpcli.data.pandas_shim``) runs this file first, and it must
not load the readers and with them pyarrow's Parquet and file-system modules, which
only a command that reads a file needs (docs/scale.md, fixed cost).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the type checker sees the names the lazy import below hands out
    from dpcli.data.encode import BatchEncoder, EncodedBatch, TokenSets
    from dpcli.data.reader import (
        CSV_SUFFIXES,
        PARQUET_SUFFIXES,
        DataSource,
        StructureReport,
        TypeMismatch,
        detect_format,
    )
    from dpcli.data.report import ColumnCounts, DataReport
    from dpcli.data.schema import (
        BinaryColumn,
        CategoricalColumn,
        Column,
        Label,
        NumericColumn,
        Schema,
        TokensColumn,
    )

#: each public name and the submodule that defines it
_HOME = {
    "BatchEncoder": "encode", "EncodedBatch": "encode", "TokenSets": "encode",
    "CSV_SUFFIXES": "reader", "PARQUET_SUFFIXES": "reader", "DataSource": "reader",
    "StructureReport": "reader", "TypeMismatch": "reader", "detect_format": "reader",
    "ColumnCounts": "report", "DataReport": "report",
    "BinaryColumn": "schema", "CategoricalColumn": "schema", "Column": "schema",
    "Label": "schema", "NumericColumn": "schema", "Schema": "schema",
    "TokensColumn": "schema",
}

__all__ = [
    "CSV_SUFFIXES",
    "PARQUET_SUFFIXES",
    "BatchEncoder",
    "BinaryColumn",
    "CategoricalColumn",
    "Column",
    "ColumnCounts",
    "DataReport",
    "DataSource",
    "EncodedBatch",
    "Label",
    "NumericColumn",
    "Schema",
    "StructureReport",
    "TokenSets",
    "TokensColumn",
    "TypeMismatch",
    "detect_format",
]


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
