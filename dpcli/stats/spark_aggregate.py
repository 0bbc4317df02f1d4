"""Spark's own aggregations for the statistics a Parquet pass needs (the fast path).

What it releases: nothing. It computes the same *exact, private* statistics
as the local engine — class counts, per-class contingency tables of
categorical and binary columns, per-class histograms and moments of numeric
columns, and the custodian's data report — with Spark SQL expressions and
one scan (two when moments are asked for), so that only a few hundred rows
(one per class, column and level or bin) reach the driver. Noise is added on
the driver afterwards, as for every engine (docs/design.md rule 3).

Why: running dpcli's accumulators in Python workers (``mapInArrow``) ships
every row through Arrow to a Python process; Spark's JVM aggregates the same
counts an order of magnitude faster and scales to a cluster without Python
on the hot path.

How the values match the local engine (:mod:`dpcli.data.encode`) exactly
(docs/spark.md says the same for users):

- every counted column gets a small integer key per row: a categorical or
  binary value its raw code + 2 (0 missing, 1 undeclared, 2 + index of the
  declared value), found in a literal map (:func:`_lookup`); a
  number ``4·bin + flag`` (:func:`_numeric_key`). The keys of consecutive
  columns are packed into one integer (at most PACK_LIMIT combinations), the
  rows are counted per (class, pack, packed key), and Spark unpacks and sums
  those groups per (class, column, key);
- the driver folds raw codes as the encoder does (categorical: undeclared
  and missing into ``other``; binary: undeclared → ``values[0]``, missing →
  ``fill_code``) and counts ``mapped_to_other`` / ``imputed`` from the same
  keys;
- values are compared as text, as :func:`dpcli.data.encode.to_text` writes
  them: strings as they are, integers in decimal, booleans as
  ``true``/``false`` (Spark's casts write exactly these). Columns of another Spark type
  (floats or binary used as categories, dates, ...) are not served here: the
  whole request then takes the Python path;
- numbers are cast to double (NaN or null → missing → ``fill_value``),
  flagged as imputed, clamped below or above, and binned by comparisons
  with the edges themselves (``searchsorted(edges, x, "right") − 1``, what
  :func:`dpcli.stats.accumulators.bin_index` computes), so a value on an
  edge lands where the edges say;
- moments: count = the class's rows (every row has a value after
  imputation), mean, and M2 = population variance × count of the clamped
  values, per class in a second aggregation (counts exact; means and M2 to
  float tolerance: Spark adds in another order).

What stays on the Python path (:func:`dpcli.stats.spark._stats_partition`),
and why: CSV input (its fields are typed by the local reader's rules —
trimming, null markers, pyarrow's number parser — which Spark's casts do not
reproduce exactly); tokens columns (the per-row cap keys each kept token on
the row's position in the pass and SplitMix64); kept values and joint tables
(they grow with the rows, not small statistics); unlabelled sources.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dpcli.data.report import DataReport
from dpcli.data.schema import (
    BinaryColumn,
    CategoricalColumn,
    Column,
    NumericColumn,
    Schema,
)
from dpcli.errors import DataError
from dpcli.stats.accumulators import bin_index, histogram_edges, n_levels
from dpcli.stats.engine import Moments, Stats, StatsRequest

if TYPE_CHECKING:
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import DataFrame

NOT_DECLARED = -1
MISSING = -2
# numeric entry flags (key = 4 * bin + flag)
IN_BOUNDS, IMPUTED, BELOW, ABOVE = 0, 1, 2, 3

_TEXT_TYPES = ("StringType", "VarcharType", "CharType")
_INTEGER_TYPES = ("ByteType", "ShortType", "IntegerType", "LongType")
_NUMBER_TYPES = (*_INTEGER_TYPES, "FloatType", "DoubleType", "DecimalType")


def _col(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _type_name(t: Any) -> str:
    return type(t).__name__


def _as_text(column: SparkColumn, spark_type: Any) -> SparkColumn | None:
    """The column as :func:`dpcli.data.encode.to_text` writes it, or None when Spark's
    text would differ (floats: Java and Arrow print non-integral doubles differently)."""
    name = _type_name(spark_type)
    if name in _TEXT_TYPES:
        return column
    if name in _INTEGER_TYPES or name == "BooleanType":
        return column.cast("string")  # decimal digits; "true"/"false" — Arrow's text too
    return None


def _lookup(text: SparkColumn, values: Sequence[str]) -> SparkColumn:
    """Raw code: index of the declared value, −1 undeclared, −2 missing (never null)."""
    from pyspark.sql import functions as F

    # one literal map, not a CASE per value: a chain of CASEs over every declared level of
    # every column outgrows the JVM's 64 KB method limit in Spark's generated code
    if not values:
        return F.when(text.isNull(), F.lit(MISSING)).otherwise(F.lit(NOT_DECLARED))
    table = F.create_map(*[x for k, v in enumerate(values) for x in (F.lit(v), F.lit(k))])
    return (F.when(text.isNull(), F.lit(MISSING))
            .otherwise(F.coalesce(F.element_at(table, text), F.lit(NOT_DECLARED)))
            .cast("int"))


def _code(column: SparkColumn, spark_type: Any, values: Sequence[str]) -> SparkColumn:
    """Raw code of a column whose type :func:`_as_text` serves (see :func:`_lookup`)."""
    text = _as_text(column, spark_type)
    assert text is not None
    return _lookup(text, values)


@dataclass(frozen=True)
class _Entry:
    feature: int
    column: Column | None  # None: the class counts' pseudo-column
    bins: int  # histogram bins (0: no histogram)
    radix: int  # number of keys: levels + 2 (categorical, binary) or 4 · max(bins, 1)


# the largest product of radices packed into one key: bounds the groups of a pack per class
PACK_LIMIT = 1 << 16


def supported(schema: Schema, request: StatsRequest, needed: Sequence[str],
              types: dict[str, Any], *, fmt: str, label: bool) -> bool:
    """Whether Spark's aggregations serve this request exactly (see module docstring)."""
    if fmt != "parquet" or not label or request.keep_values or request.joint:
        return False
    for name in needed:
        t = types.get(name)
        if t is None:
            return False
        if name == schema.label.column:
            if _as_text(_col(name), t) is None:
                return False
            continue
        col = schema.column(name)
        if isinstance(col, NumericColumn):
            if _type_name(t) not in _NUMBER_TYPES:
                return False
        elif isinstance(col, CategoricalColumn | BinaryColumn):
            if _as_text(_col(name), t) is None:
                return False
        else:  # tokens
            return False
    return True


