"""Private evaluation of a classifier: a noisy confusion matrix and what follows from it.

The K×K matrix C[true, predicted] of a test set is a histogram over a
partition of the records: replacing one record moves one unit out of one
cell and into another, so its L1 sensitivity is 2 under replace-one
neighbours. It is released with discrete Laplace noise of scale 2/ε
(docs/design.md rule 6), then post-processed, at no further cost, to the nearest
matrix (in L2) with non-negative entries summing to the public n, rounded
to integers with the same sum. Accuracy, per-class precision and recall,
and F1 are functions of the released matrix.

Exact zero columns. When the released model can predict no input of the
declared domain as class j (:mod:`dpcli.algorithms.predictable`: decided
from the model and the spec only), C[:, j] = 0 for every dataset: a public
fact, released as exact zeros without noise. The mechanism is then the same
histogram restricted to the other columns, with the same noise: each record
still lies in exactly one of its cells, so replacing one record moves at
most one unit out of one cell and into another, L1 sensitivity 2 (reached
whenever two records of different true classes get the same prediction,
i.e. K ≥ 2). Fewer coordinates do not lower an L1 sensitivity, and discrete
Laplace's per-cell scale is Δ₁/ε whatever the number of cells, so the other
cells keep scale 2/ε at the same ε: nothing is reallocated. What the zeros
buy is in the post-processing: the public n is shared among the noisy cells
only, so noise drawn for an impossible cell no longer takes mass from the
others (a one-cell grid that never predicts '1' had a released '1' column
of [17, 21] and a precision of 0.55). The choice of columns is a function of
public inputs, so the privacy of the release does not depend on it being
right; its truth (the zeros) does, which is why only exact decisions are used
(docs/algorithms/roc.md, "Exact zero columns").

Releases: the post-processed matrix. Cost: ε.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpcli.budget import Budget
from dpcli.mechanisms import Plan, discrete_laplace_mechanism
from dpcli.mechanisms.consistency import nonnegative_with_total, round_with_total

SENSITIVITY = 2


def plan(total: Budget, classes: int) -> Plan:
    """One step: the K×K confusion matrix under discrete Laplace, Δ = 2."""
    p = Plan.split(total, {"confusion": ("discrete_laplace", 1)})
    eps = float(p.step("confusion").budget.epsilon)
    return p.with_fields({"confusion": {
        "note": f"{classes}×{classes} counts, Δ={SENSITIVITY} (replace-one), "
                f"scale {SENSITIVITY / eps:.4g}",
        "sensitivity": SENSITIVITY}})


def confusion_counts(true: np.ndarray, predicted: np.ndarray, classes: int) -> np.ndarray:
    """C[i, j] = number of records of class i predicted as j (private; int64)."""
    index = np.asarray(true, dtype=np.int64) * classes + np.asarray(predicted, dtype=np.int64)
    counts = np.bincount(index, minlength=classes * classes).reshape(classes, classes)
    return counts.astype(np.int64, copy=False)


class ConfusionPass:
    """The K×K confusion counts of a streaming pass, added batch by batch (private).

    Counts add over batches, so :attr:`counts` is :func:`confusion_counts`
    of the whole file, in K² int64 cells whatever the number of rows.
    """

    def __init__(self, classes: int) -> None:
        self.classes = int(classes)
        self.counts = np.zeros((self.classes, self.classes), dtype=np.int64)

    def add(self, predicted: np.ndarray, true: np.ndarray) -> None:
        """One batch's predicted and true class codes (the order of ``predict.fold``)."""
        predicted, true = np.asarray(predicted), np.asarray(true)
        if predicted.shape != true.shape:
            raise ValueError("predicted and true class codes must have the same length")
        self.counts += confusion_counts(true, predicted, self.classes)


def noise_sd(epsilon: float) -> float:
    """Standard deviation of one cell's discrete Laplace noise, scale 2/ε."""
    q = math.exp(-epsilon / SENSITIVITY)
    return math.sqrt(2.0 * q) / (1.0 - q)


#: a released balanced accuracy this close above chance (1/K) is called "little skill"
LITTLE_SKILL = 0.03

