"""LocalEngine against an independent pandas reference, and streaming invariances."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from dpcli.data import DataSource
from dpcli.data.encode import BatchEncoder
from dpcli.data.report import DataReport
from dpcli.data.schema import NumericColumn
from dpcli.errors import DataError, UsageError
from dpcli.stats import (
    LocalEngine,
    Moments,
    Stats,
    StatsAccumulator,
    StatsRequest,
    get_engine,
)
from tests.conftest import MIXED_REQUEST as REQUEST

if TYPE_CHECKING:
    from tests.conftest import MixedData

CLASSES = ["a", "b", "c"]


def reference(data: MixedData) -> dict[str, object]:
    """The expected statistics, computed row-wise with pandas (no dpcli code)."""
    df = data.frame
    y = df["y"].map({c: i for i, c in enumerate(CLASSES)}).to_numpy()
    age = df["age"].clip(0, 100)
    income = df["income"].fillna(1.5).clip(-10, 10)
    colour = df["colour"].map({"red": 0, "green": 1, "blue": 2}).fillna(3).astype(int)
    smoker = (df["smoker"] == "yes").astype(int)
    zip_ = df["zip"].astype(str).map({"1": 0, "2": 1, "3": 2}).fillna(3).astype(int)

    def table(codes: pd.Series, levels: int) -> np.ndarray:
        out = pd.crosstab(pd.Categorical(y, categories=range(3)),
                          pd.Categorical(codes, categories=range(levels)), dropna=False)
        return out.to_numpy()

    words = np.zeros((3, 20), dtype=np.int64)
    for label, row in zip(y, df["words"], strict=True):
        for w in {w for w in row if int(w[1:]) < 20}:
            words[label, int(w[1:])] += 1

    def hist(x: pd.Series, lo: float, hi: float, bins: int) -> np.ndarray:
        edges = np.linspace(lo, hi, bins + 1)
        return np.stack([np.histogram(x[y == k], edges)[0] for k in range(3)])

    def moments(x: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        g = x.groupby(y)
        return (g.count().reindex(range(3)).to_numpy(), g.mean().reindex(range(3)).to_numpy(),
                g.var(ddof=0).reindex(range(3)).to_numpy())

    return {
        "class_counts": np.bincount(y, minlength=3),
        "colour": table(colour, 4), "smoker": table(smoker, 2), "zip": table(zip_, 4),
        "words": words,
        "age_hist": hist(age, 0, 100, 7), "income_hist": hist(income, -10, 10, 4),
        "age_moments": moments(age), "income_moments": moments(income),
        "income_values": [np.sort(income[y == k].to_numpy()) for k in range(3)],
    }


def assert_matches(stats: Stats, ref: dict[str, object], n: int) -> None:
    assert stats.n == n
    np.testing.assert_array_equal(stats.class_counts, ref["class_counts"])
    for name in ("colour", "smoker", "zip", "words"):
        assert stats.contingency[name].dtype == np.int64
        np.testing.assert_array_equal(stats.contingency[name], ref[name], err_msg=name)
    np.testing.assert_array_equal(stats.histograms["age"], ref["age_hist"])
    np.testing.assert_array_equal(stats.histograms["income"], ref["income_hist"])
    for name in ("age", "income"):
        count, mean, var = ref[f"{name}_moments"]  # type: ignore[misc]
        m = stats.moments[name]
        np.testing.assert_array_equal(m.count, count)
        np.testing.assert_allclose(m.mean, mean, rtol=1e-9)
        np.testing.assert_allclose(m.variance, var, rtol=1e-9)
    for k in range(3):
        np.testing.assert_array_equal(stats.values["income"][k], ref["income_values"][k])


def assert_same(a: Stats, b: Stats) -> None:
    assert a.n == b.n
    np.testing.assert_array_equal(a.class_counts, b.class_counts)
    for name in a.contingency:
        np.testing.assert_array_equal(a.contingency[name], b.contingency[name])
    for name in a.histograms:
        np.testing.assert_array_equal(a.histograms[name], b.histograms[name])
    for name in a.moments:
        np.testing.assert_array_equal(a.moments[name].count, b.moments[name].count)
        np.testing.assert_allclose(a.moments[name].mean, b.moments[name].mean, rtol=1e-12)
        np.testing.assert_allclose(a.moments[name].m2, b.moments[name].m2, rtol=1e-10)
    for name in a.values:
        for x, y in zip(a.values[name], b.values[name], strict=True):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_engine_matches_pandas_reference(tmp_path: Path, fmt: str,
                                         mixed_data: Callable[..., MixedData]) -> None:
    data = mixed_data(n=600, seed=1)
    path = (data.write_parquet(tmp_path / "d.parquet") if fmt == "parquet"
            else data.write_csv(tmp_path / "d.csv"))
    src = DataSource(path, data.schema, batch_rows=128)
    src.check_structure(REQUEST.columns())
    src.check_values(REQUEST.columns())
    done: list[int] = []
    stats = LocalEngine().compute(src, REQUEST, rng=np.random.default_rng(0),
                                  progress=done.append)
    assert sum(done) == 600 and max(done) <= 128
    assert_matches(stats, reference(data), 600)
    rep = stats.report
    assert rep.rows == 600
    df = data.frame
    assert rep.columns["age"].clamped_below == int((df["age"] < 0).sum())
    assert rep.columns["age"].clamped_above == int((df["age"] > 100).sum())
    assert rep.columns["colour"].imputed == int(df["colour"].isna().sum())
    assert rep.columns["colour"].mapped_to_other == int(df["colour"].isin(["purple", "pink"]).sum())
    assert rep.columns["smoker"].mapped_to_other == int((df["smoker"] == "maybe").sum())
    assert rep.columns["zip"].mapped_to_other == int((df["zip"] > 3).sum())
    assert rep.columns["income"].imputed == int(df["income"].isna().sum())
    oov = sum(int(w[1:]) >= 20 for row in df["words"] for w in row)
    assert rep.columns["words"].tokens_out_of_vocabulary == oov
    # contingency of a categorical column counts every row once, incl. the other level
    assert stats.contingency["colour"].sum() == 600
    assert stats.contingency["colour"][:, 3].sum() == (
        rep.columns["colour"].imputed + rep.columns["colour"].mapped_to_other)


def test_streaming_and_format_invariance(tmp_path: Path,
                                         mixed_data: Callable[..., MixedData]) -> None:
    data = mixed_data(n=300, seed=2, max_per_row=3)  # the cap binds on many rows
    pq_path = data.write_parquet(tmp_path / "d.parquet", row_group_size=50)
    csv_path = data.write_csv(tmp_path / "d.csv")
    folder = tmp_path / "parts"
    folder.mkdir()
    table = data.table()
    for i, start in enumerate(range(0, 300, 110)):  # the same rows split over 3 files
        pq.write_table(table.slice(start, 110), folder / f"part-{i}.parquet")
    runs = []
    for path in (pq_path, csv_path, folder):
        for batch_rows in (7, 1_000_000):
            src = DataSource(path, data.schema, batch_rows=batch_rows)
            runs.append(LocalEngine().compute(src, REQUEST, rng=np.random.default_rng(9)))
    for other in runs[1:]:
        assert_same(runs[0], other)
    assert runs[0].report.columns["words"].rows_token_capped > 0
    assert runs[0].contingency["words"].sum() <= 3 * 300


def test_accumulators_merge_like_one_pass(mixed_data: Callable[..., MixedData]) -> None:
    data = mixed_data(n=400, seed=3, max_per_row=4)
    table = data.table()
    enc = BatchEncoder(data.schema, REQUEST.columns(), report=DataReport(),
                       rng=np.random.default_rng(0))
    batches = [enc.encode(table.slice(s, 33).to_batches()[0]) for s in range(0, 400, 33)]
    whole = StatsAccumulator(data.schema, REQUEST)
    left, right = StatsAccumulator(data.schema, REQUEST), StatsAccumulator(data.schema, REQUEST)
    for i, b in enumerate(batches):
        whole.update(b)
        (left if i % 3 else right).update(b)  # partitions need not be contiguous
    left.merge(right)
    assert_same(whole.result(), left.result())


def test_moments_properties() -> None:
    m = Moments(count=np.array([2, 0]), mean=np.array([1.5, 0.0]), m2=np.array([0.5, 0.0]))
    np.testing.assert_allclose(m.sum, [3.0, 0.0])
    np.testing.assert_allclose(m.sum_squares, [5.0, 0.0])  # 1² + 2²
    assert m.variance[0] == 0.25 and np.isnan(m.variance[1])


def test_moments_are_numerically_stable(tmp_path: Path,
                                        mixed_data: Callable[..., MixedData]) -> None:
    # large offset, small spread: a naive sum-of-squares formula loses every digit
    data = mixed_data(n=2000, seed=4)
    data.frame["age"] = 1e6 + np.random.default_rng(0).normal(0, 1e-2, 2000)
    data.schema = data.schema.__class__(
        columns=(NumericColumn("age", 0.0, 2e6),), label=data.schema.label)
    path = data.write_parquet(tmp_path / "d.parquet")
    stats = LocalEngine().compute(DataSource(path, data.schema, batch_rows=101),
                                  StatsRequest(moments=("age",)),
                                  rng=np.random.default_rng(0))
    y = data.frame["y"].to_numpy()
    for k, c in enumerate(CLASSES):
        ref = np.var(data.frame["age"].to_numpy()[y == c])
        np.testing.assert_allclose(stats.moments["age"].variance[k], ref, rtol=1e-7)


def test_empty_request_counts_classes(tmp_path: Path,
                                      mixed_data: Callable[..., MixedData]) -> None:
    data = mixed_data(n=50)
    stats = get_engine("local").compute(DataSource(data.write_csv(tmp_path / "d.csv"),
                                                   data.schema),
                                        StatsRequest(), rng=np.random.default_rng(0))
    assert stats.class_counts.sum() == 50 and stats.report.columns.keys() == set()


@pytest.mark.parametrize(("request_", "column"), [
    (StatsRequest(contingency=("age",)), "age"),
    (StatsRequest(histograms=(("colour", 3),)), "colour"),
    (StatsRequest(histograms=(("age", 0),)), "age"),
    (StatsRequest(moments=("words",)), "words"),
    (StatsRequest(keep_values=("smoker",)), "smoker"),
    (StatsRequest(contingency=("height",)), "height"),
    (StatsRequest(contingency=("y",)), "y"),
    (StatsRequest(moments=("age", "age")), "age"),
])
def test_request_validated_before_reading(tmp_path: Path, request_: StatsRequest, column: str,
                                          mixed_data: Callable[..., MixedData]) -> None:
    data = mixed_data(n=5)
    src = DataSource(tmp_path / "does-not-exist.parquet", data.schema)  # reading would fail
    with pytest.raises(UsageError) as info:
        LocalEngine().compute(src, request_, rng=np.random.default_rng(0))
    assert f"'{column}'" in str(info.value)


def test_data_errors_surface_from_compute(tmp_path: Path,
                                          mixed_data: Callable[..., MixedData]) -> None:
    data = mixed_data(n=5)
    with pytest.raises(DataError, match="not found"):
        LocalEngine().compute(DataSource(tmp_path / "nope.csv", data.schema), REQUEST,
                              rng=np.random.default_rng(0))


def test_get_engine() -> None:
    assert isinstance(get_engine(), LocalEngine) and get_engine("local").name == "local"
    with pytest.raises(UsageError, match="local"):
        get_engine("spark-nonexistent")


def test_request_columns_and_normalisation() -> None:
    req = StatsRequest(contingency=["b", "a"], histograms=[("x", 3)],  # type: ignore[arg-type]
                       moments=("x", "y"), keep_values=("a",))
    assert req.columns() == ("b", "a", "x", "y")
    assert req.contingency == ("b", "a") and req.histograms == (("x", 3),)
