"""The score scale PriROC bins on, and the AUC released directly (issue 20, point 3).

Why a scale: a naive Bayes model's probabilities pile up near 0 and 1, and a
strongly regularised logistic regression squeezes them into a narrow band
around ½. Equal-width bins of [0, 1] then put most records into one or two
bins, and an AUC read off those bins is badly biased. Binning on the model's
log-odds instead spreads them out. The transform is a public function of the
released model applied to each record alone, so replace-one neighbours stay
replace-one neighbours: it costs no ε.

Transforms (``transform`` in the spec's roc section, ``--transform``):

- ``logit`` (the default for models that give log-odds: naive Bayes and
  logistic regression). The score is the model's log-odds of the positive
  class, computed from its log-likelihoods (never from a rounded
  probability, which saturates at 0 and 1). The range is the model's exact
  log-odds range over the declared domain (:func:`dpcli.algorithms.degenerate.check`:
  the released parameters and the spec's bounds and levels only), cut to
  [-MAX_LOG_ODDS, MAX_LOG_ODDS]. For other models and for a score column
  whose declared range lies within [0, 1], ``logit`` means logit(score)
  within [logit(lower), logit(upper)], cut the same way.
- ``identity``: the score itself on its declared range (the default for
  score columns and for models without log-odds).

Thresholds released on the logit scale are reported as probabilities
(σ(t), monotone: the same rule "score > threshold") beside the scale.

The AUC released directly
-------------------------
AUC = P(s⁺ > s⁻) + ½·P(s⁺ = s⁻) over positive/negative pairs
= ½ + D/(2·n1·n0) with the signed pair count

    D = Σ_{i positive, j negative} sign(s_i − s_j).

Sensitivity under replace-one: a record r meets at most n − 1 records of the
other class, one term each, every term in [−1, 1]. Replacing r by r' of the
same class changes each of r's k ≤ n − 1 terms by at most 2 (2k); of the other
class, it removes r's k terms and adds r''s n − 1 − k (at most n − 1 in all).
So ΔD = 2(n − 1), reached by a lone positive moving from the top score to the
bottom (tests/algorithms/test_roc_scale.py brute-forces it).

D is counted on the fine grid of :mod:`dpcli.algorithms.roc` (2^20 equal cells
of the scale's range): scores in one cell tie (a term of 0). Quantising is a
per-record function, so ΔD is unchanged. Counts per (class, cell) add over
batches: memory is bounded (16 MiB) whatever n is, and D follows from one
cumulative sum. Released, from ε_auc = ``auc_share``·ε:

- D + discrete Laplace noise of scale 2(n − 1)/ε_D, ε_D = ¾·ε_auc;
- n1 + discrete Laplace noise of scale 1/ε_n, ε_n = ¼·ε_auc (a record changing
  class moves n1 by 1), clipped to [1, n − 1]; n0 = n − n1 (n is public).

Why a count of its own: the AUC divides by n1·n0, and an error δ in n1 moves
it by about (AUC − ½)·δ·(n0 − n1)/(n1·n0). The curve's class totals carry the
noise of a whole tree of counts; a single count at ¼ of the AUC's ε is far
more precise (on Adult's test set the curve's n1 doubled the AUC's error).
The ¾ / ¼ split is a public rule: to first order the error is
a/ε_D + b/ε_n with a = (n − 1)/(n1·n0) and b = |AUC − ½|·|n0 − n1|/(n1·n0),
minimised at ε_n/ε_D = √(b/a) = √(|AUC − ½|·|n0 − n1|/(n − 1)), about ⅓ for
typical AUCs (0.7–0.9) and class shares (20–35%).

The stated error (``auc_error``, public: from the noise scales and the
released n1) is E|Z_D|/(2·n1·n0) + ½·|n0 − n1|/(n1·n0)·E|Z_n|, the first-order
expected |error| with |AUC − ½| at its bound ½.

For a constant score D = 0 exactly, the noise on D is symmetric and
independent of n1's, so the released AUC has mean ½ exactly (also after
clipping to [0, 1], which is symmetric about ½).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpcli import params  # option tuples and limits: one definition (dpcli.params)
from dpcli.errors import UsageError
from dpcli.mechanisms.laplace import discrete_laplace_mechanism
from dpcli.mechanisms.rng import check_positive

TRANSFORMS = params.ROC_TRANSFORMS
#: log-odds beyond ±64 are probabilities within e^-64 ≈ 1.6e-28 of 0 or 1: cut there so a
#: model with a huge declared log-odds range (a tiny noisy variance) keeps fine bins
MAX_LOG_ODDS = 64.0
#: the "noise dominates" warning: an expected |AUC error| above this
NOISE_DOMINATES = 0.1
#: the AUC's ε on the pair count; the rest on its count of positives (module docstring)
PAIRS_SHARE = Fraction(3, 4)


@dataclass(frozen=True)
class Scale:
    """The public scale scores are binned on: its transform, range and origin."""

    transform: str
    lower: float
    upper: float
    source: str   # in words, for curve.json

    def to_score(self, t: np.ndarray) -> np.ndarray:
        """Thresholds on this scale back on the score's own scale (σ for logit)."""
        t = np.asarray(t, dtype=np.float64)
        if self.transform == "logit":
            # σ(t) as e^t/(1 + e^t) below 0 and 1/(1 + e^−t) above: relative precision kept
            # for tiny scores, no overflow at ±∞, and no scipy.special import (about 0.2 s
            # of roc's start-up for a few hundred values)
            e = np.exp(-np.abs(t))
            return np.where(t < 0, e / (1.0 + e), 1.0 / (1.0 + e))
        return t

    def to_json(self) -> dict[str, Any]:
        return {"transform": self.transform, "range": [self.lower, self.upper],
                "source": self.source}


