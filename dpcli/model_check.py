"""A model file is checked in full when it is loaded, before anything is charged or written.

Why: a model is a public release, but its file can be truncated, hand-edited
or mixed up. Used unchecked, a table of the wrong shape failed only after
roc or evaluate had charged the budget (``unexpected IndexError``), and NaN
means or negative variances gave NaN scores without a word. Every check here
reads the model only (no private value): shapes against the model's own
schema, finite numbers, ordered bounds, positive variances, known classes
and levels. A failure is a DataError (exit 65) ``malformed model FILE: what``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from dpcli.data.schema import (
    BinaryColumn,
    CategoricalColumn,
    NumericColumn,
    Schema,
    TokensColumn,
)
from dpcli.errors import DataError


class _Bad(Exception):
    """What is wrong, for the message."""


def check(kind: str, model: Any, path: Path) -> None:
    """DataError ``malformed model PATH: …`` unless ``model`` (of ``kind``) is usable."""
    try:
        _schema(model.schema)
        _columns(model.schema, model.columns)
        CHECKS[kind](model)
    except _Bad as exc:
        raise DataError(f"malformed model {path}: {exc}") from None


def _schema(schema: Schema) -> None:
    classes = list(schema.label.classes)
    if len(classes) < 2 or len(set(classes)) != len(classes):
        raise _Bad(f"the label needs two or more distinct classes, has {classes}")
    if schema.label.positive is not None and schema.label.positive not in classes:
        raise _Bad(f"the positive class {schema.label.positive!r} is not one of {classes}")
    for col in schema.columns:
        where = f"column {col.name!r}"
        if isinstance(col, NumericColumn):
            if not (math.isfinite(col.lower) and math.isfinite(col.upper)
                    and col.lower < col.upper):
                raise _Bad(f"{where}: bounds [{col.lower}, {col.upper}] are not finite and "
                           "ordered")
        elif isinstance(col, CategoricalColumn | BinaryColumn | TokensColumn):
            levels = list(col.levels)
            if not levels or len(set(levels)) != len(levels):
                raise _Bad(f"{where}: its declared values are empty or repeated")


def _columns(schema: Schema, columns: Iterable[str]) -> None:
    names = list(columns)
    if len(set(names)) != len(names):
        raise _Bad("a column is listed twice")
    for c in names:
        if not schema.has(c):
            raise _Bad(f"column {c!r} is not in the model's schema")


def _array(value: Any, shape: tuple[int, ...], what: str, *, minimum: float | None = None,
           positive: bool = False) -> np.ndarray:
    a = np.asarray(value, dtype=float)
    if a.shape != shape:
        raise _Bad(f"{what} has shape {a.shape}, expected {shape}")
    if not np.all(np.isfinite(a)):
        raise _Bad(f"{what} holds a value that is not a finite number")
    if minimum is not None and np.any(a < minimum):
        raise _Bad(f"{what} holds a negative value")
    if positive and np.any(a <= 0):
        raise _Bad(f"{what} holds a value that is not positive")
    return a


def _number(value: Any, what: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise _Bad(f"{what} is not a number") from None
    if not math.isfinite(x):
        raise _Bad(f"{what} is not a finite number")
    return x


def _binary(model: Any) -> None:
    if model.schema.n_classes != 2:
        raise _Bad(f"this model kind needs a binary label, the model declares "
                   f"{model.schema.n_classes} classes")


def _naive_bayes(model: Any) -> None:
    k = model.schema.n_classes
    _array(model.class_counts, (k,), "class_counts", minimum=0)
    for name, value in model.pseudo.items():
        if name not in model.columns or not (math.isfinite(value) and value >= 0):
            raise _Bad(f"pseudo-count of {name!r} is not a non-negative number of a column")
    for name in model.columns:
        col = model.schema.column(name)
        if isinstance(col, NumericColumn):
            p = model.numeric.get(name)
            if p is None:
                raise _Bad(f"numeric column {name!r} has no mean and variance")
            if p.bins is not None:
                if np.ndim(p.bins) != 2 or np.shape(p.bins)[1] < 1:
                    raise _Bad(f"histogram of {name!r} is not a table of classes by bins")
                _array(p.bins, (k, np.shape(p.bins)[1]), f"histogram of {name!r}", minimum=0)
            _array(p.mean, (k,), f"mean of {name!r}")
            _array(p.variance, (k,), f"variance of {name!r}", positive=True)
            lower, upper = _number(p.lower, f"lower of {name!r}"), _number(p.upper,
                                                                          f"upper of {name!r}")
            if not lower < upper:
                raise _Bad(f"bounds of {name!r} are not ordered ({lower} >= {upper})")
        else:
            table = model.tables.get(name)
            if table is None:
                raise _Bad(f"column {name!r} has no count table")
            _array(table, (k, len(col.levels)), f"count table of {name!r}",
                   minimum=0)


def _brc(model: Any) -> None:
    _binary(model)
    if model.mode not in ("partial", "private"):
        raise _Bad(f"mode {model.mode!r} is neither 'partial' nor 'private'")
    unknown = set(model.public_columns) - set(model.columns)
    if unknown:
        raise _Bad(f"public column(s) {sorted(unknown)} are not among the model's columns")
    if model.config.voted:
        # Algorithm 2, selecting: T private selections, each with at most one free public
        # round beside it (brc.train)
        private = sum(r.hyperplane is not None for r in model.rounds)
        if private != model.config.rounds or len(model.rounds) > 2 * private:
            raise _Bad(f"{private} private rounds of {len(model.rounds)} listed, "
                       f"T = {model.config.rounds}")
    elif len(model.rounds) != model.config.rounds:
        raise _Bad(f"{len(model.rounds)} rounds listed, T = {model.config.rounds}")
    if model.n < 1:
        raise _Bad(f"n = {model.n} (a trained model saw at least one row)")
    if not (math.isfinite(model.epsilon) and model.epsilon > 0):
        raise _Bad(f"epsilon {model.epsilon} is not a positive number")
    _number(model.calibration.a, "calibration a")
    _number(model.calibration.b, "calibration b")
    private = model.private_columns
    numeric = [c for c in private if isinstance(model.schema.column(c), NumericColumn)]
    for t, r in enumerate(model.rounds, 1):
        _number(r.alpha, f"round {t}: alpha")
        if r.hyperplane is not None:
            h = r.hyperplane
            _number(h.intercept, f"round {t}: intercept")
            _array(h.numeric, (len(numeric),), f"round {t}: numeric weights")
            for c in private:
                if c in numeric:
                    continue
                levels = model.schema.column(c).levels
                _array(h.levels.get(c), (len(levels),), f"round {t}: weights of {c!r}")
        else:
            s = r.stump
            if s is None or s.column not in model.public_columns:
                raise _Bad(f"round {t}: a public round on a column that is not public")
            if s.signs is not None:
                levels = model.schema.column(s.column).levels
                signs = _array(s.signs, (len(levels),), f"round {t}: signs")
                if not np.all(np.isin(signs, (-1, 1))):
                    raise _Bad(f"round {t}: signs must be -1 or +1")
            else:
                if not isinstance(model.schema.column(s.column), NumericColumn):
                    raise _Bad(f"round {t}: a threshold on non-numeric column {s.column!r}")
                _number(s.threshold, f"round {t}: threshold")
                if s.above not in (-1, 1):
                    raise _Bad(f"round {t}: 'above' must be -1 or +1")


def _logistic(model: Any) -> None:
    _binary(model)
    width = 1
    for c in model.columns:
        col = model.schema.column(c)
        if isinstance(col, TokensColumn):
            raise _Bad(f"column {c!r} is a tokens column, which logistic regression can't read")
        width += 1 if isinstance(col, NumericColumn) else len(col.levels)
    _array(model.weights, (width,), "weights")
    _number(getattr(model, "threshold", 0.0), "threshold_logit")


def _grid(model: Any) -> None:
    _binary(model)
    if model.n < 0:
        raise _Bad(f"n = {model.n} is negative")
    _array(model.counts, (int(np.prod(model.shape)), 2), "cell counts", minimum=0)
    for g in model.grid:
        name = g["column"]
        col = model.schema.column(name)
        if not g["nodes"]:
            raise _Bad(f"grid column {name!r} has no nodes")
        if isinstance(col, NumericColumn):
            edges = [_number(n["interval"][0], f"interval of {name!r}") for n in g["nodes"]]
            edges.append(_number(g["nodes"][-1]["interval"][1], f"interval of {name!r}"))
            if any(b <= a for a, b in itertools.pairwise(edges)):
                raise _Bad(f"the intervals of {name!r} are not ordered")
        else:
            levels = set(col.levels)
            for node in g["nodes"]:
                unknown = set(node["values"]) - levels
                if unknown:
                    raise _Bad(f"grid column {name!r} names undeclared value(s) "
                               f"{sorted(unknown)}")


CHECKS = {"naive_bayes": _naive_bayes, "brc": _brc, "logistic_regression": _logistic,
          "grid_synopsis": _grid}