def _clamped(x: SparkColumn, col: NumericColumn) -> SparkColumn:
    """The value as encode_numeric makes it: missing (null, NaN) → fill, clamped."""
    from pyspark.sql import functions as F

    raw = x.cast("double")
    lower, upper = float(col.lower), float(col.upper)
    # the fill value is declared inside the bounds (spec validation), so it is not clamped
    return (F.when(raw.isNull() | F.isnan(raw), F.lit(float(col.fill_value)))
            .when(raw < F.lit(lower), F.lit(lower))
            .when(raw > F.lit(upper), F.lit(upper))
            .otherwise(raw))


def _numeric_key(x: SparkColumn, col: NumericColumn, bins: int) -> SparkColumn:
    """``4 · bin + flag`` of a numeric column, as encode_numeric and bin_index compute them.

    One CASE over the raw value: missing (null, NaN) → the fill value's bin,
    flag IMPUTED; below or above the bounds → the first or last bin, flag
    BELOW or ABOVE; otherwise the bin ``searchsorted(edges, x, "right") − 1``
    (what bin_index computes) by comparisons with the edges themselves, so a
    value on an edge lands where the edges say. No clamped value is built
    (bins < 2: bin 0).
    """
    from pyspark.sql import functions as F

    raw = x.cast("double")
    lower, upper = float(col.lower), float(col.upper)
    bins = max(bins, 1)
    edges = histogram_edges(col, bins)
    fill_bin = int(bin_index(np.array([float(col.fill_value)]), edges)[0])
    key = (F.when(raw.isNull() | F.isnan(raw), F.lit(4 * fill_bin + IMPUTED))
           .when(raw < F.lit(lower), F.lit(BELOW))
           .when(raw > F.lit(upper), F.lit(4 * (bins - 1) + ABOVE)))
    for b in range(1, bins):
        key = key.when(raw < F.lit(float(edges[b])), F.lit(4 * (b - 1) + IN_BOUNDS))
    return key.otherwise(F.lit(4 * (bins - 1) + IN_BOUNDS))