def has_log_odds(model: Any) -> bool:
    """Whether ``model`` gives its log-odds directly (naive Bayes, logistic regression)."""
    return model is not None and (hasattr(model, "joint_log_likelihood")
                                  or (hasattr(model, "weights") and hasattr(model, "design")))


def model_log_odds(model: Any, batch: Any, positive: int) -> np.ndarray:
    """log P(positive | x) − log P(other | x) for each record (private): no saturation."""
    from dpcli.algorithms.degenerate import _log_odds

    z = np.asarray(_log_odds(model, batch), dtype=np.float64)  # class 1 against class 0
    return z if positive == 1 else -z


def resolve(transform: str | None, *, model: Any, lower: float, upper: float) -> Scale:
    """The scale for these scores, from public facts only (the model, the declared range)."""
    if transform is not None and transform not in TRANSFORMS:
        raise UsageError(f"transform must be one of {', '.join(TRANSFORMS)}, got {transform!r}")
    if transform is None:
        transform = "logit" if has_log_odds(model) else "identity"
    if transform == "identity":
        return Scale("identity", float(lower), float(upper), "the score on its declared range")
    if has_log_odds(model):
        from dpcli.algorithms.degenerate import check

        verdict = check(model)
        if verdict is not None:
            lo, hi = verdict.log_odds
            positive = model.schema.label.positive_index
            if positive == 0:
                lo, hi = -hi, -lo
            return _log_odds_scale(lo, hi, "the model's log-odds range over the declared "
                                           "domain (released parameters and declared bounds)")
    if not 0.0 <= lower < upper <= 1.0:
        raise UsageError(f"--transform logit needs scores that are probabilities: the declared "
                         f"range [{lower:g}, {upper:g}] is not within [0, 1]")
    with np.errstate(divide="ignore"):
        lo, hi = (float(np.log(p) - np.log1p(-p)) for p in (lower, upper))
    return _log_odds_scale(lo, hi, "logit of the score's declared range")


def _log_odds_scale(lo: float, hi: float, source: str) -> Scale:
    lo, hi = max(lo, -MAX_LOG_ODDS), min(hi, MAX_LOG_ODDS)
    if not hi - lo > 1e-6:  # a constant model: any range holds its one score
        mid = min(max((lo + hi) / 2.0, -MAX_LOG_ODDS + 1.0), MAX_LOG_ODDS - 1.0)
        lo, hi = mid - 1.0, mid + 1.0
    return Scale("logit", lo, hi, source + f", cut to ±{MAX_LOG_ODDS:g}")


def scorer(scale: Scale, model: Any, positive: int,
           score: Callable[[Any], np.ndarray]) -> Callable[[Any], np.ndarray]:
    """Each record's score on ``scale`` (private): a per-record public transform of ``score``."""
    if scale.transform == "identity":
        return score
    if has_log_odds(model):
        return lambda batch: model_log_odds(model, batch, positive)

    def logit(batch: Any) -> np.ndarray:
        p = np.clip(np.nan_to_num(np.asarray(score(batch), dtype=np.float64), nan=0.0), 0, 1)
        with np.errstate(divide="ignore"):
            return np.log(p) - np.log1p(-p)   # ±inf are clamped into the range by the pass
    return logit


