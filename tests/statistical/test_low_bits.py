"""Low-order bits: the old float Laplace release leaks the neighbour, the grid release does not.

Mironov (2012): numpy's Laplace sampler returns log(2u) or −log(2 − 2u) for a
53-bit uniform u, so the old release ``value + rng.laplace(0, b)`` with
value 0 and b = 1 is always such a logarithm — a pattern in the low-order
mantissa bits that ``value = 2^-20`` (a neighbour at distance 2^-20 <= Δ = 1)
almost never reproduces, as its sum is rounded. The classifier below tests
exactly those bits; it tells the neighbours apart with a likelihood ratio
near 10, whatever ε is. Run on dpcli's releases (grid multiples with integer noise) the
same classifier must see no difference beyond e^ε.

The check is two one-sided Clopper–Pearson bounds at α/2 each: a violation
is flagged when the lower bound of P_x(event) exceeds e^ε times the upper
bound of P_y(event). A mechanism that is ε-DP is flagged with probability at
most α = 1e-4 (the false-failure rate; fixed seeds make it reproducible).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from dpcli.mechanisms import laplace_mechanism, make_rng

ALPHA = 1e-4
DRAWS = 20_000
EPSILON = 1.0
X, Y = 0.0, 2.0**-20  # neighbouring values of a statistic with sensitivity 1


def looks_like_a_raw_laplace_draw(output: float) -> bool:
    """True when ``output`` is exactly what numpy's sampler returns at scale 1 for some 53-bit
    uniform u = k·2^-53: log(u + u) if u < 1/2, −log(2 − u − u) otherwise (its C code, in
    the same floating-point operations) — a match of every low-order bit."""
    if output <= 0:
        k = round(math.exp(output) / 2 * 2.0**53)
        return any(math.log(u + u) == output
                   for u in (i * 2.0**-53 for i in range(k - 1, k + 2)) if 0 < u < 0.5)
    k = round((2 - math.exp(-output)) / 2 * 2.0**53)
    return any(-math.log(2.0 - u - u) == output
               for u in (i * 2.0**-53 for i in range(k - 1, k + 2)) if 0.5 <= u < 1)


def event_rate(outputs: np.ndarray) -> int:
    """How many outputs are at least 2 from 0 and look like a raw draw. Beyond 2 the
    sampler's possible outputs are about 1/10 of the floats there, so a sum rounded to
    the nearest float lands on one rarely (by chance)."""
    return sum(abs(o) >= 2 and looks_like_a_raw_laplace_draw(float(o)) for o in outputs)


def flagged(hits_x: int, hits_y: int, n: int, epsilon: float) -> bool:
    """Either direction: lower CP bound of one rate above e^ε times the other's upper bound."""
    def lower(k: int) -> float:
        return 0.0 if k == 0 else float(stats.beta.ppf(ALPHA / 4, k, n - k + 1))

    def upper(k: int) -> float:
        return 1.0 if k == n else float(stats.beta.ppf(1 - ALPHA / 4, k + 1, n - k))

    return (lower(hits_x) > math.exp(epsilon) * upper(hits_y)
            or lower(hits_y) > math.exp(epsilon) * upper(hits_x))


def old_release(value: float, seed: int) -> np.ndarray:
    """The pre-float-safety laplace_mechanism: value + Laplace(Δ/ε) in floating point."""
    return value + make_rng(seed).laplace(0.0, 1.0 / EPSILON, size=DRAWS)


def new_release(value: float, seed: int) -> np.ndarray:
    """DRAWS independent releases of ``value`` (one changed coordinate each: iid scalars)."""
    return laplace_mechanism(np.full(DRAWS, value), sensitivity=1.0, epsilon=EPSILON,
                             rng=make_rng(seed), changes=1)


def test_old_float_laplace_is_told_apart_by_its_low_bits() -> None:
    """P(|Z| >= 2) = e^-2: about 2,700 hits from 0, a tenth of that from 2^-20."""
    hits_x, hits_y = event_rate(old_release(X, 1)), event_rate(old_release(Y, 2))
    assert hits_x > 2_000
    assert hits_y < hits_x / 5
    assert flagged(hits_x, hits_y, DRAWS, EPSILON)


def test_grid_laplace_is_not_told_apart_by_the_same_classifier() -> None:
    out_x, out_y = new_release(X, 3), new_release(Y, 4)
    assert np.array_equal(out_x * 1024, np.round(out_x * 1024))  # grid 2^-10 for Δ = 1
    hits_x, hits_y = event_rate(out_x), event_rate(out_y)
    assert not flagged(hits_x, hits_y, DRAWS, EPSILON)
