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
     midpoint (post-processing). The medians are of the scores at the
     resolution of a fine public grid (below).
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

4. AUC (``auc_share`` of ε, default ½; steps 1-3 share the rest): released
   directly from a noisy signed pair count and a noisy count of positives
   (:mod:`dpcli.algorithms.roc_scale`, which also gives the score scale the
   bins are laid on), not read off the noisy curve, whose trapezoid AUC is
   biased when scores concentrate in a few bins. The pass keeps the
   2^20-cell histogram below for it.

Releases: the thresholds, the curve's points and AUC, and the noisy class
totals n1 and n0 (already released through step 2). Cost: ε.

One pass, bounded memory (:class:`RocPass`)
-------------------------------------------
The scores are streamed in batches and folded into counts; nothing is
kept per record, so memory is O(bins) whatever n is.

- fixed-space: the thresholds are public before the pass (n is known from
  the pre-charge check), so each batch adds its :func:`bin_counts`. Counts
  add, so the release is bit-identical to the in-memory computation for
  the same generator (tested).
- recursive medians need order statistics of the scores, which a bounded
  pass can not keep exactly. Each batch adds, per class, the number of
  scores in each of the FINE_BINS = 2^20 equal cells of the public grid
  G_j = lower + (upper - lower)·j/2^20 (:func:`grid_points`): cell c holds
  (G_c, G_(c+1)], cell 0 also ``lower`` (:func:`fine_cells`); 2 × 8 MiB
  of int64 during the pass, only the occupied cells after it
  (:class:`FineHistogram`). A score s in cell c stands for the cell's
  upper end q(s) = G_(c+1) in the median searches. As s > G_j iff
  q(s) > G_j for every grid point j >= 1, the counts at grid thresholds
  are the exact counts of the true scores, and the one pass serves every
  level's medians and then step 2.

  Output distribution (exactly; :func:`recursive_median_cells`): the
  thresholds are those of the in-memory algorithm above run on the
  quantized scores q(s_1), ..., q(s_n) — the same smooth-sensitivity
  median per part, ε1/(2k) per part, parts visited in the same order —
  with these differences: (i) the median is released as a grid index, the
  median's cell index plus integer noise with P(k) ∝ 1/(1 + |k/t|^γ)
  (float-safe: :func:`dpcli.mechanisms.median.noisy_median_of` on the
  integer grid of cell indices, no rounding inflation as the quantized
  median is on that grid), instead of a Cauchy float rounded to the grid;
  (ii) the fallback is the grid midpoint G_ceil((a+b)/2) of a
  part (G_a, G_b], which is (G_a + G_b)/2 when a + b is even, and it also
  replaces a released index on or beyond its part's ends; (iii) a part of fewer
  than two cells has no interior grid point, so no median (and no noise
  variate) is drawn for it and its threshold is the fallback, which can
  repeat a threshold (an empty bin). Steps 2 and 3 are unchanged, on the
  true scores' counts at these thresholds. What the grid costs is
  resolution: a median is located to within one cell, (upper - lower)/2^20
  (under 10^-6 for probabilities), and scores within one cell are tied —
  so on scores piled up within a few cells (a naive Bayes model's
  probabilities near 0) the deep levels there fall back to repeated grid
  midpoints where the in-memory version still split them.

  Privacy is unchanged: q acts on each record alone, so replace-one
  neighbours stay replace-one neighbours (or become equal), and the
  mechanism applied to the q-values is the one proven in
  :mod:`dpcli.mechanisms.median`; ε1 and ε2 are as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpcli import params  # option tuples and limits: one definition (dpcli.params)
from dpcli.budget import Budget
from dpcli.errors import UsageError
from dpcli.mechanisms import Plan
from dpcli.mechanisms.consistency import isotonic_increasing
from dpcli.mechanisms.median import noisy_median_of, smooth_sensitivity_median_of
from dpcli.mechanisms.range_queries import noisy_prefix_sums, sensitivity
from dpcli.mechanisms.rng import check_positive

