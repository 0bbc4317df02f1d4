"""Private logistic regression with a private choice of its regulariser and class cut.

What a default run does (issue 20; docs/algorithms/logistic-regression.md), all decided from public
facts (n, ε, the declared width d) before the charge (:func:`decide`):

* the regulariser: ``lambda: auto`` trains once at λ0 = 4·√d/(ε·n)
  (:func:`auto_lambda`) on every row, unless the grid (the spec's, else the
  paper's) is both precise enough to search by stability (selection noise
  ≤ 1 % of the validation loss's range) and reaches down to 4·λ0.
  ``lambda: search`` always searches (the paper's procedure); a number trains
  at that λ. A data-driven choice at the grid's edge is flagged
  (:func:`grid_edge`).
* the class threshold: a share clip(1207/(N·ε), 1/20, 1/4) of ε
  (:func:`threshold_share`) releases a cut on wᵀx by the exponential
  mechanism over 4096 public candidates (:func:`choose_threshold`), so that
  a shrunk model still predicts both classes, and a noisy count of the rows
  above it (a one-class cut on the data is warned about);
  ``threshold_share: 0`` keeps the 0.5 cut.
* rows are held as a sparse CSR design (the one-hot blocks are mostly zeros).

Private tuning of a regulariser by stability: Chaudhuri & Vinterbo (NIPS 2013).

The learner is L2-regularised logistic regression trained privately
(objective perturbation by default, output perturbation on request:
:mod:`dpcli.mechanisms.erm`), on rows mapped into the unit ball by the
declared bounds. Given a grid Λ = (λ_1 … λ_k), a training set T (n rows)
and a disjoint validation set V (m rows):

``stability`` (the paper's Algorithms 1 and 2; ε1 = ε2 = ε/2 as in §5)
    trains h_i = F(T, λ_i, ε1, R_i) for every λ_i with independent noise
    R_i, scores each by q(h_i, V) = −(1/m) Σ_V g(y·wᵀx) with an L-Lipschitz
    loss g, releases only i* = argmax_i q(h_i, V) + Exp(mean 2β/ε2) with
    β = max(β1/n, β2/m), then retrains F(T, λ_i*, ε1, R) with fresh noise
    and releases that model. The k first models are never released.
    Privacy (Theorems 1, 2 and 4): with R held fixed, replacing one row of
    T moves q(h_i, V) by at most β1/n = 2L/(λ_min·n) (the fits are
    λ-strongly convex, so w moves by ≤ 2/(nλ), and g is L-Lipschitz on the
    unit ball); replacing one row of V moves it by at most β2/m. So every
    score has sensitivity β and the selection is ε2-DP
    (:func:`dpcli.mechanisms.noisy_max_exponential`); the retrain is
    ε1-DP; in all (ε1 + ε2, δ).

    δ: β2 must hold for the largest value one validation row's loss can
    take. The ramp loss min(1, max(0, 1 − z)) is bounded by 1 whatever w is,
    so β2 = 1 for every draw of the noise and δ = 0: the guarantee is pure
    ε-DP. The hinge and logistic losses grow with ‖w‖, which the noise can
    make large; dpcli bounds ‖w‖ on the event that every ‖R_i‖ is below its
    Gamma(d, 1) quantile at 1 − δ/k, and δ is the probability (≤ k·δ/k)
    that this fails — then the selection step has no guarantee.
    The paper's printed β2 for hinge, (1/λ_min)(1 + d·log(dk/δ)/(nε)), is
    re-derived here with the exact Gamma quantile and the loss's range on
    that event (hinge: min(2W, 1 + W); logistic: W, for ‖w‖ ≤ W).

The paper's baselines (§5), every one ε-DP because T and V are disjoint
(parallel composition, Theorem 5):

``alpha-split``  each λ_i trained on T with ε/k; i* drawn ∝ exp(−ε·e_i/2),
                 e_i the number of 0/1 errors of h_i on V (sensitivity 1);
                 h_i* released.
``data-split``   T cut into k equal parts by a random (data-free) permutation;
                 λ_i trained on part i with ε; selection as above.
``random``       i* uniform; λ_i* trained on T with ε. (The paper trains
                 all k first; releasing one chosen independently of the data
                 has the same distribution, so only that one is trained.)

Without a validation file, V is cut from the input by a public rule that
reads no value: row i (0-based, in file order) goes to V iff
splitmix64(seed·2^32 + i)/2^64 < fraction (:func:`validation_rows`). n and
m are then functions of the row count, the seed and the fraction: public.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse
from scipy.special import expit

from dpcli import params  # option tuples and limits: one definition (dpcli.params)
from dpcli.algorithms.inputs import Inputs, read_rows
from dpcli.budget import Budget, exact
from dpcli.data.encode import EncodedBatch
from dpcli.data.schema import NumericColumn, Schema, schema_from_dict, schema_to_dict
from dpcli.mechanisms import (
    Plan,
    PrivateFit,
    Step,
    discrete_laplace_mechanism,
    exponential_mechanism,
    noisy_max_exponential,
    objective_perturbation,
    output_perturbation,
)
from dpcli.mechanisms.erm import (
    GRADIENT_TOLERANCE,
    objective_constants,
    rounding_norm,
    weight_grid,
    weight_norm_bound,
)

KIND = "logistic_regression"
METHODS = params.VALIDATE_METHODS
SCORES = params.VALIDATE_SCORES
TRAINERS = params.VALIDATE_TRAINERS
LEARNERS = params.VALIDATE_LEARNERS
PAPER_GRID = (0.001, 0.112, 0.223, 0.334, 0.445, 0.556, 0.667, 0.778, 0.889, 1.0)
DEFAULT_DELTA = 1e-6          # used only by the unbounded (hinge, logistic) scores
MIN_DELTA = params.VALIDATE_MIN_DELTA
VALIDATION_FRACTION = 0.1
SPLIT_SEED = 0
MAX_GRID = params.VALIDATE_MAX_GRID
NOISY_SELECTION = 0.5        # warn above this mean selection noise (ramp scores span ≤ 1)
LIPSCHITZ = 1.0               # all three validation losses are 1-Lipschitz in the margin
#: the grid is searched privately only when the selection noise is at most this share of
#: the validation score's range (else λ0 is used): see :func:`decide`
SELECTION_NOISE_SHARE = 0.01
#: ``lambda: auto`` searches a grid only if its smallest λ is at most this multiple of λ0: a grid
#: wholly above it can only offer over-regularised models at this n. On 10⁶ resampled Carseats
#: rows (a tuning split) one fit at 4 λ0 lost 0.002–0.009 AUC to λ0, at 16 λ0 0.012–0.036
#: (benchmarks/results/validate_r8.md)
REACH = 4.0
THRESHOLD_CANDIDATES = 4096
#: the class threshold's share of ε is clip(SHARE_CONSTANT/(N·ε), MIN_SHARE, MAX_SHARE)
SHARE_CONSTANT = 1207
MIN_SHARE = 0.05
MAX_SHARE = params.VALIDATE_MAX_SHARE
THRESHOLD_FAILURE = 0.05      # the forecast error holds with probability 1 − this
PRIOR_PART = Fraction(1, 8)   # of the threshold's ε: the positive count behind the weights
CHECK_PART = Fraction(1, 8)   # of the threshold's ε: rows predicted positive at the cut
CUT_PART = 1 - PRIOR_PART - CHECK_PART   # of the threshold's ε: the exponential mechanism

TRAIN: dict[str, Callable[..., PrivateFit]] = {"objective": objective_perturbation,
                                               "output": output_perturbation}


@dataclass(frozen=True)
class ValidateConfig:
    """What to tune and how. ``delta`` None means: 0 for ramp, DEFAULT_DELTA otherwise."""

    grid: tuple[float, ...] = PAPER_GRID
    method: str = "stability"
    score: str = "ramp"
    trainer: str = "objective"
    delta: float | None = None
    validation_fraction: float = VALIDATION_FRACTION
    split_seed: int = SPLIT_SEED
    lam: float | str | None = None   # None: auto (λ0, or the grid when it pays); "search"
    threshold_share: float | None = None   # None: auto (:func:`threshold_share`)

    def __post_init__(self) -> None:
        if not self.grid or len(self.grid) > MAX_GRID:
            raise ValueError(f"grid needs 1 to {MAX_GRID} values")
        if any(not (math.isfinite(v) and v > 0) for v in self.grid):
            raise ValueError("every grid value (a regulariser λ) must be a finite number > 0")
        if len(set(self.grid)) != len(self.grid):
            raise ValueError("grid values must be distinct")
        for name, options in (("method", METHODS), ("score", SCORES), ("trainer", TRAINERS)):
            if getattr(self, name) not in options:
                raise ValueError(f"{name} must be one of {', '.join(options)}")
        if self.delta is not None and not MIN_DELTA <= self.delta < 1:
            raise ValueError(f"delta must be in [{MIN_DELTA:g}, 1)")
        if not 0 < self.validation_fraction < 1:
            raise ValueError("validation_fraction must be in (0, 1)")
        if self.lam is not None and self.lam != "search" and not (
                isinstance(self.lam, float | int) and math.isfinite(self.lam) and self.lam > 0):
            raise ValueError("lambda must be a finite number > 0, search or auto")
        if self.threshold_share is not None and not 0 <= self.threshold_share <= MAX_SHARE:
            raise ValueError(f"threshold_share must be in [0, {MAX_SHARE:g}] (or auto)")

    @property
    def k(self) -> int:
        return len(self.grid)

    @property
    def needs_delta(self) -> bool:
        """Only stability with an unbounded validation loss has a δ."""
        return self.method == "stability" and self.score != "ramp"

    @property
    def run_delta(self) -> float:
        if not self.needs_delta:
            return 0.0
        return DEFAULT_DELTA if self.delta is None else self.delta


# ------------------------------------------------------------------ scores


def validation_loss(score: str, margin: np.ndarray) -> np.ndarray:
    """g(z) at margins z = y·wᵀx: ramp min(1, max(0, 1 − z)), hinge, or logistic."""
    if score == "ramp":
        return np.clip(1.0 - margin, 0.0, 1.0)
    if score == "hinge":
        return np.maximum(0.0, 1.0 - margin)
    if score == "logistic":
        return np.logaddexp(0.0, -margin)
    raise ValueError(f"unknown validation score {score!r}")


def validation_score(score: str, w: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    """q(w, V) = −(1/m) Σ g(y·wᵀx): higher is better. Private: never released."""
    return float(-np.mean(validation_loss(score, y * (x @ w))))


def errors(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> int:
    """Number of 0/1 errors of sign(wᵀx) (ties to +1) on (x, y). Private."""
    return int(np.count_nonzero(np.where(x @ w >= 0, 1, -1) != y))


@dataclass(frozen=True)
class Stability:
    """Chaudhuri & Vinterbo's stability constants for one run (all public).

    q moves by ≤ beta1/n when a training row is replaced (same noise) and by
    ≤ beta2/m when a validation row is; the selection adds exponential
    noise of mean 2·beta/ε2, beta = max(beta1/n + 2τ/λ_min + √d·g, beta2/m): the
    paper's β plus the optimiser's tolerance τ (each fit is within τ/λ of
    the exact minimiser the paper's bound is about) and the rounding of the
    weights to their grid g (L = 1). ``weight_bound``
    is the ‖w‖ bound behind beta2 for an unbounded loss (None for ramp),
    holding except with probability ``delta``.
    """

    beta1: float
    beta2: float
    beta: float
    delta: float
    weight_bound: float | None = None


def stability_constants(config: ValidateConfig, n: int, m: int, d: int,
                        epsilon_train: float) -> Stability:
    """β1 = 2L/λ_min; β2 = 1 for ramp, else the loss's range for ‖w‖ ≤ W (see the module)."""
    lam_min = min(config.grid)
    beta1 = 2 * LIPSCHITZ / lam_min
    # the optimiser stops within τ/λ of the exact minimiser, on each side of the neighbours
    slack = 2 * LIPSCHITZ * GRADIENT_TOLERANCE / lam_min
    # released weights are rounded to their public grid (float safety): with the noise held
    # fixed, rounding two neighbours' fits can pull them √d·g further apart
    slack += LIPSCHITZ * math.sqrt(d) * max(_grid_of(config.trainer, n, lam, epsilon_train, d)
                                            for lam in config.grid)
    delta = config.run_delta
    bound = None
    if config.score == "ramp":
        beta2 = 1.0
    else:
        # every R_i has ‖R_i‖ ≤ r except with probability δ/k each: δ in all (union bound)
        from scipy.stats import gamma  # imported here: scipy.stats costs ~0.3 s at start-up

        r = float(gamma.isf(delta / config.k, d))
        bound = max(weight_norm_bound(config.trainer, n, lam, epsilon_train, r)
                    + rounding_norm(config.trainer, n, lam, epsilon_train, d, r)
                    + GRADIENT_TOLERANCE / lam for lam in config.grid)
        beta2 = min(2 * bound, 1 + bound) if config.score == "hinge" else bound
    beta = max(beta1 / n + slack, beta2 / m)
    if not math.isfinite(beta):
        raise ValueError(f"the stability bound is not finite (δ = {delta:g} is too small)")
    return Stability(beta1, beta2, beta, delta, bound)


def _grid_note(config: ValidateConfig, n: int, epsilon: float, d: int) -> str:
    """The released weights' grid for the plan: g = weight_grid(n, λ (+Δ), d) per λ."""
    grids = sorted({_grid_of(config.trainer, n, lam, epsilon, d) for lam in config.grid})
    shown = ", ".join(f"2^{math.log2(g):.0f}" for g in grids)
    return f"weights released on grid g ∈ {{{shown}}} (float-safe)"


def _grid_of(trainer: str, n: int, lam: float, epsilon: float, d: int) -> float:
    """The weight grid of a fit (:func:`dpcli.mechanisms.erm.weight_grid`), public."""
    extra = objective_constants(epsilon, n, lam)[1] if trainer == "objective" else 0.0
    return weight_grid(n, lam + extra, d)


def selection_noise_mean(config: ValidateConfig, epsilon: float, n: int, m: int, d: int
                         ) -> float:
    """2β/ε2, the mean of the noise added to each score, for a stability run at ``epsilon``.

    With ε1 = ε2 = ε/2 and β1/n dominant this is 8/(λ_min·n·ε): the smallest
    λ on the grid sets the price of the whole grid.
    """
    return 2 * stability_constants(config, n, m, d, epsilon / 2).beta / (epsilon / 2)


# ------------------------------------------------------------------ λ and the ε split


def auto_lambda(n: int, epsilon: float, d: int) -> float:
    """λ0 = 4·√d/(ε·n): the regulariser used when the data cannot choose one (public facts).

    Derived from the excess-risk analysis of objective perturbation
    (Chaudhuri, Monteleoni & Sarwate 2011, §6): to be within ε_g of a
    comparator w0 they take λ = ε_g/‖w0‖² and need
    n ≳ ‖w0‖·d/(ε_g·ε) (up to log factors), i.e. at a given n the best
    reachable λ is ∝ d/(n·ε·‖w0‖). On dpcli's unit-ball design every column
    is divided by √(1 + columns) ≈ √d, so a comparator whose per-column
    effect on the log-odds is of order one has ‖w0‖ of order √d: λ ∝ √d/(nε).
    The constant 4 is where the noise stops dominating the margins: the
    noise b (‖b‖ ≈ 2d/ε, uniform direction) moves the minimiser by
    ‖b‖/(nλ) in norm, and a unit-norm row's margin by about 1/√d of that,
    2√d/(ε·n·λ), which is ½ at λ0. At λ0 the objective-perturbation Δ of
    CMS Algorithm 2 is 0: c/(nλ0) = ε/(16√d), so ε′ ≥ 7ε/8.
    No record is read: n (replace-one), ε and d (from the spec) are public.
    """
    return 4 * math.sqrt(d) / (epsilon * n)


def wide_columns(schema: Any, columns: Sequence[str], rows: int,
                 epsilon: float) -> tuple[str, ...]:
    """The categorical columns a default design leaves out: those whose declared levels L
    exceed both the width of the other columns' design and √(rows·ε) (public facts only).

    Why: λ0 (:func:`auto_lambda`) and the noise grow with √d, and a one-hot block adds its
    L levels to d whether or not the data fill them. A block wider than the rest of the
    design more than doubles d, so it shrinks every other column's weight by λ0's √2 or
    more, while its own levels each rest on about n/L rows. Below √(n·ε) levels the rows
    per level and the noise per weight keep it worth its width. On nycflights13's arrival
    delay (160,400 tuning rows; tail number 3,323 levels, destination 1,458 against a rest
    of 26) leaving both out raised the validation AUC from 0.595 / 0.621 / 0.636 to
    0.650 / 0.651 / 0.651 at ε 0.5 / 1 / 2 (3 seeds each, benchmarks/results/
    validate_r9.md). Columns named in ``validate.columns`` or ``--columns`` are always
    kept: naming them is the user's decision.
    """
    from dpcli.algorithms.inputs import design_width

    kept = list(columns)
    coded = [c for c in columns if schema.column(c).kind == "categorical"]
    for c in sorted(coded, key=lambda c: -len(schema.column(c).levels)):   # widest first
        rest = design_width(schema, [o for o in kept if o != c]) - 1
        if len(kept) > 1 and len(schema.column(c).levels) > max(rest, math.sqrt(rows * epsilon)):
            kept.remove(c)
    return tuple(c for c in columns if c not in kept)


def grid_edge(grid: Sequence[float], index: int | None) -> str | None:
    """"smallest"/"largest" when the chosen λ is the grid's smallest/largest value (the best λ
    may lie beyond it); None otherwise, for a grid of one value, or when nothing was chosen."""
    if index is None or len(grid) < 2:
        return None
    lam = grid[index]
    if lam == min(grid):
        return "smallest"
    if lam == max(grid):
        return "largest"
    return None


def threshold_share(n_all: int, epsilon: float) -> float:
    """The class threshold's share of ε: clip(1207/(N·ε), 1/20, 1/4), rounded to 1/1000.

    Why 1207: the exponential mechanism over K = 4096 candidates with a
    sensitivity-1 utility at ε_em picks, with probability ≥ 1 − β, a
    candidate within (2/ε_em)(ln K + ln 1/β) of the best. With β = 0.05 and
    ε_em = ¾ of the share (⅛ buys the positive count behind the weights, ⅛ the
    count of rows above the released cut)
    that is 30.17/(share·ε); asking for ≤ 2.5 % of the N rows gives
    share = 30.17/(0.025·N·ε) = 1207/(N·ε). The clip keeps at least 5 % of ε
    for the cut and at most 25 % away from the model. N and ε are public.
    """
    share = min(MAX_SHARE, max(MIN_SHARE, SHARE_CONSTANT / (n_all * epsilon)))
    return round(share * 1000) / 1000


def threshold_error(n_all: int, epsilon_threshold: float) -> float:
    """The forecast error of the threshold's utility, as a share of N (holds w.p. 0.95)."""
    if epsilon_threshold <= 0:
        return 0.0
    eps_em = float(epsilon_threshold) * float(CUT_PART)
    return 2 * (math.log(THRESHOLD_CANDIDATES) + math.log(1 / THRESHOLD_FAILURE)) / (
        eps_em * n_all)


@dataclass(frozen=True)
class Decision:
    """How a run spends its ε, decided from public facts before the charge.

    ``mode``: "given" (validate.lambda is a number), "auto" (λ0: the grid's
    selection noise is too large), or "select" (the grid is searched by
    ``config.method``). ``epsilon_model`` trains (and selects), the rest
    ``epsilon_threshold`` picks the class threshold (0: the 0.5 cut).
    """

    mode: str
    lam: float | None
    reason: str
    share: Fraction
    epsilon_model: Fraction
    epsilon_threshold: Fraction
    n_model: int


def decide(config: ValidateConfig, epsilon: float | Fraction, n: int, m: int, d: int,
           n_all: int, split: bool = True) -> Decision:
    """The public decision of a run (:class:`Decision`).

    ``n``/``m``: training / validation rows if the grid is searched; ``n_all``:
    every row the threshold step reads; ``split``: V was cut from the input
    (when no grid is searched the model is then trained on all of it).
    With ``lambda: auto`` and method stability the grid (the spec's, or the
    paper's) is searched only when (1) its selection noise (mean 2β/ε2) is at most 1 % of
    the validation loss's range (β2: 1 for ramp) — for the paper's grid and
    the ramp score that is n·ε ≳ 800,000 — and (2) its smallest λ is at most
    REACH × λ0, so that the search can reach the regularisation this n needs
    (a grid λ0 × (1/4 … 16) was tried: its noise, 8/(λ_min·n·ε), is the same at
    every n and ε and passes (1) only on designs ~800,000 columns wide).
    Otherwise λ0 (:func:`auto_lambda`) is used: below (1) the noise is as
    large as the score differences it must separate (the issue saw the grid
    choice follow the seed, not the data, at n = 1,000–5,000); without (2) every
    candidate is over-regularised (a tester's 1.6·10⁶ rows at ε = 1: the
    paper grid's 0.001, 95 × λ0, lost 0.05 AUC to λ0). λ0 is not searched
    against the grid: its score's sensitivity 2/(λ0·n) would set the noise.
    """
    total = exact(epsilon)
    raw = config.threshold_share
    share = Fraction(round((threshold_share(n_all, float(total)) if raw is None else raw)
                           * 1000), 1000)
    eps_thr = total * share
    eps_model = total - eps_thr
    whole = n + m if split else n
    if isinstance(config.lam, float | int):
        return Decision("given", float(config.lam), "validate.lambda", share, eps_model, eps_thr,
                        whole)
    if config.lam == "search":
        return Decision("select", None, "lambda: search", share, eps_model, eps_thr, n)
    if config.method != "stability":
        return Decision("select", None, f"the {config.method} baseline", share, eps_model,
                        eps_thr, n)
    lam = auto_lambda(whole, float(eps_model), d)
    named = "the grid"
    c = stability_constants(config, n, m, d, float(eps_model) / 2)
    noise = selection_noise_mean(config, float(eps_model), n, m, d)
    low = min(config.grid)
    if noise > SELECTION_NOISE_SHARE * c.beta2:
        why = (f"{named}'s selection noise {noise:.3g} exceeds {SELECTION_NOISE_SHARE:g} of "
               f"the score range ({c.beta2:g}) at n = {n:,}, ε = {float(eps_model):.3g}")
    elif low > REACH * lam:
        why = (f"{named}'s smallest λ {low:.3g} is {low / lam:.0f} × λ0 at n = {whole:,}, "
               f"ε = {float(eps_model):.3g} (more than {REACH:g} ×): every candidate is "
               "over-regularised for this many rows")
    else:
        return Decision("select", None, f"{named}: selection noise {noise:.3g} ≤ "
                        f"{SELECTION_NOISE_SHARE:g} of the score range {c.beta2:g}, smallest "
                        f"λ {low:.3g} ≤ {REACH:g} × λ0", share, eps_model, eps_thr, n)
    return Decision("auto", lam, f"{why}: λ0 = 4√d/(ε·n) = {lam:.3g} instead",
                    share, eps_model, eps_thr, whole)


# ------------------------------------------------------------------ the class threshold


def threshold_utility(logits: np.ndarray, y: np.ndarray, candidates: np.ndarray,
                      weights: tuple[float, float]) -> np.ndarray:
    """u(t) = a₊·#{y = +1, z > t} + a₋·#{y = −1, z ≤ t} for each candidate t. Private.

    With a₊, a₋ ∈ [0, 1] every row adds a value in [0, 1] to each u(t), so
    replacing one row moves every u(t) by at most 1: Δu = 1 (replace-one).
    With a₊ ∝ 1/p, a₋ ∝ 1/(1 − p) it would be balanced accuracy up to a factor;
    :func:`class_weights` uses the square roots of those ratios.
    """
    pos = np.sort(logits[y > 0])
    neg = np.sort(logits[y <= 0])
    true_pos = len(pos) - np.searchsorted(pos, candidates, side="right")
    true_neg = np.searchsorted(neg, candidates, side="right")
    return weights[0] * true_pos + weights[1] * true_neg


def class_weights(noisy_positives: int, n_all: int) -> tuple[float, float]:
    """(a₊, a₋) = (min(1, √(q/p)), min(1, √(p/q))), p = the released positive share (clipped
    to [1/N, 1 − 1/N]), q = 1 − p: post-processing of the released count.

    Halfway (geometrically) between accuracy (a₊ = a₋ = 1) and balanced accuracy
    (a₊ ∝ 1/p, a₋ ∝ 1/q). Chosen on holdouts cut from the suite's *train* files
    (benchmarks/results/validate_lambda.md): balanced weights pushed accuracy below the
    majority class on Adult, Default and Fair; plain accuracy gave the lowest balanced
    accuracy; the square root kept accuracy above the majority with balanced accuracy
    close to the balanced optimum, and still predicts a rare class (p = 0.06: a₋ = 0.25).
    """
    p = min(max(noisy_positives / n_all, 1 / n_all), 1 - 1 / n_all) if n_all > 1 else 0.5
    q = 1 - p
    return min(1.0, math.sqrt(q / p)), min(1.0, math.sqrt(p / q))


@dataclass(frozen=True)
class Threshold:
    """A released class threshold: predict the positive class iff wᵀx > logit."""

    logit: float
    epsilon: float
    noisy_positives: int | None = None
    weights: tuple[float, float] | None = None
    candidates: tuple[float, float, int] | None = None   # lo, hi, count (public)
    noisy_predicted_positive: int | None = None   # rows above the cut, + discrete Laplace
    n_rows: int | None = None

    @property
    def check_halfwidth(self) -> int:
        """The 95 % half-width of the noise on the released count of rows above the cut
        (public: its ε and Δ = 1)."""
        from dpcli.algorithms.nb_threshold import halfwidth

        return halfwidth(float(exact(self.epsilon) * CHECK_PART))

    def one_class(self) -> str | None:
        """"positive"/"negative" when the released count, widened by its noise's 95 %
        half-width, cannot rule out that the cut gives (almost) one class on the rows it
        was chosen on (post-processing of the released count). Without the width a count
        a little above 0.1 % of the rows passed as two-class when its noise was larger than
        that: the suite saw one-class models on flights and digits released silently."""
        from dpcli.algorithms.degenerate import one_class_on_rows

        if self.noisy_predicted_positive is None or not self.n_rows or not self.epsilon:
            return None
        return one_class_on_rows(self.noisy_predicted_positive, self.n_rows,
                                 self.check_halfwidth)

    def to_json(self) -> dict[str, Any]:
        if self.epsilon == 0:
            return {"logit": 0.0, "epsilon": 0.0, "rule": "the 0.5 cut (threshold_share 0)"}
        assert self.candidates is not None and self.weights is not None
        lo, hi, k = self.candidates
        return {"logit": self.logit, "probability": float(expit(self.logit)),
                "epsilon": self.epsilon,
                "rule": "exponential mechanism (Δ = 1) over public candidate logits on the "
                        "released model's range over the declared domain; utility a₊·TP + "
                        "a₋·TN with weights from a discrete-Laplace count of positives",
                "noisy_positives": self.noisy_positives, "class_weights": list(self.weights),
                "noisy_predicted_positive": self.noisy_predicted_positive,
                "candidates": {"lower": lo, "upper": hi, "count": k}}


def threshold_index(logits: np.ndarray, y: np.ndarray, candidates: np.ndarray,
                    weights: tuple[float, float], epsilon: float | Fraction,
                    rng: np.random.Generator) -> int:
    """The exponential mechanism on :func:`threshold_utility` (Δ = 1): index i with
    probability ∝ exp(ε·u(t_i)/2). Releases the index of a public candidate; cost ε, δ = 0.

    Why the factor 2 stays: under replace-one one row can leave TP(t) and join TN(t) for
    some t and the reverse for others, so the utilities are not monotonic."""
    utility = threshold_utility(logits, y, candidates, weights)
    return exponential_mechanism(utility, sensitivity=1.0, epsilon=float(epsilon), rng=rng)


def logit_range(model: LogRegModel) -> tuple[float, float]:
    """min and max of wᵀx over the declared domain (public: the released weights only)."""
    from dpcli.algorithms.degenerate import check

    verdict = check(model)      # its log-odds range does not depend on the cut
    assert verdict is not None
    lo, hi = verdict.log_odds
    pos = model.schema.label.positive_index
    return (lo, hi) if pos in (None, 1) else (-hi, -lo)


def choose_threshold(model: LogRegModel, logits: np.ndarray, y: np.ndarray,
                     epsilon: float | Fraction, rng: np.random.Generator) -> Threshold:
    """Release the class threshold at ``epsilon`` (0: the 0.5 cut, nothing read).

    Three mechanisms on the N rows (``logits`` = wᵀx of the released w, ``y`` ±1):
    (1) the number of positives + discrete Laplace at ε/8 (a count: Δ = 1
    under replace-one); (2) the exponential mechanism at 3ε/4 over 4096
    candidates evenly spaced on the model's logit range over the declared
    domain (public), utility :func:`threshold_utility` (Δ = 1) with weights
    from (1); (3) the number of rows above the released cut + discrete
    Laplace at ε/8 (Δ = 1), to say when the cut gives one class on the data.
    Cost: ε (sequential composition), δ = 0.
    """
    eps = exact(epsilon)
    if eps == 0:
        return Threshold(0.0, 0.0)
    lo, hi = logit_range(model)
    if not hi - lo > 1e-12:
        lo, hi = lo - 1.0, hi + 1.0      # a constant model: any cut gives one class
    candidates = np.linspace(lo, hi, THRESHOLD_CANDIDATES)
    n_all = len(y)
    positives = discrete_laplace_mechanism(int(np.count_nonzero(y > 0)), sensitivity=1,
                                           epsilon=float(eps * PRIOR_PART), rng=rng)
    weights = class_weights(int(positives), n_all)
    i = threshold_index(logits, y, candidates, weights, eps * CUT_PART, rng)
    # (3) how many rows the released cut calls positive (a count: Δ = 1): the degeneracy
    # check on the data itself, which the declared domain alone cannot see
    predicted = discrete_laplace_mechanism(int(np.count_nonzero(logits > candidates[i])),
                                           sensitivity=1, epsilon=float(eps * CHECK_PART),
                                           rng=rng)
    return Threshold(float(candidates[i]), float(eps), int(positives), weights,
                     (float(lo), float(hi), THRESHOLD_CANDIDATES), int(predicted), n_all)


# ------------------------------------------------------------------ procedures


@dataclass
class Outcome:
    """What a tuning run releases: the chosen index and the model (plus public constants)."""

    index: int | None      # None: no grid was searched (a fixed or automatic λ)
    fit: PrivateFit
    stability: Stability | None = None


def train(trainer: str, x: np.ndarray, y: np.ndarray, lam: float, epsilon: float,
          rng: np.random.Generator) -> PrivateFit:
    return TRAIN[trainer](x, y, lam, epsilon, rng)


def tune(config: ValidateConfig, train_set: tuple[np.ndarray, np.ndarray],
         valid_set: tuple[np.ndarray, np.ndarray], epsilon: float, rng: np.random.Generator,
         progress: Callable[[int], None] | None = None) -> Outcome:
    """Run ``config.method`` at total ``epsilon`` (plus ``config.run_delta``); see the module."""
    x, y = train_set
    xv, yv = valid_set
    tick = progress or (lambda _: None)
    k = config.k
    if config.method == "stability":
        eps1 = epsilon / 2
        constants = stability_constants(config, x.shape[0], xv.shape[0], x.shape[1], eps1)
        scores = []
        for lam in config.grid:
            h = train(config.trainer, x, y, lam, eps1, rng)
            scores.append(validation_score(config.score, h.weights, xv, yv))
            tick(1)
        i = noisy_max_exponential(np.array(scores), sensitivity=constants.beta,
                                  epsilon=epsilon - eps1, rng=rng)
        final = train(config.trainer, x, y, config.grid[i], eps1, rng)   # fresh noise
        tick(1)
        return Outcome(i, final, constants)
    if config.method == "random":
        i = int(rng.integers(k))
        fit = train(config.trainer, x, y, config.grid[i], epsilon, rng)
        tick(k + 1)
        return Outcome(i, fit)
    if config.method == "alpha-split":
        fits = []
        for lam in config.grid:
            fits.append(train(config.trainer, x, y, lam, epsilon / k, rng))
            tick(1)
    elif config.method == "data-split":
        parts = np.array_split(rng.permutation(x.shape[0]), k)
        if min(len(p) for p in parts) == 0:
            raise ValueError(f"data-split needs at least {k} training rows")
        fits = []
        for lam, part in zip(config.grid, parts, strict=True):
            fits.append(train(config.trainer, x[part], y[part], lam, epsilon, rng))
            tick(1)
    else:
        raise ValueError(f"unknown method {config.method!r}")
    counts = np.array([errors(f.weights, xv, yv) for f in fits], dtype=np.float64)
    # the paper's p_i ∝ exp(−ε·e_i/2): the exponential mechanism on −e_i, Δ = 1
    i = exponential_mechanism(-counts, sensitivity=1.0, epsilon=epsilon, rng=rng)
    tick(1)
    return Outcome(i, fits[i])


def plan(config: ValidateConfig, epsilon: float | Fraction, n: int, m: int, d: int) -> Plan:
    """The ledger's steps. Stability: selection ε/2 (with δ) + final training ε/2;
    a baseline: one step of ε (its trainings on T and selection on V compose in parallel)."""
    total = Budget(epsilon)
    trainer = f"{config.trainer}_perturbation"
    k = config.k
    if config.method == "stability":
        half = total.epsilon / 2
        c = stability_constants(config, n, m, d, float(half))
        select_note = (f"{k} fits at ε/2 on T (n = {n:,}) scored by {config.score} loss on V "
                       f"(m = {m:,}); β1 = {c.beta1:.4g}, β2 = {c.beta2:.4g}, "
                       f"β = max(β1/n + 2τ/λ_min + √d·g, β2/m) = {c.beta:.3g}, "
                       f"noise Exp(mean 2β/ε2 = "
                       f"{selection_noise_mean(config, float(epsilon), n, m, d):.3g})")
        return Plan([
            Step("select", "noisy_max_exponential", Budget(half, exact(c.delta)), select_note,
                 sensitivity=c.beta),
            Step("final", trainer, Budget(half), sensitivity=trainer_sensitivity(
                config.trainer, n, min(config.grid)), note=
                 "the chosen λ retrained on T with fresh noise (ε′ and Δ of CMS Alg. 2)"
                 f"; {_grid_note(config, n, float(half), d)}"
                 if config.trainer == "objective" else
                 "the chosen λ retrained on T with fresh noise, scale (2/(nλ) + 2τ/λ + √d·g)/ε"
                 f" on the lattice gZ^d; {_grid_note(config, n, float(half), d)}"),
        ])
    grid = _grid_note(config, n, float(total.epsilon), d)
    notes = {
        "alpha-split": f"{k} fits at ε/{k} each on T (n = {n:,}); exponential mechanism on "
                       f"0/1 errors on V (m = {m:,}, Δ = 1) at ε; T, V disjoint: parallel",
        "data-split": f"{k} fits at ε on disjoint parts of T (~{n // k:,} rows each); "
                      f"exponential mechanism on 0/1 errors on V (m = {m:,}, Δ = 1) at ε; "
                      "parallel",
        "random": f"one λ of {k} drawn uniformly, trained on T (n = {n:,}) at ε",
    }
    notes = {name: f"{note}; {grid}" for name, note in notes.items()}
    mechanism = trainer if config.method == "random" else f"{trainer}+exponential"
    return Plan([Step(config.method.replace("-", "_"), mechanism, total,
                      notes[config.method])])


def trainer_sensitivity(trainer: str, n: int, lam: float) -> float:
    """The replace-one sensitivity a private fit is calibrated to: objective perturbation's
    gradient bound 2 (noise density ∝ exp(−ε′‖b‖/2)), output perturbation's 2/(nλ) in L2
    (before the lattice's rounding inflation, which the step's note states)."""
    return 2.0 if trainer == "objective" else 2.0 / (n * lam)


def full_plan(config: ValidateConfig, decision: Decision, n: int, m: int, d: int, n_all: int
              ) -> Plan:
    """The ledger's steps for a run decided by :func:`decide`: the model (searched by
    :func:`plan`, or one fit at a fixed λ), then the class threshold's two steps."""
    trainer = f"{config.trainer}_perturbation"
    eps_model = decision.epsilon_model
    if decision.mode == "select":
        steps = list(plan(config, eps_model, n, m, d))
    else:
        assert decision.lam is not None
        grid = _grid_note(replace(config, grid=(decision.lam,)), decision.n_model,
                          float(eps_model), d)
        steps = [Step("train", trainer, Budget(eps_model),
                      f"λ = {decision.lam:.4g} ({decision.reason}) on n = "
                      f"{decision.n_model:,} rows; {grid}",
                      sensitivity=trainer_sensitivity(config.trainer, decision.n_model,
                                                      decision.lam))]
    eps_thr = decision.epsilon_threshold
    if eps_thr > 0:
        err = threshold_error(n_all, float(eps_thr))
        steps += [
            Step("threshold_prior", "discrete_laplace", Budget(eps_thr * PRIOR_PART),
                 f"number of positives among N = {n_all:,} rows (Δ = 1): the threshold's "
                 "class weights", sensitivity=1.0),
            Step("threshold", "exponential", Budget(eps_thr * CUT_PART),
                 f"class cut: {THRESHOLD_CANDIDATES} public candidate logits, utility "
                 f"a₊·TP + a₋·TN (Δ = 1); share {float(decision.share):g} of ε; "
                 + (f"worst-case loss ≤ {100 * err:.2g} % of N (probability 0.95)"
                    if err < 1 else "no worst-case bound below N")
                 + "; the forecast gives the typical loss",
                 sensitivity=1.0),
            Step("threshold_check", "discrete_laplace", Budget(eps_thr * CHECK_PART),
                 "number of rows above the released cut (Δ = 1): are both classes "
                 "predicted on the data?", sensitivity=1.0),
        ]
    return Plan(steps)


def fit_fixed(config: ValidateConfig, decision: Decision, x: Any, y: np.ndarray,
              rng: np.random.Generator) -> Outcome:
    """One private fit at the decided λ (no selection): the whole model ε trains it."""
    assert decision.lam is not None
    return Outcome(None, train(config.trainer, x, y, decision.lam, float(decision.epsilon_model),
                               rng))


def validation_rows(n: int, fraction: float, seed: int, start: int = 0) -> np.ndarray:
    """Which of rows start … start+n−1 go to V: splitmix64(seed·2^32 + i)/2^64 < fraction.

    Reads no value, so a replace-one neighbour keeps every row on its side;
    the same file, seed and fraction always give the same split.
    """
    i = np.arange(start, start + n, dtype=np.uint64) + np.uint64(seed % 2**32) * np.uint64(2**32)
    z = i + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / 2.0**53 < fraction


# ------------------------------------------------------------------ the model


@dataclass
class LogRegModel:
    """A released logistic regression: P(positive | x) = σ(wᵀx), x = the row in the unit ball."""

    schema: Schema
    columns: tuple[str, ...]
    weights: np.ndarray
    report: dict[str, Any]
    threshold: float = 0.0   # the class cut on wᵀx (0: P(positive) > 0.5)
    #: a log-odds spread below this over the declared domain is reported as near-constant
    near_constant_spread: float = 1e-3

    def design(self, batch: EncodedBatch) -> sparse.csr_matrix:
        """The batch's unit-ball rows, sparse: a dense batch of a wide one-hot design (4,000
        levels × 65,536 rows) would take gigabytes."""
        return Inputs.from_columns(self.schema, self.columns, batch.columns,
                                   batch.n).unit_ball_sparse()

    @property
    def decision_log_odds(self) -> float:
        """The cut in the degeneracy check's orientation (class 1 against class 0)."""
        pos = self.schema.label.positive_index
        return self.threshold if pos in (None, 1) else -self.threshold

    def predict_proba(self, batch: EncodedBatch) -> np.ndarray:
        return self._proba(np.asarray(self.design(batch) @ self.weights))

    def _proba(self, z: np.ndarray) -> np.ndarray:
        pos = self.schema.label.positive_index
        pos = 1 if pos is None else pos
        out = np.empty((len(z), 2))
        out[:, pos] = expit(z)
        out[:, 1 - pos] = 1.0 - out[:, pos]
        return out

    def classify(self, batch: EncodedBatch) -> tuple[np.ndarray, np.ndarray]:
        """Probabilities and class codes: the positive class iff wᵀx > the released threshold."""
        z = np.asarray(self.design(batch) @ self.weights)
        pos = self.schema.label.positive_index
        pos = 1 if pos is None else pos
        return self._proba(z), np.where(z > self.threshold, pos, 1 - pos)

    def to_payload(self) -> dict[str, Any]:
        numeric = [c for c in self.columns if isinstance(self.schema.column(c), NumericColumn)]
        coded = [c for c in self.columns if c not in numeric]
        w = self.weights
        named: dict[str, Any] = {}
        for j, c in enumerate(numeric, 1):
            named[c] = float(w[j])
        k = 1 + len(numeric)
        for c in coded:
            levels = self.schema.column(c).levels  # type: ignore[union-attr]
            named[c] = dict(zip(levels, map(float, w[k:k + len(levels)]), strict=True))
            k += len(levels)
        scaling = {c: {"lower": self.schema.column(c).lower,  # type: ignore[union-attr]
                       "upper": self.schema.column(c).upper,  # type: ignore[union-attr]
                       "onto": [-1, 1]} for c in numeric}
        return {
            "columns": list(self.columns),
            "score": "P(positive) = 1 / (1 + exp(-(intercept + Σ weight·feature) / divisor)); "
                     "predicted positive iff (intercept + Σ weight·feature) / divisor > "
                     "threshold_logit; numeric features scaled onto [-1, 1] by their "
                     "declared bounds, categorical and binary ones one-hot (the weight of "
                     "the row's level)",
            "divisor": float(np.sqrt(1 + len(self.columns))),
            "intercept": float(w[0]),
            "weights": named,
            "threshold_logit": float(self.threshold),
            "scaling": scaling,
            **self.report,
            "schema": schema_to_dict(self.schema),
        }

    @classmethod
    def from_payload(cls, payload: dict[str, Any], path: Path) -> LogRegModel:
        schema = schema_from_dict(payload["schema"], path)
        columns = tuple(payload["columns"])
        named = payload["weights"]
        numeric = [c for c in columns if isinstance(schema.column(c), NumericColumn)]
        parts = [float(payload["intercept"])] + [float(named[c]) for c in numeric]
        for c in columns:
            if c not in numeric:
                parts += [float(named[c][v]) for v in schema.column(c).levels]  # type: ignore[union-attr]
        report = {k: v for k, v in payload.items()
                  if k not in ("columns", "score", "divisor", "intercept", "weights", "scaling",
                               "schema", "threshold_logit")}
        # models written before the threshold step cut at 0.5 (logit 0)
        return cls(schema, columns, np.array(parts), report,
                   float(payload.get("threshold_logit", 0.0)))


def labels(codes: np.ndarray, positive: int) -> np.ndarray:
    """Class codes as ±1 (+1 the positive class)."""
    return np.where(codes == positive, 1.0, -1.0)


def design_rows(batches: Iterable[EncodedBatch], schema: Schema, columns: Sequence[str],
                positive: int, progress: Callable[[int], None] | None = None
                ) -> tuple[sparse.csr_matrix, np.ndarray]:
    """Every row in memory as the learner reads it: unit-ball rows (sparse CSR: the one-hot
    blocks are mostly zeros) and ±1 labels."""
    codes, merged = read_rows(batches, columns, progress)
    x = Inputs.from_columns(schema, columns, merged, len(codes)).unit_ball_sparse()
    return x, labels(codes, positive)


def fit_report(config: ValidateConfig, outcome: Outcome, epsilon: float, n: int, m: int,
               decision: Decision | None = None) -> dict[str, Any]:
    """The public description of a tuning run, for the model file and the summary."""
    fit = outcome.fit
    report: dict[str, Any] = {
        "learner": "logreg",
        "algorithm": "no selection: one private fit at a fixed λ"
                     if outcome.index is None else
                     "Chaudhuri & Vinterbo 2013, Algorithms 1 and 2 (stability)"
                     if config.method == "stability" else
                     f"Chaudhuri & Vinterbo 2013 §5 baseline {config.method}",
        "method": config.method,
        "trainer": f"{config.trainer} perturbation (Chaudhuri, Monteleoni & Sarwate 2011, "
                   f"Algorithm {2 if config.trainer == 'objective' else 1})",
        "selection": "none" if outcome.index is None else (
                      f"report-noisy-max (exponential noise) on the {config.score} validation "
                      "score" if config.method == "stability" else
                      "uniform at random" if config.method == "random" else
                      "exponential mechanism on 0/1 errors on the validation rows"),
        "grid": list(config.grid),
        "chosen_index": outcome.index,
        "lambda": fit.lam,
        "epsilon": epsilon,
        "delta": config.run_delta,
        "epsilon_model": fit.epsilon,
        "noise_scale": fit.noise_scale,
        "n_train": n,
        "n_validation": m,
    }
    if fit.epsilon_prime is not None:
        report.update(epsilon_prime=fit.epsilon_prime, extra_regulariser=fit.extra_regulariser)
    searched = epsilon if decision is None else float(decision.epsilon_model)
    if decision is not None:
        report.update(lambda_rule=decision.mode, lambda_reason=decision.reason,
                      threshold_share=float(decision.share))
        if decision.mode != "select":
            report["grid"] = None
    if outcome.index is not None and config.method != "random":
        # a data-driven choice at the grid's edge: the best λ may lie beyond (the uniform
        # random baseline's choice says nothing about the data, so it is not flagged)
        report["lambda_at_grid_edge"] = grid_edge(config.grid, outcome.index)
    if outcome.stability is not None:
        s = outcome.stability
        report.update(epsilon_select=searched - fit.epsilon, beta1=s.beta1, beta2=s.beta2,
                      beta=s.beta, selection_noise_mean=2 * s.beta / (searched - fit.epsilon))
        if s.weight_bound is not None:
            report["weight_bound"] = s.weight_bound
    return report


def describe_delta(delta: float, score: str) -> str:
    """δ in words, for the run summary."""
    if delta == 0:
        return (f"δ = 0: the {score} loss is bounded, so the stability bound holds for every "
                "draw of the noise (pure ε-DP)")
    return (f"δ = {delta:g}: the chance that some trained model's noise is so large that one "
            f"validation row could move its {score} score by more than β2/m; only then does "
            "the selection lose its guarantee")

