"""The Laplace mechanism and its discrete counterpart for integer counts.

Both are ε-DP under replace-one neighbours when the caller passes the L1
sensitivity of the released statistic under that relation (DESIGN.md rule 1:
e.g. a histogram over a partition has L1 sensitivity 2, not 1).
"""

from __future__ import annotations

import math

import numpy as np

from dpcli.mechanisms.rng import (
    check_int,
    check_positive,
    check_real,
    check_real_array,
    check_rng,
)

# Discrete noise is drawn as int64. A scale above this would let geometric draws
# saturate at the int64 maximum instead of following the distribution.
MAX_DISCRETE_SCALE = 1e12
# Counts further from zero than this could overflow int64 once noise is added.
MAX_ABS_COUNT = 2**62


def laplace_mechanism(
    value: float | np.ndarray,
    *,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
) -> float | np.ndarray:
    """Release ``value`` plus Laplace noise: ε-DP.

    Releases: a real statistic or a vector of them (``value``).
    Sensitivity: the caller supplies ``sensitivity``, the L1 sensitivity of
    the whole vector under replace-one neighbours, i.e. the largest
    ``sum_i |f(x)_i - f(y)_i|`` over datasets x, y of the same size differing
    in one record.
    Noise: independent Laplace(0, b) on each coordinate with b =
    sensitivity / epsilon.
    Cost: ε = ``epsilon`` (δ = 0), for the whole vector. Proof: the density
    ratio at any output z is prod_i exp((|z_i - f(y)_i| - |z_i - f(x)_i|) / b)
    <= exp(||f(x) - f(y)||_1 / b) <= exp(epsilon).

    Returns a float for a scalar ``value`` and a float64 array of the same
    shape for an array. For integer counts use
    :func:`discrete_laplace_mechanism` (rule 6): continuous noise on floats
    leaves floating-point artefacts of the true value in the output.
    """
    array = check_real_array("value", value)
    scalar = array.ndim == 0 and not isinstance(value, np.ndarray)
    if not np.all(np.isfinite(array)):
        raise ValueError("value must be finite")
    scale = check_positive("sensitivity", sensitivity) / check_positive("epsilon", epsilon)
    rng = check_rng(rng)
    noisy = array + rng.laplace(0.0, scale, size=array.shape)
    return float(noisy) if scalar else noisy


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

    Integer counts get integer noise (DESIGN.md rule 6), so the released
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


GRID_STEPS = 1024   # grid steps per unit of sensitivity in grid_laplace_mechanism


def grid_laplace_mechanism(
    value: float,
    *,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
) -> float:
    """Release a real ``value`` on a power-of-two grid with discrete Laplace noise: ε-DP.

    Continuous Laplace noise added to a float leaves the true value in the
    low-order bits of the output (Mironov 2012). Here the value is rounded
    to the grid γ = 2^⌊log2(Δ/1024)⌋ and integer noise is added in grid units,
    so the output is k·γ: exact in binary, with no trace of the unrounded
    value.

    Releases: a real statistic, as a multiple of γ.
    Sensitivity: the caller supplies ``sensitivity`` Δ under replace-one.
    Rounded, two neighbours' values differ by at most Δ/γ + 1 grid units,
    hence by at most ⌈Δ/γ⌉ + 1 (an integer sensitivity).
    Noise: discrete Laplace with that sensitivity in grid units, scale
    (⌈Δ/γ⌉ + 1)·γ/ε ≤ (1 + 2/1024)·Δ/ε in the value's units.
    Cost: ε = ``epsilon`` (δ = 0), by :func:`discrete_laplace_mechanism`.
    """
    x = check_real("value", value)
    if not math.isfinite(x):
        raise ValueError("value must be finite")
    delta = check_positive("sensitivity", sensitivity)
    grid = math.ldexp(1.0, math.floor(math.log2(delta / GRID_STEPS)))
    units = math.ceil(delta / grid) + 1
    k = discrete_laplace_mechanism(round(x / grid), sensitivity=units, epsilon=epsilon, rng=rng)
    return float(k) * grid


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
