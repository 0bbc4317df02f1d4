"""The Laplace mechanism, float-safe: discrete Laplace noise on integers or on a public grid.

Integer counts get discrete Laplace noise; real values are rounded to a
public power-of-two grid and get discrete Laplace noise in grid units
(Mironov 2012: continuous noise added to a float leaks the true value through
the output's low-order bits, so none is released). Both are ε-DP under
replace-one neighbours when the caller passes the L1 sensitivity of the
released statistic under that relation (docs/design.md rule 1:
e.g. a histogram over a partition has L1 sensitivity 2, not 1).
"""

from __future__ import annotations

import math
from typing import overload

import numpy as np

from dpcli.mechanisms.rng import (
    check_int,
    check_positive,
    check_real_array,
    check_rng,
)

# Discrete noise is drawn as int64. A scale above this would let geometric draws
# saturate at the int64 maximum instead of following the distribution.
MAX_DISCRETE_SCALE = 1e12
# Counts further from zero than this could overflow int64 once noise is added.
MAX_ABS_COUNT = 2**62


@overload
def laplace_mechanism(
    value: np.ndarray,
    *,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
    changes: int | None = ...,
) -> np.ndarray: ...


@overload
def laplace_mechanism(
    value: float,
    *,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
    changes: int | None = ...,
) -> float: ...


def laplace_mechanism(
    value: float | np.ndarray,
    *,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
    changes: int | None = None,
) -> float | np.ndarray:
    """Release a real ``value`` (or vector) on a public grid with integer noise: ε-DP, float-safe.

    This is :func:`grid_laplace_mechanism` (the Laplace mechanism made
    float-safe, Mironov 2012); the name is kept for its callers. Continuous
    Laplace noise added to a float is never released (rule 6).
    """
    return grid_laplace_mechanism(value, sensitivity=sensitivity, epsilon=epsilon, rng=rng,
                                  changes=changes)


@overload
def discrete_laplace_mechanism(
    counts: np.ndarray,
    *,
    sensitivity: int,
    epsilon: float,
    rng: np.random.Generator,
) -> np.ndarray: ...


@overload
def discrete_laplace_mechanism(
    counts: int,
    *,
    sensitivity: int,
    epsilon: float,
    rng: np.random.Generator,
) -> int: ...


def discrete_laplace_mechanism(
    counts: int | np.ndarray,
    *,
    sensitivity: int,
    epsilon: float,
    rng: np.random.Generator,
) -> int | np.ndarray:
    """Release integer ``counts`` plus discrete Laplace noise: ε-DP.

    Releases: an integer count or a vector of integer counts.
    Sensitivity: the caller supplies ``sensitivity`` (a positive integer),
    the L1 sensitivity of the whole vector under replace-one neighbours (a
    histogram over a partition: 2, since one record leaves one cell and
    enters another).
    Noise: independent discrete Laplace (two-sided geometric) on each
    coordinate, P(k) = (1 - q) / (1 + q) * q^|k| with q = exp(-epsilon /
    sensitivity), i.e. scale sensitivity / epsilon. Sampled exactly as the
    difference of two iid geometric variables with success probability
    p = 1 - q (both counting failures).
    Cost: ε = ``epsilon`` (δ = 0). Proof: P_x(z) / P_y(z) = prod_i
    q^(|z_i - x_i| - |z_i - y_i|) <= q^(-||x - y||_1) <= exp(epsilon).

    Integer counts get integer noise (docs/design.md rule 6), so the released
    counts carry no floating-point artefacts of the true value. Floats are
    accepted only when integer-valued (TypeError otherwise). Returns an int
    for a scalar input and an int64 array of the same shape for an array.
    """
    array = _integer_counts(counts)
    scalar = array.ndim == 0 and not isinstance(counts, np.ndarray)
    sensitivity = check_int("sensitivity", sensitivity, minimum=1)
    epsilon = check_positive("epsilon", epsilon)
    if sensitivity / epsilon > MAX_DISCRETE_SCALE:
        raise ValueError("sensitivity / epsilon is too large for 64-bit integer noise")
    rng = check_rng(rng)
    p = -np.expm1(-epsilon / sensitivity)  # 1 - exp(-ε/Δ), accurate for small ε/Δ
    noise = rng.geometric(p, size=array.shape) - rng.geometric(p, size=array.shape)
    noisy = array + noise.astype(np.int64)
    return int(noisy) if scalar else noisy


GRID_STEPS = 1024   # grid steps per unit of sensitivity and changed coordinate


def laplace_grid(sensitivity: float, changes: int = 1) -> tuple[float, int]:
    """(γ, units): the public grid of :func:`grid_laplace_mechanism` and its sensitivity.

    γ = 2^⌊log2(Δ/(1024·c))⌋ for an L1 sensitivity Δ of which at most c
    coordinates can change between neighbours; units = ⌈Δ/γ⌉ + c is the L1
    sensitivity of the rounded vector in grid units (proof in
    :func:`grid_laplace_mechanism`), so the noise scale is units·γ/ε ≤
    (1 + 2/1024)·Δ/ε. Public: it depends on Δ and c only.
    """
    delta = check_positive("sensitivity", sensitivity)
    c = check_int("changes", changes, minimum=1)
    grid = math.ldexp(1.0, math.floor(math.log2(delta / (GRID_STEPS * c))))
    return grid, math.ceil(delta / grid) + c


@overload
def grid_laplace_mechanism(
    value: np.ndarray,
    *,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
    changes: int | None = ...,
) -> np.ndarray: ...


@overload
def grid_laplace_mechanism(
    value: float,
    *,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
    changes: int | None = ...,
) -> float: ...


