"""The Arrow compute kernels dpcli's readers call, without importing ``pyarrow.compute``.

Importing ``pyarrow.compute`` wraps every registered kernel (about 300) in a Python
function with a generated docstring: about 25 ms of every data command's start-up,
more than any other module but numpy and pyarrow itself (docs/scale.md, "Fixed
cost"). pyarrow's own ``Array.cast``, ``is_null``, ``dictionary_encode`` and
``fill_null`` import it on first use. The functions here call the same kernels
through ``pyarrow._compute.call_function`` with the options ``pyarrow.compute``'s
wrappers build for the same arguments (pyarrow/compute.py), so they return the same
arrays; only the readers' hot path (dpcli.data.reader, dpcli.data.encode) uses them.
Code off that path keeps ``import pyarrow.compute``.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

try:
    from pyarrow import _compute
except ImportError:  # a pyarrow without the private module: its public one has the same names
    import pyarrow.compute as _compute

__all__ = ["binary_length", "cast", "dictionary_encode", "equal", "fill_null", "if_else",
           "index_in", "is_in", "is_nan", "is_null", "match_substring_regex",
           "replace_substring_regex", "take", "utf8_split_whitespace", "utf8_trim"]


def cast(arr: Any, target_type: Any) -> Any:
    """``arr.cast(target_type)``: a safe cast (``pyarrow.compute.cast`` with ``safe=None``)."""
    options = _compute.CastOptions.safe(pa.lib.ensure_type(target_type))
    return _compute.call_function("cast", [arr], options)


def is_null(arr: Any) -> Any:
    """``arr.is_null()``: true where null (NaN is not null)."""
    return _compute.call_function("is_null", [arr], _compute.NullOptions(nan_is_null=False))


def is_nan(arr: Any) -> Any:
    return _compute.call_function("is_nan", [arr])


def fill_null(values: Any, fill_value: Any) -> Any:
    """``pyarrow.compute.fill_null``: ``fill_value`` (as a scalar of the values' type) where
    null."""
    if not isinstance(fill_value, (pa.Array, pa.ChunkedArray, pa.Scalar)):
        fill_value = pa.scalar(fill_value, type=values.type)
    elif values.type != fill_value.type:
        fill_value = pa.scalar(fill_value.as_py(), type=values.type)
    return _compute.call_function("coalesce", [values, fill_value])


def dictionary_encode(arr: Any) -> Any:
    """``arr.dictionary_encode()`` (nulls stay nulls of the indices: ``"mask"``)."""
    options = _compute.DictionaryEncodeOptions("mask")
    return _compute.call_function("dictionary_encode", [arr], options)


def is_in(values: Any, value_set: Any) -> Any:
    return _compute.call_function("is_in", [values], _compute.SetLookupOptions(value_set))


def index_in(values: Any, value_set: Any) -> Any:
    return _compute.call_function("index_in", [values], _compute.SetLookupOptions(value_set))


def if_else(cond: Any, left: Any, right: Any) -> Any:
    return _compute.call_function("if_else", [cond, left, right])


def equal(left: Any, right: Any) -> Any:
    return _compute.call_function("equal", [left, right])


def binary_length(arr: Any) -> Any:
    return _compute.call_function("binary_length", [arr])


def utf8_trim(arr: Any, characters: str) -> Any:
    return _compute.call_function("utf8_trim", [arr], _compute.TrimOptions(characters))


def utf8_split_whitespace(arr: Any) -> Any:
    return _compute.call_function("utf8_split_whitespace", [arr])


def match_substring_regex(arr: Any, pattern: str) -> Any:
    return _compute.call_function("match_substring_regex", [arr],
                                  _compute.MatchSubstringOptions(pattern))


def replace_substring_regex(arr: Any, pattern: str, replacement: str) -> Any:
    return _compute.call_function("replace_substring_regex", [arr],
                                  _compute.ReplaceSubstringOptions(pattern, replacement))


def take(arr: Any, indices: Any) -> Any:
    """``arr.take(indices)`` (bounds-checked, as pyarrow's)."""
    return _compute.call_function("take", [arr, indices], _compute.TakeOptions(boundscheck=True))
