"""dpcli.data.arrow_compute gives pyarrow.compute's arrays for the calls the readers make."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dpcli.data import arrow_compute as ac

TEXT = pa.array(["a", " b\t", None, "", "1.5", "NA", "x y  z", "3"], pa.string())
FLOATS = pa.array([1.0, math.nan, None, -0.0, 2.5, math.inf], pa.float64())
INTS = pa.array([3, None, -7, 0, 2**40], pa.int64())
DICT = pa.array(["u", "v", None, "u", "w"]).dictionary_encode()


def same(got: pa.Array, want: pa.Array) -> None:
    # Arrow's equals() never finds NaN equal to NaN: the printed arrays (dictionary and
    # indices for a dictionary array; short arrays, printed whole) stand in for them
    assert got.type == want.type, (got.type, want.type)
    assert got.equals(want) or got.to_string() == want.to_string(), (got, want)


@pytest.mark.parametrize("arr", [TEXT, FLOATS, INTS, DICT, pa.array([True, None, False]),
                                 pa.nulls(3, pa.string())])
def test_the_null_nan_and_encoding_kernels_match(arr: pa.Array) -> None:
    same(ac.is_null(arr), arr.is_null())
    if pa.types.is_floating(arr.type):
        same(ac.is_nan(arr), pc.is_nan(arr))
    if not pa.types.is_dictionary(arr.type):
        same(ac.dictionary_encode(arr), arr.dictionary_encode())


@pytest.mark.parametrize(("arr", "to"), [
    (INTS, pa.string()), (INTS, pa.float64()), (FLOATS, pa.string()), (DICT, pa.string()),
    (pa.array(["1.5", None, "-2e3"]), pa.float64()), (pa.array([True, False]), pa.string()),
    (pa.array(["x"], pa.large_string()), pa.string()), (INTS, "string")])
def test_cast_is_arrays_safe_cast(arr: pa.Array, to: object) -> None:
    target = arr.type.value_type if to is None else to
    same(ac.cast(arr, target), arr.cast(target))


def test_a_cast_that_fails_fails_the_same_way() -> None:
    with pytest.raises(pa.ArrowInvalid):
        ac.cast(pa.array(["1", "x"]), pa.float64())
    with pytest.raises(pa.ArrowInvalid):   # safe: no silent truncation
        ac.cast(pa.array([1.5]), pa.int64())


def test_fill_null_with_python_values_scalars_and_other_types() -> None:
    same(ac.fill_null(TEXT, ""), pc.fill_null(TEXT, ""))
    same(ac.fill_null(INTS, 0), pc.fill_null(INTS, 0))
    same(ac.fill_null(pa.array([True, None]), False), pc.fill_null(pa.array([True, None]), False))
    same(ac.fill_null(INTS, pa.scalar(5, pa.int32())), pc.fill_null(INTS, pa.scalar(5, pa.int32())))
    same(ac.fill_null(DICT.indices, 0), pc.fill_null(DICT.indices, 0))


def test_set_lookups_selection_and_text_kernels_match() -> None:
    values = pa.array(["a", "", "3", "zz"])
    same(ac.is_in(TEXT, value_set=values), pc.is_in(TEXT, value_set=values))
    same(ac.index_in(TEXT, value_set=values), pc.index_in(TEXT, value_set=values))
    nulls = pa.array(["", "NA"])
    same(ac.is_in(TEXT, value_set=nulls), pc.is_in(TEXT, value_set=nulls))
    cond = pa.array([True, False, None, True, False, True, False, True])
    same(ac.if_else(cond, TEXT, pa.nulls(len(TEXT), pa.string())),
         pc.if_else(cond, TEXT, pa.nulls(len(TEXT), pa.string())))
    same(ac.utf8_trim(TEXT, " \t"), pc.utf8_trim(TEXT, " \t"))
    same(ac.utf8_split_whitespace(TEXT), pc.utf8_split_whitespace(TEXT))
    same(ac.binary_length(TEXT), pc.binary_length(TEXT))
    same(ac.equal(ac.binary_length(TEXT), 0), pc.equal(pc.binary_length(TEXT), 0))