# --------------------------------------------------------------------------- the AUC


def pair_count(counts: np.ndarray) -> int:
    """D = Σ_{pos, neg} sign(s_pos − s_neg) from (2, cells) counts by ASCENDING score (private).

    Row 0 counts positives, row 1 negatives; equal cells tie. Exact in int64
    for n < 3·10^9.
    """
    c = np.asarray(counts, dtype=np.int64)
    pos, neg = c[0], c[1]
    below = np.cumsum(neg) - neg          # negatives in lower cells
    above = int(neg.sum()) - below - neg  # negatives in higher cells
    return int(np.dot(pos, below - above))


def pair_sensitivity(n: int) -> int:
    """ΔD = 2(n − 1) under replace-one (module docstring)."""
    return max(2 * (int(n) - 1), 1)


def abs_noise_mean(scale: float) -> float:
    """E|Z| for discrete Laplace noise of scale b (q = e^(−1/b)): 2q/(1 − q²) = 1/sinh(1/b)."""
    a = 1.0 / scale
    return 0.0 if a > 700 else 1.0 / math.sinh(a)  # past e^700: no noise at float precision


def expected_error(n: int, epsilon: float, positives: float, negatives: float,
                   positives_epsilon: float | None = None) -> float:
    """Expected |AUC error| from the noise (public: scales and released n1, n0).

    E|Z_D|/(2·n1·n0), plus ½·|n0 − n1|/(n1·n0)·E|Z_n| when n1 is noised at
    ``positives_epsilon`` (module docstring).
    """
    n1, n0 = max(positives, 1.0), max(negatives, 1.0)
    scale = pair_sensitivity(n) / check_positive("epsilon", epsilon)
    out = abs_noise_mean(scale) / (2.0 * n1 * n0)
    if positives_epsilon is not None:
        n_scale = 1.0 / check_positive("positives_epsilon", positives_epsilon)
        out += 0.5 * abs(n0 - n1) / (n1 * n0) * abs_noise_mean(n_scale)
    return out


@dataclass(frozen=True)
class AucRelease:
    """The released AUC: noisy D, the AUC it gives (clipped to [0, 1]) and its expected error."""

    pairs: int
    positives: int
    auc: float
    unclipped: float
    expected_error: float
    epsilon: float

    def to_json(self) -> dict[str, Any]:
        return {"method": "signed pair count D + discrete Laplace (Δ = 2(n−1)), positives n1 "
                          "+ discrete Laplace (Δ = 1); AUC = ½ + D/(2·n1·(n − n1))",
                "noisy_pairs": self.pairs, "noisy_positives": self.positives,
                "epsilon": self.epsilon,
                "unclipped": self.unclipped}


def release_auc(d: int, positives: int, *, n: int, epsilon: float, positives_epsilon: float,
                rng: np.random.Generator) -> AucRelease:
    """Release D and n1 with discrete Laplace noise: (ε + ε_n)-DP under replace-one.

    ``d`` is the exact signed pair count (:func:`pair_count`, private), released
    with scale ΔD/ε = 2(n−1)/``epsilon``; ``positives`` the exact number of
    positives (private), released with scale 1/``positives_epsilon`` (Δ = 1) and
    clipped to [1, n − 1]. The AUC ½ + D̃/(2·ñ1·(n − ñ1)), clipped to [0, 1], is
    post-processing. Cost: ``epsilon`` + ``positives_epsilon``.

    Sensitivities (replace-one): a record is in at most n − 1 pairs, each term
    in [−1, 1], so replacing it moves D by at most 2(n − 1); it moves n1 by at
    most 1 (its label). Both are brute-forced in tests/algorithms/test_roc_scale.py.
    """
    noisy = int(discrete_laplace_mechanism(int(d), sensitivity=pair_sensitivity(n),
                                           epsilon=epsilon, rng=rng))
    noisy_n1 = int(discrete_laplace_mechanism(int(positives), sensitivity=1,
                                              epsilon=positives_epsilon, rng=rng))
    n1 = float(min(max(noisy_n1, 1), max(n - 1, 1)))
    n0 = max(n - n1, 1.0)
    raw = 0.5 + noisy / (2.0 * n1 * n0)
    return AucRelease(pairs=noisy, positives=int(n1), auc=float(min(max(raw, 0.0), 1.0)),
                      unclipped=raw, epsilon=float(epsilon + positives_epsilon),
                      expected_error=expected_error(n, epsilon, n1, n0, positives_epsilon))
