"""PrivPfC (publish-grid): threshold, pool, quality and its sensitivity, cube scoring,
the mechanisms' distributions, the pre-selection branch.

Distribution tests wrongly fail with probability at most α = 1e-4 each.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from dpcli.algorithms import privpfc as pp
from dpcli.algorithms.feature_selection import chi2_score
from dpcli.budget import Budget
from dpcli.checks import Where
from dpcli.data.schema import CategoricalColumn, NumericColumn
from dpcli.data.taxonomy import hierarchy
from dpcli.mechanisms import exponential_probabilities, make_rng
from dpcli.stats.engine import JointTable
from tests.statistical.test_noise_distributions import discrete_laplace_chi2_pvalue

ALPHA = 1e-4
WHERE = Where(Path("spec.yaml"), "columns.x.taxonomy")


def hierarchies() -> list:
    """Three small columns: a two-level grouping, a numeric with 2/4 bins, a flat one."""
    a = CategoricalColumn("a", ("a1", "a2", "a3", "a4"),
                          taxonomy={"Any": {"g1": ["a1", "a2"], "g2": ["a3", "a4"]}})
    b = NumericColumn("b", 0.0, 8.0, taxonomy={"bins": [2, 4]})
    c = CategoricalColumn("c", ("c1", "c2", "c3"))
    return [hierarchy(col, WHERE) for col in (a, b, c)]


def random_table(rng: np.random.Generator, hs: list, rows: int) -> JointTable:
    """Raw rows (one per record) as a JointTable: leaves drawn at random, one-hot classes.

    Some rows get the extra 'in no leaf' index of the first column.
    """
    leaves = np.column_stack([rng.integers(0, h.n_leaves + (j == 0), rows)
                              for j, h in enumerate(hs)]).astype(np.int32)
    label = rng.integers(0, 2, rows)
    counts = np.zeros((rows, 2), dtype=np.int64)
    counts[np.arange(rows), label] = 1
    return JointTable(tuple(h.column for h in hs), leaves, counts)


def replace_one(rng: np.random.Generator, table: JointTable, hs: list) -> JointTable:
    """A neighbour: one record gets new leaves (maybe 'in no leaf') and a random class."""
    other = JointTable(table.columns, table.leaves.copy(), table.counts.copy())
    i = int(rng.integers(len(table.leaves)))
    other.leaves[i] = [rng.integers(0, h.n_leaves + (j == 0)) for j, h in enumerate(hs)]
    other.counts[i] = [1, 0] if rng.random() < 0.5 else [0, 1]
    return other


# -------------------------------------------------------------------- threshold, pool
def test_cell_threshold_keeps_noise_below_a_fifth_of_an_average_cell() -> None:
    assert pp.cell_threshold(30_162, 4 / 7) == 1723            # ⌊n·ε/10⌋
    assert pp.cell_threshold(10, 0.01) == 1                    # at least one cell
    for n, eps in ((1000, 0.3), (45_222, 1.0), (7, 5.0)):
        t = pp.cell_threshold(n, eps)
        assert (pp.HIST_SENSITIVITY / eps) <= 0.2 * n / t + 1e-9 or t == 1
        assert (pp.HIST_SENSITIVITY / eps) > 0.2 * n / (t + 1)


def test_pool_is_exactly_the_grids_under_the_threshold() -> None:
    sizes = [(1, 2, 5), (1, 3, 7, 12), (1, 2), (1, 4)]
    for t in (1, 6, 30, 200, 10_000):
        got = {tuple(int(x) for x in g) for g in pp.pool(sizes, t)}
        want = {g for g in itertools.product(*(range(len(s)) for s in sizes))
                if math.prod(s[lv] for s, lv in zip(sizes, g, strict=True)) <= t}
        assert got == want
    assert len(pp.pool(sizes, 10_000, cap=5)) == 5            # stops once the cap is reached
    assert len(pp.pool(sizes, 10_000, cap=10_000)) == len(pp.pool(sizes, 10_000))


def test_design_switches_to_pre_selection_at_the_cap() -> None:
    hs = hierarchies()
    plain = pp.design(hs, 5000, Budget(1.0))
    assert plain.select_k is None
    assert [s.name for s in plain.plan] == ["select_grid", "histogram"]
    assert plain.plan.step("histogram").budget.eps == pytest.approx(4 / 7)
    assert plain.threshold == pp.cell_threshold(5000, 4 / 7)
    assert plain.pool_size == len(pp.pool([h.sizes for h in hs], plain.threshold))
    capped = pp.design(hs, 5000, Budget(1.0), max_pool=plain.pool_size)
    assert [s.name for s in capped.plan] == ["select_columns", "select_grid", "histogram"]
    assert [s.budget.eps for s in capped.plan] == pytest.approx([0.3, 0.3, 0.4])
    assert capped.threshold == pp.cell_threshold(5000, 0.4)
    assert 1 <= capped.select_k < len(hs)
    assert capped.plan.total.eps == pytest.approx(1.0)


def test_selection_k_is_capped_so_any_k_columns_fit_the_pool() -> None:
    hs = hierarchies()                              # heights 3, 3, 2
    assert pp.selection_k(hs, threshold=10**6, max_pool=10) == 2   # 3·3 < 10 ≤ 3·3·2
    assert pp.selection_k(hs, threshold=10**6, max_pool=9) == 1
    assert pp.selection_k(hs, threshold=2, max_pool=10**6) == 2    # ⌈2 log 2 / log 2⌉


# ------------------------------------------------------------------------ quality
def test_quality_is_lemma_one() -> None:
    rate = 0.3
    hist = np.array([[10.0, 4.0], [0.0, 0.0], [3.0, 3.0]])
    x = 6.0
    p_flip = math.exp(-rate * x) * (1 + rate * x / 2) / 2
    want = (4 * (1 - p_flip) + 10 * p_flip) + 0 + 3.0
    assert pp.misclassification(hist, rate) == pytest.approx(want)


def test_flip_probability_is_that_of_the_difference_of_two_laplaces() -> None:
    rng = make_rng(5)
    rate, x = 0.4, 3.0
    draws = 400_000
    z = rng.laplace(0, 1 / rate, draws) - rng.laplace(0, 1 / rate, draws)
    hits = int((z > x).sum())
    p = float(pp._flip_term(x, rate)) / x
    assert sps.binomtest(hits, draws, p).pvalue > ALPHA


def _increments(rate: float, x_max: int) -> np.ndarray:
    """f(u + 1, v) − f(u, v) for every u, v ≤ x_max: one record added to the first class."""
    u, v = np.meshgrid(np.arange(x_max + 2.0), np.arange(x_max + 1.0), indexing="ij")
    f = np.minimum(u, v) + pp._flip_term(np.abs(u - v), rate)
    return (f[1:] - f[:-1]).ravel()


@pytest.mark.parametrize("rate", [0.02, 0.2, 1.0, 5.0])
def test_quality_sensitivity_bounds_every_increment_difference(rate: float) -> None:
    inc = _increments(rate, int(80 / rate) + 20)
    delta = pp.quality_sensitivity(rate)
    assert inc.max() - inc.min() <= delta + 1e-9
    assert inc.max() - inc.min() >= delta - 1e-6      # the bound is attained on integers


def _worst_neighbour_change(seed: int, hs: list, trials: int, most_rows: int,
                            score: Callable[[JointTable, np.ndarray], np.ndarray]) -> float:
    """The largest change of any grid's score between random replace-one neighbours."""
    rng = make_rng(seed)
    grids = pp.pool([h.sizes for h in hs], 10**6)
    worst = 0.0
    for _ in range(trials):
        table = random_table(rng, hs, int(rng.integers(1, most_rows)))
        neighbour = replace_one(rng, table, hs)
        q = [score(t, grids) for t in (table, neighbour)]
        worst = max(worst, float(np.abs(q[0] - q[1]).max()))
    return worst


