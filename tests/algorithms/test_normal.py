"""dpcli.algorithms.normal: log Φ and Φ without scipy.special, against scipy's own."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcli.algorithms.normal import RELATIVE_ERROR, TAIL, log_ndtr, log_ndtr_scalar, ndtr

special = pytest.importorskip("scipy.special")


def _grid() -> np.ndarray:
    # both tails on a log scale, the middle on a fine linear one, the switch points and
    # their neighbours; up to 37.5, where log Φ is still a normal double
    edges = np.array([TAIL, -1.0, 0.0])
    near = np.concatenate([np.nextafter(edges, -np.inf), edges, np.nextafter(edges, np.inf)])
    return np.concatenate([-np.logspace(-10, 4, 20001), np.logspace(-10, math.log10(37.5), 20001),
                           np.linspace(-40.0, 37.5, 40001), near])


def test_log_ndtr_matches_scipy_to_the_stated_relative_error() -> None:
    x = _grid()
    got, want = log_ndtr(x), special.log_ndtr(x)
    assert np.all(np.isfinite(got)) and np.all(got <= 0)
    rel = np.abs(got - want) / np.maximum(np.abs(want), np.finfo(float).tiny)
    assert rel.max() <= RELATIVE_ERROR
    # where dpcli uses it (±20: a class variance is at least (U − L)²/400), closer still;
    # on the left (the normaliser's log Φ(lower), of order one) a few ulps
    inner = np.abs(x) <= 20
    assert rel[inner].max() <= 2e-14
    assert rel[(x >= -20) & (x <= 0)].max() <= 2e-15


def test_log_ndtr_special_values_and_shapes() -> None:
    got = log_ndtr([-np.inf, np.inf, np.nan, 0.0])
    assert got[0] == -np.inf and got[1] == 0.0 and np.isnan(got[2])
    assert got[3] == pytest.approx(math.log(0.5), rel=1e-16)
    assert log_ndtr(np.zeros((2, 3))).shape == (2, 3)
    assert log_ndtr(-3.0).shape == ()


def test_the_array_and_scalar_forms_agree_to_an_ulp() -> None:
    # the same branches; numpy's log and log1p against math's: at most one ulp apart
    x = _grid()[::7]
    got = log_ndtr(x)
    want = np.array([log_ndtr_scalar(v) for v in x])
    assert np.all(np.abs(got - want) <= np.spacing(np.abs(want)))


def test_log_ndtr_is_increasing_across_the_switch_points() -> None:
    # the three branches meet without a step a likelihood could feel
    for edge in (TAIL, -1.0):
        x = edge + np.linspace(-1e-6, 1e-6, 2001)
        y = log_ndtr(x)
        assert np.all(np.diff(y) >= 0)


def test_ndtr_matches_scipy() -> None:
    x = np.linspace(-38.0, 38.0, 20001)
    got, want = ndtr(x), special.ndtr(x)
    ok = want > np.finfo(float).tiny
    assert np.max(np.abs(got[ok] - want[ok]) / want[ok]) <= 1e-12