THRESHOLDS = params.ROC_THRESHOLDS
COUNTS = params.ROC_COUNTS
MAX_LEVELS = params.ROC_MAX_LEVELS
MAX_BINS = 1 << MAX_LEVELS
FINE_LEVELS = 20  # recursive medians: scores are counted in 2^20 equal cells of the range
FINE_BINS = 1 << FINE_LEVELS  # 2 × 8 MiB of int64 counts, whatever the number of rows
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
    auc_share: float = 0.5  # of ε on the AUC's signed pair count (roc_scale); 0: trapezoid AUC

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
        if not 0 <= self.auc_share < 1:
            raise UsageError(f"auc_share must be in [0, 1), got {self.auc_share}")

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
        out["auc_share"] = self.auc_share
        return out


def plan(config: ROCConfig, n: int, total: Budget) -> Plan:
    """The run's steps: thresholds (recursive medians only), the TP/FP counts, the AUC.

    ``auc_share`` of ε goes to the AUC (:mod:`roc_scale`): ¾ of it to the signed
    pair count, ¼ to its own count of positives; the rest to the curve as before.
    """

    from dpcli.algorithms import roc_scale
    from dpcli.budget import exact

    bins = config.bins(n)
    delta = sensitivity(config.counts, bins, changes=CHANGES, branching=config.branching)
    auc = exact(config.auc_share)
    curve = 1 - auc
    shares: dict[str, tuple[str, Fraction | int]] = {}
    if config.thresholds == "fixed-space":
        shares["counts"] = ("discrete_laplace", curve)
    else:
        share = exact(config.threshold_share)
        shares["thresholds"] = ("smooth_cauchy", curve * share)
        shares["counts"] = ("discrete_laplace", curve * (1 - share))
    if auc > 0:
        shares["auc"] = ("discrete_laplace", auc * roc_scale.PAIRS_SHARE)
        shares["auc_positives"] = ("discrete_laplace", auc * (1 - roc_scale.PAIRS_SHARE))
    p = Plan.split(total, shares)
    counts_eps = float(p.step("counts").budget.epsilon)
    notes = {"counts": f"{config.counts} prefix sums of TP and FP over {bins:,} bins, "
                       f"Δ={delta}, scale {delta / counts_eps:.4g}"}
    if config.thresholds == "recursive-medians":
        k = config.levels(n)
        notes["thresholds"] = (f"{2**k - 1:,} noisy medians, {k} levels of ε1/{k}; each part "
                               f"ε1/{2 * k} (a moved record changes two parts), "
                               f"Cauchy-tailed integer noise on the 2^{FINE_LEVELS} grid's "
                               f"cell index (no rounding inflation), 6·S*/ε cells, β=ε/6")
    if auc > 0:
        auc_eps = float(p.step("auc").budget.epsilon)
        notes["auc"] = (f"signed pair count D over the 2^{FINE_LEVELS}-cell grid, "
                        f"Δ=2(n−1)={roc_scale.pair_sensitivity(n)}, "
                        f"scale {roc_scale.pair_sensitivity(n) / auc_eps:.4g}")
        pos_eps = float(p.step("auc_positives").budget.epsilon)
        notes["auc_positives"] = (f"the number of positives n1 for the AUC's n1·n0, Δ=1, "
                                  f"scale {1 / pos_eps:.4g}")
    # each step's sensitivity, computed once here (the mechanisms recompute the same from
    # the same public facts: strategy, bins, n); the medians' is the public bound of the
    # cell index their smooth sensitivity S* is capped by
    sens = {"counts": float(delta)}
    if config.thresholds == "recursive-medians":
        sens["thresholds"] = float(2 ** FINE_LEVELS)
    if auc > 0:
        sens["auc"] = float(roc_scale.pair_sensitivity(n))
        sens["auc_positives"] = 1.0
    return p.with_notes(notes).with_sensitivities(sens)


#: the curve is "mostly noise" when its counts' noise scale exceeds this share of the
#: smaller class (the run's warning from released sizes; the forecast's from public ones)
CURVE_NOISE_SHARE = 0.05


