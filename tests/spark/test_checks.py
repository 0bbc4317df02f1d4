"""The Spark source's pre-charge checks: structure without reading a value, then a
validation job whose errors name file, column and row — never a value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpcli.data import DataSource
from dpcli.data.schema import (
    BinaryColumn,
    CategoricalColumn,
    Label,
    NumericColumn,
    Schema,
    TokensColumn,
)
from dpcli.errors import DataError
from dpcli.stats import LocalEngine, StatsRequest, get_engine

pytest.importorskip("pyspark")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pyspark's distutils

SECRET = "Zanzibar"  # a private value: it must never appear in a message
COLUMNS = ["age", "colour", "member", "words"]


@pytest.fixture
def schema(tmp_path: Path) -> Schema:
    (tmp_path / "vocab.txt").write_text("a\nb\nc\n")
    return Schema(columns=(NumericColumn("age", 0.0, 100.0),
                           CategoricalColumn("colour", ("red", "blue")),
                           BinaryColumn("member", ("no", "yes"), missing="impute", fill="no"),
                           TokensColumn("words", ("a", "b", "c"), tmp_path / "vocab.txt",
                                        max_per_row=2, missing="impute")),
                  label=Label("y", ("0", "1")))


def source(path: Path | str, schema: Schema) -> Any:
    from dpcli.stats.spark import SparkSource

    return SparkSource(path, schema)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


GOOD = ("y,age,colour,member,words\n"
        "0,31,red,yes,a b\n"
        "1,45,blue,no,\n"
        f"0,12,{SECRET},,c a b\n")


def jobs_during(spark: Any, group: str, action: Any) -> list[int]:
    sc = spark.sparkContext
    sc.setJobGroup(group, "dpcli test")
    try:
        action()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return list(sc.statusTracker().getJobIdsForGroup(group))


def test_structure_reads_no_value(spark: Any, tmp_path: Path, schema: Schema) -> None:
    good = write(tmp_path / "good.csv", GOOD)
    src = source(good, schema)
    assert jobs_during(spark, "structure", lambda: src.check_structure(COLUMNS)) == []
    report = src.check_structure(COLUMNS)
    assert report.ok and report.present == ("y", *COLUMNS) and src.format == "csv"
    assert jobs_during(spark, "values", lambda: src.check_values(COLUMNS)) != []
    assert src.num_rows_hint() == 3  # known once the validation pass counted

    no_colour = write(tmp_path / "no_colour.csv", "y,age,member,words\n0,1,no,a\n")
    bad = source(no_colour, schema)
    with pytest.raises(DataError, match=f"^{no_colour}: missing column.*'colour'"):
        jobs_during(spark, "missing", lambda: bad.check_structure(COLUMNS))
    assert spark.sparkContext.statusTracker().getJobIdsForGroup("missing") == []


@pytest.mark.parametrize(("text", "column", "row"), [
    ("y,age,colour,member,words\n0,1,red,no,a\n1,2,,no,a\n", "colour", 2),
    (f"y,age,colour,member,words\n0,1,red,no,a\n{SECRET},2,red,no,a\n", "y", 2),
    (f"y,age,colour,member,words\n0,1,red,no,a\n1,2,red,no,a\n1,{SECRET},red,no,a\n", "age", 3),
    ("y,age,colour,member,words\n0,1,red,no,a\n1,NA,red,no,a\n", "age", 2),
])
def test_value_errors_name_column_and_row(spark: Any, tmp_path: Path, schema: Schema,
                                          text: str, column: str, row: int) -> None:
    path = write(tmp_path / "bad.csv", text)
    with pytest.raises(DataError) as err:
        source(path, schema).check_values(COLUMNS)
    message = str(err.value)
    assert message.startswith(f"{path}: column '{column}': ")
    assert f"data row {row} (header not counted)" in message
    assert SECRET not in message
    with pytest.raises(DataError) as local:  # the local reader agrees on column and row
        DataSource(path, schema).check_values(COLUMNS)
    assert f"column '{column}'" in str(local.value) and f"data row {row} " in str(local.value)


def test_broken_csv_records(spark: Any, tmp_path: Path, schema: Schema) -> None:
    for i, line in enumerate([f"1,2,red,{SECRET}", f"1,2,red,no,a,{SECRET}"]):
        path = write(tmp_path / f"broken{i}.csv",
                     f"y,age,colour,member,words\n0,1,red,no,a\n{line}\n")
        with pytest.raises(DataError) as err:
            source(path, schema).check_values(COLUMNS)
        assert str(err.value) == (f"{path}: broken CSV: data row 2 (header not counted) has a "
                                  "different number of fields than the header")


def test_parquet_value_errors(spark: Any, tmp_path: Path, schema: Schema) -> None:
    rows = {"y": ["0", "1", "1"], "age": [1.0, 2.0, 3.0], "colour": ["red"] * 3,
            "member": ["no"] * 3, "words": [["a"], [], None]}
    cases = [("y", ["0", "1", None], "missing label"),
             ("age", [1.0, float("nan"), 3.0], "missing value"),
             ("colour", ["red", "red", None], "missing value")]
    for column, values, what in cases:
        path = tmp_path / f"{column}.parquet"
        pq.write_table(pa.table({**rows, column: values}), path, row_group_size=1)
        with pytest.raises(DataError) as err:
            source(path, schema).check_values(COLUMNS)
        row = 2 if column == "age" else 3
        assert str(err.value).startswith(f"{path}: column '{column}': {what} in data row {row} ")
    ok = tmp_path / "ok.parquet"
    pq.write_table(pa.table(rows), ok)
    assert source(ok, schema).check_values(COLUMNS) == 3


def test_undeclared_values_are_counted_not_errors(spark: Any, tmp_path: Path,
                                                  schema: Schema) -> None:
    path = write(tmp_path / "good.csv", GOOD)
    src = source(path, schema)
    assert src.check_values(COLUMNS) == 3
    request = StatsRequest(contingency=("colour", "member", "words"), moments=("age",))
    stats = get_engine("spark").compute(src, request, rng=np.random.default_rng(0))
    local = LocalEngine().compute(DataSource(path, schema), request,
                                  rng=np.random.default_rng(0))
    np.testing.assert_array_equal(stats.contingency["colour"], [[1, 0, 1], [0, 1, 0]])
    np.testing.assert_array_equal(stats.contingency["colour"], local.contingency["colour"])
    assert stats.report.columns["colour"].mapped_to_other == 1
    assert stats.report.columns["member"].imputed == 1
    assert stats.report.as_dict()["columns"] == local.report.as_dict()["columns"]
    assert SECRET not in "\n".join(stats.report.lines())


def test_folders(spark: Any, tmp_path: Path, schema: Schema) -> None:
    header = "y,age,colour,member,words\n"
    folder = tmp_path / "csvs"
    (folder / "sub").mkdir(parents=True)
    write(folder / "b.csv", header + "1,2,red,no,a\n")
    write(folder / "sub" / "a.csv", header + "0,1,red,no,a\n0,3,red,no,b\n")
    write(folder / "_SUCCESS", "")
    write(folder / ".b.csv.crc", "junk")
    (folder / "_tmp").mkdir()
    write(folder / "_tmp" / "c.csv", "not,the,same,header\n")
    src = source(folder, schema)
    assert [str(f.shown) for f in src.files()] == [str(folder / "b.csv"),
                                                   str(folder / "sub" / "a.csv")]
    assert src.check_values(COLUMNS) == 3

    write(folder / "z.csv", "y,age,colour,words,member\n")
    with pytest.raises(DataError, match=f"{folder / 'z.csv'}: its header differs from that of "
                       f"{folder / 'b.csv'}"):
        source(folder, schema).check_structure(COLUMNS)
    (folder / "z.csv").unlink()
    pq.write_table(pa.table({"y": ["0"]}), folder / "x.parquet")
    with pytest.raises(DataError, match="folder mixes csv and parquet files"):
        source(folder, schema).check_structure(COLUMNS)

    parquet = tmp_path / "pq"
    parquet.mkdir()
    base = {"y": ["0"], "colour": ["red"], "member": ["no"], "words": [["a"]]}
    pq.write_table(pa.table({**base, "age": pa.array([1], pa.int64())}), parquet / "a.parquet")
    pq.write_table(pa.table({**base, "age": pa.array([1.5])}), parquet / "b.parquet")
    with pytest.raises(DataError, match=r"column 'age' is stored as double in .*b\.parquet, "
                       r"expected int64 as in .*a\.parquet"):
        source(parquet, schema).check_structure(COLUMNS)
    with pytest.raises(DataError, match="file not found"):
        source(tmp_path / "nothing.parquet", schema).check_structure(COLUMNS)


def test_listing_digest_of_a_remote_location(spark: Any, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A URI Spark reads is digested by its Hadoop listing, marked as such; local files
    keep their digest of the bytes."""
    from dpcli.budget import Budget
    from dpcli.data import location
    from dpcli.fingerprint import input_digest
    from dpcli.ledger import init_ledger
    from dpcli.stats import spark as spark_module

    ledger = tmp_path / "ledger.jsonl"
    init_ledger(ledger, "d", Budget(1))
    folder = tmp_path / "data"
    folder.mkdir()
    pq.write_table(pa.table({"y": ["0"]}), folder / "a.parquet")
    local = input_digest(ledger, folder)
    assert local.startswith("hmac-sha256:")
    uri = f"file:{folder}"  # stands in for s3a://…: Hadoop lists it the same way
    for module in (location, spark_module):  # the ledger's test and the engine's listing
        monkeypatch.setattr(module, "is_remote", lambda data: str(data) == uri)
    listed = input_digest(ledger, uri)
    assert listed.startswith("hmac-sha256-of-listing:") and listed != local
    assert input_digest(ledger, uri) == listed
    assert [f[0].rsplit("/", 1)[1] for f in spark_module.input_listing(uri)] == ["a.parquet"]
    pq.write_table(pa.table({"y": ["1"]}), folder / "b.parquet")
    assert input_digest(ledger, uri) != listed


