"""Pieces shared by the algorithms that release count tables."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

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


def cap_tokens(schema: Schema, columns: Sequence[str], r: int | None) -> Schema:
    """``schema`` with each tokens column in ``columns`` capped at ``r`` words per row.

    This is the paper's sampling (Stoddard et al. §3.2): a row with more
    than r distinct in-vocabulary words keeps a uniformly random r of them,
    so one record moves at most r counts of the column's table (L1
    sensitivity 2r under replace-one). ``r`` None keeps each column's
    declared ``max_per_row``.
    """
    if r is None:
        return schema
    cols = tuple(replace(c, max_per_row=r) if isinstance(c, TokensColumn) and c.name in columns
                 else c for c in schema.columns)
    return replace(schema, columns=cols)
