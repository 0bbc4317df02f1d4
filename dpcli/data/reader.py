"""Reading CSV and Parquet files in record batches under the declared schema.

Why this shape: files can be far larger than memory, so values are only
ever streamed in batches of ``batch_rows`` rows and only the columns a run
needs (plus the label) are read. And docs/design.md rule 5 (charge before
release) splits reading into three steps that a command runs in order:

1. :meth:`DataSource.check_structure` reads *no values*: the file exists and
   opens, the needed columns are present and their Arrow types can hold the
   declared column types (Parquet footer / CSV header only).
2. :meth:`DataSource.count_records` is what a spending run reads before its
   charge: the record count n (a Parquet footer's; a CSV file is parsed once
   for its record structure, converting no value). A broken CSV record stops
   it, and then the full check below names the first problem in file order.
   :meth:`DataSource.check_values` is that full validation pass: broken CSV
   rows, unparseable numbers, missing or undeclared labels, missing values in
   columns whose policy is ``error``. A spending run meets these problems in
   its statistics pass instead (one pass where there were two) and, before
   releasing anything, runs :meth:`DataSource.recheck` so that it stops with
   exactly the check's message and is recorded as aborted (docs/design.md,
   rule 5 "aborted runs"); ``inspect`` and the Spark engine run the check
   before the charge as before.
3. :meth:`DataSource.batches` streams encoded batches
   (:mod:`dpcli.data.encode`) for the statistics engine, counting clamps and
   mappings into :attr:`DataSource.report` (custodian-only, stderr);
   :meth:`DataSource.map_encoded` does the same with the encoding (and a
   function of each batch) on every core, results in file order.

Error messages name the file, the column and a row number but never quote a
value, and never pass on a parser message that could quote one: values are
private.

Formats (by suffix, case-insensitive): ``.csv``, ``.csv.gz``, ``.tsv``,
``.tsv.gz`` → CSV (tab-separated for .tsv); ``.parquet``, ``.pq`` or a
directory of such files (searched recursively, names starting with ``.`` or
``_`` ignored, read in sorted path order) → Parquet. Hive-style partition
columns encoded only in directory names are not read.

CSV conventions: every CSV column is read with the type the schema declares
(numeric → float64, everything else → string); tokens are one field of
whitespace-separated tokens (an empty field, or a null marker, is a row
with no tokens — never a missing value); quoted fields may contain newlines. Missing
values are empty fields and pyarrow's usual null markers ("NA", "NaN",
"null", …) — except any marker that is itself a declared category, binary
value or class, which then stays a value.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from dpcli.data import arrow_compute as ac  # not pyarrow.compute: 25 ms to import
from dpcli.data.encode import (
    BatchEncoder,
    BatchPlace,
    EncodedBatch,
    RowPosition,
    encode_label,
    is_text_like,
    is_text_type,
    missing_error,
)
from dpcli.data.report import DataReport
from dpcli.data.schema import (
    BinaryColumn,
    CategoricalColumn,
    Column,
    NumericColumn,
    Schema,
    TokensColumn,
)
from dpcli.errors import DataError, NoInput, UsageError, private

CSV_SUFFIXES: dict[str, str] = {".csv": ",", ".csv.gz": ",", ".tsv": "\t", ".tsv.gz": "\t"}
PARQUET_SUFFIXES: tuple[str, ...] = (".parquet", ".pq")
_CSV_BLOCK_BYTES = 4 << 20
T = TypeVar("T")
_MAX_HEADER_BYTES = 16 << 20


#: names that mean "standard input" (``-``, and the device files a shell's ``<(...)``
#: or ``/dev/stdin`` hand over): refused, see :func:`refuse_stdin`
_STDIN = re.compile(r"^(-|/dev/stdin|/dev/fd/\d+|/proc/self/fd/\d+)$")


def refuse_stdin(path: Path | str) -> None:
    """UsageError when ``path`` is standard input or a pipe (docs/exit-codes.md).

    Why not stream it: a run reads its input more than once (the pre-charge
    validation pass, then the statistics pass; a seeded run or ``--reuse`` a
    third time for the input's fingerprint), and the ledger records a keyed
    digest of the file so that the release can be traced to its input. A pipe
    can be read once; spooling it to a temporary file would leave private rows
    on disk, outside the custodian's chosen place, and ``--reuse`` could never
    recognise a stream. So dpcli asks for a file instead.
    """
    if _STDIN.match(str(path)):
        raise UsageError(
            f"{path}: reading standard input is not supported because a run reads its input "
            "more than once (a validation pass before the charge, then the release) and "
            "records the file's fingerprint in the ledger; save the stream to a file first "
            "(e.g. `... > data.csv`) and pass that file")


def detect_format(path: Path) -> str:
    """``"csv"`` or ``"parquet"`` from the suffix (a directory is Parquet)."""
    refuse_stdin(path)
    name = path.name.lower()
    if path.is_dir() or name.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if any(name.endswith(s) for s in CSV_SUFFIXES):
        return "csv"
    raise DataError(
        f"{path}: unknown file format; dpcli reads CSV ({', '.join(CSV_SUFFIXES)}) and "
        f"Parquet ({', '.join(PARQUET_SUFFIXES)} or a directory of Parquet files)")


def _delimiter(path: Path) -> str:
    name = path.name.lower()
    return next(d for s, d in CSV_SUFFIXES.items() if name.endswith(s))


# ------------------------------------------------------------------ reports


@dataclass(frozen=True)
class TypeMismatch:
    """A needed column whose stored Arrow type can not hold its declared type."""

    column: str
    expected: str
    found: str
    file: Path | None = None


@dataclass
class StructureReport:
    """What :meth:`DataSource.check_structure` found, without reading any value."""

    path: Path
    format: str
    readable: bool = True
    error: str | None = None
    needed: tuple[str, ...] = ()
    present: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()
    mismatches: tuple[TypeMismatch, ...] = ()
    duplicates: tuple[str, ...] = ()
    num_rows: int | None = None
    files: tuple[Path, ...] = ()
    missing_in: dict[str, Path] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return (self.readable and not self.missing and not self.mismatches
                and not self.duplicates)

    def problems(self) -> list[str]:
        """One sentence per problem (file named by the caller)."""
        if not self.readable:
            return [self.error or "cannot be read"]
        out: list[str] = []
        if self.missing:
            cols = ", ".join(f"'{c}'" for c in self.missing)
            where = [f"'{c}' in {self.missing_in[c]}" for c in self.missing
                     if c in self.missing_in and self.missing_in[c] != self.path]
            extra = f" ({'; '.join(where)})" if where else ""
            out.append(f"missing column(s) {cols}{extra}" + self._separator_hint())
        for m in self.mismatches:
            in_file = f" in {m.file}" if m.file is not None and m.file != self.path else ""
            out.append(f"column '{m.column}' is stored as {m.found}{in_file}, "
                       f"expected {m.expected}")
        if self.duplicates:
            out.append("column(s) " + ", ".join(f"'{c}'" for c in self.duplicates)
                       + " appear more than once in the header")
        return out

    def _separator_hint(self) -> str:
        """A CSV header read as one column that holds another separator (';', a tab, '|'):
        the file was written with it, and every needed column looks missing."""
        if self.format != "csv" or self.present or len(self.extra) != 1:
            return ""
        for sep, name, code in ((";", "';'", "';'"), ("\t", "a tab", "'\\t'"),
                                ("|", "'|'", "'|'")):
            if sep in self.extra[0]:
                return (f"; its header is one column holding {name}: the file seems to use "
                        f"{name} as its separator, and dpcli reads comma-separated CSV "
                        f"(convert it, e.g. with pandas: read_csv(path, sep={code}).to_csv("
                        "new_path, index=False), or write Parquet)")
        return ""

    def lines(self) -> list[str]:
        """Human-readable summary (no values: only names and types)."""
        out = [f"{self.path}: {self.format}"
               + (f", {len(self.files)} files" if len(self.files) > 1 else "")
               + (f", {self.num_rows:,} rows" if self.num_rows is not None else "")]
        if not self.readable:
            out.append(f"  not readable: {self.error}")
            return out
        out.append("  needed columns present: " + (", ".join(self.present) or "none"))
        if self.missing:
            out.append("  needed columns MISSING: " + ", ".join(self.missing))
        if self.extra:
            out.append("  other columns (ignored): " + ", ".join(self.extra))
        out += [f"  problem: {p}" for p in self.problems() if not p.startswith("missing")]
        return out

    def raise_for_problems(self) -> None:
        """Raise a :class:`DataError` naming the file and the columns, if not ok."""
        if not self.ok:
            raise DataError(f"{self.path}: " + "; ".join(self.problems()))


# ------------------------------------------------------------ type checks


def _expected(col: Column | None) -> str:
    if isinstance(col, NumericColumn):
        return "a number (integer, floating point or decimal)"
    if isinstance(col, TokensColumn):
        return "list<string> or a string of whitespace-separated tokens"
    return "text, integers or booleans"


def _compatible(col: Column | None, t: pa.DataType) -> bool:
    """Can Arrow type ``t`` hold the declared type (``None`` = the label)?"""
    if pa.types.is_null(t):
        return True
    if isinstance(col, NumericColumn):
        return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
    if isinstance(col, TokensColumn):
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            vt = t.value_type
            if pa.types.is_dictionary(vt):
                vt = vt.value_type
            return is_text_type(vt)
        if pa.types.is_dictionary(t):
            t = t.value_type
        return is_text_type(t)
    return is_text_like(t)


def _missing_mask(arr: pa.Array) -> np.ndarray:
    """Null, or NaN in a floating-point column: both are missing values."""
    mask = ac.is_null(arr).to_numpy(zero_copy_only=False)
    if pa.types.is_floating(arr.type):
        mask |= ac.fill_null(ac.is_nan(arr), False).to_numpy(zero_copy_only=False)
    return mask


# --------------------------------------------------------------- the source


class DataSource:
    """One CSV/Parquet file (or Parquet directory) read under a :class:`Schema`.

    :attr:`report` holds the counters of the latest :meth:`batches` pass
    (reset when a pass starts). It is private, unnoised information for the
    custodian's stderr only — never for outputs.
    """

    engine = "local"  # the statistics engine that reads this kind of source

    def __init__(self, path: Path | str, schema: Schema, *, batch_rows: int = 65_536,
                 label: bool = True) -> None:
        if batch_rows < 1:
            raise UsageError(f"batch_rows must be at least 1, got {batch_rows}")
        self.path = Path(path)
        self.schema = schema
        self.label = label  # False: the file need not hold the label (prediction)
        self.batch_rows = int(batch_rows)
        self.format = detect_format(self.path)
        self.report = DataReport(file=self.path)
        self._checked_rows: int | None = None
        self._counted: tuple[str, ...] | None = None  # the columns count_records was asked for

    def __repr__(self) -> str:
        return f"DataSource({str(self.path)!r}, format={self.format!r})"

    # ---------------------------------------------------------- columns

    def needed_columns(self, columns: Sequence[str]) -> tuple[str, ...]:
        """The label (unless the source was opened with ``label=False``), then
        ``columns`` deduplicated; undeclared → UsageError."""
        label = self.schema.label.column
        out = [label] if self.label else []
        for name in columns:
            if name == label or name in out:
                continue
            if not self.schema.has(name):
                raise UsageError(f"column '{name}' is not declared in the schema "
                                 f"(declared: {', '.join(self.schema.names)})")
            out.append(name)
        return tuple(out)

    def _declared(self, name: str) -> Column | None:
        return None if name == self.schema.label.column else self.schema.column(name)

    # -------------------------------------------------------- structure

    def parquet_files(self) -> list[Path]:
        """The Parquet file(s) of this source, in reading order."""
        return parquet_files(self.path)

    def check_structure(self, columns: Sequence[str], *,
                        raise_errors: bool = True) -> StructureReport:
        """Check file, format, needed columns and their types, reading no values.

        With ``raise_errors`` (the default) any problem raises a
        :class:`DataError` naming the file and the columns; otherwise the
        problems are only reported (``dpcli inspect``).
        """
        needed = self.needed_columns(columns)
        rep = StructureReport(path=self.path, format=self.format, needed=needed)
        try:
            if self.format == "csv":
                self._structure_csv(rep)
            else:
                self._structure_parquet(rep)
        except NoInput:
            raise  # no file, no structure to report: exit 66 (EX_NOINPUT), not bad data
        except DataError as exc:
            rep.readable = False
            rep.error = str(exc).removeprefix(f"{self.path}: ")
        if raise_errors:
            rep.raise_for_problems()
        return rep

    def _structure_csv(self, rep: StructureReport) -> None:
        names = self._csv_header()
        rep.files = (self.path,)
        rep.present = tuple(c for c in rep.needed if c in names)
        rep.missing = tuple(c for c in rep.needed if c not in names)
        rep.extra = tuple(dict.fromkeys(c for c in names if c not in rep.needed))
        rep.duplicates = tuple(c for c in rep.needed if names.count(c) > 1)

    def _structure_parquet(self, rep: StructureReport) -> None:
        files = self._check_readable_parquet()
        rep.files = tuple(files)
        schemas: list[tuple[Path | str, pa.Schema]] = []
        total = 0
        for f in files:
            with _open_parquet(f) as pf:
                total += pf.metadata.num_rows
                schemas.append((f, pf.schema_arrow))
        parquet_structure(rep, schemas, self._declared)
        rep.num_rows = total

    def _check_readable_parquet(self) -> list[Path]:
        if not self.path.exists():
            raise NoInput(f"{self.path}: file not found")
        files = self.parquet_files()
        if not files:
            raise DataError(f"{self.path}: directory holds no Parquet files "
                            f"({', '.join(PARQUET_SUFFIXES)})")
        return files

    def num_rows_hint(self) -> int | None:
        """Parquet: the row count in the footers; CSV: the count of :meth:`count_records`
        or :meth:`check_values` (n, public), else None (unknown without a pass). For
        progress bars."""
        if self.format != "parquet":
            return self._checked_rows
        try:
            return sum(_footer_rows(f) for f in self._check_readable_parquet())
        except DataError:
            return None

    # ----------------------------------------------------------- values

    def count_records(self, columns: Sequence[str]) -> int:
        """The number of records n (public under replace-one), read before the charge.

        Parquet: the footers' row counts (no value is read). CSV: one parse of the
        file's record structure on every core, converting one column as raw bytes
        (quoted line breaks make counting lines wrong; pyarrow's tokenizer is the
        reader the statistics pass uses, so both agree on every record). The values
        are checked by the statistics pass after the charge (see the module
        docstring). A problem met here (a broken record) is reported as
        :meth:`check_values` reports it: the first one in file order.
        """
        self.check_structure(columns)
        needed = self.needed_columns(columns)
        self._counted = tuple(columns)
        if self.format == "parquet":
            n = sum(_footer_rows(f) for f in self._check_readable_parquet())
        else:
            try:
                n = self._count_csv(needed)
            except DataError as exc:
                self.check_values(columns)  # raises the check's own (first) problem
                raise exc from None  # the full check passed: the counting parse's own error
        self._checked_rows = n
        return n

    def recheck(self) -> None:
        """The full pre-charge check (:meth:`check_values`) of the columns
        :meth:`count_records` counted: raises its DataError (the first problem in file
        order, the message the check gives before a charge) or returns when it finds none.

        Why: a spending run meets a bad value in its statistics pass, after its
        reservation. Before releasing anything it asks this: a problem the check would
        have reported for free ends the run as aborted with exactly that message, and
        nothing computed by the partial pass is shown (docs/design.md, rule 5).
        """
        if self._counted is None:
            raise RuntimeError("recheck() before count_records()")
        self.check_values(self._counted)

    def _count_csv(self, needed: tuple[str, ...]) -> int:
        """Records of the CSV file, parsed with the statistics pass's parse options."""
        name = needed[0] if needed else self._csv_header()[0]
        rows = 0
        try:
            with self._one_column(name, pa.binary(), threads=True) as reader:
                for batch in reader:
                    rows += batch.num_rows
        except pa.ArrowInvalid as exc:
            raise self._csv_error(str(exc), self._csv_header(), [], rows) from None
        except OSError as exc:
            raise DataError(f"{self.path}: cannot read file ({_os_reason(exc)})") from None
        return rows

    def check_values(self, columns: Sequence[str], *,
                     progress: Callable[[int], None] | None = None) -> int:
        """Pre-charge validation pass over the needed columns (see module docstring).

        Returns the number of records (public under replace-one neighbours).
        ``progress(rows)`` is called as rows are checked (``dpcli inspect --progress``).

        CSV: a full streaming parse of the needed columns with their declared
        types. Parquet: the label column is streamed; other columns whose
        missing policy is ``error`` are checked from the footer's null counts,
        and read only where statistics are absent, a null count is non-zero
        (to find the row), the column is floating point (NaN is missing but
        not counted as null in Parquet statistics) or nested (tokens lists).
        Raises :class:`DataError` naming file, column and data row (never a value).
        """
        self.check_structure(columns)
        needed = self.needed_columns(columns)
        if self.format == "csv":
            try:
                self._checked_rows = self._check_csv_values(needed, threads=True,
                                                            progress=progress)
            except DataError:
                # the parallel parser does not know row numbers: find the first problem in order
                self._checked_rows = self._check_csv_values(needed, threads=False)
            return self._checked_rows
        return self._check_parquet_values(needed, progress)

    def _check_csv_values(self, needed: tuple[str, ...], *, threads: bool,
                          progress: Callable[[int], None] | None = None) -> int:
        strict = [c for c in needed[1:] if self.schema.column(c).missing == "error"]
        rows = 0
        classes = pa.array(self.schema.label.classes, pa.string())
        with closing(self._csv_batches(needed, threads=threads)) as batches:
            for batch in batches:  # a problem stops the pass: its reader closes here
                where = RowPosition(self.path, rows)
                encode_label(batch.column(0), self.schema.label, where, classes)
                for name in strict:
                    _raise_missing(batch.column(name), name, where)
                rows += batch.num_rows
                if progress is not None:
                    progress(batch.num_rows)
        return rows

    def _check_parquet_values(self, needed: tuple[str, ...],
                              progress: Callable[[int], None] | None = None) -> int:
        classes = pa.array(self.schema.label.classes, pa.string())
        strict = [c for c in needed[1:] if self.schema.column(c).missing == "error"]
        total = 0
        for f in self._check_readable_parquet():  # rows are numbered within each file
            with _open_parquet(f) as pf:
                total += self._check_parquet_file(pf, f, strict, classes, progress)
        return total

    def _check_parquet_file(self, pf: pq.ParquetFile, f: Path, strict: list[str],
                            classes: pa.Array,
                            progress: Callable[[int], None] | None = None) -> int:
        """:meth:`_check_parquet_values` of one file; its number of rows."""
        label = self.schema.label
        rows = 0
        for batch in _iter_parquet(pf, f, [label.column], self.batch_rows):
            encode_label(batch.column(0), label, RowPosition(f, rows), classes)
            rows += batch.num_rows
            if progress is not None:   # the label pass reads every row; the rest are reread
                progress(batch.num_rows)
        total = rows
        leaf = {pf.metadata.schema.column(j).path: j
                for j in range(pf.metadata.num_columns)}
        to_read = []
        for name in strict:
            t = pf.schema_arrow.field(name).type
            j = leaf.get(name)
            if (j is None or pa.types.is_floating(t) or pa.types.is_nested(t)
                    or pa.types.is_dictionary(t)):
                to_read.append(name)
                continue
            start = 0
            for g in range(pf.metadata.num_row_groups):
                rg = pf.metadata.row_group(g)
                stats = rg.column(j).statistics
                if stats is None or not stats.has_null_count or stats.null_count > 0:
                    table = _read_row_group(pf, f, g, name)
                    _raise_missing(table.column(0), name, RowPosition(f, start))
                start += rg.num_rows
        if to_read:
            rows = 0
            for batch in _iter_parquet(pf, f, to_read, self.batch_rows):
                for name in to_read:
                    _raise_missing(batch.column(name), name, RowPosition(f, rows))
                rows += batch.num_rows
        return total

    # ---------------------------------------------------------- batches

    def batches(self, columns: Sequence[str], *,
                rng: np.random.Generator) -> Iterator[EncodedBatch]:
        """Encoded batches of at most ``batch_rows`` rows of the needed columns + label.

        Starts a fresh :attr:`report` and counts into it. ``rng`` seeds the
        per-row token cap (reproducible under a seeded generator).
        """
        for _raw, encoded in self._encoded(columns, rng=rng, all_columns=False):
            yield encoded

    def raw_batches(self, columns: Sequence[str], *, rng: np.random.Generator
                    ) -> Iterator[tuple[pa.RecordBatch, EncodedBatch]]:
        """The needed columns (and the label) as read, with their encoding beside them: for a
        release of raw values (``schema suggest``), without reading the file's other columns."""
        yield from self._encoded(columns, rng=rng, all_columns=False)

    def prediction_batches(self, columns: Sequence[str], *, rng: np.random.Generator
                           ) -> Iterator[tuple[pa.RecordBatch, EncodedBatch]]:
        """Every column of the file as read, with ``columns`` encoded beside it.

        For ``predict``: the raw batch is passed through to the output
        (undeclared CSV columns are read as text, so nothing is re-typed by
        guesswork), the declared feature columns are encoded under the schema.
        The label is encoded only if this source requires it.
        """
        yield from self._encoded(columns, rng=rng, all_columns=True)

    def _encoded(self, columns: Sequence[str], *, rng: np.random.Generator,
                 all_columns: bool) -> Iterator[tuple[pa.RecordBatch, EncodedBatch]]:
        needed = self.needed_columns(columns)
        self.check_structure(columns)
        self.report = DataReport(file=self.path)
        encoder = BatchEncoder(self.schema, needed, report=self.report, rng=rng,
                               file=self.path, with_label=self.label)
        source: Iterator[pa.RecordBatch]
        if self.format == "csv":
            source = self._csv_batches(self._csv_header() if all_columns else needed)
        elif all_columns:
            source = self._parquet_all_columns(encoder)
        else:
            source = self._parquet_batches(needed, encoder)
        try:
            for rb in source:
                for start in range(0, rb.num_rows, self.batch_rows):
                    raw = rb.slice(start, self.batch_rows)
                    yield raw, encoder.encode(raw)
        finally:
            _release_arrow_memory()

    def map_encoded(self, columns: Sequence[str], fn: Callable[[EncodedBatch], T], *,
                    rng: np.random.Generator,
                    workers: int | None = None) -> Generator[T, None, None]:
        """``fn(batch)`` for every encoded batch of :meth:`batches`, in file order, with the
        encoding and ``fn`` run by ``workers`` threads (default: every usable core,
        :func:`~dpcli.data.prefetch.usable_cores`).

        Why: encoding (pyarrow kernels) and folding a batch into statistics (numpy) are
        most of a pass and release the GIL; one thread would leave the other cores idle.
        The raw batches are still read in order by one reader (pyarrow decodes a Parquet
        row group, or parses a CSV block, on its own threads), each batch's rows are
        numbered before it is handed out, and each batch counts its clamps into its own
        report, added to :attr:`report` in file order: the same results, the same
        report, the same token-cap draws and the same first error as :meth:`batches`.
        """
        from dpcli.data.prefetch import configure_arrow, ordered_map, usable_cores

        if type(self).batches is not _BATCHES:
            # a source whose batches() is replaced (a subclass, a wrapper that re-cuts or
            # counts them) is read through it, in this thread: its batches are the pass
            for batch in self.batches(columns, rng=rng):
                yield fn(batch)
            return
        threads = usable_cores() if workers is None else max(int(workers), 1)
        configure_arrow(threads)
        needed = self.needed_columns(columns)
        self.check_structure(columns)
        report = self.report = DataReport(file=self.path)
        encoder = BatchEncoder(self.schema, needed, report=report, rng=rng,
                               file=self.path, with_label=self.label)
        source: Iterator[pa.RecordBatch]
        if self.format == "csv":
            source = self._csv_batches(needed)
        else:
            source = self._parquet_batches(needed, encoder)

        def placed() -> Iterator[tuple[pa.RecordBatch, BatchPlace]]:
            for rb in source:
                for start in range(0, rb.num_rows, self.batch_rows):
                    raw = rb.slice(start, self.batch_rows)
                    yield raw, encoder.place(raw.num_rows)

        def work(item: tuple[pa.RecordBatch, BatchPlace]) -> tuple[T, DataReport]:
            part = DataReport()
            return fn(encoder.encode_at(item[0], item[1], part)), part

        try:
            with closing(ordered_map(placed(), work, threads)) as results:
                for result, part in results:
                    report.merge(part)
                    yield result
        finally:
            _release_arrow_memory()

    def _parquet_all_columns(self, encoder: BatchEncoder) -> Iterator[pa.RecordBatch]:
        for f in self._check_readable_parquet():
            encoder.start_file(f)
            with _open_parquet(f) as pf:
                yield from _iter_parquet(pf, f, pf.schema_arrow.names, self.batch_rows)

    def _parquet_batches(self, needed: tuple[str, ...],
                         encoder: BatchEncoder) -> Iterator[pa.RecordBatch]:
        for f in self._check_readable_parquet():
            encoder.start_file(f)  # error messages name the file and its own row numbers
            with _open_parquet(f) as pf:
                schema = pf.schema_arrow
            as_dict = [c for c in needed
                       if not isinstance(self._declared(c), NumericColumn | TokensColumn)
                       and pa.types.is_string(schema.field(c).type)]
            with _open_parquet(f, read_dictionary=as_dict) as pf:
                yield from _iter_parquet(pf, f, list(needed), self.batch_rows)

    # -------------------------------------------------------------- CSV

    def _csv_header(self) -> list[str]:
        return csv_header(self.path)

    def _null_values(self) -> list[str]:
        return csv_null_values(self.schema)

    def _csv_batches(self, needed: Sequence[str], *,
                     threads: bool = True) -> Generator[pa.RecordBatch, None, None]:
        """Raw record batches of the ``needed`` columns, typed as declared (others as text).

        ``threads``: pyarrow parses blocks on all cores (rows stay in file order)
        but then can not number a malformed row; callers that must name the row
        of a problem re-read with ``threads=False``.
        """
        header = self._csv_header()
        types = csv_field_types(self.schema, needed)
        bad_rows: list[tuple[int | None, int, int]] = []

        def on_invalid(row: Any) -> str:
            bad_rows.append((row.number, row.expected_columns, row.actual_columns))
            return "error"

        rows = 0
        try:
            # closed however the loop ends (a consumer stopping early, an error): a threaded
            # reader's read-ahead must not outlive its pass, least of all into interpreter exit
            with pacsv.open_csv(
                self.path,
                read_options=pacsv.ReadOptions(use_threads=threads,
                                               block_size=_CSV_BLOCK_BYTES),
                parse_options=pacsv.ParseOptions(delimiter=_delimiter(self.path),
                                                 newlines_in_values=True,
                                                 invalid_row_handler=on_invalid),
                convert_options=pacsv.ConvertOptions(
                    column_types=types, include_columns=list(needed),
                    null_values=self._null_values(), strings_can_be_null=True,
                    quoted_strings_can_be_null=True)) as reader:
                for batch in reader:
                    rows += batch.num_rows
                    yield csv_tokens_rule(batch, self.schema)
        except pa.ArrowInvalid as exc:
            raise self._csv_error(str(exc), header, bad_rows, rows) from None
        except OSError as exc:
            raise DataError(f"{self.path}: cannot read file ({_os_reason(exc)})") from None

    def _csv_error(self, message: str, header: list[str],
                   bad_rows: list[tuple[int | None, int, int]], rows_done: int) -> DataError:
        """A DataError for a pyarrow CSV failure — never quoting pyarrow's text (values)."""
        path = self.path
        if bad_rows:
            number, expected, actual = bad_rows[0]
            at = ("" if number is None else
                  private(f"row {number:,} of the file (counting the header as row 1, "
                          f"i.e. data row {number - 1:,}) "))
            return DataError(f"{path}: broken CSV: {at}has {actual} fields, "
                             f"expected {expected} as in the header")
        m = re.search(r"CSV column #(\d+)", message)
        name = header[int(m.group(1))] if m and int(m.group(1)) < len(header) else None
        col = f"column '{name}'" if name else "a column"
        if "to double" in message and name:
            row = self._locate_unparseable(name)
            at = private(f" in data row {row:,} (header not counted)") if row else ""
            return DataError(f"{path}: {col}: a value is not a number{at}; the column is "
                             "declared numeric", column=name)
        if "UTF8" in message or "utf8" in message.lower():
            after = private(f" (after data row {rows_done:,})") if rows_done else ""
            return DataError(f"{path}: {col} contains bytes that are not valid UTF-8 text{after}",
                             column=name)
        if "Empty CSV file" in message:
            return DataError(f"{path}: file is empty (no header row)")
        return DataError(f"{path}: not a valid CSV file under the declared schema"
                         + private(f", near data row {rows_done + 1:,}")
                         + " (the parser's message is withheld because it may quote private "
                         "values)")

    def _one_column(self, name: str, kind: pa.DataType, *, threads: bool,
                    **convert: Any) -> Any:
        """A streaming reader of one CSV column as ``kind``, with the pass's parse options."""
        return pacsv.open_csv(
            self.path,
            read_options=pacsv.ReadOptions(use_threads=threads, block_size=_CSV_BLOCK_BYTES),
            parse_options=pacsv.ParseOptions(delimiter=_delimiter(self.path),
                                             newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(column_types={name: kind},
                                                 include_columns=[name], **convert))

    def _locate_unparseable(self, name: str) -> int | None:
        """The 1-based data row of the first value of ``name`` not parseable as a number."""
        rows = 0
        try:
            with self._one_column(name, pa.string(), threads=False,
                                  null_values=self._null_values(),
                                  strings_can_be_null=True) as reader:
                for batch in reader:
                    i = first_unparseable(batch.column(0))  # blanks around numbers are fine
                    if i is not None:
                        return rows + i + 1
                    rows += batch.num_rows
        except (pa.ArrowException, OSError):
            return None
        return None


_BATCHES = DataSource.batches  # the encoder's own loop (map_encoded parallelises only this)


# ------------------------------------------------------- CSV typing rules
#
# How a CSV field becomes a value. :meth:`DataSource._csv_batches` hands these
# rules to pyarrow's CSV reader; the Spark engine (:mod:`dpcli.stats.spark`),
# whose CSV parser only splits records into text fields, applies the same
# rules to those fields with :func:`type_csv_text`, so that both engines see
# the same values.


def csv_null_values(schema: Schema) -> list[str]:
    """The missing-value markers: pyarrow's usual ones minus any declared category,
    binary value or class (which then stays a value)."""
    declared: set[str] = set(schema.label.classes)
    for col in schema.columns:
        if isinstance(col, CategoricalColumn):
            declared.update(col.categories)
        elif isinstance(col, BinaryColumn):
            declared.update(col.values)
    return [v for v in pacsv.ConvertOptions().null_values if v not in declared]


def csv_field_types(schema: Schema, names: Sequence[str]) -> dict[str, pa.DataType]:
    """The type each CSV column is read as: declared numeric → float64, all else text."""
    return {name: (pa.float64() if schema.has(name)
                   and isinstance(schema.column(name), NumericColumn) else pa.string())
            for name in names}


def csv_tokens_rule(batch: pa.RecordBatch, schema: Schema) -> pa.RecordBatch:
    """CSV can not tell "no tokens" from "missing": a null tokens field is no tokens."""
    tokens = [i for i, name in enumerate(batch.schema.names)
              if schema.has(name) and isinstance(schema.column(name), TokensColumn)]
    if not tokens:
        return batch
    arrays = [ac.fill_null(a, "") if i in tokens else a for i, a in enumerate(batch.columns)]
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


def type_csv_text(arr: pa.Array, type_: pa.DataType, null_values: pa.Array) -> pa.Array:
    """Split, unquoted CSV fields (text; null for an empty field) → the values the CSV
    reader above produces for them with column type ``type_``.

    pyarrow's reader (``strings_can_be_null`` and ``quoted_strings_can_be_null``)
    makes a field null when it equals a marker of :func:`csv_null_values` byte for
    byte, quoted or not; it parses a float64 field after trimming spaces and tabs
    at both ends (the cast kernel does not trim, hence the explicit trim) with the
    same parser as ``cast``. Raises ``pa.ArrowInvalid`` for a field that is not a
    number (:func:`first_unparseable` finds it).
    """
    arr = ac.cast(arr, pa.string())
    is_null = ac.fill_null(ac.is_in(arr, value_set=null_values), True)
    arr = ac.if_else(is_null, pa.nulls(len(arr), pa.string()), arr)
    if pa.types.is_floating(type_):
        return ac.cast(ac.utf8_trim(arr, " \t"), type_)
    return arr


def first_unparseable(arr: pa.Array) -> int | None:
    """Index of the first non-null field :func:`type_csv_text` can not read as a number."""
    return _first_unparseable(ac.utf8_trim(ac.cast(arr, pa.string()), " \t"))


# ------------------------------------------------------------------ helpers


def parquet_structure(rep: StructureReport, schemas: Sequence[tuple[Path | str, pa.Schema]],
                      declared: Callable[[str], Column | None], *,
                      one_type: bool = False) -> None:
    """Fill ``rep``'s present, missing, extra and mismatched columns from each Parquet
    file's Arrow schema (no value is read). ``one_type``: a column must have the same
    type in every file (the Spark engine reads a folder as one table)."""
    present: dict[str, None] = {}
    missing: dict[str, None] = {}
    extra: dict[str, None] = {}
    mismatches: list[TypeMismatch] = []
    first: dict[str, tuple[pa.DataType, Path | str]] = {}
    for shown, schema in schemas:
        for name in rep.needed:
            if schema.get_field_index(name) < 0:
                missing[name] = None
                rep.missing_in.setdefault(name, shown)  # type: ignore[arg-type]
                continue
            present[name] = None
            t = schema.field(name).type
            col = declared(name)
            if not _compatible(col, t):
                mismatches.append(TypeMismatch(name, _expected(col), str(t),
                                               shown))  # type: ignore[arg-type]
            elif one_type and name in first and first[name][0] != t:
                mismatches.append(TypeMismatch(
                    name, f"{first[name][0]} as in {first[name][1]} (the Spark engine "
                    "needs one type per column across the files)", str(t),
                    shown))  # type: ignore[arg-type]
            first.setdefault(name, (t, shown))
        for name in schema.names:
            if name not in rep.needed:
                extra[name] = None
    rep.present = tuple(c for c in present if c not in missing)
    rep.missing = tuple(missing)
    rep.extra = tuple(extra)
    rep.mismatches = tuple(mismatches)


def _end_of_first_record(data: bytes) -> int | None:
    """Index of the newline ending the first CSV record (quotes respected)."""
    start = 0
    while True:
        pos = data.find(b"\n", start)
        if pos < 0:
            return None
        if data.count(b'"', 0, pos) % 2 == 0:
            return pos
        start = pos + 1


def _first_unparseable(arr: pa.Array) -> int | None:
    """Index of the first non-null string that does not cast to float64 (bisection)."""
    try:
        ac.cast(arr, pa.float64())
        return None
    except pa.ArrowInvalid:
        pass
    lo, hi = 0, len(arr)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            ac.cast(arr.slice(lo, mid - lo), pa.float64())
            lo = mid
        except pa.ArrowInvalid:
            hi = mid
    return lo


def _raise_missing(arr: pa.Array | pa.ChunkedArray, name: str, where: RowPosition) -> None:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.null_count == 0 and not pa.types.is_floating(arr.type):
        return
    mask = _missing_mask(arr)
    if mask.any():
        raise missing_error(where, name, int(np.flatnonzero(mask)[0]))


def csv_header(path: Path) -> list[str]:
    """Column names from the first CSV record (reads no data row)."""
    if not path.exists():
        raise NoInput(f"{path}: file not found")
    if path.is_dir():
        raise DataError(f"{path}: is a directory, not a CSV file")
    data = b""
    try:
        with pa.input_stream(str(path), compression="detect") as stream:
            while True:
                chunk = stream.read(1 << 16)
                data += chunk
                end = _end_of_first_record(data)
                if end is not None or not chunk:
                    break
                if len(data) > _MAX_HEADER_BYTES:
                    raise DataError(f"{path}: header row is longer than "
                                    f"{_MAX_HEADER_BYTES >> 20} MiB")
    except OSError as exc:
        raise DataError(f"{path}: cannot read file ({_os_reason(exc)})") from None
    except pa.ArrowException:
        raise DataError(f"{path}: cannot read file (corrupt or not the "
                        "compression its suffix says)") from None
    end = _end_of_first_record(data)
    head = data if end is None else data[:end]
    try:
        text = head.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DataError(f"{path}: header row is not UTF-8 text") from None
    rows = list(csv.reader(io.StringIO(text), delimiter=_delimiter(path)))
    if not rows or not rows[0]:
        raise DataError(f"{path}: file is empty (no header row)")
    return rows[0]



def _os_reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def parquet_files(path: Path) -> list[Path]:
    """The Parquet file(s) at ``path`` (a file, or a folder searched recursively), in order."""
    if not path.is_dir():
        return [path]
    return sorted(p for p in path.rglob("*")
                  if p.is_file() and p.name.lower().endswith(PARQUET_SUFFIXES)
                  and not any(part.startswith((".", "_")) for part in p.relative_to(path).parts))


def _open_parquet(path: Path, read_dictionary: Sequence[str] | None = None) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(path, read_dictionary=read_dictionary or None)
    except FileNotFoundError:
        raise NoInput(f"{path}: file not found") from None
    except OSError as exc:
        if isinstance(exc, pa.ArrowException):
            raise DataError(f"{path}: not a readable Parquet file ({exc})") from None
        raise DataError(f"{path}: cannot read file ({_os_reason(exc)})") from None
    except pa.ArrowException as exc:
        raise DataError(f"{path}: not a readable Parquet file ({exc})") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not a readable Parquet file (a column name is not "
                        "UTF-8 text)") from None


def _footer_rows(path: Path) -> int:
    with _open_parquet(path) as pf:
        return pf.metadata.num_rows


def _release_arrow_memory() -> None:
    """Hand the memory Arrow's allocator kept from a finished pass back to the system.

    Why: mimalloc (pyarrow's default pool) keeps freed pages for reuse, so a pass that
    decoded a large row group leaves its peak resident for the rest of the process: on a
    200,000-row, one-row-group file, ~150 MB under every later step (validate's design and
    fits). Reading again costs only a fresh allocation.
    """
    pa.default_memory_pool().release_unused()


def _iter_parquet(pf: pq.ParquetFile, path: Path, columns: list[str],
                  batch_rows: int) -> Iterator[pa.RecordBatch]:
    try:
        # one row group at a time: over a whole file pyarrow reads ahead across row groups
        # and its peak memory grows with the file (10^7 Adult rows: 200 MB against 140 MB)
        for group in range(pf.metadata.num_row_groups):
            yield from pf.iter_batches(batch_size=batch_rows, columns=columns,
                                       row_groups=[group])
    except (pa.ArrowException, OSError):
        raise DataError(f"{path}: Parquet data of column(s) {', '.join(columns)} "
                        "could not be decoded (corrupt file?)") from None


def _read_row_group(pf: pq.ParquetFile, path: Path, group: int, name: str) -> pa.Table:
    try:
        return pf.read_row_group(group, columns=[name])
    except (pa.ArrowException, OSError):
        raise DataError(f"{path}: Parquet column '{name}' (row group {group}) could not "
                        "be decoded (corrupt file?)") from None
