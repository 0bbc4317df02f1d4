"""A private class-decision threshold for a binary naive Bayes model.

Naive Bayes ranks well and decides badly: its log-odds are over-confident,
and on a rare class or under noise the cut at 0 (the most probable class)
can predict one class for every row. train-nb therefore releases, after the
model, a threshold t on the positive class's log-odds s(x) = log P(pos | x)
− log P(neg | x): the model predicts the positive class when s(x) > t.

**Candidates (public).** C = 128 values: 0 (the plain argmax), the released
model's log prior odds log(ñ_pos/ñ_neg) with the sign that makes the prior
vanish from s, i.e. t = log(ñ_pos/ñ_neg) (the cut that maximises balanced
accuracy for a calibrated model), and 126 points sinh(u), u evenly spaced
over ±asinh(R), R the largest |log-odds| the released model reaches over the
declared domain (:mod:`dpcli.algorithms.degenerate`), capped at 10^4 — fine
steps near 0, coarse ones far out. A model with a tokens column spreads those
points around the log-odds every row shares instead (its every-word-absent terms
and the prior: the log-odds of a row with no words), from the range's low end to its
high end (a cut outside the range is one-class on every possible row): with V
words, each noisy, that shared shift can be hundreds of nats while the rows spread
over a few (tweets at n = 1,400, ε = 0.5: every row within
−498 … −473 of a shift of −494, where the grid around 0 had steps of ~60, so no
candidate split the rows and the model was one-class). Any other model (round 9)
spreads them around the log-odds of a *typical row*, the mean over rows drawn from the
released model itself (:meth:`NaiveBayesModel.typical_log_odds`: x from the mixture
Σ_c π̃_c·P(x | c) of the released class shares and distributions), and only within
WINDOW = 4 model-implied sd of it (the sd of that row's log-odds, the columns taken
independent): many noisy numeric terms put every training row tens of nats from 0 while
the model's range over the declared domain reaches thousands (digits at n = 880,
ε = 0.5: rows in −150 … −20, typical row −78 ± 22), and a grid over the
whole range had a handful of points inside the rows against some sixty one-class ones,
which outweighed them in the quantile below. All are functions of
released values and declared domains: post-processing.

**Utility and its sensitivity.** q(t) = TP(t)/a + TN(t)/b, where TP(t) is the
number of positive training records with s(x) > t, TN(t) the negatives with
s(x) ≤ t, and a = max(ñ_pos, 1), b = max(ñ_neg, 1) the *released* class
counts (public constants here; q is balanced accuracy up to their noise).
Replacing one record removes one record's contribution (to TP or to TN, at
most 1, or none) and adds another's: if both fall in the same class the
count moves by at most 1 in total (−1 and +1 cancel at best, at worst only
one happens); if they fall in different classes, one count can drop by 1
and the other rise by 1, moving q by |1/b − 1/a| ≤ max(1/a, 1/b), or only
one of them moves. So Δq = 1/min(a, b), whatever the model (it is fixed
before the data are read again).

**Accuracy instead** (``threshold: accuracy``): q(t) = TP(t) + TN(t), the
number of training records classified right; a replaced record changes it
by at most 1 (its own contribution goes, the new one's comes, each 0 or 1),
so Δq = 1. Balanced accuracy is the default: it never rewards a one-class
rule on a rare class; accuracy suits a user scored on accuracy.

**When ε is too small to choose** (:func:`resolvable`): with Δq known from the
released counts, the mechanism picks a candidate whose utility is ``GAP`` below
the best with total probability at most C·exp(−ε_t·GAP/(2Δq)). ``GAP`` is 0.5
for balanced accuracy (a balanced accuracy of 0.75 against a one-class rule's
0.5) and 5 % of the records for accuracy. When that bound exceeds e^−3 (5 %),
the mechanism could as well pick a one-class cut far out, so the step uses its ε
on the prior quantile instead (below). The decision is a function of released
values and ε: public.

**When balanced accuracy cannot be resolved: the prior quantile.** The released
prior says what share π̃ = ñ_pos/(ñ_pos + ñ_neg) of the rows is positive. A model
whose log-odds are badly scaled (many noisy numeric terms) can put every training
row below the prior's cut; the cut that calls a share π̃ of the rows positive does
not depend on the scale. So the same step (same ε_t, same pass) then releases, by the
exponential mechanism, the candidate t whose predicted-positive count A(t) = TP(t) +
FP(t) is closest to the target π̃·n (n the public record count): utility
q(t) = −|A(t) − π̃·n|. A replaced record changes A(t) by at most 1 (its own
contribution goes, the new one's comes), and the target is a released value:
Δq = 1. The released prior odds' cut stays the first choice (for a calibrated model
it maximises balanced accuracy, and it beats the quantile on a rare class), but it
is no longer taken blind: half of ε_t releases A(t_prior), the rows above it
(discrete Laplace, Δ = 1), and only when that noisy count is below half the target
or above n minus half of n − target (:func:`prior_cut_holds`: a cut far from the
prior's share, typically one-class) does the other half of ε_t go to the quantile
mechanism. Sequential composition: ε_t/2 + ε_t/2. When the released model itself puts
the prior odds' cut more than PRIOR_FAR = 3 of its sd away from the typical row's
log-odds (:func:`prior_cut_far`: a cut beyond almost every row the model would
generate), the count is not spent and the quantile gets the whole ε_t (a choice from
released values: public; ε_t either way). Its error in rows is
about 2·(ln C + 3)/ε_t with probability 1 − e^−3 — at small n·ε_t comparable to the
minority class itself, so it can still land near "no row": the check below says so.
Which rule runs is a function of released counts and ε: public.

**The check on the training rows** (:func:`release_check`, its own planned step
``threshold_check``). The domain-wide verdict of :mod:`dpcli.algorithms.degenerate`
cannot see where the training rows fall; a cut can leave every row on one side. The
same pass therefore also counts the rows above the released cut, A(t*): a replaced
record changes it by at most 1, so it gets discrete Laplace noise at Δ = 1 with the
check's ε. When its 95 % noise interval reaches "(almost) no row" or "(almost)
every row" (:func:`dpcli.algorithms.degenerate.one_class_on_rows`, shared with
validate's check), the model is reported degenerate on stderr and in the model file.
The count per true class (TP, FP: a private balanced accuracy) was weighed and left
out: the pair has L1 sensitivity 2, and the noise on their sum is 2√2 times that of
the one count, which at the small n where one-class cuts happen would make the check
unable to tell a rare class from none.

**Mechanism.** The exponential mechanism (:func:`dpcli.mechanisms.exponential_mechanism`)
picks t with probability ∝ exp(ε_t·q(t)/(2Δq)): ε_t-DP. Its share of the
command's ε comes from :mod:`dpcli.algorithms.nb_allocation`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpcli.algorithms.degenerate import RowsCheck
from dpcli.data.encode import EncodedBatch
from dpcli.mechanisms import discrete_laplace_mechanism, exponential_mechanism

#: the widest log-odds range the candidates span
MAX_RANGE = 1e4
#: candidates within this many model-implied sd of the typical row's log-odds
WINDOW = 4.0
#: the released prior odds' cut is not tried when it lies more than this many model-implied
#: sd from the typical row's log-odds: the quantile gets the step's whole ε
PRIOR_FAR = 3.0


@dataclass(frozen=True)
class ThresholdCounts:
    """Per candidate: positives above it and negatives at or below it (private)."""

    candidates: np.ndarray
    true_positive: np.ndarray
    true_negative: np.ndarray
    #: negatives above each candidate (predicted positive); None from older callers
    false_positive: np.ndarray | None = None
    #: rows read (n: public under replace-one)
    rows: int = 0

    def predicted_positive(self) -> np.ndarray:
        """A(t) = TP(t) + FP(t): the rows above each candidate (private)."""
        assert self.false_positive is not None
        return self.true_positive + self.false_positive


def candidates(log_odds_range: tuple[float, float], prior_odds: float,
               count: int = 128, center: float | None = None,
               sd: float | None = None) -> np.ndarray:
    """``count`` public candidate thresholds on the positive log-odds, sorted, distinct.

    ``center`` (a released model's log-odds of a typical row: :meth:`NaiveBayesModel.
    typical_log_odds`, for a tokens model the shift that every row shares,
    :meth:`NaiveBayesModel.common_log_odds`): the sinh grid is spread around it instead
    of 0, from ``lo`` to ``hi``, so the fine steps lie where the rows are when that
    shift is far from 0. ``sd`` (the model-implied sd of a row's log-odds around it):
    ``lo`` and ``hi`` are first narrowed to center ± WINDOW·sd (module docstring,
    **Candidates**).
    """
    lo, hi = log_odds_range
    if center is not None and sd is not None and math.isfinite(center) \
            and math.isfinite(sd):
        # the window where a row drawn from the released model lands: no candidate far
        # outside it (each would be a one-class cut on the rows, and many of them drown the
        # few inside in the exponential mechanism)
        width = WINDOW * max(sd, 1.0)
        lo, hi = max(lo, center - width), min(hi, center + width)
        if not lo < hi:
            lo, hi = log_odds_range
    reach = min(max(abs(lo), abs(hi), 1.0), MAX_RANGE)
    if center is None or not math.isfinite(center):
        spread = np.sinh(np.linspace(-math.asinh(reach), math.asinh(reach), count - 2))
    else:
        # every point inside the model's range [lo, hi] (a cut outside it is one-class on
        # every possible row), fine steps at the centre, coarser towards either end
        c = min(max(center, lo), hi)
        below = min(max(c - lo, 1.0), MAX_RANGE)
        above = min(max(hi - c, 1.0), MAX_RANGE)
        spread = c + np.sinh(np.linspace(-math.asinh(below), math.asinh(above), count - 2))
    extra = [0.0, prior_odds if math.isfinite(prior_odds) else 0.0]
    out = np.unique(np.concatenate([spread, extra]))
    while len(out) < count:   # ties (0 or the prior on a grid point): pad far out
        out = np.unique(np.append(out, out[-1] + 1.0))
    return out


def positive_log_odds(model: object, batch: EncodedBatch) -> np.ndarray:
    """s(x) = log P(pos | x) − log P(neg | x) under the released model."""
    jll = model.joint_log_likelihood(batch)  # type: ignore[attr-defined]
    pos = positive_code(model)
    return jll[:, pos] - jll[:, 1 - pos]


class Scorer:
    """:func:`positive_log_odds` of a released naive Bayes model, bit for bit, faster.

    Why: the threshold pass scores every training row, and ``joint_log_likelihood``
    rebuilds each column's log-probability table per batch and adds (rows × classes)
    blocks through a transposed view. Here the tables are built once (from released
    values only: post-processing), and each class's sum is a contiguous vector: per
    column one lookup per row and class (a histogram column's bin is found once, not
    per class). Every row's two sums are the same float additions, in the same order, as
    ``joint_log_likelihood``'s, so the log-odds and hence the counts are identical.
    Gaussian and tokens columns use the model's own per-column terms.
    """

    def __init__(self, model: object) -> None:
        from dpcli.data.schema import NumericColumn, TokensColumn
        from dpcli.stats.accumulators import bin_index

        self._bin_index = bin_index
        m: Any = model
        self.model = m
        self.pos = positive_code(m)
        self.classes = (self.pos, 1 - self.pos)
        self.prior = m.log_prior()
        alpha = m.config.smoothing
        #: per column: ("codes", logp) | ("bins", logp, lower, upper, edges) | ("model", None)
        self.terms: list[tuple[str, tuple[Any, ...]]] = []
        for name in m.columns:
            col = m.schema.column(name)
            if isinstance(col, NumericColumn):
                p = m.numeric[name]
                if p.bins is None:
                    self.terms.append((name, ("model",)))
                    continue
                logp, edges = p.log_table(alpha + m.pseudo.get(name, 0.0))  # as log_density
                self.terms.append((name, ("bins", self._rows(logp), p.lower, p.upper,
                                          edges)))
            elif isinstance(col, TokensColumn):
                self.terms.append((name, ("model",)))
            else:  # the table joint_log_likelihood reads
                self.terms.append((name, ("codes", self._rows(m.code_log_table(name)))))

    def _rows(self, logp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return tuple(np.ascontiguousarray(logp[k]) for k in self.classes)  # type: ignore[return-value]

    def __call__(self, batch: EncodedBatch) -> np.ndarray:
        """s(x) for every row of ``batch`` (equal to :func:`positive_log_odds`)."""
        sums = [np.full(batch.n, self.prior[k]) for k in self.classes]
        for name, term in self.terms:
            values = batch.columns[name]
            kind = term[0]
            if kind == "codes":
                codes = np.asarray(values)
                for total, row in zip(sums, term[1], strict=True):
                    total += row.take(codes)
            elif kind == "bins":
                _, rows, lower, upper, edges = term
                b = self._bin_index(np.clip(np.asarray(values, float), lower, upper), edges)
                for total, row in zip(sums, rows, strict=True):
                    total += row.take(b)
            else:
                part = self._model_term(name, values)
                for total, k in zip(sums, self.classes, strict=True):
                    total += part[:, k]
        return sums[0] - sums[1]

    def _model_term(self, name: str, values: Any) -> np.ndarray:
        m = self.model
        col = m.schema.column(name)
        from dpcli.data.schema import NumericColumn

        if isinstance(col, NumericColumn):
            return m._numeric_loglik(m.numeric[name], np.asarray(values))
        return m.tokens_loglik(name, values)


def positive_code(model: object) -> int:
    pos = model.schema.label.positive_index  # type: ignore[attr-defined]
    return 1 if pos is None else pos


class Ranks:
    """``np.searchsorted(cands, s, side="left")`` (the number of candidates below each score),
    exactly, about twice as fast on a batch.

    Why: a binary search per row over 128 candidates costs about 100 ns per row (a branch
    mispredicted at every level), as much as scoring the row. The candidates are nearly
    evenly spaced in asinh (:func:`candidates`), so a table over 4,096 equal cells of
    asinh(s) gives each row a starting index, which is then corrected against the
    candidates themselves until ``cands[i-1] < s <= cands[i]``: the binary search's
    answer, whatever the spacing. A batch with a non-finite score uses the search.
    """

    CELLS = 4096

    def __init__(self, cands: np.ndarray) -> None:
        self.cands = np.asarray(cands, dtype=np.float64)
        c = self.cands
        self.low = float(np.arcsinh(c[0])) if len(c) else 0.0
        high = float(np.arcsinh(c[-1])) if len(c) else 0.0
        self.scale = self.CELLS / (high - self.low) if high > self.low else 0.0
        grid = np.sinh(self.low + np.arange(self.CELLS) / self.scale) if self.scale else c[:0]
        self.start = np.searchsorted(c, grid, side="left").astype(np.int64)
        self.above = np.append(c, np.inf)        # cands[i], +inf past the last
        self.below = np.concatenate([[-np.inf], c])  # cands[i-1], -inf before the first

    def __call__(self, s: np.ndarray) -> np.ndarray:
        if not self.scale or not np.isfinite(s).all():
            return np.searchsorted(self.cands, s, side="left")
        cell = np.arcsinh(s)
        cell -= self.low
        cell *= self.scale
        i = cell.astype(np.int64)
        np.clip(i, 0, self.CELLS - 1, out=i)
        i = self.start.take(i)
        while True:
            up = self.above.take(i) < s
            down = self.below.take(i) >= s
            if not (up.any() or down.any()):
                return i
            i += up
            i -= down


# ------------------------------------------------------------------ one pass, not two

#: the most distinct (row, class) keys the statistics pass keeps for the threshold's
#: counts (16 bytes each, a few times over while merging: tens of MB at most)
TUPLE_LIMIT = 1 << 18


@dataclass(frozen=True)
class CodeLeaves:
    """A categorical or binary column's codes as leaves of the joint table."""

    column: str
    n_leaves: int

    def leaves(self, values: np.ndarray) -> np.ndarray:
        return np.asarray(values, dtype=np.int64)


@dataclass(frozen=True)
class BinLeaves:
    """A histogram column's bins (as the model's ``log_density`` finds them) as leaves."""

    column: str
    lower: float
    upper: float
    bins: int

    @property
    def n_leaves(self) -> int:
        return self.bins

    def edges(self) -> np.ndarray:
        from dpcli.stats.accumulators import histogram_edges

        return histogram_edges(self, self.bins)

    def leaves(self, values: np.ndarray) -> np.ndarray:
        from dpcli.stats.accumulators import bin_index

        return bin_index(np.clip(np.asarray(values, float), self.lower, self.upper),
                         self.edges())


def score_leaves(schema: Any, columns: Sequence[str],
                 bins: dict[str, int]) -> tuple[CodeLeaves | BinLeaves, ...] | None:
    """Leaf maps under which a released model's score is a function of each row's leaves,
    or None when a column's score reads more than them (a tokens column, a Gaussian or
    smooth numeric column: ``bins`` names the histogram columns and their bin counts).

    Why: the threshold needs every training row's score under the model released after
    the statistics pass. When the score depends only on the rows' codes and bins (public
    functions of the declared domains and the plan), the statistics pass can count the
    distinct (codes, bins, class) tuples too (:class:`~dpcli.stats.engine.StatsRequest`'s
    ``joint``, bounded by :data:`TUPLE_LIMIT`), and scoring the tuples gives the same
    counts as scoring the rows again: no second read of the file.
    """
    from dpcli.data.schema import BinaryColumn, CategoricalColumn, NumericColumn
    from dpcli.stats.accumulators import n_levels

    maps: list[CodeLeaves | BinLeaves] = []
    for name in columns:
        col = schema.column(name)
        if isinstance(col, CategoricalColumn | BinaryColumn):
            maps.append(CodeLeaves(name, n_levels(col)))
        elif isinstance(col, NumericColumn) and name in bins:
            maps.append(BinLeaves(name, float(col.lower), float(col.upper), int(bins[name])))
        else:
            return None
    return tuple(maps)


class TupleRows:
    """The training rows as their distinct leaf tuples with counts per class (from the
    statistics pass's joint table): :func:`count` scores each tuple once and weighs it.

    A tuple's stand-in row holds a categorical column's code and a histogram column's
    bin's lower edge, which bins to that bin again: the model scores it exactly as it
    scores every row of the tuple (the same table entries, added in the same order).
    """

    def __init__(self, table: Any, maps: Sequence[CodeLeaves | BinLeaves],
                 chunk: int = 65_536) -> None:
        if tuple(table.columns) != tuple(m.column for m in maps):
            raise ValueError("the joint table's columns are not the leaf maps'")
        self.leaves = np.asarray(table.leaves)
        self.counts = np.asarray(table.counts, dtype=np.int64)
        self.maps = tuple(maps)
        self.chunk = chunk

    def fits(self, model: Any) -> bool:
        """Whether ``model``'s histogram columns bin as the maps did (else read again)."""
        for m in self.maps:
            if isinstance(m, BinLeaves):
                p = model.numeric.get(m.column)
                if (p is None or p.bins is None or p.bins.shape[1] != m.bins
                        or (float(p.lower), float(p.upper)) != (m.lower, m.upper)):
                    return False
        return True

    def batches(self) -> Iterator[tuple[EncodedBatch, np.ndarray]]:
        """Stand-in rows, ``chunk`` tuples at a time, with their counts per class."""
        stand_in: list[Any] = []
        for m in self.maps:
            if isinstance(m, BinLeaves):
                low = m.edges()[:-1]
                stand_in.append(lambda leaf, low=low: low[leaf])
            else:
                stand_in.append(lambda leaf: leaf.astype(np.int32))
        for start in range(0, len(self.counts), self.chunk):
            part = self.leaves[start:start + self.chunk]
            n = len(part)
            columns = {m.column: fn(part[:, j]) for j, (m, fn) in
                       enumerate(zip(self.maps, stand_in, strict=True))}
            yield (EncodedBatch(n, np.zeros(n, dtype=np.int32), columns),
                   self.counts[start:start + self.chunk])


def _tuple_counts(model: object, rows: TupleRows, cands: np.ndarray, pos: int,
                  scorer: Scorer | None,
                  ranks: Ranks) -> tuple[int, np.ndarray, np.ndarray, int]:
    """:func:`batch_counts` over every row the tuples stand for (weighted by their counts)."""
    width = len(cands) + 1
    table = np.zeros((2, width), dtype=np.int64)
    for batch, counts in rows.batches():
        s = scorer(batch) if scorer is not None else positive_log_odds(model, batch)
        idx = ranks(s)
        for row, k in ((0, 1 - pos), (1, pos)):
            table[row] += np.bincount(idx, weights=counts[:, k],
                                      minlength=width).round().astype(np.int64)
    above = table[1][::-1].cumsum()[::-1][1:]
    at_or_below = table[0].cumsum()[:-1]
    return int(rows.counts.sum()), above, at_or_below, int(table[0].sum())


def count(model: object, batches: Iterable[EncodedBatch], cands: np.ndarray) -> ThresholdCounts:
    """TP(t) and TN(t) for every candidate t, in one pass (private: feed to :func:`select`).

    Each batch is scored and counted by :func:`batch_counts`; when ``batches`` can map
    a function over its batches on every core (``batches.map``: the spend door's
    :class:`~dpcli.api.spend.Pass`), that is where it runs, and the consumer only adds
    the integer counts, in file order: the same counts as one thread, exactly.
    """
    pos = positive_code(model)
    above_pos = np.zeros(len(cands), dtype=np.int64)
    at_or_below_neg = np.zeros(len(cands), dtype=np.int64)
    negatives = rows = 0
    from dpcli.algorithms.naive_bayes import NaiveBayesModel

    # the model's tables once, not once per batch (another model scores itself)
    scorer = Scorer(model) if isinstance(model, NaiveBayesModel) else None
    ranks = Ranks(cands)

    def score(batch: EncodedBatch) -> tuple[int, np.ndarray, np.ndarray, int]:
        return batch_counts(model, batch, cands, pos, scorer=scorer, ranks=ranks)

    parts: Iterable[tuple[int, np.ndarray, np.ndarray, int]]
    if isinstance(batches, TupleRows):   # the statistics pass's distinct rows, weighed
        parts = [_tuple_counts(model, batches, cands, pos, scorer, ranks)]
    else:
        mapper = getattr(batches, "map", None)
        parts = mapper(score) if callable(mapper) else map(score, batches)
    for n, above, at_or_below, negs in parts:
        rows += n
        above_pos += above
        at_or_below_neg += at_or_below
        negatives += negs
    return ThresholdCounts(cands, above_pos, at_or_below_neg, negatives - at_or_below_neg, rows)


def batch_counts(model: object, batch: EncodedBatch, cands: np.ndarray, pos: int, *,
                 scorer: Scorer | None = None,
                 ranks: Ranks | None = None) -> tuple[int, np.ndarray, np.ndarray, int]:
    """One batch's share of :func:`count`: (rows, positives above each candidate,
    negatives at or below each candidate, negatives)."""
    s = scorer(batch) if scorer is not None else positive_log_odds(model, batch)
    is_pos = np.asarray(batch.label) == pos
    # index i: number of candidates strictly below s, so s > t_j for j < i; one search and
    # one count for both classes (row 0 of the table: negatives, row 1: positives)
    width = len(cands) + 1
    key = ranks(s) if ranks is not None else np.searchsorted(cands, s, side="left")
    key[is_pos] += width
    table = np.bincount(key, minlength=2 * width).reshape(2, width)
    # a positive with idx i is above candidates 0..i-1
    above = table[1][::-1].cumsum()[::-1][1:]
    # a negative with idx i is at or below candidates i..C-1
    at_or_below = table[0].cumsum()[:-1]
    return batch.n, above, at_or_below, int(table[0].sum())


def _utility(counts: ThresholdCounts, released: tuple[float, float],
            kind: str = "balanced") -> tuple[np.ndarray, float]:
    """q(t) and Δq (module docstring); ``released`` = (ñ_pos, ñ_neg).

    "balanced": q = TP/a + TN/b, Δq = 1/min(a, b); "accuracy": q = TP + TN, Δq = 1.
    """
    if kind == "accuracy":
        return (counts.true_positive + counts.true_negative).astype(float), 1.0
    if kind != "balanced":
        raise ValueError(f"unknown threshold utility {kind!r}")
    a, b = (max(float(c), 1.0) for c in released)
    return counts.true_positive / a + counts.true_negative / b, 1.0 / min(a, b)


#: the utility gap the mechanism must resolve (module docstring), and its confidence
GAP_BALANCED = 0.5
GAP_ACCURACY_SHARE = 0.05
RESOLVE_MARGIN = 3.0


def resolvable(released: tuple[float, float], epsilon: float, candidates: int,
               kind: str = "balanced") -> bool:
    """Whether the exponential mechanism at ``epsilon`` tells a cut ``GAP`` worse than the
    best apart (probability ≥ 1 − e^−3 over ``candidates``); public: released counts and ε."""
    a, b = (max(float(c), 1.0) for c in released)
    if kind == "accuracy":
        gap, sensitivity = GAP_ACCURACY_SHARE * (a + b), 1.0
    else:
        gap, sensitivity = GAP_BALANCED, 1.0 / min(a, b)
    return epsilon * gap / (2 * sensitivity) >= math.log(candidates) + RESOLVE_MARGIN


def select(counts: ThresholdCounts, released: tuple[float, float], *, epsilon: float,
           rng: np.random.Generator, utility: str = "balanced") -> float:
    """Release one candidate threshold by the exponential mechanism: ε-DP (module docstring)."""
    q, sensitivity = _utility(counts, released, utility)
    return float(counts.candidates[exponential_mechanism(q, sensitivity=sensitivity,
                                                         epsilon=epsilon, rng=rng)])


utility = _utility


# ------------------------------------------------------------------ the prior quantile

def quantile_target(released: tuple[float, float], rows: int) -> float:
    """π̃·n: the released prior's share of positives times the public record count."""
    a, b = (max(float(c), 0.0) for c in released)
    return rows * a / (a + b) if a + b > 0 else rows / 2


def quantile_utility(counts: ThresholdCounts, target: float) -> tuple[np.ndarray, float]:
    """q(t) = −|A(t) − target| and Δq = 1 (module docstring)."""
    return -np.abs(counts.predicted_positive() - target).astype(float), 1.0


def prior_cut_holds(noisy_above: float, target: float, rows: int) -> bool:
    """Keep the prior odds' cut unless its released count of rows above it is below
    target/2 or above rows − (rows − target)/2 (post-processing of released values)."""
    return target / 2 <= noisy_above <= rows - (rows - target) / 2


def prior_cut_far(prior_cut: float, center: float | None, spread: float | None) -> bool:
    """True when the released prior odds' cut lies more than PRIOR_FAR model-implied sd
    from the typical row's log-odds (:meth:`NaiveBayesModel.typical_log_odds`): a cut that
    the released model itself says leaves almost every row on one side. Public: released
    values only."""
    if center is None or spread is None or not (math.isfinite(center)
                                                and math.isfinite(spread)):
        return False
    return abs(prior_cut - center) > PRIOR_FAR * max(spread, 1.0)


def select_quantile(counts: ThresholdCounts, target: float, *, epsilon: float,
                    rng: np.random.Generator) -> float:
    """Release the candidate whose predicted-positive count is nearest ``target``: ε-DP."""
    q, sensitivity = quantile_utility(counts, target)
    return float(counts.candidates[exponential_mechanism(q, sensitivity=sensitivity,
                                                         epsilon=epsilon, rng=rng)])


# ------------------------------------------------------------------ the check on the rows

#: sensitivity of A(t*), the rows above a fixed cut, under replace-one (module docstring)
CHECK_SENSITIVITY = 1
#: the noise interval's coverage
CHECK_LEVEL = 0.95


def check_count(counts: ThresholdCounts, cut: float) -> int:
    """A(cut): rows above ``cut``, one of the candidates (private: to :func:`release_check`)."""
    j = int(np.flatnonzero(counts.candidates == cut)[0])
    return int(counts.predicted_positive()[j])


def release_check(counts: ThresholdCounts, cut: float, *, epsilon: float,
                  rng: np.random.Generator) -> RowsCheck:
    """Release A(cut) with discrete Laplace, Δ = 1: ε-DP.

    The returned :class:`RowsCheck` holds the noisy count, the public n and the
    95 % half-width of the noise; the one-class verdict it derives is post-processing.
    """
    noisy = discrete_laplace_mechanism(check_count(counts, cut), sensitivity=CHECK_SENSITIVITY,
                                       epsilon=epsilon, rng=rng)
    return RowsCheck(predicted_positive=int(noisy), rows=counts.rows,
                     halfwidth=halfwidth(epsilon / CHECK_SENSITIVITY), epsilon=epsilon)


def halfwidth(epsilon: float, level: float = CHECK_LEVEL) -> int:
    """The smallest integer w with P(|X| ≥ w) ≤ 1 − level, X discrete Laplace at scale 1/ε.

    P(X = k) = (1−q)/(1+q)·q^|k|, q = e^−ε, so P(|X| ≥ w) = 2q^w/(1+q) for w ≥ 1.
    """
    q = math.exp(-epsilon)
    return max(1, math.ceil(math.log((1 - level) * (1 + q) / 2) / math.log(q)))
