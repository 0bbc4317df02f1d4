"""Encoding Arrow arrays under the declared schema: clamping, mapping, tokens, counts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from dpcli.data.encode import (
    BatchEncoder,
    RowPosition,
    encode_binary,
    encode_categorical,
    encode_label,
    encode_numeric,
    encode_tokens,
    to_text,
)
from dpcli.data.report import ColumnCounts, DataReport
from dpcli.data.schema import (
    BinaryColumn,
    CategoricalColumn,
    Label,
    NumericColumn,
    Schema,
    TokensColumn,
)
from dpcli.errors import DataError

FILE = Path("/data/private.csv")


def where(offset: int = 0) -> RowPosition:
    return RowPosition(FILE, offset)


# ---------------------------------------------------------------- numeric


def test_numeric_clamps_and_counts() -> None:
    col = NumericColumn("x", -1.0, 2.0)
    counts = ColumnCounts()
    out = encode_numeric(pa.array([-5, -1, 0.5, 2, 3.25, 1e300]), col, counts)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, [-1, -1, 0.5, 2, 2, 2])
    assert (counts.clamped_below, counts.clamped_above) == (1, 2)
    assert counts.imputed == 0


def test_numeric_missing_impute_fills_and_counts() -> None:
    col = NumericColumn("x", 0.0, 10.0, missing="impute", fill=3.0)
    counts = ColumnCounts()
    out = encode_numeric(pa.array([1.0, None, float("nan"), 20.0]), col, counts)
    np.testing.assert_array_equal(out, [1, 3, 3, 10])
    assert counts.imputed == 2 and counts.clamped_above == 1
    default_fill = NumericColumn("x", 0.0, 10.0, missing="impute")
    out = encode_numeric(pa.array([None], pa.int64()), default_fill, ColumnCounts())
    assert out[0] == 5.0


def test_numeric_missing_error_names_file_column_row() -> None:
    col = NumericColumn("weight", 0.0, 10.0)
    with pytest.raises(DataError) as info:
        encode_numeric(pa.array([4.25, 7.125, None]), col, ColumnCounts(), where(100))
    msg = str(info.value)
    assert str(FILE) in msg and "'weight'" in msg and "data row 103" in msg
    assert "4.25" not in msg and "7.125" not in msg


# ------------------------------------------------------------ categorical


def test_categorical_codes_other_and_counts() -> None:
    col = CategoricalColumn("c", ("red", "green"), missing="impute")
    counts = ColumnCounts()
    out = encode_categorical(pa.array(["green", "red", "mauve", None, "Red"]), col, counts)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [1, 0, 2, 2, 2])
    assert counts.mapped_to_other == 2  # "mauve", "Red" (case-sensitive)
    assert counts.imputed == 1


@pytest.mark.parametrize(("values", "expected"), [
    (pa.array([1, 2, 7], pa.int64()), [0, 1, 2]),
    (pa.array([1, 2, 7], pa.uint8()), [0, 1, 2]),
    (pa.array([1.0, 2.0, 1.5]), [0, 1, 2]),
    (pa.array(["1", "2", "01"]), [0, 1, 2]),
])
def test_categorical_compares_values_as_text(values: pa.Array, expected: list[int]) -> None:
    col = CategoricalColumn("c", ("1", "2"))
    np.testing.assert_array_equal(encode_categorical(values, col, ColumnCounts()), expected)


def test_text_forms_of_values() -> None:
    assert to_text(pa.array([True, False])).to_pylist() == ["true", "false"]
    assert to_text(pa.array([1.0, -0.0, 2.5, None, float("nan")])).to_pylist() == [
        "1", "0", "2.5", None, None]
    assert to_text(pa.array([3, None])).to_pylist() == ["3", None]


def test_categorical_dictionary_matches_plain() -> None:
    col = CategoricalColumn("c", ("a", "b", "c"), missing="impute")
    plain = pa.array(["a", "z", None, "c", "b", "z", "a"])
    c1, c2 = ColumnCounts(), ColumnCounts()
    out1 = encode_categorical(plain, col, c1)
    out2 = encode_categorical(plain.dictionary_encode(), col, c2)
    np.testing.assert_array_equal(out1, out2)
    assert c1 == c2


def test_categorical_missing_error() -> None:
    col = CategoricalColumn("colour", ("a",))
    with pytest.raises(DataError, match=r"'colour'.*data row 2"):
        encode_categorical(pa.array(["a", None]), col, ColumnCounts(), where())


# ----------------------------------------------------------------- binary


def test_binary_maps_undeclared_to_first_value() -> None:
    col = BinaryColumn("s", ("no", "yes"), missing="impute", fill="yes")
    counts = ColumnCounts()
    out = encode_binary(pa.array(["yes", "no", "maybe", None]), col, counts)
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, [1, 0, 0, 1])
    assert counts.mapped_to_other == 1 and counts.imputed == 1
    out = encode_binary(pa.array([True, False]), BinaryColumn("b", ("false", "true")),
                        ColumnCounts())
    np.testing.assert_array_equal(out, [1, 0])


# ------------------------------------------------------------------ label


def test_label_codes_and_errors() -> None:
    label = Label("y", ("0", "1"))
    np.testing.assert_array_equal(encode_label(pa.array([1, 0, 1]), label), [1, 0, 1])
    with pytest.raises(DataError) as info:
        encode_label(pa.array(["0", "secret-class"]), label, where(10))
    msg = str(info.value)
    assert str(FILE) in msg and "'y'" in msg and "data row 12" in msg
    assert "secret-class" not in msg
    with pytest.raises(DataError, match="missing label"):
        encode_label(pa.array(["0", None]), label, where())


def test_a_label_stored_as_numbers_against_word_classes_names_the_type() -> None:
    """Classes [No, Yes] against an int64 column: the message names the storage type, not
    only 'outside the declared classes'; a numeric class list gets no such hint."""
    with pytest.raises(DataError) as info:
        encode_label(pa.array([0, 1]), Label("y", ("No", "Yes")), where())
    assert "stored as int64" in str(info.value) and "e.g. [0, 1]" in str(info.value)
    with pytest.raises(DataError) as info:
        encode_label(pa.array([True, False]), Label("y", ("No", "Yes")), where())
    assert "stored as bool" in str(info.value)
    with pytest.raises(DataError) as info:
        encode_label(pa.array([0, 7]), Label("y", ("0", "1")), where())
    assert "stored as" not in str(info.value)


# ----------------------------------------------------------------- tokens


def tokens_col(vocab: tuple[str, ...], r: int | None = None,
               missing: str = "error") -> TokensColumn:
    return TokensColumn("t", vocab, Path("vocab.txt"), max_per_row=r, missing=missing)


def rows_of(ts: object) -> list[list[int]]:
    return [ts.row(i).tolist() for i in range(ts.n)]  # type: ignore[attr-defined]


def test_tokens_sets_and_out_of_vocabulary() -> None:
    col = tokens_col(("a", "b", "c"))
    counts = ColumnCounts()
    arr = pa.array([["b", "a", "b", "zz"], [], ["c"], ["q", "r"]])
    ts = encode_tokens(arr, col, counts)
    assert ts.offsets.dtype == np.int64 and ts.indices.dtype == np.int32
    assert rows_of(ts) == [[0, 1], [], [2], []]
    assert counts.tokens_out_of_vocabulary == 3


def test_tokens_from_text_split_on_whitespace() -> None:
    col = tokens_col(("a", "b", "c"))
    counts = ColumnCounts()
    ts = encode_tokens(pa.array(["  b a\tb zz ", "", "c\nc"]), col, counts)
    assert rows_of(ts) == [[0, 1], [], [2]]
    assert counts.tokens_out_of_vocabulary == 1  # empty strings between spaces are no tokens


def test_tokens_sliced_and_null_rows() -> None:
    col = tokens_col(("a", "b"), missing="impute")
    counts = ColumnCounts()
    arr = pa.array([["a"], ["b", "a"], None, ["b"]]).slice(1)
    ts = encode_tokens(arr, col, counts)
    assert rows_of(ts) == [[0, 1], [], [1]]
    assert counts.imputed == 1
    with pytest.raises(DataError, match=r"'t'.*data row 2"):
        encode_tokens(arr, tokens_col(("a", "b")), ColumnCounts(), where())


def _many_rows(n: int, vocab_size: int, seed: int) -> pa.Array:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 12, n)
    words = [f"w{j}" for j in rng.integers(0, vocab_size + 5, lengths.sum())]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(words))


def test_token_cap_holds_counts_and_is_reproducible() -> None:
    vocab = tuple(f"w{i}" for i in range(10))
    arr = _many_rows(5_000, 10, seed=1)
    uncapped = encode_tokens(arr, tokens_col(vocab), ColumnCounts())
    counts = ColumnCounts()
    capped = encode_tokens(arr, tokens_col(vocab, r=3), counts, seed=42)
    lengths = np.diff(capped.offsets)
    assert lengths.max() <= 3
    full = np.diff(uncapped.offsets)
    np.testing.assert_array_equal(lengths, np.minimum(full, 3))
    assert counts.rows_token_capped == int((full > 3).sum()) > 0
    for i in range(200):  # kept tokens are a subset of the row's tokens
        assert set(capped.row(i)) <= set(uncapped.row(i))
    again = encode_tokens(arr, tokens_col(vocab, r=3), ColumnCounts(), seed=42)
    np.testing.assert_array_equal(capped.indices, again.indices)
    other = encode_tokens(arr, tokens_col(vocab, r=3), ColumnCounts(), seed=43)
    assert not np.array_equal(capped.indices, other.indices)


def test_token_cap_is_uniform_within_a_row() -> None:
    # the same 5-token row repeated: each token kept with probability 2/5
    n = 20_000
    arr = pa.array([["a", "b", "c", "d", "e"]] * n)
    ts = encode_tokens(arr, tokens_col(("a", "b", "c", "d", "e"), r=2), ColumnCounts(), seed=7)
    freq = np.bincount(ts.indices, minlength=5) / n
    # binomial sd of a frequency: sqrt(.4 * .6 / 20000) ≈ 0.0035; 6 sd ≈ 0.021
    np.testing.assert_allclose(freq, 0.4, atol=0.021)


def test_token_cap_independent_of_batching() -> None:
    vocab = tuple(f"w{i}" for i in range(10))
    arr = _many_rows(1_000, 10, seed=3)
    whole = encode_tokens(arr, tokens_col(vocab, r=2), ColumnCounts(), where(0), seed=5)
    parts = [encode_tokens(arr.slice(s, 70), tokens_col(vocab, r=2), ColumnCounts(),
                           where(s), seed=5) for s in range(0, 1_000, 70)]
    np.testing.assert_array_equal(whole.indices, np.concatenate([p.indices for p in parts]))


def test_tokens_large_vocabulary_vectorised() -> None:
    vocab = tuple(f"word{i}" for i in range(30_000))
    arr = _many_rows(20_000, 0, seed=0)  # all out of vocabulary "w…"
    counts = ColumnCounts()
    ts = encode_tokens(arr, tokens_col(vocab, r=5), counts)
    assert ts.indices.size == 0 and counts.tokens_out_of_vocabulary > 0


# ---------------------------------------------------------------- encoder


def test_batch_encoder_counts_rows_and_continues_row_numbers() -> None:
    schema = Schema(columns=(NumericColumn("x", 0.0, 1.0),), label=Label("y", ("0", "1")))
    report = DataReport()
    enc = BatchEncoder(schema, ["x"], report=report, rng=np.random.default_rng(0), file=FILE)
    b1 = enc.encode(pa.record_batch({"y": ["0", "1"], "x": [0.5, 2.0]}))
    assert b1.n == 2 and b1.label.tolist() == [0, 1]
    with pytest.raises(DataError, match="data row 4"):
        enc.encode(pa.record_batch({"y": ["0", "1"], "x": [0.5, None]}))
    assert report.rows == 2 and report.columns["x"].clamped_above == 1
    assert any("clamped" in line for line in report.lines())


def test_lookup_codes_of_numbers_through_their_distinct_values() -> None:
    # long number and boolean arrays are looked up through dictionary_encode: the codes must
    # be those of looking up every value's text (nulls, NaN, -0.0, 1.0 == "1" included)
    import pyarrow as pa

    from dpcli.data.encode import NOT_DECLARED, NULL, lookup_codes

    rng = np.random.default_rng(0)
    values = pa.array(["0", "1", "2", "1.5", "true"], pa.string())
    ints = [None if i % 17 == 0 else int(v) for i, v in enumerate(rng.integers(-1, 4, 500))]
    floats = [float("nan") if i % 13 == 0 else None if i % 11 == 0 else v
              for i, v in enumerate(rng.choice([0.0, -0.0, 1.0, 1.5, 2.0, 7.25], 500))]
    bools = [None if i % 7 == 0 else bool(v) for i, v in enumerate(rng.integers(0, 2, 500))]
    for arr in (pa.array(ints, pa.int64()), pa.array(ints, pa.int8()),
                pa.array(floats, pa.float64()), pa.array(bools, pa.bool_())):
        got = lookup_codes(arr, values)
        one_by_one = np.concatenate([lookup_codes(arr.slice(i, 1), values)
                                     for i in range(len(arr))])
        np.testing.assert_array_equal(got, one_by_one)
        assert (got == NULL).any() and (got == NOT_DECLARED).any() | (got >= 0).all()


def test_integral_float_text_finds_the_declared_integer() -> None:
    """A CSV written from floats holds "0.0"/"1.0": the same codes as Parquet's 0.0/1.0
    (to_text writes "0"/"1"). Codes-like text keeps its exact meaning: "02" is not "2",
    and "1.5", "1." and "01.0" are undeclared; a declared "1.0" is matched as written."""
    from dpcli.data.encode import lookup_codes

    declared = pa.array(["0", "1", "2"])
    text = pa.array(["0.0", "1.0", "2.00", "-0.0", "02", "1.5", "1.", "01.0", "x", None])
    assert lookup_codes(text, declared).tolist() == [0, 1, 2, 0, -1, -1, -1, -1, -1, -2]
    assert lookup_codes(pa.array([0.0, 1.0, 2.0]), declared).tolist() == [0, 1, 2]
    assert lookup_codes(text.dictionary_encode(), declared).tolist()[:5] == [0, 1, 2, 0, -1]
    as_written = pa.array(["1.0", "1"])
    assert lookup_codes(pa.array(["1.0", "1"]), as_written).tolist() == [0, 1]


def test_the_integral_rule_does_nothing_where_no_integer_is_declared() -> None:
    """Only a declared integer can be found by "1.0": word categories skip the rule (the
    Spark engine likewise adds no regex for them, which cost 3× at 10^7 rows)."""
    from dpcli.data.encode import _declares_integers, lookup_codes

    words = pa.array(["a", "b"])
    assert not _declares_integers(words) and _declares_integers(pa.array(["x", "-3"]))
    assert lookup_codes(pa.array(["1.0", "a", "b.0"]), words).tolist() == [-1, 0, -1]
