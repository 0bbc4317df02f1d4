"""The Spark statistics engine: the same one-pass statistics, on a Spark cluster.

What it releases: nothing. Like the in-process engine it computes *exact,
private* sufficient statistics (:class:`~dpcli.stats.engine.Stats`); only
the small tables come back to the driver (this process), where the same
mechanisms as always add noise before anything is released (docs/design.md
rule 3). Executors never see a budget, a generator for noise or an output.

Why this design:

- **No second implementation.** Spark only reads the files and cuts them
  into partitions. Every partition runs dpcli's own
  :class:`~dpcli.data.encode.BatchEncoder` and
  :class:`~dpcli.stats.accumulators.StatsAccumulator` over its Arrow batches
  (``DataFrame.mapInArrow``) and returns its partial accumulator state — one
  row per partition, numpy arrays in ``.npz`` bytes (never pickle, never
  code) — and the driver folds the partials with ``StatsAccumulator.merge``.
  Categories and ``other``, clamping, imputation, histogram edges and token
  caps are therefore the local engine's, by construction.
- **The same values from CSV.** Spark's CSV parser (RFC 4180 quoting,
  ``multiLine`` so quoted newlines work as in the local reader) is asked for
  text only; each partition types the fields with the reader's own rules
  (:func:`dpcli.data.reader.type_csv_text`: null markers, numbers parsed
  after trimming blanks, tokens fields never missing). Parquet is read by
  Spark's reader; the encoder accepts Spark's Arrow types as it accepts
  pyarrow's.
- **The same token caps.** A tokens column with ``max_per_row`` keeps a
  pseudo-random subset of a long row keyed by (seed, row position in the
  pass, token). The driver draws the seeds from the run's generator exactly
  as the local engine does, and every row gets its position in the pass
  (rows of the files before it, in the local reader's sorted order, plus its
  row in its file — Spark's ``_metadata.row_index`` for Parquet, a count for
  CSV, whose files Spark never splits in ``multiLine`` mode). So capped
  counts match the local engine exactly, and a seeded run consumes the
  generator as a local run does: its noise, and so its outputs, are the
  same too. (Were a cluster to renumber rows, only which r tokens a capped
  row keeps would change: the 2r sensitivity holds for any fixed choice.)
- **Charge before release.** :meth:`SparkSource.check_structure` reads no
  value (a Hadoop listing, every CSV header, every Parquet footer);
  :meth:`SparkSource.check_values` is a Spark job that returns only row
  counts and the position of the first problem (file, column, row — never a
  value), before the ledger is charged.
- **Quiet and contained.** Partition code never raises: an error travels
  back as dpcli's own message (file, column, row) or an exception's class
  name, so Spark's logs and the driver's exceptions never carry a value.
  Spark's own log is set to ERROR so that the CLI's stderr stays readable.

Where the engines differ (documented, never silent in the statistics):
float sums are added in another order (moments agree to ~1e-12 relative,
tested at 1e-9); invalid UTF-8 in a CSV file is an error locally but
replaced by U+FFFD in Spark; a folder of CSV files (one header each, all
equal) is read by Spark only; a Parquet column must have one type across
the files of a folder for Spark (locally each file may differ).
"""

from __future__ import annotations

import atexit
import functools
import io
import itertools
import json
import os
import shutil
import struct
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dpcli.data.encode import BatchEncoder, RowPosition, encode_label
from dpcli.data.location import is_remote, local_path, scheme
from dpcli.data.reader import (
    _MAX_HEADER_BYTES,
    CSV_SUFFIXES,
    PARQUET_SUFFIXES,
    DataSource,
    StructureReport,
    _end_of_first_record,
    _raise_missing,
    csv_field_types,
    csv_null_values,
    csv_tokens_rule,
    first_unparseable,
    parquet_structure,
    type_csv_text,
)
from dpcli.data.report import ColumnCounts, DataReport
from dpcli.data.schema import Schema
from dpcli.errors import DataError, NoInput, UsageError, private
from dpcli.stats import spark_aggregate as native
from dpcli.stats.accumulators import JointAccumulator, StatsAccumulator
from dpcli.stats.engine import Engine, Stats, StatsRequest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dpcli.spec import SparkConfig

PYSPARK_MISSING = "the Spark engine needs PySpark: pip install 'dpcli[spark]'"
JAVA_MISSING = ("the Spark engine needs Java 17 (Spark runs in a Java VM), and none was found: "
                "JAVA_HOME is not set and there is no `java` on PATH. Install it (Debian/Ubuntu: "
                "apt-get install openjdk-17-jre-headless) or set JAVA_HOME to a Java 17 "
                "installation")
DEFAULT_MASTER = "local[*]"
MASTER_ENV = "DPCLI_SPARK_MASTER"

# Spark's log: errors only, and one line each: no exception text or stack trace, because a
# parser's exception can quote the record it failed on (univocity shows up to 1,000
# characters of a field). The two named loggers are the ones Spark consults when it decides
# whether to print "Setting default log level" on start.
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
appender.console.layout.alwaysWriteExceptions = false
logger.submit.name = org.apache.spark.deploy.SparkSubmit
logger.submit.level = error
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""

# extra columns of the frames the partitions read
_FILE = "_dpcli_file"
_ROW = "_dpcli_row"
_BAD = "_dpcli_bad"
_CORRUPT = "_dpcli_corrupt"

_OUT_SCHEMA = ("pid long, rows long, state binary, report string, files string, "
               "error string, error_file long, error_row long")


# ------------------------------------------------------------------ locations


_scheme = scheme  # the names this module and its tests use


def _uri_key(uri: str) -> str:
    """One spelling per file (Spark writes ``file:/x``, Hadoop sometimes ``file:///x``)."""
    u = urlparse(uri)
    return f"{u.scheme}://{u.netloc}{unquote(u.path)}"


