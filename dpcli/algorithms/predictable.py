"""Which classes a released model can predict, decided exactly from public inputs only.

A class that no input of the declared domain is predicted has a column of
zeros in every confusion matrix of that model, whatever the data: a public
fact (a function of the released model and the spec's declared domains), so
``evaluate`` releases that column without noise (docs/algorithms/roc.md,
"Exact zero columns"). The decision is made only where it is *exact*: every input
the model can see is accounted for, not a sample of them.

* a grid synopsis (publish-grid): every row falls in one of the released
  cells (numeric values are clamped into the declared bounds, then into the
  outer nodes), or, when a declared value lies in no node, gets the overall
  shares; the classes are those the grid's own decision rule gives those
  cells and, then, the shares;
* any other model whose columns are all categorical or binary, when the
  product of their levels (``other`` included: every code the encoder can
  give, missing values imputed to a declared level) is at most
  :data:`ENUMERATION_LIMIT`: the model's own ``classify`` on every input;
* a score column thresholded at ``cutoff``: scores are clamped into the
  declared range, so a cutoff at its upper end is never exceeded.

Anything else (a numeric or tokens column, a larger product) is not decided
(None): the degeneracy checks of :mod:`dpcli.algorithms.degenerate` probe a
numeric column on a grid of points or an ensemble on sampled inputs, which
says what is likely, not what is impossible.

Reads no record: post-processing of released values, free.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpcli.data.encode import EncodedBatch
from dpcli.data.schema import BinaryColumn, CategoricalColumn

#: the most inputs enumerated to decide a model on categorical and binary columns
ENUMERATION_LIMIT = 1 << 16
_BATCH = 8192


@dataclass(frozen=True)
class Predictable:
    """The class codes some input of the declared domain is predicted, and how that was found."""

    codes: frozenset[int]
    how: str

    def never(self, classes: int) -> tuple[int, ...]:
        """The codes of the ``classes`` that no input is predicted, in order."""
        return tuple(c for c in range(classes) if c not in self.codes)


def grid_decisions(model: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(shares, decided side, noisy mass) of every output a grid synopsis can give: its cells,
    and its overall shares when a declared value falls in no node (mass 0). The decided side
    is 1 for the positive class, 0 for the other, by the grid's own rule (``model.decide``)."""
    counts = model.counts
    share = model.shares(counts)
    decided = model.decide(share)
    mass = counts.sum(axis=1)
    if model.has_values_in_no_node():
        share = np.vstack([share, model.prior[None, :]])
        decided = np.append(decided, model.decide(model.prior[None, :]))
        mass = np.append(mass, 0.0)
    return share, decided, mass


def of_model(model: Any) -> Predictable | None:
    """The classes ``model`` can predict over the declared domain, where that is exact;
    None where it is not decided (module docstring)."""
    from dpcli.algorithms.synopsis import GridModel

    if isinstance(model, GridModel):
        return _of_grid(model)
    return _enumerated(model)


def of_cutoff(positive: int, upper: float, cutoff: float) -> Predictable:
    """A score column thresholded at ``cutoff`` (positive when score > cutoff): scores are
    clamped into [lower, upper], so the positive class is never predicted when cutoff ≥ upper.
    The negative class may always be (a score at the cutoff or below is in the range)."""
    if cutoff >= upper:
        return Predictable(frozenset({1 - positive}),
                           f"every score is clamped into the declared range, whose upper end "
                           f"{upper:g} does not exceed the cutoff {cutoff:g}")
    return Predictable(frozenset({0, 1}), "the cutoff lies inside the declared score range")


def _of_grid(model: Any) -> Predictable:
    _, decided, _ = grid_decisions(model)
    pos = model.schema.label.positive_index
    pos = 1 if pos is None else pos
    codes = frozenset(pos if side == 1 else 1 - pos for side in np.unique(decided).tolist())
    cells = int(model.counts.shape[0])
    extra = " and the overall shares (a declared value in no node)" \
        if model.has_values_in_no_node() else ""
    return Predictable(codes, f"the grid's decision on each of its {cells:,} released "
                              f"cell{'s' if cells != 1 else ''}{extra}")


def _enumerated(model: Any) -> Predictable | None:
    """Every input of a model on categorical and binary columns only, through its classify."""
    from dpcli.predict import classify

    schema = model.schema
    sizes: list[int] = []
    for name in model.columns:
        col = schema.column(name)
        if isinstance(col, CategoricalColumn):
            sizes.append(len(col.levels))   # the declared categories and ``other``
        elif isinstance(col, BinaryColumn):
            sizes.append(2)
        else:
            return None   # numeric, tokens: not enumerable
    total = math.prod(sizes)
    if total > ENUMERATION_LIMIT:
        return None
    dtypes = [np.int32 if isinstance(schema.column(name), CategoricalColumn) else np.int8
              for name in model.columns]
    grid = itertools.product(*(range(s) for s in sizes))
    seen: set[int] = set()
    for start in range(0, total, _BATCH):
        rows = np.array(list(itertools.islice(grid, _BATCH)), dtype=np.int64)
        n = min(_BATCH, total - start)
        rows = rows.reshape(n, len(sizes))
        columns: dict[str, Any] = {name: rows[:, j].astype(dtypes[j])
                                   for j, name in enumerate(model.columns)}
        batch = EncodedBatch(n, np.zeros(n, dtype=np.int32), columns)
        seen.update(int(c) for c in np.unique(classify(model, batch)[1]))
    return Predictable(frozenset(seen), f"the model's own decision on every one of the "
                                        f"{total:,} inputs of the declared domain")