@dataclass(frozen=True)
class Evaluation:
    """A released confusion matrix (rows: true class, columns: predicted class)."""

    classes: tuple[str, ...]
    matrix: np.ndarray
    epsilon: float
    positive: int | None = None
    #: class codes the model can never predict: their columns are exact zeros, not noise
    exact_zero: tuple[int, ...] = ()
    #: why those columns are exact (how the model's predictable classes were decided)
    exact_why: str = ""

    @property
    def noisy_columns(self) -> int:
        """How many predicted-class columns carry noise (K less the exact ones)."""
        return len(self.classes) - len(self.exact_zero)

    @property
    def n(self) -> int:
        return int(self.matrix.sum())

    @property
    def accuracy(self) -> float:
        return float(np.trace(self.matrix)) / max(self.n, 1)

    def accuracy_noise_sd(self) -> float:
        """The noise's standard deviation on the accuracy before post-processing.

        trace/n with K independent cells (fewer when columns are exact zeros): √K·sd/n.
        Sampling error of the test set itself is not included.
        """
        return math.sqrt(self.noisy_columns) * noise_sd(self.epsilon) / max(self.n, 1)

    def per_class(self) -> dict[str, dict[str, float | None]]:
        out: dict[str, dict[str, float | None]] = {}
        for i, c in enumerate(self.classes):
            tp = float(self.matrix[i, i])
            predicted = float(self.matrix[:, i].sum())
            actual = float(self.matrix[i, :].sum())
            precision = tp / predicted if predicted > 0 else None
            recall = tp / actual if actual > 0 else None
            f1 = None
            if precision is not None and recall is not None:
                both = precision + recall
                f1 = 2 * precision * recall / both if both > 0 else 0.0
            elif i in self.exact_zero and recall is not None:
                # never predicted: precision is undefined (no prediction of it), but
                # F1 = 2TP / (2TP + FP + FN) = 0 exactly: TP is an exact 0 and FN > 0
                f1 = 0.0
            out[c] = {"precision": precision, "recall": recall, "f1": f1, "support": actual}
        return out

    def balanced_accuracy(self) -> float | None:
        """The mean recall over the classes the released matrix has rows for."""
        recalls = [v["recall"] for v in self.per_class().values() if v["recall"] is not None]
        return float(np.mean(recalls)) if recalls else None

    def no_skill(self) -> str | None:
        """A caution when the released matrix shows no skill (balanced accuracy at or below
        chance, 1/K) or little (within :data:`LITTLE_SKILL` of it). Read from released
        values only (post-processing, free). Plain accuracy below the majority class's share
        is not used: a threshold aimed at balanced accuracy gives that on rare classes while
        the model ranks well."""
        balanced = self.balanced_accuracy()
        chance = 1.0 / len(self.classes)
        if balanced is None or balanced > chance + LITTLE_SKILL:
            return None
        if balanced > chance:   # tester 13: 0.514 on a 67 % class, released without a word
            return (f"the released confusion matrix shows little skill: balanced accuracy "
                    f"{balanced:.3f}, within {LITTLE_SKILL:g} of chance ({chance:.3g}). The "
                    "model is barely better than guessing on this data, or the noise "
                    "decides: read the intervals, spend more ε, or evaluate on more records")
        return (f"the released confusion matrix shows no skill: balanced accuracy "
                f"{balanced:.3f}, at or below chance ({chance:.3g}). The model may be useless "
                "on this data, or the noise decides: read the intervals, spend more ε, or "
                "evaluate on more records")

    def noise_sized_classes(self) -> str | None:
        """A caution when a class's released size (its row of the matrix, K noisy cells) is
        within the noise's 95 % half-width of zero: that class's recall, and so the balanced
        accuracy, are then the noise's (a test set holding one class released a recall of 1.0
        for the absent one). Read from released values only (post-processing, free)."""
        halfwidth = 1.96 * math.sqrt(self.noisy_columns) * noise_sd(self.epsilon)
        small = [(c, float(self.matrix[i, :].sum())) for i, c in enumerate(self.classes)
                 if self.matrix[i, :].sum() <= halfwidth]
        if not small:
            return None
        named = ", ".join(f"{c!r} (released size {size:,.0f})" for c, size in small)
        return (f"class {named} is within the noise of an empty class (± {halfwidth:,.0f} "
                "at 95 %): its recall and the balanced accuracy are noise, and the test set "
                "may hold (almost) no such rows. Evaluate on more records of each class, or "
                "spend more ε")

    def caution(self) -> str | None:
        """Every caution the released matrix calls for (:meth:`no_skill`,
        :meth:`noise_sized_classes`), one sentence each, or None."""
        found = [c for c in (self.noise_sized_classes(), self.no_skill()) if c is not None]
        return "; ".join(found) if found else None

    def never_predicted(self) -> list[str]:
        """The classes the model can never predict (their columns are exact zeros)."""
        return [self.classes[j] for j in self.exact_zero]

    def exact_columns(self) -> dict[str, Any]:
        """What the outputs say of the exact zero columns: which, why, and what follows."""
        return {"never_predicted": self.never_predicted(),
                "released": "exact zeros, without noise: the model predicts no input of the "
                            "declared domain as these classes, so their columns are 0 for "
                            "every dataset (a public fact)",
                "decided_from": self.exact_why,
                "precision": "undefined for these classes (the model never predicts them)",
                "noise_on_the_rest": f"unchanged: scale {SENSITIVITY / self.epsilon:.4g} on "
                                     f"each of the {len(self.classes) * self.noisy_columns} "
                                     f"other cells (Δ = {SENSITIVITY} under replace-one "
                                     "whatever the number of cells)"}

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "classes": list(self.classes),
            "confusion": self.matrix.astype(int).tolist(),
            "rows": "true class", "columns": "predicted class",
            "n": self.n, "accuracy": self.accuracy,
            "noise": {"mechanism": "discrete_laplace", "sensitivity": SENSITIVITY,
                      "scale": SENSITIVITY / self.epsilon, "cell_sd": noise_sd(self.epsilon)},
            # the metrics' uncertainty is `intervals` alone (90 %, added by the command):
            # the accuracy's noise sd beside it gave scripts a second, different number
            "per_class": self.per_class(),
        }
        if self.positive is not None:
            payload["positive_class"] = self.classes[self.positive]
        if self.exact_zero:
            payload["exact_columns"] = self.exact_columns()
        caution = self.caution()
        if caution is not None:
            payload["caution"] = caution
        return payload