def test_a_parser_failure_quoting_a_record_never_reaches_stderr(spark: Any,
                                                                 tmp_path: Path) -> None:
    """Spark's CSV parser puts up to 1,000 characters of the field it failed on into its
    exception, and Spark logs that exception. dpcli's log configuration keeps each log line
    to its one-line message. A fresh process: the shared session's JVM writes to the stderr
    it was started with, which a test can not capture."""
    import subprocess
    import sys

    import yaml

    from dpcli.budget import Budget
    from dpcli.ledger import init_ledger

    planted = "PATIENT-" + SECRET.upper() + "-POSITIVE"
    rows = "".join(f"{i % 2},{20 + i % 50},red\n" for i in range(200))
    huge = ",".join(["0"] * 20_480) + ',"' + (planted + ";") * 300 + "\n" + planted + '"\n'
    bad = write(tmp_path / "bad.csv", "y,age,colour\n" + rows + huge)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "dataset": "leak", "budget": {"epsilon": 1.0}, "ledger": "ledger.jsonl",
        "label": {"column": "y", "classes": ["0", "1"]},
        "schema": {"columns": {"age": {"type": "numeric", "bounds": [0, 100]},
                               "colour": {"type": "categorical",
                                          "categories": ["red", "blue"]}}},
        "tabulate": {"epsilon": 0.5},
        "spark": {"master": "local[1]"}}))
    init_ledger(tmp_path / "ledger.jsonl", "leak", Budget(1))
    run = subprocess.run([sys.executable, "-m", "dpcli", "tabulate", str(bad), "--spec",
                          str(spec), "--engine", "spark", "--out", str(tmp_path / "t.csv")],
                         capture_output=True, text=True, timeout=300,
                         env={k: v for k, v in __import__("os").environ.items()
                              if k != "DPCLI_SPARK_MASTER"})
    assert run.returncode == 65, run.stderr[-2000:]
    assert "bad.csv" in run.stderr  # dpcli's own message names the file
    assert planted not in run.stderr and planted not in run.stdout
    assert not (tmp_path / "t.csv").exists()