def _packs(entries: Sequence[_Entry]) -> list[list[_Entry]]:
    """Consecutive entries grouped so that each group's radices multiply to at most
    PACK_LIMIT (an entry larger than that stands alone)."""
    packs: list[list[_Entry]] = []
    size = PACK_LIMIT + 1
    for e in entries:
        if size * e.radix > PACK_LIMIT:
            packs.append([])
            size = 1
        packs[-1].append(e)
        size *= e.radix
    return packs


def aggregate(df: DataFrame, schema: Schema, request: StatsRequest,
              needed: Sequence[str]) -> tuple[Stats, list[tuple[int, int, int, int]]]:
    """Exact statistics of ``request`` over ``df`` (the needed columns, Parquet-typed).

    One scan computes, per row, a small key per column — the raw code of a
    categorical or binary value (:func:`_lookup`), ``4·bin + flag`` of a
    numeric one (:func:`_numeric_key`) — and packs the keys of several columns
    into one integer (mixed radix, at most PACK_LIMIT combinations per pack).
    Why packs: Spark's cost is one hash-aggregate update per row per key, so
    14 columns in 4 packs make 4 updates, not 14, and a pack's groups stay
    bounded whatever the data. Spark then counts rows per (class, pack, packed
    key), unpacks the few groups into (class, column, key) and sums them: only
    those per-(class, column, level or bin) counts reach the driver, where the
    data report's imputed, clamped and unmapped counts are read off the keys.
    Moments (when requested) are a second, per-class aggregation: mean and
    population variance of the clamped values.

    Returns the statistics (data report included) and the count groups
    (class, column, key, count). Raises DataError when a label is missing or
    undeclared, or a value is missing in a column whose policy is ``error``
    (the pre-charge check passed, so the data changed during the run).
    """
    from pyspark.sql import functions as F

    label = schema.label
    types = {f.name: f.dataType for f in df.schema.fields}
    y = _code(_col(label.column), types[label.column], [str(c) for c in label.classes])
    hist = dict(request.histograms)
    entries: list[_Entry] = []
    keys = [y.alias("y")]
    moment_values = []
    for name in needed:
        if name == label.column:
            continue
        col = schema.column(name)
        i = len(entries)
        if isinstance(col, NumericColumn):
            bins = int(hist.get(name, 0))
            keys.append(_numeric_key(_col(name), col, bins).alias(f"k{i}"))
            entries.append(_Entry(i, col, bins, 4 * max(bins, 1)))
            if name in request.moments:
                moment_values.append((i, _clamped(_col(name), col)))
        else:
            values = (col.categories if isinstance(col, CategoricalColumn)
                      else col.values)  # type: ignore[union-attr]
            code = _code(_col(name), types[name], [str(v) for v in values])
            keys.append((code - F.lit(MISSING)).alias(f"k{i}"))  # 0 missing, 1 undeclared, …
            entries.append(_Entry(i, col, 0, len(values) + 2))
    # a pseudo-column whose only key is 0 (radix 1, free in any pack): its groups are the
    # class counts, also when the request counts nothing else
    rows_feature = len(entries)
    keys.append(F.lit(0).alias(f"k{rows_feature}"))
    packs = _packs([*entries, _Entry(rows_feature, None, 0, 1)])
    packed = []
    unpack = F.lit(None)
    for p, pack in enumerate(packs):
        key = F.lit(0).cast("long")
        stride = 1
        parts = []
        for e in reversed(pack):  # the first entry varies slowest
            key = key + F.col(f"k{e.feature}").cast("long") * F.lit(stride)
            parts.append(F.struct(F.lit(e.feature).alias("f"),
                                  F.pmod(F.expr(f"k div {stride}"),
                                         F.lit(e.radix)).cast("long").alias("key")))
            stride *= e.radix
        packed.append(F.struct(F.lit(p).alias("p"), key.alias("k")))
        unpack = F.when(F.col("p") == F.lit(p), F.array(*parts)).otherwise(unpack)
    codes = df.select(*keys)
    counted = (codes.select("y", F.inline(F.array(*packed))) if len(packed) > 1
               else codes.select("y", F.lit(0).alias("p"), packed[0]["k"].alias("k")))
    by_pack = counted.groupBy("y", "p", "k").count()
    rows = (by_pack.select("y", "count", F.inline(unpack))
            .groupBy("y", "f", "key").agg(F.sum("count").alias("n")).collect())
    groups = sorted((int(r["y"]), int(r["f"]), int(r["key"]), int(r["n"])) for r in rows)
    moments: list[dict[str, Any]] = []
    if moment_values:
        values = df.select(y.alias("y"), *[v.alias(f"v{i}") for i, v in moment_values])
        aggs = [x for i, _ in moment_values
                 for x in (F.avg(f"v{i}").alias(f"mean{i}"), F.var_pop(f"v{i}").alias(f"var{i}"))]
        moments = [r.asDict() for r in values.groupBy("y").agg(*aggs).collect()]
    return _fold(schema, request, needed, entries, rows_feature, groups, moments), groups


