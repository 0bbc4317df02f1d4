"""What the data layer did to the values it read: the run's data report.

Public domains are declared, never read off the data (docs/design.md rule 2), so
values outside a domain are clamped or mapped, never used to widen it. The
custodian still needs to know how often that happened (a bound declared far
too tight, a category list missing a common value, a vocabulary that misses
most tokens). This module counts those events per column.

PRIVACY: these counts are computed from the private data *without noise*.
The report is meant for the data custodian, on stderr only. It must never be
written into an output file, a model, the ``--json`` summary or the audit
log, and it must never be shown to an analyst who is only entitled to the
differentially private outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

_COUNTERS = (
    "clamped_below",
    "clamped_above",
    "mapped_to_other",
    "imputed",
    "tokens_out_of_vocabulary",
    "rows_token_capped",
)


@dataclass
class ColumnCounts:
    """Per-column counters of values the data layer changed (see module docstring).

    ``mapped_to_other`` counts values outside the declared domain: for a
    categorical column they become the ``other`` level, for a binary column
    they become ``values[0]``. ``imputed`` counts missing values filled under
    the ``impute`` policy.
    """

    kind: str = ""
    clamped_below: int = 0
    clamped_above: int = 0
    mapped_to_other: int = 0
    imputed: int = 0
    tokens_out_of_vocabulary: int = 0
    rows_token_capped: int = 0
    token_cap: int | None = None

    def merge(self, other: ColumnCounts) -> ColumnCounts:
        """Add ``other``'s counters into this one (in place) and return self."""
        for name in _COUNTERS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.kind = self.kind or other.kind
        if self.token_cap is None:
            self.token_cap = other.token_cap
        return self

@dataclass
class DataReport:
    """Counters for one pass over a data source (custodian-only; see module docstring).

    ``rows`` is the number of records encoded; ``columns`` maps each column
    name to its :class:`ColumnCounts`. Reports of partitions combine with
    :meth:`merge` (a distributed engine builds one per partition).
    """

    rows: int = 0
    columns: dict[str, ColumnCounts] = field(default_factory=dict)
    file: Path | None = None

    def column(self, name: str, kind: str = "") -> ColumnCounts:
        """The counters of ``name``, created empty on first use."""
        counts = self.columns.get(name)
        if counts is None:
            counts = self.columns[name] = ColumnCounts(kind=kind)
        elif kind and not counts.kind:
            counts.kind = kind
        return counts

    def merge(self, other: DataReport) -> DataReport:
        """Add ``other``'s counts into this report (in place) and return self."""
        self.rows += other.rows
        for name, counts in other.columns.items():
            self.column(name, counts.kind).merge(counts)
        if self.file is None:
            self.file = other.file
        return self

    def as_dict(self) -> dict[str, object]:
        """Plain-data form (for a distributed engine to ship partial reports).

        Not for outputs: the counts are private (module docstring).
        """
        return {
            "rows": self.rows,
            "file": None if self.file is None else str(self.file),
            "columns": {name: {f.name: getattr(c, f.name) for f in fields(c)}
                        for name, c in self.columns.items()},
        }

    def lines(self) -> list[str]:
        """Human-readable lines for the custodian's stderr (never for outputs)."""
        where = f" from {self.file}" if self.file is not None else ""
        out = [f"read {self.rows:,} rows{where}"]
        for name, c in self.columns.items():
            parts: list[str] = []
            if c.clamped_below or c.clamped_above:
                parts.append(f"{c.clamped_below:,} values clamped up to the lower bound, "
                             f"{c.clamped_above:,} clamped down to the upper bound")
            if c.mapped_to_other:
                target = ("the first declared value" if c.kind == "binary"
                          else "the 'other' level")
                parts.append(f"{c.mapped_to_other:,} undeclared values mapped to {target}")
            if c.imputed:
                parts.append(f"{c.imputed:,} missing values imputed")
            if c.tokens_out_of_vocabulary:
                parts.append(f"{c.tokens_out_of_vocabulary:,} out-of-vocabulary tokens dropped")
            if c.rows_token_capped:
                cap = "" if c.token_cap is None else f" to {c.token_cap} tokens"
                parts.append(f"{c.rows_token_capped:,} rows capped{cap}")
            if parts:
                out.append(f"  {name}: " + "; ".join(parts))
        if len(out) == 1:
            out.append("  no value was clamped, mapped, imputed or dropped")
        return out
