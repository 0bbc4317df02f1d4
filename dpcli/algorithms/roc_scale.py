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
cumulative sum. Released: D + discrete Laplace noise of scale 2(n − 1)/ε_auc
(ε_auc = ``auc_share``·ε). n1 and n0 are the curve's released class totals
(post-processing). For a constant score D = 0 exactly, the noise is
symmetric and independent of the totals, so the released AUC has mean ½
exactly (also after clipping to [0, 1], which is symmetric about ½).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpcli.errors import UsageError
from dpcli.mechanisms.laplace import discrete_laplace_mechanism
from dpcli.mechanisms.rng import check_positive

TRANSFORMS = ("logit", "identity")
#: log-odds beyond ±64 are probabilities within e^-64 ≈ 1.6e-28 of 0 or 1: cut there so a
#: model with a huge declared log-odds range (a tiny noisy variance) keeps fine bins
MAX_LOG_ODDS = 64.0
#: the "noise dominates" warning: an expected |AUC error| above this
NOISE_DOMINATES = 0.1


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
            from scipy.special import expit

            return np.asarray(expit(t))
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
    return 1.0 / math.sinh(1.0 / scale)


def expected_error(n: int, epsilon: float, positives: float, negatives: float) -> float:
    """Expected |AUC error| from the noise on D: E|Z| / (2·n1·n0), public (released n1, n0)."""
    scale = pair_sensitivity(n) / check_positive("epsilon", epsilon)
    return abs_noise_mean(scale) / (2.0 * max(positives, 1.0) * max(negatives, 1.0))


@dataclass(frozen=True)
class AucRelease:
    """The released AUC: noisy D, the AUC it gives (clipped to [0, 1]) and its expected error."""

    pairs: int
    auc: float
    unclipped: float
    expected_error: float
    epsilon: float

    def to_json(self) -> dict[str, Any]:
        return {"method": "signed pair count D + discrete Laplace (Δ = 2(n−1)); "
                          "AUC = ½ + D/(2·n1·n0) with the curve's released n1, n0",
                "noisy_pairs": self.pairs, "epsilon": self.epsilon,
                "unclipped": self.unclipped}


def release_auc(d: int, *, n: int, positives: float, negatives: float, epsilon: float,
                rng: np.random.Generator) -> AucRelease:
    """Release D with discrete Laplace noise, scale 2(n−1)/ε: ε-DP under replace-one.

    ``d`` is the exact signed pair count (:func:`pair_count`, private);
    ``positives`` and ``negatives`` are already released (the curve's totals),
    so what follows the noisy D is post-processing. Cost: ``epsilon``.
    """
    noisy = int(discrete_laplace_mechanism(int(d), sensitivity=pair_sensitivity(n),
                                           epsilon=epsilon, rng=rng))
    n1, n0 = max(float(positives), 1.0), max(float(negatives), 1.0)
    raw = 0.5 + noisy / (2.0 * n1 * n0)
    return AucRelease(pairs=noisy, auc=float(min(max(raw, 0.0), 1.0)), unclipped=raw,
                      expected_error=expected_error(n, epsilon, n1, n0), epsilon=float(epsilon))