@pytest.mark.parametrize("rate", [0.05, 0.5, 2.0])
def test_quality_sensitivity_on_random_replace_one_neighbours(rate: float) -> None:
    hs = hierarchies()

    def per_grid(t: JointTable, grids: np.ndarray) -> np.ndarray:
        rows = pp.cell_rows(t, 1)
        return np.array([pp.misclassification(pp.cells_of(pp.grid_histogram(rows, hs, g)),
                                               rate) for g in grids])

    assert _worst_neighbour_change(11, hs, 60, 40, per_grid) \
        <= pp.quality_sensitivity(rate) + 1e-9


@pytest.mark.parametrize("rate", [0.1, 1.0])
def test_quality_sensitivity_is_reached_by_a_replace_one_pair(rate: float) -> None:
    """Move a record from the larger class of one cell to the smaller class of another."""
    x = np.arange(0, int(60 / rate) + 101)
    d = np.diff(pp._flip_term(x.astype(float), rate))     # D(x): add to the larger class
    up = np.concatenate([d, 1 - d])                        # 1 − D(x − 1): add to the smaller
    best_up, best_down = int(np.argmax(up)), int(np.argmin(up))
    assert best_up >= len(d) and best_down < len(d)       # sup is 1 − D(·), inf is D(·)
    x_up = best_up - len(d) + 1          # the smaller class of cell 2 gains, at gap x_up
    x_down = best_down                   # the larger class of cell 1 loses, gap x_down + 1
    before = np.array([[50 + x_down + 1, 50], [80, 80 + x_up]], dtype=float)
    after = np.array([[50 + x_down, 50], [81, 80 + x_up]], dtype=float)
    change = pp.misclassification(after, rate) - pp.misclassification(before, rate)
    assert abs(change) == pytest.approx(pp.quality_sensitivity(rate), rel=1e-8)


