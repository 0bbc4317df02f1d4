"""Laplace and discrete Laplace: validation, types, reproducibility, closed forms.

Distributional tests are in tests/statistical/test_noise_distributions.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcli.mechanisms import (
    discrete_laplace_cdf,
    discrete_laplace_mechanism,
    discrete_laplace_pmf,
    laplace_cdf,
    laplace_grid,
    laplace_mechanism,
    make_rng,
)

SECRET = 987654.321  # a "private" value that must never appear in an error message


# --- validation -------------------------------------------------------------

@pytest.mark.parametrize(("kwargs", "error"), [
    ({"epsilon": 0.0}, ValueError),
    ({"epsilon": -1.0}, ValueError),
    ({"epsilon": float("nan")}, ValueError),
    ({"epsilon": float("inf")}, ValueError),
    ({"epsilon": "1"}, TypeError),
    ({"epsilon": True}, TypeError),
    ({"sensitivity": 0.0}, ValueError),
    ({"sensitivity": -2.0}, ValueError),
    ({"sensitivity": float("inf")}, ValueError),
    ({"sensitivity": None}, TypeError),
    ({"rng": None}, TypeError),
    ({"rng": np.random.RandomState(0)}, TypeError),
])
def test_laplace_rejects_bad_parameters(kwargs: dict, error: type[Exception]) -> None:
    params = {"sensitivity": 1.0, "epsilon": 1.0, "rng": make_rng(0)} | kwargs
    with pytest.raises(error):
        laplace_mechanism(1.0, **params)


@pytest.mark.parametrize(("value", "error"), [
    ("12", TypeError),
    (np.array(["a", "b"]), TypeError),
    (np.array([True, False]), TypeError),
    ([1.0, [2.0, 3.0]], TypeError),
    (float("nan"), ValueError),
    (np.array([SECRET, np.inf]), ValueError),
])
def test_laplace_rejects_bad_values(value: object, error: type[Exception]) -> None:
    with pytest.raises(error) as info:
        laplace_mechanism(value, sensitivity=1.0, epsilon=1.0, rng=make_rng(0))
    assert "987654" not in str(info.value)


def test_laplace_scalar_in_float_out_and_array_shape_kept() -> None:
    out = laplace_mechanism(3, sensitivity=1.0, epsilon=1.0, rng=make_rng(0))
    assert isinstance(out, float)
    values = np.arange(12.0).reshape(3, 4)
    noisy = laplace_mechanism(values, sensitivity=2.0, epsilon=0.5, rng=make_rng(0))
    assert isinstance(noisy, np.ndarray)
    assert noisy.shape == (3, 4)
    assert noisy.dtype == np.float64
    assert not np.array_equal(noisy, values)  # P(12 zero draws at scale ~3e4 units) < 1e-50


def test_laplace_seeded_is_reproducible_and_adds_grid_noise() -> None:
    """laplace_mechanism is the grid mechanism: the rounded value plus discrete Laplace noise
    in grid units, with the grid and integer sensitivity of laplace_grid."""
    values = np.array([10.0, -3.0, 0.5])
    first = laplace_mechanism(values, sensitivity=2.0, epsilon=0.5, rng=make_rng(7))
    second = laplace_mechanism(values, sensitivity=2.0, epsilon=0.5, rng=make_rng(7))
    np.testing.assert_array_equal(first, second)
    grid, units = laplace_grid(2.0, 3)  # 3 coordinates may change by default
    assert grid == 2.0 ** -11 and units == 4096 + 3
    expected = discrete_laplace_mechanism(np.rint(values / grid).astype(np.int64),
                                          sensitivity=units, epsilon=0.5, rng=make_rng(7))
    np.testing.assert_array_equal(first, expected * grid)
    paired = laplace_mechanism(values, sensitivity=2.0, epsilon=0.5, rng=make_rng(7), changes=2)
    grid2, _ = laplace_grid(2.0, 2)
    assert np.array_equal(paired / grid2, np.round(paired / grid2))


@pytest.mark.parametrize(("sensitivity", "changes"), [(1e-6, 1), (0.37, 2), (5.0, 7), (2.0, 300)])
def test_laplace_grid_is_a_power_of_two_and_costs_at_most_two_per_mille(
        sensitivity: float, changes: int) -> None:
    grid, units = laplace_grid(sensitivity, changes)
    assert math.log2(grid) == round(math.log2(grid))
    assert units == math.ceil(sensitivity / grid) + changes
    assert units * grid <= sensitivity * (1 + 2 / 1024)


def test_laplace_outputs_are_exact_grid_multiples() -> None:
    rng = make_rng(8)
    values = rng.uniform(-1e3, 1e3, 1000)
    out = laplace_mechanism(values, sensitivity=4.0, epsilon=1.0, rng=rng, changes=2)
    grid, _ = laplace_grid(4.0, 2)
    k = out / grid
    assert np.array_equal(k, np.round(k))
    assert np.all(np.abs(k) < 2**53)


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"sensitivity": 1.5}, TypeError),
    ({"sensitivity": 2.0}, TypeError),
    ({"sensitivity": True}, TypeError),
    ({"sensitivity": 0}, ValueError),
    ({"sensitivity": -1}, ValueError),
    ({"epsilon": 0}, ValueError),
    ({"epsilon": float("nan")}, ValueError),
    ({"epsilon": 1e-13}, ValueError),  # scale 1e13: int64 noise would saturate
    ({"rng": "seed"}, TypeError),
])
def test_discrete_laplace_rejects_bad_parameters(kwargs: dict, error: type[Exception]) -> None:
    params = {"sensitivity": 1, "epsilon": 1.0, "rng": make_rng(0)} | kwargs
    with pytest.raises(error):
        discrete_laplace_mechanism(3, **params)


@pytest.mark.parametrize(("counts", "error"), [
    (2.5, TypeError),
    (np.array([1.0, SECRET]), TypeError),
    (True, TypeError),
    ("3", TypeError),
    (np.array([1.0, np.nan]), ValueError),
    (np.array([2**62, 0], dtype=np.int64), ValueError),
])
def test_discrete_laplace_rejects_bad_counts(counts: object, error: type[Exception]) -> None:
    with pytest.raises(error) as info:
        discrete_laplace_mechanism(counts, sensitivity=2, epsilon=1.0, rng=make_rng(0))
    assert "987654" not in str(info.value)


def test_discrete_laplace_returns_integers() -> None:
    out = discrete_laplace_mechanism(5, sensitivity=2, epsilon=1.0, rng=make_rng(0))
    assert type(out) is int
    counts = np.array([[3, 0], [7, 100]], dtype=np.int32)
    noisy = discrete_laplace_mechanism(counts, sensitivity=2, epsilon=1.0, rng=make_rng(0))
    assert noisy.dtype == np.int64
    assert noisy.shape == (2, 2)
    # integer-valued floats are accepted and come back as int64
    from_float = discrete_laplace_mechanism(counts.astype(float), sensitivity=2, epsilon=1.0,
                                            rng=make_rng(0))
    assert from_float.dtype == np.int64
    np.testing.assert_array_equal(from_float, noisy)


def test_discrete_laplace_seeded_is_reproducible() -> None:
    counts = np.arange(50)
    first = discrete_laplace_mechanism(counts, sensitivity=2, epsilon=0.3, rng=make_rng(3))
    second = discrete_laplace_mechanism(counts, sensitivity=2, epsilon=0.3, rng=make_rng(3))
    np.testing.assert_array_equal(first, second)
    # with scale 2/0.3 and 50 counts, some noise is non-zero (P(all zero) = 0.075^50)
    assert np.any(first != counts)


def test_discrete_laplace_huge_epsilon_adds_no_noise() -> None:
    # ε/Δ = 50: P(noise != 0) = 2q/(1+q) ≈ 4e-22 per count.
    counts = np.array([0, 5, 1_000_000])
    noisy = discrete_laplace_mechanism(counts, sensitivity=1, epsilon=50.0, rng=make_rng(0))
    np.testing.assert_array_equal(noisy, counts)


# --- closed forms ----------------------------------------------------------

def test_laplace_cdf_closed_form() -> None:
    assert laplace_cdf(0.0, 2.0) == pytest.approx(0.5)
    x = np.linspace(-20, 20, 81)
    cdf = laplace_cdf(x, 2.0)
    np.testing.assert_allclose(cdf + laplace_cdf(-x, 2.0), 1.0)
    assert np.all(np.diff(cdf) > 0)
    assert laplace_cdf(2.0, 2.0) == pytest.approx(1 - 0.5 * np.exp(-1))
    from scipy import stats
    np.testing.assert_allclose(cdf, stats.laplace(scale=2.0).cdf(x), rtol=1e-12)


@pytest.mark.parametrize("scale", [0.3, 1.0, 2.0, 7.5])
def test_discrete_laplace_pmf_and_cdf_agree(scale: float) -> None:
    k = np.arange(-400, 401)
    pmf = discrete_laplace_pmf(k, scale)
    assert pmf.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(pmf, pmf[::-1])
    q = np.exp(-1 / scale)
    assert discrete_laplace_pmf(0, scale) == pytest.approx((1 - q) / (1 + q))
    assert discrete_laplace_pmf(3, scale) / discrete_laplace_pmf(2, scale) == pytest.approx(q)
    cdf = discrete_laplace_cdf(k, scale)
    np.testing.assert_allclose(cdf, np.cumsum(pmf), atol=1e-12)
    # non-integer arguments: the CDF of an integer variable is flat between integers
    assert discrete_laplace_cdf(0.7, scale) == pytest.approx(discrete_laplace_cdf(0, scale))
    assert discrete_laplace_cdf(-0.2, scale) == pytest.approx(discrete_laplace_cdf(-1, scale))
    assert discrete_laplace_pmf(0.5, scale) == 0.0
