"""The dense cube a batch of grids at a time (dpcli/algorithms/grid_cube.py): the same
floats as the reference, one grid at a time (privpfc.score_pool_dense), bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from dpcli.algorithms import grid_cube as gc
from dpcli.algorithms import privpfc as pp
from dpcli.data.schema import CategoricalColumn
from dpcli.data.taxonomy import hierarchy
from dpcli.mechanisms import make_rng
from dpcli.stats.engine import JointTable
from tests.algorithms.test_privpfc import SHAPES, WHERE, _weighted, hierarchies, random_table


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.array_equal(a.view(np.int64), b.view(np.int64)))


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("threshold", [1, 3, 40, 10**6])
def test_batched_cube_gives_the_reference_floats(shape: str, threshold: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Every shape (rows in no leaf, one class, mostly empty cells, skew): the same floats
    in one batch on one thread, in many tiny batches, chunks and counting tasks on 3
    threads, and with the counts in two channels."""
    make, rows, kw = SHAPES[shape]
    hs = make()
    table = _weighted(make_rng(100 + sorted(SHAPES).index(shape)), hs, rows, **kw)
    grids = pp.pool([h.sizes for h in hs], threshold)
    for rate in (0.01, 0.3, 4.0):
        reference = pp.score_pool_dense(table, hs, grids, rate, 1)
        assert same_bits(gc.score_pool_cube(table, hs, grids, rate, 1, threads=1), reference)
        with monkeypatch.context() as m:
            m.setattr(gc, "CHUNK_DENSE", 7)
            m.setattr(gc, "CHUNK_CELLS", 3)
            m.setattr(gc, "CHUNK_PAIRS", 5)
            m.setattr(gc, "PACK_BELOW", 1)
            seen: list[int] = []
            assert same_bits(gc.score_pool_cube(table, hs, grids, rate, 1, seen.append,
                                                threads=3), reference)
            assert sum(seen) == len(grids)


def test_raw_rows_duplicates_and_empty_rows_are_counted_as_the_reference() -> None:
    """One row per record (repeated leaf tuples), rows with no count, three classes."""
    rng = make_rng(5)
    hs = hierarchies()
    raw = random_table(rng, hs, 700)
    counts = np.zeros((len(raw.counts), 3), dtype=np.int64)
    counts[:, :2] = raw.counts
    counts[::7] = [0, 0, 1]                 # a third class: "rest"
    counts[::11] = 0                        # rows that count nothing
    table = JointTable(raw.columns, raw.leaves, counts)
    grids = pp.pool([h.sizes for h in hs], 10**6)
    for positive in (0, 1):
        assert same_bits(gc.score_pool_cube(table, hs, grids, 0.3, positive),
                         pp.score_pool_dense(table, hs, grids, 0.3, positive))


def test_empty_table_scores_zero() -> None:
    hs = hierarchies()
    table = JointTable(("a", "b", "c"), np.zeros((0, 3), dtype=np.int32),
                       np.zeros((0, 2), dtype=np.int64))
    grids = pp.pool([h.sizes for h in hs], 10**6)
    assert gc.score_pool_cube(table, hs, grids, 0.5, 1).tolist() == [0.0] * len(grids)


def test_keys_over_62_bits_fall_back_to_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    cols = [CategoricalColumn(f"c{i}", tuple(f"v{k}" for k in range(40))) for i in range(11)]
    hs = [hierarchy(c, WHERE) for c in cols]          # 11 × 6 bits
    table = _weighted(make_rng(9), hs, 300, no_leaf=0.0)
    grids = pp.pool([h.sizes for h in hs], 40)
    reference = pp.score_pool_dense(table, hs, grids, 0.3, 1)
    calls: list[int] = []
    real = pp.score_pool_dense
    monkeypatch.setattr(pp, "score_pool_dense", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert same_bits(gc.score_pool_cube(table, hs, grids, 0.3, 1), reference)
    assert calls == [1]


def test_score_pool_uses_the_batched_cube_for_small_grids(monkeypatch: pytest.MonkeyPatch) -> None:
    make, rows, kw = SHAPES["adult-like"]
    hs = make()
    table = _weighted(make_rng(21), hs, rows, **kw)
    grids = pp.pool([h.sizes for h in hs], 10**6)
    reference = pp.score_pool_dense(table, hs, grids, 0.3, 1)

    def refuse(*args: object, **kwargs: object) -> np.ndarray:
        raise AssertionError("one grid at a time")

    monkeypatch.setattr(pp, "score_pool_dense", refuse)
    assert same_bits(pp.score_pool(table, hs, grids, 0.3, 1, method="dense"), reference)


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 127, 128, 129, 255, 1000, 1723, 8192, 8193,
                               20_011])
def test_rows_of_one_length_sum_as_each_row_alone(n: int) -> None:
    """What the batched sums rely on: numpy's sum of a C-contiguous array (any shape) is
    the sum of its flat copy, and summing the rows of a (grids, n) array along the last
    axis gives each row's own sum, bit for bit (pairwise summation, the same blocks)."""
    rng = np.random.default_rng(n)
    rows = rng.exponential(size=(5, n)) * (rng.random((5, n)) < 0.4)
    batched = rows.sum(axis=1)
    for i in range(5):
        assert np.sum(rows[i].copy()) == batched[i]
        if n % 7 == 0 or n == 1723:
            shaped = rows[i].reshape(-1, 7 if n % 7 == 0 else 1723).copy()
            assert np.sum(shaped) == batched[i]


def test_counting_and_roll_ups_run_on_the_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """With threads, the maximal grids' counting tasks and the walks below them go to the
    worker pool (sized by ``threads``), and the floats stay the reference's."""
    import threading

    make, rows, kw = SHAPES["adult-like"]
    hs = make()
    table = _weighted(make_rng(22), hs, rows, **kw)
    grids = pp.pool([h.sizes for h in hs], 10**6)
    reference = pp.score_pool_dense(table, hs, grids, 0.3, 1)
    pools: list[int] = []
    names: set[str] = set()
    real = gc.ThreadPoolExecutor

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, workers: int) -> None:
            pools.append(workers)
            super().__init__(workers)

        def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
            def named(*a, **k):  # type: ignore[no-untyped-def]
                names.add(threading.current_thread().name)
                return fn(*a, **k)
            return super().submit(named, *args, **kwargs)

    monkeypatch.setattr(gc, "ThreadPoolExecutor", Recording)
    monkeypatch.setattr(gc, "CHUNK_PAIRS", 50)
    monkeypatch.setattr(gc, "CHUNK_DENSE", 64)
    assert same_bits(gc.score_pool_cube(table, hs, grids, 0.3, 1, threads=3), reference)
    assert pools == [3]
    assert names and threading.current_thread().name not in names
    pools.clear()
    assert same_bits(gc.score_pool_cube(table, hs, grids, 0.3, 1, threads=1), reference)
    assert pools == []                       # one thread: no pool at all
