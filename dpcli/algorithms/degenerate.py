"""Is a released classifier degenerate? Judged from the released model and the declared domains.

A model that gives one score to every input, or that can never predict one of
the two classes whatever the input, is useless; releasing it without a word is
a defect. This module says so, from public facts only: the released
parameters and the spec's declared domains (bounds, categories, vocabularies).
It reads no record, so it is post-processing and costs no ε.

For binary models whose log-odds are a sum of one term per column (naive
Bayes, logistic regression on the one-hot, unit-ball design) the range of the
log-odds over the whole declared domain is found column by column: the log-odds
of any input is the base input's plus, for each column, the change its value
makes on its own. The extremes are therefore the base plus the sum of each
column's extreme changes:

* a categorical or binary column: every declared level (and ``other``);
* a numeric column: a grid of 2,049 points over [lower, upper] (the term is
  a quadratic in naive Bayes, linear in logistic regression; the grid holds
  both bounds, and between grid points the error is second order);
* a tokens column (naive Bayes): each word's gain over the empty set, at most
  ``max_per_row`` words at a time (the top ones for the maximum).

The verdict is exact in kind: "never predicts class c" means no input in the
declared domain gets class c.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dpcli.data.encode import EncodedBatch, TokenSets
from dpcli.data.schema import BinaryColumn, CategoricalColumn, NumericColumn, TokensColumn

NUMERIC_POINTS = 2049
#: log-odds that vary by less than this over the whole domain: one score for every input
CONSTANT_SPREAD = 1e-9


@dataclass(frozen=True)
class Verdict:
    """What the released model can output over the declared domain."""

    classes: tuple[str, ...]
    log_odds: tuple[float, float]   # min and max over the domain, of class 1 against class 0
    never: tuple[str, ...]          # classes no input in the domain is predicted
    #: a spread below this is reported; a model may ask for a wider one (near-constant)
    spread_floor: float = CONSTANT_SPREAD

    @property
    def constant(self) -> bool:
        return self.log_odds[1] - self.log_odds[0] < self.spread_floor

    @property
    def degenerate(self) -> bool:
        return self.constant or bool(self.never)

    def problem(self) -> str | None:
        """One line for stderr, or None when the model is not degenerate."""
        if not self.degenerate:
            return None
        parts = []
        if self.constant and self.spread_floor > CONSTANT_SPREAD:
            spread = self.log_odds[1] - self.log_odds[0]
            parts.append(f"it gives nearly the same score to every input (log-odds vary by "
                         f"{spread:.2g} < {self.spread_floor:g} over the declared domain)")
        elif self.constant:
            parts.append("it gives the same score to every input")
        if self.never:
            parts.append(f"no input in the declared domain is predicted class "
                         f"{' or '.join(map(repr, self.never))}")
        return ("degenerate model: " + "; ".join(parts) + ". Either the noise at this ε "
                "and n drowns what the data could tell (more ε, fewer columns or a coarser "
                "model help) or the class is rare (rank by the score instead of the class); "
                "the model file records this under 'degeneracy'")

    def to_json(self) -> dict[str, Any]:
        lo, hi = self.log_odds
        return {"checked": "over the declared domain, from the released parameters",
                "degenerate": self.degenerate, "constant_score": self.constant,
                "never_predicted": list(self.never), "log_odds_range": [lo, hi]}


def check(model: Any) -> Verdict | None:
    """The verdict for a binary naive Bayes or logistic regression model (None otherwise)."""
    schema = model.schema
    if len(schema.label.classes) != 2:
        return None
    base = {name: _first(schema.column(name)) for name in model.columns}
    base_value = float(_log_odds(model, _batch(base, 1))[0])
    lo = hi = base_value
    for name in model.columns:
        col = schema.column(name)
        if isinstance(col, TokensColumn):
            gains = _log_odds(model, _batch({**base, name: _singletons(col)},
                                            len(col.vocabulary))) - base_value
            r = col.max_per_row or len(gains)
            ordered = np.sort(gains)
            hi += float(np.clip(ordered[::-1][:r], 0, None).sum())
            lo += float(np.clip(ordered[:r], None, 0).sum())
            continue
        values = _candidates(col)
        batch = _batch({**base, name: values}, len(values))
        change = _log_odds(model, batch) - base_value
        hi += float(change.max())
        lo += float(change.min())
    classes = tuple(schema.label.classes)
    # a model with its own released class cut (validate's threshold) is judged at that cut
    cut = float(getattr(model, "decision_log_odds", 0.0))
    never = tuple(c for c, unreachable in ((classes[1], hi <= cut), (classes[0], lo > cut))
                  if unreachable)
    return Verdict(classes, (lo, hi), never,
                   float(getattr(model, "near_constant_spread", CONSTANT_SPREAD)))


def check_cells(model: Any) -> Verdict | None:
    """The verdict for a grid synopsis used as a histogram classifier (binary labels only).

    Every cell of the grid is some input of the declared domain (the nodes cover
    every declared value), so the outputs over the domain are exactly the
    cells' scores, plus the prior's when a declared value falls in no node.
    """
    schema = model.schema
    if len(schema.label.classes) != 2:
        return None
    counts = model.counts
    share = (counts + model.prior) / (counts.sum(axis=1, keepdims=True) + 1.0)
    if model.has_values_in_no_node():
        share = np.vstack([share, model.prior[None, :]])
    pos = schema.label.positive_index
    pos = 1 if pos is None else pos
    out = np.empty_like(share)
    out[:, pos], out[:, 1 - pos] = share[:, 1], share[:, 0]
    log_odds = np.log(np.maximum(out[:, 1], 1e-300)) - np.log(np.maximum(out[:, 0], 1e-300))
    predicted = set(np.argmax(out, axis=1).tolist())
    classes = tuple(schema.label.classes)
    never = tuple(c for code, c in enumerate(classes) if code not in predicted)
    return Verdict(classes, (float(log_odds.min()), float(log_odds.max())), never)


def _log_odds(model: Any, batch: EncodedBatch) -> np.ndarray:
    """log P(class 1 | x) − log P(class 0 | x), without the saturation of probabilities."""
    if hasattr(model, "joint_log_likelihood"):
        jll = model.joint_log_likelihood(batch)
        return jll[:, 1] - jll[:, 0]
    z = np.asarray(model.design(batch) @ model.weights)   # logistic regression: logit of positive
    pos = model.schema.label.positive_index
    return z if pos in (None, 1) else -z


def _candidates(col: Any) -> Any:
    if isinstance(col, NumericColumn):
        return np.linspace(col.lower, col.upper, NUMERIC_POINTS)
    if isinstance(col, CategoricalColumn):
        return np.arange(len(col.levels), dtype=np.int32)
    if isinstance(col, BinaryColumn):
        return np.array([0, 1], dtype=np.int8)
    if isinstance(col, TokensColumn):
        return TokenSets(np.zeros(2, dtype=np.int64), np.zeros(0, dtype=np.int32))  # no word
    raise TypeError(f"no candidates for a {type(col).__name__}")


def _first(col: Any) -> Any:
    """The base input's value of a column: its first candidate (no word for tokens)."""
    values = _candidates(col)
    return values if isinstance(values, TokenSets) else values[:1]


def _singletons(col: TokensColumn) -> TokenSets:
    v = len(col.vocabulary)
    return TokenSets(np.arange(v + 1, dtype=np.int64), np.arange(v, dtype=np.int32))


def _batch(values: dict[str, Any], n: int) -> EncodedBatch:
    """n rows: a column given n values keeps them, a column given one is repeated."""
    columns: dict[str, Any] = {}
    for name, v in values.items():
        if isinstance(v, TokenSets):
            columns[name] = v if v.n == n else TokenSets(np.zeros(n + 1, dtype=np.int64),
                                                         np.zeros(0, dtype=np.int32))
        else:
            v = np.asarray(v)
            columns[name] = v if v.size == n else np.repeat(v[:1], n)
    return EncodedBatch(n, np.zeros(n, dtype=np.int32), columns)
