"""The private confusion matrix (dpcli.algorithms.evaluate)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from dpcli.algorithms import evaluate as ev
from dpcli.budget import Budget


def test_confusion_counts_rows_true_columns_predicted() -> None:
    c = ev.confusion_counts(np.array([0, 0, 1, 1, 1, 2]), np.array([0, 1, 1, 1, 2, 0]), 3)
    np.testing.assert_array_equal(c, [[1, 1, 0], [0, 2, 1], [1, 0, 0]])


def test_confusion_matrix_changes_by_at_most_two_over_replace_one_neighbours() -> None:
    """Rule 4: one record out of one cell, one into another — and 2 is reached."""
    records = list(itertools.product(range(3), range(3)))
    worst = 0
    for data in itertools.combinations_with_replacement(records, 3):
        t, p = np.array(data).T
        base = ev.confusion_counts(t, p, 3)
        for i, new in itertools.product(range(3), records):
            changed = list(data)
            changed[i] = new
            t2, p2 = np.array(changed).T
            worst = max(worst, int(np.abs(ev.confusion_counts(t2, p2, 3) - base).sum()))
    assert worst == ev.SENSITIVITY == 2


def test_release_is_consistent_with_the_public_n() -> None:
    counts = np.array([[500, 3], [0, 40]])
    for seed in range(20):
        r = ev.private_confusion(counts, ("0", "1"), epsilon=0.1, rng=np.random.default_rng(seed),
                                 positive=1)
        assert r.matrix.dtype.kind == "i" and (r.matrix >= 0).all() and r.n == 543
    payload = r.to_payload()
    assert payload["n"] == 543 and payload["positive_class"] == "1"
    assert payload["noise"]["scale"] == pytest.approx(20.0)
    assert set(payload["per_class"]) == {"0", "1"}


def test_metrics_follow_from_the_matrix() -> None:
    r = ev.Evaluation(classes=("0", "1"), matrix=np.array([[50, 10], [5, 35]]), epsilon=1.0)
    assert r.accuracy == pytest.approx(0.85)
    m = r.per_class()["1"]
    assert m["precision"] == pytest.approx(35 / 45) and m["recall"] == pytest.approx(35 / 40)
    assert m["f1"] == pytest.approx(2 * (35 / 45) * (35 / 40) / (35 / 45 + 35 / 40))
    empty = ev.Evaluation(classes=("0", "1"), matrix=np.array([[10, 0], [5, 0]]), epsilon=1.0)
    assert empty.per_class()["1"]["precision"] is None


def test_plan_has_one_step_with_sensitivity_two() -> None:
    p = ev.plan(Budget(0.2), 2)
    assert [s.name for s in p] == ["confusion"] and "Δ=2" in p.step("confusion").note
    assert "scale 10" in p.step("confusion").note


@pytest.mark.slow
def test_reported_noise_sd_matches_the_draws() -> None:
    """The reported cell sd is the discrete Laplace sd at scale 2/ε.

    Chi-square test of the variance on 20,000 draws: a false failure has
    probability 1e-4 (two-sided), and a 10% error in the sd is detected.
    """
    rng = np.random.default_rng(11)
    from dpcli.mechanisms import discrete_laplace_mechanism

    draws = discrete_laplace_mechanism(np.zeros(20_000, dtype=np.int64), sensitivity=2,
                                       epsilon=0.5, rng=rng).astype(float)
    sd = ev.noise_sd(0.5)
    # the sample variance of a heavy-ish tail: use a normal approximation with the 4th moment
    var = draws.var()
    se = np.sqrt((np.mean(draws**4) - var**2) / draws.size)
    z = (var - sd**2) / se
    assert abs(z) < stats.norm.ppf(1 - 0.5e-4)
    assert abs(var - (1.1 * sd) ** 2) / se > stats.norm.ppf(1 - 0.5e-4)


def test_f1_is_zero_not_missing_when_precision_is_zero() -> None:
    r = ev.Evaluation(classes=("0", "1"), matrix=np.array([[50, 10], [5, 0]]), epsilon=1.0)
    m = r.per_class()["1"]
    assert m["precision"] == 0.0 and m["recall"] == 0.0 and m["f1"] == 0.0


def test_confusion_pass_adds_batches_to_the_whole_files_counts() -> None:
    rng = np.random.default_rng(21)
    true, predicted = rng.integers(0, 3, 1000), rng.integers(0, 3, 1000)
    p = ev.ConfusionPass(3)
    for a, b in [(0, 0), (0, 333), (333, 334), (334, 1000)]:
        p.add(predicted[a:b], true[a:b])
    assert p.counts.dtype == np.int64
    np.testing.assert_array_equal(p.counts, ev.confusion_counts(true, predicted, 3))
    with pytest.raises(ValueError, match="same length"):
        p.add(np.zeros(2, dtype=int), np.zeros(3, dtype=int))


def test_a_class_whose_released_size_is_noise_is_named() -> None:
    """The tester's case: an 'Up'-only test set released a 'Down' row of 16 (± 39 at 95 %
    for two cells at ε 0.2), recall 1.0 for a class with no rows; a large class is not
    named."""
    small = ev.Evaluation(classes=("Down", "Up"), matrix=np.array([[16, 0], [402, 230]]),
                          epsilon=0.2)
    caution = small.noise_sized_classes()
    assert caution is not None and "'Down' (released size 16)" in caution
    assert "'Up'" not in caution
    assert small.caution() is not None and "balanced accuracy are noise" in small.caution()
    sized = ev.Evaluation(classes=("Down", "Up"), matrix=np.array([[150, 50], [100, 300]]),
                          epsilon=0.2)
    assert sized.noise_sized_classes() is None and sized.caution() is None


def test_an_empty_class_is_named_in_nearly_every_run() -> None:
    """Distribution: with no 'Down' rows at ε 0.2 the released row is within 1.96·√2·sd of
    zero in ~99 % of runs (measured 0.9935 of 2,000); with 200 rows a class it never is.
    Over 1,000 runs, at least 95 % named: at a true rate of 0.99 the binomial probability of
    fewer is about 1e-12 (α far below 1e-4, checked below)."""
    rng = np.random.default_rng(20261127)
    empty = np.array([[0, 0], [400, 232]])
    named = sum(ev.private_confusion(empty, ("Down", "Up"), epsilon=0.2, rng=rng)
                .noise_sized_classes() is not None for _ in range(1000))
    assert stats.binom.cdf(949, 1000, 0.99) < 1e-4
    assert named >= 950
    sized = np.array([[150, 50], [100, 300]])
    assert not any(ev.private_confusion(sized, ("Down", "Up"), epsilon=0.2, rng=rng)
                   .noise_sized_classes() for _ in range(200))
