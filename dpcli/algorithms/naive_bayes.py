"""Differentially private naive Bayes (Zafarani & Clifton 2021; Vaidya et al. 2013).

What is released (all under replace-one neighbours, n public):

* **priors** — the per-class counts, discrete Laplace with L1 sensitivity 2
  (a replaced record can leave one class and join another).
* **categorical / binary columns** — the table of counts per (class, level),
  ``other`` included, discrete Laplace with L1 sensitivity 2 (one record is
  in one cell; replacing it empties one cell and fills another).
* **token columns** — the table of counts per (class, word) of a public
  vocabulary with at most r words per row: L1 sensitivity 2r.
* **numeric columns** — per class a histogram over B equal-width bins of the
  declared bounds (``histogram``, the rule's default when n is known: a count
  table, discrete Laplace with L1 sensitivity 2, read as a piecewise-constant
  density; a class whose *released* count is below n/K over fewer groups of
  adjacent bins, chosen from that count: nb_allocation, **A rare class's
  bins**), or a mean and a variance (``gaussian``):

  ``smooth``: the mean and the variance of the class sample
  *trimmed* by m values at each end, released on a public grid (2^-30 of
  the statistic's range) with discrete heavy-tailed noise scaled to a
  β-smooth upper bound on their local sensitivity plus one grid step
  (:mod:`dpcli.mechanisms.smooth_stats`; Nissim, Raskhodnikova & Smith,
  calibrated as docs/design.md rule 7: β = ε/(2(γ+1)), scale 2(γ+1)·S/ε, not the
  "√(2s/ε)" printed in the paper's pseudo-code). m = ⌊trim · ñ_c⌋ is
  computed from the class count *already released* as the prior, so it is
  public when the statistic is computed. γ = 4 rather than the paper's Cauchy
  (γ = 2): a Cauchy draw beyond 100 scales has probability 0.6%, enough to
  wreck one model in five (some 24 numeric releases each); with γ = 4 it is
  about 1e-6, for a 10/6 larger typical scale.

  ``global`` (default): the Vaidya et al. baseline, re-derived for dpcli's rules: their
  noise scale (U−L)/(n_c+1) treats the class size n_c as public, which it
  is not here. dpcli instead releases per-class sums of (x − mid) and of
  (x − mid)² − h²/2 (h = (U−L)/2) with Laplace noise — L1 sensitivity U−L and
  h² over the class vector — and divides by the released class counts. The
  sums are float-safe: rounded to a public power-of-two grid with discrete
  Laplace noise in grid units, the sensitivity inflated by two grid steps
  (two classes change) (:func:`dpcli.mechanisms.laplace.laplace_grid`).

**Two classes per record.** Replacing one record changes at most two classes'
samples (one loses a value, one gains a value) or one class's sample by a
substitution. Each class's smooth-sensitivity release is therefore made
ε_step/2-DP with respect to one insert, delete or substitute edit of its own
sample, so that any replace-one change costs at most 2 · ε_step/2 = ε_step.
Tables and the global method's sum vectors are analysed as one vector over
classes, where the class move is already inside the stated L1 sensitivity.

**Budget split**: with the public record count n, the rule of
:mod:`dpcli.algorithms.nb_allocation` (ε_i ∝ c_i^(2/3), the Lagrange optimum of the
log-likelihood terms' squared error; a variance too noisy to beat a public one is
not released; smooth → global per column where a public bound says smooth cannot
win; a decision-threshold step for binary labels, :mod:`dpcli.algorithms.nb_threshold`).
The spec's ``split`` gives explicit weights instead; a library caller without n
gets the paper's split (Algorithm 1): ε' = ε / (2·numeric + categorical + 1).

Everything after the noise is post-processing: counts clipped at 0 and
Laplace-smoothed, means clipped into the declared bounds, variances clipped
into [((U−L)/20)², (U−L)²/4] (a standard deviation of at least 5% of the
declared range: a noisy variance near 0 would make one feature dominate).

**What the smooth method keeps** (memory bounded by statistics, not rows).
The smooth bounds read, per class and numeric column, the window's count,
mean and M2 and the order statistics x_(m-k), x_(n-m+1+k) for the distances k
examined (:mod:`dpcli.mechanisms.smooth_stats`). With ``request(...,
rows_in_memory=False)`` the run's pass keeps a 2^16-bin histogram per class
instead of the values, and ``fit`` re-reads the file once (``reread``), after
the priors are released and m is public, keeping only the distinct values of
the few bins that hold the ranks read and the moments of the bins inside the
window (:mod:`dpcli.stats.order`): two passes, both after the charge, and the
same order statistics — so the same bounds and, up to summation order, the
same T and V as with every value kept (the default for library callers that
fit many times from one pass).

**Why global is the default.** Under replace-one accounting the smooth
method pays twice (ε/2 per class) and the heavy-tailed calibration costs a
factor 2(γ+1); its noise on a class mean is about 4(γ+1)·R/(U−L) times the
global method's, R being the trimmed sample's range. It wins only where the
declared bounds are far wider than the data; on UCI Adult it loses at every
ε in accuracy and AUC, on the credit data at every ε in AUC
(benchmarks/results/nb_accuracy.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from dpcli import params  # option tuples and limits: one definition (dpcli.params)
from dpcli.algorithms import nb_allocation
from dpcli.algorithms.common import table_sensitivity
from dpcli.algorithms.degenerate import RowsCheck
from dpcli.algorithms.nb_allocation import Allocation
from dpcli.algorithms.normal import log_ndtr  # not scipy.special: 0.2 s of start-up
from dpcli.budget import Budget
from dpcli.data.encode import EncodedBatch, TokenSets
from dpcli.data.schema import (
    BinaryColumn,
    CategoricalColumn,
    NumericColumn,
    Schema,
    TokensColumn,
)
from dpcli.errors import UsageError
from dpcli.mechanisms import (
    Plan,
    discrete_laplace_mechanism,
    laplace_grid,
    laplace_mechanism,
    smooth_sensitivity_mechanism,
)
from dpcli.mechanisms.smooth import smooth_beta, smooth_grid
from dpcli.mechanisms.smooth_stats import (
    OrderStatistics,
    SortedSample,
    distances_needed,
    smooth_trimmed_mean_of,
    smooth_trimmed_variance_of,
    trim_count,
    trimmed_of,
)
from dpcli.stats import Stats, StatsRequest
from dpcli.stats.order import ORDER_BINS, Band, BandAccumulator, HistogramBounds, collect

METHODS = params.NB_METHODS
DISTRIBUTIONS = ("truncated", "gaussian")
PRIOR = "prior"
CLASS_CHANGES = 2  # class vectors: a replaced record leaves one class and joins another
SPLIT_PARTS = ("prior", "categorical", "mean", "variance")
THRESHOLD_UTILITIES = ("balanced", "accuracy", "none")

Reread = Callable[[Sequence[str]], Iterable[EncodedBatch]]
"""Columns → a fresh pass of encoded batches over the same data (the smooth method's re-read)."""


def logsumexp(a: np.ndarray, axis: int, keepdims: bool = False) -> np.ndarray:
    """log Σ exp(a) along ``axis``, shifted by the maximum so that nothing overflows. In
    numpy, not scipy.special: importing that costs about 0.3 s of every command's start-up
    (it pulls in numpy.f2py and numpy.testing, docs/scale.md). Rows of −∞ give −∞."""
    a = np.asarray(a, dtype=np.float64)
    top = np.max(a, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(a - top), axis=axis, keepdims=True)) + top
    return out if keepdims else np.squeeze(out, axis=axis)


