"""tabulate's forecast: each table's per-cell count error, next to its mean cell count n/cells.

Closed form. Table j's cells get discrete Laplace noise of scale Δ_j/ε_j
(ε split equally between the class counts and the tables, Δ = 2, 2r for a
tokens column), so a cell's error has the exact quantiles of
:mod:`dpcli.forecast._noise`. The release clips negative counts to 0, which
only shrinks the error of a non-negative count: the forecast ignores it
(a bound). Headline ``relative``: the median cell error over the mean cell
count n/cells of the table where that ratio is largest; usable when at most
:data:`TARGET` (a cell of average size is then known to ±10 %).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from dpcli.forecast._noise import abs_quantile, count_error
from dpcli.forecast.core import LEVEL, Forecast, MetricForecast, make_forecast
from dpcli.mechanisms import Plan

TARGET = 0.1

METHOD = "closed form (discrete Laplace quantiles)"


def _columns(spec: Any, section: Any) -> tuple[str, ...]:
    from dpcli.algorithms import tabulate as algo

    return tuple(section.columns or algo.default_columns(spec.schema))


def plan(spec: Any, section: Any, n: int, **context: Any) -> Plan:
    """tabulate's plan at ``section.epsilon`` (the one its api module spends)."""
    from dpcli.algorithms import tabulate as algo
    from dpcli.budget import Budget

    return algo.plan(spec.schema, _columns(spec, section), Budget(section.epsilon))


def tables(spec: Any, section: Any, columns: Sequence[str]) -> dict[str, tuple[str, int, int]]:
    """Step name → (table name, cells, sensitivity): public (declared domains, bins)."""
    from dpcli.algorithms import tabulate as algo
    from dpcli.algorithms.common import table_sensitivity

    classes = spec.schema.n_classes
    out = {algo.CLASS_STEP: (spec.schema.label.column, classes, 2)}
    for c in columns:
        levels = len(algo.level_names(spec.schema, c, section.bins))
        out[f"counts:{c}"] = (c, classes * levels, table_sensitivity(spec.schema, c))
    return out


def half_width(sensitivity: int, epsilon: float, level: float = LEVEL) -> int:
    """The error bar of a released cell: ±k covers its noise with probability ≥ ``level``."""
    return abs_quantile(sensitivity / epsilon, level)


def forecast(spec: Any, section: Any, n: int, **context: Any) -> Forecast:
    """Per table: ``cell:<table>`` (count error) and the worst ``relative`` error (over n/cells)."""
    columns = _columns(spec, section)
    shape = tables(spec, section, columns)

    def metrics_at(eps: float) -> dict[str, MetricForecast]:
        p = plan(spec, dataclasses.replace(section, epsilon=eps), n)
        out: dict[str, MetricForecast] = {}
        worst: MetricForecast | None = None
        for step in p:
            table, cells, sens = shape[step.name]
            scale = sens / float(step.budget.epsilon)
            out[f"cell:{table}"] = count_error(scale, f"{table} cell count error")
            rel = count_error(scale, "cell count error relative to the mean cell count "
                              "(n/cells)", per=max(n, 1) / cells)
            if worst is None or rel.expected > worst.expected or (
                    rel.expected == worst.expected and rel.bound > worst.bound):
                worst = rel
        assert worst is not None
        return {"relative": worst, **out}

    return make_forecast("tabulate", section.epsilon, n, METHOD, metrics_at, headline="relative",
                         target=TARGET, note="cells of average size are mostly noise",
                         extra={"cells": {t: c for t, c, _ in shape.values()}})
