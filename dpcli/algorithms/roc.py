"""Private ROC curves: PriROC (Stoddard, Chen & Machanavajjhala 2014, §4, Algorithm 3).

Input: one score per test record (a model's positive-class probability or a
column with a declared range [lower, upper]) and the record's binary label.
A record is predicted positive at threshold θ when its score is > θ.

1. Thresholds, with ε1 = ``threshold_share``·ε:
   - ``fixed-space`` (α-FixedSpace; dpcli's default): M equal bins over
     [lower, upper], M = floor(α·n) when α is given, else 2^k with k from
     :meth:`ROCConfig.levels`; data-independent, so ε1 = 0 and all of ε
     goes to step 2. n is public under replace-one neighbours. Why the
     default: on a validation split of Adult's training data, 2^k equal
     bins with all of ε on the counts did as well as or better than 2^k
     recursive-median bins with 20% of ε spent on medians (at a few
     thousand records per part the noisy medians mostly fall back to
     midpoints, i.e. to these very bins).
   - ``recursive-medians`` (k-RecursiveMedians, Algorithm 4): the noisy
     median of the scores, then recursively of each side, k levels deep,
     2^k - 1 thresholds. Each level spends ε1/k; the medians within a level
     are of disjoint parts, but a replaced record can leave one part and
     join another, so each part's median gets ε1/(2k) and is private under
     insertion/deletion (:mod:`dpcli.mechanisms.median`). A noisy median
     outside its part's open interval is replaced by the interval's
     midpoint (post-processing).
2. Counts, with ε2 = ε - ε1: the per-bin counts of positives (TP) and of
   negatives (FP), as two histograms over the same bins ordered by
   decreasing score, so that TP(θ) and FP(θ) are prefix sums (one-sided
   range queries). Replacing one record moves one unit out of one cell of
   the pair and one unit into another: ``changes = 2`` for
   :func:`dpcli.mechanisms.range_queries.noisy_prefix_sums`, which answers
   them by Privelet, a hierarchical tree or plain Laplace. (The paper gives
   each histogram ε2/2 with add/remove sensitivity; calibrating the pair
   jointly for replace-one gives the same noise.)
3. Consistency (post-processing): the noisy class totals are moved to sum
   to the public n and kept within [1, n-1]; each cumulative count sequence
   is made non-decreasing by isotonic regression and clipped to [0, total];
   TPR = TP/n1, FPR = FP/n0; the curve runs from (0, 0) to (1, 1); the AUC is
   the trapezoid rule.

Releases: the thresholds, the curve's points and AUC, and the noisy class
totals n1 and n0 (already released through step 2). Cost: ε.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpcli.budget import Budget
from dpcli.errors import UsageError
from dpcli.mechanisms import Plan
from dpcli.mechanisms.consistency import isotonic_increasing
from dpcli.mechanisms.median import noisy_median
from dpcli.mechanisms.range_queries import STRATEGIES, noisy_prefix_sums, sensitivity

THRESHOLDS = ("recursive-medians", "fixed-space")
COUNTS = STRATEGIES
MAX_LEVELS = 16  # 2^16 bins: a curve of 65,536 points is plenty, and its files stay small
MAX_BINS = 1 << MAX_LEVELS
GRID = 2.0**32  # recursive-median thresholds are rounded to (upper - lower) / GRID
CHANGES = 2  # unit moves between (label, bin) cells per replace-one neighbour


@dataclass(frozen=True)
class ROCConfig:
    """How PriROC chooses thresholds and counts; None means the default for n."""

    thresholds: str = "fixed-space"
    k: int | None = None
    alpha: float | None = None
    counts: str = "hierarchical"
    threshold_share: float = 0.2
    branching: int = 16

    def __post_init__(self) -> None:
        if self.thresholds not in THRESHOLDS:
            raise UsageError(f"thresholds must be one of {', '.join(THRESHOLDS)}, "
                             f"got {self.thresholds!r}")
        if self.counts not in COUNTS:
            raise UsageError(f"counts must be one of {', '.join(COUNTS)}, got {self.counts!r}")
        if self.k is not None and not 1 <= self.k <= MAX_LEVELS:
            raise UsageError(f"k must be in 1..{MAX_LEVELS}, got {self.k}")
        if self.alpha is not None and not 0 < self.alpha <= 1:
            raise UsageError(f"alpha must be in (0, 1], got {self.alpha}")
        if not 0 < self.threshold_share < 1:
            raise UsageError(f"threshold_share must be in (0, 1), got {self.threshold_share}")

    def levels(self, n: int) -> int:
        """k, for 2^k bins: the configured one, else ceil(log2 n) - 3 within 1..10.

        About eight records per bin, up to 1,024 bins: chosen on a validation
        split of Adult's training data (benchmarks/results/roc_error.md).
        """
        if self.k is not None:
            return self.k
        return max(1, min(10, math.ceil(math.log2(max(n, 2))) - 3))

    def bins(self, n: int) -> int:
        """The number of bins (thresholds + 1) for n records."""
        if self.thresholds == "recursive-medians" or self.alpha is None:
            return 2 ** self.levels(n)
        product = self.alpha * n  # a slack of 1e-9 keeps α = 10/n at 10 bins despite rounding
        return max(1, min(MAX_BINS, math.floor(product + 1e-9 * max(1.0, product))))

    def parameters(self, n: int) -> dict[str, Any]:
        out: dict[str, Any] = {"thresholds": self.thresholds, "counts": self.counts,
                               "bins": self.bins(n)}
        if self.thresholds == "recursive-medians" or self.alpha is None:
            out["k"] = self.levels(n)
        if self.thresholds == "recursive-medians":
            out["threshold_share"] = self.threshold_share
        elif self.alpha is not None:
            out["alpha"] = self.alpha
        if self.counts == "hierarchical":
            out["branching"] = self.branching
        return out


def plan(config: ROCConfig, n: int, total: Budget) -> Plan:
    """The run's steps: thresholds (recursive medians only), then the TP/FP counts."""
    bins = config.bins(n)
    delta = sensitivity(config.counts, bins, changes=CHANGES, branching=config.branching)
    if config.thresholds == "fixed-space":
        shares = {"counts": ("discrete_laplace", 1)}
    else:
        share = config.threshold_share
        shares = {"thresholds": ("smooth_cauchy", share), "counts": ("discrete_laplace", 1 - share)}
    p = Plan.split(total, shares)
    counts_eps = float(p.step("counts").budget.epsilon)
    notes = {"counts": f"{config.counts} prefix sums of TP and FP over {bins:,} bins, "
                       f"Δ={delta}, scale {delta / counts_eps:.4g}"}
    if config.thresholds == "recursive-medians":
        k = config.levels(n)
        notes["thresholds"] = (f"{2**k - 1:,} noisy medians, {k} levels of ε1/{k}; each part "
                               f"ε1/{2 * k} (a moved record changes two parts), Cauchy "
                               f"6·S*/ε, β=ε/6")
    return p.with_notes(notes)