@dataclass(frozen=True)
class NBConfig:
    """Public parameters of a naive Bayes run (from the spec or the command line)."""

    method: str = "global"
    trim: float = 0.05
    gamma: float = 4.0
    smoothing: float = 1.0
    distribution: str = "truncated"
    #: None: the Lagrange rule of :mod:`dpcli.algorithms.nb_allocation`; else explicit weights
    split: dict[str, float] | None = None
    #: the private class-decision threshold's utility (binary labels; nb_threshold):
    #: "balanced" (balanced accuracy), "accuracy", or "none" (no threshold: the argmax)
    threshold: str = "balanced"
    #: numeric columns: "auto" (the rule of nb_allocation), "histogram" or "gaussian"
    numeric: str = "auto"
    #: a numeric histogram's bins (None: the rule's, from n and ε)
    bins: int | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise UsageError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.distribution not in DISTRIBUTIONS:
            raise UsageError(f"distribution must be one of {', '.join(DISTRIBUTIONS)}")
        if not 0 <= self.trim < 0.5:
            raise UsageError(f"trim must be in [0, 0.5), got {self.trim}")
        if not self.gamma > 1:
            raise UsageError(f"gamma must be > 1, got {self.gamma}")
        if self.threshold not in THRESHOLD_UTILITIES:
            raise UsageError(f"threshold must be one of {', '.join(THRESHOLD_UTILITIES)}, got "
                             f"{self.threshold!r}")
        if not self.smoothing > 0:
            raise UsageError(f"smoothing must be positive, got {self.smoothing}")
        if self.numeric not in params.NB_NUMERIC:
            raise UsageError(f"numeric must be one of {', '.join(params.NB_NUMERIC)}, got "
                             f"{self.numeric!r}")
        if self.bins is not None and not 2 <= self.bins <= params.NB_MAX_BINS:
            raise UsageError(f"bins must be in [2, {params.NB_MAX_BINS}], got {self.bins}")
        if self.split is None:
            return
        if set(self.split) != set(SPLIT_PARTS):
            raise UsageError(f"split must give a weight to each of {', '.join(SPLIT_PARTS)}")
        for key, weight in self.split.items():
            if not weight > 0:
                raise UsageError(f"split.{key} must be positive, got {weight}")


def _kind(schema: Schema, column: str) -> str:
    col = schema.column(column)
    return "numeric" if isinstance(col, NumericColumn) else "categorical"


EQUAL_SPLIT = params.EQUAL_SPLIT
BINS = "bins:"   # a numeric column's histogram step: "bins:<column>"
THRESHOLD = "threshold"
CHECK = "threshold_check"


def allocation(schema: Schema, columns: Sequence[str], total: Budget, config: NBConfig,
               n: int | None = None) -> Allocation:
    """The ε split and per-column choices (:mod:`dpcli.algorithms.nb_allocation`).

    With ``n`` (the public record count) the Lagrange rule, the public-variance
    and smooth-fallback rules and the threshold share; ``config.split`` makes
    the weights explicit. Without ``n`` (a library caller that has none) the
    spec's weights or the paper's equal split, every variance released, the
    configured method everywhere and no threshold.
    """
    if n is not None:
        return nb_allocation.allocate(schema, columns, n=n, epsilon=total.eps,
                                      method=config.method, trim=config.trim,
                                      gamma=config.gamma, split=config.split,
                                      threshold=config.threshold != "none",
                                      numeric=config.numeric, bins=config.bins)
    split = config.split or EQUAL_SPLIT
    raw = {PRIOR: float(split["prior"])}
    methods = {}
    for c in columns:
        if _kind(schema, c) == "numeric":
            raw[f"mean:{c}"] = float(split["mean"])
            raw[f"variance:{c}"] = float(split["variance"])
            methods[c] = config.method
        else:
            raw[f"counts:{c}"] = float(split["categorical"])
    return nb_allocation.Allocation(weights=nb_allocation._normalise(raw, Fraction(1)),
                                    methods=methods, rule="spec" if config.split else "equal")


def plan(schema: Schema, columns: Sequence[str], total: Budget, config: NBConfig,
         n: int | None = None) -> Plan:
    """The named steps and their ε shares (computable without data: used by --dry-run).

    ``n`` is the public record count (see :func:`allocation`). A numeric column's
    method is its mean step's mechanism (smooth_… or laplace); a column without a
    ``variance:`` step uses the public variance; a ``threshold`` step releases the
    decision threshold.
    """
    alloc = allocation(schema, columns, total, config, n)
    heavy = "cauchy" if config.gamma == 2 else f"heavy_tailed(γ={config.gamma:g})"
    shares: dict[str, tuple[str, Fraction]] = {}
    for name, weight in alloc.weights.items():
        if name == PRIOR or name.startswith(("counts:", BINS)):
            shares[name] = ("discrete_laplace", weight)
        else:
            column = name.split(":", 1)[1]
            shares[name] = (f"smooth_{heavy}" if alloc.methods[column] == "smooth"
                            else "laplace", weight)
    t_share = 1 - sum(alloc.weights.values(), Fraction(0))
    if t_share > 0:
        shares[THRESHOLD] = ("exponential", t_share * (1 - nb_allocation.CHECK_PART))
        shares[CHECK] = ("discrete_laplace", t_share * nb_allocation.CHECK_PART)
    p = Plan.split(total, shares)
    notes = {}
    # each step's sensitivity, computed here once: the noise calls read it from the plan
    sensitivities: dict[str, float] = {}
    for step in p:
        eps = step.budget.eps
        if step.name in (THRESHOLD, CHECK):
            # the check counts rows (Δ = 1); the threshold's utility is bounded by 1 in its
            # units (balanced accuracy: released-count weights ≥ 1 scale it; the note says how)
            sensitivities[step.name] = 1.0
        if step.name == THRESHOLD:
            notes[step.name] = (
                f"{nb_allocation.THRESHOLD_CANDIDATES} public log-odds candidates, "
                + ("balanced-accuracy utility, Δ = 1/min released class count"
                   if config.threshold == "balanced"
                   else "accuracy utility (correct count), Δ = 1")
                + "; if that cannot resolve at the released counts: the cut nearest the "
                  "released prior share of rows predicted positive, Δ = 1")
        elif step.name == CHECK:
            notes[step.name] = ("training rows predicted positive at the released cut, "
                                f"Δ=1, scale {1 / eps:.4g}")
        elif step.name.startswith(BINS):
            col = schema.column(step.name[len(BINS):])
            assert isinstance(col, NumericColumn)
            sensitivities[step.name] = nb_allocation.HISTOGRAM_SENSITIVITY
            notes[step.name] = (f"per-class histogram, {alloc.bins[col.name]} equal-width bins "
                                f"over [{col.lower:g}, {col.upper:g}], "
                                f"Δ={nb_allocation.HISTOGRAM_SENSITIVITY}, "
                                f"scale {nb_allocation.HISTOGRAM_SENSITIVITY / eps:.4g}")
        elif step.name == PRIOR or step.name.startswith("counts:"):
            sens: float = 2 if step.name == PRIOR else table_sensitivity(schema, step.name[7:])
            sensitivities[step.name] = sens
            notes[step.name] = f"Δ={sens}, scale {sens / eps:.4g}"
        elif step.mechanism.startswith("smooth"):
            col = schema.column(step.name.split(":", 1)[1])
            assert isinstance(col, NumericColumn)
            grid = smooth_grids(col)[0 if step.name.startswith("mean:") else 1]
            # the public bound of the smooth sensitivity S the noise is scaled to: a trimmed
            # mean in [L, U] moves by at most U − L, a variance by at most (U − L)²/4
            sensitivities[step.name] = (col.width if step.name.startswith("mean:")
                                        else col.width ** 2 / 4)
            notes[step.name] = (f"ε/2 per class, β={smooth_beta(eps / 2, config.gamma):.3g}, "
                                f"grid 2^{math.log2(grid):.0f}, "
                                f"scale {2 * (config.gamma + 1) * 2 / eps:.3g}·(S + grid), "
                                f"discrete")
        else:
            column = step.name.split(":", 1)[1]
            col = schema.column(column)
            assert isinstance(col, NumericColumn)
            h = col.width / 2
            sens = 2 * h if step.name.startswith("mean:") else h * h
            sensitivities[step.name] = sens
            grid, units = laplace_grid(sens, CLASS_CHANGES)
            fell = " (smooth → global: public bound)" if column in alloc.fallback else ""
            public = (" (variance public: (U−L)²/12)" if column in alloc.public_variance
                      and step.name.startswith("mean:") else "")
            notes[step.name] = (f"class sums, Δ={sens:.4g}, grid 2^{math.log2(grid):.0f}, "
                                f"Δ'={units}·grid={units * grid:.4g}, "
                                f"scale {units * grid / eps:.4g}{fell}{public}")
    return p.with_notes(notes).with_sensitivities(sensitivities)