def count_noise_scale(config: ROCConfig, n: int, run_plan: Plan) -> float:
    """The discrete Laplace scale Δ/ε2 on each released TP/FP coordinate (public)."""
    delta = sensitivity(config.counts, config.bins(n), changes=CHANGES,
                        branching=config.branching)
    return delta / float(run_plan.step("counts").budget.epsilon)


def fixed_space_thresholds(lower: float, upper: float, bins: int) -> np.ndarray:
    """The interior thresholds lower + j·(upper-lower)/bins, j = 1..bins-1 (data-independent)."""
    return lower + (upper - lower) * np.arange(1, bins) / bins


def grid_points(j: np.ndarray, *, lower: float, upper: float, cells: int = FINE_BINS
                ) -> np.ndarray:
    """The fine grid's points G_j = lower + (upper-lower)·j/cells, G_0 = lower, G_cells = upper.

    Public. Non-decreasing in j (each float operation rounds monotonically),
    which is all :func:`fine_cells` relies on.
    """
    j = np.asarray(j, dtype=np.int64)
    g = lower + (upper - lower) * j.astype(np.float64) / cells
    return np.where(j <= 0, lower, np.where(j >= cells, upper, g))


def fine_cells(scores: np.ndarray, *, lower: float, upper: float, cells: int = FINE_BINS
               ) -> np.ndarray:
    """Each score's cell c = #{j in 1..cells-1: G_j < score}: cell c holds (G_c, G_(c+1)].

    So score > G_j iff c >= j, for every grid point j: counts of cells add
    up to the exact counts of the scores above any grid threshold. Scores
    must lie in [lower, upper]. A binary search over j on the points of
    :func:`grid_points`, started from the arithmetic guess ± 2 where that
    bracket is checked to hold the answer (else from the whole range); the
    grid is never materialised, so memory is O(len(scores)).
    """
    s = np.asarray(scores, dtype=np.float64)
    top = cells - 1

    def below(j: np.ndarray, values: np.ndarray) -> np.ndarray:  # G_j < value
        return grid_points(j, lower=lower, upper=upper, cells=cells) < values

    guess = np.clip(np.floor((s - lower) / (upper - lower) * cells), 0, top).astype(np.int64)
    lo, hi = np.maximum(guess - 2, 0), np.minimum(guess + 2, top)
    # the answer is in [lo, hi] when G_lo < s (or lo = 0) and G_(hi+1) >= s (or hi = top)
    held = ((lo == 0) | below(lo, s)) & ((hi == top) | ~below(hi + 1, s))
    lo, hi = np.where(held, lo, 0), np.where(held, hi, top)
    open_ = np.flatnonzero(lo < hi)
    while open_.size:
        mid = (lo[open_] + hi[open_] + 1) // 2
        up = below(mid, s[open_])
        lo[open_] = np.where(up, mid, lo[open_])
        hi[open_] = np.where(up, hi[open_], mid - 1)
        open_ = open_[lo[open_] < hi[open_]]
    return lo


