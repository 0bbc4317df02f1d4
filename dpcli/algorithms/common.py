"""Pieces shared by the algorithms that release count tables."""

from __future__ import annotations

from dpcli.data.schema import Schema, TokensColumn
from dpcli.errors import SpecError
from dpcli.stats.accumulators import contingency_sensitivity


def table_sensitivity(schema: Schema, column: str) -> int:
    """L1 sensitivity (replace-one) of ``column``'s per-class count table, as released.

    An uncapped tokens column would need noise scaled to twice the whole
    vocabulary: refused, with the key to set.
    """
    col = schema.column(column)
    if isinstance(col, TokensColumn) and col.max_per_row is None:
        raise SpecError(
            f"{schema.source}: columns.{column}.max_per_row: is required to release counts of a "
            "tokens column (it bounds one record's contribution, and so the noise)")
    return contingency_sensitivity(col)
