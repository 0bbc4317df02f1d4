"""Boosting with random classifiers (brc): Shen, Krishnaswamy, Kulkarni & Munagala.

AdaBoost in which the learner on *private* features ignores the data: each
round draws a random linear classifier (every coefficient and the intercept
uniform on [-1, 1], features scaled into [-1, 1] with their *declared*
bounds). Only its weighted error on the data is released, with Laplace
noise; the private weights are clipped to [1/c1, c2] so that one record
moves that error by at most c1·c2/n (Lemma 1). Everything else is
post-processing of the released errors.

Two modes:

* ``partial`` (Algorithm 2): some features and the label are *public*. A
  weighted decision stump on the public features competes with the random
  private classifier each round; the one whose error is farther from 1/2
  wins. Public and private weights are kept apart. The guarantee is ε-DP
  for neighbours that differ in the *private features* of one record (the
  label and public features are public knowledge by declaration).
* ``private`` (Algorithm 3): every feature and the label are private;
  ε-DP under replace-one neighbours, dpcli's default relation.

Selecting rounds (dpcli's default, ``candidates`` > 1; docs/algorithms/brc.md): each round
draws K random classifiers and releases only the index of one, chosen by report-noisy-max
with exponential noise on their class-balanced edges (:func:`balanced_edges`, sensitivity
c2/(2·min N̂), :func:`edge_sensitivity`; :func:`select_candidate`). The chosen classifier
votes with ±EDGE; no error is released. In Algorithm 2 (``BRCConfig.voted``) the best
public stump joins every round at no cost beside the selected classifier, and the chosen
classifiers vote with their released mean edge instead (:func:`release_vote`, 1/20 of ε;
:func:`vote_weight`). T follows the released class count
(:func:`select_rounds`), K follows n (:func:`auto_candidates`). ``candidates: 1`` runs the
paper's round below.

Choices where the paper leaves room (each is post-processing or data-free):

* public learner: a weighted decision stump (a numeric threshold, or one
  class per category). It is AdaBoost's classic weak learner, exact and
  streamed (per round, the weighted sums of each class per declared level
  or per distinct public value, then a cumulative sum over the values),
  and it needs no solver; a weighted logistic regression refitted on
  re-weighted public rows would give nearly the same hyperplane every
  round, adding little to the ensemble;
* intercept: uniform on [-1, 1], as in Algorithm 2, also in the all-private
  mode (the paper reports zero and uniform alike; its exponential-mechanism
  intercept would spend budget every round);
* categorical features enter a random classifier one-hot (one uniform
  coefficient per declared level, ``other`` included); binary ones as a
  two-level categorical;
* the noisy error is clipped to [0, 1] (a true error lies there), so
  α_t = 1/2 − err_t lies in [−1/2, 1/2]. The paper's "implementation
  details" print α_t = err_t − 1/2, the opposite sign of its pseudo-code;
  dpcli follows the pseudo-code (a better-than-chance classifier votes with
  a positive weight and its misclassified records gain weight);
* prediction: F > threshold, F = Σ α_t h_t, the threshold the margin-bin
  edge of the best balanced accuracy on the calibration's noisy histogram
  (:func:`decision_threshold`, post-processing; 0 is the paper's sign(F));
* unbalanced labels: each record's weight in the released error is its
  boosting weight times a class weight λ_y ∝ 1/n_y (each class half the
  weight, ratio ρ capped by the noise budget, :func:`weight_cap`, and 20,
  :func:`class_weights`), from a noisy positive count
  (1/20 of ε, :func:`release_counts`) or the exact one when the label is
  public; the error's sensitivity becomes ρ·c1·c2/n. Weights clipped a
  factor c1·c2 apart alone cannot re-balance 6 % positives: every
  "all-negative" hyperplane wins with error 0.06;
* rounds (``auto``, :func:`auto_rounds`): T = ⌊0.1·n·ε_r/(√2·c1·c2)⌋ in
  [10, 200], the noise's standard deviation kept below a random
  hyperplane's typical edge;
* c1 = c2 (unset in the spec, :func:`auto_constant`): the paper's √2 where the
  rounds reach their cap of 200 with it, else 1 (no re-weighting, half the
  noise per round);
* no constant classifiers: a stump constant on the declared domain is never
  a candidate, a hyperplane constant on it is redrawn (data-free);
* score: a private Platt scaling σ(a·F + b), a > 0, fitted to a noisy
  histogram of the training margins by class (:func:`calibrate`, 1/10 of
  ε). The boosting link alone (σ(4F): near err = 1/2 AdaBoost's
  log((1 − e)/e) ≈ 4 α_t) was measured badly overconfident (Brier ≥ 0.25 on
  balanced Adult, where a constant 1/2 scores 0.25). a > 0 keeps the
  ranking of F, so the ROC is the ensemble's. The class is NOT taken from
  the score at the prior: fitted to few noisy positive counts it put every
  record of a 3 %-positive dataset in one class.

Training streams (:class:`TrainingStream`): each round is one pass over
the file's batches, the class count one before them and the calibration
one more (T + 2 passes). A record's private and public weights are
functions of the record and of the released history (the chosen
classifiers and their α's): a stream of at most :data:`KEEP_WEIGHTS`
records keeps them between passes (16 bytes a record), a larger one
recomputes them each pass by replaying that history on the batch
(:func:`replay_weights`, O(rounds) per record), so that memory does not
grow with n. Memory is one batch plus the statistics: two private sums, the
stump's sums per declared level and per distinct value of each numeric
public column (at most n values: a continuous public column costs three
floats per distinct value), and T classifiers. Rows in memory
(:class:`TrainingSet`, tests and benchmarks) go through the same code as a
stream of one batch, which keeps its weights between passes instead of
replaying them (the same weights bit for bit). Every sum is accumulated
record by record in file order (:func:`_add`; a selecting round's candidate sums in
blocks, :mod:`dpcli.algorithms.brc_candidates`), so a model does not depend
on where the batches split: a seeded run gives the same model from the
file, from memory, or from any batch size.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from dpcli import (
    NEIGHBOURING_RELATION,
    params,  # option tuples and limits: one definition (dpcli.params)
)
from dpcli.algorithms.brc_candidates import Prepared, add_cell_sums, draw_pool, prepare_batch
from dpcli.algorithms.inputs import Inputs, read_rows
from dpcli.budget import Budget
from dpcli.data.encode import EncodedBatch, TokenSets
from dpcli.data.schema import (
    NumericColumn,
    Schema,
    schema_from_dict,
    schema_to_dict,
)
from dpcli.errors import DataError
from dpcli.mechanisms import (
    Plan,
    discrete_laplace_mechanism,
    grid_laplace_mechanism,
    laplace_grid,
)

KIND = "brc"
MODES = ("partial", "private")
ROUNDS = 25                 # the paper's T (§5.1)
MAX_ROUNDS = params.BRC_MAX_ROUNDS
C_DEFAULT = math.sqrt(2)    # the paper's c1 = c2 (§5.1)
MAX_C = params.BRC_MAX_C
RULE_OF_THUMB = 0.5         # §4: keep c1·c2·T / (ε·n) at most this
STEP = "error_round_"       # plan step names: error_round_1 ... error_round_T
LINK = 4.0                  # the boosting link σ(4F): the calibration's start and fallback
CALIBRATION = "calibration"  # plan step: the noisy histogram of training margins
CALIBRATION_SHARE = Fraction(1, 10)   # of ε; the rounds share the rest
CALIBRATION_BINS = 16
FINE_BINS = 32              # Algorithm 2 with the released vote, where the histogram's noise allows
FINE_NOISE = 0.05           # ... a class total's noise sd at most this share of the smaller class
HIST_SENSITIVITY = 2        # one record leaves one (bin, class) cell and enters another
CLASS_COUNT = "class_count"            # plan step (all-private mode): the noisy positive count
CLASS_COUNT_SHARE = Fraction(1, 20)    # of ε; only when the label is private
VOTE = "private_vote"       # plan step (partial, selecting): the chosen classifiers' mean edge
VOTE_SHARE = Fraction(1, 20)           # of ε; only in Algorithm 2 with selecting rounds
VOTE_FLOOR = 1e-3           # the private vote's least weight: a tie-break among public scores
VOTE_RESOLUTION = 4.0       # the vote is released where its noise scale is at most EDGE / this
COUNT_SENSITIVITY = 1       # n is public: replace-one moves the positive count by at most 1
MAX_CLASS_RATIO = 20.0      # class weights at most this factor apart (the error's Δ grows with it)
EDGE = 0.1                  # a random hyperplane's typical |err − 1/2| (the signal per round)
AUTO_MIN_ROUNDS = 10
AUTO_MAX_ROUNDS = 200
SELECTION = "selection_rounds"   # plan step (candidates > 1): the T private selections
SELECT_MIN_ROUNDS = 5        # the selection rounds' floor (2 rounds lost 0.05-0.10 AUC)
SELECT_RESOLUTION = 3.0      # the selection's noise scale is at most EDGE / this
MIN_CANDIDATES = 16
MAX_CANDIDATES = params.BRC_MAX_CANDIDATES
CANDIDATE_WORK = 2 ** 22     # candidate-record evaluations per round (sets K at large n)


@dataclass(frozen=True)
class BRCConfig:
    """Parameters of a brc run (the paper's defaults)."""

    rounds: int = ROUNDS
    c1: float = C_DEFAULT
    c2: float = C_DEFAULT
    # the label is private: the class counts are a release (1/20 of ε, :func:`release_counts`);
    # with a public label they are exact and free
    counted: bool = False
    # random hyperplanes drawn per round. 1: the paper's round (one random classifier, its
    # noisy error released); more: the round selects one of them privately by its
    # class-balanced edge (:func:`select_candidate`) and releases nothing else
    candidates: int = 1
    # selecting with ``rounds: auto``: T is set after the class count (:func:`select_rounds`,
    # from the released class sizes); ``rounds`` is then its balanced upper bound
    rounds_after_count: bool = False
    # Algorithm 2 (public columns and label)
    partial: bool = False
    # Algorithm 2 with selecting rounds where the vote's noise is small (:func:`vote_pays`):
    # the public stump joins every round at no cost, and the chosen private classifiers vote
    # with their released mean edge (:func:`release_vote`, 1/20 of ε) instead of EDGE
    voted: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.candidates <= MAX_CANDIDATES:
            raise ValueError(f"candidates must be in [1, {MAX_CANDIDATES}], "
                             f"got {self.candidates}")
        if self.voted and (self.candidates == 1 or not self.partial):
            raise ValueError("voted needs Algorithm 2 (partial) and selecting rounds")
        if not 1 <= self.rounds <= MAX_ROUNDS:
            raise ValueError(f"rounds must be in [1, {MAX_ROUNDS}], got {self.rounds}")
        for name in ("c1", "c2"):
            value = getattr(self, name)
            if not 1 <= value <= MAX_C:
                # the weights start at 1, which must lie in [1/c1, c2]
                raise ValueError(f"{name} must be in [1, {MAX_C:g}], got {value}")


# ------------------------------------------------------------------ privacy


def error_sensitivity(c1: float, c2: float, n: int, ratio: float = 1.0) -> float:
    """Replace-one sensitivity of a weighted error with weights in [1/c1, ratio·c2] (Lemma 1).

    err = Σ v_i·miss_i / Σ v_i, v_i = λ_{y_i}·w_i: the boosting weight
    w_i ∈ [1/c1, c2] times the class weight λ_y ∈ [1, ratio] (released or
    public, :func:`class_weights`). Replacing record n changes its weight
    within [1/c1, ratio·c2] and its miss bit; the change is at most
    max(v_n, v'_n) / Σ v ≤ ratio·c2 / (n / c1) = ratio·c1·c2 / n. The other
    records' weights are the same on both datasets given the released
    history: they depend only on their own rows, the released class weights,
    α's and classifiers. ``ratio`` = 1 is the paper's Lemma 1.
    """
    return ratio * c1 * c2 / n


def rounds_share(counted: bool, voted: bool = False) -> Fraction:
    """The share of ε the T rounds split: all but the calibration's 1/10, when the label
    is private (``counted``) the class count's 1/20 and, in Algorithm 2 with selecting
    rounds (``voted``), the private vote's 1/20 (:func:`release_vote`)."""
    return (1 - CALIBRATION_SHARE - (CLASS_COUNT_SHARE if counted else 0)
            - (VOTE_SHARE if voted else 0))


def rounds_epsilon(epsilon: float, counted: bool = False, voted: bool = False) -> float:
    """The ε the T rounds share (:func:`rounds_share`)."""
    return float(epsilon * rounds_share(counted, voted))


def noise_scale(config: BRCConfig, epsilon: float, n: int, ratio: float = 1.0) -> float:
    """Laplace scale of each round's error: ratio·c1·c2·T / (ε_r·n), ε_r the rounds' share.

    Selecting (``config.candidates`` > 1), the scale of the selection's exponential noise
    on the balanced edges, 2Δ·T/ε_r with Δ = c2/(2·min N̂) (:func:`edge_sensitivity`); the
    smaller class size min N̂ is read as n/(1 + ``ratio``) (n/2 at ratio 1)."""
    eps_r = rounds_epsilon(epsilon, config.counted, config.voted)
    if config.candidates > 1:
        smaller = n / (1.0 + ratio)
        return 2 * edge_sensitivity(config.c2, np.array([smaller])) * config.rounds / eps_r
    return error_sensitivity(config.c1, config.c2, n, ratio) * config.rounds / eps_r


def breaks_rule(config: BRCConfig, epsilon: float, n: int) -> bool:
    """Whether c1·c2·T/(ε_r·n) exceeds the rule of thumb (beyond float rounding): the
    paper's round only (a selecting round releases no error)."""
    return config.candidates == 1 and noise_scale(config, epsilon, n) > RULE_OF_THUMB + 1e-9


def auto_rounds(epsilon: float, n: int, c1: float, c2: float, counted: bool = False) -> int:
    """T = ⌊0.1·n/(√2·r)⌋ clipped to [10, 200], r = c1·c2/ε_r: from public facts only.

    Why: round t's released error carries Laplace noise of scale b = r·T/n
    (sensitivity c1·c2/n, ε_r/T per round; ε_r the rounds' share of
    ``epsilon``, :func:`rounds_epsilon`), standard deviation √2·b. The
    signal it must resolve is the random hyperplane's edge |err − 1/2|,
    typically about 0.1 (:data:`EDGE`; on Adult's features the median edge of
    a uniform random hyperplane is 0.05-0.15). Rounds are added while the
    noise's standard deviation stays below that edge: √2·r·T/n ≤ 0.1. More
    rounds then buy more random directions (25 hyperplanes were the limit,
    not the noise, at large n); fewer than 10 leave too few directions for
    any n, and above 200 the passes cost more than they add. The paper's
    rule of thumb (b ≤ 1/2) is 5√2 ≈ 7 times looser. With unbalanced
    labels the class weights raise the noise by their ratio
    (:func:`error_sensitivity`), which the released count decides after T is
    fixed; T is set for the balanced case.
    """
    r = c1 * c2 / rounds_epsilon(epsilon, counted)
    fit = math.floor(EDGE * n / (math.sqrt(2) * r) + 1e-9)
    return max(AUTO_MIN_ROUNDS, min(AUTO_MAX_ROUNDS, fit))


def select_rounds(epsilon: float, smaller: float, c2: float, counted: bool = False,
                  voted: bool = False) -> int:
    """T of the selecting rounds: ⌊EDGE·ε_r·m/(3·c2)⌋ clipped to [5, 200], m the smaller
    class's size as released (or exact): public facts and a released value only.

    Why: round t's selection (:func:`select_candidate`) adds exponential noise of scale
    2Δ/(ε_r/T) = c2·T/(m·ε_r) to the balanced edges (Δ = c2/(2m),
    :func:`edge_sensitivity`). T is the largest count that keeps that scale at most a
    third of a random hyperplane's typical edge (:data:`EDGE`): a candidate one edge
    ahead of another is then e³ ≈ 20 times likelier to be chosen. On balanced data (m =
    n/2) that is ⌊EDGE·n·ε_r/(6·c2)⌋, about a quarter of the rounds :func:`auto_rounds`
    gives the paper's single random hyperplane. Fewer than 5 rounds lost 0.05-0.10 AUC
    on the suite's tuning splits (breast_cancer, penguins at ε = 0.5); above 200 the
    passes cost more than they add. With unbalanced labels m is what bounds the noise:
    on ISLP Default (3 % positives) T from n instead of m (37 rounds at ε = 0.5) gave
    AUC 0.75 against 0.86 (benchmarks/results/brc_r8.md).
    """
    eps_r = rounds_epsilon(epsilon, counted, voted)
    fit = math.floor(EDGE * eps_r * max(smaller, 1.0) / (SELECT_RESOLUTION * c2) + 1e-9)
    return max(SELECT_MIN_ROUNDS, min(AUTO_MAX_ROUNDS, fit))


def auto_candidates(n: int) -> int:
    """K, the random hyperplanes a selecting round draws: ⌊2²²/n⌋ clipped to [16, 256].

    Compute, not privacy: the selection's ε does not depend on K (one index is
    released), and more candidates let it find a better direction (digits, 64 columns:
    AUC 0.73 with 64 candidates, 0.90 with 256, at ε = 1 on the tuning split). Each
    candidate is evaluated on every record every round, so K falls as n grows to keep a
    round's work near 4 million evaluations, and never below 16.
    """
    return max(MIN_CANDIDATES, min(MAX_CANDIDATES, CANDIDATE_WORK // max(n, 1)))


def auto_constant(epsilon: float, n: int, counted: bool = False) -> float:
    """c1 = c2 from public facts (n, ε): the paper's √2 where the noise affords the full
    :data:`AUTO_MAX_ROUNDS` rounds with it, else 1 (no re-weighting).

    Why: clipping the private weights to [1/c1, c2] makes the error's sensitivity
    c1·c2/n (Lemma 1), so √2 doubles every round's noise against c = 1, where the
    weights stay 1 and the rounds are a vote of random hyperplanes weighted by their
    released edges. Re-weighting pays only where rounds are plentiful and quiet: when
    :func:`auto_rounds` at c1·c2 = 2 already reaches its cap, the doubled noise costs
    no round and boosting's adaptivity is kept; below the cap, c = 1 halves the noise
    (and doubles T). Measured on a 70/30 split of balanced adult_train (never the test
    file), ε = 0.16, 10 seeds: accuracy 0.701 → 0.727 all-private, 0.721 → 0.746
    partial; at ε = 1 (T at the cap either way) √2 was as good or better
    (benchmarks/results/learners_r5.md). A spec's c1 or c2 overrides the rule.
    """
    at_paper = auto_rounds(epsilon, n, C_DEFAULT, C_DEFAULT, counted)
    return C_DEFAULT if at_paper >= AUTO_MAX_ROUNDS else 1.0


def config_ran(config: BRCConfig, rounds: Sequence[Round]) -> BRCConfig:
    """The configuration :func:`fit` ran: with rounds set after the class count
    (``rounds_after_count``), T is the number of rounds it released, not the plan's bound.
    The model file records this T, and a file whose ensemble lists another number of
    rounds stays malformed."""
    if config.rounds_after_count and rounds:
        # with free public rounds (``voted``), T counts the private selections
        ran = (sum(r.hyperplane is not None for r in rounds) if config.voted
               else len(rounds))
        return replace(config, rounds=ran, rounds_after_count=False)
    return config


def vote_pays(epsilon: float, n: int, c2: float) -> bool:
    """Whether Algorithm 2's selecting rounds release the private vote (``voted``): the
    vote's noise scale at balanced classes, Δ = c2/n over ε/20 (:func:`vote_scale`), is at
    most EDGE/4. Public facts only (n, ε, c2): about n·ε ≥ 800·c2.

    Why: there the released edge, not the prior, sets the vote (:func:`vote_weight`'s w ≥
    8/9). Below it the vote is near EDGE anyway, and the free public stumps, voting their
    exact edges against private votes held near 0.1, drowned strong private columns: on the
    tuning splits penguins (ε = 1, b ≈ 0.14) fell from AUC 0.957 to 0.870, anes96 and oj at
    ε = 0.5 (b ≈ 0.1) by 0.01-0.03; at b ≤ 0.03 (fair, oj and anes96 at ε = 2, ISLP
    Default, Adult, nycflights13) it was as good or better (benchmarks/results/brc_r10.md).
    Where it is false Algorithm 2 runs as before round 10: the stump competes in the
    selection and the rounds keep the vote's 1/20. Unbalanced labels make the true noise
    larger (the smaller class sets Δ); :func:`vote_weight` then shrinks the vote towards
    EDGE."""
    return vote_scale(c2 / max(n, 1), float(epsilon * VOTE_SHARE)) <= EDGE / VOTE_RESOLUTION


def auto_config(epsilon: float, n: int, counted: bool = False,
                candidates: int | None = None, partial: bool = False) -> BRCConfig:
    """dpcli's default configuration at ε and n (public facts): c1 = c2 by
    :func:`auto_constant`, K by :func:`auto_candidates` (``candidates`` overrides), and T by
    :func:`select_rounds` after the class count (here its balanced bound, m = n/2) or, with
    one candidate, :func:`auto_rounds`. ``partial``: Algorithm 2 (public columns and label),
    whose selecting rounds release the private vote where it pays (``voted``,
    :func:`vote_pays`)."""
    c = auto_constant(epsilon, n, counted)
    k = auto_candidates(n) if candidates is None else candidates
    if k > 1:
        voted = partial and vote_pays(epsilon, n, c)
        return BRCConfig(select_rounds(epsilon, n / 2, c, counted, voted), c, c, counted, k,
                         True, partial, voted)
    return BRCConfig(auto_rounds(epsilon, n, c, c, counted), c, c, counted, partial=partial)


def plan(total: Budget, config: BRCConfig, n: int) -> Plan:
    """With a private label, first the positive count (1/20 of ε); then one Laplace step per
    round (the rounds' share of ε over T), then the calibration histogram (1/10).

    Basic composition over the count, the T released errors and the histogram.
    """
    sens = error_sensitivity(config.c1, config.c2, n)
    scale = noise_scale(config, float(total.epsilon), n)
    note = (f"Δ = ρ·c1·c2/n = {sens:.3g}·ρ (weighted error, Lemma 1; ρ ≤ "
            f"{MAX_CLASS_RATIO:g} the released class-weight ratio), scale {scale:.3g}·ρ")
    share = rounds_share(config.counted, config.voted) / config.rounds
    steps: dict[str, tuple[str, Fraction | int]] = {}
    notes: dict[str, str] = {}
    if config.counted:
        steps[CLASS_COUNT] = ("discrete_laplace", CLASS_COUNT_SHARE)
        notes[CLASS_COUNT] = (f"Δ = {COUNT_SENSITIVITY} (positive count, n public), scale "
                              f"{COUNT_SENSITIVITY / float(total.epsilon * CLASS_COUNT_SHARE):.3g}")
    if config.candidates > 1:
        steps[SELECTION] = ("report_noisy_max", rounds_share(config.counted, config.voted))
        count = ("T from the released class count (at most " if config.rounds_after_count
                 else "T = (")
        notes[SELECTION] = (f"{count}{config.rounds}), each round ε_r/T: one of "
                            f"{2 * config.candidates} signed random classifiers by its "
                            f"balanced edge, Δ = c2/(2·min N̂) (N̂ the released class "
                            f"sizes; {config.c2 / n:.3g} when balanced); exponential noise")
    for t in range(1, config.rounds + 1 if config.candidates == 1 else 1):
        steps[f"{STEP}{t}"] = ("grid_laplace", share)
        notes[f"{STEP}{t}"] = note
    if config.voted:
        steps[VOTE] = ("grid_laplace", VOTE_SHARE)
        notes[VOTE] = (f"the chosen private classifiers' mean balanced edge (their vote), "
                       f"Δ = c2/(2·min N̂) ({config.c2 / n:.3g} when balanced), scale "
                       f"{config.c2 / n / float(total.epsilon * VOTE_SHARE):.3g} when balanced")
    steps[CALIBRATION] = ("discrete_laplace", CALIBRATION_SHARE)
    cal_scale = HIST_SENSITIVITY / float(total.epsilon * CALIBRATION_SHARE)
    notes[CALIBRATION] = (f"Δ = {HIST_SENSITIVITY} ({CALIBRATION_BINS} margin bins × 2 classes, "
                          f"{FINE_BINS} where the vote is released and the noise allows), "
                          f"scale {cal_scale:.3g}")
    # sensitivities, once: a round's error has Δ = ρ·c1·c2/n with ρ the released (or public)
    # class-weight ratio, at most MAX_CLASS_RATIO: the step records that public bound
    bounds = {name: sens * MAX_CLASS_RATIO for name in steps if name.startswith(STEP)}
    if config.candidates > 1:
        # the smaller class's released size is at least 1: Δ ≤ c2/2 on any data
        bounds[SELECTION] = edge_sensitivity(config.c2, np.array([1.0]))
    if config.voted:
        bounds[VOTE] = edge_sensitivity(config.c2, np.array([1.0]))
    bounds[CALIBRATION] = HIST_SENSITIVITY
    if config.counted:
        bounds[CLASS_COUNT] = COUNT_SENSITIVITY
    return Plan.split(total, steps).with_notes(notes).with_sensitivities(bounds)


# ------------------------------------------------------------------ class balance


@dataclass(frozen=True)
class ClassBalance:
    """The positive count the run uses (released with noise, or exact when the label is
    public), and what follows from it by post-processing."""

    n: int
    positives: int          # clipped to [1, n − 1]
    exact: bool             # True: the label is public, the count costs nothing

    @property
    def prior(self) -> float:
        """The share of positive records (recorded in the model; the weights follow it)."""
        return self.positives / self.n

    cap: float = MAX_CLASS_RATIO   # the largest class-weight ratio (:func:`weight_cap`)

    def weights(self) -> np.ndarray:
        """(λ_negative, λ_positive): :func:`class_weights`."""
        return class_weights(self.n, self.positives, self.cap)

    @property
    def ratio(self) -> float:
        return float(self.weights().max())

    def sizes(self) -> np.ndarray:
        """(N̂_−, N̂_+): the class sizes as released (or exact), each at least 1."""
        return np.array([float(self.n - self.positives), float(self.positives)])


def class_weights(n: int, positives: int, cap: float = MAX_CLASS_RATIO) -> np.ndarray:
    """Class weights (λ_−, λ_+) under which each class carries half the total weight, the
    smaller one 1 and the ratio at most ``cap`` (:func:`weight_cap`).

    λ_y ∝ 1/n_y makes Σ_i λ_{y_i} the same for both classes. A function of the
    released (or public) count and of public facts only. The cap bounds the
    error's sensitivity, which grows with the ratio (:func:`error_sensitivity`):
    beyond it the rarer class is only partly re-weighted, and the threshold
    (:func:`decision_threshold`) does the rest.
    """
    negatives = n - positives
    lam = np.array([1.0 / negatives, 1.0 / positives])
    lam /= lam.min()
    return np.minimum(lam, max(1.0, cap))


def weight_cap(config: BRCConfig, epsilon: float, n: int) -> float:
    """The largest class-weight ratio ρ the noise budget allows: ρ·√2·c1·c2·T/(ε_r·n) ≤ 0.1,
    i.e. ρ ≤ (0.1·n·ε_r/(√2·c1·c2))/T, at least 1 and at most :data:`MAX_CLASS_RATIO`.

    Public facts only (n, ε, T, c1, c2). Why: the weights multiply the error's
    sensitivity by ρ, and :func:`auto_rounds` already spends the noise that
    keeps a round's standard deviation below a random hyperplane's edge; a
    ratio beyond what is left would drown every round. Measured on ISLP
    Default (3.3 % positives, 7,000 rows, ε = 0.5 and 1): the fixed cap of 20
    gave AUC 0.63 / 0.72 and degenerate runs; this rule leaves ρ ≈ 1 there.
    """
    if config.candidates > 1:
        # selecting, the class weights only weight the public stump's (exact) error: the
        # private selection balances the classes by its normalisers (:func:`balanced_edges`)
        return MAX_CLASS_RATIO
    r = config.c1 * config.c2 / rounds_epsilon(epsilon, config.counted, config.voted)
    room = EDGE * n / (math.sqrt(2) * r) / config.rounds
    return float(min(MAX_CLASS_RATIO, max(1.0, room)))


def count_positives(data: Data, progress: Callable[[int], None] | None = None) -> int:
    """The number of positive records: one pass over ``data`` (private when the label is)."""
    total = count = 0
    for rows in data.chunks():
        total += int(np.count_nonzero(rows.y > 0))
        count += rows.n
        if progress is not None:
            progress(rows.n)
    _check_count(count, data.n, "the class count's pass")
    return total


def release_counts(positives: int, n: int, epsilon: float | None,
                   rng: np.random.Generator, cap: float = MAX_CLASS_RATIO) -> ClassBalance:
    """The class balance from the true positive count.

    Releases (``epsilon`` not None, a private label): the positive count
    plus discrete Laplace noise of scale 1/ε (n is public under replace-one,
    so one record moves the count by at most 1), clipped to [1, n − 1]
    (post-processing). With a public label (``epsilon`` None) the exact count
    is public knowledge and nothing is released.
    """
    if epsilon is None:
        return ClassBalance(n, min(max(positives, 1), n - 1), exact=True, cap=cap)
    noisy = int(discrete_laplace_mechanism(np.array([positives]),
                                           sensitivity=COUNT_SENSITIVITY, epsilon=epsilon,
                                           rng=rng)[0])
    return ClassBalance(n, min(max(noisy, 1), n - 1), exact=False, cap=cap)


def resolve_mode(columns: Sequence[str], public: Sequence[str],
                 label_public: bool) -> tuple[str, tuple[str, ...]]:
    """``partial`` with the public columns among ``columns``, or ``private`` with none.

    Algorithm 2 needs a public label (Shen et al., section 2): only when the spec
    declares it (``label_public``) does it run. Otherwise every feature and the
    label are private (Algorithm 3, replace-one) and the declared public columns
    are used as ordinary, protected features.
    """
    chosen = tuple(c for c in columns if c in set(public))
    if not label_public or not chosen:
        return "private", ()
    return "partial", chosen


def relation(mode: str, public: Sequence[str]) -> str:
    """The neighbouring relation a run's ε holds under, as the ledger and outputs state it."""
    from dpcli import relation as rel

    if mode == "private":
        return NEIGHBOURING_RELATION
    return rel.partial(public)


# ------------------------------------------------------------------ inputs


@dataclass
class PublicColumns:
    """Public columns of some records for the stump learner: codes, and raw numeric values."""

    inputs: Inputs
    raw: dict[str, np.ndarray]                  # numeric public values (declared units)
    upper: dict[str, float]                     # declared upper bounds (a constant stump's cut)
    # each numeric column's distinct values and every record's index among them, found once
    # (records in memory are the same batch every round: a sort of n values a round saved)
    _distinct: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def distinct(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """``np.unique(raw[name], return_inverse=True)``, computed once per column."""
        if name not in self._distinct:
            self._distinct[name] = np.unique(self.raw[name], return_inverse=True)
        return self._distinct[name]


@dataclass
class TrainingSet:
    """Records in memory: labels as ±1 (+1 the positive class), the private inputs, and the
    public ones if any. The whole training set (:func:`training_set`), or one batch of a
    :class:`TrainingStream`'s pass (:func:`prepare`)."""

    y: np.ndarray
    private: Inputs
    public: PublicColumns | None = None

    @property
    def n(self) -> int:
        return int(self.y.shape[0])

    @property
    def layout(self) -> Inputs:
        """The private inputs: a random classifier reads their sizes only."""
        return self.private

    def chunks(self) -> Iterator[TrainingSet]:
        """One pass over records in memory: the records themselves, as one batch."""
        yield self


@dataclass(frozen=True)
class TrainingStream:
    """A training set read again, a batch at a time, for every pass (the CLI's input).

    ``batches()`` starts a fresh pass over the same records in the same order
    (e.g. ``lambda: source.batches(columns, rng=rng)``). ``n`` is their number,
    counted by the pre-charge pass: public under replace-one, it sets the
    noise. A pass that reads another number of records is an error (the file
    changed under the run). Memory: one batch at a time, whatever n.
    """

    batches: Callable[[], Iterable[EncodedBatch]]
    n: int
    schema: Schema
    columns: tuple[str, ...]
    public: tuple[str, ...]
    positive: int

    @property
    def layout(self) -> Inputs:
        """The private inputs with no record: their sizes, from the schema alone."""
        private = [c for c in self.columns if c not in self.public]
        return Inputs.from_columns(self.schema, private, {c: np.zeros(0) for c in private}, 0)

    def chunks(self) -> Iterator[TrainingSet]:
        """One pass: each batch as the learners read it."""
        for batch in self.batches():
            yield prepare(batch, self.schema, self.columns, self.public, self.positive)


Data = TrainingSet | TrainingStream


def prepare(batch: EncodedBatch, schema: Schema, columns: Sequence[str], public: Sequence[str],
            positive: int) -> TrainingSet:
    """One encoded batch split into private and public inputs; labels ±1 (+1 = ``positive``)."""
    y = np.where(batch.label == positive, 1, -1).astype(np.int8)
    private = [c for c in columns if c not in public]
    pub = None
    if public:
        inputs = _indexing(Inputs.from_columns(schema, public, batch.columns, batch.n))
        raw = {c: np.asarray(batch.columns[c], dtype=np.float64) for c in inputs.numeric_names}
        upper = {c: schema.column(c).upper for c in inputs.numeric_names}  # type: ignore[union-attr]
        pub = PublicColumns(inputs, raw, upper)
    return TrainingSet(y, _indexing(Inputs.from_columns(schema, private, batch.columns, batch.n)),
                       pub)


def _indexing(x: Inputs) -> Inputs:
    """``x`` with its codes as np.intp: every lookup with int32 codes converts them first
    (7x slower), and a code is looked up once per round per pass."""
    x.codes = {name: codes.astype(np.intp) for name, codes in x.codes.items()}
    return x


def training_set(batches: Iterable[EncodedBatch], schema: Schema, columns: Sequence[str],
                 public: Sequence[str], positive: int,
                 progress: Callable[[int], None] | None = None) -> TrainingSet:
    """Every record of ``columns`` in memory (tests, benchmarks; the CLI streams instead)."""
    label, merged = read_rows(batches, columns, progress)
    encoded: dict[str, np.ndarray | TokenSets] = dict(merged)  # EncodedBatch's column type
    return prepare(EncodedBatch(int(label.shape[0]), label, encoded), schema, columns, public,
                   positive)


# ------------------------------------------------------------------ learners


@dataclass(frozen=True)
class Hyperplane:
    """A random linear classifier: sign(b + Σ w_j x_j + Σ_c W_c[level])."""

    intercept: float
    numeric: np.ndarray
    levels: dict[str, np.ndarray]

    def margin(self, x: Inputs) -> np.ndarray:
        z = x.numeric @ self.numeric + self.intercept
        for name, weights in self.levels.items():
            z += weights.take(x.codes[name])   # weights[codes], 3x faster
        return z

    def predict(self, x: Inputs) -> np.ndarray:
        return _signs(self.margin(x) >= 0)

    def extremes(self, bounds: tuple[np.ndarray, np.ndarray] | None = None
                 ) -> tuple[float, float]:
        """The least and greatest margin over the declared domain (numeric inputs scaled to
        ``bounds``, [-1, 1] each by default; every declared level): a sum of per-column
        extremes, since the margin is a sum of one term per column."""
        lo_x, hi_x = bounds if bounds is not None else (-np.ones(self.numeric.size),
                                                        np.ones(self.numeric.size))
        terms = np.stack([self.numeric * lo_x, self.numeric * hi_x])
        lo = self.intercept + float(terms.min(axis=0).sum())
        hi = self.intercept + float(terms.max(axis=0).sum())
        for w in self.levels.values():
            if w.size:
                lo, hi = lo + float(w.min()), hi + float(w.max())
        return lo, hi

    def constant(self, bounds: tuple[np.ndarray, np.ndarray] | None = None) -> bool:
        """Whether every input of the declared domain gets the same class (margin ≥ 0 is +1)."""
        lo, hi = self.extremes(bounds)
        return lo >= 0 or hi < 0


def _signs(positive: np.ndarray) -> np.ndarray:
    """+1 where ``positive``, else −1 (int8); 10x faster than np.where(...).astype."""
    return (positive.view(np.int8) << 1) - np.int8(1)


KEEP_WEIGHTS = 4_000_000   # streams up to this many records keep their weights (64 MB)
MAX_DRAWS = 1000   # redraws of a hyperplane constant on the domain before giving up


def random_hyperplane(x: Inputs, rng: np.random.Generator,
                      bounds: tuple[np.ndarray, np.ndarray] | None = None) -> Hyperplane:
    """Every coefficient and the intercept uniform on [-1, 1]; reads no data (sizes only).

    A hyperplane whose margin keeps one sign over the whole declared domain
    (:meth:`Hyperplane.constant`) is one class for every input: it is drawn
    again (data-free). ``bounds``: the scaled numeric inputs' range, [-1, 1]
    by default.
    """
    for _ in range(MAX_DRAWS):
        intercept = float(rng.uniform(-1.0, 1.0))
        numeric = rng.uniform(-1.0, 1.0, size=len(x.numeric_names))
        levels = {name: rng.uniform(-1.0, 1.0, size=k) for name, k in x.n_levels.items()}
        h = Hyperplane(intercept, numeric, levels)
        if not h.constant(bounds):
            return h
    return h


@dataclass(frozen=True)
class Stump:
    """A one-column classifier: ``above`` if x > threshold else −above, or a sign per level."""

    column: str
    threshold: float | None = None
    above: int = 1
    signs: np.ndarray | None = None

    def predict(self, x: Inputs, raw: dict[str, np.ndarray]) -> np.ndarray:
        if self.signs is not None:
            return self.signs[x.codes[self.column]]
        signs = _signs(raw[self.column] > self.threshold)
        return signs if self.above == 1 else -signs


def _add(total: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """total[index[k]] += values[k] for k in order: the sum of all batches in file order,
    rounded the same wherever the batches split.

    ``np.bincount`` adds its weights one by one in order, from 0: entering the running
    totals as the first weights (0 + t is exact) continues them, the same floats as
    ``np.add.at`` at a fraction of its time (tests/algorithms/test_brc_candidates.py)."""
    size = total.size
    total[...] = np.bincount(np.concatenate([np.arange(size), index]),
                             weights=np.concatenate([total.ravel(), values]), minlength=size
                             ).reshape(total.shape)


@dataclass
class ValueSums:
    """Weighted sums of the negative and of the positive records (columns 0, 1 of ``sums``)
    per distinct value of one numeric public column, values increasing. Memory: three
    floats per distinct value."""

    values: np.ndarray = field(default_factory=lambda: np.zeros(0))
    sums: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))

    @property
    def pos(self) -> np.ndarray:
        return np.ascontiguousarray(self.sums[:, 1])

    @property
    def neg(self) -> np.ndarray:
        return np.ascontiguousarray(self.sums[:, 0])

    def cleared(self) -> ValueSums:
        """The same values (a next pass meets no new one), sums at 0."""
        return ValueSums(self.values, np.zeros((self.values.size, 2)))

    def add(self, distinct: np.ndarray, inverse: np.ndarray, positive: np.ndarray,
            w: np.ndarray) -> None:
        """Fold in records with values ``distinct[inverse]`` (the batch's distinct values,
        sorted, are found 3x faster than each record's value)."""
        where = np.searchsorted(self.values, distinct)
        known = np.zeros(distinct.size, dtype=bool)
        if self.values.size:
            known = self.values[np.minimum(where, self.values.size - 1)] == distinct
        if not known.all():   # new values (the first pass): insert them, sums at 0
            values = np.union1d(self.values, distinct[~known])
            grown = np.zeros((values.size, 2))
            grown[np.searchsorted(values, self.values)] = self.sums
            self.values, self.sums = values, grown
            where = np.searchsorted(values, distinct)
        _add(self.sums.reshape(-1), 2 * where[inverse] + positive, w)


@dataclass
class StumpStats:
    """All the stump learner reads of a pass: Σ w, and the weighted sums of the negative and
    of the positive records (columns 0, 1) per declared level of each coded public column
    and per distinct value of each numeric one (:class:`ValueSums`).

    Public columns, the public label and public weights only: computing and using them
    costs no privacy. Memory: the declared levels, plus the distinct values of the numeric
    public columns (bounded by those values, not by the records; at most n).
    """

    levels: dict[str, np.ndarray]
    values: dict[str, ValueSums]
    upper: dict[str, float]
    total: np.ndarray = field(default_factory=lambda: np.zeros(1))

    @classmethod
    def for_columns(cls, public: PublicColumns) -> StumpStats:
        levels = {name: np.zeros((k, 2)) for name, k in public.inputs.n_levels.items()}
        return cls(levels, {name: ValueSums() for name in public.raw}, dict(public.upper))

    def cleared(self) -> StumpStats:
        return StumpStats({name: np.zeros(t.shape) for name, t in self.levels.items()},
                          {name: v.cleared() for name, v in self.values.items()}, self.upper)

    def add(self, public: PublicColumns, y: np.ndarray, w: np.ndarray) -> None:
        """Fold in records with labels ``y`` (±1) and public weights ``w``."""
        positive = (y > 0).astype(np.intp)
        _add(self.total, np.zeros(w.size, dtype=np.intp), w)
        for name, table in self.levels.items():
            _add(table.reshape(-1), 2 * public.inputs.codes[name] + positive, w)
        for name, sums in self.values.items():
            sums.add(*public.distinct(name), positive, w)

    def best(self) -> tuple[Stump | None, float]:
        """The stump of least weighted error over every public column, and that error;
        (None, 1/2) when every stump would be constant on the declared domain.

        A stump that gives one class to every input of the declared domain is
        never a candidate: a categorical stump with one sign for every level,
        or a numeric cut at or above the column's declared upper bound (above
        every value). Such a stump only restates the class balance, which the
        class weights already remove, and the ensemble would carry it as a
        constant. Ties go to the first column (coded ones, then numeric ones,
        in column order), the lowest cut, and ``above`` = +1.
        """
        total = float(self.total[0])
        best: tuple[float, Stump] | None = None
        for name, table in self.levels.items():
            pos, neg = np.ascontiguousarray(table[:, 1]), np.ascontiguousarray(table[:, 0])
            default = 1 if pos.sum() >= neg.sum() else -1
            signs = np.where(pos > neg, 1, np.where(neg > pos, -1, default)).astype(np.int8)
            if np.all(signs == signs[0]):
                continue   # one class for every level: constant on the domain
            err = float(np.minimum(pos, neg).sum()) / total
            if best is None or err < best[0]:
                best = (err, Stump(name, signs=signs))
        for name, sums in self.values.items():
            xs = sums.values
            if xs.size < 2:
                continue   # every cut between seen values is constant: none exists
            # "+1 above the cut": errors are positives at or below it and negatives above
            # it. A cut after each distinct value but the last (a cut above every value is
            # constant on the data, and at the declared upper bound on the domain too).
            below_pos = np.cumsum(sums.pos)[:-1]
            below_neg = np.cumsum(sums.neg)
            up = below_pos + (below_neg[-1] - below_neg[:-1])
            down = total - up
            i_up, i_down = int(np.argmin(up)), int(np.argmin(down))
            if up[i_up] <= down[i_down]:
                i, above, err = i_up, 1, float(up[i_up]) / total
            else:
                i, above, err = i_down, -1, float(down[i_down]) / total
            threshold = float((xs[i] + xs[i + 1]) / 2)
            if threshold >= self.upper[name]:
                continue   # values clamped at the bound: no cut inside the domain
            if best is None or err < best[0]:
                best = (err, Stump(name, threshold=threshold, above=above))
        if best is None:
            return None, 0.5
        return best[1], best[0]


def fit_stump(public: PublicColumns, y: np.ndarray, w: np.ndarray
              ) -> tuple[Stump | None, float]:
    """The stump of least weighted error over every public column, and that error, for
    records in memory (:class:`StumpStats` over one batch).

    Public rows, public labels and public weights only: no privacy cost.
    """
    stats = StumpStats.for_columns(public)
    stats.add(public, y, w)
    return stats.best()


def weighted_error(miss: np.ndarray, w: np.ndarray) -> float:
    """Σ w_i·miss_i / Σ w_i: the statistic each round releases (with noise) for the private
    side. :func:`train` accumulates the same two sums a batch at a time."""
    return float(np.dot(w, miss) / w.sum())


def clipped_update(w: np.ndarray, miss: np.ndarray, alpha: float, c1: float,
                   c2: float) -> np.ndarray:
    """The paper's rule: w·exp(α·miss) where that stays in [1/c1, c2], else w unchanged.

    Keeps every private weight in [1/c1, c2] (they start at 1), which is
    what bounds the weighted error's sensitivity.
    """
    candidate = w * np.exp(alpha * miss)
    keep = (candidate <= c2) & (candidate >= 1.0 / c1)
    return np.where(keep, candidate, w)


# ------------------------------------------------------------------ training


@dataclass(frozen=True)
class Round:
    """One member of the ensemble: its vote weight α and the chosen classifier."""

    alpha: float
    hyperplane: Hyperplane | None = None
    stump: Stump | None = None

    @property
    def kind(self) -> str:
        return "private" if self.hyperplane is not None else "public"

    def vote(self, rows: TrainingSet) -> np.ndarray:
        """h_t on ``rows``: ±1 (int8)."""
        if self.hyperplane is not None:
            return self.hyperplane.predict(rows.private)
        assert self.stump is not None and rows.public is not None
        return self.stump.predict(rows.public.inputs, rows.public.raw)


@dataclass
class Trace:
    """Diagnostics of a run: ``hyperplanes[t]`` is round t's random private classifier,
    chosen or not; ``chosen[t]`` the side that won it."""

    hyperplanes: list[Hyperplane] = field(default_factory=list)
    chosen: list[str] = field(default_factory=list)
    # the exact balanced edge of each chosen private classifier (signed: −q_k for −h_k), in
    # round order: private, never released; only their noisy mean is (:func:`release_vote`)
    edges: list[float] = field(default_factory=list)
    # F on the training rows when they are in memory (a TrainingSet): private, never
    # released; None when streamed (it would hold a float per record)
    margin: np.ndarray | None = None


def replay_weights(rounds: Sequence[Round], rows: TrainingSet, config: BRCConfig,
                   start: tuple[np.ndarray, np.ndarray] | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Each record's private weight and public log-weight after ``rounds``.

    A record's weights are a function of its own record and the history (the
    chosen classifiers and their α's), so they are recomputed on each pass
    instead of stored. Private: from 1, each private round applies
    :func:`clipped_update` (the skip rule keeps them in [1/c1, c2]). Public:
    the log of Π exp(α_t·miss_t) over the public rounds; the stump learner
    reads them as exp(log − shift) (errors are scale-free). ``start``: the
    weights after earlier rounds (updated in place), instead of 1 and 0.
    """
    w_pri, log_pub = (np.ones(rows.n), np.zeros(rows.n)) if start is None else start
    for r in rounds:
        miss = r.vote(rows) != rows.y
        if r.hyperplane is not None:
            w_pri = clipped_update(w_pri, miss.astype(np.float64), r.alpha, config.c1, config.c2)
        else:
            log_pub += r.alpha * miss
    return w_pri, log_pub


def ensemble_margin(rounds: Sequence[Round], rows: TrainingSet) -> np.ndarray:
    """F = Σ_t α_t h_t(x) on ``rows``, summed in round order (as :meth:`BRCModel.margin`)."""
    f = np.zeros(rows.n)
    for r in rounds:
        f += r.alpha * r.vote(rows)
    return f


def _check_count(rows: int, n: int, what: str) -> None:
    if rows != n:
        raise DataError(f"{what} read {rows:,} records, but {n:,} were counted before the "
                        "charge: the training file changed during the run")


def train(data: Data, config: BRCConfig, epsilon: float, rng: np.random.Generator,
          progress: Callable[[int], None] | None = None,
          balance: ClassBalance | None = None) -> tuple[list[Round], Trace]:
    """Run Algorithm 2 (with public columns) or Algorithm 3 (without); ε-DP in all.

    Releases: for each of the T rounds, the weighted error of a random
    linear classifier on the private features, plus Laplace noise of scale
    c1·c2·T/(ε·n) (sensitivity c1·c2/n, :func:`error_sensitivity`; ε/T per
    round, ε in total by basic composition). The noise is discrete Laplace
    on a fine power-of-two grid (:func:`grid_laplace_mechanism`, 0.2 % more
    noise): continuous noise on a float would leave the true error in the
    low-order bits of α_t, which the model file stores exactly. The classifier is drawn
    without looking at the data; the choice between it and the public
    stump, α_t and every weight update are functions of the released
    errors and of public data, so the ensemble costs nothing more.

    Passes: one over ``data`` per round (``progress(records)`` after each
    batch: T·n in all). A round draws its classifier, then in one pass
    replays the history on each batch (:func:`replay_weights`) and sums the
    private weights of the records it classifies right and wrong and the
    stump's statistics (:class:`StumpStats`); then it releases the error.
    The generator is drawn in the same order as a trainer holding every
    record: classifier, noise, classifier, noise, ... Replaying costs
    O(t) per record in round t, O(T²·n) in all; records already in memory
    (a :class:`TrainingSet`), and streams of at most :data:`KEEP_WEIGHTS`
    records (two floats a record), keep their weights between passes
    instead, which gives the same weights bit for bit in O(T·n).
    """
    n = data.n
    # class weights (λ_−, λ_+) from the released or public count: each class half the weight
    lam = balance.weights() if balance is not None else np.ones(2)
    sens = error_sensitivity(config.c1, config.c2, n, float(lam.max()))
    selecting = config.candidates > 1
    # the selection's public normalisers: the released (or public) class sizes
    sizes = balance.sizes() if balance is not None else np.array([n / 2, n / 2])
    if selecting:
        sens = edge_sensitivity(config.c2, sizes)
    eps_round = epsilon / config.rounds
    layout = data.layout
    rounds: list[Round] = []
    trace = Trace()
    stats: StumpStats | None = None
    top = 0.0   # the largest public log-weight in the previous pass
    # records in memory: their weights after the first `applied` rounds
    kept: tuple[np.ndarray, np.ndarray] | None = None
    applied = 0
    arranged: Prepared | None = None   # records in memory, arranged for scoring once
    # a stream of at most KEEP_WEIGHTS records keeps each batch's two weights between passes
    # (16 bytes a record) instead of replaying every round on every pass: O(T·n), not
    # O(T²·n) (T = 200 on Adult: 8 minutes of replays). The same weights bit for bit.
    cache: list[tuple[np.ndarray, np.ndarray]] | None = (
        [] if isinstance(data, TrainingStream) and n <= KEEP_WEIGHTS else None)
    for t in range(1, config.rounds + 1):
        # numeric inputs are scaled into [-1, 1]; one hyperplane, or K candidates
        # (drawn together: the doubles K calls of random_hyperplane would draw, brc_candidates)
        pool = draw_pool(layout, rng, config.candidates, MAX_DRAWS)
        # Public weights are read as exp(log − shift): scale-free errors, and floats that
        # stay finite for any T. The last round moved each log-weight by α·miss, |α| ≤ 1/2,
        # so the largest weight lies in [e^-1/2, 1]: none overflows and Σ w ≥ e^-1/2.
        shift = top + sum(max(0.0, r.alpha) for r in rounds[applied:] if r.stump is not None)
        top = -math.inf
        stats = stats.cleared() if stats is not None else None
        # Σ w_pri over the records each candidate classifies right, wrong (× class weight);
        # selecting: by class and right/wrong (cells 2·positive + wrong), unweighted by class
        sums = np.zeros((len(pool), 4 if selecting else 2))
        count = 0
        for b, rows in enumerate(data.chunks()):
            if rows is data:
                kept = replay_weights(rounds[applied:], rows, config, kept)
                w_pri, log_pub = kept
            elif cache is not None:
                if b < len(cache):
                    if cache[b][0].size != rows.n:
                        raise DataError(f"round {t}'s pass read a batch of {rows.n:,} records "
                                        f"where the first pass read {cache[b][0].size:,}: the "
                                        "training file changed during the run")
                    cache[b] = replay_weights(rounds[applied:], rows, config, cache[b])
                else:   # the first pass
                    cache.append(replay_weights(rounds, rows, config))
                w_pri, log_pub = cache[b]
            else:
                w_pri, log_pub = replay_weights(rounds, rows, config)
            positive = (rows.y > 0).astype(np.intp)
            lam_rows = lam[positive]
            weight = w_pri if selecting else w_pri * lam_rows
            if selecting:
                # every candidate at once, in cache-sized blocks: the same sums bit for bit
                # (brc_candidates); records in memory keep their arrangement between passes
                if rows is data:
                    if arranged is None:
                        arranged = prepare_batch(rows.private, rows.y)
                    ready = arranged
                else:
                    ready = prepare_batch(rows.private, rows.y)
                add_cell_sums(pool, rows.private, ready, weight, sums)
            else:
                miss = (pool[0].predict(rows.private) != rows.y).astype(np.intp)
                _add(sums[0], miss, weight)
            if rows.public is not None:
                if stats is None:
                    stats = StumpStats.for_columns(rows.public)
                if rows.n:
                    top = max(top, float(log_pub.max()))
                stats.add(rows.public, rows.y, np.exp(log_pub - shift) * lam_rows)
            count += rows.n
            if progress is not None:
                progress(rows.n)
        applied = len(rounds)
        _check_count(count, n, f"round {t}'s pass")
        if selecting:
            stump, err_pub = stats.best() if stats is not None else (None, 0.5)
            edges = balanced_edges(sums, sizes)
            if config.voted:
                # the public stump costs nothing: it joins every round with its exact edge
                # (a function of public columns, the public label and public weights), and
                # the selection is among the private candidates alone
                if stump is not None:
                    rounds.append(Round(0.5 - err_pub, stump=stump))
                    trace.hyperplanes.append(pool[0])
                    trace.chosen.append("public")
                k = select_candidate(edges, sens, eps_round, rng)
            else:
                # the public stump, if any, competes in the same selection with its exact edge
                k = select_candidate(edges, sens, eps_round, rng,
                                     public=0.5 - err_pub if stump is not None else None)
            if k == 2 * len(pool):
                assert stump is not None
                rounds.append(Round(0.5 - err_pub, stump=stump))
                trace.hyperplanes.append(pool[0])
                trace.chosen.append("public")
                continue
            h = pool[k % len(pool)]
            trace.hyperplanes.append(h)
            # h_k votes with +EDGE, its mirror −h_k (index K + k) with −EDGE
            rounds.append(Round(SELECTED_ALPHA if k < len(pool) else -SELECTED_ALPHA,
                                hyperplane=h))
            trace.chosen.append("private")
            trace.edges.append(float(edges[k]) if k < len(pool) else -float(edges[k - len(pool)]))
            continue
        h = pool[0]
        trace.hyperplanes.append(h)
        noisy = grid_laplace_mechanism(float(sums[0, 1] / sums[0].sum()), sensitivity=sens,
                                       epsilon=eps_round, rng=rng)
        err_pri = min(1.0, max(0.0, noisy))  # post-processing: a true error lies in [0, 1]
        if stats is not None:
            stump, err_pub = stats.best()
            if stump is not None and abs(0.5 - err_pub) > abs(0.5 - err_pri):
                rounds.append(Round(0.5 - err_pub, stump=stump))
                trace.chosen.append("public")
                continue
        rounds.append(Round(0.5 - err_pri, hyperplane=h))
        trace.chosen.append("private")
    if isinstance(data, TrainingSet):
        trace.margin = ensemble_margin(rounds, data)
    return rounds, trace


SELECTED_ALPHA = EDGE   # a selection-only round's vote weight (data-free)


def release_vote(edges: Sequence[float], sensitivity: float, epsilon: float,
                 rng: np.random.Generator) -> float:
    """The mean balanced edge of the T chosen private classifiers, released: Algorithm 2's
    private vote (:func:`with_vote`).

    Releases: (1/T)·Σ_t ±q_{k_t}, the chosen classifier's edge in round t (−q_k for a
    mirror −h_k; :func:`balanced_edges`), on the power-of-two grid with discrete Laplace
    noise of scale ``sensitivity``/ε (:func:`grid_laplace_mechanism`): ε = ``epsilon``.
    Sensitivity: given the released history (the chosen indices), each q_{k_t} moves by at
    most Δ = c2/(2·min N̂) between replace-one neighbours (:func:`edge_sensitivity`: only
    the replaced record's term changes, the normalisers are public), so their mean moves
    by at most Δ; pass Δ as ``sensitivity``. Adaptive composition with the T selections
    (which released the k_t) adds ε. An empty list releases 0 at no cost.
    """
    if not edges:
        return 0.0
    mean = float(np.mean(np.asarray(edges, dtype=np.float64)))
    return float(grid_laplace_mechanism(mean, sensitivity=sensitivity, epsilon=epsilon,
                                        rng=rng))


def vote_scale(sensitivity: float, epsilon: float) -> float:
    """The Laplace scale of :func:`release_vote`'s noise (public: Δ and ε): the grid's
    units·γ/ε (:func:`laplace_grid`), at most 0.2 % above Δ/ε."""
    grid, units = laplace_grid(sensitivity)
    return units * grid / epsilon


def vote_weight(vote: float, scale: float) -> float:
    """α̂, the private rounds' vote: the released mean edge ``vote`` shrunk towards the
    data-free EDGE by its noise ``scale`` (public), clipped to [VOTE_FLOOR, 1/2].

    α̂ = w·vote + (1 − w)·EDGE, w = EDGE²/(EDGE² + 2·scale²): the posterior mean of the
    edge under a prior centred on EDGE with standard deviation EDGE, the noise's variance
    being 2·scale². Post-processing of a released value and public facts. Why: at large n
    the noise is negligible (nycflights13, ε = 0.5: scale 7·10⁻⁴, w > 0.99) and the vote is
    the measured edge; at a few hundred rows the noise exceeds any edge (penguins, ε = 0.5:
    scale 0.3) and the vote stays near EDGE, where it was before the release. The floor
    keeps the private rounds as a tie-break among records with the same public score.
    """
    w = EDGE * EDGE / (EDGE * EDGE + 2.0 * scale * scale)
    return min(max(w * vote + (1.0 - w) * EDGE, VOTE_FLOOR), 0.5)


def with_vote(rounds: Sequence[Round], alpha: float) -> list[Round]:
    """The ensemble with every private round voting ±``alpha`` (:func:`vote_weight`);
    public rounds unchanged. Post-processing.

    Why: a selected classifier voted with the data-free EDGE = 0.1 while a public stump
    votes with its exact edge 1/2 − err. Where the private columns carry little signal the
    selection picks noise (nycflights13 with its five informative columns public: the
    chosen hyperplanes' mean balanced edge 0.001) and the 0.1 votes drowned the stumps:
    AUC 0.59 where the free stumps alone reach 0.69. With the released edge both sides vote
    in the same units, the balanced edge.
    """
    return [replace(r, alpha=math.copysign(alpha, r.alpha)) if r.hyperplane is not None else r
            for r in rounds]


def balanced_edges(sums: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Each candidate's class-balanced edge from its (K, 4) weight sums: cells 2·y + wrong
    (y = 1 positive), i.e. (negative right, negative wrong, positive right, positive wrong).

    q_k = ¼·Σ_i w_i·s_i / N̂_{y_i}, s_i = +1 where h_k is right on record i and −1 where it
    is wrong, N̂ = ``sizes`` (N̂_−, N̂_+), public normalisers. With weights 1 and the true
    class sizes it is (TPR + TNR)/2 − 1/2: the balanced accuracy's edge over chance. −h_k's
    edge is −q_k. The statistic the selection reads (:func:`select_candidate`);
    sensitivity :func:`edge_sensitivity`.
    """
    return 0.25 * ((sums[:, 0] - sums[:, 1]) / sizes[0] + (sums[:, 2] - sums[:, 3]) / sizes[1])


def edge_sensitivity(c2: float, sizes: np.ndarray) -> float:
    """Replace-one sensitivity of :func:`balanced_edges`: c2 / (2·min N̂).

    Given the released history, every other record's weight and term are the same on
    both datasets; record i's term w_i·s_i/(4·N̂_{y_i}) has |term| ≤ c2/(4·min N̂)
    (w_i ≤ c2, the clipped private weights), so replacing it moves q_k by at most twice
    that. The normalisers are public (released or exact class sizes, or n/2), so no
    other term moves, whatever the true class sizes. On balanced data (N̂ = n/2) it is
    c2/n, the paper's c1·c2/n without the c1 that normalising by Σ w costs.
    """
    return float(c2 / (2.0 * max(float(np.min(sizes)), 1.0)))


def select_candidate(edges: np.ndarray, sensitivity: float, epsilon: float,
                     rng: np.random.Generator, public: float | None = None) -> int:
    """One of 2K classifiers, h_k (index k) or its mirror −h_k (index K + k), chosen
    privately by the class-balanced edges ``edges`` (:func:`balanced_edges`); with
    ``public``, the public stump's exact edge is candidate 2K.

    Releases: one index (never an edge). Score: q_k for h_k, −q_k for −h_k (the public
    stump's edge does not change between neighbours that agree on the public columns and
    the label). Sensitivity: Δ = ``sensitivity`` (:func:`edge_sensitivity`), and −q_k moves
    as q_k. Report-noisy-max with exponential noise of scale 2Δ/ε (permute-and-flip,
    :func:`dpcli.mechanisms.exponential.noisy_max_exponential`): ε = ``epsilon``.
    """
    from dpcli.mechanisms.exponential import noisy_max_exponential

    scores = np.concatenate([edges, -edges])
    if public is not None:
        scores = np.append(scores, public)
    return noisy_max_exponential(scores, sensitivity=sensitivity, epsilon=epsilon, rng=rng)


# ------------------------------------------------------------------ calibration


@dataclass(frozen=True)
class Calibration:
    """score = σ(a·F + b), a > 0, fitted to ``counts`` (released) over ``edges`` of F."""

    a: float = LINK
    b: float = 0.0
    edges: tuple[float, ...] = ()
    counts: tuple[tuple[int, int], ...] = ()   # noisy (negative, positive) per bin
    # the class balance and the decision threshold on F (:func:`decision_threshold`); a model
    # without them (older files) predicts the paper's sign(F) (threshold 0)
    prior: float | None = None
    positives: int | None = None
    exact_count: bool = False
    threshold: float = 0.0
    # Algorithm 2, selecting: the released mean edge of the chosen private classifiers
    # (:func:`release_vote`); None where the private rounds vote with the data-free EDGE
    vote: float | None = None


def margin_edges(span: float, bins: int = CALIBRATION_BINS) -> np.ndarray:
    """``bins`` equal bins over [−span, span] (over [−1, 1] if span is 0)."""
    span = span if span > 0 else 1.0
    return np.linspace(-span, span, bins + 1)


def margin_histogram(margin: np.ndarray, y: np.ndarray, span: float,
                     bins: int = CALIBRATION_BINS) -> tuple[np.ndarray, np.ndarray]:
    """Bin edges over [−span, span] and the (bins, 2) counts of (negative, positive) rows.

    ``span`` = Σ|α_t| bounds every |F| and is public (the α's are released).
    Replace-one moves one record out of one (bin, class) cell into another:
    L1 sensitivity 2.
    """
    edges = margin_edges(span, bins)
    index = np.clip(np.searchsorted(edges, margin, side="right") - 1, 0, bins - 1)
    counts = np.zeros((bins, 2), dtype=np.int64)
    np.add.at(counts, (index, (y > 0).astype(np.int64)), 1)
    return edges, counts


def margin_counts(data: Data, rounds: Sequence[Round],
                  progress: Callable[[int], None] | None = None, bins: int | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`margin_histogram` of the ensemble's training margins: one more pass over
    ``data`` (``progress(records)`` after each batch), summing each batch's counts, in
    ``bins`` bins (:func:`margin_bins` by default).

    It cannot share the last round's pass: the bins' edges and F both need
    α_T, which that pass ends by releasing.
    """
    span = float(sum(abs(r.alpha) for r in rounds))
    bins = margin_bins(rounds) if bins is None else bins
    counts = np.zeros((bins, 2), dtype=np.int64)
    count = 0
    for rows in data.chunks():
        counts += margin_histogram(ensemble_margin(rounds, rows), rows.y, span, bins)[1]
        count += rows.n
        if progress is not None:
            progress(rows.n)
    _check_count(count, data.n, "the calibration pass")
    return margin_edges(span, bins), counts


def margin_bins(rounds: Sequence[Round]) -> int:
    """The calibration histogram's bins: :data:`CALIBRATION_BINS`, or T + 1 when fewer and
    every round is a private classifier voting ±α with one α: the selected ones' EDGE, or
    the released vote α̂ of Algorithm 2 when no public stump joined (:func:`with_vote`)
    (public: the released rounds).

    Such an F takes only the T + 1 values α·(2j − T), j = 0..T, and T + 1 equal bins
    over [−T·α, T·α] hold one value each (value j sits j/T of a bin past bin j's
    left edge). More bins would only add empty cells, whose noise the class cut
    (:func:`decision_threshold`) sums all the same."""
    selected = (all(r.hyperplane is not None for r in rounds)
                and len({abs(r.alpha) for r in rounds}) == 1)
    return min(CALIBRATION_BINS, len(rounds) + 1) if selected and rounds else CALIBRATION_BINS


def fine_bins(voted: bool, smaller: float, epsilon: float) -> bool:
    """Whether the calibration histogram takes :data:`FINE_BINS` bins instead of
    :data:`CALIBRATION_BINS`: in Algorithm 2 with the released vote (``voted``), where a class
    total of the histogram (FINE_BINS counts summed, each with discrete Laplace noise of
    scale 2/ε, variance 2·scale², ε = ``epsilon``, the calibration step's) has a standard
    deviation at most
    :data:`FINE_NOISE` of the smaller class's size ``smaller`` (exact: the label is public
    in Algorithm 2). Public facts only.

    Why: with the released vote F is the exact public stumps' sum plus T votes of the small
    α̂, spread over about a third of [−Σ|α|, Σ|α|]; 16 bins put 5-7 edges where the records
    are, and the class cut (:func:`decision_threshold`) can only take an edge. On the
    credit tuning split (ε = 1, 5 seeds × 30 noise draws) the J-best edge fell at 0 between
    two edges 0.4 apart: 30 % of the records predicted positive for 22 % positives, accuracy
    0.734 (0.764 before round 10); 32 bins gave 0.757 and balanced accuracy 0.685 (0.681)
    (benchmarks/results/brc_r10.md, "The class cut after round 10"). Where the noise is
    larger (fair, ISLP Default) more bins only add noise to the cut's sums, and the rule
    keeps 16."""
    if not voted:
        return False
    sd = math.sqrt(2.0 * FINE_BINS) * HIST_SENSITIVITY / epsilon
    return sd <= FINE_NOISE * max(smaller, 1.0)


def _noisy_counts(counts: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    return np.asarray(discrete_laplace_mechanism(counts, sensitivity=HIST_SENSITIVITY,
                                                 epsilon=epsilon, rng=rng))


def noisy_margin_histogram(margin: np.ndarray, y: np.ndarray, span: float, epsilon: float,
                           rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Release the counts of :func:`margin_histogram` with discrete Laplace noise: ε-DP.

    Releases: (bins, 2) integer counts, each plus discrete Laplace noise of
    scale 2/ε (L1 sensitivity 2 under replace-one); ε = ``epsilon``.
    """
    edges, counts = margin_histogram(margin, y, span)
    return edges, _noisy_counts(counts, epsilon, rng)


def release_calibration(edges: np.ndarray, counts: np.ndarray, epsilon: float,
                        rng: np.random.Generator) -> Calibration:
    """Platt scaling fitted to the margin histogram ``counts`` released with noise.

    Releases: the (bins, 2) counts, each plus discrete Laplace noise of
    scale 2/ε (L1 sensitivity 2 under replace-one, :func:`margin_histogram`);
    ε = ``epsilon``. The fit is post-processing: maximise the binomial
    likelihood of the clamped (≥ 0) noisy counts at the bin centres over
    a = e^θ > 0 and b. With no mass left in a class it keeps the boosting
    link σ(4F).
    """
    noisy = _noisy_counts(counts, epsilon, rng)
    a, b = _platt(edges, np.maximum(noisy, 0).astype(np.float64))
    return Calibration(a, b, tuple(map(float, edges)),
                       tuple((int(neg), int(pos)) for neg, pos in noisy))


def calibrate(margin: np.ndarray, y: np.ndarray, span: float, epsilon: float,
              rng: np.random.Generator) -> Calibration:
    """:func:`release_calibration` of the margins ``margin`` in memory (ε = ``epsilon``)."""
    edges, counts = margin_histogram(margin, y, span)
    return release_calibration(edges, counts, epsilon, rng)


def _platt(edges: np.ndarray, counts: np.ndarray) -> tuple[float, float]:
    from scipy.optimize import minimize
    from scipy.special import log_expit

    centres = (edges[:-1] + edges[1:]) / 2
    span = float(edges[-1])
    if counts[:, 0].sum() <= 0 or counts[:, 1].sum() <= 0:
        return LINK, 0.0

    def nll(theta: np.ndarray) -> float:
        z = math.exp(theta[0]) * centres + theta[1]
        return -float(counts[:, 1] @ log_expit(z) + counts[:, 0] @ log_expit(-z))

    # a within 1e-3..1e3 per unit of F/span; b within ±30 log-odds: a bounded search
    bounds = [(math.log(1e-3 / span), math.log(1e3 / span)), (-30.0, 30.0)]
    start = np.array([min(max(math.log(LINK), bounds[0][0]), bounds[0][1]), 0.0])
    theta = minimize(nll, start, method="L-BFGS-B", bounds=bounds).x
    return math.exp(float(theta[0])), float(theta[1])


#: warn when a class total's noise in the calibration histogram exceeds this share of the
#: smaller class: the cut is then close to random (on Adult's 3,000-row sample, ratios of 0.5
#: and more put every record in one class in half of the runs; 0.3 cost 0.1 of balanced
#: accuracy; 0.16 and less did not)
CALIBRATION_NOISE_LIMIT = 0.25


def calibration_noise(calibration: Calibration, n: int, epsilon: float) -> float:
    """The standard deviation of a class total of the released margin histogram (each of its
    2·bins counts has discrete Laplace noise of scale 2/ε, ε the calibration step's), over
    the smaller class's size as released (the noisy or exact positive count): how much of a
    class the cut's noise can move. Post-processing of released values and public facts."""
    bins = max(len(calibration.counts), 1)
    scale = HIST_SENSITIVITY / epsilon
    sd = math.sqrt(bins * 2 * scale * scale)   # Var of Laplace(b) is 2b², per bin
    positives = calibration.positives if calibration.positives is not None else n / 2
    smaller = max(min(positives, n - positives), 1)
    return float(sd / smaller)


def decision_threshold(edges: Sequence[float], counts: Sequence[Sequence[int]]) -> float:
    """The cut on F above which the model predicts the positive class: the margin-bin edge
    that maximises the balanced accuracy (TPR − FPR, Youden's J) estimated from the
    released margin histogram (noisy counts by bin and class).

    Post-processing of released values only. Balanced accuracy, not
    accuracy: on unbalanced labels sign(F) and score > 1/2 predict the
    majority class nearly everywhere. The raw noisy counts are summed
    (unclamped: their sums are unbiased); each class's total is its noisy
    total, at least 1. Ties go to the edge nearest 0 (the paper's sign(F)),
    and with no released mass in a class the cut is 0. Measured on the
    suite's datasets (3 seeds, ε 0.5 and 1), this cut beat the Platt score
    at the prior (σ(a·F + b) = π̂), whose fit on few noisy positive counts
    put every record in one class (ISLP Default, 3% positives), and matched
    or beat sign(F) on average (benchmarks/results/brc_imbalance.md).
    """
    if len(counts) == 0:
        return 0.0
    c = np.asarray(counts, dtype=np.float64)
    neg, pos = c[:, 0], c[:, 1]
    if pos.sum() <= 0 or neg.sum() <= 0:
        return 0.0
    e = np.asarray(edges, dtype=np.float64)
    # predicting positive from edge k on: bins k.. are positive
    tpr = np.concatenate([np.cumsum(pos[::-1])[::-1], [0.0]]) / pos.sum()
    fpr = np.concatenate([np.cumsum(neg[::-1])[::-1], [0.0]]) / neg.sum()
    j = tpr - fpr
    best = np.flatnonzero(j >= j.max() - 1e-12)
    return float(e[best[np.argmin(np.abs(e[best]))]])


def fit(data: Data, config: BRCConfig, epsilon: float, rng: np.random.Generator,
        progress: Callable[[int], None] | None = None
        ) -> tuple[list[Round], Calibration, Trace]:
    """The whole release at ε: the class count (1/20 of ε when the label is private,
    :func:`release_counts`; exact otherwise), the T rounds (their share,
    :func:`train`), then the calibration histogram of the ensemble's training
    margins (1/10, :func:`release_calibration`), from which the decision
    threshold follows (:func:`decision_threshold`, post-processing). T + 2 passes over
    ``data``; ``progress`` counts (T + 2)·n records."""
    positives = count_positives(data, progress)
    balance = release_counts(positives, data.n,
                             float(epsilon * CLASS_COUNT_SHARE) if config.counted else None, rng,
                             weight_cap(config, epsilon, data.n))
    if config.candidates > 1 and config.rounds_after_count:
        config = replace(config, rounds=select_rounds(epsilon, float(balance.sizes().min()),
                                                      config.c2, config.counted, config.voted))
    rounds, trace = train(data, config, rounds_epsilon(epsilon, config.counted, config.voted),
                          rng, progress, balance)
    vote: float | None = None
    if config.voted:
        sens, eps_vote = edge_sensitivity(config.c2, balance.sizes()), float(epsilon * VOTE_SHARE)
        vote = release_vote(trace.edges, sens, eps_vote, rng)
        rounds = with_vote(rounds, vote_weight(vote, vote_scale(sens, eps_vote)))
    eps_cal = float(epsilon * CALIBRATION_SHARE)
    fine = fine_bins(config.voted, float(balance.sizes().min()), eps_cal)
    edges, counts = margin_counts(data, rounds, progress, FINE_BINS if fine else None)
    calibration = release_calibration(edges, counts, eps_cal, rng)
    calibration = replace(calibration, prior=balance.prior, positives=balance.positives,
                          exact_count=balance.exact, vote=vote,
                          threshold=decision_threshold(calibration.edges,
                                                       calibration.counts))
    return rounds, calibration, trace


# ------------------------------------------------------------------ model


@dataclass
class BRCModel:
    """The released ensemble; predicts without touching training data."""

    schema: Schema
    columns: tuple[str, ...]
    mode: str
    public_columns: tuple[str, ...]
    rounds: list[Round]
    config: BRCConfig
    n: int
    epsilon: float
    calibration: Calibration = field(default_factory=Calibration)

    def margin(self, batch: EncodedBatch) -> np.ndarray:
        """F(x) = Σ_t α_t h_t(x) for every record of ``batch``."""
        x = _indexing(Inputs.from_columns(self.schema, self.private_columns, batch.columns,
                                          batch.n))
        pub = _indexing(Inputs.from_columns(self.schema, self.public_columns, batch.columns,
                                            batch.n))
        raw = {c: np.asarray(batch.columns[c], dtype=np.float64) for c in pub.numeric_names}
        f = np.zeros(batch.n)
        for r in self.rounds:
            vote = (r.hyperplane.predict(x) if r.hyperplane is not None
                    else r.stump.predict(pub, raw))  # type: ignore[union-attr]
            f += r.alpha * vote
        return f

    @property
    def private_columns(self) -> tuple[str, ...]:
        return tuple(c for c in self.columns if c not in self.public_columns)

    def classify(self, batch: EncodedBatch) -> tuple[np.ndarray, np.ndarray]:
        """Class probabilities (label order; the positive class gets σ(a·F + b)) and the
        class: the positive code where F > F*, the decision threshold
        (:func:`decision_threshold`: the noisy histogram's best balanced
        accuracy; 0, the paper's sign(F), in a model without one), from one
        margin."""
        from scipy.special import expit

        f = self.margin(batch)
        pos = self.schema.label.positive_index
        pos = 1 if pos is None else pos
        out = np.empty((batch.n, 2))
        out[:, pos] = expit(self.calibration.a * f + self.calibration.b)
        out[:, 1 - pos] = 1.0 - out[:, pos]
        return out, np.where(f > self.calibration.threshold, pos, 1 - pos)

    def predict_codes(self, batch: EncodedBatch) -> np.ndarray:
        return self.classify(batch)[1]

    def predict_proba(self, batch: EncodedBatch) -> np.ndarray:
        return self.classify(batch)[0]

    # ---------------------------------------------------------- serialise

    def to_payload(self) -> dict[str, Any]:
        scaling = {c.name: {"lower": c.lower, "upper": c.upper, "onto": [-1, 1]}
                   for c in self.schema.columns
                   if isinstance(c, NumericColumn) and c.name in self.private_columns}
        return {
            "mode": self.mode,
            "algorithm": ("Shen et al., Algorithm 2 (partially private features)"
                          if self.mode == "partial"
                          else "Shen et al., Algorithm 3 (all private)"),
            "columns": list(self.columns),
            "public_columns": list(self.public_columns),
            "private_columns": list(self.private_columns),
            "label_public": self.mode == "partial",
            "n": self.n,
            "T": self.config.rounds, "c1": self.config.c1, "c2": self.config.c2,
            "candidates": self.config.candidates,
            "round": ("one of 2·candidates signed random classifiers (and the public stump) "
                      "chosen by report-noisy-max on the balanced edge; votes ±edge, no error "
                      "released" if self.config.candidates > 1 else
                      "one random classifier, its weighted error released with Laplace noise"),
            "epsilon": self.epsilon,
            "class_count_private": self.config.counted,
            "epsilon_class_count": (float(self.epsilon * CLASS_COUNT_SHARE)
                                    if self.config.counted else 0.0),
            "epsilon_per_round": (rounds_epsilon(self.epsilon, self.config.counted,
                                                 self.config.voted)
                                  / self.config.rounds),
            "epsilon_calibration": float(self.epsilon * CALIBRATION_SHARE),
            "private_vote": self._vote_json(),
            **self._noise_json(),
            "scaling": scaling,
            "score": "1 / (1 + exp(-(a·F + b))), F = Σ_t alpha_t·h_t(x), h_t in {-1, +1} "
                     "(+1 = the positive class); prediction: the positive class iff "
                     "F > threshold (the margin edge of the best balanced accuracy on the "
                     "released margin histogram)",
            "class_balance": self._balance_json(),
            "threshold": self.calibration.threshold,
            "calibration": {"a": self.calibration.a, "b": self.calibration.b,
                            "margin_edges": list(self.calibration.edges),
                            "noisy_counts": [list(c) for c in self.calibration.counts],
                            "counts_columns": ["negative", "positive"]},
            "ensemble": [self._round_json(t, r) for t, r in enumerate(self.rounds, 1)],
            "schema": schema_to_dict(self.schema),
        }

    def _noise_json(self) -> dict[str, float]:
        """Each round's sensitivity and noise scale: of the released error (one candidate) or
        of the selection's balanced edges (several; N̂ the class sizes the run used)."""
        if self.config.candidates == 1:
            return {"error_sensitivity": error_sensitivity(self.config.c1, self.config.c2,
                                                           self.n, self.class_ratio),
                    "noise_scale": noise_scale(self.config, self.epsilon, self.n,
                                               self.class_ratio)}
        cal = self.calibration
        sizes = (np.array([self.n - cal.positives, cal.positives], dtype=np.float64)
                 if cal.positives is not None else np.array([self.n / 2, self.n / 2]))
        sens = edge_sensitivity(self.config.c2, sizes)
        return {"edge_sensitivity": sens,
                "noise_scale": 2 * sens * self.config.rounds
                / rounds_epsilon(self.epsilon, self.config.counted, self.config.voted)}

    def _vote_json(self) -> dict[str, Any] | None:
        """Algorithm 2 with selecting rounds: the released mean edge of the chosen private
        classifiers and the vote it gave them (:func:`release_vote`, :func:`with_vote`)."""
        if not self.config.voted:
            return None
        alpha = next((abs(r.alpha) for r in self.rounds if r.hyperplane is not None), None)
        cal = self.calibration
        sizes = (np.array([self.n - cal.positives, cal.positives], dtype=np.float64)
                 if cal.positives is not None else np.array([self.n / 2, self.n / 2]))
        eps_vote = float(self.epsilon * VOTE_SHARE)
        return {"released_mean_edge": cal.vote, "alpha": alpha, "epsilon": eps_vote,
                "noise_scale": vote_scale(edge_sensitivity(self.config.c2, sizes), eps_vote),
                "alpha_rule": "w·released + (1 − w)·edge, w = edge²/(edge² + 2·scale²), "
                              "clipped to [0.001, 0.5]",
                "public_rounds": "every round's public stump joins at no cost; T counts "
                                 "the private selections"}

    @property
    def class_ratio(self) -> float:
        """The ratio of the class weights the rounds used (1 without a class count)."""
        cal = self.calibration
        if cal.positives is None:
            return 1.0
        return float(self._weights().max())

    def _weights(self) -> np.ndarray:
        assert self.calibration.positives is not None
        return class_weights(self.n, self.calibration.positives,
                             weight_cap(self.config, self.epsilon, self.n))

    def _balance_json(self) -> dict[str, Any] | None:
        cal = self.calibration
        if cal.positives is None:
            return None
        return {"positives": cal.positives, "prior": cal.prior,
                "released": not cal.exact_count,
                "source": ("exact: the label is public" if cal.exact_count else
                           "noisy: discrete Laplace, sensitivity 1, 1/20 of epsilon"),
                "class_weights": [float(v) for v in self._weights()],
                "class_weight_cap": weight_cap(self.config, self.epsilon, self.n),
                "class_weights_order": ["negative", "positive"]}

    def _round_json(self, t: int, r: Round) -> dict[str, Any]:
        out: dict[str, Any] = {"round": t, "kind": r.kind, "alpha": r.alpha}
        if r.hyperplane is not None:
            h = r.hyperplane
            weights: dict[str, Any] = {}
            numeric = dict(zip(self._numeric(self.private_columns), h.numeric, strict=True))
            for c in self.private_columns:
                if c in numeric:
                    weights[c] = float(numeric[c])
                else:
                    levels = self.schema.column(c).levels  # type: ignore[union-attr]
                    weights[c] = dict(zip(levels, map(float, h.levels[c]), strict=True))
            out.update(intercept=h.intercept, weights=weights)
        else:
            s = r.stump
            assert s is not None
            out["column"] = s.column
            if s.signs is not None:
                levels = self.schema.column(s.column).levels  # type: ignore[union-attr]
                out["signs"] = dict(zip(levels, map(int, s.signs), strict=True))
            else:
                out.update(threshold=s.threshold, above=s.above)
        return out

    def _numeric(self, names: Iterable[str]) -> tuple[str, ...]:
        return tuple(c for c in names if isinstance(self.schema.column(c), NumericColumn))

    @classmethod
    def from_payload(cls, payload: dict[str, Any], path: Path) -> BRCModel:
        schema = schema_from_dict(payload["schema"], path)
        columns = tuple(payload["columns"])
        public = tuple(payload["public_columns"])
        private = tuple(c for c in columns if c not in public)
        numeric = tuple(c for c in private if isinstance(schema.column(c), NumericColumn))
        rounds = []
        for r in payload["ensemble"]:
            alpha = float(r["alpha"])
            if r["kind"] == "private":
                w = r["weights"]
                levels: dict[str, np.ndarray] = {}
                for c in private:  # the non-numeric ones: isinstance narrows for .levels
                    col = schema.column(c)
                    if not isinstance(col, NumericColumn):
                        levels[c] = np.array([float(w[c][v]) for v in col.levels])
                h = Hyperplane(float(r["intercept"]),
                               np.array([float(w[c]) for c in numeric]), levels)
                rounds.append(Round(alpha, hyperplane=h))
            elif r["kind"] == "public":
                column = str(r["column"])
                if "signs" in r:
                    col_levels = schema.column(column).levels  # type: ignore[union-attr]
                    signs = np.array([int(r["signs"][v]) for v in col_levels], dtype=np.int8)
                    rounds.append(Round(alpha, stump=Stump(column, signs=signs)))
                else:
                    rounds.append(Round(alpha, stump=Stump(column, float(r["threshold"]),
                                                           int(r["above"]))))
            else:
                raise ValueError(f"unknown round kind {r['kind']!r}")
        config = BRCConfig(int(payload["T"]), float(payload["c1"]), float(payload["c2"]),
                           bool(payload.get("class_count_private", False)),
                           int(payload.get("candidates", 1)),
                           partial=payload["mode"] == "partial",
                           # a file from before round 10 ran Algorithm 2's selecting rounds
                           # without free public rounds and the released vote: read as such
                           voted=payload.get("private_vote") is not None)
        cal = payload["calibration"]
        balance = payload.get("class_balance")
        calibration = Calibration(float(cal["a"]), float(cal["b"]),
                                  tuple(map(float, cal.get("margin_edges", ()))),
                                  tuple((int(c[0]), int(c[1]))
                                        for c in cal.get("noisy_counts", ())))
        vote = payload.get("private_vote")
        if vote is not None and vote.get("released_mean_edge") is not None:
            calibration = replace(calibration, vote=float(vote["released_mean_edge"]))
        if balance is not None:
            calibration = replace(calibration, prior=float(balance["prior"]),
                                  positives=int(balance["positives"]),
                                  exact_count=not bool(balance["released"]),
                                  threshold=float(payload["threshold"]))
        return cls(schema, columns, str(payload["mode"]), public, rounds, config,
                   int(payload["n"]), float(payload["epsilon"]), calibration)
