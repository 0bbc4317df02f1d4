"""Forecasts of every spending command's error from public facts (docs/forecast.md).

``forecast(command, spec, section, n, **context)`` dispatches to the module
named for the command (``dpcli.forecast.<command>``, dashes as underscores),
each of which defines ``forecast(spec, section, n, **context) -> Forecast``:
``section`` is the command's resolved spec section (its ``epsilon`` is the
total), ``n`` the record count, ``context`` what else the command knows that
is public (a released model, the chosen columns).
"""

from __future__ import annotations

import importlib
from typing import Any

from dpcli.forecast.core import (
    LEVEL,
    Forecast,
    LazyMetrics,
    MetricForecast,
    Verdict,
    from_samples,
    laplace_error,
    make_forecast,
    shared,
    solve_epsilon,
)

__all__ = ["LEVEL", "Forecast", "LazyMetrics", "MetricForecast", "Verdict", "forecast",
           "from_samples", "has_forecast", "laplace_error", "make_forecast", "module_for", "shared",
           "solve_epsilon"]

# the commands with a forecast module; a command missing here has none yet
COMMANDS = ("tabulate", "evaluate", "roc", "publish-grid", "train-nb", "validate", "train-brc",
            "select-features")


def has_forecast(command: str) -> bool:
    if command not in COMMANDS:
        return False
    try:
        module_for(command)
    except ModuleNotFoundError as e:
        if e.name != _name(command):
            raise  # the module exists and one of its imports is missing: a real error
        return False
    return True


def forecast(command: str, spec: Any, section: Any, n: int, **context: Any) -> Forecast:
    """The forecast of ``command`` at ``section.epsilon`` on ``n`` records (costs nothing)."""
    if not has_forecast(command):
        raise KeyError(f"{command} has no forecast")
    declared = getattr(spec, "positive_share", None)
    if declared is not None and context.get("prevalence") is None:
        # the spec's 'forecast: positive_share' (public by declaration) replaces the stated
        # assumption; a released model's own share, when the command passes one, wins
        context = {**context, "prevalence": declared, "prevalence_source": "the spec's"}
    result: Forecast = module_for(command).forecast(spec, section, n, **context)
    return result


def _name(command: str) -> str:
    return f"dpcli.forecast.{command.replace('-', '_')}"


def module_for(command: str) -> Any:
    """The forecast module of ``command`` (its ``forecast`` and ``plan`` functions)."""
    return importlib.import_module(_name(command))
