"""Heavy-tailed noise calibrated to smooth sensitivity (Nissim, Raskhodnikova & Smith 2007).

docs/design.md rule 7: with noise density h(z) ∝ 1/(1 + |z|^γ), γ > 1, the
release f(x) + 2(γ+1)·S(x)/ε · Z is ε-DP when S is a β-smooth upper bound on
the local sensitivity of f with β = ε/(2(γ+1)). γ = 2 is the standard
Cauchy: scale 6·S/ε with β = ε/6.

Rule 6 (float safety, Mironov 2012): what is released is the discrete
counterpart on a public grid, :func:`smooth_sensitivity_mechanism`: the
value rounded to the grid plus integer noise with P(k) ∝ 1/(1 + |k/t|^γ),
the rounding paid for by S + grid; the guarantee is re-proved there. The
continuous sampler :func:`heavy_tailed_noise` is its proposal distribution.

The "√(2s/ε)" scale printed in the pseudo-code of the smooth-sensitivity
naive Bayes paper (Zafarani & Clifton 2021, Algorithm 1) is NOT used: it is
not the 2(γ+1)·S/ε of the theorem that paper itself cites (it grows like √S
instead of S, and like 1/√ε instead of 1/ε), so it carries no ε-DP guarantee.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

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
    from scipy import special  # imported when needed: scipy.special costs ~0.2 s at start-up
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


SMOOTH_GRID_STEPS = 2**30  # grid steps across a statistic's public range (smooth_grid)


def smooth_grid(width: float) -> float:
    """2^⌊log2(width / 2^30)⌋: a public grid for a statistic whose values span ``width``.

    ``width`` must be public (e.g. U − L for a mean within declared bounds).
    The grid is about 1e-9 of the range, so the rounding's inflation of the
    smooth bound (S + γ_grid, :func:`smooth_sensitivity_mechanism`) is
    negligible unless S itself is below 1e-9 of the range.
    """
    width = check_positive("width", width)
    return math.ldexp(1.0, math.floor(math.log2(width / SMOOTH_GRID_STEPS)))


def smooth_sensitivity_mechanism(
    value: float | np.ndarray,
    *,
    smooth_sensitivity: float,
    epsilon: float,
    gamma: float = 2.0,
    rng: np.random.Generator,
    grid: float,
    on_grid: bool = False,
) -> float | np.ndarray:
    """Release value on the public ``grid`` plus discrete heavy-tailed noise: ε-DP, float-safe.

    Releases: a real statistic f(x) (``value``) as a multiple k·g of the
    public grid g = ``grid`` (a power of two makes the rounding exact); an
    array is treated as that many separate releases, each costing ε (the
    caller composes them). Nothing continuous is added to a float (Mironov
    2012): the output is g·(round(f(x)/g) + K) with K an integer.
    Sensitivity: the caller supplies S = ``smooth_sensitivity``, a β-smooth
    upper bound on the local sensitivity of f under the caller's neighbour
    relation with β = smooth_beta(ε, γ) = ε/(2(γ+1)): LS_f(x) <= S(x) and
    S(x) <= e^β S(y) for neighbours x, y (e.g. S*_β from
    :func:`smooth_sensitivity`). S depends on the data and is itself private:
    it is only used to scale the noise, never released.
    Rounding inflation: r(x) = round(f(x)/g) moves by at most
    |f(x) − f(y)|/g + 1 <= (S(x) + g)/g grid steps between neighbours, and
    S' = S + g is again β-smooth (S(x) + g <= e^β S(y) + g <= e^β (S(y) + g)).
    With ``on_grid=True`` the value must already be a multiple of g (ValueError
    otherwise; e.g. a median of grid points) and S' = S: no inflation.
    Noise: K with P(K = k) ∝ φ_t(k) = 1/(1 + |k/t|^γ) on the integers
    (:func:`discrete_heavy_tailed_noise`), t = 2(γ+1)·S'/(ε·g) grid steps,
    i.e. scale 2(γ+1)·S'/ε in the value's units as for the continuous
    mechanism (γ = 2: 6·S'/ε). The "√(2s/ε)" scale of the naive Bayes
    paper's pseudo-code is NOT used.
    Cost: ε = ``epsilon`` (δ = 0).

    Proof (the smooth-sensitivity argument of Nissim, Raskhodnikova & Smith
    2007, redone for a discrete noise on a grid). P_x(g·j) = p_(t_x)(j − r_x)
    with p_t(k) = φ_t(k)/C(t), C(t) = Σ_k φ_t(k). For neighbours x, y write
    P_x(g·j)/P_y(g·j) = [p_(t_x)(k)/p_(t_x)(k + s)]·[p_(t_x)(k + s)/p_(t_y)(k + s)]
    with k = j − r_x, s = r_x − r_y.
    - Sliding: |d/du ln φ_t(u)| = (γ/t)·|u/t|^(γ−1)/(1 + |u/t|^γ) <= γ/t, so
      the first factor is within e^(±γ|s|/t_x); |s| <= S'(x)/g = α·t_x with
      α = ε/(2(γ+1)): a cost of at most γα = γε/(2(γ+1)).
    - Dilation: t_y = e^λ t_x with |λ| <= β (S' is β-smooth). For t' >= t,
      φ_t'(k)/φ_t(k) is in [1, (t'/t)^γ] for every k, hence so is
      C(t')/C(t), and the ratio p_t'(k)/p_t(k) of the two lies in
      [(t/t')^γ, (t'/t)^γ]: a cost of at most γ|λ| <= γβ = γε/(2(γ+1)).
      (The continuous mechanism pays (γ+1)β here, for its Jacobian.)
    Total: γε/(γ+1) < ε.

    ``smooth_sensitivity = 0`` with ``on_grid`` gives t = 0 and no noise: a
    β-smooth bound that is 0 at one dataset is 0 everywhere, so f is constant.
    """
    array = check_real_array("value", value)
    scalar = array.ndim == 0 and not isinstance(value, np.ndarray)
    if not np.all(np.isfinite(array)):
        raise ValueError("value must be finite")
    g = check_positive("grid", grid)
    if not isinstance(on_grid, bool | np.bool_):
        raise TypeError("on_grid must be True or False")
    k = np.rint(array / g)
    if on_grid and not np.array_equal(k * g, array):
        raise ValueError("value must be a multiple of grid when on_grid is set")
    inflated = _check_smooth(smooth_sensitivity) + (0.0 if on_grid else g)
    steps = smooth_noise_scale(inflated, epsilon, gamma) / g
    noise = discrete_heavy_tailed_noise(array.shape, gamma=gamma, scale=steps, rng=rng)
    noisy = (k + noise) * g
    return float(noisy) if scalar else noisy


def discrete_heavy_tailed_noise(
    size: int | tuple[int, ...],
    *,
    gamma: float,
    scale: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Draw iid integers K with P(K = k) ∝ φ(k) = 1/(1 + |k/t|^γ), t = ``scale``, γ > 1.

    Returned as an integer-valued float64 array (t = 0: all zeros).
    Sampler (rejection from the continuous density, exact up to the float
    evaluation of the acceptance ratio): with s = max(t, 1) and ψ(u) =
    1/(1 + |u/s|^γ), draw U = s·Z, Z from :func:`heavy_tailed_noise`
    (density ∝ ψ), K = round(U), and accept with probability
    φ(K)/(M·ψ(U)). An accepted U has density ∝ φ(round(u)), flat on each
    unit cell, so K has P(K = k) ∝ φ(k). It needs M >= sup_u φ(round(u))/ψ(u)
    = max_k φ(k)/ψ(|k| + 1/2), and φ <= ψ (t <= s), so the bound for t = s
    serves: for k = 0 it is 1 + (2s)^(−γ); for |k| >= 1, with
    a = (|k| + 1/2)/s <= 1.5·b, b = |k|/s, (1 + a^γ)/(1 + b^γ) <= 1.5^γ, and
    by the mean value theorem it is 1 + (a^γ − b^γ)/(1 + b^γ)
    <= 1 + γ·1.5^(γ−1)·b^(γ−1)/(2s(1 + b^γ)) <= 1 + γ·1.5^(γ−1)/(2s). The
    acceptance rate is about 1/M for t >= 1 (above 90 % once t >= 50 for
    γ <= 4) and at least about P(K = 0)/(M·s·2π/(γ sin(π/γ))) below (a
    few draws per sample).
    """
    gamma = _check_gamma(gamma)
    t = check_real("scale", scale)
    if t < 0:
        raise ValueError("scale must be non-negative")
    if t > 1e300:
        raise ValueError("scale is too large")
    rng = check_rng(rng)
    shape = _check_size(size)
    out = np.zeros(shape)
    if t == 0 or out.size == 0:
        return out
    s = max(t, 1.0)  # the proposal's scale
    log_m = math.log(max(1.0 + (2.0 * s) ** -gamma,
                         min(1.5**gamma, 1.0 + gamma * 1.5 ** (gamma - 1) / (2.0 * s))))
    flat = out.reshape(-1)
    pending = np.arange(flat.size)
    while pending.size:
        u = s * heavy_tailed_noise(pending.size, gamma=gamma, rng=rng)
        k = np.rint(u)
        with np.errstate(divide="ignore", over="ignore"):
            log_ratio = (np.logaddexp(0.0, gamma * np.log(np.abs(u / s)))
                         - np.logaddexp(0.0, gamma * np.log(np.abs(k / t))) - log_m)
        accept = np.log(rng.random(pending.size)) < log_ratio
        flat[pending[accept]] = k[accept]
        pending = pending[~accept]
    return out


def discrete_heavy_tailed_pmf(k: float | np.ndarray, *, gamma: float,
                              scale: float) -> float | np.ndarray:
    """P(K = k) of :func:`discrete_heavy_tailed_noise` (zero for non-integer ``k``).

    The normaliser C(t) = Σ_k φ(k) is summed over |k| <= max(10^5, 1000·t) and
    the rest taken as the integral of φ beyond the last half-integer (midpoint
    rule: relative error far below 1e-9 there), using t·P(Z > z)/c_γ with the
    continuous tail of :func:`heavy_tailed_cdf`. For tests and plans.
    """
    gamma = _check_gamma(gamma)
    t = check_positive("scale", scale)
    last = int(min(1e7, max(1e5, 1e3 * t)))
    j = np.arange(1, last + 1, dtype=np.float64)
    c_gamma = gamma * math.sin(math.pi / gamma) / (2.0 * math.pi)
    tail = t * float(heavy_tailed_cdf(-(last + 0.5) / t, gamma=gamma)) / c_gamma
    total = 1.0 + 2.0 * (float(np.sum(1.0 / (1.0 + (j / t) ** gamma))) + tail)
    k = np.asarray(k, dtype=np.float64)
    with np.errstate(over="ignore"):
        phi = 1.0 / (1.0 + np.abs(k / t) ** gamma)
    result = np.where(k == np.round(k), phi / total, 0.0)
    return float(result) if result.ndim == 0 else result


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
