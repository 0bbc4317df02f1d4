"""Exponential mechanism and Gumbel top-k: validation, -inf handling, numerics, speed.

Distributional tests are in tests/statistical/test_noise_distributions.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpcli.mechanisms import (
    exponential_mechanism,
    exponential_probabilities,
    exponential_top_k,
    make_rng,
)

SCORES = np.array([0.0, 1.0, 2.0, 3.0, 5.0])


@pytest.mark.parametrize(("scores", "error"), [
    ([], ValueError),
    (np.zeros((2, 2)), ValueError),
    ([1.0, np.nan], ValueError),
    ([1.0, np.inf], ValueError),
    ([-np.inf, -np.inf], ValueError),
    (["a", "b"], TypeError),
    ("ab", TypeError),
    ([True, False], TypeError),
])
def test_rejects_bad_scores(scores: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        exponential_mechanism(scores, sensitivity=1.0, epsilon=1.0, rng=make_rng(0))
    with pytest.raises(error):
        exponential_probabilities(scores, sensitivity=1.0, epsilon=1.0)
    with pytest.raises(error):
        exponential_top_k(scores, 1, sensitivity=1.0, epsilon=1.0, rng=make_rng(0))


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"epsilon": 0.0}, ValueError),
    ({"epsilon": -0.5}, ValueError),
    ({"epsilon": np.inf}, ValueError),
    ({"epsilon": "1"}, TypeError),
    ({"sensitivity": 0.0}, ValueError),
    ({"sensitivity": np.nan}, ValueError),
    ({"sensitivity": 1e-320}, ValueError),  # ε/(2Δ) overflows
    ({"rng": 0}, TypeError),
    ({"monotonic": 1}, TypeError),
])
def test_rejects_bad_parameters(kwargs: dict, error: type[Exception]) -> None:
    params = {"sensitivity": 1.0, "epsilon": 1.0, "rng": make_rng(0)} | kwargs
    with pytest.raises(error):
        exponential_mechanism(SCORES, **params)


def test_error_messages_do_not_print_scores() -> None:
    with pytest.raises(ValueError) as info:
        exponential_mechanism([123456.5, np.nan], sensitivity=1.0, epsilon=1.0, rng=make_rng(0))
    assert "123456" not in str(info.value)


def test_never_picks_minus_infinity() -> None:
    # Deterministic: -inf + Gumbel noise is -inf, so any failure is a real bug.
    scores = np.array([-np.inf, 0.0, -np.inf, -1e6, -np.inf])
    rng = make_rng(1)
    picks = {exponential_mechanism(scores, sensitivity=1.0, epsilon=1e-6, rng=rng)
             for _ in range(2000)}
    assert picks <= {1, 3}
    assert picks == {1, 3}  # at ε = 1e-6 both finite candidates have probability ≈ 1/2
    probabilities = exponential_probabilities(scores, sensitivity=1.0, epsilon=1.0)
    assert probabilities[[0, 2, 4]].tolist() == [0.0, 0.0, 0.0]
    assert probabilities.sum() == pytest.approx(1.0)


def test_single_finite_candidate_is_always_chosen() -> None:
    scores = [-np.inf, -np.inf, 42.0]
    assert exponential_mechanism(scores, sensitivity=1.0, epsilon=1.0, rng=make_rng(0)) == 2


def test_returns_python_int_and_is_reproducible() -> None:
    picks_a = [exponential_mechanism(SCORES, sensitivity=1.0, epsilon=1.0, rng=rng)
               for rng in map(make_rng, range(30))]
    picks_b = [exponential_mechanism(SCORES, sensitivity=1.0, epsilon=1.0, rng=rng)
               for rng in map(make_rng, range(30))]
    assert all(type(p) is int for p in picks_a)
    assert picks_a == picks_b
    assert len(set(picks_a)) > 1  # at ε = 1 the top candidate has probability 0.67


def test_probabilities_are_the_softmax() -> None:
    probabilities = exponential_probabilities(SCORES, sensitivity=2.0, epsilon=1.0)
    weights = np.exp(1.0 * SCORES / (2 * 2.0))
    np.testing.assert_allclose(probabilities, weights / weights.sum(), rtol=1e-12)
    monotonic = exponential_probabilities(SCORES, sensitivity=2.0, epsilon=1.0, monotonic=True)
    weights = np.exp(1.0 * SCORES / 2.0)
    np.testing.assert_allclose(monotonic, weights / weights.sum(), rtol=1e-12)


def test_probabilities_are_shift_invariant_with_huge_scores() -> None:
    base = exponential_probabilities([0.0, 1.0, 2.0], sensitivity=1.0, epsilon=1.0)
    shifted = exponential_probabilities([1e9, 1e9 + 1, 1e9 + 2], sensitivity=1.0, epsilon=1.0)
    np.testing.assert_allclose(shifted, base, rtol=1e-6)
    huge = exponential_probabilities([-1e300, 1e300], sensitivity=1.0, epsilon=1.0)
    assert huge.tolist() == [0.0, 1.0]


def test_million_candidates_with_huge_scores_is_stable() -> None:
    # distinct scores 0, 1000, ..., 999_999_000 in random order
    scores = make_rng(0).permutation(1_000_000) * 1000.0
    pick = exponential_mechanism(scores, sensitivity=1.0, epsilon=1.0, rng=make_rng(1))
    top = exponential_top_k(scores, 10, sensitivity=1.0, epsilon=1.0, rng=make_rng(2))
    probabilities = exponential_probabilities(scores, sensitivity=1.0, epsilon=1.0)
    # Neighbouring scores are 1000 apart: 500 in log-probability for one pick at ε = 1
    # and 1000·ε/(2Δk) = 50 for top-10, so any swap has probability below 1e-20.
    order = np.argsort(-scores)
    assert pick == order[0]
    np.testing.assert_array_equal(top, order[:10])
    assert np.all(np.isfinite(probabilities))
    assert probabilities.sum() == pytest.approx(1.0)


def test_million_equal_huge_scores_choose_uniformly() -> None:
    scores = np.full(1_000_000, 1e9)
    picks = [exponential_mechanism(scores, sensitivity=1.0, epsilon=1.0, rng=make_rng(s))
             for s in range(5)]
    assert len(set(picks)) == 5  # collision probability about 1e-5
    np.testing.assert_allclose(exponential_probabilities(scores, sensitivity=1.0, epsilon=1.0),
                               1e-6, rtol=1e-9)


# --- top-k -------------------------------------------------------------------

def test_top_k_returns_k_distinct_indices() -> None:
    scores = make_rng(3).normal(size=50)
    for seed in range(20):
        picked = exponential_top_k(scores, 7, sensitivity=1.0, epsilon=0.5, rng=make_rng(seed))
        assert picked.dtype == np.int64
        assert picked.shape == (7,)
        assert len(set(picked.tolist())) == 7
        assert picked.min() >= 0
        assert picked.max() < 50


def test_top_k_all_candidates() -> None:
    picked = exponential_top_k(SCORES, 5, sensitivity=1.0, epsilon=1.0, rng=make_rng(0))
    assert sorted(picked.tolist()) == [0, 1, 2, 3, 4]


def test_top_k_in_selection_order_when_noise_is_negligible() -> None:
    # ε/(2Δk) = 1e4 per unit score: any swap has probability below e^-1000.
    scores = np.array([3.0, 9.0, 1.0, 7.0, 5.0])
    picked = exponential_top_k(scores, 3, sensitivity=1.0, epsilon=6e4, rng=make_rng(0))
    assert picked.tolist() == [1, 3, 4]


def test_top_k_is_reproducible() -> None:
    scores = make_rng(4).normal(size=100)
    first = exponential_top_k(scores, 5, sensitivity=1.0, epsilon=1.0, rng=make_rng(9))
    second = exponential_top_k(scores, 5, sensitivity=1.0, epsilon=1.0, rng=make_rng(9))
    np.testing.assert_array_equal(first, second)


def test_top_k_never_picks_minus_infinity() -> None:
    scores = np.array([-np.inf, 1.0, -np.inf, 0.0, 2.0, -np.inf])
    for seed in range(200):
        picked = exponential_top_k(scores, 3, sensitivity=1.0, epsilon=1e-3, rng=make_rng(seed))
        assert sorted(picked.tolist()) == [1, 3, 4]


@pytest.mark.parametrize(("k", "error"), [
    (0, ValueError),
    (-1, ValueError),
    (4, ValueError),  # only 3 finite scores
    (7, ValueError),  # more than the candidates
    (2.0, TypeError),
    (True, TypeError),
    ("2", TypeError),
])
def test_top_k_rejects_bad_k(k: object, error: type[Exception]) -> None:
    scores = np.array([-np.inf, 1.0, -np.inf, 0.0, 2.0, -np.inf])
    with pytest.raises(error, match="k"):
        exponential_top_k(scores, k, sensitivity=1.0, epsilon=1.0, rng=make_rng(0))
