"""Heavy-tailed noise calibrated to smooth sensitivity (Nissim, Raskhodnikova & Smith 2007).

DESIGN.md rule 7: with noise density h(z) ∝ 1/(1 + |z|^γ), γ > 1, the
release f(x) + 2(γ+1)·S(x)/ε · Z is ε-DP when S is a β-smooth upper bound on
the local sensitivity of f with β = ε/(2(γ+1)). γ = 2 is the standard
Cauchy: scale 6·S/ε with β = ε/6.

The "√(2s/ε)" scale printed in the pseudo-code of the smooth-sensitivity
naive Bayes paper (Zafarani & Clifton 2021, Algorithm 1) is NOT used: it is
not the 2(γ+1)·S/ε of the theorem that paper itself cites (it grows like √S
instead of S, and like 1/√ε instead of 1/ε), so it carries no ε-DP guarantee.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import special

from dpcli.mechanisms.rng import (
    check_int,
    check_positive,
    check_real,
    check_real_array,
    check_rng,
)


def heavy_tailed_noise(
    size: int | tuple[int, ...],
    *,
    gamma: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Draw iid Z with density h(z) = c_γ / (1 + |z|^γ), γ > 1 (an exact sampler).

    Derivation. The substitution w = u^γ / (1 + u^γ), i.e.
    u = (w / (1 - w))^(1/γ), turns ∫_0^∞ du / (1 + u^γ) into
    (1/γ) ∫_0^1 w^(1/γ - 1) (1 - w)^(-1/γ) dw, the kernel of a
    Beta(1/γ, 1 - 1/γ) density (du = (1/γ) w^(1/γ-1) (1-w)^(-1/γ-1) dw and
    1/(1 + u^γ) = 1 - w). So with W ~ Beta(1/γ, 1 - 1/γ),
    |Z| = (W / (1 - W))^(1/γ) has density ∝ 1/(1 + u^γ) on u > 0, and an
    independent random sign makes it symmetric. (The normaliser is
    c_γ = γ·sin(π/γ) / (2π); for γ = 2 this is the standard Cauchy.)

    Numerics: W is drawn as X / (X + Y) with X ~ Gamma(1/γ), Y ~ Gamma(1 - 1/γ),
    so W / (1 - W) = X / Y exactly and |Z| = exp((ln X - ln Y) / γ); this
    avoids 1 - W rounding to 0 when γ is close to 1.
    """
    gamma = _check_gamma(gamma)
    rng = check_rng(rng)
    shape = _check_size(size)
    x = rng.standard_gamma(1.0 / gamma, size=shape)
    y = rng.standard_gamma(1.0 - 1.0 / gamma, size=shape)
    with np.errstate(divide="ignore", over="ignore"):
        magnitude = np.exp((np.log(x) - np.log(y)) / gamma)
    sign = np.where(rng.random(size=shape) < 0.5, -1.0, 1.0)
    return sign * magnitude


def heavy_tailed_pdf(z: float | np.ndarray, *, gamma: float) -> float | np.ndarray:
    """Density γ·sin(π/γ) / (2π) / (1 + |z|^γ) of :func:`heavy_tailed_noise`."""
    gamma = _check_gamma(gamma)
    z = np.abs(np.asarray(z, dtype=np.float64))
    with np.errstate(over="ignore"):
        result = gamma * math.sin(math.pi / gamma) / (2.0 * math.pi) / (1.0 + z**gamma)
    return float(result) if result.ndim == 0 else result


def heavy_tailed_cdf(z: float | np.ndarray, *, gamma: float) -> float | np.ndarray:
    """CDF of :func:`heavy_tailed_noise`: 1/2 + sign(z)/2 · I_t(1/γ, 1 - 1/γ).

    Here t = |z|^γ / (1 + |z|^γ) and I is the regularised incomplete beta
    function, by the substitution in :func:`heavy_tailed_noise`. Computed as
    P(Z <= -|z|) = 1/2 · I_(1-t)(1 - 1/γ, 1/γ) (using 1 - I_t(a, b) =
    I_(1-t)(b, a) and 1 - t = expit(-γ·ln|z|)), so the lower tail keeps full
    relative precision.
    """
    gamma = _check_gamma(gamma)
    z = np.asarray(z, dtype=np.float64)
    with np.errstate(divide="ignore"):
        one_minus_t = special.expit(-gamma * np.log(np.abs(z)))
    lower = 0.5 * special.betainc(1.0 - 1.0 / gamma, 1.0 / gamma, one_minus_t)
    result = np.where(z < 0, lower, 1.0 - lower)
    return float(result) if result.ndim == 0 else result


def smooth_beta(epsilon: float, gamma: float = 2.0) -> float:
    """The smoothness β = ε / (2(γ+1)) that S must have for :func:`smooth_sensitivity_mechanism`."""
    epsilon = check_positive("epsilon", epsilon)
    gamma = _check_gamma(gamma)
    return epsilon / (2.0 * (gamma + 1.0))


def smooth_noise_scale(smooth_sensitivity: float, epsilon: float, gamma: float = 2.0) -> float:
    """The noise scale 2(γ+1)·S/ε (6·S/ε for the Cauchy, γ = 2)."""
    sensitivity = _check_smooth(smooth_sensitivity)
    epsilon = check_positive("epsilon", epsilon)
    gamma = _check_gamma(gamma)
    return 2.0 * (gamma + 1.0) * sensitivity / epsilon


