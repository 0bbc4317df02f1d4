"""The encoder's fast paths give what the general path gives: the same codes, values,
counts and errors (a Parquet batch's usual case: dictionary strings with every value
declared, integers with nothing to clamp, an integer label)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from dpcli.data import encode
from dpcli.data.encode import (
    encode_categorical,
    encode_label,
    encode_numeric,
    lookup_codes,
)
from dpcli.data.report import ColumnCounts
from dpcli.data.schema import CategoricalColumn, Label, NumericColumn
from dpcli.errors import DataError

RNG = np.random.default_rng(3)


def _counts(c: ColumnCounts) -> tuple[int, ...]:
    return (c.imputed, c.mapped_to_other, c.clamped_below, c.clamped_above)


@pytest.mark.parametrize("levels", [("a", "b", "c"), ("a", "b", "c", "zz"), ("b",)])
@pytest.mark.parametrize("nulls", [False, True])
def test_dictionary_categorical_codes_equal_the_plain_text_path(levels: tuple[str, ...],
                                                                nulls: bool) -> None:
    col = CategoricalColumn("c", ("a", "b", "c"), missing="impute")
    text = list(RNG.choice(levels, 5_000))
    if nulls:
        text[17] = None
    plain = pa.array(text, pa.string())
    for _ in range(2):   # the second time from the remembered dictionary
        c_fast, c_plain = ColumnCounts(), ColumnCounts()
        fast = encode_categorical(plain.dictionary_encode(), col, c_fast)
        slow = encode_categorical(plain, col, c_plain)
        assert np.array_equal(fast, slow) and fast.dtype == slow.dtype == np.int32
        assert _counts(c_fast) == _counts(c_plain)


def test_a_remembered_dictionary_is_checked_by_content() -> None:
    col = CategoricalColumn("c", ("a", "b"))
    values = pa.array(["a", "b"])
    one = pa.DictionaryArray.from_arrays(pa.array([0, 1, 1], pa.int32()), pa.array(["a", "b"]))
    two = pa.DictionaryArray.from_arrays(pa.array([0, 1, 1], pa.int32()), pa.array(["b", "a"]))
    assert encode_categorical(one, col, ColumnCounts(), values=values).tolist() == [0, 1, 1]
    assert encode_categorical(two, col, ColumnCounts(), values=values).tolist() == [1, 0, 0]


@pytest.mark.parametrize("type_", [pa.int8(), pa.int32(), pa.int64(), pa.uint16(),
                                   pa.uint64()])
def test_integer_codes_equal_the_text_lookup(type_: pa.DataType) -> None:
    values = pa.array(["0", "1", "01", " 2", "3", "3", "+4", "5", "-0", None], pa.string())
    ints = pa.array(RNG.integers(0, 7, 2_000), type_)
    expected = lookup_codes(ints.cast(pa.string()), values)
    assert np.array_equal(lookup_codes(ints, values), expected)
    top = {pa.int8(): 100, pa.uint16(): 65_535}.get(type_, 10**6)
    wide = pa.array(np.concatenate([[0, top], RNG.integers(0, 5, 200)]), type_)
    assert np.array_equal(lookup_codes(wide, values), lookup_codes(wide.cast(pa.string()),
                                                                   values))


def test_an_integer_label_outside_the_classes_is_the_same_error() -> None:
    label = Label("y", ("0", "1"))
    ok = pa.array(RNG.integers(0, 2, 1_000), pa.int64())
    assert np.array_equal(encode_label(ok, label), encode_label(ok.cast(pa.string()), label))
    bad = pa.array([*RNG.integers(0, 2, 100), 2, *RNG.integers(0, 2, 100)], pa.int64())
    with pytest.raises(DataError, match="outside the declared classes in data row 101 "):
        encode_label(bad, label)


@pytest.mark.parametrize("type_", [pa.int64(), pa.int16(), pa.uint32(), pa.float32(),
                                   pa.float64()])
@pytest.mark.parametrize("bounds", [(-1000.0, 1000.0), (-3.0, 7.5), (0.0, 0.0)])
def test_numeric_values_and_counts_equal_the_general_path(type_: pa.DataType,
                                                          bounds: tuple[float, float]) -> None:
    col = NumericColumn("x", *bounds, missing="impute", fill=bounds[0])
    raw = RNG.integers(0, 12, 3_000) - (0 if pa.types.is_unsigned_integer(type_) else 5)
    arr = pa.array(raw, type_)
    c_fast, c_ref = ColumnCounts(), ColumnCounts()
    got = encode_numeric(arr, col, c_fast)
    ref = np.clip(arr.cast(pa.float64()).to_numpy(), *bounds)
    assert np.array_equal(got, ref) and got.flags.writeable
    c_ref.clamped_below = int((raw < bounds[0]).sum())
    c_ref.clamped_above = int((raw > bounds[1]).sum())
    assert _counts(c_fast) == _counts(c_ref)


def test_a_64_bit_integer_beyond_float_precision_takes_arrows_checked_cast() -> None:
    col = NumericColumn("x", 0.0, 10.0)
    big = pa.array([1, 2**53 + 1], pa.int64())
    assert encode._exact_float64(big) is None
    with pytest.raises(pa.ArrowInvalid):
        encode_numeric(big, col, ColumnCounts())


def test_nan_in_a_float_column_still_follows_the_missing_policy() -> None:
    col = NumericColumn("x", 0.0, 10.0)
    with pytest.raises(DataError, match="missing value"):
        encode_numeric(pa.array([1.0, float("nan"), 3.0]), col, ColumnCounts())