def count_noise_scale(config: ROCConfig, n: int, run_plan: Plan) -> float:
    """The discrete Laplace scale Δ/ε2 on each released TP/FP coordinate (public)."""
    delta = sensitivity(config.counts, config.bins(n), changes=CHANGES,
                        branching=config.branching)
    return delta / float(run_plan.step("counts").budget.epsilon)


def fixed_space_thresholds(lower: float, upper: float, bins: int) -> np.ndarray:
    """The interior thresholds lower + j·(upper-lower)/bins, j = 1..bins-1 (data-independent)."""
    return lower + (upper - lower) * np.arange(1, bins) / bins


def recursive_median_thresholds(scores: np.ndarray, *, lower: float, upper: float, levels: int,
                                epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """k-RecursiveMedians: 2^levels - 1 thresholds, ascending; ε-DP under replace-one.

    ``scores`` must be sorted ascending within [lower, upper]. Each of the
    ``levels`` levels spends ε/levels; within a level every part's median is
    released at ε/(2·levels) under insertion/deletion (module docstring).
    """
    x = np.asarray(scores, dtype=np.float64)
    part_epsilon = epsilon / (2 * levels)
    parts = [(lower, upper, 0, x.size)]
    found: list[float] = []
    for _ in range(levels):
        nxt = []
        for lo, hi, a, b in parts:
            m = math.nan
            if lo < hi:  # a part squeezed to a point (public) has no median to look for
                m = noisy_median(x[a:b], lower=lo, upper=hi, epsilon=part_epsilon, rng=rng)
                if lo < m < hi:
                    # released on a public grid: the low-order bits of a float sample can
                    # say more about the value it was added to than the noise allows
                    # (Mironov 2012)
                    m = lower + round((m - lower) / (upper - lower) * GRID) / GRID * (
                        upper - lower)
            if not lo < m < hi:
                m = (lo + hi) / 2.0
            cut = a + int(np.searchsorted(x[a:b], m, side="right"))  # scores <= m go left
            found.append(m)
            nxt += [(lo, m, a, cut), (m, hi, cut, b)]
        parts = nxt
    return np.sort(np.asarray(found))


def bin_counts(scores: np.ndarray, positive: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """(2, bins) counts of positives (row 0) and negatives (row 1), by DEcreasing score.

    Bin i (ascending) holds scores in (t_i, t_(i+1)] with t_0 = -inf and
    t_bins = +inf; the columns are reversed so that the prefix sum up to
    column j counts the records scoring above threshold t_(bins-1-j).
    """
    bins = thresholds.size + 1
    index = np.searchsorted(thresholds, scores, side="left")
    pos = np.bincount(index[positive], minlength=bins)
    neg = np.bincount(index[~positive], minlength=bins)
    return np.stack([pos, neg])[:, ::-1].astype(np.int64)


@dataclass(frozen=True)
class Curve:
    """An ROC curve: points from (0, 0) to (1, 1) by decreasing threshold, and its AUC.

    ``thresholds[i]`` gives (fpr[i], tpr[i]): positive means score > threshold.
    The first point's threshold is the range's upper end (nothing is above
    it); the last point, (1, 1), has threshold -inf (everything is positive).
    """

    thresholds: np.ndarray
    fpr: np.ndarray
    tpr: np.ndarray
    auc: float
    positives: float
    negatives: float

    def to_payload(self) -> dict[str, Any]:
        points = [{"threshold": None if not math.isfinite(t) else float(t),
                   "fpr": float(f), "tpr": float(r)}
                  for t, f, r in zip(self.thresholds, self.fpr, self.tpr, strict=True)]
        return {"auc": self.auc, "positives": self.positives, "negatives": self.negatives,
                "points": points}


def curve_from_prefix(prefix: np.ndarray, thresholds: np.ndarray, *, n: int,
                      upper: float) -> Curve:
    """Post-process noisy prefix sums (2, bins) into a consistent curve (module step 3)."""
    prefix = np.asarray(prefix, dtype=np.float64)
    pos_total, neg_total = prefix[0, -1], prefix[1, -1]
    gap = (n - pos_total - neg_total) / 2.0  # equal variances: share the gap equally
    pos_total = float(np.clip(pos_total + gap, 1.0, max(n - 1.0, 1.0)))
    neg_total = max(n - pos_total, 1.0)
    tp = np.clip(isotonic_increasing(prefix[0, :-1]), 0.0, pos_total) / pos_total
    fp = np.clip(isotonic_increasing(prefix[1, :-1]), 0.0, neg_total) / neg_total
    tpr = np.concatenate(([0.0], tp, [1.0]))
    fpr = np.concatenate(([0.0], fp, [1.0]))
    desc = np.concatenate(([upper], thresholds[::-1], [-np.inf]))
    return Curve(thresholds=desc, fpr=fpr, tpr=tpr, auc=trapezoid_auc(fpr, tpr),
                 positives=pos_total, negatives=neg_total)


def trapezoid_auc(fpr: np.ndarray, tpr: np.ndarray) -> float:
    """Area under the polyline through the points (fpr non-decreasing)."""
    return float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2.0))