def smooth_sensitivity_mechanism(
    value: float | np.ndarray,
    *,
    smooth_sensitivity: float,
    epsilon: float,
    gamma: float = 2.0,
    rng: np.random.Generator,
) -> float | np.ndarray:
    """Release value + 2(γ+1)·S/ε · Z with Z ~ h(z) ∝ 1/(1 + |z|^γ): ε-DP.

    Releases: a real statistic f(x) (``value``); an array is treated as that
    many separate releases, each costing ε (the caller composes them).
    Sensitivity: the caller supplies S = ``smooth_sensitivity``, a β-smooth
    upper bound on the local sensitivity of f under replace-one neighbours
    with β = smooth_beta(ε, γ) = ε/(2(γ+1)): LS_f(x) <= S(x) and
    S(x) <= e^β S(y) for neighbours x, y (e.g. S*_β from
    :func:`smooth_sensitivity`). S depends on the data and is itself private:
    it is only used to scale the noise, never released.
    Noise: S/α · Z with α = ε/(2(γ+1)), i.e. scale 2(γ+1)·S/ε; γ = 2 is the
    Cauchy with scale 6·S/ε and β = ε/6 (Nissim, Raskhodnikova & Smith 2007,
    Lemma 2.10 style). The "√(2s/ε)" scale of the naive Bayes paper's
    pseudo-code is NOT used.
    Cost: ε = ``epsilon`` (δ = 0).

    Proof sketch. For h(z) ∝ 1/(1 + |z|^γ),
    |d/dz ln h(z)| = γ|z|^(γ-1) / (1 + |z|^γ) <= γ (for |z| <= 1 the
    numerator is <= γ, for |z| >= 1 it is <= γ|z|^γ).
    - Sliding: between neighbours f moves by at most LS(x) <= S(x), i.e. by
      at most α noise-scale units; ln h is γ-Lipschitz, so a shift by
      |s| <= α costs at most γα = γε/(2(γ+1)).
    - Dilation: S moves by a factor e^λ with |λ| <= β, so the noise scale
      does too. The density of e^λ Z at z is e^(-λ) h(e^(-λ) z), and
      h(z) / h(e^(-λ) z) <= e^(γ|λ|) (as (1 + a^γ t) / (1 + t) <= a^γ for
      a >= 1); with the Jacobian e^(|λ|) the dilation costs at most
      (γ+1)|λ| <= (γ+1)β = ε/2.
    Total: γε/(2(γ+1)) + ε/2 < ε.

    ``smooth_sensitivity = 0`` is allowed: a β-smooth bound that is 0 at one
    dataset is 0 everywhere, so f is constant and needs no noise.
    """
    array = check_real_array("value", value)
    scalar = array.ndim == 0 and not isinstance(value, np.ndarray)
    if not np.all(np.isfinite(array)):
        raise ValueError("value must be finite")
    scale = smooth_noise_scale(smooth_sensitivity, epsilon, gamma)
    noisy = array + scale * heavy_tailed_noise(array.shape, gamma=gamma, rng=rng)
    return float(noisy) if scalar else noisy


def smooth_sensitivity(
    local_at_distance: Callable[[int], float],
    *,
    beta: float,
    max_distance: int,
    global_bound: float,
) -> float:
    """The β-smooth sensitivity S*_β = max_k e^(-βk)·A(k) (Nissim, Raskhodnikova & Smith).

    ``local_at_distance(k)`` must return A(k), the largest local sensitivity
    of f over datasets at replace-one distance <= k from the private dataset
    (so A is non-decreasing and A(k) <= ``global_bound``, the global
    sensitivity). A running maximum is taken, so passing the largest local
    sensitivity at distance exactly k is also correct. A value above
    ``global_bound`` is an error in the caller's derivation: ValueError.

    The maximum over k = 0..``max_distance`` stops early once
    e^(-βk)·global_bound <= the current maximum, since no later term can
    beat it. Terms beyond ``max_distance`` are bounded by
    e^(-β(max_distance+1))·global_bound, and that bound is included, so the
    result is a β-smooth upper bound on the local sensitivity even when
    ``max_distance`` is smaller than the dataset size (the maximum of
    β-smooth functions is β-smooth; with max_distance = n the term never
    matters, as A(n) = global_bound).

    The result is private (it depends on the data): use it only to scale
    noise, e.g. in :func:`smooth_sensitivity_mechanism` with
    beta = smooth_beta(ε, γ).
    """
    beta = check_positive("beta", beta)
    max_distance = check_int("max_distance", max_distance, minimum=0)
    global_bound = check_positive("global_bound", global_bound)
    if not callable(local_at_distance):
        raise TypeError("local_at_distance must be callable")
    best = global_bound * math.exp(-beta * (max_distance + 1))  # all k > max_distance
    running = 0.0
    for k in range(max_distance + 1):
        if global_bound * math.exp(-beta * k) <= best:
            break
        local = check_real("local_at_distance(k)", local_at_distance(k))
        if local < 0:
            raise ValueError("local_at_distance returned a negative sensitivity")
        if local > global_bound:
            raise ValueError("local_at_distance returned more than global_bound")
        running = max(running, local)
        best = max(best, math.exp(-beta * k) * running)
    return best


def _check_gamma(gamma: object) -> float:
    gamma = check_real("gamma", gamma)
    if gamma <= 1:
        raise ValueError("gamma must be greater than 1")
    return gamma


def _check_smooth(smooth_sensitivity: object) -> float:
    sensitivity = check_real("smooth_sensitivity", smooth_sensitivity)
    if sensitivity < 0:
        raise ValueError("smooth_sensitivity must be non-negative")
    return sensitivity


def _check_size(size: object) -> tuple[int, ...]:
    if isinstance(size, tuple):
        return tuple(check_int("size", s, minimum=0) for s in size)
    return (check_int("size", size, minimum=0),)
