"""Consistency post-processing (dpcli/mechanisms/consistency.py): each function is
an L2 projection onto a constraint set, checked against an independent solution
(a closed form, least squares, or the optimality conditions)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dpcli.mechanisms import make_rng
from dpcli.mechanisms.consistency import (
    isotonic_increasing,
    nonnegative_with_total,
    round_with_total,
    tree_inference,
)
from dpcli.mechanisms.range_queries import tree_levels

# --- isotonic regression ----------------------------------------------------------------


def _isotonic_min_max(y: np.ndarray) -> np.ndarray:
    """The closed form of the L2 isotonic fit: ŷ_i = max_{j<=i} min_{k>=i} mean(y_j..y_k)
    (Barlow et al. 1972), O(n³) and independent of pool-adjacent-violators."""
    n = y.size
    return np.array([max(min(float(np.mean(y[j:k + 1])) for k in range(i, n))
                         for j in range(i + 1)) for i in range(n)])


def _pava(y: np.ndarray) -> np.ndarray:
    """A plain pool-adjacent-violators: blocks (mean, size) merged while decreasing."""
    blocks: list[list[float]] = []
    for v in y:
        blocks.append([float(v), 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            mean, size = blocks.pop()
            blocks[-1] = [(blocks[-1][0] * blocks[-1][1] + mean * size) / (blocks[-1][1] + size),
                          blocks[-1][1] + size]
    return np.concatenate([np.full(int(size), mean) for mean, size in blocks])


def test_isotonic_matches_the_closed_form_on_small_inputs() -> None:
    rng = make_rng(1)
    for _ in range(300):
        n = int(rng.integers(1, 9))
        y = rng.normal(0.0, 3.0, n) + np.arange(n) * rng.choice([-1.0, 0.0, 0.5])
        if rng.random() < 0.3:
            y = np.round(y)  # ties
        out = isotonic_increasing(y)
        np.testing.assert_allclose(out, _isotonic_min_max(y), rtol=0, atol=1e-8)
        np.testing.assert_allclose(out, _pava(y), rtol=0, atol=1e-8)


def test_isotonic_on_every_small_integer_sequence() -> None:
    """All 4^4 sequences over {0, 1, 2, 3}: the fit is the closed form and no grid of
    non-decreasing candidates (multiples of 1/12, which include every block mean of
    up to 4 integers) is closer."""
    candidates = np.array([c for c in itertools.product(np.arange(0, 37) / 12.0, repeat=2)
                           if c[0] <= c[1]])
    for y in itertools.product(range(4), repeat=4):
        y = np.array(y, dtype=float)
        out = isotonic_increasing(y)
        np.testing.assert_allclose(out, _isotonic_min_max(y), rtol=0, atol=1e-8)
        # spot-check optimality against non-decreasing pairs on the first two entries
        # with the rest of the fit fixed (never better than the fit)
        rest = out[2:]
        feasible = candidates[candidates[:, 1] <= rest[0]]
        distance = ((feasible - y[:2]) ** 2).sum(axis=1)
        assert distance.min() >= ((out[:2] - y[:2]) ** 2).sum() - 1e-9


def test_isotonic_properties_on_long_inputs() -> None:
    rng = make_rng(2)
    for _ in range(50):
        n = int(rng.integers(2, 2_000))
        y = np.cumsum(rng.integers(0, 5, n)) + rng.laplace(0.0, 20.0, n)
        out = isotonic_increasing(y)
        assert out.shape == y.shape
        assert out.dtype == np.float64
        assert np.all(np.diff(out) >= 0)
        assert out.sum() == pytest.approx(y.sum(), rel=1e-10, abs=1e-8)  # PAVA keeps the sum
        np.testing.assert_allclose(out, _pava(y), rtol=1e-10, atol=1e-8)
        # the projection is no further from any non-decreasing sequence than y is
        truth = np.cumsum(rng.integers(0, 5, n)).astype(float)
        assert np.linalg.norm(out - truth) <= np.linalg.norm(y - truth) + 1e-9


def test_isotonic_keeps_sorted_input_and_small_inputs() -> None:
    y = np.array([-3.0, -3.0, 0.5, 2.0, 2.0, 7.25])
    np.testing.assert_array_equal(isotonic_increasing(y), y)
    np.testing.assert_array_equal(isotonic_increasing(np.array([4.0, 1.0])), [2.5, 2.5])
    np.testing.assert_array_equal(isotonic_increasing([3, 2, 1]), [2.0, 2.0, 2.0])
    single = np.array([5.0])
    out = isotonic_increasing(single)
    np.testing.assert_array_equal(out, single)
    assert out is not single  # a copy: the caller may modify it
    assert isotonic_increasing(np.array([])).size == 0
    with pytest.raises(ValueError):
        isotonic_increasing(np.zeros((2, 3)))


# --- tree inference ------------------------------------------------------------------------


def _design(branching: int, height: int) -> np.ndarray:
    """A maps the b^h leaves to every node count: leaves first, root last."""
    size = branching**height
    rows = []
    for i in range(height + 1):
        width = branching**i
        for j in range(size // width):
            row = np.zeros(size)
            row[j * width:(j + 1) * width] = 1.0
            rows.append(row)
    return np.array(rows)


@pytest.mark.parametrize("branching", [2, 3, 4])
@pytest.mark.parametrize("height", [1, 2, 3])
def test_tree_inference_is_ordinary_least_squares(branching: int, height: int) -> None:
    rng = make_rng(10 * branching + height)
    size = branching**height
    a = _design(branching, height)
    for _ in range(10):
        leaves = rng.integers(0, 50, size=(2, size))
        levels = [level + rng.laplace(0.0, 5.0, level.shape)
                  for level in tree_levels(leaves, branching)]
        assert [lv.shape[-1] for lv in levels] == [size // branching**i
                                                   for i in range(height + 1)]
        out = tree_inference(levels, branching)
        assert out.shape == (2, size)
        for row in range(2):
            y = np.concatenate([level[row] for level in levels])
            expected = np.linalg.lstsq(a, y, rcond=None)[0]
            np.testing.assert_allclose(out[row], expected, rtol=0, atol=1e-8)
        # consistent: the tree the result implies is its own inference
        implied = tree_levels(out, branching)
        np.testing.assert_allclose(tree_inference(implied, branching), out, rtol=0, atol=1e-8)
        # a projection never moves a consistent tree further from the noisy one than the
        # truth: ||A·out - y|| <= ||A·leaves - y||
        for row in range(2):
            y = np.concatenate([level[row] for level in levels])
            assert np.linalg.norm(a @ out[row] - y) <= np.linalg.norm(a @ leaves[row] - y) + 1e-9


@pytest.mark.parametrize("branching", [2, 3, 4, 16])
@pytest.mark.parametrize("height", [0, 1, 2, 3])
def test_tree_inference_returns_noise_free_leaves(branching: int, height: int) -> None:
    leaves = make_rng(branching + height).integers(0, 1_000, size=(3, branching**height))
    out = tree_inference(tree_levels(leaves, branching), branching)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, leaves, rtol=0, atol=1e-8)


def test_tree_inference_single_level_and_validation() -> None:
    noisy = np.array([1.5, -2.0, 3.0])
    np.testing.assert_array_equal(tree_inference([noisy], 3), noisy)  # nothing to reconcile
    # two leaves and a root: leaves move by a third of the discrepancy each
    out = tree_inference([np.array([1.0, 2.0]), np.array([6.0])], 2)
    np.testing.assert_allclose(out, [2.0, 3.0])
    with pytest.raises(ValueError):
        tree_inference([noisy], 1)


# --- non-negative with a total -------------------------------------------------------------


def _check_projection(v: np.ndarray, total: float, out: np.ndarray) -> None:
    """Feasibility and the KKT conditions of min ||out - v||² s.t. out >= 0, sum = total:
    some τ has out = max(v - τ, 0)."""
    assert out.shape == v.shape
    assert np.all(out >= 0)
    assert out.sum() == pytest.approx(total, rel=1e-10, abs=1e-9)
    flat_v, flat_out = v.ravel(), out.ravel()
    positive = flat_out > 0
    assert positive.any()
    shifts = flat_v[positive] - flat_out[positive]
    tau = float(np.mean(shifts))
    np.testing.assert_allclose(shifts, tau, rtol=0, atol=1e-9)
    assert np.all(flat_v[~positive] <= tau + 1e-9)
    np.testing.assert_allclose(flat_out, np.maximum(flat_v - tau, 0.0), rtol=0, atol=1e-9)


def test_nonnegative_with_total_is_the_simplex_projection() -> None:
    rng = make_rng(20)
    for _ in range(500):
        n = int(rng.integers(1, 20))
        v = rng.normal(rng.uniform(-5, 10), rng.uniform(0.1, 20), n)
        if rng.random() < 0.2:
            v = np.round(v)  # ties
        total = float(rng.choice([rng.uniform(0.01, 200.0), float(rng.integers(1, 100))]))
        _check_projection(v, total, nonnegative_with_total(v, total))


def test_nonnegative_with_total_beats_random_feasible_points() -> None:
    """Brute-force check of optimality: no random feasible point is closer."""
    rng = make_rng(21)
    for _ in range(50):
        v = rng.normal(1.0, 4.0, 5)
        total = 6.0
        out = nonnegative_with_total(v, total)
        best = np.linalg.norm(out - v)
        feasible = rng.dirichlet(np.full(5, 0.3), size=5_000) * total
        assert np.all(np.linalg.norm(feasible - v, axis=1) >= best - 1e-12)


def test_nonnegative_with_total_keeps_feasible_input_and_shape() -> None:
    rng = make_rng(22)
    for _ in range(100):
        v = rng.exponential(3.0, size=(3, 3))
        v[rng.random((3, 3)) < 0.3] = 0.0
        out = nonnegative_with_total(v, float(v.sum()))
        assert out.shape == (3, 3)
        np.testing.assert_allclose(out, v, rtol=0, atol=1e-12)  # idempotent on feasible input
        if v.sum() > 0:
            _check_projection(v, float(v.sum()), out)
    matrix = np.array([[5.0, -1.0], [2.0, 1.0]])
    _check_projection(matrix, 10.0, nonnegative_with_total(matrix, 10))


def test_nonnegative_with_total_zero_total_gives_zeros() -> None:
    out = nonnegative_with_total(np.array([1.0, -2.0, 3.0]), 0)
    np.testing.assert_array_equal(out, [0.0, 0.0, 0.0])


@pytest.mark.parametrize(("values", "total", "error"), [
    (np.array([1.0, 2.0]), -1.0, ValueError),
    (np.array([]), 3.0, ValueError),
])
def test_nonnegative_with_total_validation(values: np.ndarray, total: float,
                                           error: type[Exception]) -> None:
    with pytest.raises(error):
        nonnegative_with_total(values, total)


# --- rounding with a total -----------------------------------------------------------------


def test_round_with_total_on_projected_values() -> None:
    rng = make_rng(30)
    for _ in range(500):
        n = int(rng.integers(1, 30))
        total = int(rng.integers(1, 500))
        v = nonnegative_with_total(rng.normal(total / n, 5.0, n), total)
        out = round_with_total(v, total)
        assert out.dtype.kind == "i"
        assert out.shape == v.shape
        assert int(out.sum()) == total
        assert np.all(out >= 0)
        assert np.all(np.abs(out - v) < 1.0 + 1e-9)
        # largest remainder: only floor or ceiling of each value
        assert np.all((out == np.floor(v + 1e-9)) | (out == np.ceil(v - 1e-9)))


def test_round_with_total_known_values() -> None:
    np.testing.assert_array_equal(round_with_total(np.array([0.5, 0.5, 1.0]), 2), [1, 0, 1])
    np.testing.assert_array_equal(round_with_total(np.array([0.2, 0.7, 2.1]), 3), [0, 1, 2])
    np.testing.assert_array_equal(round_with_total(np.array([4.0, 0.0, 6.0]), 10), [4, 0, 6])
    # floating-point sums just below an integer are not floored away
    np.testing.assert_array_equal(round_with_total(np.array([2.9999999999, 1e-10]), 3), [3, 0])
    matrix = round_with_total(np.array([[1.25, 1.25], [1.25, 1.25]]), 5)
    assert matrix.shape == (2, 2)
    assert int(matrix.sum()) == 5
    np.testing.assert_array_equal(matrix, [[2, 1], [1, 1]])  # ties go to the earlier entry


def test_round_with_total_removes_units_when_the_floors_overshoot() -> None:
    """Values whose floors sum to more than ``total`` (input outside the documented
    contract): a unit is taken from the entries with the smallest fractional parts,
    never below zero."""
    out = round_with_total(np.array([1.5, 2.5, 0.0]), 2)
    # floors [1, 2, 0]; fractional parts [0.5, 0.5, 0]: the empty third entry is skipped
    np.testing.assert_array_equal(out, [0, 2, 0])
    out = round_with_total(np.array([1.0, 0.9, 1.2]), 2)  # floors [1, 0, 1] already sum to 2
    np.testing.assert_array_equal(out, [1, 0, 1])


def test_isotonic_matches_scipys_pool_adjacent_violators() -> None:
    """The hand-written PAVA (scipy.optimize's import cost roc half a second) gives scipy's
    answer on noisy cumulative counts, ties and a decreasing run (fixed seed)."""
    from scipy.optimize import isotonic_regression

    rng = np.random.default_rng(3)
    cases = [np.cumsum(rng.integers(0, 5, 300)) + rng.laplace(0, 8, 300),
             np.array([3.0, 3.0, 1.0, 1.0, 2.0]), np.arange(50.0)[::-1], rng.normal(0, 1, 1)]
    for y in cases:
        np.testing.assert_allclose(isotonic_increasing(y),
                                   isotonic_regression(y, increasing=True).x, rtol=0, atol=1e-9)
