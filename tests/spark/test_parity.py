"""The Spark engine computes the local engine's statistics, exactly (floats: to 1e-9).

Each shipped sample (adult, credit, tweets; CSV and Parquet) is read by the
local engine as shipped and by Spark as a folder of three files, with small
Parquet row groups and 32 KiB partitions, so that several tasks read it and
the driver merges their partial states. Counts, histograms, kept values,
joint tables, the data report and the generator's use must be identical;
means and M2 agree to 1e-9 relative (they are added in another order).
"""

from __future__ import annotations

import csv
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from dpcli.algorithms.privpfc import candidate_hierarchies
from dpcli.data import DataSource
from dpcli.data.schema import CategoricalColumn, NumericColumn, Schema
from dpcli.spec import load_spec
from dpcli.stats import LocalEngine, Stats, StatsRequest, get_engine

pytest.importorskip("pyspark")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pyspark's distutils

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_data"
CONFIGS = ROOT / "configs"


def full_request(schema: Schema) -> StatsRequest:
    """Every statistic a dataset's columns allow (joint: its taxonomies, if any)."""
    numeric = [c.name for c in schema.columns if isinstance(c, NumericColumn)]
    levels = [c.name for c in schema.columns if not isinstance(c, NumericColumn)]
    joint: tuple[Any, ...] = ()
    if any(getattr(c, "taxonomy", None) is not None or isinstance(c, CategoricalColumn)
           for c in schema.columns):
        joint = tuple(candidate_hierarchies(schema))
    return StatsRequest(contingency=levels, histograms=[(c, 7) for c in numeric],
                        moments=numeric, keep_values=numeric[:2], joint=joint)


