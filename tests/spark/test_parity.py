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
