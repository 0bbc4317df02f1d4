"""Private feature selection (Stoddard, Chen & Machanavajjhala 2014 §3; PrivPfC §3.3).

A *candidate* is one selectable feature: a word of a tokens column's public
vocabulary, a binary column, or (for the χ² score) a whole categorical,
binary or numeric column, numeric columns binned into ``bins`` equal-width
bins of their declared bounds. Every candidate is scored against the label,
read as *positive class vs the rest*; a method then selects candidates
privately. The output is a :class:`Selection` that trainers accept.

Scores, with their sensitivity under replace-one neighbours (n public).
Write a1, a0 for the number of rows with F = 1 in the positive class and in
the rest, n1, n0 for the class sizes, and s for the most active binary
candidates one row can have (Σ of the tokens columns' per-row caps r, plus
one per binary column). "per feature" is the largest change of one score
(what the exponential mechanism and the sparse vector need); "L1" is the
largest change of the whole score vector summed over candidates (what
perturbation needs).

- ``tc`` total count a1 + a0. Per feature 1: a feature's count changes only
  if it is active in the removed or in the added row. L1 2s: the removed row
  touches ≤ s features by −1, the added row ≤ s features by +1.
- ``dc`` difference count |a1 − a0|. Per feature 2: a feature active in both
  rows whose label flips moves one unit from a1 to a0. L1 2s: a feature in
  both rows changes by ≤ 2, in one row by ≤ 1, and |A ∩ B|·2 + |A \\ B| +
  |B \\ A| ≤ |A| + |B| ≤ 2s.
- ``pi`` purity index max(|a1 − a0|, |b1 − b0|), b = n − a the F = 0 counts.
  Per feature 2 (each of the two differences moves by ≤ 2, so their max
  does). L1 2m over m candidates: a label flip moves every inactive
  feature's F = 0 counts. (The paper's "sensitivity 1" is add/remove.)
- ``ig`` information gain (mutual information of F and L, nats). With
  g(x) = x ln x, N·IG = Σ_cells g − Σ_F-margins g − Σ_L-margins g + g(N).
  In each of the three groups one count falls by 1 and one rises by 1; each
  unit step of g lies in [0, g(N) − g(N−1)] (g convex, g(1) − g(0) = 0), so
  each group moves by ≤ c_N = g(N) − g(N−1) ≤ ln N + 1. Per feature
  3·c_N/N; L1 m·3·c_N/N. (Brute force on small data never exceeds c_N/N:
  the bound is provable, not tight.)
- ``chi2`` PrivPfC's Cor(A, R) = Σ_v Σ_l |o_lv − e_lv|, e = row·column/N.
  With d_v = o_1v − n_v·n1/N, Cor = 2 Σ_v |d_v| for a binary label, and a
  case analysis of the four ways a record can move (same or different
  value, same or different label) gives Σ_v |Δd_v| ≤ 2. Per feature 4 —
  tight: Cor moves by 4(1 − 1/N) on N rows all in one cell when one record
  moves to a new value and label. L1 4m (every attribute holds every row).
  (PrivPfC's Lemma 4 gives 2, for add/remove.)

Methods and their cost, each ε-DP for the ``epsilon`` it is given:

- ``perturb`` (paper §3.2): noise on every score scaled to the L1
  sensitivity — discrete Laplace for the integer scores (tc, dc, pi),
  Laplace for ig and chi2 — then threshold (noisy > τ) or top k of the
  noisy scores (post-processing). Good for tc/dc with a small s; the others
  pay for all m candidates.
- ``threshold``: the sparse vector technique with a cap c = k on positives
  (:func:`dpcli.mechanisms.sparse_vector`), not the paper's Private
  Threshold Testing, which is not differentially private (docs/design.md rule 7).
  Uses the per-feature sensitivity, so its noise does not grow with m.
- ``topk``: k rounds of the exponential mechanism at ε/k (PrivPfC's
  selectFeature, sampling ∝ exp(ε·q/(2k·Δ)) with Δ re-derived for
  replace-one), run as the equivalent one-shot Gumbel top-k
  (:func:`dpcli.mechanisms.exponential_top_k`, proof there).
- ``cluster`` (paper §3.3, Algorithm 1, corrected): the candidates' count
  vectors (a0, a1) are released once with discrete Laplace noise (L1
  sensitivity 2s); k-means on the released points, a centre score computed
  from each centre (tc: c0 + c1, dc: |c1 − c0|), and the acceptance of
  whole clusters whose centre score reaches τ are post-processing. Why the
  paper's version is not private: :mod:`dpcli.mechanisms.kmeans`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np

from dpcli import params  # option tuples and limits: one definition (dpcli.params)
from dpcli.algorithms.common import cap_tokens
from dpcli.budget import Budget
from dpcli.data.schema import (
    BinaryColumn,
    CategoricalColumn,
    NumericColumn,
    Schema,
    TokensColumn,
)
from dpcli.errors import SpecError, UsageError
from dpcli.mechanisms import (
    Plan,
    PlanMisuse,
    discrete_laplace_mechanism,
    exponential_top_k,
    laplace_grid,
    laplace_mechanism,
)
from dpcli.mechanisms.kmeans import kmeans
from dpcli.mechanisms.sparse_vector import sparse_vector, sparse_vector_split
from dpcli.stats import Stats, StatsRequest

SCORES = params.FS_SCORES
BINARY_SCORES = ("tc", "dc", "pi", "ig")
INTEGER_SCORES = ("tc", "dc", "pi")
METHODS = params.FS_METHODS
CLUSTER_SCORES = ("tc", "dc")
STEP = "select"


@dataclass(frozen=True)
class Candidate:
    """One selectable feature: a column, or one word of a tokens column."""

    column: str
    word: str | None = None

    @property
    def name(self) -> str:
        return self.column if self.word is None else f"{self.column}:{self.word}"

    def to_json(self) -> dict[str, str]:
        return {"column": self.column} if self.word is None else {
            "column": self.column, "word": self.word}


@dataclass(frozen=True)
class FSConfig:
    """Public parameters of one selection (spec section ``select-features`` or the CLI).

    ``threshold`` τ is on the score's own scale (a count for tc); ``k`` is the
    number to select (topk, perturb) or the cap on positives (threshold).
    ``r`` caps the words counted per row of each tokens column (default: the
    column's ``max_per_row``). ``bins`` bins numeric columns for chi2;
    ``centers`` and ``rounds`` drive the cluster method's k-means.
    ``min_effect`` is the meaningful score gap per record (:func:`noise_check`);
    ``allow_noise`` lets a selection whose noise exceeds it run anyway.
    """

    score: str = "tc"
    method: str = "threshold"
    threshold: float | None = None
    k: int | None = None
    r: int | None = None
    bins: int = 10
    centers: int = 5
    rounds: int = 20
    min_effect: float | None = None
    allow_noise: bool = False

    def effect(self) -> float:
        """The meaningful score gap per record (``min_effect`` or the score's default)."""
        return DEFAULT_MIN_EFFECT[self.score] if self.min_effect is None else self.min_effect

    def __post_init__(self) -> None:
        if self.score not in SCORES:
            raise UsageError(f"score must be one of {', '.join(SCORES)}, got {self.score!r}")
        if self.method not in METHODS:
            raise UsageError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        for name in ("k", "r", "bins", "centers", "rounds"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise UsageError(f"{name} must be a positive integer, got {value!r}")
        if self.min_effect is not None and not (np.isfinite(self.min_effect)
                                                and self.min_effect > 0):
            raise UsageError(f"min_effect must be a positive number, got {self.min_effect}")
        if self.threshold is not None and not np.isfinite(self.threshold):
            raise UsageError(f"threshold must be a finite number, got {self.threshold}")
        need = {"perturb": "--threshold, --k or both (noisy score above τ, at most k)",
                "threshold": "--threshold and --k (the cap on selected features)",
                "topk": "--k", "cluster": "--threshold"}[self.method]
        has_t, has_k = self.threshold is not None, self.k is not None
        ok = {"perturb": has_t or has_k, "threshold": has_t and has_k,
              "topk": has_k, "cluster": has_t}[self.method]
        if not ok:
            raise UsageError(f"method {self.method} needs {need}")
        if self.method == "cluster" and self.score not in CLUSTER_SCORES:
            raise UsageError(f"method cluster works with the scores {', '.join(CLUSTER_SCORES)} "
                             f"(a centre of count vectors has no {self.score}); use perturb, "
                             "threshold or topk")

    def parameters(self) -> dict[str, Any]:
        """The public parameters the method used (for the output and the ledger).

        topk ignores a threshold and cluster ignores k, so that a spec's
        values for one method do not get in the way of another chosen on
        the command line.
        """
        uses_t = self.method in ("perturb", "threshold", "cluster")
        uses_k = self.method in ("perturb", "threshold", "topk")
        out: dict[str, Any] = {"threshold": self.threshold if uses_t else None,
                               "k": self.k if uses_k else None, "r": self.r}
        if self.score == "chi2":
            out["bins"] = self.bins
        if self.method == "cluster":
            out.update(centers=self.centers, rounds=self.rounds)
        return {key: value for key, value in out.items() if value is not None}


# ------------------------------------------------------------------ what is scored
def scored_columns(schema: Schema, columns: Sequence[str], score: str) -> tuple[str, ...]:
    """The columns to score (default: every column the score can use), checked.

    The binary scores need binary features: tokens or binary columns. chi2
    takes every declared column.
    """
    binary_kinds = (TokensColumn, BinaryColumn)
    if not columns:
        columns = tuple(c.name for c in schema.columns
                        if score == "chi2" or isinstance(c, binary_kinds))
        if not columns:
            raise UsageError(f"score {score} needs tokens or binary columns and the schema "
                             f"({schema.source}) declares none; use --score chi2")
        return columns
    for name in columns:
        col = schema.column(name)
        if score != "chi2" and not isinstance(col, binary_kinds):
            raise UsageError(f"column '{name}' is {col.kind}: score {score} scores binary "
                             "features (tokens or binary columns); use --score chi2 for "
                             "categorical and numeric columns")
    return tuple(columns)


def selection_schema(schema: Schema, columns: Sequence[str], r: int | None) -> Schema:
    """``schema`` with each scored tokens column capped at ``r`` words per row (if given).

    A tokens column with neither ``max_per_row`` nor ``r`` is refused: one row
    could then touch every word.
    """
    schema = cap_tokens(schema, columns, r)
    for name in columns:
        col = schema.column(name)
        if isinstance(col, TokensColumn) and col.max_per_row is None:
            raise SpecError(f"{schema.source}: columns.{name}.max_per_row: is required to "
                            "select words of a tokens column (or set select-features.r): it "
                            "bounds one record's contribution, and so the noise")
    return schema


def candidates(schema: Schema, columns: Sequence[str]) -> list[Candidate]:
    """The candidates in a public, data-independent order (schema order, vocabulary order)."""
    out: list[Candidate] = []
    for name in columns:
        col = schema.column(name)
        if isinstance(col, TokensColumn):
            out += [Candidate(name, word) for word in col.vocabulary]
        else:
            out.append(Candidate(name))
    return out


def row_cap(schema: Schema, columns: Sequence[str]) -> int:
    """s: the most binary candidates one row can make active (Σ token caps + binary columns)."""
    s = 0
    for name in columns:
        col = schema.column(name)
        if isinstance(col, TokensColumn):
            assert col.max_per_row is not None  # selection_schema guarantees a cap
            s += min(col.max_per_row, len(col.vocabulary))
        elif isinstance(col, BinaryColumn):
            s += 1
    return s


# -------------------------------------------------------------------- sensitivity
def ig_sensitivity(n: int) -> float:
    """3·(g(n) − g(n−1))/n with g(x) = x ln x: a bound on one IG score's change."""
    if n < 2:
        return 3.0 * np.log(2.0)
    c = n * np.log(n) - (n - 1) * np.log(n - 1)
    return 3.0 * float(c) / n


def sensitivity(score: str, m: int, s: int, n: int) -> tuple[float, float]:
    """(per-feature Δ, L1 Δ over all m candidates) of ``score``; derivations in the module doc."""
    if score == "tc":
        return 1.0, 2.0 * s
    if score == "dc":
        return 2.0, 2.0 * s
    if score == "pi":
        return 2.0, 2.0 * m
    if score == "ig":
        d = ig_sensitivity(n)
        return d, d * m
    return 4.0, 4.0 * m


# -------------------------------------------------------------------------- plan
def plan(schema: Schema, columns: Sequence[str], total: Budget, config: FSConfig,
         n: int | None = None) -> Plan:
    """One step, the whole ε, with its calibration (computable without data).

    The step's sensitivity is the one its mechanism is handed: per candidate for
    topk and threshold, the L1 of every score for perturb, 2·s for cluster's count
    vectors; ``ig``'s depends on the public n (unknown without it: None)."""
    m = len(candidates(schema, columns))
    s = row_cap(schema, columns)
    mech = {"perturb": "discrete_laplace" if config.score in INTEGER_SCORES else "laplace",
            "threshold": "sparse_vector", "topk": "exponential_top_k",
            "cluster": "discrete_laplace+kmeans"}[config.method]
    p = Plan.split(total, {STEP: (mech, Fraction(1))})
    eps = p.step(STEP).budget.eps
    if config.score == "ig":
        per, l1 = "3(ln n+1)/n", f"{m}·3(ln n+1)/n"
    else:
        d, d1 = sensitivity(config.score, m, s, 0)
        per, l1 = f"{d:g}", f"{d1:g}"
    perturb = f"{config.score} of {m:,} candidates, Δ1={l1}, scale Δ1/ε"
    if config.score not in INTEGER_SCORES and config.score != "ig":
        grid, units = laplace_grid(sensitivity(config.score, m, s, 0)[1], max(1, m))
        perturb += (f" on grid 2^{math.log2(grid):.0f} (Δ1'={units}·grid"
                    f"={units * grid:.4g}: rounding)")
    elif config.score == "ig":
        perturb += f" on grid 2^⌊log2(Δ1/(1024·{m}))⌋ (Δ1' ≤ (1+2/1024)·Δ1: rounding)"
    note = {
        "perturb": perturb,
        "threshold": (f"{config.score}, Δ={per}, cap c={config.k}, ε1/ε2 = "
                      f"{'/'.join(f'{e:.3g}' for e in sparse_vector_split(eps, config.k or 1))}"
                      f", integer comparisons on grid 2^⌊log2(Δ/1024)⌋ (D=⌈Δ/grid⌉+1)"),
        "topk": f"{config.score}, Δ={per}, k={config.k} rounds of ε/k",
        "cluster": f"count vectors of {m:,} candidates, Δ1={2 * s}, then k-means",
    }[config.method]
    sens: float | None = None
    if config.score != "ig" or n is not None:
        per_d, l1_d = sensitivity(config.score, m, s, n or 0)
        sens = {"topk": per_d, "threshold": per_d, "perturb": l1_d,
                "cluster": 2.0 * s}[config.method]
    return p.with_fields({STEP: {"note": note, "sensitivity": sens}})


def request(schema: Schema, columns: Sequence[str], config: FSConfig) -> StatsRequest:
    """The counts the scores need, in one pass (histograms for numeric columns under chi2)."""
    numeric = [c for c in columns if isinstance(schema.column(c), NumericColumn)]
    return StatsRequest(contingency=tuple(c for c in columns if c not in numeric),
                        histograms=tuple((c, config.bins) for c in numeric))


# ------------------------------------------------------------------------- scores
def positive_index(schema: Schema) -> int:
    pos = schema.label.positive_index
    if pos is None:
        raise SpecError(f"{schema.source}: label.positive: is required to score features "
                        "(scores compare the positive class with the rest)")
    return pos


def binary_counts(stats: Stats, schema: Schema, columns: Sequence[str]) -> np.ndarray:
    """(m, 2) array: rows with F = 1 outside / inside the positive class, per binary candidate."""
    pos = positive_index(schema)
    parts = []
    for name in columns:
        table = stats.contingency[name]
        if isinstance(schema.column(name), BinaryColumn):
            table = table[:, 1:2]                     # F = 1 is the second declared value
        a1 = table[pos]
        parts.append(np.stack([table.sum(axis=0) - a1, a1], axis=1))
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros((0, 2), np.int64)


def binary_scores(score: str, a: np.ndarray, n1: int, n: int) -> np.ndarray:
    """tc, dc, pi, ig or chi2 of binary candidates from their (a0, a1) counts."""
    a0, a1 = a[:, 0].astype(float), a[:, 1].astype(float)
    n0 = n - n1
    b0, b1 = n0 - a0, n1 - a1
    if score == "tc":
        return a0 + a1
    if score == "dc":
        return np.abs(a1 - a0)
    if score == "pi":
        return np.maximum(np.abs(a1 - a0), np.abs(b1 - b0))
    if score == "ig":
        def g(x: Any) -> Any:
            from scipy.special import xlogy  # on first use: ~0.2 s of start-up

            return xlogy(x, x)
        total = (g(a0) + g(a1) + g(b0) + g(b1) - g(a0 + a1) - g(b0 + b1)
                 - g(float(n1)) - g(float(n0)) + g(float(n)))
        return np.maximum(total / max(n, 1), 0.0)
    # chi2 on a 2 × 2 table: the four |o − e| are equal
    return 4.0 * np.abs(a1 - (a0 + a1) * n1 / max(n, 1))


def chi2_score(table: np.ndarray, pos: int) -> float:
    """PrivPfC's Cor(A, R) = Σ |o − e| of a (classes × levels) table, label binarised."""
    o = np.stack([table.sum(axis=0) - table[pos], table[pos]]).astype(float)
    n = o.sum()
    if n == 0:
        return 0.0
    e = o.sum(axis=1, keepdims=True) * o.sum(axis=0, keepdims=True) / n
    return float(np.abs(o - e).sum())


def compute_scores(stats: Stats, schema: Schema, columns: Sequence[str],
                   score: str) -> np.ndarray:
    """Exact (private) scores of every candidate, in :func:`candidates` order."""
    pos = positive_index(schema)
    n = int(stats.n)
    n1 = int(stats.class_counts[pos])
    out: list[np.ndarray] = []
    for name in columns:
        col = schema.column(name)
        if isinstance(col, NumericColumn):      # chi2 only (scored_columns)
            out.append(np.array([chi2_score(stats.histograms[name], pos)]))
        elif isinstance(col, CategoricalColumn):
            out.append(np.array([chi2_score(stats.contingency[name], pos)]))
        else:                                    # words and binary columns: (a0, a1) suffice
            out.append(binary_scores(score, binary_counts(stats, schema, [name]), n1, n))
    return np.concatenate(out) if out else np.zeros(0)


# ------------------------------------------------------------------------ select
@dataclass
class Selection:
    """The released selection: candidates in output order, and what produced them."""

    selected: list[Candidate]
    score: str
    method: str
    parameters: dict[str, Any]
    candidates: int
    row_cap: int
    sensitivity: dict[str, float] = field(default_factory=dict)
    released: ReleasedCheck | None = None

    @property
    def columns(self) -> list[str]:
        """Whole columns selected (not tokens columns)."""
        return [c.column for c in self.selected if c.word is None]

    @property
    def words(self) -> dict[str, list[str]]:
        """Selected words per tokens column."""
        out: dict[str, list[str]] = {}
        for c in self.selected:
            if c.word is not None:
                out.setdefault(c.column, []).append(c.word)
        return out

    def to_payload(self) -> dict[str, Any]:
        return {"score": self.score, "method": self.method, "parameters": self.parameters,
                "candidates": self.candidates, "row_cap": self.row_cap,
                "sensitivity": self.sensitivity, "n_selected": len(self.selected),
                "selected": [c.to_json() for c in self.selected],
                "columns": self.columns, "words": self.words,
                **({"degeneracy": self.released.to_json()} if self.released else {})}


def select(stats: Stats, schema: Schema, columns: Sequence[str], p: Plan, config: FSConfig,
           rng: np.random.Generator) -> Selection:
    """Score every candidate and select privately; costs exactly ``p.total`` (one step).

    ``schema`` must be the one the pass ran under (:func:`selection_schema`).
    """
    cands = candidates(schema, columns)
    m, s, n = len(cands), row_cap(schema, columns), int(stats.n)
    per, l1 = sensitivity(config.score, m, s, n)
    step = p.draw(STEP)   # the one step, drawn once
    eps = step.budget.eps
    handed = {"topk": per, "threshold": per, "perturb": l1, "cluster": 2.0 * s}[config.method]
    if step.sensitivity is not None and not math.isclose(step.sensitivity, handed,
                                                         rel_tol=1e-12):
        # the plan's Δ is the one the ledger and --dry-run show: the noise must use it
        raise PlanMisuse(f"select-features: the plan's sensitivity {step.sensitivity:g} is "
                         f"not the {handed:g} the mechanism is handed at n = {n:,}")
    released: ReleasedCheck | None = None
    noisy: np.ndarray | None  # released scores (cluster, perturb); None when only the choice is
    if config.method == "cluster":
        chosen, noisy = _cluster(binary_counts(stats, schema, columns), config, 2 * s, eps,
                                 rng)
        released = released_check(noisy, chosen, (2.0 * s / eps,) * 2)
    else:
        scores = compute_scores(stats, schema, columns, config.score)
        chosen, noisy = _by_scores(scores, config, per, l1, eps, rng)
        if noisy is not None:      # perturb: the noisy scores are the mechanism's output
            released = released_check(noisy, chosen, (l1 / eps,))
    return Selection(selected=[cands[i] for i in chosen], score=config.score,
                     method=config.method, parameters=config.parameters(), candidates=m,
                     row_cap=s, sensitivity={"per_feature": per, "l1": l1}, released=released)


def _by_scores(scores: np.ndarray, config: FSConfig, per: float, l1: float, eps: float,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
    """The chosen indices, and the released noisy scores (perturb only; else None)."""
    m = scores.size
    if config.method == "topk":
        assert config.k is not None
        return exponential_top_k(scores, min(config.k, m), sensitivity=per, epsilon=eps,
                                 rng=rng), None
    if config.method == "threshold":
        assert config.k is not None and config.threshold is not None
        found = sparse_vector(scores, config.threshold, cap=config.k, sensitivity=per,
                              epsilon=eps, rng=rng)
        return np.sort(found), None
    # perturb
    if config.score in INTEGER_SCORES:
        noisy = discrete_laplace_mechanism(np.rint(scores).astype(np.int64),
                                           sensitivity=int(l1), epsilon=eps, rng=rng)
    else:
        # float-safe: on the grid of laplace_grid(l1, m), every score may change
        noisy = laplace_mechanism(scores, sensitivity=l1, epsilon=eps, rng=rng, changes=m)
    noisy = np.asarray(noisy, dtype=float)
    # best first, ties broken at random so that equal noisy scores do not favour early ones
    order = np.lexsort((rng.random(m), -noisy))
    if config.threshold is not None:
        order = order[noisy[order] > config.threshold]
    return (order if config.k is None else order[:config.k]), noisy


def _cluster(points: np.ndarray, config: FSConfig, l1: int, eps: float,
             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Release the (a0, a1) points, cluster them, accept clusters by centre score.

    Returns the chosen indices and each point's score (tc or dc) from its released
    vector, for the released check (post-processing).
    """
    assert config.threshold is not None
    noisy = discrete_laplace_mechanism(points, sensitivity=l1, epsilon=eps, rng=rng)
    noisy = np.asarray(noisy, dtype=float)
    centres, labels = kmeans(noisy, config.centers, config.rounds, rng)
    if config.score == "tc":
        centre_score = centres.sum(axis=1)
    else:
        centre_score = np.abs(centres[:, 1] - centres[:, 0])
    accepted = np.flatnonzero(centre_score >= config.threshold)
    point_score = (noisy.sum(axis=1) if config.score == "tc"
                   else np.abs(noisy[:, 1] - noisy[:, 0]))
    return np.flatnonzero(np.isin(labels, accepted)), point_score


# ------------------------------------------------------------ trainers' side
def load_selection(path: Any, schema: Schema) -> tuple[Schema, tuple[str, ...]]:
    """Read a ``select-features`` output and apply it to ``schema`` for a trainer.

    Returns the schema with each selected tokens column's vocabulary cut to
    the selected words (in vocabulary order), and the columns to train on.
    Everything it names must be declared: a DataError names the file and
    the entry otherwise. Costs nothing: the selection was paid for when it
    was made.
    """
    from dpcli.errors import DataError
    from dpcli.io import read_envelope

    payload = read_envelope(path, "feature_selection")["payload"]
    try:
        entries = [Candidate(str(e["column"]), None if e.get("word") is None else str(e["word"]))
                   for e in payload["selected"]]
    except (KeyError, TypeError, AttributeError):
        raise DataError(f"{path}: payload.selected: must be a list of "
                        "{column, word?} entries") from None
    if not entries:
        raise DataError(f"{path}: selects no features: there is nothing to train on "
                        "(lower the threshold or raise k)")
    words: dict[str, set[str]] = {}
    chosen: list[str] = []
    for i, entry in enumerate(entries):
        if not schema.has(entry.column) or entry.column == schema.label.column:
            raise DataError(f"{path}: selected[{i}]: column '{entry.column}' is not a declared "
                            "feature column of this spec's schema")
        col = schema.column(entry.column)
        if isinstance(col, TokensColumn) != (entry.word is not None):
            raise DataError(f"{path}: selected[{i}]: column '{entry.column}' is {col.kind}; "
                            + ("a word is needed" if isinstance(col, TokensColumn)
                               else "it has no words"))
        if entry.word is not None:
            assert isinstance(col, TokensColumn)
            if entry.word not in col.vocabulary:
                raise DataError(f"{path}: selected[{i}]: word {entry.word!r} is not in the "
                                f"declared vocabulary of column '{entry.column}'")
            words.setdefault(entry.column, set()).add(entry.word)
        if entry.column not in chosen:
            chosen.append(entry.column)
    cols = []
    for col in schema.columns:
        if isinstance(col, TokensColumn) and col.name in words:
            keep = tuple(w for w in col.vocabulary if w in words[col.name])
            col = replace(col, vocabulary=keep)
        cols.append(col)
    ordered = tuple(c.name for c in schema.columns if c.name in chosen)
    return replace(schema, columns=tuple(cols)), ordered


# -------------------------------------------- is the selection above its noise?
#: the probability with which the noise must keep two candidates' scores in order
RESOLUTION_PROBABILITY = 0.9
#: default ``min_effect``, per record: a score gap of 5 % of n for the count scores
#: (tc, dc, pi) and for chi2 (Σ|o − e| / n), 0.01 nats for ig (already per record)
DEFAULT_MIN_EFFECT = {"tc": 0.05, "dc": 0.05, "pi": 0.05, "chi2": 0.05, "ig": 0.01}
#: the split rule's bounds on selection's share of a total ε (see :func:`split_rule`)
SPLIT_FLOOR, SPLIT_CAP = 0.1, 0.5


def _laplace_difference_tail(scales: Sequence[float], p: float) -> float:
    """The g with P(Σ ± L_i > g) = p (:func:`_unit_tail` on scales relative to the largest)."""
    big = max(scales)
    return big * _unit_tail(tuple(round(b / big, 12) for b in scales), p)


@functools.lru_cache(maxsize=64)
def _unit_tail(scales: tuple[float, ...], p: float) -> float:
    """The g with P(Σ ± L_i > g) = p for independent Laplace(b_i) variables (numerically).

    The density of the sum is the convolution of the Laplace densities (FFT, on
    2^17 + 1 points over ±30·Σb_i), its upper tail interpolated linearly: g is
    within 0.1 % of the closed form for two terms (tested). Laplace stands for the
    discrete Laplace of the integer scores: the same tails up to the grid unit.
    """
    half = 30.0 * float(sum(scales))
    x = np.linspace(-half, half, 2 ** 17 + 1)
    dx = x[1] - x[0]
    size = 1 << (len(scales) * x.size).bit_length()   # zero-padded: a linear convolution
    spectrum = np.ones(size // 2 + 1, dtype=complex)
    for b in scales:                                 # the product of the terms' spectra
        spectrum *= np.fft.rfft(np.exp(-np.abs(x) / b) / (2.0 * b) * dx, size)
    full = np.fft.irfft(spectrum, size)
    # the j-fold convolution of densities centred at index c sits centred at j·c
    centre = len(scales) * (x.size // 2)
    density = full[centre - x.size // 2: centre + x.size // 2 + 1]
    density = np.clip(density, 0.0, None)
    tail = np.cumsum(density[::-1])[::-1]            # P(sum ≥ x_i)
    tail /= tail[0]
    return float(np.interp(-p, -tail, x))


def resolution(score: str, method: str, m: int, s: int, n: int, k: int | None,
               epsilon: float) -> float:
    """The score gap the selection keeps in order with probability ≥ 0.9 (public facts only).

    Two candidates whose exact scores differ by g are ranked (perturb, topk,
    cluster) or judged against the threshold (threshold) the right way round with
    probability ≥ :data:`RESOLUTION_PROBABILITY` when g ≥ the value returned:

    - perturb: noisy scores differ by a difference of two Laplace(Δ1/ε);
    - cluster: a candidate's tc or dc sums two coordinates of its released count
      vector, each with Laplace(2s/ε): four Laplace terms in a difference;
    - threshold: a query's noise DLap(2cD/ε2) against the threshold's DLap(D/ε1)
      (:func:`dpcli.mechanisms.sparse_vector`, the grid inflation ignored);
    - topk: each round is the exponential mechanism at ε/k, i.e. Gumbel noise of
      scale 2kΔ/ε on every score; two Gumbels differ by a logistic variable, so
      P(wrong order) = 1/(1 + e^(g/β)) and g = β·ln(p/(1 − p)).

    Every scale is proportional to 1/ε, so the resolution is too.
    """
    per, l1 = sensitivity(score, m, s, n)
    p = 1.0 - RESOLUTION_PROBABILITY
    if method == "topk":
        beta = 2.0 * max(1, k or 1) * per / epsilon
        return beta * math.log(RESOLUTION_PROBABILITY / p)
    if method == "threshold":
        eps1, eps2 = sparse_vector_split(epsilon, k or 1)
        return _laplace_difference_tail((2.0 * (k or 1) * per / eps2, per / eps1), p)
    if method == "cluster":
        return _laplace_difference_tail((2.0 * s / epsilon,) * 4, p)
    return _laplace_difference_tail((l1 / epsilon,) * 2, p)


@dataclass(frozen=True)
class NoiseCheck:
    """Does the selection's noise at this n and ε resolve a meaningful score gap?

    Computed before anything is charged, from public facts only: n (public under
    replace-one), ε, the number of candidates m, the row cap s, k, the score's
    sensitivity and the method. ``min_effect`` is per record (a share of n for the
    count scores and chi2, nats for ig); ``gap`` is it on the score's own scale.
    """

    score: str
    method: str
    n: int
    epsilon: float
    min_effect: float
    gap: float
    resolution: float
    needed_epsilon: float
    needed_n: int | None

    @property
    def passes(self) -> bool:
        return self.resolution <= self.gap

    def message(self) -> str:
        more_n = (f" or about {self.needed_n:,} records" if self.needed_n is not None
                  else "")
        return (f"the selection's noise at n = {self.n:,} and ε = {self.epsilon:.4g} keeps two "
                f"candidates in order (probability ≥ {RESOLUTION_PROBABILITY:g}) only when "
                f"their {self.score} scores differ by ≥ {self.resolution:,.4g}, more than the "
                f"meaningful gap min_effect = {self.min_effect:g} per record "
                f"(= {self.gap:,.4g}): it would select by noise. ε ≥ "
                f"{self.needed_epsilon:.3g}{more_n} would suffice (or fewer candidates, a "
                f"smaller k or r, another method). Train on every column instead, or pass "
                f"--allow-noise (spec: allow_noise: true) to select anyway")

    def to_json(self) -> dict[str, Any]:
        return {"checked": "before the charge, from public facts (n, ε, m, s, k, method)",
                "passes": self.passes, "n": self.n, "epsilon": self.epsilon,
                "min_effect": self.min_effect, "gap": self.gap,
                "resolution": self.resolution, "probability": RESOLUTION_PROBABILITY,
                "needed_epsilon": self.needed_epsilon, "needed_n": self.needed_n}


def _gap(score: str, min_effect: float, n: int) -> float:
    """min_effect (per record) on the score's own scale."""
    return min_effect if score == "ig" else min_effect * n


def noise_check(schema: Schema, columns: Sequence[str], config: FSConfig, n: int,
                epsilon: float) -> NoiseCheck:
    """The pre-charge check of :class:`NoiseCheck` for a selection at ``epsilon`` on n records."""
    m, s = len(candidates(schema, columns)), row_cap(schema, columns)
    effect = config.effect()
    res = resolution(config.score, config.method, m, s, n, config.k, epsilon)
    gap = _gap(config.score, effect, n)
    needed_eps = epsilon * res / gap if gap > 0 else math.inf
    needed_n: int | None = None
    if gap > 0:
        # the smallest n at which it passes: the gap grows with n (counts), the ig
        # sensitivity shrinks with it; doubling then bisection, capped at 10^12
        def ok(size: int) -> bool:
            return resolution(config.score, config.method, m, s, size, config.k,
                              epsilon) <= _gap(config.score, effect, size)
        hi = max(2, n)
        while not ok(hi) and hi < 10 ** 12:
            hi *= 2
        if ok(hi):
            lo = max(1, hi // 2)
            while hi - lo > max(1, hi // 1000):
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if ok(mid) else (mid, hi)
            needed_n = hi
    return NoiseCheck(config.score, config.method, n, epsilon, effect, gap, res,
                      needed_eps, needed_n)


@dataclass(frozen=True)
class Split:
    """How one total ε is divided between selection and the training that follows."""

    total: float
    selection: float
    training: float
    needed: float          # the ε at which the selection just resolves min_effect
    bound: str             # "needed", "floor" or "cap": which part of the rule set it

    def to_json(self) -> dict[str, Any]:
        return {"rule": "selection = clip(needed ε, 0.1·total, 0.5·total)",
                "total": self.total, "selection": self.selection, "training": self.training,
                "needed": self.needed, "bound": self.bound}


def split_rule(total: float, needed: float) -> Split:
    """Selection's share of a ``total`` ε: just what it needs, within [10 %, 50 %] of it.

    ``needed`` is the ε at which the selection's resolution equals the meaningful
    gap (:func:`noise_check`'s ``needed_epsilon``; resolution ∝ 1/ε, so it is
    ε·resolution/gap), a public function of n, m, s, k and the method. The rule:

    - never more than needed: every ε that selection does not need lowers the
      trainer's noise (its scale ∝ 1/ε_train);
    - at least 10 % of the total: below that the saving for training is under
      11 % of its noise while the selection's resolution would be at the edge;
    - at most 50 %: when selection needs more than half, a model trained on what
      is left is noisier than one trained on every feature with the whole ε
      (noise ∝ 1/ε: at a half it doubles); the check then fails and the command
      refuses, so that the user trains on every column.

    Data-independent (public facts only), so the split itself costs nothing.
    """
    if not (total > 0 and math.isfinite(total)):
        raise UsageError(f"--total-epsilon must be a positive finite number, got {total}")
    lo, hi = SPLIT_FLOOR * total, SPLIT_CAP * total
    if needed <= lo:
        selection, bound = lo, "floor"
    elif needed >= hi:
        selection, bound = hi, "cap"
    else:
        # rounded UP to 4 significant digits: a short decimal that still resolves the gap
        q = 10.0 ** (math.floor(math.log10(needed)) - 3)
        selection, bound = min(hi, float(f"{math.ceil(needed / q - 1e-9) * q:.4g}")), "needed"
    selection = float(f"{selection:.12g}")
    return Split(total, selection, float(f"{total - selection:.12g}"), needed, bound)


@dataclass(frozen=True)
class ReleasedCheck:
    """Is the released selection distinguishable from a selection made by noise alone?

    Post-processing of the released noisy scores (perturb) or count vectors
    (cluster): free. Under the null of equal exact scores, the selected
    candidates' mean noisy score exceeds the median noisy score by the mean of
    the top k of m noise draws; ``null_margin`` is the 99th percentile of that
    (simulated with a fixed public seed from m, k and the noise scale alone),
    ``margin`` the released one. A margin below the null's is indistinguishable
    from noise.
    """

    margin: float
    null_margin: float
    selected: int
    everything: bool = False    # every candidate selected: nothing was told apart

    @property
    def indistinguishable(self) -> bool:
        if self.everything:
            return False
        return self.selected == 0 or self.margin <= self.null_margin

    def problem(self) -> str | None:
        if not self.indistinguishable:
            return None
        return (f"selection indistinguishable from noise: the selected candidates' noisy "
                f"scores stand {self.margin:,.4g} above the median, no more than the "
                f"{self.null_margin:,.4g} that noise alone gives 1 time in 100; a trainer "
                "on it may do worse than on every column. The file records this under "
                "'degeneracy'")

    def to_json(self) -> dict[str, Any]:
        return {"checked": "from the released noisy scores (post-processing)",
                "degenerate": self.indistinguishable, "margin": self.margin,
                "null_margin_p99": self.null_margin, "everything_selected": self.everything}


def released_check(noisy: np.ndarray, chosen: np.ndarray, noise_scales: Sequence[float]
                   ) -> ReleasedCheck:
    """:class:`ReleasedCheck` of noisy scores ``noisy`` (each a sum of Laplace(noise_scales))."""
    m, k = noisy.size, int(chosen.size)
    if k == 0 or m == 0:
        return ReleasedCheck(0.0, 0.0, k)
    margin = float(noisy[chosen].mean() - np.median(noisy))
    if k >= m:            # everything selected: nothing was told apart, nothing to judge
        return ReleasedCheck(margin, 0.0, k, everything=True)
    gen = np.random.default_rng(20_2614)    # public, fixed: the null depends on m, k, b only
    reps = max(20, min(200, 2_000_000 // m))         # bounded memory for large vocabularies
    sims = np.zeros((reps, m))
    for b in noise_scales:
        sims += gen.laplace(0.0, b, size=(reps, m))
    top = -np.sort(-sims, axis=1)[:, :k].mean(axis=1) - np.median(sims, axis=1)
    return ReleasedCheck(margin, float(np.quantile(top, 0.99)), k)
