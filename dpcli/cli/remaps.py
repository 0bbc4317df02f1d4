"""What a run would do to a file's values: ``dpcli inspect``'s per-column remapping counts.

Free (nothing is released: the counts go to the custodian's terminal only)
and read with the same encoder as every spending command, so the counts are
the ones a run's ``--report`` would show. Like that report they are exact
private figures: ``inspect`` prints them only with ``--report`` (design
notes, rule 5: exact figures reach the custodian's screen only on request);
without it, it says which columns hold such values and what a run does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from dpcli.data.schema import BinaryColumn, CategoricalColumn, Schema


@dataclass
class Remaps:
    """Per column: how many values a run would change, by kind (exact, private)."""

    rows: int = 0
    counts: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, column: str, kind: str, count: int) -> None:
        if count:
            mine = self.counts.setdefault(column, {})
            mine[kind] = mine.get(kind, 0) + int(count)


def count_remaps(schema: Schema, batches: Iterable[tuple[pa.RecordBatch, Any]],
                 report: Callable[[], Any]) -> Remaps:
    """Consume ``(raw, encoded)`` batches of a source, whose encoder fills the
    :class:`dpcli.data.report.DataReport` that ``report()`` returns once they are read;
    add case-only mismatches from the raw categorical values, which the encoder counts
    as undeclared."""
    import pyarrow.compute as pc

    from dpcli.data.encode import to_text

    out = Remaps()
    values = {c.name: list(c.categories) if isinstance(c, CategoricalColumn) else list(c.values)
              for c in schema.columns if isinstance(c, CategoricalColumn | BinaryColumn)}
    lowered = {name: pa.array(sorted({str(v).lower() for v in vs}), pa.string())
               for name, vs in values.items()}
    declared = {name: pa.array([str(v) for v in vs], pa.string()) for name, vs in values.items()}
    for raw, _encoded in batches:
        out.rows += raw.num_rows
        names = raw.schema.names
        for name, lower in lowered.items():
            if name not in names:
                continue
            text = to_text(raw.column(names.index(name)))
            case_only = pc.and_(pc.invert(pc.is_in(text, value_set=declared[name])),
                                pc.is_in(pc.utf8_lower(text), value_set=lower))
            out.add(name, "case", pc.sum(pc.cast(case_only, pa.int64())).as_py() or 0)
    for name, c in report().columns.items():
        case = out.counts.get(name, {}).get("case", 0)
        out.add(name, "undeclared", max(0, c.mapped_to_other - case))
        out.add(name, "below", c.clamped_below)
        out.add(name, "above", c.clamped_above)
        out.add(name, "missing", c.imputed)
        out.add(name, "out_of_vocabulary", c.tokens_out_of_vocabulary)
        out.add(name, "capped", c.rows_token_capped)
    return out


def action(column: Any, kind: str) -> str:
    """What every run does with one kind of value of ``column`` (the run report's words)."""
    if kind == "case":
        if isinstance(column, BinaryColumn):
            return (f"differ only in case from a declared value → {column.values[0]!r} (declare "
                    "them as written)")
        return "differ only in case from a declared category → 'other' (declare them as written)"
    if kind == "undeclared":
        if isinstance(column, BinaryColumn):
            return f"undeclared → {column.values[0]!r} (the first declared value)"
        return "undeclared → 'other'"
    if kind == "below":
        return f"below the bounds → clamped to {column.lower:g}"
    if kind == "above":
        return f"above the bounds → clamped to {column.upper:g}"
    if kind == "missing":
        return "missing → imputed"
    if kind == "out_of_vocabulary":
        return "tokens outside the vocabulary → dropped"
    return "rows with more tokens than max_per_row → capped"


def describe(remaps: Remaps, column: Any, *, exact: bool) -> str:
    """One cell: what a run does with this column's values ("-" when nothing changes);
    the exact counts only when ``exact`` (``--report``), "some" otherwise."""
    kinds = remaps.counts.get(column.name, {})
    if not kinds:
        return "-"
    # "all" is worth saying without --report: a column every value of which is remapped is
    # a spec typo ('yes' declared, 'Yes' stored), not data
    return "; ".join(f"{f'{n:,}' if exact else ('all' if n >= remaps.rows > 0 else 'some')} "
                     f"{action(column, k)}" for k, n in kinds.items())
