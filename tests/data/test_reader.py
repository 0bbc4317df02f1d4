"""Reading files: formats, structure checks, pre-charge value checks, error messages.

Every error test asserts the exception type, that the message names the
file and the column, and that it does not quote the offending (private) value.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpcli.data import DataSource, detect_format
from dpcli.data.schema import (
    BinaryColumn,
    CategoricalColumn,
    Label,
    NumericColumn,
    Schema,
    TokensColumn,
)
from dpcli.errors import DataError, NoInput, UsageError

SCHEMA = Schema(
    columns=(
        NumericColumn("age", 0.0, 100.0),
        CategoricalColumn("colour", ("red", "green", "NA")),
        BinaryColumn("smoker", ("no", "yes"), missing="impute", fill="no"),
        NumericColumn("score", 0.0, 1.0, missing="impute", fill=0.25),
    ),
    label=Label("y", ("0", "1")),
)
COLS = ("age", "colour", "smoker", "score")
GOOD_CSV = "y,age,colour,smoker,score,notes\n" + "\n".join([
    "0,30,red,no,0.5,x",
    "1,130,green,yes,,y",
    "1,-4,blue,maybe,2,z",
    "0,40,NA,,0.1,w",
]) + "\n"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def assert_private(exc: pytest.ExceptionInfo[DataError], path: Path, column: str | None,
                   *secrets: str) -> str:
    msg = str(exc.value)
    assert str(path) in msg
    if column is not None:
        assert f"'{column}'" in msg
    for secret in secrets:
        assert secret not in msg
    return msg


# ---------------------------------------------------------------- formats


@pytest.mark.parametrize(("name", "fmt"), [
    ("a.csv", "csv"), ("a.CSV", "csv"), ("a.csv.gz", "csv"), ("a.tsv", "csv"),
    ("a.parquet", "parquet"), ("a.pq", "parquet"),
])
def test_detect_format(tmp_path: Path, name: str, fmt: str) -> None:
    assert detect_format(tmp_path / name) == fmt


@pytest.mark.parametrize("name", ["data.xlsx", "data.json", "data", "data.csv.zip"])
def test_unknown_suffix_is_data_error(tmp_path: Path, name: str) -> None:
    with pytest.raises(DataError) as info:
        DataSource(tmp_path / name, SCHEMA)
    assert str(tmp_path / name) in str(info.value)


def test_nonexistent_file(tmp_path: Path) -> None:
    for name in ("nope.csv", "nope.parquet"):
        src = DataSource(tmp_path / name, SCHEMA)
        with pytest.raises(DataError, match="not found") as info:
            src.check_structure(COLS)
        assert_private(info, tmp_path / name, None)
        assert isinstance(info.value, NoInput)   # exit 66, not bad data (65)
        # no file, no structure to report: even inspect's report-only check raises
        with pytest.raises(NoInput):
            src.check_structure(COLS, raise_errors=False)


def test_directory_named_like_csv(tmp_path: Path) -> None:
    (tmp_path / "d.csv").mkdir()
    with pytest.raises(DataError, match="directory"):
        DataSource(tmp_path / "d.csv", SCHEMA).check_structure(COLS)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="root can read files without permission")
def test_unreadable_file(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", GOOD_CSV)
    path.chmod(0)
    try:
        with pytest.raises(DataError, match="cannot read") as info:
            DataSource(path, SCHEMA).check_structure(COLS)
        assert_private(info, path, None)
    finally:
        path.chmod(0o600)


def test_not_a_parquet_file(tmp_path: Path) -> None:
    path = write(tmp_path / "d.parquet", GOOD_CSV)
    with pytest.raises(DataError, match="not a readable Parquet file") as info:
        DataSource(path, SCHEMA).check_structure(COLS)
    assert_private(info, path, None, "red")


def test_empty_csv(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "")
    with pytest.raises(DataError, match="empty"):
        DataSource(path, SCHEMA).check_structure(COLS)


def test_undeclared_column_is_usage_error(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", GOOD_CSV)
    with pytest.raises(UsageError, match="'notes'"):
        DataSource(path, SCHEMA).check_structure(["notes"])


# -------------------------------------------------------------- structure


def test_structure_report_csv(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "y,age,colour,other\n")
    src = DataSource(path, SCHEMA)
    rep = src.check_structure(COLS, raise_errors=False)
    assert rep.present == ("y", "age", "colour")
    assert rep.missing == ("smoker", "score")
    assert rep.extra == ("other",)
    assert not rep.ok and any("MISSING" in line for line in rep.lines())
    with pytest.raises(DataError) as info:
        src.check_structure(COLS)
    msg = assert_private(info, path, "smoker")
    assert "'score'" in msg


def test_missing_label_column_parquet(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"age": [1.0], "colour": ["red"], "smoker": ["no"],
                             "score": [0.1]}), path)
    with pytest.raises(DataError) as info:
        DataSource(path, SCHEMA).check_structure(COLS)
    assert_private(info, path, "y")


def test_parquet_wrong_type(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"y": ["0"], "age": ["xq-33"], "colour": [[1, 2]], "smoker": ["no"],
                             "score": [0.1]}), path)
    src = DataSource(path, SCHEMA)
    with pytest.raises(DataError) as info:
        src.check_structure(COLS)
    msg = assert_private(info, path, "age", "xq-33")
    assert "'colour'" in msg and "string" in msg
    rep = src.check_structure(COLS, raise_errors=False)
    assert {m.column for m in rep.mismatches} == {"age", "colour"}
    assert rep.num_rows == 1


def test_parquet_tokens_type(tmp_path: Path) -> None:
    schema = Schema(columns=(TokensColumn("t", ("a",), tmp_path / "v.txt"),),
                    label=Label("y", ("0", "1")))
    for values, ok in ((pa.array([["a"]]), True), (pa.array(["a b"]), True),
                       (pa.array([[1]]), False), (pa.array([1.5]), False)):
        path = tmp_path / "t.parquet"
        pq.write_table(pa.table({"y": ["1"], "t": values}), path)
        assert DataSource(path, schema).check_structure(["t"], raise_errors=False).ok is ok


def test_num_rows_hint(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"y": ["0"] * 5}), path)
    assert DataSource(path, SCHEMA).num_rows_hint() == 5
    csv = DataSource(write(tmp_path / "d.csv", GOOD_CSV), SCHEMA)
    assert csv.num_rows_hint() is None  # unknown until the pre-charge pass has counted
    n = csv.check_values(list(SCHEMA.names))
    assert csv.num_rows_hint() == n > 0


# ----------------------------------------------------------------- values


def test_good_csv_reads_and_counts(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", GOOD_CSV)
    src = DataSource(path, SCHEMA, batch_rows=3)
    src.check_values(COLS)
    batches = list(src.batches(COLS, rng=rng()))
    assert [b.n for b in batches] == [3, 1]
    age = np.concatenate([b.columns["age"] for b in batches])
    colour = np.concatenate([b.columns["colour"] for b in batches])
    smoker = np.concatenate([b.columns["smoker"] for b in batches])
    score = np.concatenate([b.columns["score"] for b in batches])
    np.testing.assert_array_equal(age, [30, 100, 0, 40])
    np.testing.assert_array_equal(colour, [0, 1, 3, 2])  # "NA" is a declared category here
    np.testing.assert_array_equal(smoker, [0, 1, 0, 0])
    np.testing.assert_array_equal(score, [0.5, 0.25, 1.0, 0.1])
    rep = src.report
    assert rep.rows == 4
    assert (rep.columns["age"].clamped_below, rep.columns["age"].clamped_above) == (1, 1)
    assert rep.columns["colour"].mapped_to_other == 1
    assert (rep.columns["smoker"].mapped_to_other, rep.columns["smoker"].imputed) == (1, 1)
    assert (rep.columns["score"].imputed, rep.columns["score"].clamped_above) == (1, 1)
    list(src.batches(COLS, rng=rng()))
    assert src.report.rows == 4  # a new pass starts a new report


def test_gzip_and_tsv(tmp_path: Path) -> None:
    gz = tmp_path / "d.csv.gz"
    gz.write_bytes(gzip.compress(GOOD_CSV.encode()))
    tsv = write(tmp_path / "d.tsv", GOOD_CSV.replace(",", "\t"))
    for path in (gz, tsv):
        src = DataSource(path, SCHEMA)
        src.check_values(COLS)
        assert sum(b.n for b in src.batches(COLS, rng=rng())) == 4


def test_quoted_newlines_in_csv(tmp_path: Path) -> None:
    text = 'y,age,colour,smoker,score\n0,1,"re\nd",no,0\n1,2,red,yes,0\n'
    src = DataSource(write(tmp_path / "d.csv", text), SCHEMA)
    src.check_values(COLS)
    (batch,) = src.batches(COLS, rng=rng())
    assert batch.columns["colour"].tolist() == [3, 0]


def test_csv_broken_row(tmp_path: Path) -> None:
    text = GOOD_CSV + "1,50,red,no,0.3,x,SECRET99\n0,20,red,no,0.1,x\n"
    path = write(tmp_path / "d.csv", text)
    with pytest.raises(DataError) as info:
        DataSource(path, SCHEMA).check_values(COLS)
    msg = assert_private(info, path, None, "SECRET99", "50")
    assert "row 6 of the file" in msg and "data row 5" in msg
    assert "7 fields" in msg and "expected 6" in msg


def test_csv_unparseable_number(tmp_path: Path) -> None:
    rows = [f"{i % 2},{i},red,no,0.5,x" for i in range(300)]
    rows[217] = "1,4x2y,red,no,0.5,x"
    path = write(tmp_path / "d.csv", "y,age,colour,smoker,score,notes\n" + "\n".join(rows))
    for check in ("values", "batches"):
        src = DataSource(path, SCHEMA, batch_rows=50)
        with pytest.raises(DataError) as info:
            if check == "values":
                src.check_values(COLS)
            else:
                list(src.batches(COLS, rng=rng()))
        msg = assert_private(info, path, "age", "4x2y")
        assert "data row 218" in msg


def test_label_outside_classes(tmp_path: Path) -> None:
    csv_path = write(tmp_path / "d.csv", GOOD_CSV + "7734,1,red,no,0.1,x\n")
    pq_path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"y": ["0", "1", "7734"], "age": [1.0] * 3,
                             "colour": ["red"] * 3, "smoker": ["no"] * 3,
                             "score": [0.1] * 3}), pq_path)
    for path, row in ((csv_path, 5), (pq_path, 3)):
        with pytest.raises(DataError) as info:
            DataSource(path, SCHEMA).check_values(COLS)
        msg = assert_private(info, path, "y", "7734")
        assert f"data row {row}" in msg and "outside the declared classes" in msg


def test_null_label(tmp_path: Path) -> None:
    csv_path = write(tmp_path / "d.csv", GOOD_CSV + ",1,red,no,0.1,x\n")
    pq_path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"y": ["0", None], "age": [1.0] * 2, "colour": ["red"] * 2,
                             "smoker": ["no"] * 2, "score": [0.1] * 2}), pq_path)
    for path in (csv_path, pq_path):
        with pytest.raises(DataError, match="missing label") as info:
            DataSource(path, SCHEMA).check_values(COLS)
        assert_private(info, path, "y")


def test_null_in_error_policy_column_csv(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", GOOD_CSV + "1,,red,no,0.1,x\n")
    with pytest.raises(DataError) as info:
        DataSource(path, SCHEMA).check_values(COLS)
    msg = assert_private(info, path, "age")
    assert "data row 5" in msg and "impute" in msg
    # the same column is fine when the run does not need it
    DataSource(path, SCHEMA).check_values(["colour"])


@pytest.mark.parametrize("statistics", [True, False])
def test_null_in_error_policy_column_parquet(tmp_path: Path, statistics: bool) -> None:
    n = 1000
    colour = ["red"] * n
    colour[737] = None
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"y": ["0"] * n, "age": np.arange(n, dtype=np.int64),
                             "colour": colour, "smoker": ["no"] * n,
                             "score": [0.5] * n}),
                   path, row_group_size=100, write_statistics=statistics)
    with pytest.raises(DataError) as info:
        DataSource(path, SCHEMA, batch_rows=64).check_values(COLS)
    msg = assert_private(info, path, "colour")
    assert "data row 738" in msg


def test_nan_in_error_policy_float_parquet(tmp_path: Path) -> None:
    age = np.full(10, 5.0)
    age[6] = np.nan
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"y": ["1"] * 10, "age": pa.array(age, from_pandas=False)}), path)
    with pytest.raises(DataError) as info:
        DataSource(path, SCHEMA).check_values(["age"])
    assert "data row 7" in assert_private(info, path, "age")


def test_parquet_directory_and_impute(tmp_path: Path) -> None:
    folder = tmp_path / "parts.parquet.d"
    folder.mkdir()
    for i in range(3):
        pq.write_table(pa.table({"y": ["0", "1"], "age": [10 * i, 200],
                                 "colour": ["red", "NA"], "smoker": [None, "yes"],
                                 "score": pa.array([None, 0.5], pa.float64())}),
                       folder / f"part-{i}.parquet")
    (folder / "_SUCCESS").write_text("")
    src = DataSource(folder, SCHEMA, batch_rows=1000)
    assert src.format == "parquet" and src.num_rows_hint() == 6
    src.check_values(COLS)
    batches = list(src.batches(COLS, rng=rng()))
    assert sum(b.n for b in batches) == 6
    rep = src.report
    assert rep.columns["smoker"].imputed == 3 and rep.columns["score"].imputed == 3
    assert rep.columns["age"].clamped_above == 3
    score = np.concatenate([b.columns["score"] for b in batches])
    np.testing.assert_array_equal(score, [0.25, 0.5] * 3)


def test_parquet_missing_value_in_later_file_reports_file(tmp_path: Path) -> None:
    folder = tmp_path / "parts"
    folder.mkdir()
    pq.write_table(pa.table({"y": ["0"], "age": [1.0]}), folder / "a.parquet")
    pq.write_table(pa.table({"y": ["0"], "height": [1.0]}), folder / "b.parquet")
    with pytest.raises(DataError) as info:
        DataSource(folder, SCHEMA).check_structure(["age"])
    msg = str(info.value)
    assert "'age'" in msg and "b.parquet" in msg


def test_empty_parquet_directory(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no Parquet files"):
        DataSource(tmp_path / "empty", SCHEMA).check_structure(COLS)


def test_parquet_categorical_stored_as_ints_bools_floats(tmp_path: Path) -> None:
    schema = Schema(columns=(CategoricalColumn("c", ("1", "2")),
                             BinaryColumn("b", ("false", "true"))),
                    label=Label("y", ("0", "1")))
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"y": pa.array([0, 1, 1], pa.int8()),
                             "c": pa.array([1.0, 2.0, 3.0]),
                             "b": [True, False, True]}), path)
    src = DataSource(path, schema)
    src.check_values(["c", "b"])
    (batch,) = src.batches(["c", "b"], rng=rng())
    assert batch.label.tolist() == [0, 1, 1]
    assert batch.columns["c"].tolist() == [0, 1, 2]
    assert batch.columns["b"].tolist() == [1, 0, 1]


def test_parquet_directory_errors_name_the_file_and_its_row(tmp_path: Path) -> None:
    folder = tmp_path / "parts"
    folder.mkdir()
    pq.write_table(pa.table({"y": ["0", "1", "0"], "age": [1.0, 2.0, 3.0]}),
                   folder / "a.parquet")
    pq.write_table(pa.table({"y": ["1", "5150"], "age": [1.0, 2.0]}), folder / "b.parquet")
    for check in ("values", "batches"):
        src = DataSource(folder, SCHEMA)
        with pytest.raises(DataError) as info:
            if check == "values":
                src.check_values(["age"])
            else:
                list(src.batches(["age"], rng=rng()))
        msg = assert_private(info, folder / "b.parquet", "y", "5150")
        assert "data row 2" in msg
