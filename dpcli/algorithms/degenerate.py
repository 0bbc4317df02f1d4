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

A grid synopsis (publish-grid) is judged from its released cells: which class
each cell predicts under the grid's decision rule, how much of the noisy mass
the cells predicting each class hold (a class predicted only in cells holding
under 0.1 % of the rows is *scarce*: in practice never predicted), and
whether the cells' class counts differ from what independence of the label
and the cell would give by more than the noise explains (a Monte Carlo test
on the released counts; a grid without signal is noise however it is used).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpcli.data.encode import EncodedBatch, TokenSets
from dpcli.data.schema import BinaryColumn, CategoricalColumn, NumericColumn, TokensColumn

NUMERIC_POINTS = 2049
#: log-odds that vary by less than this over the whole domain: one score for every input
CONSTANT_SPREAD = 1e-9
#: a class predicted only in cells holding less than this share of the noisy mass is scarce
SCARCE_MASS = 1e-3
#: a grid whose signal test gives a p-value above this is reported as indistinguishable
#: from noise (a false report on a grid with a real signal happens at most this often)
SIGNAL_LEVEL = 0.05
#: null replicates of the signal test (the smallest p-value it can give is 1/(SIGNAL_DRAWS+1))
SIGNAL_DRAWS = 199
SIGNAL_STOP = 10           # replicates at or above the observed statistic: p > SIGNAL_LEVEL
SIGNAL_PILOT = 20          # replicates before stopping on a far statistic (1/21 < SIGNAL_LEVEL)
SIGNAL_MARGIN = 10.0       # ... beyond this many of their standard deviations
SIGNAL_NORMAL_CELLS = 1000  # grids from this many cells may stop so (draws cost there)
#: a cut predicting one class on all but this share of the training rows is one-class
ONE_CLASS_SHARE = 0.001
#: a released cut beyond this |log-odds| (P = 1e-4 or 1 − 1e-4 at the cut): the model's
#: probabilities are far from its decision, so its score is near 0 (or 1) on most rows
SATURATED_CUT = float(np.log(1e4))


def one_class_on_rows(predicted_positive: float, n_rows: int, halfwidth: float = 0.0) -> str | None:
    """"negative"/"positive" when a released count of rows predicted positive, widened by
    its noise's ``halfwidth``, reaches (almost) none or (almost) all of the ``n_rows`` rows
    (post-processing of the released count); ``EITHER`` when the noise spans both ends (one
    class may take every row, and the count cannot tell which: naming the nearer end named
    the wrong one); None otherwise or without rows."""
    if not n_rows:
        return None
    lo, hi = ONE_CLASS_SHARE * n_rows, (1 - ONE_CLASS_SHARE) * n_rows
    near_none = predicted_positive - halfwidth <= lo
    near_all = predicted_positive + halfwidth >= hi
    if near_none and near_all:
        return EITHER
    return "negative" if near_none else "positive" if near_all else None


#: :func:`one_class_on_rows` when the released count's noise spans both ends
EITHER = "either (the noise cannot tell which)"


def one_class_words(side: str) -> str:
    """How a message says which way the rows go: "(almost) every row" / "(almost) no row"
    positive, or that one class may take them all."""
    if side == "positive":
        return "predict (almost) every row positive"
    if side == "negative":
        return "predict (almost) no row positive"
    return "predict (almost) every row in one class, and the noise cannot tell which"


@dataclass(frozen=True)
class RowsCheck:
    """A released count of the training rows a model predicts positive.

    ``predicted_positive``: the count at the model's cut plus discrete Laplace
    (Δ = 1 under replace-one) at ``epsilon``; ``halfwidth`` the 95 % half-width
    of that noise; ``rows`` the public n. The verdict is post-processing.
    """

    predicted_positive: int
    rows: int
    halfwidth: float
    epsilon: float

    @property
    def one_class(self) -> str | None:
        return one_class_on_rows(self.predicted_positive, self.rows, self.halfwidth)

    def to_json(self) -> dict[str, Any]:
        return {"released": "training rows predicted positive at the cut (discrete Laplace, "
                            "Δ = 1)", "epsilon": self.epsilon,
                "predicted_positive": self.predicted_positive, "rows": self.rows,
                "noise_halfwidth_95": self.halfwidth,
                "share_predicted_positive": (self.predicted_positive / self.rows
                                             if self.rows else None),
                "one_class": self.one_class}