def private_confusion(counts: np.ndarray, classes: tuple[str, ...], *, epsilon: float,
                      rng: np.random.Generator, positive: int | None = None,
                      sensitivity: int = SENSITIVITY, exact_zero: tuple[int, ...] = (),
                      exact_why: str = "") -> Evaluation:
    """Release ``counts`` (K×K, private) with noise and consistency; cost ε (module docstring).

    ``sensitivity``: the plan step's (:func:`plan` records Δ = 2 under replace-one).
    ``exact_zero``: codes of classes the model can never predict, decided from public inputs
    only (:mod:`dpcli.algorithms.predictable`; ``exact_why`` says how). Their columns are
    released as zeros without noise; the other K·(K − |exact_zero|) cells are the histogram
    restricted to them (still Δ₁ = 2 under replace-one: one record leaves one cell and
    enters one), with the same noise, and share the public n. With none, the release is
    the K×K one, draw for draw."""
    counts = np.asarray(counts, dtype=np.int64)
    n = int(counts.sum())  # public: the test set's size
    exact = tuple(sorted({int(j) for j in exact_zero}))
    k = len(classes)
    if not all(0 <= j < k for j in exact) or len(exact) >= k:
        raise ValueError(f"exact zero columns {exact} for {k} classes: a model predicts "
                         "some class")
    # with no exact column every column is kept: the K×K release, the same draws
    kept = [j for j in range(k) if j not in exact]
    # n, not the kept cells' sum: a count in an exact column (impossible when the
    # decision is right) is left out of the release, never read
    noisy = discrete_laplace_mechanism(counts[:, kept], sensitivity=sensitivity,
                                       epsilon=epsilon, rng=rng)
    matrix = np.zeros((k, k), dtype=np.int64)
    matrix[:, kept] = round_with_total(nonnegative_with_total(noisy, n), n)
    return Evaluation(classes=classes, matrix=matrix, epsilon=epsilon, positive=positive,
                      exact_zero=exact, exact_why=exact_why)