def test_spark_is_never_allowed_to_skip_corrupt_or_missing_files(spark: Any) -> None:
    from dpcli.stats.spark import spark_session

    spark.conf.set("spark.sql.files.ignoreCorruptFiles", "true")  # e.g. a cluster default
    spark.conf.set("spark.sql.files.ignoreMissingFiles", "true")
    assert spark_session() is spark
    assert spark.conf.get("spark.sql.files.ignoreCorruptFiles") == "false"
    assert spark.conf.get("spark.sql.files.ignoreMissingFiles") == "false"


def test_the_ledger_digests_the_listing_the_run_reads(spark: Any, tmp_path: Path,
                                                      schema: Schema) -> None:
    from dpcli.stats.spark import input_listing

    folder = tmp_path / "parts"
    folder.mkdir()
    write(folder / "a.csv", GOOD)
    src = source(folder, schema)
    read = [f.uri for f in src.files()]
    write(folder / "b.csv", GOOD)  # appears between the check and the charge
    assert [uri for uri, _, _ in input_listing(folder)] == read
    assert len(read) == 1


def test_footers_prove_a_clean_file_without_reading_it(tmp_path: Path) -> None:
    """The footers' null counts and the label's min/max rule every pre-charge problem out
    only when they must: a null, a label outside the classes, a floating column (NaN is
    not a null), a missing statistic or several string labels all mean reading."""
    from dpcli.stats.spark_aggregate import footers_prove_clean

    sch = Schema(columns=(NumericColumn("x", 0.0, 10.0),),
                 label=Label("y", ("0", "1"), positive=None))

    def proven(table: pa.Table, **kwargs: Any) -> bool:
        path = tmp_path / "t.parquet"
        pq.write_table(table, path, row_group_size=2, **kwargs)
        return footers_prove_clean(sch, ["y", "x"], [pq.ParquetFile(path).metadata])

    ints = pa.array([1, 2, 3, 4], pa.int64())
    assert proven(pa.table({"y": pa.array([0, 1, 1, 0], pa.int64()), "x": ints}))
    assert not proven(pa.table({"y": pa.array([0, 1, None, 0], pa.int64()), "x": ints}))
    assert not proven(pa.table({"y": pa.array([0, 1, 2, 0], pa.int64()), "x": ints}))
    assert not proven(pa.table({"y": pa.array([0, 1, 1, 0], pa.int64()),
                                "x": ints.cast(pa.float64())}))
    assert not proven(pa.table({"y": pa.array([0, 1, 1, 0], pa.int64()), "x": ints}),
                      write_statistics=False)
    assert proven(pa.table({"y": ["1", "1", "0", "0"], "x": ints}))  # one label per group
    assert not proven(pa.table({"y": ["0", "1", "1", "0"], "x": ints}))
    assert not proven(pa.table({"y": ["1", "1", "0", "x"], "x": ints}))
    assert not proven(pa.table({"y": pa.array([0, 1, 1, 0], pa.int64()),
                                "x": pa.array([1, None, 3, 4], pa.int64())}))


def test_clean_parquet_is_checked_from_its_footers(spark: Any, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """No Spark job before the charge when the footers prove the file clean; the Python
    check still names a problem the footers show (a null label)."""
    from dpcli.stats import spark_aggregate

    jobs: list[int] = []
    real = spark_aggregate.check_labels_and_missing
    monkeypatch.setattr(spark_aggregate, "check_labels_and_missing",
                        lambda *a, **k: jobs.append(1) or real(*a, **k))
    sch = Schema(columns=(NumericColumn("x", 0.0, 10.0),),
                 label=Label("y", ("0", "1"), positive=None))
    clean = tmp_path / "clean.parquet"
    pq.write_table(pa.table({"y": pa.array([0, 1, 1], pa.int64()),
                             "x": pa.array([1, 2, 3], pa.int64())}), clean)
    assert source(clean, sch).check_values(["x"]) == 3
    assert jobs == []
    dirty = tmp_path / "dirty.parquet"
    pq.write_table(pa.table({"y": pa.array([0, None, 1], pa.int64()),
                             "x": pa.array([1, 2, 3], pa.int64())}), dirty)
    with pytest.raises(DataError, match="column 'y': missing label in data row 2"):
        source(dirty, sch).check_values(["x"])
    assert jobs == [1]