def column_methods(p: Plan, schema: Schema, columns: Sequence[str]) -> dict[str, str]:
    """Each numeric column's method as the plan chose it: "histogram" (a ``bins:`` step),
    else its mean step's mechanism ("smooth" or "global")."""
    return {c: "histogram" if has_step(p, f"{BINS}{c}")
            else "smooth" if p.step(f"mean:{c}").mechanism.startswith("smooth") else "global"
            for c in columns if _kind(schema, c) == "numeric"}


def has_step(p: Plan, name: str) -> bool:
    return any(step.name == name for step in p)


def request(schema: Schema, columns: Sequence[str], config: NBConfig, *,
            rows_in_memory: bool = True, p: Plan | None = None,
            bins: dict[str, int] | None = None) -> StatsRequest:
    """The statistics the run's pass must compute.

    Tables for categorical, binary and tokens columns; per-class moments of
    numeric columns for the global method. The smooth method's numeric
    columns: with ``rows_in_memory`` every clamped value, sorted (8 bytes per
    row and column; ``fit`` needs nothing else, and may be called many times),
    else a histogram of ``ORDER_BINS`` bins per class (bounded memory; ``fit``
    must then be given ``reread``). With the plan ``p``, each numeric column's
    method is the plan's (a smooth column may have fallen back to global); a
    histogram column's counts per (class, bin) need ``bins`` (column -> B, the
    allocation's ``bins``).
    """
    numeric = tuple(c for c in columns if _kind(schema, c) == "numeric")
    tables = tuple(c for c in columns if _kind(schema, c) != "numeric")
    methods = (column_methods(p, schema, columns) if p is not None
               else dict.fromkeys(numeric, config.method))
    smooth = tuple(c for c in numeric if methods[c] == "smooth")
    moments = tuple(c for c in numeric if methods[c] == "global")
    binned = tuple(c for c in numeric if methods[c] == "histogram")
    if binned and (bins is None or any(c not in bins for c in binned)):
        raise ValueError("a histogram column needs its bins (the allocation's 'bins')")
    histograms = tuple((c, bins[c]) for c in binned) if bins else ()
    if not smooth:
        return StatsRequest(contingency=tables, moments=moments, histograms=histograms)
    if rows_in_memory:
        return StatsRequest(contingency=tables, keep_values=smooth, moments=moments,
                            histograms=histograms)
    return StatsRequest(contingency=tables, moments=moments,
                        histograms=histograms + tuple((c, ORDER_BINS) for c in smooth))


@dataclass
class NumericParams:
    lower: float
    upper: float
    mean: np.ndarray
    variance: np.ndarray
    #: released counts per (class, bin) of a histogram column (None: the Gaussian); the
    #: mean and variance are then the histogram's (bin midpoints), for reading only
    bins: np.ndarray | None = None

    def log_density(self, x: np.ndarray, alpha: float) -> np.ndarray:
        """log p(x | c) of a histogram column, shape (rows, classes): Laplace-smoothed
        shares of the released counts over the bin's width (post-processing)."""
        from dpcli.stats.accumulators import bin_index

        logp, edges = self.log_table(alpha)
        return logp[:, bin_index(np.clip(x, self.lower, self.upper), edges)].T

    def log_table(self, alpha: float) -> tuple[np.ndarray, np.ndarray]:
        """(classes × bins) log p(bin | c) over the bin's width, and the bins' edges: the one
        place they are computed (nb_threshold's scorer reads them too)."""
        from dpcli.stats.accumulators import histogram_edges

        assert self.bins is not None
        counts = self.bins + alpha
        width = (self.upper - self.lower) / counts.shape[1]
        logp = np.log(counts / counts.sum(axis=1, keepdims=True)) - math.log(width)
        return logp, histogram_edges(self, counts.shape[1])