# ------------------------------------------------------------------ the session


def require_pyspark() -> None:
    """UsageError (exit 64) with the install command when PySpark is missing."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise UsageError(PYSPARK_MISSING) from None


def require_java() -> None:
    """UsageError (exit 64) saying how to get Java 17, before Spark tries to start a JVM."""
    home = os.environ.get("JAVA_HOME")
    if home:
        if not (Path(home) / "bin" / "java").exists():
            raise UsageError(f"JAVA_HOME is {home}, which holds no bin/java: the Spark engine "
                             "needs Java 17 there (Debian/Ubuntu: apt-get install "
                             "openjdk-17-jre-headless), or unset JAVA_HOME to use the `java` "
                             "on PATH")
        return
    if shutil.which("java") is None:
        raise UsageError(JAVA_MISSING)


def spark_master(config: SparkConfig | None) -> str:
    """``DPCLI_SPARK_MASTER``, else the spec's ``spark.master``, else ``local[*]``."""
    return _explicit_master(config) or DEFAULT_MASTER


def _explicit_master(config: SparkConfig | None) -> str | None:
    env = os.environ.get(MASTER_ENV, "").strip()
    if env:
        return env
    if config is not None and config.master:
        return config.master
    return None


def _submitted_master() -> str | None:
    """The ``--master`` of ``spark-submit`` when dpcli runs as its application (its JVM
    is already up and hands its port to this Python), else None."""
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return None
    from pyspark import SparkConf

    return SparkConf().get("spark.master", None)


def _active_session() -> SparkSession | None:
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


@functools.cache
def _log4j_file() -> Path:
    handle, name = tempfile.mkstemp(prefix="dpcli-log4j2-", suffix=".properties")
    with os.fdopen(handle, "w") as out:
        out.write(_LOG4J2)
    atexit.register(lambda: Path(name).unlink(missing_ok=True))
    return Path(name)


