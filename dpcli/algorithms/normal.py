"""The standard normal CDF Φ and log Φ, from ``math.erfc``: no scipy.special.

Importing scipy.special costs every train-nb run about 0.2 s of start-up
(half of it numpy.f2py, numpy.testing and numpy.ma, which its array-API layer
imports: docs/scale.md) for a handful of values: the truncated Gaussian's
normaliser of each class and column, in the model's likelihood and in the
forecast's synthetic fits. Public post-processing only: nothing here touches
data or noise.

:func:`log_ndtr` follows scipy's own split (``log1p(−erfc(x/√2)/2)`` above −1,
``log(erfc(−x/√2)/2)`` below) with the C library's ``erfc`` in place of
scipy's Faddeeva one, and the asymptotic series of Mills' ratio below
:data:`TAIL`, where ``erfc`` would leave the normal range of doubles. Against
scipy.special.log_ndtr it agrees to :data:`RELATIVE_ERROR` over x in
[−10⁴, 37.5], where log Φ is a normal double (tests/algorithms/test_normal.py;
dpcli's arguments stay within ±20, the variance floor's, where it agrees to
2·10⁻¹⁴, and to 2·10⁻¹⁵ on [−20, 0]): the last bits of a derived float, never a released statistic.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: below this, log Φ is the asymptotic series (erfc(−x/√2) < 10⁻⁸⁸ there, and it leaves
#: the normal doubles near x = −37.5)
TAIL = -20.0
#: terms of the series: the first left out is below 10⁻²⁰ of the sum at x = TAIL
TERMS = 12
#: the largest relative difference from scipy.special.log_ndtr the tests allow (measured:
#: 6·10⁻¹⁴ near x = 34, where erfc(x/√2) ~ 10⁻²⁵² and the two erfc's differ in the last
#: bits; 1.5·10⁻¹⁴ on ±20)
RELATIVE_ERROR = 1e-13

_SQRT1_2 = math.sqrt(0.5)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def log_ndtr_scalar(x: float) -> float:
    """log Φ(x) of one float (NaN gives NaN, −∞ gives −∞, +∞ gives 0)."""
    if x < TAIL:
        # Φ(x) = φ(x)/|x| · Σ_k (−1)^k (2k−1)!!/x^(2k), an asymptotic series whose error is
        # below its first omitted term
        inv = 1.0 / (x * x)
        term = total = 1.0
        for k in range(1, TERMS + 1):
            term *= -(2 * k - 1) * inv
            total += term
        return -0.5 * x * x - math.log(-x) - _HALF_LOG_2PI + math.log(total)
    t = x * _SQRT1_2
    if x < -1.0:
        return math.log(math.erfc(-t) / 2.0)
    return math.log1p(-math.erfc(t) / 2.0)


_ERFC = np.vectorize(math.erfc, otypes=[np.float64])


def log_ndtr(x: Any) -> np.ndarray:
    """log Φ(x) elementwise (an array of x's shape; a 0-d array for a scalar): the branches
    of :func:`log_ndtr_scalar`, each over its part of the array (erfc per element, the
    logarithms and the series in numpy), so that the forecast's thousands of values a fit
    do not each cost a Python call."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        t = x * _SQRT1_2
        left = x < -1.0
        e = _ERFC(np.where(left, -t, t))
        out = np.where(left, np.log(e / 2.0), np.log1p(-e / 2.0))
        tail = x < TAIL
        if tail.any():
            z = x[tail]
            inv = 1.0 / (z * z)
            term = np.ones_like(z)
            total = np.ones_like(z)
            for k in range(1, TERMS + 1):
                term = term * (-(2 * k - 1) * inv)
                total = total + term
            out[tail] = -0.5 * z * z - np.log(-z) - _HALF_LOG_2PI + np.log(total)
    return out


def ndtr(x: Any) -> np.ndarray:
    """Φ(x) elementwise, as ½·erfc(−x/√2)."""
    return np.asarray(0.5 * _ERFC(-np.asarray(x, dtype=np.float64) / math.sqrt(2.0)))