def grid_laplace_mechanism(
    value: float | np.ndarray,
    *,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
    changes: int | None = None,
) -> float | np.ndarray:
    """Release a real ``value`` (or vector) on a power-of-two grid with discrete Laplace noise.

    Continuous Laplace noise added to a float leaves the true value in the
    low-order bits of the output (Mironov 2012). Here each coordinate is
    rounded to the grid γ of :func:`laplace_grid` and integer noise is added
    in grid units, so every output is k·γ: exact in binary (|k| < 2^53),
    with no trace of the unrounded value.

    Releases: a real statistic or a vector of them, each as a multiple of γ.
    Sensitivity: the caller supplies ``sensitivity`` Δ, the L1 sensitivity
    of the whole vector under replace-one, and ``changes`` c, the most
    coordinates that can differ between neighbours (default: 1 for a scalar,
    every coordinate for an array; e.g. 2 for per-class sums, where a
    replaced record leaves one class and joins another). Rounded
    coordinates k_i = round(x_i/γ) (x_i/γ is exact, γ being a power of two)
    satisfy |k_i(x) − k_i(y)| ≤ |x_i − y_i|/γ + 1 where x_i ≠ y_i and 0
    elsewhere, so ||k(x) − k(y)||_1 ≤ Δ/γ + c ≤ ⌈Δ/γ⌉ + c = units, an
    integer sensitivity.
    Noise: discrete Laplace with sensitivity ``units`` in grid units, i.e.
    scale units·γ/ε ≤ (1 + 2/1024)·Δ/ε in the value's units (the rounding
    costs at most 0.2 % more noise).
    Cost: ε = ``epsilon`` (δ = 0), by :func:`discrete_laplace_mechanism`.

    Returns a float for a scalar ``value`` and a float64 array of the same
    shape for an array.
    """
    array = check_real_array("value", value)
    scalar = array.ndim == 0 and not isinstance(value, np.ndarray)
    if not np.all(np.isfinite(array)):
        raise ValueError("value must be finite")
    if changes is None:
        changes = max(1, array.size)
    grid, units = laplace_grid(sensitivity, changes)
    check_positive("epsilon", epsilon)
    k = np.rint(array / grid)
    if k.size and np.max(np.abs(k)) >= MAX_ABS_COUNT:
        raise ValueError("value is too large for its grid")
    noisy = discrete_laplace_mechanism(k.astype(np.int64), sensitivity=units, epsilon=epsilon,
                                       rng=rng)
    out = np.asarray(noisy, dtype=np.float64) * grid
    return float(out) if scalar else out


def _integer_counts(counts: object) -> np.ndarray:
    """``counts`` as an int64 array; floats only if integer-valued."""
    if isinstance(counts, str | bytes | bool | np.bool_):
        raise TypeError("counts must be integers")
    try:
        array = np.asarray(counts)
    except (TypeError, ValueError) as exc:
        raise TypeError("counts must be integers") from exc
    if array.dtype.kind in "iu":
        if array.size and np.max(np.abs(array.astype(np.float64))) >= MAX_ABS_COUNT:
            raise ValueError("counts are too large for 64-bit integer noise")
        return array.astype(np.int64)
    if array.dtype.kind == "f":
        array = array.astype(np.float64)
        if not np.all(np.isfinite(array)):
            raise ValueError("counts must be finite")
        if not np.all(array == np.round(array)):
            raise TypeError("counts must be integers (a float count must be integer-valued)")
        if array.size and np.max(np.abs(array)) >= MAX_ABS_COUNT:
            raise ValueError("counts are too large for 64-bit integer noise")
        return array.astype(np.int64)
    raise TypeError("counts must be integers")


def laplace_cdf(x: float | np.ndarray, scale: float) -> float | np.ndarray:
    """CDF of Laplace(0, scale) at ``x``: exp(x/b)/2 for x < 0, 1 - exp(-x/b)/2 otherwise."""
    x = np.asarray(x, dtype=np.float64)
    half_tail = 0.5 * np.exp(-np.abs(x) / scale)
    result = np.where(x < 0, half_tail, 1.0 - half_tail)
    return float(result) if result.ndim == 0 else result


def discrete_laplace_pmf(k: int | np.ndarray, scale: float) -> float | np.ndarray:
    """P(K = k) for the discrete Laplace with scale Δ/ε: (1 - q)/(1 + q) q^|k|, q = e^(-1/scale).

    Zero for non-integer ``k``.
    """
    k = np.asarray(k, dtype=np.float64)
    q_log = -1.0 / scale
    norm = np.tanh(0.5 / scale)  # (1 - q) / (1 + q)
    result = np.where(k == np.round(k), norm * np.exp(q_log * np.abs(k)), 0.0)
    return float(result) if result.ndim == 0 else result


def discrete_laplace_cdf(k: float | np.ndarray, scale: float) -> float | np.ndarray:
    """P(K <= k) for the discrete Laplace with scale Δ/ε (q = e^(-1/scale)).

    For integer j = floor(k): q^(-j) / (1 + q) when j < 0, 1 - q^(j+1) / (1 + q)
    when j >= 0.
    """
    j = np.floor(np.asarray(k, dtype=np.float64))
    q = np.exp(-1.0 / scale)
    with np.errstate(over="ignore"):
        lower = np.exp(j / scale) / (1.0 + q)  # j < 0: q^(-j) / (1 + q)
        upper = 1.0 - np.exp(-(j + 1.0) / scale) / (1.0 + q)
    result = np.where(j < 0, lower, upper)
    return float(result) if result.ndim == 0 else result
