"""Reading private data under the declared public schema (see docs/design.md, Architecture)."""

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
