"""The pass on every core (DataSource.map_encoded, LocalEngine) against the one-thread loop.

The parallel pass must give the statistics of a plain loop over
``DataSource.batches`` folded by one StatsAccumulator — bit for bit, counts and
float sums alike, whatever the number of workers — with the same data report
and the same first error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from dpcli.data import DataSource
from dpcli.data.prefetch import THREADS_ENV, ordered_map, usable_cores
from dpcli.errors import DataError, UsageError
from dpcli.stats import LocalEngine, Stats, StatsAccumulator, StatsRequest
from tests.conftest import MIXED_REQUEST as REQUEST

if TYPE_CHECKING:
    from tests.conftest import MixedData



@dataclass(frozen=True)
class Leaves:
    """A leaf map for the test: leaf = code // width, none (−1) above ``top``."""

    column: str
    n_leaves: int
    width: float
    top: float

    def leaves(self, values: np.ndarray) -> np.ndarray:
        leaf = (np.asarray(values, dtype=np.float64) // self.width).astype(np.int64)
        return np.where(values > self.top, -1, np.minimum(leaf, self.n_leaves - 1))


def one_thread(src: DataSource, request: StatsRequest, seed: int) -> Stats:
    """The reference: the encoder's plain loop folded into one accumulator."""
    acc = StatsAccumulator(src.schema, request)
    for batch in src.batches(request.columns(), rng=np.random.default_rng(seed)):
        acc.update(batch)
    return acc.result(src.report)


def identical(a: Stats, b: Stats) -> None:
    """Bit for bit: counts, float sums, kept values, joint tables and the data report."""
    assert a.n == b.n
    np.testing.assert_array_equal(a.class_counts, b.class_counts)
    assert a.contingency.keys() == b.contingency.keys()
    for name in a.contingency:
        np.testing.assert_array_equal(a.contingency[name], b.contingency[name])
    for name in a.histograms:
        np.testing.assert_array_equal(a.histograms[name], b.histograms[name])
    for name in a.moments:
        for part in ("count", "mean", "m2"):
            np.testing.assert_array_equal(getattr(a.moments[name], part),
                                          getattr(b.moments[name], part))
    for name in a.values:
        for x, y in zip(a.values[name], b.values[name], strict=True):
            np.testing.assert_array_equal(x, y)
    if a.joint is not None or b.joint is not None:
        assert a.joint is not None and b.joint is not None
        np.testing.assert_array_equal(a.joint.leaves, b.joint.leaves)
        np.testing.assert_array_equal(a.joint.counts, b.joint.counts)
    assert a.report.rows == b.report.rows
    assert {k: asdict(v) for k, v in a.report.columns.items()} == \
        {k: asdict(v) for k, v in b.report.columns.items()}


def engine(src: DataSource, request: StatsRequest, seed: int, workers: int,
           monkeypatch: pytest.MonkeyPatch) -> Stats:
    monkeypatch.setenv(THREADS_ENV, str(workers))
    return LocalEngine().compute(src, request, rng=np.random.default_rng(seed))


@pytest.mark.parametrize("fmt", ["parquet", "csv", "folder"])
@pytest.mark.parametrize("batch_rows", [7, 64, 1_000_000])
def test_parallel_pass_is_the_one_thread_pass(tmp_path: Path, fmt: str, batch_rows: int,
                                              mixed_data: Callable[..., MixedData],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # nulls, values outside every domain, clamping, imputation and a binding token cap
    data = mixed_data(n=900, seed=5, max_per_row=3)
    if fmt == "parquet":
        path = data.write_parquet(tmp_path / "d.parquet", row_group_size=100)
    elif fmt == "csv":
        path = data.write_csv(tmp_path / "d.csv")
    else:
        path = tmp_path / "parts"
        path.mkdir()
        table = data.table()
        for i, start in enumerate(range(0, 900, 250)):
            pq.write_table(table.slice(start, 250), path / f"part-{i}.parquet")
    src = DataSource(path, data.schema, batch_rows=batch_rows)
    reference = one_thread(src, REQUEST, seed=11)
    assert reference.report.columns["words"].rows_token_capped > 0
    assert reference.report.columns["age"].clamped_below > 0
    assert reference.report.columns["colour"].imputed > 0
    for workers in (1, 2, 3, 8):
        identical(engine(src, REQUEST, 11, workers, monkeypatch), reference)


def test_parallel_joint_table(tmp_path: Path, mixed_data: Callable[..., MixedData],
                              monkeypatch: pytest.MonkeyPatch) -> None:
    data = mixed_data(n=700, seed=6)
    path = data.write_parquet(tmp_path / "d.parquet", row_group_size=90)
    request = StatsRequest(joint=(Leaves("colour", 2, 2, 2.5), Leaves("age", 4, 25, 90)),
                           contingency=("smoker",))
    src = DataSource(path, data.schema, batch_rows=50)
    reference = one_thread(src, request, seed=0)
    for workers in (2, 5):
        identical(engine(src, request, 0, workers, monkeypatch), reference)


def test_first_error_in_file_order(tmp_path: Path, mixed_data: Callable[..., MixedData],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # two missing values under policy "error", in different batches: the earlier one is named,
    # whichever worker finishes first
    data = mixed_data(n=400, seed=7)
    table = data.table()
    age = table.column("age").to_pylist()
    age[130] = None
    age[370] = None
    table = table.set_column(table.schema.get_field_index("age"), "age",
                             pa.array(age, pa.float64()))
    path = tmp_path / "d.parquet"
    pq.write_table(table, path, row_group_size=40)
    src = DataSource(path, data.schema, batch_rows=20)
    for workers in (1, 2, 4):
        with pytest.raises(DataError, match="data row 131 ") as info:
            engine(src, REQUEST, 0, workers, monkeypatch)
        assert "'age'" in str(info.value)


def test_csv_parse_error_after_good_batches(tmp_path: Path, mixed_data: Callable[..., MixedData],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    data = mixed_data(n=300, seed=8)
    path = data.write_csv(tmp_path / "d.csv")
    lines = path.read_text().splitlines()
    lines[250] = lines[250] + ',"extra"'  # a broken record late in the file
    path.write_text("\n".join(lines) + "\n")
    src = DataSource(path, data.schema, batch_rows=16)
    with pytest.raises(DataError, match="broken CSV"):
        engine(src, REQUEST, 0, 3, monkeypatch)


def test_progress_counts_every_row_in_order(tmp_path: Path, mixed_data: Callable[..., MixedData],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    data = mixed_data(n=500, seed=9)
    path = data.write_parquet(tmp_path / "d.parquet", row_group_size=64)
    monkeypatch.setenv(THREADS_ENV, "3")
    done: list[int] = []
    LocalEngine().compute(DataSource(path, data.schema, batch_rows=30), REQUEST,
                          rng=np.random.default_rng(0), progress=done.append)
    assert sum(done) == 500 and max(done) <= 30


def test_ordered_map_keeps_order_and_first_error() -> None:
    import threading
    import time

    def slow_first(i: int) -> int:
        if i == 0:  # the first item finishes last: its result still comes first
            time.sleep(0.01)
        return i * i

    assert list(ordered_map(range(50), slow_first, 4)) == [i * i for i in range(50)]
    assert list(ordered_map(range(5), slow_first, 1)) == [0, 1, 4, 9, 16]

    def fail_at(i: int) -> int:
        if i in (3, 7):
            raise ValueError(f"item {i}")
        return i

    with pytest.raises(ValueError, match="item 3"):
        list(ordered_map(range(10), fail_at, 4))

    def items() -> object:
        yield from range(4)
        raise KeyError("source")

    out: list[int] = []
    with pytest.raises(KeyError):
        for x in ordered_map(items(), lambda i: i, 3):  # type: ignore[arg-type]
            out.append(x)
    assert out == [0, 1, 2, 3]  # the items read before the source failed come first

    # bounded: never more than `depth` items in flight, and no worker thread outlives it
    live = 0
    peak = 0
    lock = threading.Lock()

    def track(i: int) -> int:
        nonlocal live, peak
        with lock:
            live += 1
            peak = max(peak, live)
        time.sleep(0.001)
        with lock:
            live -= 1
        return i

    gen = ordered_map(range(100), track, 3, depth=4)
    assert next(gen) == 0
    gen.close()
    assert peak <= 4
    assert not [t for t in threading.enumerate() if t.name.startswith("dpcli-pass")]


def test_usable_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(THREADS_ENV, "3")
    assert usable_cores() == 3
    monkeypatch.setenv(THREADS_ENV, "0")
    with pytest.raises(UsageError, match=THREADS_ENV):
        usable_cores()
    monkeypatch.delenv(THREADS_ENV)
    assert usable_cores() >= 1


def test_csv_tokens_and_clamps_match_over_workers(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  mixed_data: Callable[..., MixedData]) -> None:
    # a CSV parsed on several threads into many blocks: the same as one block, one thread
    data = mixed_data(n=2000, seed=10, max_per_row=2)
    path = tmp_path / "d.csv"
    pacsv.write_csv(data.table(tokens_as_text=True), path)
    small = DataSource(path, data.schema, batch_rows=33)
    reference = one_thread(DataSource(path, data.schema, batch_rows=10**6), REQUEST, seed=4)
    identical(engine(small, REQUEST, 4, 4, monkeypatch), one_thread(small, REQUEST, seed=4))
    stats = engine(small, REQUEST, 4, 4, monkeypatch)
    # other batch sizes give the same counts (sums to rounding), as before
    np.testing.assert_array_equal(stats.contingency["words"], reference.contingency["words"])
    np.testing.assert_allclose(stats.moments["age"].m2, reference.moments["age"].m2, rtol=1e-10)


def test_fold_scores_on_every_core_in_file_order(tmp_path: Path,
                                                 mixed_data: Callable[..., MixedData],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from dpcli.predict import fold

    data = mixed_data(n=600, seed=12)
    path = data.write_parquet(tmp_path / "d.parquet", row_group_size=70)

    def score(batch: object) -> np.ndarray:
        return np.asarray(batch.columns["age"]) * 2.0 + batch.label  # type: ignore[attr-defined]

    runs = []
    for workers in (1, 3):
        monkeypatch.setenv(THREADS_ENV, str(workers))
        seen: list[tuple[np.ndarray, np.ndarray]] = []
        done: list[int] = []
        rows = fold(DataSource(path, data.schema, batch_rows=25), ("age",), score,
                    lambda v, y, seen=seen: seen.append((v, y)),  # type: ignore[misc]
                    rng=np.random.default_rng(0),
                    progress=done.append)
        assert rows == 600 and sum(done) == 600
        runs.append(seen)
    plain = [(score(b), b.label) for b in DataSource(path, data.schema, batch_rows=25)
             .batches(("age",), rng=np.random.default_rng(0))]
    for run in runs:
        assert len(run) == len(plain)
        for (v, y), (pv, py) in zip(run, plain, strict=True):
            np.testing.assert_array_equal(v, pv)
            np.testing.assert_array_equal(y, py)


def test_a_replaced_batches_is_the_pass(tmp_path: Path, mixed_data: Callable[..., MixedData],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # a subclass (or a test) that re-cuts batches is read through its own batches()
    data = mixed_data(n=90, seed=13)
    path = data.write_parquet(tmp_path / "d.parquet")
    seen: list[int] = []

    class Counted(DataSource):
        def batches(self, columns, *, rng):  # type: ignore[no-untyped-def,override]
            for b in super().batches(columns, rng=rng):
                seen.append(b.n)
                yield b

    monkeypatch.setenv(THREADS_ENV, "3")
    src = Counted(path, data.schema, batch_rows=20)
    stats = LocalEngine().compute(src, REQUEST, rng=np.random.default_rng(1))
    assert seen == [20, 20, 20, 20, 10]
    identical(stats, one_thread(DataSource(path, data.schema, batch_rows=20), REQUEST, 1))


def test_threshold_counts_scored_on_every_core_are_the_one_thread_counts(
        tmp_path: Path, mixed_data: Callable[..., MixedData],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """train-nb's threshold pass (nb_threshold.count) scores batches on the pass's workers
    (Pass.map): TP/TN/FP and the row count are those of the plain loop, exactly."""
    import threading
    from types import SimpleNamespace

    from dpcli.algorithms import nb_threshold
    from dpcli.api.report import Silent
    from dpcli.api.spend import Pass

    threads: set[str] = set()
    data = mixed_data(n=700, seed=21)
    path = data.write_parquet(tmp_path / "d.parquet", row_group_size=90)
    positive = data.schema.label.positive_index

    class Model:  # a released model's log-likelihoods: any fixed function of the batch
        schema = SimpleNamespace(label=SimpleNamespace(positive_index=positive))

        def joint_log_likelihood(self, batch: object) -> np.ndarray:
            threads.add(threading.current_thread().name)
            age = np.asarray(batch.columns["age"], dtype=float)  # type: ignore[attr-defined]
            return np.column_stack([np.sin(age), np.cos(age / 7.0)])

    cands = nb_threshold.candidates((-2.0, 2.0), 0.3)
    plain = nb_threshold.count(Model(), list(DataSource(path, data.schema, batch_rows=33)
                                             .batches(("age",), rng=np.random.default_rng(0))),
                               cands)
    assert plain.rows == 700 and plain.true_positive.any() and plain.true_negative.any()
    for workers in (1, 3):
        monkeypatch.setenv(THREADS_ENV, str(workers))
        source = DataSource(path, data.schema, batch_rows=33)
        pooled = nb_threshold.count(Model(), Pass(Silent(), "threshold", source, ("age",),
                                                  np.random.default_rng(0)), cands)
        assert pooled.rows == plain.rows
        for field in ("candidates", "true_positive", "true_negative", "false_positive"):
            np.testing.assert_array_equal(getattr(pooled, field), getattr(plain, field))
    assert any(name.startswith("dpcli-pass") for name in threads), threads  # on the pool