@dataclass
class NaiveBayesModel:
    """Released (noisy, post-processed) parameters; predicts without touching training data."""

    schema: Schema
    columns: tuple[str, ...]
    config: NBConfig
    class_counts: np.ndarray
    tables: dict[str, np.ndarray] = field(default_factory=dict)
    numeric: dict[str, NumericParams] = field(default_factory=dict)
    #: released decision threshold on the positive class's log-odds (None: the argmax)
    threshold: float | None = None
    #: how it was chosen: "exponential mechanism", or "prior odds" / "prior quantile" when ε
    #: is too small for it (nb_threshold)
    threshold_rule: str | None = None
    #: the released count of training rows predicted positive at the threshold (nb_threshold)
    rows_check: RowsCheck | None = None
    #: per count table / histogram column: a public pseudo-count added to each cell when
    #: predicting, half the table's noise scale (:func:`pseudo_count`); absent: none
    pseudo: dict[str, float] = field(default_factory=dict)
    #: tokens columns' every-word-absent terms kept within max_per_row of each other
    #: (:meth:`_bernoulli_base`); False for model files written before it (their threshold
    #: was chosen on the unclamped log-odds)
    clamp_absent: bool = True

    # ------------------------------------------------------------ predict
    @property
    def decision_log_odds(self) -> float:
        """Class 1 is predicted when log P(1|x) − log P(0|x) exceeds this (binary models)."""
        if self.threshold is None:
            return 0.0
        pos = self.schema.label.positive_index
        return self.threshold if pos in (None, 1) else -self.threshold

    def classify(self, batch: EncodedBatch) -> tuple[np.ndarray, np.ndarray]:
        """Class probabilities and predicted codes: the threshold's rule when one was released."""
        jll = self.joint_log_likelihood(batch)
        proba = np.exp(jll - logsumexp(jll, axis=1, keepdims=True))
        if self.threshold is None or jll.shape[1] != 2:
            return proba, proba.argmax(axis=1)
        return proba, (jll[:, 1] - jll[:, 0] > self.decision_log_odds).astype(np.int64)

    def log_prior(self) -> np.ndarray:
        counts = self.class_counts + self.config.smoothing
        return np.log(counts / counts.sum())

    def joint_log_likelihood(self, batch: EncodedBatch) -> np.ndarray:
        """log P(c) + Σ_features log P(x_j | c), shape (n, n_classes)."""
        out = np.tile(self.log_prior(), (batch.n, 1))
        alpha = self.config.smoothing
        for name in self.columns:
            col = self.schema.column(name)
            values = batch.columns[name]
            if isinstance(col, NumericColumn):
                p = self.numeric[name]
                out += (self._numeric_loglik(p, np.asarray(values)) if p.bins is None
                        else p.log_density(np.asarray(values, float),
                                           alpha + self.pseudo.get(name, 0.0)))
            elif isinstance(col, TokensColumn):
                out += self.tokens_loglik(name, values)
            else:
                out += self.code_log_table(name)[:, np.asarray(values)].T
        return out

    def code_log_table(self, name: str) -> np.ndarray:
        """(classes × levels) log P(level | c) of a categorical or binary column: smoothed
        shares of the released table, the one place they are computed (nb_threshold's
        scorer reads them too)."""
        table = self.tables[name] + self.config.smoothing + self.pseudo.get(name, 0.0)
        return np.log(table / table.sum(axis=1, keepdims=True))

    def common_log_odds(self) -> float | None:
        """log-odds of class 1 over class 0 shared by every row through the tokens
        columns (their every-word-absent terms) and the prior: a row with no words and
        no other column; None without a tokens column or for more than two classes.
        Post-processing of released values (nb_threshold's candidates are centred on it).
        """
        names = [c for c in self.columns if isinstance(self.schema.column(c), TokensColumn)]
        if not names or len(self.class_counts) != 2:
            return None
        prior = self.log_prior()
        out = float(prior[1] - prior[0])
        for name in names:
            _, base = self._tokens_terms(name)
            out += float(base[1] - base[0])
        return out

    def typical_log_odds(self) -> tuple[float, float | None] | None:
        """(mean, sd) of the log-odds of class 1 over class 0 of a row drawn from the
        released model: x from the released mixture Σ_c π̃_c·P(x | c) (π̃: the released
        class shares), the columns independent (the model's own assumption, within a
        class). None for more than two classes; a model with a tokens column gives
        (:meth:`common_log_odds`, None).

        Post-processing of released values. Why: the decision threshold's candidates are
        spread over mean ± THRESHOLD_WINDOW sd (nb_threshold). With many noisy numeric
        terms every training row's log-odds can sit tens of nats away from 0 (digits at
        n = 880, ε = 0.5: all rows in −150 … −20) while the model's range over the
        declared domain reaches thousands, and the grid around 0 had a handful of points
        inside the rows: the prior quantile could not find a cut there
        (docs/algorithms/naive-bayes.md, **Candidates where the rows are**). Per column: a
        count table or histogram sums over its cells; a Gaussian term is quadratic in x,
        its mean exact and its variance that of the quadratic under one Gaussian with the
        mixture's mean and variance.
        """
        if len(self.class_counts) != 2:
            return None
        if any(isinstance(self.schema.column(c), TokensColumn) for c in self.columns):
            shared = self.common_log_odds()
            return None if shared is None else (shared, None)
        prior = self.log_prior()
        share = np.exp(prior)                       # released class shares π̃ (sum to 1)
        mean, var = float(prior[1] - prior[0]), 0.0
        alpha = self.config.smoothing
        for name in self.columns:
            col = self.schema.column(name)
            if isinstance(col, NumericColumn):
                p = self.numeric[name]
                if p.bins is None:
                    m, v = self._gaussian_odds_moments(p, share)
                    mean, var = mean + m, var + v
                    continue
                logp, _ = p.log_table(alpha + self.pseudo.get(name, 0.0))
                logp = logp + math.log((p.upper - p.lower) / logp.shape[1])  # per bin
            else:
                logp = self.code_log_table(name)
            mix = share @ np.exp(logp)                   # the mixture's cell shares
            mix = mix / mix.sum()
            d = logp[1] - logp[0]
            m = float(mix @ d)
            mean, var = mean + m, var + max(float(mix @ (d - m) ** 2), 0.0)
        return mean, math.sqrt(var)

    def _gaussian_odds_moments(self, p: NumericParams,
                               share: np.ndarray) -> tuple[float, float]:
        """Mean and variance of ll_1(x) − ll_0(x) for one Gaussian column, x from the
        released mixture (:meth:`typical_log_odds`). The term is a·x² + b·x + const:
        its mean uses E[x²] of the mixture exactly; its variance, (2a·m + b)²·V + 2a²·V²,
        that of one Gaussian with the mixture's mean m and variance V."""
        sd = np.sqrt(p.variance)
        m = float(share @ p.mean)
        big_v = float(share @ (p.variance + p.mean ** 2)) - m * m
        a = -0.5 / p.variance[1] + 0.5 / p.variance[0]
        b = p.mean[1] / p.variance[1] - p.mean[0] / p.variance[0]
        const = (-0.5 * p.mean[1] ** 2 / p.variance[1] + 0.5 * p.mean[0] ** 2 / p.variance[0]
                 - math.log(sd[1]) + math.log(sd[0]))
        if self.config.distribution == "truncated":
            for c, sign in ((1, -1.0), (0, 1.0)):
                hi = log_ndtr((p.upper - p.mean[c]) / sd[c])
                lo = log_ndtr((p.lower - p.mean[c]) / sd[c])
                const += sign * float(hi + np.log1p(-np.exp(min(lo - hi, -1e-12))))
        mean = float(a * (big_v + m * m) + b * m + const)
        var = float((2 * a * m + b) ** 2 * big_v + 2 * a * a * big_v * big_v)
        return mean, var

    def predict_proba(self, batch: EncodedBatch) -> np.ndarray:
        jll = self.joint_log_likelihood(batch)
        return np.exp(jll - logsumexp(jll, axis=1, keepdims=True))

    def _numeric_loglik(self, p: NumericParams, x: np.ndarray) -> np.ndarray:
        sd = np.sqrt(p.variance)
        z = (x[:, None] - p.mean[None, :]) / sd[None, :]
        ll = -0.5 * z * z - np.log(sd)[None, :] - 0.5 * np.log(2 * np.pi)
        if self.config.distribution == "truncated":
            hi = log_ndtr((p.upper - p.mean) / sd)
            lo = log_ndtr((p.lower - p.mean) / sd)
            mass = hi + np.log1p(-np.exp(np.minimum(lo - hi, -1e-12)))
            ll -= mass[None, :]
        return ll

    def tokens_loglik(self, name: str, values: Any) -> np.ndarray:
        """A tokens column's (rows × classes) term of :meth:`joint_log_likelihood`: the one
        place it is computed (nb_threshold's scorer calls it too, so the threshold pass
        scores as the released model does, clamp included)."""
        assert isinstance(values, TokenSets)
        p, base = self._tokens_terms(name)
        delta = np.log(p) - np.log1p(-p)              # word present vs absent
        rows = np.repeat(np.arange(values.n), np.diff(values.offsets))
        present = np.zeros((values.n, p.shape[0]))
        np.add.at(present, rows, delta[:, values.indices].T)
        return base[None, :] + present

    def _tokens_terms(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """A tokens column's word shares and every-word-absent terms (:meth:`_bernoulli_base`
        with the column's pseudo-count and its max_per_row as the clamp's bound)."""
        col = self.schema.column(name)
        assert isinstance(col, TokensColumn)
        return self._bernoulli_base(self.tables[name],
                                    self.config.smoothing + self.pseudo.get(name, 0.0),
                                    float(col.max_per_row or 0) or None)

    def _bernoulli_base(self, counts: np.ndarray, alpha: float,
                        bound: float | None) -> tuple[np.ndarray, np.ndarray]:
        """The word shares p (K, V) and each class's every-word-absent term Σ_v log(1 − p).

        ``bound`` (the column's max_per_row r): no class's term is more than r below the
        largest. Post-processing with a public constant: a class's −Σ_v log(1 − p_v) is
        about Σ_v p_v, its mean words per row, in [0, r]; with V noisy words it comes out
        in the hundreds (the noise that survives the clip at 0 in every cell), a shift of
        every row's log-odds that saturates the probabilities (docs/algorithms/
        naive-bayes.md, **Token columns**). It moves no row's rank.
        """
        n_c = np.maximum(self.class_counts, 0)[:, None]
        p = np.clip((counts + alpha) / (n_c + 2 * alpha), 1e-6, 1 - 1e-6)
        base = np.log1p(-p).sum(axis=1)              # every word absent
        if bound is not None and self.clamp_absent:
            base = np.maximum(base, base.max() - bound)
        return p, base

    # ---------------------------------------------------------- serialise
    def to_payload(self) -> dict[str, Any]:
        from dpcli.data.schema import schema_to_dict

        return {
            "model": "naive_bayes",
            "method": self.config.method,
            "config": {"trim": self.config.trim, "gamma": self.config.gamma,
                       "smoothing": self.config.smoothing,
                       "distribution": self.config.distribution,
                       "split": None if self.config.split is None else dict(self.config.split),
                       "threshold": self.config.threshold, "numeric": self.config.numeric,
                       "bins": self.config.bins},
            "threshold": self.threshold,
            "threshold_rule": self.threshold_rule,
            "threshold_check": None if self.rows_check is None else self.rows_check.to_json(),
            "pseudo_counts": dict(self.pseudo),
            "clamp_absent": self.clamp_absent,
            "schema": schema_to_dict(self.schema),
            "columns": list(self.columns),
            "class_counts": self.class_counts.tolist(),
            "tables": {k: v.tolist() for k, v in self.tables.items()},
            "numeric": {k: {"lower": p.lower, "upper": p.upper, "mean": p.mean.tolist(),
                            "variance": p.variance.tolist(),
                            **({} if p.bins is None else {"bins": p.bins.tolist()})}
                        for k, p in self.numeric.items()},
        }

    @classmethod
    def from_payload(cls, payload: dict[str, Any], source: Any) -> NaiveBayesModel:
        from dpcli.data.schema import schema_from_dict

        cfg = payload["config"]
        config = NBConfig(method=payload["method"], trim=cfg["trim"], gamma=cfg["gamma"],
                          smoothing=cfg["smoothing"], distribution=cfg["distribution"],
                          split=cfg.get("split"), threshold=cfg.get("threshold", "none"),
                          numeric=cfg.get("numeric", "gaussian"), bins=cfg.get("bins"))
        return cls(
            schema=schema_from_dict(payload["schema"], source),
            columns=tuple(payload["columns"]),
            config=config,
            class_counts=np.asarray(payload["class_counts"], dtype=float),
            tables={k: np.asarray(v, dtype=float) for k, v in payload["tables"].items()},
            numeric={k: NumericParams(v["lower"], v["upper"], np.asarray(v["mean"], float),
                                      np.asarray(v["variance"], float),
                                      None if v.get("bins") is None
                                      else np.asarray(v["bins"], float))
                     for k, v in payload["numeric"].items()},
            threshold=payload.get("threshold"),
            threshold_rule=payload.get("threshold_rule"),
            rows_check=_rows_check(payload.get("threshold_check")),
            pseudo={str(k): float(v) for k, v in (payload.get("pseudo_counts") or {}).items()},
            clamp_absent=bool(payload.get("clamp_absent", False)),
        )


def _rows_check(entry: dict[str, Any] | None) -> RowsCheck | None:
    """The released check read back from a model file (None when absent or malformed)."""
    if not isinstance(entry, dict):
        return None
    try:
        return RowsCheck(predicted_positive=int(entry["predicted_positive"]),
                         rows=int(entry["rows"]), halfwidth=float(entry["noise_halfwidth_95"]),
                         epsilon=float(entry["epsilon"]))
    except (KeyError, TypeError, ValueError):
        return None


def fit(stats: Stats, schema: Schema, columns: Sequence[str], p: Plan, config: NBConfig,
        rng: np.random.Generator, *, reread: Reread | None = None) -> NaiveBayesModel:
    """Release the model's parameters from the statistics of :func:`request`; costs ``p.total``.

    The priors are released first: the smooth method derives its public
    trimming counts from them. A smooth numeric column whose pass kept a
    histogram rather than its values is completed by ONE call of
    ``reread(columns)`` (all such columns at once), after the priors and
    before any other release. That read releases nothing and ``fit`` hands it
    no generator; a ``reread`` that draws nothing from ``rng`` (the CLI's
    reads numeric columns only, which draws nothing) gives the model that
    keeping every value gives under the same ``rng``: the same smooth bounds,
    T and V up to floating-point summation order.
    """
    k = schema.n_classes
    prior = p.draw(PRIOR)
    noisy_counts = discrete_laplace_mechanism(
        stats.class_counts, sensitivity=prior.integer_sensitivity(), epsilon=prior.budget.eps,
        rng=rng)
    class_counts = np.maximum(noisy_counts, 0).astype(float)
    # every released estimate of the class sizes: (noisy per-class totals, noise variance)
    estimates = [(np.asarray(noisy_counts, float),
                  _variance(2 / p.step(PRIOR).budget.eps))]
    model = NaiveBayesModel(schema=schema, columns=tuple(columns), config=config,
                            class_counts=class_counts)
    methods = column_methods(p, schema, columns)
    smooth_columns = [c for c in columns if methods.get(c) == "smooth"]
    samples: dict[str, list[OrderStatistics]] = {}
    if smooth_columns:
        samples = _class_samples(stats, schema, smooth_columns, p, config, class_counts,
                                 reread)
    for name in columns:
        col = schema.column(name)
        if not isinstance(col, NumericColumn):
            step = p.draw(f"counts:{name}")
            noisy = discrete_laplace_mechanism(stats.contingency[name],
                                               sensitivity=step.integer_sensitivity(),
                                               epsilon=step.budget.eps, rng=rng)
            model.tables[name] = np.maximum(noisy, 0).astype(float)
            if isinstance(col, TokensColumn):
                # the same shrinkage as a count table's: a word whose class count is noise
                # (0 or |noise|) would otherwise swing its log-share, per row that holds it
                model.pseudo[name] = pseudo_count(step.integer_sensitivity() / step.budget.eps)
            else:
                # a categorical or binary table holds each record in one cell: its noisy
                # row sums estimate the class sizes too (a tokens table counts words)
                scale = step.integer_sensitivity() / step.budget.eps
                estimates.append((np.asarray(noisy, float).sum(axis=1),
                                  np.shape(noisy)[1] * _variance(scale)))
                model.pseudo[name] = pseudo_count(scale)
            continue
        if methods[name] == "histogram":
            coarse = None if config.bins is not None else _class_bins(
                stats, p, len(columns), class_counts, name)
            model.numeric[name], noisy_bins = _histogram_numeric(stats, name, col, p, rng,
                                                                 coarse)
            look = p.step(f"{BINS}{name}")   # drawn above; its noise's scale, a look
            scale = look.integer_sensitivity() / look.budget.eps
            estimates.append((noisy_bins.sum(axis=1), noisy_bins.shape[1] * _variance(scale)))
            model.pseudo[name] = pseudo_count(scale)
            continue
        mean_step = p.draw(f"mean:{name}")
        eps_mean = mean_step.budget.eps
        # no variance step: the variance is the public (U−L)²/12 (nb_allocation), no ε
        var_step = p.draw(f"variance:{name}") if has_step(p, f"variance:{name}") else None
        eps_var = None if var_step is None else var_step.budget.eps
        if methods[name] == "smooth":
            mean, var = _smooth_numeric(samples[name], col, class_counts, eps_mean, eps_var,
                                        config, rng)
        else:
            mean, var = _global_numeric(
                stats, name, col, class_counts, eps_mean, eps_var, rng,
                sensitivities=(mean_step.noise_sensitivity(),
                               None if var_step is None else var_step.noise_sensitivity()))
        mean, var = _post_process(mean, var, col)
        if eps_var is None:
            var = np.full(k, nb_allocation.public_variance(col))
        model.numeric[name] = NumericParams(col.lower, col.upper, mean, var)
    if len(estimates) > 1 and pool_class_counts(model):
        model.class_counts = _pooled(estimates)
    assert len(model.class_counts) == k
    return model


def pool_class_counts(model: NaiveBayesModel) -> bool:
    """Whether the model's class sizes are pooled from its count tables: when no numeric
    column uses the Gaussian (global or smooth), whose released means and variances were
    divided by the prior's counts and must stay consistent with them."""
    return all(p.bins is not None for p in model.numeric.values())


#: a declared level whose released count, summed over the classes, is within this many
#: noise standard deviations of zero holds (almost) no row
ABSENT_SDS = 3.0
#: a categorical column with at least this share of its released mass at ``other``
OTHER_SHARE = 0.5
#: judged only where that noise floor is at most this share of the column's released mass
RESOLVABLE_SHARE = 0.1


def domain_cautions(model: NaiveBayesModel, p: Plan) -> list[str]:
    """What the released count tables say about the declared domains (post-processing of
    released values: free, no record read).

    A binary column one of whose values cannot be told from zero in any class (every
    released cell of it within :data:`ABSENT_SDS` noise standard deviations of zero) while
    the other value can: either (almost) no row holds it — the usual cause a file that
    writes the values otherwise ('Male' for 'male'), since a binary column reads any
    undeclared value as its first — or it is too rare for this ε to see. A categorical
    column with :data:`OTHER_SHARE` or more of its released mass at ``other`` holds mostly
    undeclared values. Judged only where the noise floor is at most
    :data:`RESOLVABLE_SHARE` of the column's released mass. ``p``: the run's plan (its
    steps' noise scales).
    """
    out: list[str] = []
    hint = ("if the file writes them another way (case, spaces, codes), declare them as "
            "written (`dpcli inspect` lists such values)")
    for name, table in model.tables.items():
        col = model.schema.column(name)
        if not isinstance(col, (BinaryColumn, CategoricalColumn)):
            continue
        step = p.step(f"counts:{name}")
        scale = step.integer_sensitivity() / step.budget.eps
        cell = ABSENT_SDS * math.sqrt(_variance(scale))   # one released cell's noise floor
        cells = np.asarray(table, float)
        totals = cells.sum(axis=0)
        if cell * math.sqrt(cells.shape[0]) > RESOLVABLE_SHARE * totals.sum():
            continue   # the noise could hide a level of this size: nothing to tell
        if isinstance(col, BinaryColumn):
            zero = [bool((cells[:, i] <= cell).all()) for i in range(2)]
            for i, value in enumerate(col.values):
                if zero[i] and not zero[1 - i]:
                    why = (f" A binary column reads any value outside its declared pair as "
                           f"{col.values[0]!r}: {hint}" if i == 1 else "")
                    out.append(f"column '{name}': its released counts at {value!r} cannot be "
                               f"told from zero in any class at this ε: (almost) no row has "
                               f"it, or it is too rare to see, and the column adds (almost) "
                               f"nothing to the model.{why}")
        elif totals[-1] > cell and totals[-1] >= OTHER_SHARE * max(totals.sum(), 1.0):
            out.append(f"column '{name}': the released counts put most rows "
                       f"({totals[-1] / totals.sum():.0%}) at 'other', outside its declared "
                       f"categories: {hint}")
    return out


def _variance(scale: float) -> float:
    """Variance of discrete Laplace noise of scale b: 2q/(1 − q)², q = e^(−1/b)."""
    q = math.exp(-1.0 / scale)
    return 2 * q / (1 - q) ** 2


def _pooled(estimates: Sequence[tuple[np.ndarray, float]]) -> np.ndarray:
    """The class sizes, post-processing: the inverse-variance weighted mean of every
    released estimate — the prior's noisy counts and each table's (or histogram's) noisy
    row sums, which count every record of the class once — rounded and clipped at 0.

    The prior is one statistic among many (its share of ε is small); with 64 tables of
    two cells the pooled counts have a noise sd some √64 / √2 times below the tables'
    row sums, which the threshold's target and its Δ read (nb_threshold).
    """
    # a noise-free estimate (a huge ε: variance 0) is exact: it takes (almost) all the weight
    weights = np.array([1.0 / max(v, 1e-12) for _, v in estimates])
    values = np.vstack([e for e, _ in estimates])
    pooled = (weights[:, None] * values).sum(axis=0) / weights.sum()
    return np.maximum(np.round(pooled), 0.0)


def _class_samples(stats: Stats, schema: Schema, columns: Sequence[str], p: Plan,
                   config: NBConfig, class_counts: np.ndarray,
                   reread: Reread | None) -> dict[str, list[OrderStatistics]]:
    """Per smooth numeric column, each class sample as the smooth bounds read it.

    Kept values: a :class:`SortedSample` per class. A histogram: the public
    m (from the released counts) and β give, per class, the distances the
    bounds can read (:func:`distances_needed`, from the histogram's bin edges
    alone) and so the bins to keep; one re-read gathers them
    (:mod:`dpcli.stats.order`).
    """
    out: dict[str, list[OrderStatistics]] = {}
    accumulators: dict[str, BandAccumulator] = {}
    for name in columns:
        col = schema.column(name)
        if not isinstance(col, NumericColumn):
            continue
        if name in stats.values:
            out[name] = [SortedSample(v, lower=col.lower, upper=col.upper)
                         for v in stats.values[name]]
            continue
        if name not in stats.histograms:
            raise ValueError(f"the smooth method needs the kept values or the histogram of "
                             f"column '{name}' (see naive_bayes.request)")
        # a public variance has no step: its β is the mean's (only which bins are kept)
        mean_beta, variance_beta = (
            smooth_beta(p.step(f"{part}:{name}" if has_step(p, f"{part}:{name}")
                               else f"mean:{name}").budget.eps / 2, config.gamma)
            for part in ("mean", "variance"))
        bands = []
        for c, counts in enumerate(stats.histograms[name]):
            bounds = HistogramBounds(counts, stats.edges[name], lower=col.lower,
                                     upper=col.upper)
            m = trim_count(float(class_counts[c]), config.trim)
            distances = distances_needed(bounds, m=m, mean_beta=mean_beta,
                                         variance_beta=variance_beta)
            bands.append(Band.plan(bounds, m=m, distances=distances))
        accumulators[name] = BandAccumulator(col, stats.edges[name], stats.histograms[name],
                                             bands)
    if accumulators:
        if reread is None:
            raise ValueError("the statistics hold histograms, not values: the smooth method "
                             "needs reread to gather its order statistics")
        for name, samples in collect(reread(tuple(accumulators)), accumulators).items():
            out[name] = [sample for sample in samples]   # list is invariant: widen to the protocol
    return out


def _smooth_numeric(samples: Sequence[OrderStatistics | np.ndarray], col: NumericColumn,
                    noisy_counts: np.ndarray, eps_mean: float, eps_var: float | None,
                    config: NBConfig,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per class: trimmed mean and variance + heavy-tailed noise, each at ε_step/2.

    A class sample is an :class:`OrderStatistics` or a sorted array of its
    clamped values. ``eps_var`` None: no variance is released (NaN returned in its place).
    """
    means, variances = [], []
    for c, given in enumerate(samples):
        sample = (SortedSample(given, lower=col.lower, upper=col.upper)
                  if isinstance(given, np.ndarray) else given)
        m = trim_count(float(noisy_counts[c]), config.trim)
        t = trimmed_of(sample, m=m)
        e_mean = eps_mean / 2
        s_mean, _ = smooth_trimmed_mean_of(sample, m=m, beta=smooth_beta(e_mean, config.gamma))
        grid_mean, grid_var = smooth_grids(col)
        means.append(smooth_sensitivity_mechanism(t.mean, smooth_sensitivity=s_mean,
                                                  epsilon=e_mean, gamma=config.gamma, rng=rng,
                                                  grid=grid_mean))
        if eps_var is None:
            variances.append(float("nan"))
            continue
        e_var = eps_var / 2
        s_var, _ = smooth_trimmed_variance_of(sample, m=m,
                                              beta=smooth_beta(e_var, config.gamma))
        variances.append(float(smooth_sensitivity_mechanism(
            t.variance, smooth_sensitivity=s_var, epsilon=e_var, gamma=config.gamma, rng=rng,
            grid=grid_var)))
    return np.asarray(means, float), np.asarray(variances, float)


def smooth_grids(col: NumericColumn) -> tuple[float, float]:
    """The public grids of a smooth column's mean and variance releases (float safety).

    The trimmed mean lies in [L, U] and the trimmed variance in [0, (U−L)²/4]:
    each grid is 2^-30 of that range, rounded down to a power of two
    (:func:`dpcli.mechanisms.smooth.smooth_grid`); the rounding adds one grid
    step to the smooth bound S.
    """
    return smooth_grid(col.width), smooth_grid(col.width ** 2 / 4)


def _global_numeric(stats: Stats, name: str, col: NumericColumn, noisy_counts: np.ndarray,
                    eps_mean: float, eps_var: float | None,
                    rng: np.random.Generator, *,
                    sensitivities: tuple[float, float | None] | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per-class sums with Laplace noise (global sensitivity), divided by released counts.

    ``eps_var`` None: only the sums of x − mid are released (NaN for the variance).
    ``sensitivities``: the plan steps' (2h and h², :func:`plan`); the same from the
    declared bounds when not given.
    """
    mom = stats.moments[name]
    mid, h = (col.lower + col.upper) / 2, col.width / 2
    count = mom.count.astype(float)
    centred = mom.sum - count * mid                                 # Σ (x − mid)
    squares = mom.m2 + count * (mom.mean - mid) ** 2 - count * h * h / 2   # Σ (x−mid)² − h²/2
    centred = np.where(count > 0, centred, 0.0)
    squares = np.where(count > 0, squares, 0.0)
    # float-safe: the sums are rounded to a public grid and get integer noise in grid units;
    # a replaced record changes at most two classes' sums
    sens_mean, sens_var = sensitivities or (2 * h, h * h)
    noisy_c = laplace_mechanism(centred, sensitivity=sens_mean, epsilon=eps_mean, rng=rng,
                                changes=CLASS_CHANGES)
    n = np.maximum(noisy_counts, 1.0)
    mean = mid + noisy_c / n
    if eps_var is None:
        return mean, np.full_like(mean, np.nan)
    noisy_s = laplace_mechanism(squares, sensitivity=sens_var or h * h, epsilon=eps_var, rng=rng,
                                changes=CLASS_CHANGES)
    second = noisy_s / n + h * h / 2                                # E[(x − mid)²]
    return mean, second - (np.clip(mean, col.lower, col.upper) - mid) ** 2


def _class_bins(stats: Stats, p: Plan, m: int, released: np.ndarray,
                name: str) -> list[int]:
    """Each class's bins for a histogram column (nb_allocation, **A rare class's bins**):
    from n (public), the plan's ε, K, the model's m columns and the released class
    counts — no new look at the data."""
    table = np.asarray(stats.histograms[name])
    k, bins = table.shape
    n = int(np.asarray(stats.class_counts).sum())      # the record count: public
    raw = nb_allocation.raw_bins(n, p.total.eps, k, m)
    return nb_allocation.class_bins(bins, raw, [float(v) for v in released], n)


def merged_histogram(table: np.ndarray, coarse: Sequence[int]) -> list[np.ndarray]:
    """Per class c, its counts over ``coarse[c]`` groups of adjacent bins
    (:func:`nb_allocation.bin_groups`): the statistic a rare class's histogram releases.
    Replace-one: one record leaves one (class, group) cell and one joins one: L1 ≤ 2."""
    table = np.asarray(table)
    return [np.add.reduceat(table[c], nb_allocation.bin_groups(table.shape[1], g))
            for c, g in enumerate(coarse)]


def _histogram_numeric(stats: Stats, name: str, col: NumericColumn, p: Plan,
                       rng: np.random.Generator, coarse: Sequence[int] | None = None
                       ) -> tuple[NumericParams, np.ndarray]:
    """Release the per-class counts over the column's equal-width bins: discrete Laplace.

    Statistic: counts[c, b] = records of class c whose clamped value is in bin b — or,
    with ``coarse`` (per class its number of groups, chosen from the released class
    counts: nb_allocation, **A rare class's bins**), class c's counts over that many
    groups of adjacent bins (:func:`merged_histogram`). Replace-one: the old record
    leaves one (class, cell) and the new one joins one, so the cells move by at most 2
    in L1 whatever the partition (Δ = 2, the class move included); noise scale
    2/ε_step, ε_step-DP. A group's noisy count is spread evenly over its bins; then
    clipped at 0; the mean and variance the model file shows are the released
    histogram's (bin midpoints): post-processing. Returns the parameters and the
    unclipped noisy counts (for the pooled class sizes).
    """
    step = p.draw(f"{BINS}{name}")   # the step's one draw: its ε and its planned Δ
    table = np.asarray(stats.histograms[name])
    k, bins = table.shape
    if coarse is None or all(g >= bins for g in coarse):
        noisy = discrete_laplace_mechanism(table, sensitivity=step.integer_sensitivity(),
                                           epsilon=step.budget.eps, rng=rng)
    else:
        cells = merged_histogram(table, coarse)
        # one release of every class's cells together: the L1 bound 2 holds for the whole
        flat = discrete_laplace_mechanism(np.concatenate(cells),
                                          sensitivity=step.integer_sensitivity(),
                                          epsilon=step.budget.eps, rng=rng)
        noisy = np.zeros((k, bins))
        at = 0
        for c, g in enumerate(coarse):
            starts = [*nb_allocation.bin_groups(bins, g), bins]
            for j in range(len(starts) - 1):
                a, b = starts[j], starts[j + 1]
                noisy[c, a:b] = float(flat[at]) / (b - a)
                at += 1
    counts = np.maximum(noisy, 0).astype(float)
    edges = np.asarray(stats.edges[name], float)
    mids = (edges[:-1] + edges[1:]) / 2
    weight = counts + 1e-12
    mean = (weight * mids).sum(axis=1) / weight.sum(axis=1)
    var = (weight * (mids[None, :] - mean[:, None]) ** 2).sum(axis=1) / weight.sum(axis=1)
    mean, var = _post_process(mean, var, col)
    return NumericParams(col.lower, col.upper, mean, var, counts), np.asarray(noisy, float)


#: a count table's pseudo-count, in units of its noise scale (``shrink``)
PSEUDO_COUNT = 0.5


def pseudo_count(scale: float) -> float:
    """PSEUDO_COUNT × a count table's noise scale: added to each cell when predicting.

    Post-processing of released values with a public constant (the noise scale
    Δ/ε of the table's own step). A cell whose true count is small next to the
    noise comes out as 0 or as |noise|, and its log share, read by every row in
    that cell, swings by the log of that ratio; a pseudo-count of half the
    noise scale bounds the swing (a shrinkage towards the uniform table, which
    fades as n·ε grows). Half the scale was chosen on a split of adult_train
    (ε = 0.1: accuracy +1.6 points, AUC +3.5; ε = 1: no change): see
    benchmarks/results/learners_r5.md. A tokens table gets it too (since round 7:
    its Bernoulli share is (count + α + a)/(ñ_c + 2(α + a)); on the tweets tuning split
    AUC 0.63 → 0.69 at ε = 0.5, benchmarks/results/learners_r7.md). The model
    file keeps the released counts and this constant apart (``pseudo_counts``).
    """
    return PSEUDO_COUNT * scale


def _post_process(mean: np.ndarray, var: np.ndarray,
                  col: NumericColumn) -> tuple[np.ndarray, np.ndarray]:
    floor = (col.width / 20) ** 2
    mean = np.clip(np.nan_to_num(mean, nan=(col.lower + col.upper) / 2), col.lower, col.upper)
    var = np.clip(np.nan_to_num(var, nan=floor), floor, col.width ** 2 / 4)
    return mean, var


def fit_threshold(model: NaiveBayesModel, p: Plan, batches: Iterable[EncodedBatch],
                  rng: np.random.Generator) -> float:
    """Release the decision threshold of a fitted binary model and check it on the rows.

    Costs ``p``'s ``threshold`` and ``threshold_check`` steps. Candidates from the
    released model and the declared domains
    (:func:`dpcli.algorithms.nb_threshold.candidates`); ONE pass over ``batches``
    (the training data again, after the model's release) counts, per candidate, the
    positives and negatives above it. The cut: the exponential mechanism on balanced
    accuracy (or accuracy) when it resolves at the released class counts; else the
    released prior odds' cut when a noisy count of the rows above it (ε/2) is near the
    released prior's share of the rows, and otherwise the exponential mechanism (ε/2) on
    the distance to that share — choices from released values and ε. Then the rows
    predicted positive at the cut, with discrete Laplace (``model.rows_check``;
    :func:`degenerate.check` reads it). Sets ``model.threshold`` and returns it.
    """
    from dpcli.algorithms import degenerate, nb_threshold

    verdict = degenerate.check(model)
    assert verdict is not None, "a threshold needs a binary label"
    pos = nb_threshold.positive_code(model)
    lo, hi = verdict.log_odds if pos == 1 else (-verdict.log_odds[1], -verdict.log_odds[0])
    log_prior = model.log_prior()
    prior_cut = float(log_prior[pos] - log_prior[1 - pos])
    typical = model.typical_log_odds()
    center = spread = None
    if typical is not None:
        center, spread = typical[0] if pos == 1 else -typical[0], typical[1]
    cands = nb_threshold.candidates((lo, hi), prior_cut, nb_allocation.THRESHOLD_CANDIDATES,
                                    center=center, sd=spread)
    released = (float(model.class_counts[pos]), float(model.class_counts[1 - pos]))
    epsilon = p.draw(THRESHOLD).budget.eps
    # the pass is made whatever the rule: the check needs its counts (no third pass)
    counts = nb_threshold.count(model, batches, cands)
    if nb_threshold.resolvable(released, epsilon, len(cands), model.config.threshold):
        cut = nb_threshold.select(counts, released, utility=model.config.threshold,
                                  epsilon=epsilon, rng=rng)
        model.threshold_rule = "exponential mechanism"
    elif model.config.threshold == "accuracy":
        # accuracy cannot be resolved at this ε either: the most probable class (cut 0) is the
        # accuracy-optimal cut of a calibrated model, and a choice from public facts (the
        # prior's cut below aims at balanced accuracy instead)
        cut = 0.0
        model.threshold_rule = "argmax"
    else:
        # the prior odds' cut, unless a count of the rows above it (half the step's ε) says it
        # is far from the prior's share; then, at the other half, the cut nearest that share,
        # which does not depend on the model's scale (noisy terms can shift every log-odds)
        target = nb_threshold.quantile_target(released, counts.rows)
        if nb_threshold.prior_cut_far(prior_cut, center, spread):
            # the released model itself puts its prior odds' cut beyond almost every row it
            # would generate: no count spent on it, the quantile gets the whole ε_t
            cut = nb_threshold.select_quantile(counts, target, epsilon=epsilon, rng=rng)
            model.threshold_rule = "prior quantile"
            model.threshold = cut
            if has_step(p, CHECK):
                model.rows_check = nb_threshold.release_check(
                    counts, cut, epsilon=p.draw(CHECK).budget.eps, rng=rng)
            return model.threshold
        above = discrete_laplace_mechanism(nb_threshold.check_count(counts, prior_cut),
                                           sensitivity=1, epsilon=epsilon / 2, rng=rng)
        if nb_threshold.prior_cut_holds(float(above), target, counts.rows):
            cut = prior_cut
            model.threshold_rule = "prior odds"
        else:
            cut = nb_threshold.select_quantile(counts, target, epsilon=epsilon / 2, rng=rng)
            model.threshold_rule = "prior quantile"
    model.threshold = cut
    if has_step(p, CHECK):
        model.rows_check = nb_threshold.release_check(counts, cut,
                                                      epsilon=p.draw(CHECK).budget.eps, rng=rng)
    return model.threshold


def threshold_note(model: NaiveBayesModel) -> str | None:
    """One line for the user when the cut was not chosen by the balanced-accuracy mechanism."""
    if model.threshold_rule == "argmax":
        return ("note: the threshold step's ε is too small to choose a cut by accuracy at this "
                "n; the model predicts the most probable class (cut 0)")
    if model.threshold_rule == "prior quantile":
        return ("note: the threshold step's ε is too small to choose a cut by balanced "
                "accuracy at this n, and the released prior odds' cut was far from the prior's "
                "share of rows; it chose the cut nearest that share instead")
    if model.threshold_rule == "prior odds":
        return ("note: the threshold step's ε is too small to choose a cut by balanced "
                "accuracy at this n; the model cuts at the released prior odds (a noisy count "
                "of the rows above it agreed with the prior's share)")
    return None