@dataclass(frozen=True)
class Verdict:
    """What the released model can output over the declared domain."""

    classes: tuple[str, ...]
    log_odds: tuple[float, float]   # min and max over the domain, of class 1 against class 0
    never: tuple[str, ...]          # classes no input in the domain is predicted
    scarce: tuple[str, ...] = ()    # classes predicted only where under 0.1 % of rows fall
    signal_p: float | None = None   # grids: p-value of "the cells carry no class signal"
    #: a spread below this is reported; a model may ask for a wider one (near-constant)
    spread_floor: float = CONSTANT_SPREAD
    #: a released count of the training rows predicted positive (naive Bayes' check)
    on_rows: RowsCheck | None = None
    #: the model's released decision cut on the class-1 log-odds (0: the argmax)
    cut: float = 0.0

    @property
    def saturated(self) -> bool:
        """The released cut sits where the model's probability is below 1e-4 (or above
        1 − 1e-4): its score, a probability, is then near-constant where it decides."""
        return abs(self.cut) > SATURATED_CUT

    @property
    def constant(self) -> bool:
        return self.log_odds[1] - self.log_odds[0] < self.spread_floor

    @property
    def no_signal(self) -> bool:
        return self.signal_p is not None and self.signal_p > SIGNAL_LEVEL

    @property
    def one_class_on_rows(self) -> str | None:
        return None if self.on_rows is None else self.on_rows.one_class

    @property
    def degenerate(self) -> bool:
        return (self.constant or bool(self.never) or bool(self.scarce) or self.no_signal
                or self.one_class_on_rows is not None or self.saturated)

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
        if self.scarce:
            parts.append(f"class {' or '.join(map(repr, self.scarce))} is predicted only in "
                         f"cells holding under {SCARCE_MASS:.1%} of the rows")
        side = self.one_class_on_rows
        if side is not None and not self.constant and not self.never:
            r = self.on_rows
            assert r is not None
            parts.append(f"by the released count of training rows predicted positive "
                         f"({r.predicted_positive:,} ± {r.halfwidth:,.0f} at 95 %, of "
                         f"{r.rows:,}) it may {one_class_words(side)}")
        if self.saturated and not self.constant:
            p = 0.5 * (1 + float(np.tanh(self.cut / 2)))   # σ(cut) without overflow
            parts.append(f"its probabilities are uncalibrated: it decides at log-odds "
                         f"{self.cut:.3g} (P(class {self.classes[1]!r}) = {p:.2g}), so its score "
                         f"is near {'0' if self.cut < 0 else '1'} on most rows (rank and decide "
                         f"by its class or log-odds, not by the probability)")
        if self.no_signal and not self.constant:
            parts.append(f"its class counts are indistinguishable from noise (signal test "
                         f"p = {self.signal_p:.2f})")
        return ("degenerate model: " + "; ".join(parts) + ". Either the noise at this ε "
                "and n drowns what the data could tell (more ε, fewer columns or a coarser "
                "model help) or the class is rare (rank by the score instead of the class); "
                "the model file records this under 'degeneracy'")

    def to_json(self) -> dict[str, Any]:
        lo, hi = self.log_odds
        out = {"checked": "over the declared domain, from the released parameters",
               "degenerate": self.degenerate, "constant_score": self.constant,
               "never_predicted": list(self.never), "log_odds_range": [lo, hi]}
        if self.cut:
            out |= {"decision_log_odds": self.cut, "uncalibrated_score": self.saturated}
        if self.on_rows is not None:
            out |= {"on_training_rows": self.on_rows.to_json(),
                    "one_class_on_rows": self.one_class_on_rows}
        if self.signal_p is not None:
            out |= {"scarce_predicted": list(self.scarce), "signal_p_value": self.signal_p,
                    "no_signal": self.no_signal}
        return out


def check(model: Any) -> Verdict | None:
    """The verdict for a binary naive Bayes or logistic regression model (None otherwise)."""
    schema = model.schema
    if len(schema.label.classes) != 2:
        return None
    log_odds = _log_odds_of(model)
    base = {name: _first(schema.column(name)) for name in model.columns}
    base_value = float(log_odds(_batch(base, 1))[0])
    lo = hi = base_value
    for name in model.columns:
        col = schema.column(name)
        if isinstance(col, TokensColumn):
            gains = log_odds(_batch({**base, name: _singletons(col)},
                                    len(col.vocabulary))) - base_value
            r = col.max_per_row or len(gains)
            ordered = np.sort(gains)
            hi += float(np.clip(ordered[::-1][:r], 0, None).sum())
            lo += float(np.clip(ordered[:r], None, 0).sum())
            continue
        values = _candidates(col)
        batch = _batch({**base, name: values}, len(values))
        change = log_odds(batch) - base_value
        hi += float(change.max())
        lo += float(change.min())
    classes = tuple(schema.label.classes)
    # a model with a released decision threshold (naive Bayes', validate's) predicts class 1
    # above it, not above 0: it is judged at that cut
    cut = float(getattr(model, "decision_log_odds", 0.0))
    never = tuple(c for c, unreachable in ((classes[1], hi <= cut), (classes[0], lo > cut))
                  if unreachable)
    return Verdict(classes, (lo, hi), never,
                   spread_floor=float(getattr(model, "near_constant_spread", CONSTANT_SPREAD)),
                   on_rows=getattr(model, "rows_check", None), cut=cut)


