"""The exponential mechanism (Gumbel-max, in log space), its top-k version and
report-noisy-max with exponential noise.

Scores are quality values q_i(x), higher is better; ``sensitivity`` is
Δq = max over replace-one neighbours x, y and candidates i of
|q_i(x) - q_i(y)|, supplied by the caller. Candidates that must never be
chosen get the score -inf. Scores may be large (1e9) and many (1e6): all
arithmetic is on log-probabilities shifted by the largest score, so nothing
overflows.

Floating point (rule 6; what is and is not proven). These mechanisms
release an index, never a noisy score, so the channel of Mironov (2012) —
low-order bits of a released noisy float that depend on the true value —
does not exist here. What floating point does change is the selection
probabilities: the noise comes from 53-bit uniforms (Gumbel
−log(−log u), exponential −log(1 − u)), so each draw is the exact variate
rounded at a resolution of about 2^-53 relative, and its upper tail is cut
near 37 (u cannot be closer to 1 than 2^-53); the logits are rounded to
53 bits. Coupling the float draws with exact ones, the float mechanism
returns the exact mechanism's index except when two noisy logits fall
within that rounding of each other or a draw lands beyond the cut — events
whose probability is of the order of the number of candidates times 2^-50
for logits of moderate size. So the implementation is ε-DP up to an
additive δ of that order, not pure ε-DP: a candidate whose logit trails the
leader by more than about 37 on one dataset is never chosen there, but may
be (with probability below e^-37) on a neighbour. Making the selection exact
(integer scores and a base-2 exponential mechanism, Ilvento 2020, or
permute-and-flip with exact Bernoulli(e^-x) draws) is left to do; the
sparse vector (:mod:`dpcli.mechanisms.sparse_vector`) already compares
integers.
"""

from __future__ import annotations

import numpy as np

from dpcli.mechanisms.rng import check_int, check_positive, check_real_array, check_rng


def exponential_mechanism(
    scores: np.ndarray,
    *,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
    monotonic: bool = False,
) -> int:
    """Select one index i with probability ∝ exp(ε·q_i / (2Δ)): ε-DP.

    Releases: the index of one candidate (never its score).
    Sensitivity: the caller supplies Δ = ``sensitivity``, the largest change
    of any single score between replace-one neighbours.
    Noise: Gumbel-max. i = argmax_i (ε·q_i/(2Δ) + G_i) with G_i iid standard
    Gumbel has exactly the softmax distribution above (the Gumbel-max trick);
    it needs no exponentials, so scores up to 1e9 and 1e6 candidates are fine.
    Equivalently, Gumbel noise of scale 2Δ/ε is added to each score and the
    largest noisy score is reported.
    Cost: ε = ``epsilon`` (δ = 0). Proof: between neighbours each numerator
    exp(ε q_i/(2Δ)) changes by a factor of at most e^(ε/2), and so does the
    normalising sum; the ratio of probabilities is at most e^ε.

    ``monotonic=True`` uses exp(ε·q_i/Δ) instead. This is valid only when the
    scores are monotonic: between any two neighbours all scores move in the
    same direction (all go up or all go down, e.g. counts under add/remove).
    Then numerator and normaliser cannot both move against the output, and
    the factor 2 is not needed. Under replace-one most scores are NOT
    monotonic (a count can go up while another goes down): do not pass
    ``monotonic=True`` unless you have proved it for your score.

    Scores equal to -inf are never chosen; if all are -inf, ValueError.
    """
    factor = 1.0 if _check_flag("monotonic", monotonic) else 2.0
    logits = _logits(scores, sensitivity=sensitivity, epsilon=epsilon, factor=factor)
    rng = check_rng(rng)
    noisy = logits + rng.gumbel(size=logits.shape)
    return int(np.argmax(noisy))


def exponential_probabilities(
    scores: np.ndarray,
    *,
    sensitivity: float,
    epsilon: float,
    monotonic: bool = False,
) -> np.ndarray:
    """The exact selection probabilities of :func:`exponential_mechanism`.

    A softmax of ε·q/(2Δ) (ε·q/Δ when ``monotonic``) via log-sum-exp. These
    are functions of the private scores: use them for tests and for showing
    a plan on public scores, never print them for private scores.
    """
    factor = 1.0 if _check_flag("monotonic", monotonic) else 2.0
    logits = _logits(scores, sensitivity=sensitivity, epsilon=epsilon, factor=factor)
    weights = np.exp(logits)  # the largest logit is 0, so no overflow
    return weights / weights.sum()


