"""Discrete Laplace noise for forecasts and error bars: exact quantiles and fixed draws.

Every count dpcli releases gets discrete Laplace noise, P(k) ∝ q^|k| with
q = e^(−1/b) for scale b = Δ/ε (dpcli.mechanisms.laplace). Its |Z| has
P(|Z| ≤ k) = 1 − 2q^(k+1)/(1 + q), so its quantiles are exact integers.
Simulations use *fixed* uniforms turned into noise by the inverse CDF: the
same draws at every ε, so a simulated forecast is deterministic and does
not grow with ε (common random numbers). They are public: no data is read.
"""

from __future__ import annotations

import math

import numpy as np

from dpcli.forecast.core import LEVEL, MetricForecast

#: the seed of every forecast's synthetic draws (public; a forecast is a fixed function)
SEED = 20_27


def q_of(scale: float) -> float:
    """q = e^(−1/b) of discrete Laplace noise of scale b (0 for no noise)."""
    return 0.0 if scale <= 0 else math.exp(-1.0 / scale)


def abs_quantile(scale: float, p: float) -> int:
    """The smallest integer k with P(|Z| ≤ k) ≥ p for discrete Laplace noise of scale b."""
    q = q_of(scale)
    if q <= 0.0:
        return 0
    k = max(0, math.ceil(math.log((1.0 - p) * (1.0 + q) / 2.0) / math.log(q) - 1.0))
    while k > 0 and 1.0 - 2.0 * q ** k / (1.0 + q) >= p:   # float slack: step back
        k -= 1
    while 1.0 - 2.0 * q ** (k + 1) / (1.0 + q) < p:
        k += 1
    return k


def covers(scale: float, k: int) -> float:
    """P(|Z| ≤ k): the exact coverage of the interval ±k."""
    q = q_of(scale)
    return 1.0 if q <= 0.0 else 1.0 - 2.0 * q ** (k + 1) / (1.0 + q)


def count_error(scale: float, what: str, *, per: float = 1.0,
                level: float = LEVEL) -> MetricForecast:
    """The error of one noisy count (scale b), divided by ``per`` (e.g. a mean cell count):
    median |Z| and the interval ±k with P(|Z| ≤ k) ≥ ``level`` (exact, closed form)."""
    half = abs_quantile(scale, level) / per
    return MetricForecast(what, abs_quantile(scale, 0.5) / per, (-half, half), level)


def uniforms(shape: tuple[int, ...], seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """Two fixed arrays of uniforms in (0, 1) for :func:`noise` (public, data-free)."""
    rng = np.random.default_rng(seed)
    tiny = np.finfo(np.float64).tiny
    return (np.maximum(rng.random(shape), tiny), np.maximum(rng.random(shape), tiny))


def noise(u: tuple[np.ndarray, np.ndarray], scale: float) -> np.ndarray:
    """Discrete Laplace noise of ``scale`` from fixed uniforms: G1 − G2, each geometric by
    the inverse CDF floor(ln U / ln q) — |noise| shrinks as the scale does, draw by draw."""
    q = q_of(scale)
    if q <= 0.0:
        return np.zeros(u[0].shape, dtype=np.int64)
    lq = math.log(q)
    return (np.floor(np.log(u[0]) / lq) - np.floor(np.log(u[1]) / lq)).astype(np.int64)