def check_cells(model: Any) -> Verdict | None:
    """The verdict for a grid synopsis used as a histogram classifier (binary labels only).

    Every cell of the grid is some input of the declared domain (the nodes cover
    every declared value), so the outputs over the domain are exactly the
    cells' scores and decisions, plus the prior's when a declared value falls
    in no node. Reads only the released counts: free.
    """
    schema = model.schema
    if len(schema.label.classes) != 2:
        return None
    from dpcli.algorithms.predictable import grid_decisions

    counts = model.counts
    share, decided, mass = grid_decisions(model)   # evaluate's exact zero columns use it too
    log_odds = np.log(np.maximum(share[:, 1], 1e-300)) - np.log(np.maximum(share[:, 0], 1e-300))
    pos = schema.label.positive_index
    pos = 1 if pos is None else pos
    classes = tuple(schema.label.classes)
    by_side = {pos: 1, 1 - pos: 0}          # label code -> (negative, positive) side
    never = tuple(c for code, c in enumerate(classes) if not (decided == by_side[code]).any())
    total = max(float(mass.sum()), 1.0)
    scarce = tuple(c for code, c in enumerate(classes) if c not in never
                   and mass[decided == by_side[code]].sum() < SCARCE_MASS * total)
    scale = float(model.payload.get("noise_scale", 0.0))
    return Verdict(classes, (float(log_odds.min()), float(log_odds.max())), never, scarce,
                   signal_p_value(counts, scale))


