"""Arrow record batch → :class:`EncodedBatch` under the declared schema.

Why a separate encoding step: every sensitivity in dpcli assumes that a
record's contribution is bounded by the *declared* public domain (docs/design.md
rules 1 and 2). This module is where that becomes true: numeric values are
clamped into ``[lower, upper]``, undeclared categories go to the explicit
``other`` level, out-of-vocabulary tokens are dropped and a row keeps at most
``max_per_row`` distinct tokens. Nothing here widens a domain from the data;
every change is counted in the :class:`~dpcli.data.report.DataReport`.

Missing values follow the column's declared policy (``error`` or
``impute``); rows are never dropped, so the public size n stays the size of
the file (replace-one neighbours). Everything is vectorised with
``pyarrow.compute`` and numpy: no Python loop per row.

Error messages name the file, the column and the data row (1-based, header
not counted) but never quote a value: values are private.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from dpcli.data import arrow_compute as ac  # not pyarrow.compute: 25 ms to import
from dpcli.data.report import ColumnCounts, DataReport
from dpcli.data.schema import (
    BinaryColumn,
    CategoricalColumn,
    Column,
    Label,
    NumericColumn,
    Schema,
    TokensColumn,
)
from dpcli.errors import DataError, UsageError, private

#: codes returned by :func:`lookup_codes` besides the index of a declared value
NOT_DECLARED = -1
NULL = -2


@dataclass
class TokenSets:
    """Per-row sets of vocabulary indices in CSR form.

    Row ``i`` holds ``indices[offsets[i]:offsets[i + 1]]``: distinct,
    increasing vocabulary indices (int32); ``offsets`` is int64 of length n+1.
    """

    offsets: np.ndarray
    indices: np.ndarray

    @property
    def n(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def row(self, i: int) -> np.ndarray:
        return self.indices[self.offsets[i]:self.offsets[i + 1]]


@dataclass
class EncodedBatch:
    """A batch of n records under the schema.

    ``label``: int32 class codes (index in ``schema.label.classes``).
    ``columns``: numeric → float64 clamped into the bounds; categorical →
    int32 codes (``len(categories)`` is ``other``); binary → int8 0/1;
    tokens → :class:`TokenSets`.
    """

    n: int
    label: np.ndarray
    columns: dict[str, np.ndarray | TokenSets]


# --------------------------------------------------------------------- text


_is_string_view = getattr(pa.types, "is_string_view", lambda t: False)  # pyarrow >= 16


def is_text_type(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or _is_string_view(t)


def is_text_like(t: pa.DataType) -> bool:
    """Arrow types whose values can be compared as text with declared levels."""
    if pa.types.is_dictionary(t):
        return is_text_like(t.value_type)
    return (is_text_type(t) or pa.types.is_integer(t) or pa.types.is_boolean(t)
            or pa.types.is_floating(t) or pa.types.is_null(t))


def to_text(arr: pa.Array) -> pa.Array:
    """Values as text, the way declared levels are written in the spec.

    Integers → decimal text (1 → "1"); booleans → "true"/"false"; floats
    with an integral value → integer text (1.0 → "1"), other floats → Arrow's
    shortest round-trip text; NaN counts as missing (null).
    """
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = ac.cast(arr, t.value_type)
        t = arr.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return arr
    if _is_string_view(t):
        return ac.cast(arr, pa.string())
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.string())
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return ac.cast(arr, pa.string())
    if pa.types.is_floating(t):
        x = ac.cast(arr, pa.float64())
        values = x.to_numpy(zero_copy_only=False)
        finite = np.isfinite(values)
        integral = finite & (np.floor(values) == values) & (np.abs(values) < 2.0**63)
        nan = np.isnan(values)
        as_int = pa.array(np.where(integral, values, 0.0).astype(np.int64)).cast(pa.string())
        as_float = ac.cast(x, pa.string())
        text = ac.if_else(pa.array(integral), as_int, as_float)
        return ac.if_else(pa.array(nan), pa.nulls(len(x), pa.string()), text)
    raise TypeError(f"cannot compare Arrow type {t} with declared values")


def lookup_codes(arr: pa.Array, values: pa.Array) -> np.ndarray:
    """int32 codes: index of each value in ``values``, NOT_DECLARED or NULL.

    Dictionary arrays are looked up once per dictionary entry (fast for
    Parquet columns read as dictionaries).
    """
    if pa.types.is_dictionary(arr.type):
        inner = dictionary_codes(arr.dictionary, values)
        idx = ac.fill_null(arr.indices, 0).to_numpy(zero_copy_only=False)
        codes = inner[idx] if len(inner) else np.full(len(arr), NULL, np.int32)
        if arr.null_count:
            codes[_null_mask(arr)] = NULL
        return codes.astype(np.int32, copy=False)
    if (len(arr) > 64 and pa.types.is_integer(arr.type) and not arr.null_count
            and (codes := _integer_codes(arr, values)) is not None):
        return codes
    if len(arr) > 64 and not (is_text_type(arr.type) or pa.types.is_null(arr.type)):
        # numbers and booleans: hash them to their few distinct values and turn only those
        # into text (3× faster on an integer label than text for every row; same codes)
        return lookup_codes(ac.dictionary_encode(arr), values)
    text = to_text(arr)
    vs = values if text.type == values.type else ac.cast(values, text.type)
    found = ac.index_in(text, value_set=vs)
    codes = ac.fill_null(found, NOT_DECLARED).to_numpy(zero_copy_only=False).astype(np.int32)
    if text.null_count:
        codes[_null_mask(text)] = NULL
    if is_text_type(arr.type):
        _integral_text_codes(text, vs, codes)
    return codes


#: text of a float with an integral value as pandas and R write it ("1.0", "-3.00"); its
#: integer part has no leading zero, so "02134" (a code, not a number) never matches "2134"
INTEGRAL_FLOAT_TEXT = r"^-?(0|[1-9][0-9]*)\.0+\z"   # \z: RE2 and Java alike
#: a declared value such text can find (none declared: the rule has nothing to do)
INTEGER_TEXT = re.compile(r"-?(0|[1-9][0-9]*)")


def _declares_integers(values: pa.Array) -> bool:
    """Whether any declared value is an integer's text (remembered per value set, like
    :func:`dictionary_codes`: the encoders pass the same array for every batch)."""
    key = id(values)
    seen = _DECLARES_INTEGERS.get(key)
    if seen is not None and seen[0] is values:
        return seen[1]
    answer = any(v is not None and INTEGER_TEXT.fullmatch(v) for v in values.to_pylist())
    if len(_DECLARES_INTEGERS) > 256:
        _DECLARES_INTEGERS.clear()
    _DECLARES_INTEGERS[key] = (values, answer)
    return answer


_DECLARES_INTEGERS: dict[int, tuple[pa.Array, bool]] = {}


def _integral_text_codes(text: pa.Array, values: pa.Array, codes: np.ndarray) -> None:
    """Give an undeclared text such as "1.0" the code of the declared integer "1", in place.

    Why: a CSV file written from floats holds 0/1 columns as "0.0"/"1.0", which Parquet
    stores as 0.0/1.0 and :func:`to_text` reads as "0"/"1". Without this the same data
    matched every declared value in Parquet and none in CSV, silently (every value
    undeclared). Only the form INTEGRAL_FLOAT_TEXT is read this way (the Spark engine
    applies the same rule), and only where the text itself is not declared."""
    undeclared = np.flatnonzero(codes == NOT_DECLARED)
    if undeclared.size == 0 or not _declares_integers(values):
        return
    subset = ac.take(text, pa.array(undeclared))
    integral = ac.fill_null(ac.match_substring_regex(subset, INTEGRAL_FLOAT_TEXT), False)
    mask = integral.to_numpy(zero_copy_only=False)
    if not mask.any():
        return
    whole = ac.replace_substring_regex(subset, r"\.0+\z", "")
    whole = ac.replace_substring_regex(whole, r"^-0\z", "0")
    found = ac.fill_null(ac.index_in(whole, values), NOT_DECLARED).to_numpy(
        zero_copy_only=False)
    codes[undeclared] = np.where(mask, found, NOT_DECLARED).astype(np.int32)


def _integer_codes(arr: pa.Array, values: pa.Array) -> np.ndarray | None:
    """:func:`lookup_codes` of a null-free integer array over a narrow range, by a table
    from value to code (an integer label or code column: no hashing, no text per batch).

    An integer v matches a declared value c exactly when its text does: c is the
    canonical text of an integer (``str(int(c)) == c``) equal to v. None when the range
    is wide (the caller then hashes)."""
    t = arr.type
    if not (pa.types.is_signed_integer(t) or t.bit_width <= 32):
        return None
    v = arr.to_numpy(zero_copy_only=False)
    low, high = int(v.min()), int(v.max())
    if high - low > 65_536:
        return None
    table = np.full(high - low + 1, NOT_DECLARED, dtype=np.int32)
    for i, text in enumerate(ac.cast(values, pa.string()).to_pylist()):
        try:
            number = int(text) if text is not None else None
        except ValueError:
            continue
        if (number is not None and str(number) == text and low <= number <= high
                and table[number - low] == NOT_DECLARED):  # the first match, as index_in
            table[number - low] = i
    return table.take(v.astype(np.int64, copy=False) - low)


#: the last dictionary looked up per declared value set (id → (values, dictionary, codes))
_DICTIONARY_CODES: dict[int, tuple[pa.Array, pa.Array, np.ndarray]] = {}


def dictionary_codes(dictionary: pa.Array, values: pa.Array) -> np.ndarray:
    """:func:`lookup_codes` of a dictionary array's dictionary, remembered per ``values``.

    Why: a Parquet column chunk has one dictionary, which every batch of its row group
    carries; looking it up costs more than mapping the batch's rows through it (a pyarrow
    call per batch and column). The codes are a function of the two arrays' contents,
    checked with ``equals`` (a few dozen entries), so a stale or racing entry can only
    cost a lookup, never give other codes. The codes are read-only (shared by threads).
    """
    key = id(values)
    seen = _DICTIONARY_CODES.get(key)
    if seen is not None and seen[0] is values and seen[1].equals(dictionary):
        return seen[2]
    codes = lookup_codes(dictionary, values)
    codes.flags.writeable = False
    if len(_DICTIONARY_CODES) > 256:  # bounded: value sets of passes long gone
        _DICTIONARY_CODES.clear()
    _DICTIONARY_CODES[key] = (values, dictionary, codes)
    return codes


def dictionary_fast_codes(arr: pa.Array, values: pa.Array) -> np.ndarray | None:
    """The codes of a dictionary array with no null row whose dictionary holds only
    declared values (a Parquet column's usual case): one lookup per row, nothing else
    to map or count. None otherwise (the caller takes the general path)."""
    if not pa.types.is_dictionary(arr.type) or arr.null_count or len(arr) == 0:
        return None
    inner = dictionary_codes(arr.dictionary, values)
    if len(inner) == 0 or int(inner.min()) < 0:
        return None
    return inner.take(arr.indices.to_numpy(zero_copy_only=False)).astype(np.int32, copy=False)


def _null_mask(arr: pa.Array) -> np.ndarray:
    return ac.is_null(arr).to_numpy(zero_copy_only=False)


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


# ----------------------------------------------------------------- columns


class RowPosition:
    """File + row offset, for error messages that never quote a value."""

    def __init__(self, file: Path | None, row_offset: int) -> None:
        self.file = file
        self.row_offset = row_offset

    def error(self, column: str, i: int, what: str, hint: str = "") -> DataError:
        prefix = f"{self.file}: " if self.file is not None else ""
        row = self.row_offset + i + 1
        return DataError(f"{prefix}column '{column}': {what} "
                         + private(f"in data row {row:,} (header not counted)") + hint,
                         column=column)


_MISSING_HINT = " and its missing-value policy is 'error' (declare missing: impute to fill it)"


def missing_error(where: RowPosition | None, name: str, i: int) -> DataError:
    """The error for a missing value under policy ``error`` (row ``i`` of the batch)."""
    return (where or RowPosition(None, 0)).error(name, i, "missing value", _MISSING_HINT)


def encode_numeric(arr: pa.Array, col: NumericColumn, counts: ColumnCounts,
                   where: RowPosition | None = None) -> np.ndarray:
    """float64 clamped into ``[lower, upper]``; null/NaN → policy."""
    t = arr.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
            or pa.types.is_null(t)):
        raise _type_error(where, col.name, t, "a number")
    fast = _exact_float64(arr) if not arr.null_count and len(arr) else None
    if fast is not None:
        x = fast
    else:
        x = ac.cast(arr, pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64, copy=True)
    if len(x):
        # the usual batch has nothing missing (NaN fails both tests) and nothing to clamp:
        # two reductions instead of the masks, counts and clip below
        low, high = x.min(), x.max()
        if low >= col.lower and high <= col.upper:
            return x
    missing = np.isnan(x)
    if missing.any():
        if col.missing != "impute":
            raise missing_error(where, col.name, _first(missing))
        x[missing] = col.fill_value
        counts.imputed += int(missing.sum())
    below = x < col.lower
    above = x > col.upper
    counts.clamped_below += int(below.sum())
    counts.clamped_above += int(above.sum())
    np.clip(x, col.lower, col.upper, out=x)
    return x


def _exact_float64(arr: pa.Array) -> np.ndarray | None:
    """A fresh float64 copy of a null-free numeric array when numpy converts it exactly
    (floats, integers within ±2^53: Arrow's checked cast would give the same), in one
    conversion instead of a cast and a copy; None otherwise (Arrow's cast decides)."""
    t = arr.type
    if pa.types.is_floating(t):
        return arr.to_numpy(zero_copy_only=False).astype(np.float64, copy=True)
    if not pa.types.is_integer(t):
        return None
    v = arr.to_numpy(zero_copy_only=False)
    if not (pa.types.is_signed_integer(t) or t.bit_width <= 32):
        return None
    if int(v.min()) < -(2**53) or int(v.max()) > 2**53:
        return None
    return v.astype(np.float64)


def encode_categorical(arr: pa.Array, col: CategoricalColumn, counts: ColumnCounts,
                       where: RowPosition | None = None,
                       values: pa.Array | None = None) -> np.ndarray:
    """int32 codes; undeclared → ``other`` (= len(categories)); null → policy."""
    if not is_text_like(arr.type):
        raise _type_error(where, col.name, arr.type, "text, integers or booleans")
    vs = pa.array(col.categories, pa.string()) if values is None else values
    fast = dictionary_fast_codes(arr, vs)
    if fast is not None:  # no null, nothing undeclared: nothing to impute, map or count
        return fast
    codes = lookup_codes(arr, vs)
    other = len(col.categories)
    undeclared = codes == NOT_DECLARED
    null = codes == NULL
    if null.any():
        if col.missing != "impute":
            raise missing_error(where, col.name, _first(null))
        counts.imputed += int(null.sum())
    counts.mapped_to_other += int(undeclared.sum())
    codes[undeclared | null] = other
    return codes


def encode_binary(arr: pa.Array, col: BinaryColumn, counts: ColumnCounts,
                  where: RowPosition | None = None) -> np.ndarray:
    """int8 0/1 (``values[0]`` → 0); undeclared → 0 (counted); null → policy."""
    if not is_text_like(arr.type):
        raise _type_error(where, col.name, arr.type, "text, integers or booleans")
    codes = lookup_codes(arr, pa.array(col.values, pa.string()))
    undeclared = codes == NOT_DECLARED
    null = codes == NULL
    if null.any():
        if col.missing != "impute":
            raise missing_error(where, col.name, _first(null))
        counts.imputed += int(null.sum())
        codes[null] = col.fill_code
    counts.mapped_to_other += int(undeclared.sum())
    codes[undeclared] = 0
    return codes.astype(np.int8)


def encode_label(arr: pa.Array, label: Label, where: RowPosition | None = None,
                 values: pa.Array | None = None) -> np.ndarray:
    """int32 class codes; a null or undeclared label is a :class:`DataError`."""
    if not is_text_like(arr.type):
        raise _type_error(where, label.column, arr.type, "text, integers or booleans")
    vs = pa.array(label.classes, pa.string()) if values is None else values
    codes = lookup_codes(arr, vs)
    bad = codes < 0
    if bad.any():
        i = _first(bad)
        w = where or RowPosition(None, 0)
        if codes[i] == NULL:
            raise w.error(label.column, i, "missing label",
                          " (the label can not be imputed)")
        raise w.error(label.column, i, "label value outside the declared classes",
                      f" (declared: {list(label.classes)}){_stored_hint(arr.type, label)}")
    return codes


def _stored_hint(t: pa.DataType, label: Label) -> str:
    """A hint when the label is stored as numbers (or booleans) and no declared class could
    be one: a type mismatch, which the value message alone does not name. Data-independent
    (the column's type and the spec)."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_integer(t) and not any(c.lstrip("-").isdigit() for c in label.classes):
        return (f"; the column is stored as {t}, and no declared class is an integer: "
                "declare the classes as the file stores them (e.g. [0, 1]), or convert "
                "the column")
    if pa.types.is_boolean(t) and not {"true", "false"} & {c.lower() for c in label.classes}:
        return (f"; the column is stored as {t}: declare the classes [false, true], or "
                "convert the column")
    return ""


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser on uint64 arrays (wrapping arithmetic)."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def encode_tokens(arr: pa.Array, col: TokensColumn, counts: ColumnCounts,
                  where: RowPosition | None = None, *, seed: int = 0,
                  vocabulary: pa.Array | None = None,
                  first_row: int | None = None) -> TokenSets:
    """Per-row sets of in-vocabulary token indices, capped at ``max_per_row``.

    ``arr`` is list<string> or a string of whitespace-separated tokens. Empty
    tokens (from repeated whitespace) are ignored; other out-of-vocabulary
    tokens (and null list elements) are dropped and counted. A null row
    follows the missing policy (impute → no tokens).

    The cap keeps, for each row with more than r distinct in-vocabulary
    tokens, the r tokens with the smallest keys SplitMix64(SplitMix64(seed +
    global row) + token index): a uniformly random r-subset per row whose
    choice depends only on (seed, row position, the row's own tokens). So the
    choice is reproducible under a seed, independent of how the file is split
    into batches, and replacing one record changes no other record's
    choice — the coupling behind the 2r sensitivity of token counts.
    ``first_row`` is the position of ``arr[0]`` in the whole pass (default:
    ``where.row_offset``, else 0).
    """
    n = len(arr)
    t = arr.type
    if pa.types.is_dictionary(t) or is_text_type(t):
        arr = ac.utf8_split_whitespace(to_text(arr))
        t = arr.type
    elif pa.types.is_null(t):
        arr = pa.nulls(n, pa.list_(pa.string()))
        t = arr.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)) or not is_text_like(t.value_type):
        raise _type_error(where, col.name, t, "a list of strings or a string")
    row_null = _null_mask(arr) if arr.null_count else np.zeros(n, dtype=bool)
    if row_null.any():
        if col.missing != "impute":
            raise missing_error(where, col.name, _first(row_null))
        counts.imputed += int(row_null.sum())
    offsets = arr.offsets.to_numpy().astype(np.int64)
    start, stop = int(offsets[0]), int(offsets[-1])
    values = arr.values.slice(start, stop - start)
    raw_len = np.diff(offsets)
    parent = np.repeat(np.arange(n, dtype=np.int64), raw_len)
    vocab = pa.array(col.vocabulary, pa.string()) if vocabulary is None else vocabulary
    if not pa.types.is_dictionary(values.type):
        values = to_text(values)
    codes = lookup_codes(values, vocab)
    keep = ~row_null[parent] if row_null.any() else np.ones(len(parent), dtype=bool)
    if len(values) and not pa.types.is_dictionary(values.type):
        # "" is never a vocabulary word; splitting "a  b" yields one: not a token
        empty = ac.fill_null(ac.equal(ac.binary_length(values), 0), False)
        keep &= ~empty.to_numpy(zero_copy_only=False)
    oov = keep & (codes < 0)
    counts.tokens_out_of_vocabulary += int(oov.sum())
    keep &= codes >= 0
    v = max(len(col.vocabulary), 1)
    key = np.sort(parent[keep] * v + codes[keep].astype(np.int64))
    if len(key) > 1:  # distinct (row, token) pairs; np.unique is far slower than sort + mask
        key = key[np.concatenate(([True], key[1:] != key[:-1]))]
    row = key // v
    idx = (key % v).astype(np.int32)
    r = col.max_per_row
    if r is not None and len(row):
        per_row = np.bincount(row, minlength=n)
        capped = per_row > r
        if capped.any():
            counts.rows_token_capped += int(capped.sum())
            counts.token_cap = r
            sel = np.flatnonzero(capped[row])  # pairs of capped rows, sorted by row
            local = row[sel].astype(np.uint64)
            if first_row is None:
                first_row = where.row_offset if where else 0
            global_row = local + np.uint64(first_row)
            h = _splitmix64(_splitmix64(global_row + np.uint64(seed)) + idx[sel].astype(np.uint64))
            # sort by (row, top 32 bits of the key); a batch has < 2**32 rows. (A 32-bit
            # tie within a row, probability ~1e-7, is broken by token index.)
            order = np.argsort((local << np.uint64(32)) | (h >> np.uint64(32)), kind="stable")
            in_sel = np.where(capped, per_row, 0)
            group_start = np.cumsum(in_sel) - in_sel
            rank = np.arange(len(order)) - group_start[row[sel]]  # row[sel] is sorted
            drop = sel[order[rank >= r]]
            mask = np.ones(len(row), dtype=bool)
            mask[drop] = False
            row, idx = row[mask], idx[mask]
    out_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=n), out=out_offsets[1:])
    return TokenSets(offsets=out_offsets, indices=idx)


def _type_error(where: RowPosition | None, name: str, t: pa.DataType, expected: str) -> DataError:
    prefix = f"{where.file}: " if where is not None and where.file is not None else ""
    return DataError(f"{prefix}column '{name}' has Arrow type {t}, expected {expected}",
                     column=name)


# ------------------------------------------------------------------ batches


@dataclass(frozen=True)
class BatchPlace:
    """Where a batch sits: its file, its first row's index in that file (for error
    messages) and in the whole pass (for the per-row token cap's keys)."""

    file: Path | None
    row_in_file: int
    row_in_pass: int


class BatchEncoder:
    """Encodes successive record batches of one pass; counts into a DataReport.

    ``rng`` draws one 64-bit seed per tokens column (for the per-row cap), so
    the pass is reproducible under a seeded generator.
    """

    def __init__(self, schema: Schema, columns: Sequence[str], *, report: DataReport,
                 rng: np.random.Generator, file: Path | None = None,
                 with_label: bool = True) -> None:
        self.schema = schema
        self.with_label = with_label
        self.columns: tuple[Column, ...] = tuple(_declared(schema, c) for c in
                                                 dict.fromkeys(columns)
                                                 if c != schema.label.column)
        self.report = report
        self.file = file
        self._rows = 0
        self._file_start = 0
        self._classes = pa.array(schema.label.classes, pa.string())
        self._values: dict[str, pa.Array] = {}
        self._seeds: dict[str, int] = {}
        for col in self.columns:
            report.column(col.name, col.kind)
            if isinstance(col, CategoricalColumn):
                self._values[col.name] = pa.array(col.categories, pa.string())
            elif isinstance(col, TokensColumn):
                self._values[col.name] = pa.array(col.vocabulary, pa.string())
                self._seeds[col.name] = int(rng.integers(0, 2**63, dtype=np.int64))

    def start_file(self, file: Path) -> None:
        """The next batches come from ``file`` (of a multi-file source): error
        messages name it and number rows from its start. The token cap keeps
        numbering rows across the whole pass."""
        self.file = file
        self._file_start = self._rows

    def encode(self, batch: pa.RecordBatch | pa.Table) -> EncodedBatch:
        """Encode the next batch (rows are numbered continuing the previous batch)."""
        return self.encode_at(batch, self.place(batch.num_rows), self.report)

    def place(self, n: int) -> BatchPlace:
        """Number the next ``n`` rows (in file order): where a batch of them sits.

        Called in order, one batch after another; :meth:`encode_at` may then run in
        any thread, in any order, since it reads only this place and the encoder's
        fixed state (declared values, token seeds)."""
        place = BatchPlace(self.file, self._rows - self._file_start, self._rows)
        self._rows += n
        return place

    def encode_at(self, batch: pa.RecordBatch | pa.Table, place: BatchPlace,
                  report: DataReport) -> EncodedBatch:
        """Encode ``batch`` that sits at ``place``, counting clamps and mappings into
        ``report`` (one per batch when batches are encoded in parallel; their sum is the
        pass's report). Thread-safe: nothing of the encoder changes."""
        where = RowPosition(place.file, place.row_in_file)
        n = batch.num_rows
        if self.with_label:
            label = encode_label(_column(batch, self.schema.label.column, where),
                                 self.schema.label, where, self._classes)
        else:  # prediction on unlabelled rows: no class code
            label = np.full(n, -1, dtype=np.int32)
        out: dict[str, np.ndarray | TokenSets] = {}
        for col in self.columns:
            arr = _column(batch, col.name, where)
            counts = report.column(col.name, col.kind)
            if isinstance(col, NumericColumn):
                out[col.name] = encode_numeric(arr, col, counts, where)
            elif isinstance(col, CategoricalColumn):
                out[col.name] = encode_categorical(arr, col, counts, where,
                                                   self._values[col.name])
            elif isinstance(col, BinaryColumn):
                out[col.name] = encode_binary(arr, col, counts, where)
            else:
                out[col.name] = encode_tokens(arr, col, counts, where,
                                              seed=self._seeds[col.name],
                                              vocabulary=self._values[col.name],
                                              first_row=place.row_in_pass)
        report.rows += n
        return EncodedBatch(n=n, label=label, columns=out)


def _declared(schema: Schema, name: str) -> Column:
    if not schema.has(name):
        raise UsageError(f"column '{name}' is not declared in the schema "
                         f"(declared: {', '.join(schema.names)})")
    return schema.column(name)


def _column(batch: pa.RecordBatch | pa.Table, name: str, where: RowPosition) -> pa.Array:
    try:
        arr = batch.column(name)
    except KeyError:
        prefix = f"{where.file}: " if where.file is not None else ""
        raise DataError(f"{prefix}column '{name}' is missing", column=name) from None
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    return arr