def spark_session(config: SparkConfig | None = None) -> SparkSession:
    """The active SparkSession, or a new one from ``config`` (the spec's ``spark:``).

    A session that already runs (a test's, or dpcli called inside a Spark
    application) is used as it is; run by ``spark-submit``, dpcli uses its
    ``--master`` unless ``DPCLI_SPARK_MASTER`` or the spec names one. A new one gets the master of
    :func:`spark_master`, the spec's ``conf``, Spark's log at ERROR, no
    console progress bar (dpcli draws its own) and, on a local master, this
    Python for its workers. On a cluster master the dpcli package is shipped
    to the executors (``addPyFile``) so that they run this very code; they
    need numpy and pyarrow installed.
    """
    require_pyspark()
    active = _active_session()
    if active is not None:
        _never_skip_files(active)
        return active
    require_java()
    from pyspark.sql import SparkSession

    # spark-submit's --master rules unless the environment or the spec names another
    submitted = _submitted_master() if _explicit_master(config) is None else None
    master = submitted or spark_master(config)
    conf = dict(config.conf) if config is not None else {}
    conf.setdefault("spark.ui.showConsoleProgress", "false")
    conf.setdefault("spark.app.name", "dpcli")
    # the web UI listens on every interface without authentication and shows task failure
    # reasons and per-task row counts: off unless the spec asks for it
    conf.setdefault("spark.ui.enabled", "false")
    # ours first: a -Dlog4j2.configurationFile of the user's, later on the line, wins
    conf["spark.driver.extraJavaOptions"] = (
        f"-Dlog4j2.configurationFile={_log4j_file().as_uri()} "
        + conf.get("spark.driver.extraJavaOptions", "")).strip()
    local = master.startswith("local")
    if not local:
        # executors log what their tasks raise: ship the same one-line configuration to them
        log4j = _log4j_file()
        conf["spark.files"] = ",".join(f for f in (str(log4j), conf.get("spark.files", ""))
                                       if f)
        conf["spark.executor.extraJavaOptions"] = (
            f"-Dlog4j2.configurationFile={log4j.name} "
            + conf.get("spark.executor.extraJavaOptions", "")).strip()
    if local:
        # pyspark's workers run PYSPARK_PYTHON, else whatever `python3` is on PATH
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder if submitted else SparkSession.builder.master(master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # the JVM did not start: no private value is involved yet
        raise UsageError(f"Spark could not start with master {master!r} "
                         f"({type(exc).__name__}); check that Java 17 is installed "
                         "(apt-get install openjdk-17-jre-headless) and that the master is "
                         "reachable") from None
    spark.sparkContext.setLogLevel("ERROR")
    if not local:
        spark.sparkContext.addPyFile(str(_package_zip()))
    _never_skip_files(spark)
    return spark


def _never_skip_files(spark: SparkSession) -> None:
    """A corrupt or vanished file must fail the run, not shrink the data silently
    (cluster defaults may say otherwise; these are runtime settings, so an already
    running session gets them too)."""
    spark.conf.set("spark.sql.files.ignoreCorruptFiles", "false")
    spark.conf.set("spark.sql.files.ignoreMissingFiles", "false")


@functools.cache
def _package_zip() -> Path:
    """This dpcli package as a zip of its Python files (for the executors)."""
    import dpcli

    root = Path(dpcli.__file__).parent
    handle, name = tempfile.mkstemp(prefix="dpcli-", suffix=".zip")
    os.close(handle)
    with zipfile.ZipFile(name, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(root.rglob("*.py")):
            z.write(f, Path("dpcli") / f.relative_to(root))
    atexit.register(lambda: Path(name).unlink(missing_ok=True))
    return Path(name)


# ------------------------------------------------------------------ listing


@dataclass(frozen=True)
class InputFile:
    """One file Spark reads: its Hadoop URI, its name in messages, size and time."""

    uri: str
    shown: Path | str
    size: int
    mtime: int  # milliseconds since the epoch


def _java_class(exc: BaseException) -> str:
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            return str(java.getClass().getSimpleName())
        except Exception:
            pass
    return type(exc).__name__


def _hadoop_location(data: Path | str) -> str:
    if is_remote(data):
        return str(data)
    return "file:" + str(local_path(data).resolve())


def _sort_key(rel: str) -> tuple[str, ...]:
    return tuple(p for p in rel.split("/") if p)  # as the local reader sorts Paths


def list_input(spark: SparkSession, data: Path | str) -> tuple[bool, list[InputFile]]:
    """(is a folder, the data files) of ``data`` through Hadoop's FileSystem API.

    A folder is searched recursively; names starting with ``.`` or ``_`` are
    ignored at any depth (Spark's ``_SUCCESS``, checksum files), and so are
    files with neither a CSV nor a Parquet suffix. Files come in the local
    reader's order (sorted by relative path). Raises DataError naming the
    location when it can not be listed; UsageError when no connector serves
    its scheme.
    """
    shown_root: Path | str = data if is_remote(data) else local_path(data)
    location = _hadoop_location(data)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:
        path = jvm.org.apache.hadoop.fs.Path(location)
        fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        status = fs.getFileStatus(path)
        root = fs.makeQualified(path).toString().rstrip("/")
        if not status.isDirectory():
            entry = InputFile(root, shown_root, int(status.getLen()),
                              int(status.getModificationTime()))
            return False, [entry]
        found: list[tuple[tuple[str, ...], InputFile]] = []
        it = fs.listFiles(path, True)
        while it.hasNext():
            st = it.next()
            uri = st.getPath().toString()
            rel = uri[len(root):].lstrip("/") if uri.startswith(root) else st.getPath().getName()
            key = _sort_key(rel)
            if any(part.startswith((".", "_")) for part in key):
                continue
            if not key[-1].lower().endswith((*CSV_SUFFIXES, *PARQUET_SUFFIXES)):
                continue
            shown: Path | str = (f"{str(data).rstrip('/')}/{rel}" if is_remote(data)
                                 else local_path(data) / rel)
            found.append((key, InputFile(uri, shown, int(st.getLen()),
                                         int(st.getModificationTime()))))
    except Exception as exc:
        name = _java_class(exc)
        if name == "FileNotFoundException":
            raise NoInput(f"{shown_root}: file not found") from None
        if "UnsupportedFileSystem" in name:
            raise UsageError(f"{shown_root}: Spark has no file system for "
                             f"'{_scheme(data) or 'file'}:' URIs; add its connector to the "
                             "spec's spark.conf (for s3a: spark.jars.packages: "
                             "org.apache.hadoop:hadoop-aws:<your Hadoop version>)") from None
        raise DataError(f"{shown_root}: cannot list the data ({name})") from None
    return True, [f for _, f in sorted(found, key=lambda kf: kf[0])]


def input_listing(data: Path | str) -> list[tuple[str, int, int]]:
    """(URI, size, modification time) of every file the Spark engine reads from ``data``.

    For the ledger's input digest of a remote location
    (:func:`dpcli.fingerprint.input_digest`); uses the running Spark session.
    """
    read = _READ_LISTINGS.get(str(data))
    _, files = read if read is not None else list_input(spark_session(), data)
    return [(f.uri, f.size, f.mtime) for f in files]


# the listing each SparkSource of this process reads, so that the ledger digests the very
# files the run reads, not a second listing taken a moment later
_READ_LISTINGS: dict[str, tuple[bool, list[InputFile]]] = {}


def _read_bytes(spark: SparkSession, uri: str, offset: int, length: int, *,
                decompress: bool = False) -> bytes:
    """Up to ``length`` bytes of a file through Hadoop, from ``offset`` (or, with
    ``decompress``, from the start of the file's content after its codec, e.g. gzip)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    path = jvm.org.apache.hadoop.fs.Path(uri)
    stream = path.getFileSystem(conf).open(path)
    try:
        source = stream
        if decompress:
            codec = jvm.org.apache.hadoop.io.compress.CompressionCodecFactory(conf).getCodec(path)
            if codec is not None:
                source = codec.createInputStream(stream)
        elif offset:
            stream.seek(offset)
        return bytes(source.readNBytes(length))
    finally:
        stream.close()


# ------------------------------------------------------------------ the source


@dataclass(frozen=True)
class _FileTable:
    """What partitions need to know about the files: index and offset in the pass."""

    keys: dict[str, int]          # _uri_key(uri) -> index in the listing
    shown: tuple[str, ...]        # how messages name each file
    offsets: tuple[int, ...]      # rows of all files before each one (the pass position)

    def index(self, uri: str) -> int:
        return self.keys[_uri_key(uri)]


class SparkSource:
    """A CSV or Parquet file, or a folder of them, anywhere Spark reads, under a schema.

    The duck-typed counterpart of :class:`~dpcli.data.reader.DataSource` for
    ``--engine spark``: ``path`` (a :class:`Path` for local data, the URI as
    given otherwise), ``schema``, ``engine``, ``report`` (custodian-only
    counters of the latest pass), :meth:`check_structure`,
    :meth:`check_values` and :meth:`num_rows_hint`. It releases nothing: it
    reads the data for the statistics engine only.
    """

    engine: ClassVar[str] = "spark"

    def __init__(self, data: Path | str, schema: Schema, *, config: SparkConfig | None = None,
                 batch_rows: int = 65_536, label: bool = True) -> None:
        require_pyspark()
        if batch_rows < 1:
            raise UsageError(f"batch_rows must be at least 1, got {batch_rows}")
        self.path: Path | str = str(data) if is_remote(data) else local_path(data)
        self.schema = schema
        self.config = config
        self.label = label
        self.batch_rows = int(batch_rows)  # Spark sizes its own Arrow batches
        self.report = DataReport(file=self.path)  # type: ignore[arg-type]
        self.format: str | None = None
        self._delimiter = ","
        self._data = data
        self._listing: tuple[bool, list[InputFile]] | None = None
        self._header: list[str] | None = None
        self._footers: list[pq.FileMetaData] | None = None
        self._file_rows: list[int] | None = None  # per file, once counted or read off footers

    def __repr__(self) -> str:
        return f"SparkSource({str(self.path)!r}, format={self.format!r})"

    @property
    def spark(self) -> SparkSession:
        return spark_session(self.config)

    # ---------------------------------------------------------- columns

    def needed_columns(self, columns: Sequence[str]) -> tuple[str, ...]:
        """The label, then ``columns`` deduplicated (as :meth:`DataSource.needed_columns`)."""
        return DataSource.needed_columns(self, columns)  # type: ignore[arg-type]  # same attrs

    def _declared(self, name: str) -> Any:
        return DataSource._declared(self, name)  # type: ignore[arg-type]  # same attributes

    # -------------------------------------------------------- structure

    def files(self) -> list[InputFile]:
        """The data files, listed once per source (the pass reads exactly these)."""
        if self._listing is None:
            listing = list_input(self.spark, self._data)
            self.format = self._detect_format(*listing)
            self._listing = listing
            _READ_LISTINGS[str(self._data)] = listing
        return self._listing[1]

    def _detect_format(self, is_dir: bool, files: list[InputFile]) -> str:
        kinds = set()
        for f in files:
            name = str(f.shown).lower()
            if name.endswith(PARQUET_SUFFIXES):
                kinds.add("parquet")
            elif any(name.endswith(s) for s in CSV_SUFFIXES):
                kinds.add("tsv" if name.endswith((".tsv", ".tsv.gz")) else "csv")
        if not files and is_dir:
            raise DataError(f"{self.path}: folder holds no CSV ({', '.join(CSV_SUFFIXES)}) or "
                            f"Parquet ({', '.join(PARQUET_SUFFIXES)}) files")
        if not kinds:
            raise DataError(f"{self.path}: unknown file format; dpcli reads CSV "
                            f"({', '.join(CSV_SUFFIXES)}) and Parquet "
                            f"({', '.join(PARQUET_SUFFIXES)}), or a folder of them")
        if len(kinds) > 1:
            raise DataError(f"{self.path}: folder mixes {' and '.join(sorted(kinds))} files; "
                            "keep one format (and one delimiter) per folder")
        kind = kinds.pop()
        self._delimiter = "\t" if kind == "tsv" else ","
        return "parquet" if kind == "parquet" else "csv"

    def check_structure(self, columns: Sequence[str], *,
                        raise_errors: bool = True) -> StructureReport:
        """Files, format, needed columns and their types — reading no value.

        CSV: every file's header (all must be equal). Parquet: every file's
        footer, checked as the local reader checks it. Problems raise a
        DataError naming the file and the columns (unless ``raise_errors`` is
        false).
        """
        needed = self.needed_columns(columns)
        rep = StructureReport(path=self.path, format=self.format or "?",  # type: ignore[arg-type]
                              needed=needed)
        try:
            files = self.files()
            rep.format = self.format or "?"
            rep.files = tuple(f.shown for f in files)  # type: ignore[misc]
            if self.format == "csv":
                self._structure_csv(rep, files)
            else:
                self._structure_parquet(rep, files)
        except DataError as exc:
            rep.readable = False
            rep.error = str(exc).removeprefix(f"{self.path}: ")
        if raise_errors:
            rep.raise_for_problems()
        return rep

    def _csv_header(self, f: InputFile) -> list[str]:
        """The column names of a CSV file's first record (no data row is read)."""
        import csv

        try:
            data = _read_bytes(self.spark, f.uri, 0, 1 << 16, decompress=True)
            if _end_of_first_record(data) is None and len(data) == 1 << 16:
                data = _read_bytes(self.spark, f.uri, 0, _MAX_HEADER_BYTES, decompress=True)
                if _end_of_first_record(data) is None and len(data) == _MAX_HEADER_BYTES:
                    raise DataError(f"{f.shown}: header row is longer than "
                                    f"{_MAX_HEADER_BYTES >> 20} MiB")
        except DataError:
            raise
        except Exception as exc:
            raise DataError(f"{f.shown}: cannot read file ({_java_class(exc)})") from None
        end = _end_of_first_record(data)
        head = data if end is None else data[:end]
        try:
            text = head.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise DataError(f"{f.shown}: header row is not UTF-8 text") from None
        rows = list(csv.reader(io.StringIO(text), delimiter=self._delimiter))
        if not rows or not rows[0]:
            raise DataError(f"{f.shown}: file is empty (no header row)")
        return rows[0]

    def _structure_csv(self, rep: StructureReport, files: list[InputFile]) -> None:
        if self._header is None:
            first = self._csv_header(files[0])
            for f in files[1:]:
                if self._csv_header(f) != first:
                    raise DataError(f"{f.shown}: its header differs from that of "
                                    f"{files[0].shown}; the CSV files of a folder must all "
                                    "have the same header")
            self._header = first
        names = self._header
        rep.present = tuple(c for c in rep.needed if c in names)
        rep.missing = tuple(c for c in rep.needed if c not in names)
        rep.extra = tuple(dict.fromkeys(c for c in names if c not in rep.needed))
        rep.duplicates = tuple(c for c in rep.needed if names.count(c) > 1)

    def _footer(self, f: InputFile) -> pq.FileMetaData:
        try:
            tail = _read_bytes(self.spark, f.uri, max(f.size - 8, 0), 8)
            if len(tail) < 8 or tail[4:] != b"PAR1":
                raise DataError(f"{f.shown}: not a readable Parquet file (no Parquet footer)")
            n = struct.unpack("<i", tail[:4])[0]
            if not 0 < n <= f.size - 12:
                raise DataError(f"{f.shown}: not a readable Parquet file (bad footer)")
            footer = _read_bytes(self.spark, f.uri, f.size - n - 8, n + 8)
            return pq.ParquetFile(io.BytesIO(b"PAR1" + footer)).metadata
        except DataError:
            raise
        except pa.ArrowException:
            raise DataError(f"{f.shown}: not a readable Parquet file (bad footer)") from None
        except Exception as exc:
            raise DataError(f"{f.shown}: cannot read file ({_java_class(exc)})") from None

    def _structure_parquet(self, rep: StructureReport, files: list[InputFile]) -> None:
        if self._footers is None:
            self._footers = [self._footer(f) for f in files]
            self._file_rows = [m.num_rows for m in self._footers]
        parquet_structure(rep, [(f.shown, meta.schema.to_arrow_schema())
                                for f, meta in zip(files, self._footers, strict=True)],
                          self._declared, one_type=True)
        rep.num_rows = sum(self._file_rows or [])

    def num_rows_hint(self) -> int | None:
        """Parquet: the footers' row count; CSV: the count of :meth:`check_values`, else None."""
        if self._file_rows is None:
            return None
        return sum(self._file_rows)

    # ------------------------------------------------------------ frames

    def frame(self, needed: Sequence[str], *, strict_csv: bool = True,
              positions: bool = True) -> DataFrame:
        """The needed columns (CSV: as text) with each row's file (and, for Parquet, its
        row in the file), as Spark reads them; lazily — nothing is read yet.

        CSV records whose number of fields differs from the header's are
        flagged (``_dpcli_bad``), which makes Spark tokenise whole records.
        """
        from pyspark.sql import functions as F
        from pyspark.sql.types import StringType, StructField, StructType

        files = self.files()
        uris = [f.uri for f in files]

        def col(name: str) -> Any:
            return F.col("`" + name.replace("`", "``") + "`")

        spark = self.spark
        if self.format == "csv":
            assert self._header is not None
            names = [n if n in needed else f"_dpcli_unused_{i}"
                     for i, n in enumerate(self._header)]
            fields = [StructField(n, StringType()) for n in names]
            if strict_csv:
                fields.append(StructField(_CORRUPT, StringType()))
            reader = (spark.read.schema(StructType(fields))
                      .option("header", True).option("multiLine", True)
                      .option("sep", self._delimiter).option("quote", '"')
                      .option("escape", '"').option("encoding", "UTF-8")
                      .option("mode", "PERMISSIVE").option("enforceSchema", True))
            if strict_csv:
                reader = reader.option("columnNameOfCorruptRecord", _CORRUPT)
            df = reader.csv(uris)
            extra = [F.col("_metadata.file_path").alias(_FILE)]
            if strict_csv:
                extra.append(F.col(_CORRUPT).isNotNull().alias(_BAD))
            return df.select(*[col(n) for n in needed], *extra)
        df = spark.read.parquet(*uris)
        if not positions:  # Spark's aggregations need no file or row: read the columns only
            return df.select(*[col(n) for n in needed])
        return df.select(*[col(n) for n in needed], F.col("_metadata.file_path").alias(_FILE),
                         F.col("_metadata.row_index").alias(_ROW))

    def file_table(self, rows: Sequence[int] | None = None) -> _FileTable:
        files = self.files()
        counts = list(rows if rows is not None else self._file_rows or [0] * len(files))
        offsets = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(int).tolist()
        return _FileTable(keys={_uri_key(f.uri): i for i, f in enumerate(files)},
                          shown=tuple(str(f.shown) for f in files), offsets=tuple(offsets))

    def _job(self, what: str, df: DataFrame, fn: Callable[..., Iterator[pa.RecordBatch]]
             ) -> list[Any]:
        """Run ``fn`` over every partition; its rows sorted by partition. Spark failures
        become a DataError naming the source and the exception's class (not its text)."""
        try:
            rows = df.mapInArrow(fn, _OUT_SCHEMA).collect()
        except Exception as exc:
            raise DataError(f"{self.path}: Spark could not {what} ({_java_class(exc)}); "
                            "the files may be corrupt, unreadable or changed") from None
        errors = [r for r in rows if r["error"] is not None]
        if errors:
            first = min(errors, key=lambda r: (r["error_file"], r["error_row"]))
            raise DataError(first["error"])
        return sorted(rows, key=lambda r: r["pid"])

    # ----------------------------------------------------------- values

    def check_values(self, columns: Sequence[str]) -> int:
        """The pre-charge validation pass, as a Spark job; returns the number of records.

        Checks what the local reader checks: every CSV record has the header's
        number of fields and every declared-numeric CSV field is a number;
        every label is a declared class; columns whose missing policy is
        ``error`` have no missing value. Partitions return row counts and the
        position of their first problem only, and a problem raises a
        DataError naming file, column and data row — never a value.
        """
        self.check_structure(columns)
        needed = self.needed_columns(columns)
        if self.format == "parquet":  # typed already: only the label and 'error' columns
            label = self.schema.label.column
            needed = tuple(c for c in needed
                           if c == label or self.schema.column(c).missing == "error")
        per_file = None
        if self.format == "parquet":
            if self._footers is not None and self._file_rows is not None \
                    and native.footers_prove_clean(self.schema, needed, self._footers):
                # nothing to read: the footers' statistics already rule every problem out
                return sum(self._file_rows)
            per_file = self._check_natively(needed)
        if per_file is None:  # CSV, a type Spark's casts do not serve, or a problem to place
            plan = _Plan.build(self, needed, self.file_table([0] * len(self.files())))
            fn = functools.partial(_check_partition, plan=plan)
            rows = self._job("read the data", self.frame(needed), fn)
            per_file = np.zeros(len(self.files()), dtype=np.int64)
            for r in rows:
                for index, count in json.loads(r["files"]).items():
                    per_file[int(index)] += count
        if self.format == "parquet" and self._file_rows is not None \
                and list(per_file) != list(self._file_rows):
            raise DataError(f"{self.path}: Spark read a different number of rows than the "
                            "Parquet footers hold; the files changed, or spark.sql.files."
                            "ignoreCorruptFiles/ignoreMissingFiles is set")
        self._file_rows = [int(c) for c in per_file]
        return int(per_file.sum())


    def _check_natively(self, needed: Sequence[str]) -> np.ndarray | None:
        """Rows per file by Spark's aggregations when no label or 'error' column has a
        problem; None when there is one (the Python check then names file, column and
        row) or a column's type is not served natively."""
        df = self.frame(needed)
        try:
            found = native.check_labels_and_missing(df, self.schema, needed, _FILE)
        except Exception as exc:
            raise DataError(f"{self.path}: Spark could not read the data "
                            f"({_java_class(exc)}); the files may be corrupt, unreadable "
                            "or changed") from None
        if found is None or found[1] > 0:
            return None
        table = self.file_table()
        per_file = np.zeros(len(self.files()), dtype=np.int64)
        for uri, count in found[0].items():
            per_file[table.index(uri)] += count
        return per_file


# ------------------------------------------------------------------ partitions


@dataclass(frozen=True)
class _Plan:
    """Everything a partition needs (pickled into the task; no private value in it)."""

    schema: Schema
    needed: tuple[str, ...]
    format: str
    files: _FileTable
    label: bool
    null_values: tuple[str, ...]
    types: tuple[tuple[str, str], ...]  # CSV: column -> "float64" | "string"

    @classmethod
    def build(cls, source: SparkSource, needed: Sequence[str], files: _FileTable) -> _Plan:
        types = csv_field_types(source.schema, needed)
        return cls(schema=source.schema, needed=tuple(needed), format=source.format or "",
                   files=files, label=source.label,
                   null_values=tuple(csv_null_values(source.schema)),
                   types=tuple((n, "float64" if pa.types.is_floating(t) else "string")
                               for n, t in types.items()))


@dataclass
class _Run:
    """Consecutive rows of one file within a batch."""

    start: int
    stop: int
    file: int
    row: int  # row of ``start`` in its file


class _PartitionError(Exception):
    def __init__(self, message: str, file: int, row: int) -> None:
        super().__init__(message)
        self.message, self.file, self.row = message, file, row


def _runs(batch: pa.RecordBatch, plan: _Plan, counters: dict[int, int]) -> Iterator[_Run]:
    """Split a batch into runs of consecutive rows of one file, with their file rows.

    Parquet rows carry ``_metadata.row_index``; a CSV file is never split in
    ``multiLine`` mode, so its rows are counted from the start of the file.
    """
    n = batch.num_rows
    if n == 0:
        return
    encoded = pc.dictionary_encode(batch.column(_FILE))
    names = [plan.files.index(u) for u in encoded.dictionary.to_pylist()]
    file_of = np.asarray(names, dtype=np.int64)[encoded.indices.to_numpy(zero_copy_only=False)]
    cuts = np.flatnonzero(np.diff(file_of) != 0) + 1
    index = None
    if plan.format == "parquet":
        index = batch.column(_ROW).to_numpy(zero_copy_only=False).astype(np.int64)
        cuts = np.union1d(cuts, np.flatnonzero(np.diff(index) != 1) + 1)
    bounds = [0, *cuts.tolist(), n]
    for a, b in itertools.pairwise(bounds):
        f = int(file_of[a])
        if index is not None:
            row = int(index[a])
        else:
            row = counters.get(f, 0)
            counters[f] = row + (b - a)
        yield _Run(a, b, f, row)


def _typed(batch: pa.RecordBatch, run: _Run, plan: _Plan) -> pa.RecordBatch:
    """The run's needed columns as the local reader would hand them to the encoder."""
    part = batch.slice(run.start, run.stop - run.start)
    if plan.format != "csv":
        return pa.RecordBatch.from_arrays([part.column(n) for n in plan.needed],
                                          names=list(plan.needed))
    shown = plan.files.shown[run.file]
    if _BAD in part.schema.names:
        bad = part.column(_BAD).to_numpy(zero_copy_only=False)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise _PartitionError(
                f"{shown}: broken CSV: "
                + private(f"data row {run.row + i + 1:,} (header not counted) ")
                + "has a different number of fields than the header", run.file, run.row + i)
    nulls = pa.array(plan.null_values, pa.string())
    arrays = []
    for name, kind in plan.types:
        arr = part.column(name)
        try:
            arrays.append(type_csv_text(arr, pa.float64() if kind == "float64"
                                        else pa.string(), nulls))
        except pa.ArrowInvalid:
            masked = type_csv_text(arr, pa.string(), nulls)
            i = first_unparseable(masked) or 0
            raise _PartitionError(
                f"{shown}: column '{name}': a value is not a number "
                + private(f"in data row {run.row + i + 1:,} (header not counted)")
                + "; the column is declared numeric", run.file, run.row + i) from None
    return csv_tokens_rule(pa.RecordBatch.from_arrays(arrays, names=list(plan.needed)),
                           plan.schema)


def _output(pid: int, rows: int = 0, state: bytes | None = None, report: str | None = None,
            files: dict[int, int] | None = None, error: str | None = None,
            error_file: int = -1, error_row: int = -1) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({
        "pid": pa.array([pid], pa.int64()), "rows": pa.array([rows], pa.int64()),
        "state": pa.array([state], pa.binary()), "report": pa.array([report], pa.string()),
        "files": pa.array([json.dumps(files or {})], pa.string()),
        "error": pa.array([error], pa.string()),
        "error_file": pa.array([error_file], pa.int64()),
        "error_row": pa.array([error_row], pa.int64())})


def _partition_id() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return int(ctx.partitionId()) if ctx is not None else 0


def _guarded(batches: Iterator[pa.RecordBatch],
             body: Callable[[int], pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Run a partition's body; never let an exception (whose text could hold a value) out.

    After an error the rest of the input is drained, so Spark sees a task that
    ended normally with one row: the error's message (dpcli's own, which names
    file, column and row, never a value) or the exception's class.
    """
    pid = _partition_id()
    unplaced = 2**62  # sorts after the errors that know their file and row
    try:
        out = body(pid)
    except _PartitionError as exc:
        out = _output(pid, error=exc.message, error_file=exc.file, error_row=exc.row)
    except DataError as exc:
        out = _output(pid, error=exc.marked, error_file=unplaced, error_row=0)
    except Exception as exc:
        out = _output(pid, error=f"a Spark task failed ({type(exc).__name__}) while reading "
                      "the data", error_file=unplaced, error_row=0)
    if out.column("error")[0].is_valid:
        for _ in batches:
            pass
    yield out


def _check_partition(batches: Iterator[pa.RecordBatch], *, plan: _Plan
                     ) -> Iterator[pa.RecordBatch]:
    """The validation pass over one partition: row counts per file, or its first problem."""
    def body(pid: int) -> pa.RecordBatch:
        label = plan.schema.label
        classes = pa.array(label.classes, pa.string())
        strict = [c for c in plan.needed
                  if c != label.column and plan.schema.column(c).missing == "error"]
        counters: dict[int, int] = {}
        per_file: dict[int, int] = {}
        total = 0
        for batch in batches:
            for run in _runs(batch, plan, counters):
                part = _typed(batch, run, plan)
                where = RowPosition(plan.files.shown[run.file], run.row)  # type: ignore[arg-type]
                try:
                    if plan.label:
                        encode_label(part.column(label.column), label, where, classes)
                    for name in strict:
                        _raise_missing(part.column(name), name, where)
                except DataError as exc:
                    raise _PartitionError(exc.marked, run.file, run.row) from None
                per_file[run.file] = per_file.get(run.file, 0) + part.num_rows
                total += part.num_rows
        return _output(pid, rows=total, files=per_file)

    yield from _guarded(batches, body)


class _PartitionEncoder(BatchEncoder):
    """The local :class:`BatchEncoder`, told where each run of rows sits in the pass.

    ``seeds`` are the driver's (drawn from the run's generator as the local
    engine draws them); :meth:`seek` sets the file (for messages), the row in
    the file and the position in the whole pass (for the token cap) before
    each run. It sets BatchEncoder's position attributes; the parity tests
    in ``tests/spark`` fail if their meaning changes.
    """

    def __init__(self, schema: Schema, columns: Sequence[str], *, report: DataReport,
                 seeds: dict[str, int], with_label: bool = True) -> None:
        super().__init__(schema, columns, report=report, rng=np.random.default_rng(0),
                         with_label=with_label)
        self._seeds = dict(seeds)

    def seek(self, file: str, row_in_file: int, row_in_pass: int) -> None:
        self.file = file  # type: ignore[assignment]
        self._rows = row_in_pass
        self._file_start = row_in_pass - row_in_file


def _stats_partition(batches: Iterator[pa.RecordBatch], *, plan: _Plan, request: StatsRequest,
                     seeds: dict[str, int]) -> Iterator[pa.RecordBatch]:
    """One partition of the statistics pass: its accumulator state and data report."""
    def body(pid: int) -> pa.RecordBatch:
        report = DataReport()
        encoder = _PartitionEncoder(plan.schema, plan.needed, report=report, seeds=seeds,
                                    with_label=plan.label)
        acc = StatsAccumulator(plan.schema, request)
        counters: dict[int, int] = {}
        for batch in batches:
            for run in _runs(batch, plan, counters):
                part = _typed(batch, run, plan)
                encoder.seek(plan.files.shown[run.file], run.row,
                             plan.files.offsets[run.file] + run.row)
                try:
                    acc.update(encoder.encode(part))
                except DataError as exc:
                    raise _PartitionError(exc.marked, run.file, run.row) from None
        return _output(pid, rows=acc.n, state=dump_state(acc),
                       report=json.dumps(report.as_dict()))

    yield from _guarded(batches, body)


# ------------------------------------------------------------------ states


def dump_state(acc: StatsAccumulator) -> bytes:
    """A partial :class:`StatsAccumulator` as ``.npz`` bytes: numpy arrays only, no pickle.

    Keys follow the request's order (``c0``, ``h1``, ``m0_mean``, ``v0_2``,
    …), which :func:`load_state` rebuilds from the same request.
    """
    arrays: dict[str, np.ndarray] = {"n": np.array([acc.n], dtype=np.int64),
                                     "classes": acc.classes.counts}
    for i, con in enumerate(acc.contingency.values()):
        arrays[f"c{i}"] = con.table
    for i, hist in enumerate(acc.histograms.values()):
        arrays[f"h{i}"] = hist.table
    for i, mom in enumerate(acc.moments.values()):
        arrays[f"m{i}_count"], arrays[f"m{i}_mean"], arrays[f"m{i}_m2"] = (mom.count, mom.mean,
                                                                       mom.m2)
    for i, kept in enumerate(acc.values.values()):
        for k, parts in enumerate(kept.parts):
            arrays[f"v{i}_{k}"] = (np.concatenate(parts) if parts
                                   else np.empty(0, dtype=np.float64))
    if acc.joint is not None:
        compact = JointAccumulator(acc.joint.maps, acc.joint.n_classes)
        compact.merge(acc.joint)  # merging compacts the partial into distinct keys
        arrays["j_keys"] = np.concatenate(compact.keys) if compact.keys else np.zeros(
            0 if acc.joint.packed else (0, len(acc.joint.radix) + 1), dtype=np.int64)
        arrays["j_counts"] = (np.concatenate(compact.counts) if compact.counts
                              else np.zeros(0, dtype=np.int64))
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]  # numpy's stub: **kwds as allow_pickle
    return buf.getvalue()


def load_state(schema: Schema, request: StatsRequest, data: bytes) -> StatsAccumulator:
    """The accumulator :func:`dump_state` wrote (``allow_pickle=False``)."""
    acc = StatsAccumulator(schema, request)
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        acc.n = int(z["n"][0])
        acc.classes.counts = z["classes"].astype(np.int64)
        for i, con in enumerate(acc.contingency.values()):
            con.table = z[f"c{i}"].astype(np.int64)
        for i, hist in enumerate(acc.histograms.values()):
            hist.table = z[f"h{i}"].astype(np.int64)
        for i, mom in enumerate(acc.moments.values()):
            mom.count = z[f"m{i}_count"].astype(np.int64)
            mom.mean = z[f"m{i}_mean"].astype(np.float64)
            mom.m2 = z[f"m{i}_m2"].astype(np.float64)
        for i, kept in enumerate(acc.values.values()):
            kept.parts = [[z[f"v{i}_{k}"]] if len(z[f"v{i}_{k}"]) else []
                          for k in range(len(kept.parts))]
        if acc.joint is not None:
            keys, counts = z["j_keys"], z["j_counts"]
            if len(keys):
                acc.joint.keys, acc.joint.counts = [keys], [counts]
                acc.joint.pending = acc.joint.compacted = len(keys)
    return acc


def _report_from_dict(raw: dict[str, Any]) -> DataReport:
    report = DataReport(rows=int(raw.get("rows", 0)))
    for name, counts in raw.get("columns", {}).items():
        report.columns[name] = ColumnCounts(**counts)
    return report


# ------------------------------------------------------------------ the engine


class SparkEngine(Engine):
    """The statistics of a :class:`StatsRequest`, computed by Spark (see module docstring).

    Releases nothing: returns exact, private statistics to the caller, which
    adds noise through the mechanisms. ``rng`` only seeds the token cap (one
    draw per tokens column, as the local engine draws).
    """

    name: ClassVar[str] = "spark"

    def compute(self, source: Any, request: StatsRequest, *, rng: np.random.Generator,
                progress: Callable[[int], None] | None = None) -> Stats:
        """One Spark job over ``source``; ``progress(rows)`` once per merged partition.

        ``source`` is a :class:`SparkSource` (a local DataSource is read
        through Spark too). The request is validated before any data is read;
        a CSV source that has not been through :meth:`SparkSource.check_values`
        is checked first (its per-file row counts place rows in the pass).
        """
        require_pyspark()
        if isinstance(source, DataSource):
            source = SparkSource(source.path, source.schema, batch_rows=source.batch_rows,
                                 label=source.label)
        if not isinstance(source, SparkSource):
            raise UsageError("the Spark engine reads a SparkSource "
                             "(dpcli.run.prepare_source(..., engine='spark'))")
        request.validate(source.schema)
        columns = request.columns()
        source.check_structure(columns)
        needed = source.needed_columns(columns)
        if source._file_rows is None:
            source.check_values(columns)
        expected = source.num_rows_hint()
        # the seeds of the token cap, drawn from rng exactly as the local engine draws them
        seeds = dict(BatchEncoder(source.schema, needed, report=DataReport(), rng=rng,
                                  with_label=source.label)._seeds)
        frame = source.frame(needed, positions=False)  # lazy: nothing is read yet
        types = {f.name: f.dataType for f in frame.schema.fields}
        if native.supported(source.schema, request, needed, types, fmt=source.format or "",
                            label=source.label):
            # Spark's own aggregations: only per-(class, column, level) groups come back
            try:
                stats, _ = native.aggregate(frame, source.schema, request, needed)
            except DataError:
                raise
            except Exception as exc:
                raise DataError(f"{source.path}: Spark could not compute the statistics "
                                f"({_java_class(exc)}); the files may be corrupt, unreadable "
                                "or changed") from None
            if expected is not None and stats.n != expected:
                raise DataError(f"{source.path}: the statistics pass read {stats.n:,} rows "
                                f"but the check counted {expected:,}; the data changed "
                                "during the run")
            stats.report.file = source.path  # type: ignore[assignment]
            source.report = stats.report
            if progress is not None:
                progress(stats.n)
            return stats
        plan = _Plan.build(source, needed, source.file_table())
        fn = functools.partial(_stats_partition, plan=plan, request=request, seeds=seeds)
        rows = source._job("compute the statistics", source.frame(needed), fn)
        total = StatsAccumulator(source.schema, request)
        report = DataReport(file=source.path)  # type: ignore[arg-type]
        for r in rows:
            part = load_state(source.schema, request, bytes(r["state"]))
            total.merge(part)
            report.merge(_report_from_dict(json.loads(r["report"])))
            if progress is not None:
                progress(part.n)
        if expected is not None and total.n != expected:
            raise DataError(f"{source.path}: the statistics pass read {total.n:,} rows but the "
                            f"check counted {expected:,}; the data changed during the run")
        source.report = report
        return total.result(report)