def _fold(schema: Schema, request: StatsRequest, needed: Sequence[str],
          entries: list[_Entry], rows_feature: int, groups: list[tuple[int, int, int, int]],
          moment_rows: list[dict[str, Any]]) -> Stats:
    """The statistics and data report from the count groups (class, column, key, count)
    and the per-class moment rows (means and population variances)."""
    label = schema.label
    k_classes = len(label.classes)
    if any(g[0] < 0 for g in groups) or any(int(r["y"]) < 0 for r in moment_rows):
        raise DataError(f"column '{label.column}': a label is missing or outside the "
                        "declared classes although the check before the run found none; "
                        "the data changed during the run")
    report = DataReport()
    for name in needed:
        if name != label.column:
            report.column(name, schema.column(name).kind)
    class_counts = np.zeros(k_classes, dtype=np.int64)
    by_feature: dict[int, list[tuple[int, int, int, int]]] = {}
    for g in groups:
        by_feature.setdefault(g[1], []).append(g)
    for y, _, _, n in by_feature.get(rows_feature, []):
        class_counts[y] += n
    stats = Stats(n=int(class_counts.sum()), class_counts=class_counts, report=report)
    report.rows = stats.n
    contingency = set(request.contingency)
    moments = set(request.moments)
    by_class = {int(r["y"]): r for r in moment_rows}
    for e in entries:
        col, mine, i = e.column, by_feature.get(e.feature, []), e.feature
        assert col is not None
        counts = report.column(col.name, col.kind)
        if isinstance(col, NumericColumn):
            flags = np.zeros(4, dtype=np.int64)
            for _, _, key, n in mine:
                flags[key % 4] += n
            if flags[IMPUTED] and col.missing != "impute":
                raise DataError(f"column '{col.name}': a value is missing although the check "
                                "before the run found none; the data changed during the run")
            counts.imputed += int(flags[IMPUTED])
            counts.clamped_below += int(flags[BELOW])
            counts.clamped_above += int(flags[ABOVE])
            if e.bins:
                table = np.zeros((k_classes, e.bins), dtype=np.int64)
                for y, _, key, n in mine:
                    table[y, key // 4] += n
                stats.histograms[col.name] = table
                stats.edges[col.name] = histogram_edges(col, e.bins)
            if col.name in moments:
                mean = np.zeros(k_classes, dtype=np.float64)
                m2 = np.zeros(k_classes, dtype=np.float64)
                for y, r in by_class.items():
                    mean[y] = float(r[f"mean{i}"])
                    m2[y] = float(r[f"var{i}"]) * int(class_counts[y])  # population var × n
                stats.moments[col.name] = Moments(count=class_counts.copy(), mean=mean, m2=m2)
            continue
        mine = [(y, f, key + MISSING, n) for y, f, key, n in mine]  # back to raw codes
        missing = sum(g[3] for g in mine if g[2] == MISSING)
        if missing and col.missing != "impute":
            raise DataError(f"column '{col.name}': a value is missing although the check "
                            "before the run found none; the data changed during the run")
        counts.imputed += missing
        counts.mapped_to_other += sum(g[3] for g in mine if g[2] == NOT_DECLARED)
        if col.name not in contingency:
            continue
        table = np.zeros((k_classes, n_levels(col)), dtype=np.int64)
        for y, _, key, n in mine:
            if isinstance(col, CategoricalColumn):
                code = key if key >= 0 else len(col.categories)
            else:
                assert isinstance(col, BinaryColumn)
                code = key if key >= 0 else (col.fill_code if key == MISSING else 0)
            table[y, code] += n
        stats.contingency[col.name] = table
    # the request's order, as the local engine's dicts have it
    stats.contingency = {c: stats.contingency[c] for c in request.contingency}
    stats.histograms = {c: stats.histograms[c] for c, _ in request.histograms}
    stats.edges = {c: stats.edges[c] for c, _ in request.histograms}
    stats.moments = {c: stats.moments[c] for c in request.moments}
    return stats


def check_labels_and_missing(df: DataFrame, schema: Schema, needed: Sequence[str],
                             file_column: str) -> tuple[dict[str, int], int] | None:
    """The pre-charge check of a Parquet source by Spark's aggregations.

    Returns (rows per file URI, number of problems): a problem is a missing
    or undeclared label, or a missing value in a column whose policy is
    ``error``. Only counts reach the driver; the caller re-runs the Python
    check (which names file, column and row) when there is a problem. None
    when a column's type is not served here (the caller uses the Python check).
    """
    from pyspark.sql import functions as F

    label = schema.label
    types = {f.name: f.dataType for f in df.schema.fields}
    if _as_text(_col(label.column), types[label.column]) is None:
        return None
    bad = _code(_col(label.column), types[label.column], [str(c) for c in label.classes]) < 0
    for name in needed:
        if name == label.column or schema.column(name).missing != "error":
            continue
        # missing as the local check sees it: null, or NaN in a floating column
        if _type_name(types[name]) in ("FloatType", "DoubleType"):
            bad = bad | _col(name).isNull() | F.isnan(_col(name))
        else:
            bad = bad | _col(name).isNull()
    rows = (df.groupBy(F.col(file_column).alias("file"))
            .agg(F.count(F.lit(1)).alias("n"),
                 F.sum(bad.cast("long")).alias("bad")).collect())
    return ({r["file"]: int(r["n"]) for r in rows},
            sum(int(r["bad"] or 0) for r in rows))


def footers_prove_clean(schema: Schema, needed: Sequence[str],
                        footers: Sequence[Any]) -> bool:
    """Whether the Parquet footers alone show that the pre-charge check would pass.

    True when, in every row group of every file, each needed column has a
    recorded null count of 0 (``error`` policy; a floating column never
    qualifies, since NaN is missing too and not counted as null) and the
    label's recorded min and max leave only declared classes: an integer
    label whose every integer in [min, max] is a class (as text), or a
    label whose min equals its max and is a class. Then no value needs to be
    read before the charge. Why trust the statistics: every Parquet reader,
    Spark included, skips row groups by them; and the statistics pass checks
    every label and missing value again (a lying footer makes the run fail
    after the charge, releasing nothing). Anything not recorded → False (the
    values are read).
    """
    import pyarrow as pa

    label = schema.label.column
    classes = {str(c) for c in schema.label.classes}
    for meta in footers:
        arrow = meta.schema.to_arrow_schema()
        index = {meta.schema.column(j).path: j for j in range(meta.num_columns)}
        for name in needed:
            if name not in index or arrow.get_field_index(name) < 0:
                return False
            t = arrow.field(name).type
            if pa.types.is_floating(t) or pa.types.is_dictionary(t):
                return False
            for g in range(meta.num_row_groups):
                stats = meta.row_group(g).column(index[name]).statistics
                if stats is None or not stats.has_null_count or stats.null_count != 0:
                    return False
                if name != label:
                    continue
                if not stats.has_min_max:
                    return False
                lo, hi = stats.min, stats.max
                if pa.types.is_integer(t):
                    if hi - lo > len(classes) or any(str(v) not in classes
                                                     for v in range(lo, hi + 1)):
                        return False
                elif pa.types.is_string(t) or pa.types.is_large_string(t):
                    if lo != hi or str(lo) not in classes:
                        return False
                else:
                    return False
    return True