def exponential_top_k(
    scores: np.ndarray,
    k: int,
    *,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Select k distinct indices, in selection order: ε-DP.

    Releases: an int64 array of k distinct candidate indices, best first
    (never their scores).
    Sensitivity: the caller supplies Δ = ``sensitivity``, the largest change
    of any single score between replace-one neighbours.
    Noise: one-shot Gumbel top-k. Gumbel noise of scale 2Δk/ε is added to
    every score (computed as standard Gumbel noise on ε·q/(2Δk)) and the k
    largest noisy scores are reported, largest first.
    Cost: ε = ``epsilon`` (δ = 0) in total.

    Proof. (1) Equivalence: the output has exactly the distribution of
    *peeling*, i.e. k rounds of :func:`exponential_mechanism` each with ε/k,
    each round removing the candidate chosen before (Durfee & Rogers,
    NeurIPS 2019, "Practical differentially private top-k selection with
    pay-what-you-get composition", §4.1, Lemma 4.2). Self-contained
    argument: with l_i = ε·q_i/(2Δk) and G_i iid standard Gumbel,
    E_i = exp(-(l_i + G_i)) are independent exponential variables with rates
    w_i = e^(l_i), and sorting l_i + G_i downwards is sorting E_i upwards.
    The smallest E_i is i with probability w_i / Σ_j w_j; by memorylessness,
    given that, the residuals E_j - E_i of the others are again independent
    exponentials with the same rates, so the next is chosen ∝ w_j among the
    rest, and so on: exactly the peeling probabilities.
    (2) Privacy: each peeling round is the exponential mechanism with ε/k on
    the candidates not yet chosen (a set fixed by the earlier outputs), so it
    is ε/k-DP; k adaptive rounds compose to ε by basic composition.

    Scores equal to -inf are never chosen; ValueError if fewer than k scores
    are finite, or if k is not between 1 and the number of candidates.
    """
    k = check_int("k", k, minimum=1)
    logits = _logits(scores, sensitivity=sensitivity, epsilon=epsilon, factor=2.0 * k)
    if k > logits.size:
        raise ValueError("k must not exceed the number of candidates")
    if k > np.count_nonzero(logits > -np.inf):
        raise ValueError("k must not exceed the number of candidates with a finite score")
    rng = check_rng(rng)
    noisy = logits + rng.gumbel(size=logits.shape)
    top = np.argpartition(-noisy, k - 1)[:k]
    order = np.argsort(-noisy[top], kind="stable")
    return top[order].astype(np.int64)


def noisy_max_exponential(
    scores: np.ndarray,
    *,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
) -> int:
    """Report the index of the largest score plus exponential noise: ε-DP.

    Releases: one index i* = argmax_i (q_i + Z_i), Z_i iid exponential with
    mean 2Δ/ε (never a score or a noisy score).
    Sensitivity: the caller supplies Δ = ``sensitivity``, the largest change
    of any single score between neighbours.
    Cost: ε = ``epsilon`` (δ = 0). Proof: report-noisy-max with one-sided
    exponential noise of scale 2Δ/ε has exactly the output distribution of
    the permute-and-flip mechanism with exp(ε(q_i − max q)/(2Δ)) (Ding,
    Kifer et al., "The permute-and-flip mechanism is identical to
    report-noisy-max with exponential noise", 2021), which McKenna & Sheldon
    (NeurIPS 2020) prove ε-DP for scores of sensitivity Δ, monotone or not.
    This is the selection step of Chaudhuri & Vinterbo's Algorithm 1
    (t_i = q_i + 2β·Exp(mean 1/ε2)); it is never worse in expected score
    than the exponential mechanism at the same ε.

    Scores equal to -inf are never chosen; if all are -inf, ValueError.
    """
    logits = _logits(scores, sensitivity=sensitivity, epsilon=epsilon, factor=2.0)
    rng = check_rng(rng)
    # on the logit scale ε·q/(2Δ) the noise is a standard exponential
    noisy = logits + rng.standard_exponential(size=logits.shape)
    return int(np.argmax(noisy))


def _logits(scores: np.ndarray, *, sensitivity: float, epsilon: float,
            factor: float) -> np.ndarray:
    """ε·(q - max q)/(factor·Δ), with -inf kept for -inf scores; validates everything."""
    array = check_real_array("scores", scores)
    if array.ndim != 1 or array.size == 0:
        raise ValueError("scores must be a non-empty one-dimensional sequence")
    if np.any(np.isnan(array)) or np.any(array == np.inf):
        raise ValueError("scores must be finite or -inf")
    coefficient = check_positive("epsilon", epsilon) / (
        factor * check_positive("sensitivity", sensitivity))
    if not np.isfinite(coefficient):
        raise ValueError("epsilon / sensitivity is too large")
    finite = array > -np.inf
    if not finite.any():
        raise ValueError("all scores are -inf: there is nothing to select")
    logits = np.full(array.shape, -np.inf)
    with np.errstate(over="ignore"):  # a difference below -1.8e308 is -inf: weight 0
        logits[finite] = (array[finite] - array[finite].max()) * coefficient
    return logits


def _check_flag(name: str, value: object) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False")
    return bool(value)