# ------------------------------------------------------------------------ scoring
def test_cube_scores_equal_the_naive_recount_of_every_grid() -> None:
    rng = make_rng(3)
    hs = hierarchies()
    table = random_table(rng, hs, 500)
    grids = pp.pool([h.sizes for h in hs], 10**6)
    cube = pp.score_pool(table, hs, grids, 0.25, positive=1)
    rows = pp.cell_rows(table, 1)
    naive = [pp.misclassification(pp.cells_of(pp.grid_histogram(rows, hs, g)), 0.25)
             for g in grids]
    np.testing.assert_allclose(cube, naive, rtol=1e-12)


def _adult_like() -> list:
    """Four columns of Adult-like shape: two groupings, equal-width bins, a flat one."""
    a = CategoricalColumn("a", tuple(f"a{i}" for i in range(8)),
                          taxonomy={"Any": {"g1": {"h1": ["a0", "a1"], "h2": ["a2", "a3"]},
                                            "g2": {"h3": ["a4", "a5"], "h4": ["a6", "a7"]}}})
    b = NumericColumn("b", 0.0, 16.0, taxonomy={"bins": [2, 4, 8, 16]})
    c = CategoricalColumn("c", ("c1", "c2", "c3"))
    e = CategoricalColumn("e", ("e1", "e2", "e3", "e4", "e5"),
                          taxonomy={"Any": {"x": ["e1", "e2"], "y": ["e3", "e4", "e5"]}})
    return [hierarchy(col, WHERE) for col in (a, b, c, e)]


def _weighted(rng: np.random.Generator, hs: list, rows: int, *, classes: str = "both",
              no_leaf: float = 0.1, skew: bool = False) -> JointTable:
    """A joint table (distinct leaf tuples with counts, as the pass builds it): leaves at
    random (a share in no leaf on every column; ``skew`` piles rows on a few tuples),
    counts of one or both classes."""
    cols = []
    for h in hs:
        leaf = rng.integers(0, h.n_leaves, rows)
        if skew:
            leaf = np.minimum(leaf, rng.integers(0, 2, rows))
        leaf[rng.random(rows) < no_leaf] = h.n_leaves
        cols.append(leaf)
    leaves, inverse = np.unique(np.column_stack(cols), axis=0, return_inverse=True)
    label = rng.random(rows) < 0.3 if classes == "both" else np.full(rows, classes == "pos")
    counts = np.zeros((len(leaves), 2), dtype=np.int64)
    np.add.at(counts, (inverse.reshape(-1), label.astype(int)), 1)
    return JointTable(tuple(h.column for h in hs), leaves.astype(np.int32), counts)