def split_parquet(source: Path, folder: Path, parts: int = 3) -> Path:
    table = pq.read_table(source)
    folder.mkdir()
    step = -(-table.num_rows // parts)
    for i in range(parts):
        pq.write_table(table.slice(i * step, step), folder / f"part-{i}.parquet",
                       row_group_size=250)
    return folder


def split_csv(source: Path, folder: Path, parts: int = 3) -> Path:
    with source.open(newline="") as handle:
        rows = list(csv.reader(handle))
    header, body = rows[0], rows[1:]
    folder.mkdir()
    step = -(-len(body) // parts)
    for i in range(parts):
        with (folder / f"part-{i}.csv").open("w", newline="") as out:
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(header)
            writer.writerows(body[i * step:(i + 1) * step])
    return folder


def assert_same(spark_stats: Stats, local: Stats) -> int:
    """Assert parity; return the number of statistics (tables) compared."""
    compared = 2
    assert spark_stats.n == local.n
    np.testing.assert_array_equal(spark_stats.class_counts, local.class_counts)
    assert spark_stats.contingency.keys() == local.contingency.keys()
    for name, table in local.contingency.items():
        assert spark_stats.contingency[name].dtype == table.dtype
        np.testing.assert_array_equal(spark_stats.contingency[name], table, err_msg=name)
        compared += 1
    assert spark_stats.histograms.keys() == local.histograms.keys()
    for name, table in local.histograms.items():
        np.testing.assert_array_equal(spark_stats.histograms[name], table, err_msg=name)
        np.testing.assert_array_equal(spark_stats.edges[name], local.edges[name])
        compared += 1
    assert spark_stats.moments.keys() == local.moments.keys()
    for name, m in local.moments.items():
        s = spark_stats.moments[name]
        np.testing.assert_array_equal(s.count, m.count, err_msg=name)
        np.testing.assert_allclose(s.mean, m.mean, rtol=1e-9, atol=0, err_msg=name)
        np.testing.assert_allclose(s.m2, m.m2, rtol=1e-9, atol=0, err_msg=name)
        compared += 1
    assert spark_stats.values.keys() == local.values.keys()
    for name, per_class in local.values.items():
        for k, values in enumerate(per_class):
            np.testing.assert_array_equal(spark_stats.values[name][k], values, err_msg=name)
        compared += 1
    if local.joint is None:
        assert spark_stats.joint is None
    else:
        assert spark_stats.joint is not None
        assert spark_stats.joint.columns == local.joint.columns
        np.testing.assert_array_equal(spark_stats.joint.leaves, local.joint.leaves)
        np.testing.assert_array_equal(spark_stats.joint.counts, local.joint.counts)
        compared += 1
    theirs, ours = spark_stats.report.as_dict(), local.report.as_dict()
    theirs.pop("file")
    ours.pop("file")
    assert theirs == ours
    return compared


def run_both(schema: Schema, local_path: Path, spark_path: Path, request: StatsRequest,
             seed: int = 7) -> tuple[Stats, Stats, int]:
    """Both engines on the same rows; also checks that both used the generator alike."""
    from dpcli.stats.spark import SparkSource

    local_rng, spark_rng = np.random.default_rng(seed), np.random.default_rng(seed)
    local_source = DataSource(local_path, schema)
    n_local = local_source.check_values(request.columns())
    local = LocalEngine().compute(local_source, request, rng=local_rng)
    source = SparkSource(spark_path, schema)
    assert source.check_values(request.columns()) == n_local
    merged: list[int] = []
    stats = get_engine("spark").compute(source, request, rng=spark_rng, progress=merged.append)
    assert sum(merged) == n_local
    # the same draws from the run's generator: a seeded run's noise is engine-independent
    assert spark_rng.integers(2**62) == local_rng.integers(2**62)
    return stats, local, len(merged)


TIMINGS: dict[str, float] = {}


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("dataset", ["adult", "credit", "tweets"])
def test_samples_match_local_engine(spark: Any, tmp_path: Path, dataset: str, fmt: str) -> None:
    spec = load_spec(CONFIGS / f"{dataset}.yaml")
    request = full_request(spec.schema)
    source = SAMPLES / f"{dataset}_train.{fmt}"
    split = (split_csv if fmt == "csv" else split_parquet)(source, tmp_path / "parts")
    start = time.perf_counter()
    stats, local, partitions = run_both(spec.schema, source, split, request)
    TIMINGS[f"{dataset}.{fmt}"] = time.perf_counter() - start
    assert partitions >= 3  # three files at least: partial states were merged
    assert assert_same(stats, local) >= 3
    assert stats.n == local.n > 1000


def test_single_file_and_capped_tokens(spark: Any, tmp_path: Path,
                                       mixed_data: Callable[..., Any]) -> None:
    """Missing values imputed, undeclared values in ``other``, clamping, NaN, and a token
    cap that bites (at most 3 of up to 8 words): still identical, in CSV and Parquet, from
    one file or several — the capped rows keep the same words, since every row keeps its
    position in the pass."""
    data = mixed_data(n=1200, seed=3, max_per_row=3)
    request = StatsRequest(contingency=("colour", "smoker", "zip", "words"),
                           histograms=(("age", 5), ("income", 6)), moments=("age", "income"),
                           keep_values=("income",))
    csv_file = data.write_csv(tmp_path / "mixed.csv")
    parquet_file = data.write_parquet(tmp_path / "mixed.parquet", row_group_size=100)
    cases = [(parquet_file, parquet_file),  # one file, split between tasks by row groups
             (csv_file, split_csv(csv_file, tmp_path / "csv_parts")),
             (parquet_file, split_parquet(parquet_file, tmp_path / "parquet_parts"))]
    for local_path, spark_path in cases:
        stats, local, _ = run_both(data.schema, local_path, spark_path, request, seed=11)
        assert assert_same(stats, local) == 11
        counts = stats.report.columns
        assert counts["words"].rows_token_capped > 100  # the cap was exercised
        assert counts["colour"].imputed > 0 and counts["colour"].mapped_to_other > 0
        assert counts["age"].clamped_below > 0 and counts["income"].imputed > 0


def test_compressed_tab_separated_and_quoted_csv(spark: Any, tmp_path: Path,
                                                 mixed_data: Callable[..., Any]) -> None:
    """gzip, tab-separated, and RFC 4180 quoting (quoted commas, doubled quotes, line breaks
    inside a field), blank lines, blanks around numbers and null markers: as locally."""
    import gzip

    credit = load_spec(CONFIGS / "credit.yaml").schema
    text = (SAMPLES / "credit_train.csv").read_text()
    gz = tmp_path / "credit.csv.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    tsv = tmp_path / "credit.tsv"
    tsv.write_text(text.replace(",", "\t"))
    for path in (gz, tsv):
        stats, local, _ = run_both(credit, path, path, full_request(credit))
        assert assert_same(stats, local) > 40

    schema = mixed_data(n=5).schema
    quoted = tmp_path / "quoted.csv"
    quoted.write_text(
        "y,age,income,colour,smoker,zip,words\n"
        'a, 31 ,"1.5",red,yes,1,"w1 w2\nw3 w1"\n'
        '\n'
        'b,"\t40",NA,"re""d",no,"2","w4,w5 w6"\n'
        'c,12,,"",maybe,3,\n'
        'a,-5,nan,"blue",yes,7,"w7 w8 w9 w10 w11"\n'
        'b,101,1e1,n/a,no,1,"w12\r\nw13"\n'
        'c,50,2,"C:\\",no,1,w1\n')  # a backslash is no escape character in CSV
    request = StatsRequest(contingency=("colour", "smoker", "zip", "words"),
                           histograms=(("age", 3),), moments=("age", "income"))
    stats, local, _ = run_both(schema, quoted, quoted, request)
    assert assert_same(stats, local) == 9 and stats.n == 6
    assert stats.report.columns["income"].imputed == 3
    assert stats.report.columns["words"].rows_token_capped == 0  # uncapped mixed schema


# ------------------------------------------------ Spark's own aggregations (the fast path)


def native_request(schema: Schema) -> StatsRequest:
    """What train-nb and select-features ask for: every non-tokens statistic that stays
    small (no kept values, no joint table), which Spark aggregates natively."""
    numeric = [c.name for c in schema.columns if isinstance(c, NumericColumn)]
    levels = [c.name for c in schema.columns
              if not isinstance(c, NumericColumn) and c.kind != "tokens"]
    return StatsRequest(contingency=levels, histograms=[(c, 10) for c in numeric],
                        moments=numeric)


@pytest.fixture
def native_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many passes Spark's aggregations served (the rest ran in Python workers)."""
    from dpcli.stats import spark_aggregate

    calls: list[int] = []
    real = spark_aggregate.aggregate

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(spark_aggregate, "aggregate", spy)
    return calls


@pytest.mark.parametrize("dataset", ["adult", "credit"])
def test_native_aggregation_matches_local_engine(spark: Any, tmp_path: Path, dataset: str,
                                                 native_calls: list[int]) -> None:
    """Counts, histograms (edges included), moments and the data report of a Parquet
    folder, aggregated by Spark itself, are the local engine's."""
    spec = load_spec(CONFIGS / f"{dataset}.yaml")
    request = native_request(spec.schema)
    source = SAMPLES / f"{dataset}_train.parquet"
    split = split_parquet(source, tmp_path / "parts")
    stats, local, _ = run_both(spec.schema, source, split, request)
    assert native_calls == [1]
    assert assert_same(stats, local) == 2 + len(request.contingency) + 2 * len(request.moments)
    assert stats.n == local.n > 1000


def test_native_aggregation_domain_mapping_edges_and_types(spark: Any, tmp_path: Path,
                                                           native_calls: list[int]) -> None:
    """The encoder's rules, value by value: labels and categories typed as integers and
    booleans compared as their text, undeclared → other (categorical) or values[0]
    (binary), missing → imputed (fill / fill_code / other), NaN and null numbers
    imputed, clamping on both sides, and values exactly on, just below and just above
    every histogram edge — all equal to the local engine's, report included."""
    import pyarrow as pa

    from dpcli.data.schema import BinaryColumn, Label

    schema = Schema(
        columns=(NumericColumn("x", -1.0, 2.0, missing="impute", fill=0.25),
                 NumericColumn("k", 0.0, 30.0),
                 CategoricalColumn("n", ("1", "2", "3"), missing="impute"),
                 CategoricalColumn("s", ("a", "b", "ä b"), missing="impute"),
                 BinaryColumn("flag", ("false", "true"), missing="impute", fill="true"),
                 BinaryColumn("t", ("no", "yes"))),
        label=Label("y", ("0", "1", "2"), positive=None))
    edges = np.linspace(-1.0, 2.0, 8)
    near = np.concatenate([edges, np.nextafter(edges, -np.inf), np.nextafter(edges, np.inf),
                           [-5.0, 7.0, np.nan, 0.1, 1 / 3]])
    rng = np.random.default_rng(5)
    n = 3000
    x = rng.choice(near, n)
    x[rng.random(n) < 0.05] = np.nan
    table = pa.table({
        "y": pa.array(rng.integers(0, 3, n), pa.int64()),
        "x": pa.array(x, pa.float64(), mask=rng.random(n) < 0.03),
        "k": pa.array(rng.integers(-3, 40, n), pa.int32()),
        "n": pa.array(rng.integers(0, 6, n), pa.int64(), mask=rng.random(n) < 0.1),
        "s": pa.array(rng.choice(["a", "b", "ä b", "A", "", " a"], n),
                      mask=rng.random(n) < 0.1),
        "flag": pa.array(rng.random(n) < 0.4, pa.bool_(), mask=rng.random(n) < 0.1),
        "t": pa.array(rng.choice(["no", "yes", "maybe"], n)),
    })
    path = tmp_path / "edges.parquet"
    pq.write_table(table, path, row_group_size=400)
    request = StatsRequest(contingency=("n", "s", "flag", "t"),
                           histograms=(("x", 7), ("k", 1)), moments=("x", "k"))
    stats, local, _ = run_both(schema, path, path, request)
    assert native_calls == [1]
    assert assert_same(stats, local) == 2 + 4 + 2 + 2
    counts = stats.report.columns
    assert counts["x"].imputed > 0 and counts["x"].clamped_below > 0
    assert counts["x"].clamped_above > 0 and counts["k"].clamped_below > 0
    assert counts["n"].mapped_to_other > 0 and counts["n"].imputed > 0
    assert counts["flag"].imputed > 0 and counts["t"].mapped_to_other > 0
    # every edge value was binned (the histogram has all its 7 bins filled)
    assert (stats.histograms["x"].sum(axis=0) > 0).all()


def test_python_path_where_spark_casts_differ(spark: Any, tmp_path: Path,
                                             mixed_data: Callable[..., Any],
                                             native_calls: list[int]) -> None:
    """CSV, tokens, kept values, and a category stored as floats stay on the Python
    workers (which reproduce the local reader exactly); the results still match."""
    import pyarrow as pa

    data = mixed_data(n=600, seed=2)
    parquet = data.write_parquet(tmp_path / "m.parquet", row_group_size=100)
    csv_file = data.write_csv(tmp_path / "m.csv")
    small = StatsRequest(contingency=("colour", "smoker"), moments=("age",))
    for request, path in ((small, csv_file),
                          (StatsRequest(contingency=("words",)), parquet),
                          (StatsRequest(moments=("age",), keep_values=("age",)), parquet)):
        stats, local, _ = run_both(data.schema, path, path, request)
        assert_same(stats, local)
    assert native_calls == []
    floats = tmp_path / "floats.parquet"
    table = data.table().set_column(5, "zip", pa.array(data.frame["zip"].astype(float)))
    pq.write_table(table, floats)
    stats, local, _ = run_both(data.schema, floats, floats, StatsRequest(contingency=("zip",)))
    assert_same(stats, local)
    assert native_calls == []
    stats, local, _ = run_both(data.schema, parquet, parquet, small)
    assert_same(stats, local)
    assert native_calls == [1]


def test_native_text_rules_wide_columns_and_empty_class(spark: Any, tmp_path: Path,
                                                        native_calls: list[int]) -> None:
    """Spark's aggregations reproduce the local encoder value for value: an integer
    column declared with non-canonical text ("01", "+2", " 3") matches only "3"-like
    decimal text, a boolean only "true"/"false" (not "True"), strings compare exactly
    (case, blanks), a declared class with no row gives zeros, wide columns are
    counted level by level, and out-of-bounds numbers are clamped and counted."""
    import pyarrow as pa

    from dpcli.data.schema import BinaryColumn, Label

    wide = [f"v{i}" for i in range(60)]
    schema = Schema(
        columns=(CategoricalColumn("i", ("01", "+2", " 3", "3", "-4", str(2**62)),
                                   missing="impute"),
                 BinaryColumn("b", ("True", "false"), missing="impute", fill="false"),
                 CategoricalColumn("s", ("a", "A", " a", ""), missing="impute"),
                 *[CategoricalColumn(f"w{j}", tuple(wide)) for j in range(3)],
                 NumericColumn("x", 0.0, 10.0)),
        label=Label("y", ("a", "b", "never"), positive=None))
    rng = np.random.default_rng(11)
    n = 2000
    table = pa.table({
        "y": pa.array(rng.choice(["a", "b"], n)),
        "i": pa.array(rng.choice([1, 2, 3, -4, 2**62, 7], n), pa.int64(),
                      mask=rng.random(n) < 0.05),
        "b": pa.array(rng.random(n) < 0.5, pa.bool_(), mask=rng.random(n) < 0.05),
        "s": pa.array(rng.choice(["a", "A", " a", "", "a ", "b"], n),
                      mask=rng.random(n) < 0.05),
        **{f"w{j}": pa.array(rng.choice([*wide, "v60", "V1"], n)) for j in range(3)},
        "x": pa.array(rng.normal(5.0, 6.0, n)),
    })
    path = tmp_path / "keys.parquet"
    pq.write_table(table, path, row_group_size=300)
    request = StatsRequest(contingency=("i", "b", "s", "w0", "w1", "w2"),
                           histograms=(("x", 25),), moments=("x",))
    stats, local, _ = run_both(schema, path, path, request)
    assert native_calls == [1]
    assert assert_same(stats, local) == 2 + 6 + 1 + 1
    assert stats.class_counts[2] == 0 and stats.contingency["s"][2].sum() == 0
    i_table = stats.contingency["i"]
    assert i_table[:, 3].sum() > 0 and i_table[:, 4].sum() > 0 and i_table[:, 5].sum() > 0
    assert i_table[:, :3].sum() == 0  # "01", "+2", " 3" are never an integer's text
    counts = stats.report.columns
    assert counts["b"].mapped_to_other > 0 and counts["s"].mapped_to_other > 0
    assert counts["x"].clamped_below > 0 and counts["x"].clamped_above > 0



def test_native_aggregation_reads_integral_float_text_as_the_local_engine(
        spark: Any, tmp_path: Path, native_calls: list[int]) -> None:
    """"1.0" (a CSV written from floats) finds a declared "1" in both engines; "02",
    "1.5", "1." and "01.0" stay undeclared; "-0.0" is "0"."""
    import pyarrow as pa

    from dpcli.data.schema import BinaryColumn, Label

    schema = Schema(
        columns=(CategoricalColumn("c", ("0", "1", "2")), BinaryColumn("b", ("0", "1"))),
        label=Label("y", ("0", "1"), positive="1"))
    rng = np.random.default_rng(6)
    n = 2000
    texts = ["0.0", "1.0", "2.00", "1", "02", "1.5", "1.", "01.0", "-0.0", "x"]
    table = pa.table({"y": pa.array(rng.choice(["0.0", "1.0", "1"], n)),
                      "c": pa.array(rng.choice(texts, n)),
                      "b": pa.array(rng.choice(["0.0", "1.0", "1.5"], n))})
    path = tmp_path / "floats.parquet"
    pq.write_table(table, path, row_group_size=300)
    request = StatsRequest(contingency=("c", "b"))
    stats, local, _ = run_both(schema, path, path, request)
    assert native_calls == [1]
    assert assert_same(stats, local) == 2 + 2
    undeclared = sum(t in ("02", "1.5", "1.", "01.0", "x") for t in table.column("c").to_pylist())
    assert stats.report.columns["c"].mapped_to_other == undeclared