class FineHistogram:
    """Counts of positive and negative scores per cell of the fine grid (private).

    Only the occupied cells are stored (``occupied``, ascending, with
    ``counts[0]`` positives and ``counts[1]`` negatives), so the size is at
    most min(n, cells) whichever way it was built. A score in cell c stands
    for the cell's upper end G_(c+1) in the median searches.
    """

    def __init__(self, occupied: np.ndarray, counts: np.ndarray, *, lower: float, upper: float,
                 cells: int = FINE_BINS) -> None:
        self.occupied = np.asarray(occupied, dtype=np.int64)
        self.counts = np.asarray(counts, dtype=np.int64).reshape(2, self.occupied.size)
        self.lower, self.upper, self.cells = float(lower), float(upper), int(cells)
        # pooled cumulative counts: prefix[i] = scores in the first i occupied cells
        self.prefix = np.concatenate(([0], np.cumsum(self.counts.sum(axis=0))))

    @classmethod
    def of_scores(cls, scores: np.ndarray, positive: np.ndarray, *, lower: float, upper: float,
                  cells: int = FINE_BINS) -> FineHistogram:
        """From in-memory scores within [lower, upper] and their boolean labels."""
        c = fine_cells(scores, lower=lower, upper=upper, cells=cells)
        pos = np.asarray(positive, dtype=bool)
        occupied, inverse = np.unique(c, return_inverse=True)
        counts = np.stack([np.bincount(inverse[pos], minlength=occupied.size),
                           np.bincount(inverse[~pos], minlength=occupied.size)])
        return cls(occupied, counts, lower=lower, upper=upper, cells=cells)

    @classmethod
    def of_dense(cls, dense: np.ndarray, *, lower: float, upper: float) -> FineHistogram:
        """From (2, cells) counts of positives and negatives per cell."""
        occupied = np.flatnonzero(dense.sum(axis=0))
        return cls(occupied, dense[:, occupied], lower=lower, upper=upper, cells=dense.shape[1])

    def points(self, j: np.ndarray) -> np.ndarray:
        """The grid points G_j (public)."""
        return grid_points(j, lower=self.lower, upper=self.upper, cells=self.cells)

    def part(self, a: int, b: int) -> tuple[int, int, float, float]:
        """(prefix offset, count, G_a, G_b) of the part made of cells a..b-1 (count private)."""
        first, last = np.searchsorted(self.occupied, [a, b], side="left")
        base = int(self.prefix[first])
        lo, hi = (float(v) for v in self.points(np.array([a, b])))
        return base, int(self.prefix[last]) - base, lo, hi

    def order_stats(self, a: int, b: int, j: np.ndarray) -> np.ndarray:
        """x_(j) (1-based) of the part's quantized scores; G_a for j <= 0, G_b for j > count.

        The first pooled cumulative count reaching offset + j closes the
        cell holding x_(j): O(log cells) per j, whatever the number of rows.
        """
        base, n, lo, hi = self.part(a, b)
        j = np.asarray(j, dtype=np.int64)
        if n == 0:
            return np.where(j <= 0, lo, hi)
        at = np.searchsorted(self.prefix, base + np.clip(j, 1, n), side="left") - 1
        inside = self.points(self.occupied[at] + 1)
        return np.where(j <= 0, lo, np.where(j >= n + 1, hi, inside))

    def median(self, a: int, b: int) -> float:
        """The part's lower median x_(floor((n+1)/2)), G_a when it is empty (private)."""
        _, n, _, _ = self.part(a, b)
        return float(self.order_stats(a, b, np.array([(n + 1) // 2]))[0])

    def cell_order_stats(self, a: int, b: int, j: np.ndarray) -> np.ndarray:
        """:meth:`order_stats` as cell indices: c + 1 for a score in cell c, a and b outside.

        G_j is affine in j, so these are the quantized scores on the public
        integer grid of cell indices (as floats, for the median mechanism).
        """
        base, n, _, _ = self.part(a, b)
        j = np.asarray(j, dtype=np.int64)
        if n == 0:
            return np.where(j <= 0, a, b).astype(np.float64)
        at = np.searchsorted(self.prefix, base + np.clip(j, 1, n), side="left") - 1
        inside = self.occupied[at] + 1
        return np.where(j <= 0, a, np.where(j >= n + 1, b, inside)).astype(np.float64)

    def median_cell(self, a: int, b: int) -> int:
        """The part's lower median as a grid index (:meth:`median` is G of it; private)."""
        _, n, _, _ = self.part(a, b)
        return int(self.cell_order_stats(a, b, np.array([(n + 1) // 2]))[0])

    def smooth_sensitivity(self, a: int, b: int, *, beta: float) -> float:
        """S = max_k e^(-βk)·W_k of :mod:`dpcli.mechanisms.median` for the part, in cells (private).

        W_k = x_(c_k+k+1) - x_(c_k-1), c_k = floor((n-k+1)/2), bounds the
        median's local sensitivity within k insertions or deletions; S is a
        β-smooth upper bound on it (the derivation is that module's). Here the
        x are cell indices (:meth:`cell_order_stats`), so S is in cells.
        """
        _, n, _, _ = self.part(a, b)
        return smooth_sensitivity_median_of(lambda j: self.cell_order_stats(a, b, j), n,
                                            global_bound=b - a, beta=beta)

    def noisy_median(self, a: int, b: int, *, epsilon: float | Fraction,
                     rng: np.random.Generator,
                     gamma: float = 2.0) -> int:
        """The part's noisy median as a grid index: ε-DP under one insertion or deletion.

        ``mechanisms.median.noisy_median_of`` on the quantized scores as cell
        indices (:meth:`cell_order_stats`, on the integer grid: no rounding
        inflation), with L = a and U = b. Releases one integer (float-safe:
        integer noise on an integer); sensitivity: the β-smooth bound S in
        cells (:meth:`smooth_sensitivity`), β = ε/(2(γ+1)); noise K with
        P(K = k) ∝ 1/(1 + |k/t|^γ), t = 2(γ+1)·S/ε cells (γ = 2: 6·S/ε).
        Order statistics come from the pooled cumulative counts, never from
        rows. Cost: ε under one insertion or deletion in the part.
        """
        epsilon = check_positive("epsilon", epsilon)
        _, n, _, _ = self.part(a, b)
        return int(noisy_median_of(lambda j: self.cell_order_stats(a, b, j), n,
                                   global_bound=b - a, epsilon=epsilon, rng=rng, grid=1.0,
                                   gamma=gamma, on_grid=True))

    def bin_counts(self, cuts: np.ndarray) -> np.ndarray:
        """(2, bins) counts by DEcreasing score at the thresholds G[cuts], as :func:`bin_counts`.

        ``cuts`` are ascending grid indices; bin i (ascending) holds cells
        cuts[i-1]..cuts[i]-1, i.e. the scores in (G_cuts[i-1], G_cuts[i]]:
        exactly :func:`bin_counts` of the scores themselves (:func:`fine_cells`).
        """
        cumulative = np.concatenate((np.zeros((2, 1), np.int64),
                                     np.cumsum(self.counts, axis=1)), axis=1)
        edges = np.searchsorted(self.occupied, np.asarray(cuts, dtype=np.int64), side="left")
        edges = np.concatenate(([0], edges, [self.occupied.size]))
        return np.diff(cumulative[:, edges], axis=1)[:, ::-1].astype(np.int64)


def recursive_median_cells(histogram: FineHistogram, *, levels: int,
                           epsilon: float | Fraction,
                           rng: np.random.Generator) -> np.ndarray:
    """k-RecursiveMedians on a fine histogram: 2^levels - 1 grid indices, ascending; ε-DP.

    A part is a run of cells a..b-1, i.e. the scores in (G_a, G_b]; the root
    is every cell. Level by level, parts left to right (the draw order of
    the in-memory algorithm), a part of at least two cells releases
    :meth:`FineHistogram.noisy_median` at ε/(2·levels) (a replaced record
    leaves one part and joins another; module docstring), a grid index j,
    kept if a < j < b. Otherwise (no interior grid point, or a release on or
    beyond the part's ends) the threshold is the grid
    midpoint ceil((a + b)/2): post-processing of public values. Cells below
    the threshold go left, the rest right. Cost: ε under replace-one.
    """
    h = histogram
    part_epsilon = epsilon / (2 * levels)
    parts = [(0, h.cells)]
    found: list[int] = []
    for _ in range(levels):
        nxt = []
        for a, b in parts:
            j = (a + b + 1) // 2  # never 0: "score > G_j iff cell >= j" needs j >= 1
            lo, hi = h.points(np.array([a, b]))
            if b - a >= 2 and lo < hi:  # public: a part without interior points
                # released as a grid index: integer noise on the median's cell index, so no
                # float carries low-order bits of the median (Mironov 2012)
                r = h.noisy_median(a, b, epsilon=part_epsilon, rng=rng)
                if a < r < b:
                    j = r
            found.append(j)
            nxt += [(a, j), (j, b)]
        parts = nxt
    return np.sort(np.asarray(found, dtype=np.int64))


def recursive_median_thresholds(scores: np.ndarray, *, lower: float, upper: float, levels: int,
                                epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """The 2^levels - 1 thresholds :class:`RocPass` releases, ascending, for in-memory scores.

    ``scores`` within [lower, upper], in any order. ε-DP under replace-one.
    """
    s = np.asarray(scores, dtype=np.float64)
    h = FineHistogram.of_scores(s, np.zeros(s.size, dtype=bool), lower=lower, upper=upper)
    return h.points(recursive_median_cells(h, levels=levels, epsilon=epsilon, rng=rng))


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
    curve_auc: float | None = None   # the trapezoid AUC when ``auc`` was released directly
    auc_release: Any = None          # roc_scale.AucRelease, when released directly

    @property
    def auc_error(self) -> float | None:
        """The expected |AUC error| from the noise on D (public), when released directly."""
        return None if self.auc_release is None else self.auc_release.expected_error

    def to_payload(self) -> dict[str, Any]:
        points = [{"threshold": None if not math.isfinite(t) else float(t),
                   "fpr": float(f), "tpr": float(r)}
                  for t, f, r in zip(self.thresholds, self.fpr, self.tpr, strict=True)]
        out: dict[str, Any] = {"auc": self.auc}
        if self.auc_release is not None:
            out.update(auc_error=self.auc_error, curve_auc=self.curve_auc,
                       auc_release=self.auc_release.to_json())
        return {**out, "positives": self.positives, "negatives": self.negatives,
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


class RocPass:
    """The statistics of one streaming pass over (score, label) batches; memory O(bins).

    ``n`` is the public record count (known before the pass), which fixes
    the fixed-space bins before any value is read. Per batch, :meth:`add`
    clamps the scores into [lower, upper] (NaN to ``lower``) and adds
    - fixed-space: the (2, bins) :func:`bin_counts` at the public thresholds;
    - recursive medians: the (2, FINE_BINS) counts of positives and
      negatives in each cell of the fine grid (:func:`fine_cells`), from
      which the noisy medians and then the bin counts follow (module
      docstring).
    Counts add over batches, so the released statistics are those of the
    whole file however it is split. Everything held is private until
    :meth:`release`.
    """

    def __init__(self, config: ROCConfig, *, n: int, lower: float, upper: float) -> None:
        if not lower < upper:
            raise ValueError(f"the score range needs lower < upper, got [{lower}, {upper}]")
        self.config, self.n, self.lower, self.upper = config, int(n), float(lower), float(upper)
        self.rows = 0
        self._fine: np.ndarray | None = None  # (2, FINE_BINS) counts: medians and/or the AUC
        if config.thresholds == "fixed-space":
            self._thresholds = fixed_space_thresholds(self.lower, self.upper, config.bins(self.n))
            self._counts = np.zeros((2, self._thresholds.size + 1), dtype=np.int64)
            if config.auc_share > 0:
                self._fine = np.zeros((2, FINE_BINS), dtype=np.int64)
        else:
            self._fine = self._counts = np.zeros((2, FINE_BINS), dtype=np.int64)

    def add(self, scores: np.ndarray, positive: np.ndarray) -> None:
        """Fold one batch of scores and their boolean labels (positive class) into the counts."""
        s, pos = _clamped(scores, positive, self.lower, self.upper)
        if self.config.thresholds == "fixed-space":
            self._counts += bin_counts(s, pos, self._thresholds)
        if self._fine is not None:
            index = fine_cells(s, lower=self.lower, upper=self.upper) + FINE_BINS * (~pos)
            self._fine += np.bincount(index, minlength=2 * FINE_BINS).reshape(2, FINE_BINS)
        self.rows += int(s.size)

    def release(self, run_plan: Plan, rng: np.random.Generator) -> tuple[Curve, np.ndarray]:
        """PriROC: the released curve and thresholds. Cost: ``run_plan.total`` (module doc).

        Call once, after every batch: n must be the number of records added.
        """
        if self.rows != self.n:
            raise ValueError(f"the pass saw {self.rows:,} records, the plan was made for "
                             f"{self.n:,}")
        fine = None if self._fine is None else FineHistogram.of_dense(
            self._fine, lower=self.lower, upper=self.upper)
        if self.config.thresholds == "fixed-space":
            released = _release(self._counts, self._thresholds, self.config, self.n,
                                self.upper, run_plan, rng)
        else:
            assert fine is not None
            released = _release_medians(fine, self.config, self.n, run_plan, rng)
        return _with_auc(released, fine, self.n, run_plan, rng)


def private_roc(scores: np.ndarray, positive: np.ndarray, *, lower: float, upper: float,
                config: ROCConfig, run_plan: Plan, rng: np.random.Generator
                ) -> tuple[Curve, np.ndarray]:
    """PriROC on in-memory arrays, released as :class:`RocPass` would. Cost: ``run_plan.total``.

    ``scores`` outside [lower, upper] (or NaN) are clamped into it; ``positive``
    is a boolean array of the same length. n = len(scores) is public. The
    recursive medians' histogram is built sparse (O(n) memory, no 2^20
    arrays), which is faster on small test sets.
    """
    s, pos = _clamped(scores, positive, lower, upper)
    h = None
    if config.thresholds != "fixed-space" or config.auc_share > 0:
        h = FineHistogram.of_scores(s, pos, lower=lower, upper=upper)
    if config.thresholds == "fixed-space":
        thresholds = fixed_space_thresholds(lower, upper, config.bins(s.size))
        released = _release(bin_counts(s, pos, thresholds), thresholds, config, s.size, upper,
                            run_plan, rng)
    else:
        assert h is not None
        released = _release_medians(h, config, s.size, run_plan, rng)
    return _with_auc(released, h, s.size, run_plan, rng)


def _with_auc(released: tuple[Curve, np.ndarray], fine: FineHistogram | None, n: int,
              run_plan: Plan, rng: np.random.Generator) -> tuple[Curve, np.ndarray]:
    """The curve with the AUC released directly when the plan has an ``auc`` step.

    Drawn after the curve's noise: the pair count, then the count of positives.
    """
    from dataclasses import replace

    from dpcli.algorithms import roc_scale

    curve, thresholds = released
    if "auc" not in {step.name for step in run_plan}:
        return released
    assert fine is not None
    d = roc_scale.pair_count(fine.counts)  # occupied cells, ascending: ties within a cell
    auc = roc_scale.release_auc(d, int(fine.counts[0].sum()), n=n,
                                epsilon=float(run_plan.draw("auc").budget.epsilon),
                                positives_epsilon=float(
                                    run_plan.draw("auc_positives").budget.epsilon), rng=rng)
    return replace(curve, auc=auc.auc, curve_auc=curve.auc, auc_release=auc), thresholds


def _clamped(scores: np.ndarray, positive: np.ndarray, lower: float, upper: float
             ) -> tuple[np.ndarray, np.ndarray]:
    # a score outside the declared range (or NaN) is clamped, so one record can not fail a run
    s = np.clip(np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=lower), lower, upper)
    pos = np.asarray(positive, dtype=bool)
    if s.shape != pos.shape or s.ndim != 1:
        raise ValueError("scores and labels must be 1-D arrays of the same length")
    return s, pos


def _release_medians(h: FineHistogram, config: ROCConfig, n: int, run_plan: Plan,
                     rng: np.random.Generator) -> tuple[Curve, np.ndarray]:
    cuts = recursive_median_cells(h, levels=config.levels(n),
                                  epsilon=run_plan.draw("thresholds").budget.epsilon, rng=rng)
    return _release(h.bin_counts(cuts), h.points(cuts), config, n, h.upper, run_plan, rng)


def _release(counts: np.ndarray, thresholds: np.ndarray, config: ROCConfig, n: int,
             upper: float, run_plan: Plan, rng: np.random.Generator
             ) -> tuple[Curve, np.ndarray]:
    """Steps 2 and 3 of the module docstring, on the (2, bins) counts at public thresholds."""
    prefix = noisy_prefix_sums(counts, strategy=config.counts,
                               epsilon=float(run_plan.draw("counts").budget.epsilon), rng=rng,
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