def private_roc(scores: np.ndarray, positive: np.ndarray, *, lower: float, upper: float,
                config: ROCConfig, run_plan: Plan, rng: np.random.Generator
                ) -> tuple[Curve, np.ndarray]:
    """PriROC: the released curve and thresholds. Cost: ``run_plan.total`` (module docstring).

    ``scores`` outside [lower, upper] (or NaN) are clamped into it; ``positive``
    is a boolean array of the same length. n = len(scores) is public.
    """
    # a score outside the declared range (or NaN) is clamped, so one record can not fail a run
    s = np.clip(np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=lower), lower, upper)
    pos = np.asarray(positive, dtype=bool)
    n = s.size
    if config.thresholds == "fixed-space":
        thresholds = fixed_space_thresholds(lower, upper, config.bins(n))
    else:
        thresholds = recursive_median_thresholds(
            np.sort(s), lower=lower, upper=upper, levels=config.levels(n),
            epsilon=run_plan.step("thresholds").budget.epsilon, rng=rng)
    counts = bin_counts(s, pos, thresholds)
    prefix = noisy_prefix_sums(counts, strategy=config.counts,
                               epsilon=run_plan.step("counts").budget.epsilon, rng=rng,
                               changes=CHANGES, branching=config.branching)
    return curve_from_prefix(prefix, thresholds, n=n, upper=upper), thresholds


