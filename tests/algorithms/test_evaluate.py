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


# ------------------------------------------------------------ exact zero columns
def test_the_restricted_histogram_changes_by_at_most_two_over_replace_one_neighbours() -> None:
    """Rule 4 for the release with exact columns: records whose prediction is one of the
    classes the model can predict (here 0 and 1 of 3), their counts in those columns only;
    one replaced record moves one unit out and one in, and 2 is reached (also when a single
    class can be predicted)."""
    for kept in ([0, 1], [0]):
        records = list(itertools.product(range(3), kept))
        worst = 0
        for data in itertools.combinations_with_replacement(records, 3):
            t, p = np.array(data).T
            base = ev.confusion_counts(t, p, 3)[:, kept]
            for i, new in itertools.product(range(3), records):
                changed = list(data)
                changed[i] = new
                t2, p2 = np.array(changed).T
                moved = ev.confusion_counts(t2, p2, 3)[:, kept]
                worst = max(worst, int(np.abs(moved - base).sum()))
        assert worst == ev.SENSITIVITY


def test_an_exact_column_is_zero_and_the_rest_shares_n() -> None:
    counts = np.array([[200, 0, 0], [30, 90, 0], [10, 20, 0]])
    for seed in range(30):
        r = ev.private_confusion(counts, ("a", "b", "c"), epsilon=0.1,
                                 rng=np.random.default_rng(seed), exact_zero=(2,),
                                 exact_why="test")
        assert (r.matrix[:, 2] == 0).all() and (r.matrix >= 0).all() and r.n == 350
        assert r.exact_zero == (2,) and r.noisy_columns == 2
        assert r.per_class()["c"]["precision"] is None
    with pytest.raises(ValueError, match="predicts some class"):
        ev.private_confusion(counts, ("a", "b", "c"), epsilon=0.1,
                             rng=np.random.default_rng(0), exact_zero=(0, 1, 2))


def test_without_exact_columns_the_release_is_the_k_by_k_one_draw_for_draw() -> None:
    """A normal model's evaluation is unchanged: the same noise for the same generator."""
    from dpcli.mechanisms import discrete_laplace_mechanism
    from dpcli.mechanisms.consistency import nonnegative_with_total, round_with_total

    counts = np.array([[120, 30], [25, 75]])
    for seed in range(10):
        r = ev.private_confusion(counts, ("0", "1"), epsilon=0.3,
                                 rng=np.random.default_rng(seed))
        noisy = discrete_laplace_mechanism(counts, sensitivity=2, epsilon=0.3,
                                           rng=np.random.default_rng(seed))
        np.testing.assert_array_equal(r.matrix, round_with_total(
            nonnegative_with_total(noisy, 250), 250))
        assert "exact_columns" not in r.to_payload()


def test_a_never_predicted_class_has_no_precision_and_says_why() -> None:
    r = ev.Evaluation(classes=("0", "1"), matrix=np.array([[215, 0], [85, 0]]), epsilon=0.1,
                      positive=1, exact_zero=(1,), exact_why="one cell")
    m = r.per_class()["1"]
    assert m["precision"] is None and m["recall"] == 0.0 and m["f1"] == 0.0
    assert r.per_class()["0"]["recall"] == 1.0
    payload = r.to_payload()
    exact = payload["exact_columns"]
    assert exact["never_predicted"] == ["1"] and exact["decided_from"] == "one cell"
    assert "undefined" in exact["precision"] and "scale 20 on each of the 2" in \
        exact["noise_on_the_rest"]
    # one noisy cell per row: the row's noise and the accuracy's are those of one cell
    assert r.accuracy_noise_sd() == pytest.approx(ev.noise_sd(0.1) / 300)
    assert "no skill" in (r.caution() or "")


def test_error_bars_keep_an_exact_column_at_zero() -> None:
    from dpcli.forecast.evaluate import error_bars

    m = np.array([[215, 0], [85, 0]])
    bars = error_bars(m, 0.1, ("0", "1"), exact_zero=(1,))
    assert bars["per_class"]["1"]["precision"] is None
    assert bars["per_class"]["1"]["recall"] == [0.0, 0.0]
    assert bars["per_class"]["0"]["recall"] == [1.0, 1.0]   # every row is predicted '0'
    lo, hi = bars["accuracy"]
    assert lo < 215 / 300 < hi


def _reference(counts: np.ndarray, kept: list[int], epsilon: float, scale_factor: float,
               draws: int, rng: np.random.Generator) -> np.ndarray:
    """The claimed release built independently: discrete Laplace of scale 2/ε·factor on each
    kept cell as a difference of two geometrics, then the same post-processing."""
    from dpcli.mechanisms.consistency import nonnegative_with_total, round_with_total

    q = np.exp(-epsilon / (ev.SENSITIVITY * scale_factor))
    n = int(counts.sum())
    shape = (draws, counts.shape[0], len(kept))
    z = rng.geometric(1 - q, shape) - rng.geometric(1 - q, shape)
    return np.array([round_with_total(nonnegative_with_total(counts[:, kept] + z[i], n), n)
                     for i in range(draws)])


def _chi2_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample chi-square p-value on integer values, tails pooled to ≥ 20 per bin."""
    values = np.concatenate([a, b])
    edges = np.unique(np.quantile(values, np.linspace(0, 1, 41)))
    edges[-1] += 1
    ca, _ = np.histogram(a, edges)
    cb, _ = np.histogram(b, edges)
    keep = (ca + cb) > 0
    return float(stats.chi2_contingency(np.vstack([ca[keep], cb[keep]]))[1])


@pytest.mark.slow
def test_the_noisy_cells_have_the_claimed_distribution() -> None:
    """Distribution of the release with an exact column: its first cell against the claimed
    mechanism built independently (two-sample chi-square, α = 1e-4: a correct mechanism
    fails with probability at most 1e-4), and the same test rejects a scale 30 % off. The
    exact column is 0 in every draw."""
    counts = np.array([[300, 0], [100, 0]])
    draws = 20_000
    rng = np.random.default_rng(20261128)
    released = np.array([ev.private_confusion(counts, ("0", "1"), epsilon=0.5, rng=rng,
                                              exact_zero=(1,)).matrix for _ in range(draws)])
    assert (released[:, :, 1] == 0).all()
    ref_rng = np.random.default_rng(7)
    same = _reference(counts, [0], 0.5, 1.0, draws, ref_rng)
    assert _chi2_p(released[:, 0, 0], same[:, 0, 0]) > 1e-4
    wider = _reference(counts, [0], 0.5, 1.3, draws, ref_rng)
    assert _chi2_p(released[:, 0, 0], wider[:, 0, 0]) < 1e-4


def test_little_skill_is_said_and_real_skill_is_not() -> None:
    """Tester 13: balanced accuracy 0.514 on a 67 % class was released without a word. Within
    LITTLE_SKILL above chance the caution says 'little skill'; at or below, 'no skill'."""
    def caution(matrix: list[list[int]]) -> str | None:
        return ev.Evaluation(classes=("no", "yes"), matrix=np.array(matrix),
                             epsilon=1.0).no_skill()

    little = caution([[40, 60], [80, 130]])      # recalls 0.40 and 0.62: 0.510
    assert little is not None and "little skill" in little and "0.510" in little
    none = caution([[40, 60], [110, 100]])       # 0.40 and 0.476: 0.438
    assert none is not None and "no skill" in none
    assert caution([[70, 30], [60, 150]]) is None   # 0.70 and 0.714
