"""The Spark engine's pieces that need no running Spark: configuration, clear errors when
PySpark or Java is missing, CSV typing, partial states and the listing digest.

These run in every ``make test`` (with or without PySpark).
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import yaml
from typer.testing import CliRunner

from dpcli.budget import Budget
from dpcli.data.encode import BatchEncoder
from dpcli.data.reader import DataSource, csv_null_values, first_unparseable, type_csv_text
from dpcli.data.report import DataReport
from dpcli.data.schema import (
    CategoricalColumn,
    Label,
    NumericColumn,
    Schema,
    TokensColumn,
)
from dpcli.errors import DataError, SpecError, UsageError
from dpcli.fingerprint import listing_digest
from dpcli.spec import SparkConfig, load_spec
from dpcli.stats import StatsAccumulator, StatsRequest, available_engines, get_engine
from dpcli.stats.spark import (
    DEFAULT_MASTER,
    PYSPARK_MISSING,
    dump_state,
    is_remote,
    load_state,
    local_path,
    require_java,
    spark_master,
)

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ the spec


def write_spec(tmp_path: Path, spark: Any) -> Path:
    raw = yaml.safe_load((ROOT / "configs" / "credit.yaml").read_text())
    raw["schema"] = str(ROOT / "configs" / "credit.schema.yaml")
    raw["ledger"] = str(tmp_path / "ledger.jsonl")
    raw["spark"] = spark
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_spark_section_is_parsed(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path, {"master": "spark://head:7077", "conf": {
        "spark.executor.memory": "4g", "spark.executor.cores": 2,
        "spark.sql.adaptive.enabled": False}}))
    assert spec.spark == SparkConfig(master="spark://head:7077", conf=(
        ("spark.executor.memory", "4g"), ("spark.executor.cores", "2"),
        ("spark.sql.adaptive.enabled", "false")))
    assert load_spec(ROOT / "configs" / "credit.yaml").spark is None


@pytest.mark.parametrize(("section", "key", "what"), [
    ({"master": "local[2]", "workers": 3}, "spark.workers", "unknown key"),
    ({"master": ""}, "spark.master", "non-empty string"),
    ({"conf": {"executor.memory": "4g"}}, "spark.conf.executor.memory", "start with 'spark.'"),
    ({"conf": {"spark.master": "yarn"}}, "spark.conf.spark.master", "master"),
    ({"conf": {"spark.jars": ["a.jar"]}}, "spark.conf.spark.jars", "string, a number"),
    ({"conf": {"spark.jars": None}}, "spark.conf.spark.jars", "string, a number"),
    ("local[2]", "spark", "mapping"),
])
def test_spark_section_errors_name_the_key(tmp_path: Path, section: Any, key: str,
                                           what: str) -> None:
    path = write_spec(tmp_path, section)
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert f"{path}: {key}:" in str(err.value) and what in str(err.value)


def test_master_from_environment_then_spec_then_default(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    monkeypatch.delenv("DPCLI_SPARK_MASTER", raising=False)
    assert spark_master(None) == DEFAULT_MASTER == "local[*]"
    assert spark_master(SparkConfig()) == "local[*]"
    assert spark_master(SparkConfig(master="yarn")) == "yarn"
    monkeypatch.setenv("DPCLI_SPARK_MASTER", "local[3]")
    assert spark_master(SparkConfig(master="yarn")) == "local[3]"


def test_locations() -> None:
    assert is_remote("s3a://bucket/big/") and is_remote("hdfs://nn:8020/x")
    assert not is_remote("data/x.csv") and not is_remote(Path("/tmp/x.parquet"))
    assert not is_remote("file:///tmp/x.csv") and not is_remote("C:/data/x.csv")
    assert local_path("file:///tmp/a%20b.csv") == Path("/tmp/a b.csv")
    assert local_path("rel/x.csv") == Path("rel/x.csv")


def test_spark_engine_is_registered() -> None:
    assert "spark" in available_engines() and "local" in available_engines()


# ------------------------------------------------------------ clear messages


@pytest.fixture
def no_pyspark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``import pyspark`` fail as it does where PySpark is not installed."""
    for name in [m for m in sys.modules if m == "pyspark" or m.startswith("pyspark.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pyspark", None)


def test_missing_pyspark_is_a_usage_error(no_pyspark: None, tmp_path: Path) -> None:
    from dpcli.run import prepare_source

    spec = load_spec(write_spec(tmp_path, {"master": "local[1]"}))
    data = ROOT / "sample_data" / "credit_train.csv"
    with pytest.raises(UsageError) as err:
        prepare_source(spec, data, ["sex"], Budget(0.1), engine="spark")
    assert str(err.value) == PYSPARK_MISSING == ("the Spark engine needs PySpark: "
                                                 "pip install 'dpcli[spark]'")
    source = DataSource(data, spec.schema)
    with pytest.raises(UsageError, match=r"pip install 'dpcli\[spark\]'"):
        get_engine("spark").compute(source, StatsRequest(contingency=("sex",)),
                                    rng=np.random.default_rng(0))


def test_missing_pyspark_from_the_cli(no_pyspark: None, tmp_path: Path) -> None:
    from dpcli.cli.app import app
    from dpcli.ledger import init_ledger
    from dpcli.spec import load_spec

    spec = write_spec(tmp_path, {"master": "local[1]"})
    loaded = load_spec(spec)
    init_ledger(loaded.ledger_path, loaded.dataset, loaded.budget)
    result = CliRunner().invoke(app, ["train-nb", str(ROOT / "sample_data" / "credit_train.csv"),
                                      "--spec", str(spec), "--engine", "spark",
                                      "--out", str(tmp_path / "m.json")])
    assert result.exit_code == 64
    assert "pip install 'dpcli[spark]'" in result.output
    assert not (tmp_path / "m.json").exists()
    assert "reserve" not in (tmp_path / "ledger.jsonl").read_text()  # nothing was charged


def test_missing_java_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no java on it
    with pytest.raises(UsageError) as err:
        require_java()
    assert "Java 17" in str(err.value)
    assert "apt-get install openjdk-17-jre-headless" in str(err.value)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    with pytest.raises(UsageError, match=r"JAVA_HOME is .*jdk, which holds no bin/java"):
        require_java()
    (tmp_path / "jdk" / "bin").mkdir(parents=True)
    (tmp_path / "jdk" / "bin" / "java").write_text("")
    require_java()  # found: no error


def test_missing_java_stops_before_spark_starts(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    from dpcli.stats import spark as spark_module

    monkeypatch.setattr(spark_module, "_active_session", lambda: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError, match="needs Java 17"):
        spark_module.spark_session(SparkConfig(master="local[1]"))


# ------------------------------------------------------------ CSV typing


def test_csv_fields_are_typed_as_the_local_reader_types_them(tmp_path: Path) -> None:
    """Fields split by another parser (Spark's) and typed by ``type_csv_text`` equal
    what the local reader gets from pyarrow's CSV reader: null markers (quoted or not,
    but not when declared), blanks around numbers, text kept verbatim."""
    numbers = ["1", " 2", "3 ", "\t4\t", "1e3", "+5", ".5", "-0", "inf", "-Infinity", "NAN",
               "nan", "NaN", "n/a", "", "null", "N/A", "#N/A", "1.5E-3", "0001", " nan"]
    texts = ["red", " red", "NA", "", "n/a", "null", "NULL", "a,b", 'say "hi"', "two\nlines",
             "nan", "-nan", "None", "none", " ", "#NA", "NaN", "NA ", "x", "y", "z"]
    schema = Schema(columns=(NumericColumn("num", -1e9, 1e9, missing="impute", fill=0.0),
                             CategoricalColumn("cat", ("red", "NA"), missing="impute")),
                    label=Label("y", ("a", "b")))
    path = tmp_path / "t.csv"
    with path.open("w", newline="") as out:
        writer = csv.writer(out, quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
        writer.writerow(["y", "num", "cat"])
        for num, text in zip(numbers, texts, strict=True):
            writer.writerow(["a", num, text])
    local = pa.Table.from_batches(list(DataSource(path, schema)._csv_batches(
        ("y", "num", "cat"))))
    with path.open(newline="") as handle:
        rows = list(csv.reader(handle))[1:]
    nulls = pa.array(csv_null_values(schema), pa.string())

    def split(i: int) -> pa.Array:  # as Spark hands them over: an empty field is null
        return pa.array([r[i] if r[i] != "" else None for r in rows], pa.string())

    num = type_csv_text(split(1), pa.float64(), nulls)
    cat = type_csv_text(split(2), pa.string(), nulls)
    want = local.column("num").combine_chunks()
    assert num.is_null().equals(want.is_null()) and num.null_count > 0
    np.testing.assert_array_equal(num.to_numpy(zero_copy_only=False),  # NaN == NaN here
                                  want.to_numpy(zero_copy_only=False))
    assert cat.equals(local.column("cat").combine_chunks())
    assert cat.to_pylist()[2] == "NA"  # a declared category is a value, not a null marker
    assert num.null_count == 7 and np.isnan(num.to_numpy(zero_copy_only=False)[10])
    # ... in every column: "NA" in the numeric column is then not a number, for both
    with pytest.raises(pa.ArrowInvalid):
        type_csv_text(pa.array([" 2", "NA"]), pa.float64(), nulls)
    assert first_unparseable(pa.array([" 2", None, "NA"])) == 2
    bad = tmp_path / "bad.csv"
    bad.write_text("y,num,cat\na, 2,red\na,NA,red\n")
    with pytest.raises(DataError, match="column 'num': a value is not a number in data row 2"):
        DataSource(bad, schema).check_values(["num"])


def test_unparseable_numbers_raise() -> None:
    nulls = pa.array(["", "NA"], pa.string())
    for bad in ["1,5", "12x", "0x10", " ", "1 2"]:
        with pytest.raises(pa.ArrowInvalid):
            type_csv_text(pa.array(["1", bad]), pa.float64(), nulls)


# ------------------------------------------------------------ partial states


def test_partial_states_round_trip_and_merge(mixed_data: Callable[..., Any]) -> None:
    """Three partitions' states, written to bytes and read back (no pickle), merge into
    the one-pass statistics, joint table included."""
    from dpcli.algorithms.privpfc import candidate_hierarchies

    data = mixed_data(n=600, seed=5, max_per_row=4)
    schema = data.schema
    joint = tuple(candidate_hierarchies(schema, ["colour", "zip"]))
    request = StatsRequest(contingency=("colour", "smoker", "zip", "words"),
                           histograms=(("age", 4),), moments=("age", "income"),
                           keep_values=("income",), joint=joint)
    table = data.table()
    needed = ("y", *request.columns())

    def encoder() -> BatchEncoder:  # the same token-cap seed for both passes
        return BatchEncoder(schema, needed, report=DataReport(), rng=np.random.default_rng(0))

    def encode(enc: BatchEncoder, lo: int, hi: int) -> StatsAccumulator:
        acc = StatsAccumulator(schema, request)
        acc.update(enc.encode(table.slice(lo, hi - lo)))
        return acc

    whole = encode(encoder(), 0, 600).result()
    merged = StatsAccumulator(schema, request)
    enc = encoder()
    for lo, hi in ((0, 150), (150, 151), (151, 600)):
        blob = dump_state(encode(enc, lo, hi))
        assert isinstance(blob, bytes) and blob[:2] == b"PK"  # a zip of .npy arrays
        merged.merge(load_state(schema, request, blob))
    merged.merge(load_state(schema, request, dump_state(StatsAccumulator(schema, request))))
    got = merged.result()
    assert got.n == whole.n == 600
    np.testing.assert_array_equal(got.class_counts, whole.class_counts)
    for name in request.contingency:
        np.testing.assert_array_equal(got.contingency[name], whole.contingency[name])
    np.testing.assert_array_equal(got.histograms["age"], whole.histograms["age"])
    for name in request.moments:
        np.testing.assert_allclose(got.moments[name].mean, whole.moments[name].mean, rtol=1e-12)
        np.testing.assert_allclose(got.moments[name].m2, whole.moments[name].m2, rtol=1e-12)
    for k in range(3):
        np.testing.assert_array_equal(got.values["income"][k], whole.values["income"][k])
    assert got.joint is not None and whole.joint is not None
    np.testing.assert_array_equal(got.joint.leaves, whole.joint.leaves)
    np.testing.assert_array_equal(got.joint.counts, whole.joint.counts)


def test_tokens_schema_state_has_no_objects() -> None:
    """States load with allow_pickle=False: only numeric arrays travel."""
    schema = Schema(columns=(TokensColumn("w", ("a", "b"), Path("v.txt"), max_per_row=1),),
                    label=Label("y", ("0", "1")))
    request = StatsRequest(contingency=("w",))
    acc = StatsAccumulator(schema, request)
    back = load_state(schema, request, dump_state(acc))
    assert back.n == 0 and back.contingency["w"].table.shape == (2, 2)


# ------------------------------------------------------------ listing digest


def test_listing_digest_depends_on_every_field_not_on_order() -> None:
    files = [("s3a://b/d/part-0.parquet", 10, 1000), ("s3a://b/d/part-1.parquet", 20, 2000)]
    base = listing_digest(files)
    assert base == listing_digest(list(reversed(files)))
    assert len(base) == 64 and base != listing_digest(files[:1])
    for changed in ([("s3a://b/d/part-0.parquet", 11, 1000), files[1]],
                    [("s3a://b/d/part-0.parquet", 10, 1001), files[1]],
                    [("s3a://b/d/part-9.parquet", 10, 1000), files[1]]):
        assert listing_digest(changed) != base