def true_roc(scores: np.ndarray, positive: np.ndarray) -> Curve:
    """The exact (NOT private) ROC curve over every distinct score: for public data only."""
    s = np.asarray(scores, dtype=np.float64)
    pos = np.asarray(positive, dtype=bool)
    order = np.argsort(-s, kind="stable")
    s, pos = s[order], pos[order]
    last = np.flatnonzero(np.diff(s) != 0)  # end of each run of tied scores
    ends = np.concatenate((last, [s.size - 1]))
    tp = np.cumsum(pos)[ends]
    fp = np.cumsum(~pos)[ends]
    n1, n0 = max(int(pos.sum()), 1), max(int((~pos).sum()), 1)
    tpr = np.concatenate(([0.0], tp / n1))
    fpr = np.concatenate(([0.0], fp / n0))
    # after the first i runs of tied scores, "score > the (i+1)-th distinct score" is the rule
    thresholds = np.concatenate((s[ends], [-np.inf]))
    return Curve(thresholds=thresholds, fpr=fpr, tpr=tpr, auc=trapezoid_auc(fpr, tpr),
                 positives=float(pos.sum()), negatives=float((~pos).sum()))


def area_between(a: Curve, b: Curve) -> float:
    """∫₀¹ |TPR_a(f) - TPR_b(f)| df, exactly, each curve read as the polyline through its points.

    A vertical run of points at one FPR is left from its top and reached at
    its foot, as the polyline does, so |AUC_a - AUC_b| <= this area always.
    Between consecutive breakpoints of either curve both are linear: the
    integral of |d| is the trapezoid when d keeps its sign, and
    (d0² + d1²) / (2(|d0| + |d1|)) times the width when it crosses zero.
    """
    x = np.union1d(np.unique(a.fpr), np.unique(b.fpr))
    d0 = _tpr_at(a, x[:-1], "right") - _tpr_at(b, x[:-1], "right")
    d1 = _tpr_at(a, x[1:], "left") - _tpr_at(b, x[1:], "left")
    s = np.abs(d0) + np.abs(d1)
    crossing = np.divide(d0**2 + d1**2, 2.0 * s, out=np.zeros_like(s), where=s > 0)
    return float(np.sum(np.diff(x) * np.where(d0 * d1 >= 0, s / 2.0, crossing)))


def _tpr_at(c: Curve, x: np.ndarray, side: str) -> np.ndarray:
    """The polyline's TPR just left (``side="left"``) or right of each x in [0, 1]."""
    fpr = np.asarray(c.fpr, dtype=np.float64)
    tpr = np.asarray(c.tpr, dtype=np.float64)
    knots, first = np.unique(fpr, return_index=True)
    last = np.append(first[1:], fpr.size) - 1  # points are ordered by FPR, then TPR
    low, high = tpr[first], tpr[last]
    i = np.clip(np.searchsorted(knots, x, side="right") - 1, 0, knots.size - 1)
    j = np.minimum(i + 1, knots.size - 1)
    width = np.where(j > i, knots[j] - knots[i], 1.0)
    inside = high[i] + (low[j] - high[i]) * (x - knots[i]) / width
    return np.where(knots[i] == x, low[i] if side == "left" else high[i], inside)