SHAPES: dict[str, tuple[Callable[[], list], int, dict[str, Any]]] = {
    "adult-like": (_adult_like, 4000, {}),
    "one column": (lambda: _adult_like()[:1], 300, {}),
    "one flat column": (lambda: _adult_like()[2:3], 50, {}),
    "single class": (_adult_like, 2000, {"classes": "pos"}),
    "no positives": (hierarchies, 500, {"classes": "neg"}),
    "mostly empty cells": (_adult_like, 40, {"no_leaf": 0.0}),
    "all in no leaf": (hierarchies, 60, {"no_leaf": 1.0}),
    "skewed": (_adult_like, 5000, {"skew": True, "no_leaf": 0.3}),
}

@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("threshold", [3, 40, 10**6])
def test_sparse_scores_equal_the_dense_cube(shape: str, threshold: int,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The sparse cube scores every grid as the dense one (today's code): the counts are
    the same integers and the terms the same, only the flip terms' sum skips the empty
    cells' zeros (a different rounding, at most ~1e-16 relative); the same on any
    number of threads and chunks, so the pick never depends on the machine."""
    make, rows, kw = SHAPES[shape]
    hs = make()
    table = _weighted(make_rng(sorted(SHAPES).index(shape)), hs, rows, **kw)
    grids = pp.pool([h.sizes for h in hs], threshold)
    for rate in (0.01, 0.3, 4.0):
        dense = pp.score_pool_dense(table, hs, grids, rate, 1)
        sparse = pp.score_pool(table, hs, grids, rate, 1, threads=1, method="sparse")
        np.testing.assert_allclose(sparse, dense, rtol=1e-13, atol=1e-12)
        assert np.argmin(sparse) == np.argmin(dense) or \
            dense[np.argmin(sparse)] == pytest.approx(dense.min(), rel=1e-13)
        monkeypatch.setattr(pp, "CHUNK_CELLS", 7)           # many chunks, on 3 threads
        many = pp.score_pool(table, hs, grids, rate, 1, threads=3, method="sparse")
        np.testing.assert_array_equal(many, sparse)
        monkeypatch.undo()


def test_auto_picks_the_dense_cube_only_for_small_grids(monkeypatch: pytest.MonkeyPatch) -> None:
    hs = _adult_like()
    table = _weighted(make_rng(8), hs, 500)
    grids = pp.pool([h.sizes for h in hs], 10**6)
    dense = pp.score_pool_dense(table, hs, grids, 0.3, 1)

    def refuse(*args: Any, **kwargs: Any) -> np.ndarray:
        raise AssertionError("dense cube used")

    with monkeypatch.context() as m:
        m.setattr(pp, "score_pool_dense", refuse)
        m.setattr(pp, "DENSE_BELOW", 1)                  # every grid is "large"
        np.testing.assert_allclose(pp.score_pool(table, hs, grids, 0.3, 1), dense, rtol=1e-13)
    m2 = pytest.MonkeyPatch()
    m2.setattr(pp, "DENSE_BELOW", 10**9)                # every grid is "small"
    try:
        assert pp.score_pool(table, hs, grids, 0.3, 1).tolist() == dense.tolist()
    finally:
        m2.undo()


def test_sparse_scores_of_an_empty_table_are_zero() -> None:
    hs = hierarchies()
    table = JointTable(("a", "b", "c"), np.zeros((0, 3), dtype=np.int32),
                       np.zeros((0, 2), dtype=np.int64))
    grids = pp.pool([h.sizes for h in hs], 10**6)
    assert pp.score_pool(table, hs, grids, 0.5, 1, method="sparse").tolist() == [0.0] * len(grids)
    assert pp.score_pool_dense(table, hs, grids, 0.5, 1).tolist() == [0.0] * len(grids)


@pytest.mark.parametrize("threads", [1, 3])
def test_sparse_walk_in_small_batches_on_threads_scores_every_grid_once(
        threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of maximal grids walked on the workers (several sets per projection, many
    batches waiting) give the one-batch scores, and the progress adds up to the pool."""
    hs = _adult_like()
    table = _weighted(make_rng(4), hs, 3000, skew=True)
    grids = pp.pool([h.sizes for h in hs], 60)
    whole = pp.score_pool(table, hs, grids, 0.3, 1, threads=1, method="sparse")
    monkeypatch.setattr(pp, "BATCH_CELLS", 300)
    monkeypatch.setattr(pp, "CHUNK_CELLS", 50)
    seen: list[int] = []
    small = pp.score_pool(table, hs, grids, 0.3, 1, seen.append, threads=threads,
                          method="sparse")
    np.testing.assert_array_equal(small, whole)
    assert sum(seen) == len(grids) and len(seen) >= 3


@pytest.mark.parametrize("rate", [1e-6, 0.01, 0.3, 4.0])
def test_flip_terms_from_the_table_are_the_computed_floats(rate: float) -> None:
    """The table holds the function's own floats: bit for bit on any length and offset
    (vector and scalar tails), past the table, on floats holding integers, and a
    non-integer float is computed."""
    rng = make_rng(17)
    for n in (1, 3, 8, 17, 1001):
        for offset in range(3):
            x = rng.integers(0, 2 * pp.FLIP_TABLE, n + offset)[offset:]
            want = pp._flip_term(x, rate)
            assert pp._flip_terms(x, rate).tobytes() == np.asarray(want).tobytes()
            assert pp._flip_terms(x.astype(float), rate).tobytes() == \
                np.asarray(want).tobytes()
    odd = np.array([0.5, 2.0, 70000.25])
    assert pp._flip_terms(odd, rate).tobytes() == np.asarray(pp._flip_term(odd, rate)).tobytes()


def test_sparse_keys_flag_exactly_the_cells_in_no_leaf() -> None:
    """A cell is in no real cell when one of its fields holds the all-ones "in no leaf"
    node; the one-step test (haszero on the complement) against a field-by-field check,
    on widths 1 to 6 (n_leaves 1, 3 and 7 make the extra node a power of two minus one)."""
    cols = [CategoricalColumn(f"c{n}", tuple(f"v{i}" for i in range(n))) for n in
            (1, 2, 3, 4, 7, 8, 20, 33)]
    hs = [hierarchy(col, WHERE) for col in cols]
    k = pp._keys(hs)
    assert k is not None
    rng = make_rng(5)
    fields = []
    for h, width in zip(hs, k.bits.tolist(), strict=True):
        f = rng.integers(0, h.n_leaves, 20_000)
        f[rng.random(20_000) < 0.15] = (1 << width) - 1
        f[rng.random(20_000) < 0.15] = 0                  # a column at level 0
        fields.append(f)
    key = sum((f << int(s)) for f, s in zip(fields, k.shift.tolist(), strict=True))
    want = np.all([f != (1 << w) - 1 for f, w in zip(fields, k.bits.tolist(), strict=True)],
                  axis=0)
    assert 0 < want.sum() < len(want)
    np.testing.assert_array_equal(k.valid(np.asarray(key, dtype=np.int64)), want)


def test_sparse_scores_of_counts_past_two_to_the_31_equal_the_dense_cube() -> None:
    """Grids holding 2^31 records or more keep the two counts apart (no packing)."""
    hs = _adult_like()
    small = _weighted(make_rng(9), hs, 600)
    table = JointTable(small.columns, small.leaves, small.counts * (1 << 24) + small.counts)
    assert int(table.counts.sum()) >= 2**31
    grids = pp.pool([h.sizes for h in hs], 10**6)
    for rate in (1e-9, 1e-7):
        dense = pp.score_pool_dense(table, hs, grids, rate, 1)
        sparse = pp.score_pool(table, hs, grids, rate, 1, threads=2, method="sparse")
        np.testing.assert_allclose(sparse, dense, rtol=1e-13)


@pytest.mark.parametrize("rate", [0.05, 0.5, 2.0])
def test_sparse_scores_change_at_most_delta_q_between_neighbours(rate: float) -> None:
    """Replace-one sensitivity of the scores as the sparse cube computes them."""
    hs = _adult_like()
    delta = pp.quality_sensitivity(rate)
    worst = _worst_neighbour_change(
        21, hs, 25, 60,
        lambda t, grids: pp.score_pool(t, hs, grids, rate, 1, threads=1, method="sparse"))
    assert worst <= delta + 1e-9
    assert worst > 0.5 * delta        # the test moves scores near the bound: it can fail


def test_a_row_in_no_leaf_is_in_no_cell_only_of_grids_using_that_column() -> None:
    hs = hierarchies()
    table = JointTable(("a", "b", "c"), np.array([[4, 0, 0], [0, 0, 0]], dtype=np.int32),
                       np.array([[1, 0], [0, 1]]))
    rows = pp.cell_rows(table, 1)
    unused = pp.cells_of(pp.grid_histogram(rows, hs, (0, 1, 0)))
    assert unused.reshape(-1, 2).tolist() == [[1.0, 1.0], [0.0, 0.0]]
    used = pp.cells_of(pp.grid_histogram(rows, hs, (1, 0, 0)))
    assert used.reshape(-1, 2).tolist() == [[0.0, 1.0], [0.0, 0.0]]


def test_many_columns_score_every_grid_and_keep_few_axes() -> None:
    """40 columns of height 4: the heights' product overflows int64 keys, and a dense
    histogram over every column would exceed numpy's dimension limit."""
    col = NumericColumn("x", 0.0, 8.0, taxonomy={"bins": [2, 4, 8]})
    hs = [hierarchy(col, WHERE) for _ in range(40)]
    rng = make_rng(12)
    table = JointTable(tuple(f"x{i}" for i in range(40)),
                       rng.integers(0, 8, (300, 40)).astype(np.int32),
                       np.eye(2, dtype=np.int64)[rng.integers(0, 2, 300)])
    grids = pp.pool([h.sizes for h in hs], 4)
    quality = pp.score_pool(table, hs, grids, 0.5, positive=1)
    rows = pp.cell_rows(table, 1)
    for i in rng.choice(len(grids), 40, replace=False):
        want = pp.misclassification(pp.cells_of(pp.grid_histogram(rows, hs, grids[i])), 0.5)
        assert quality[i] == pytest.approx(want)


def test_quality_sensitivity_for_a_tiny_rate_matches_the_continuous_limit() -> None:
    """Below rate 3e-5 the scan is coarse then refined; Δq tends to a constant as r → 0."""
    small, tiny = pp.quality_sensitivity(1e-4), pp.quality_sensitivity(1e-7)
    assert tiny == pytest.approx(small, rel=1e-3)
    assert 1.0 < tiny < 1.3


def test_column_scores_change_at_most_four_between_neighbours() -> None:
    rng = make_rng(8)
    hs = hierarchies()
    worst = 0.0
    for _ in range(300):
        table = random_table(rng, hs, int(rng.integers(2, 30)))
        other = replace_one(rng, table, hs)
        diff = pp.column_scores(table, hs, 1) - pp.column_scores(other, hs, 1)
        worst = max(worst, float(np.abs(diff).max()))
    assert worst <= pp.CHI2_SENSITIVITY + 1e-9


def test_column_scores_are_chi2_of_the_leaf_tables() -> None:
    hs = hierarchies()
    table = random_table(make_rng(4), hs, 200)
    scores = pp.column_scores(table, hs, 1)
    labels = table.counts.argmax(axis=1)
    for j, h in enumerate(hs):
        t = np.zeros((2, h.n_leaves + 1))
        np.add.at(t, (labels, table.leaves[:, j]), 1)
        assert scores[j] == pytest.approx(chi2_score(t, 1))


# ------------------------------------------------------------------------ mechanisms
def test_select_grid_follows_the_exponential_mechanism_with_delta_q() -> None:
    rate, eps = 0.5, 2.0
    quality = np.array([10.0, 11.0, 12.5, 14.0])
    rng = make_rng(21)
    draws = 40_000
    seen = np.bincount([pp.select_grid(quality, rate, eps, rng) for _ in range(draws)],
                       minlength=4)
    want = exponential_probabilities(-quality, sensitivity=pp.quality_sensitivity(rate),
                                     epsilon=eps)
    assert sps.chisquare(seen, want * draws).pvalue > ALPHA
    wrong = exponential_probabilities(-quality, sensitivity=1.0, epsilon=eps)  # Δq omitted
    assert sps.chisquare(seen, wrong * draws).pvalue < ALPHA


def test_noisy_counts_are_discrete_laplace_of_scale_two_over_epsilon() -> None:
    eps = 0.8
    hist = np.full((20_000, 2), 1000.0)
    noisy = pp.noisy_counts(hist, eps, make_rng(9))
    assert noisy.dtype == np.int64 and noisy.shape == (20_000, 2)
    assert discrete_laplace_chi2_pvalue(noisy.ravel() - 1000, 2 / eps) > ALPHA
    assert discrete_laplace_chi2_pvalue(noisy.ravel() - 1000, 1 / eps) < ALPHA


def test_noisy_counts_are_clamped_at_zero() -> None:
    noisy = pp.noisy_counts(np.zeros((5000, 2)), 0.5, make_rng(2))
    assert noisy.min() == 0 and (noisy > 0).any()


# ------------------------------------------------------------------------ publish
def _informative(rng: np.random.Generator, hs: list, rows: int) -> JointTable:
    """Label = (column a is in group g2): the grid using a at level 1 classifies perfectly."""
    table = random_table(rng, hs, rows)
    leaves = table.leaves.copy()
    leaves[:, 0] = rng.integers(0, hs[0].n_leaves, rows)
    label = (leaves[:, 0] >= 2).astype(int)
    counts = np.zeros((rows, 2), dtype=np.int64)
    counts[np.arange(rows), label] = 1
    return JointTable(table.columns, leaves, counts)


def test_publish_at_huge_epsilon_releases_the_best_grid_exactly() -> None:
    hs = hierarchies()
    table = _informative(make_rng(1), hs, 2000)
    d = pp.design(hs, 2000, Budget(1e6))
    syn = pp.publish(table, hs, d, positive=1, rng=make_rng(2))
    grids = pp.pool([h.sizes for h in hs], d.threshold)
    quality = pp.score_pool(table, hs, grids, 1e6 * 4 / 7 / 2, 1)
    assert quality.min() == pytest.approx(0.0)
    assert quality[next(i for i, g in enumerate(grids) if tuple(g) == syn.levels)] == 0.0
    exact = pp.cells_of(pp.grid_histogram(pp.cell_rows(table, 1), hs, syn.levels))
    exact = exact.reshape(-1, 2)
    np.testing.assert_array_equal(syn.counts, exact.astype(np.int64))
    assert syn.selected is None


def test_publish_pre_selects_the_informative_column() -> None:
    hs = hierarchies()
    table = _informative(make_rng(5), hs, 3000)
    d = pp.design(hs, 3000, Budget(1e4), max_pool=2)
    assert d.select_k is not None
    syn = pp.publish(table, hs, d, positive=1, rng=make_rng(6))
    assert syn.selected is not None and "a" in syn.selected
    assert len(syn.selected) == d.select_k
    assert all(level == 0 for j, level in enumerate(syn.levels)
               if hs[j].column not in syn.selected)


def test_pool_size_counts_what_pool_builds() -> None:
    """The design's pool size without building the pool: the same count (capped) as
    ``len(pool(...))`` on random hierarchies, thresholds and caps."""
    from dpcli.algorithms.privpfc import pool, pool_size

    rng = np.random.default_rng(11)
    for _ in range(300):
        sizes = [np.cumprod(np.concatenate(([1], rng.integers(2, 6, rng.integers(0, 4)))))
                 .tolist() for _ in range(rng.integers(1, 7))]
        threshold = int(rng.integers(1, 3000))
        cap = int(rng.integers(1, 500))
        assert pool_size(sizes, threshold, cap) == len(pool(sizes, threshold, cap=cap))
        assert pool_size(sizes, threshold, 10**9) == len(pool(sizes, threshold))
