"""Noisy per-class counts of declared columns (the ``tabulate`` subcommand).

Releases, for the label and for each requested column, the table of counts
per (class, level) — categorical levels including ``other``, binary values,
equal-width bins of a numeric column within its declared bounds, or words
of a token column's public vocabulary — each with discrete Laplace noise.

Privacy (replace-one neighbours, n public). Each table partitions the rows
(one cell per row; for tokens, at most r cells per row with ``max_per_row = r``).
Replacing one record removes it from at most one cell (r cells) and adds
it to at most one cell (r cells), so each table has L1 sensitivity 2
(2r for tokens). Table j receives ε_j with Σ ε_j = ε (basic composition),
noise scale Δ_j/ε_j. Clipping negative noisy counts to 0 is post-processing.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from itertools import pairwise

import numpy as np

from dpcli.algorithms.common import table_sensitivity
from dpcli.budget import Budget
from dpcli.data.schema import NumericColumn, Schema
from dpcli.mechanisms import Plan, discrete_laplace_mechanism
from dpcli.stats import Stats, StatsRequest

CLASS_STEP = "class_counts"


def default_columns(schema: Schema) -> tuple[str, ...]:
    """Every declared non-numeric column, in schema order."""
    return tuple(c.name for c in schema.columns if not isinstance(c, NumericColumn))


def plan(schema: Schema, columns: Sequence[str], total: Budget) -> Plan:
    """Split ``total`` equally between the class counts and each column's table."""
    shares = {CLASS_STEP: ("discrete_laplace", Fraction(1))}
    for name in columns:
        shares[f"counts:{name}"] = ("discrete_laplace", Fraction(1))
    p = Plan.split(total, shares)
    sens = {CLASS_STEP: 2, **{f"counts:{c}": table_sensitivity(schema, c) for c in columns}}
    notes = {step.name: f"Δ={sens[step.name]}, scale {sens[step.name] / step.budget.eps:.4g}"
             for step in p}
    return p.with_notes(notes).with_sensitivities(sens)


def request(schema: Schema, columns: Sequence[str], bins: int) -> StatsRequest:
    """The sufficient statistics ``release`` needs, computed in one pass."""
    numeric = [c for c in columns if isinstance(schema.column(c), NumericColumn)]
    other = [c for c in columns if c not in numeric]
    return StatsRequest(contingency=tuple(other), histograms=tuple((c, bins) for c in numeric))


def level_names(schema: Schema, column: str, bins: int) -> list[str]:
    """Public names of a column's levels (bins as half-open intervals of the declared range)."""
    col = schema.column(column)
    if isinstance(col, NumericColumn):
        edges = np.linspace(col.lower, col.upper, bins + 1)
        return [f"[{lo:g}, {hi:g}{']' if i == bins - 1 else ')'}"
                for i, (lo, hi) in enumerate(pairwise(edges))]
    return list(col.levels)


def release(stats: Stats, p: Plan, schema: Schema, columns: Sequence[str], bins: int,
            rng: np.random.Generator) -> list[dict[str, object]]:
    """Add the planned noise to every table; returns rows (table, level, class, count, lower,
    upper).

    Costs exactly ``p.total``. Everything after the noise is post-processing,
    including each cell's 90 % error bar [lower, upper] = [max(count − k, 0), count + k],
    with k the smallest integer P(|noise| ≤ k) ≥ 0.9 (docs/forecast.md): it covers the
    true count whenever |noise| ≤ k (a count clipped to 0 had true ≤ −noise ≤ k).
    """
    from dpcli.forecast.tabulate import half_width

    classes = schema.label.classes
    rows: list[dict[str, object]] = []

    def emit(table: str, levels: list[str], counts: np.ndarray, step: str) -> None:
        drawn = p.draw(step)   # the step's one draw: its ε and the sensitivity planned for it
        noisy = discrete_laplace_mechanism(counts, sensitivity=drawn.integer_sensitivity(),
                                           epsilon=drawn.budget.eps, rng=rng)
        noisy = np.maximum(noisy, 0)
        half = half_width(drawn.integer_sensitivity(), drawn.budget.eps)
        for k, cls in enumerate(classes):
            for j, level in enumerate(levels):
                count = int(noisy[k, j])
                rows.append({"table": table, "level": level, "class": cls, "count": count,
                             "lower": max(count - half, 0), "upper": count + half})

    emit(schema.label.column, ["all"], stats.class_counts.reshape(-1, 1), CLASS_STEP)
    for name in columns:
        table = stats.histograms[name] if name in stats.histograms else stats.contingency[name]
        emit(name, level_names(schema, name, bins), table, f"counts:{name}")
    return rows