def signal_p_value(counts: np.ndarray, noise_scale: float, draws: int = SIGNAL_DRAWS) -> float:
    """p-value of "the label is independent of the cell" given released noisy counts.

    ``counts`` are (cells, 2) counts released with discrete Laplace noise of
    scale ``noise_scale`` and clamped at 0. The statistic is Pearson's,
    with each cell's variance widened by the noise's:
    Σ_k (O_k,pos − R_k·p)² / (R_k·p·(1 − p) + v), R_k a cell's total, p the
    positive share, v the noise variance. Its null distribution is simulated:
    positives drawn binomially in each cell at the overall share, the same
    noise added and clamped. Only released values are used, so the test is
    post-processing; its generator is fixed (the same counts give the same
    p-value) and shares nothing with any release's noise. Using the noisy
    totals as the null's cell sizes adds noise to the null's replicates, so the
    test errs towards reporting "no signal" on a weak grid, never towards
    hiding it. It stops early where the decision is settled (comments below).
    """
    counts = np.asarray(counts, dtype=float)
    rows = counts.sum(axis=1)
    n = rows.sum()
    if counts.shape[0] < 2 or n <= 0 or counts[:, 1].sum() <= 0 or counts[:, 0].sum() <= 0:
        return 1.0
    t = float(np.exp(-1.0 / noise_scale)) if noise_scale > 0 else 0.0
    variance = 2.0 * t / (1.0 - t) ** 2

    def statistic(c: np.ndarray) -> np.ndarray:
        r = c.sum(axis=-1)
        p = c[..., 1].sum(axis=-1, keepdims=True) / np.maximum(r.sum(axis=-1, keepdims=True), 1)
        return (((c[..., 1] - r * p) ** 2) / (r * p * (1 - p) + variance + 1e-12)).sum(axis=-1)

    observed = float(statistic(counts))
    rng = np.random.default_rng(0)
    size = np.rint(rows).astype(np.int64)
    share = counts[:, 1].sum() / n
    # Stopping early (a 150,000-cell grid took 36–90 s for 199 draws, docs/scale.md):
    # - Besag and Clifford's sequential p-value: when the SIGNAL_STOP-th replicate reaches
    #   the observed statistic, at replicate l, SIGNAL_STOP/l is a valid p-value above
    #   SIGNAL_LEVEL: the decision the full run would reach;
    # - a large grid's statistic beyond SIGNAL_MARGIN standard deviations of the first
    #   replicates, none of which reached it, ends the test with 1/(SIGNAL_PILOT + 1): the
    #   Monte Carlo p-value of the replicates it has drawn, valid without any normal
    #   approximation (under the null, the chance that the observed statistic exceeds the
    #   first k ≥ SIGNAL_PILOT exchangeable replicates is 1/(k + 1), and a later look only
    #   narrows that event), and below SIGNAL_LEVEL: the full run's decision. The margin
    #   only says when stopping is worth it; it proves nothing.
    exceed = done = 0
    seen: list[np.ndarray] = []
    chunk = max(1, min(draws, 2_000_000 // size.size))   # bounded memory on large grids
    if chunk < SIGNAL_PILOT and size.size >= SIGNAL_NORMAL_CELLS:
        # chunks that end exactly at the pilot's SIGNAL_PILOT replicates: with 18-replicate
        # chunks the margin check first ran after 36 (the test's second on publish-grid at
        # 5·10⁶ rows: 1.1 s of one thread)
        chunk = SIGNAL_PILOT // -(-SIGNAL_PILOT // chunk)
    for start in range(0, draws, chunk):
        m = min(chunk, draws - start)
        positive = rng.binomial(np.broadcast_to(size, (m, size.size)), share)
        # filled and clamped in place, the draws in the same order: the same floats as a
        # stack, a sum and a clamped copy, without their copies of the replicates (a grid
        # grows with n: 1.3·10⁶ cells at 5·10⁷ rows, docs/scale.md)
        null = np.empty((m, size.size, 2))
        null[..., 0] = size - positive
        null[..., 1] = positive
        del positive
        if t > 0:
            noise = rng.geometric(1 - t, null.shape)
            noise -= rng.geometric(1 - t, null.shape)
            null += noise
            del noise
        stats = statistic(np.maximum(null, 0.0, out=null))
        hits = np.cumsum(stats >= observed) + exceed
        if hits[-1] >= SIGNAL_STOP:   # the SIGNAL_STOP-th hit's replicate ends the test
            return SIGNAL_STOP / (done + 1 + int(np.argmax(hits >= SIGNAL_STOP)))
        exceed, done = int(hits[-1]), done + m
        seen.append(stats)
        if exceed == 0 and done >= SIGNAL_PILOT and size.size >= SIGNAL_NORMAL_CELLS:
            pilot = np.concatenate(seen)
            if observed > pilot.mean() + SIGNAL_MARGIN * pilot.std(ddof=1):
                return 1 / (SIGNAL_PILOT + 1)
    return (1 + exceed) / (draws + 1)


def _log_odds_of(model: Any) -> Callable[[EncodedBatch], np.ndarray]:
    """:func:`_log_odds` of ``model`` as a function of the batch. A naive Bayes model's is
    nb_threshold's Scorer (negated for a positive class 0): the same floats, bit for bit,
    with each column's table built once rather than once per batch (:func:`check` scores a
    batch per column: ~15 tables × 15 batches were 8 ms of every train-nb run, twice)."""
    from dpcli.algorithms.naive_bayes import NaiveBayesModel

    if not isinstance(model, NaiveBayesModel):
        return lambda batch: _log_odds(model, batch)
    from dpcli.algorithms.nb_threshold import Scorer, positive_code

    scorer = Scorer(model)   # log P(positive | x) − log P(other | x)
    if positive_code(model) == 1:
        return scorer
    return lambda batch: -scorer(batch)   # −(a − b) is b − a exactly


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


# ------------------------------------------------------------------ boosted ensembles (brc)

#: public points drawn from the declared domain to probe an ensemble (data-free, fixed seed)
ENSEMBLE_POINTS = 4096
#: calibrated scores spread less than this over the probe points: a near-constant score
NEAR_CONSTANT_SCORE = 1e-3
#: a class given to less than this share of the training records (by the released histogram)
RARE_SHARE = 0.01


@dataclass(frozen=True)
class EnsembleVerdict(Verdict):
    """What a released brc ensemble outputs: over points drawn from the declared domain, and
    on the training records as the released (noisy) margin histogram shows them."""

    score_range: tuple[float, float] = (0.0, 1.0)   # calibrated score over the probe points
    training_share: float | None = None             # share predicted positive (noisy histogram)
    rare: tuple[str, ...] = ()                       # classes given to < 1% of training records

    @property
    def near_constant(self) -> bool:
        return self.score_range[1] - self.score_range[0] < NEAR_CONSTANT_SCORE

    @property
    def never_counts(self) -> bool:
        """The probe's "never predicted" decides only without the released histogram: points
        uniform on wide declared bounds can all fall where no record lies, while the
        histogram says what the training records get (a model predicting 'Yes' for 60 % of
        them was flagged for the probe alone)."""
        return bool(self.never) and self.training_share is None

    @property
    def degenerate(self) -> bool:
        return self.constant or self.near_constant or self.never_counts or bool(self.rare)

    def problem(self) -> str | None:
        if not self.degenerate:
            return None
        parts = []
        if self.constant or self.near_constant:
            lo, hi = self.score_range
            parts.append(f"its score is near-constant (from {lo:.4g} to {hi:.4g} over "
                         f"{ENSEMBLE_POINTS:,} points of the declared domain)")
        if self.never_counts:
            parts.append(f"none of {ENSEMBLE_POINTS:,} points of the declared domain is "
                         f"predicted class {' or '.join(map(repr, self.never))}")
        if self.rare and self.training_share is not None:
            share = self.training_share
            parts.append(f"by the released margin histogram it predicts class "
                         f"{' or '.join(map(repr, self.rare))} for "
                         f"{min(share, 1 - share):.1%} of the training records")
        return ("degenerate model: " + "; ".join(parts) + ". The noise at this ε and n may "
                "drown the rounds' errors (more ε, or fewer rounds) or the class is rare "
                "(rank by the score instead of the class); the model file records this "
                "under 'degeneracy'")

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        out.update(checked=(f"the released ensemble on {ENSEMBLE_POINTS:,} points drawn from "
                            "the declared domain (fixed seed, data-free), and the released "
                            "margin histogram of the training records"),
                   degenerate=self.degenerate, near_constant_score=self.near_constant,
                   score_range=list(self.score_range),
                   training_share_predicted_positive=self.training_share,
                   rare_on_training=list(self.rare))
        return out


def check_ensemble(model: Any, points: int = ENSEMBLE_POINTS, seed: int = 0) -> Verdict | None:
    """The verdict for a released brc ensemble (binary labels only). Post-processing, free.

    The ensemble F = Σ α_t h_t is a sum of step functions, so its range over
    the domain has no per-column closed form; it is probed instead on
    ``points`` inputs drawn uniformly from the declared domain (numeric
    columns uniform on [lower, upper], one declared level per coded column)
    with a fixed seed: public, data-free. "Never predicted" is therefore
    about those points. The released margin histogram (noisy counts of the
    training records by margin bin and class, clamped at 0) also tells which
    share of the training records falls above the decision threshold: a
    class given to under 1% of them is flagged too.
    """
    schema = model.schema
    if len(schema.label.classes) != 2:
        return None
    rng = np.random.default_rng(seed)
    columns: dict[str, Any] = {}
    for name in model.columns:
        col = schema.column(name)
        if isinstance(col, NumericColumn):
            columns[name] = rng.uniform(col.lower, col.upper, size=points)
        elif isinstance(col, CategoricalColumn):
            columns[name] = rng.integers(0, len(col.levels), size=points).astype(np.int32)
        elif isinstance(col, BinaryColumn):
            columns[name] = rng.integers(0, 2, size=points).astype(np.int8)
    batch = EncodedBatch(points, np.zeros(points, dtype=np.int32), columns)
    proba, codes = model.classify(batch)
    pos = schema.label.positive_index
    pos = 1 if pos is None else pos
    score = proba[:, pos]
    cal = model.calibration
    margin = model.margin(batch)
    z = cal.a * (margin - cal.threshold)   # log-odds against the decision: > 0 is positive
    classes = tuple(schema.label.classes)
    never = tuple(c for code, c in enumerate(classes) if not np.any(codes == code))
    share: float | None = None
    rare: tuple[str, ...] = ()
    if cal.counts:
        edges = np.asarray(cal.edges)
        counts = np.maximum(np.asarray(cal.counts, dtype=np.float64), 0).sum(axis=1)
        centres = (edges[:-1] + edges[1:]) / 2
        if counts.sum() > 0:
            share = float(counts[centres > cal.threshold].sum() / counts.sum())
            rare = tuple(c for c, s in ((classes[pos], share), (classes[1 - pos], 1 - share))
                         if s < RARE_SHARE)
    return EnsembleVerdict(classes, (float(z.min()), float(z.max())), never,
                           score_range=(float(score.min()), float(score.max())),
                           training_share=share, rare=rare)
