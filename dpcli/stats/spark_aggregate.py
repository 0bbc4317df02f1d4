"""Spark's own aggregations for the statistics a Parquet pass needs (the fast path).

What it releases: nothing. It computes the same *exact, private* statistics
as the local engine — class counts, per-class contingency tables of
categorical and binary columns, per-class histograms and moments of numeric
columns, and the custodian's data report — with Spark SQL expressions and
two ``groupBy`` aggregations, so that only a few hundred rows (one per class,
column and level or bin, and one per class) reach the driver. Noise is
added on the driver afterwards, as for every engine (docs/design.md rule 3).

Why: running dpcli's accumulators in Python workers (``mapInArrow``) ships
every row through Arrow to a Python process; Spark's JVM aggregates the same
counts an order of magnitude faster and scales to a cluster without Python
on the hot path.

How the values match the local engine (:mod:`dpcli.data.encode`) exactly:

- for the counts, a row becomes one *entry* per categorical or binary
  column and per histogram (``inline`` of an array of structs ``(feature,
  key)``), and the entries are counted per ``(class, feature, key)``; the
  numeric columns are aggregated per class without exploding the rows:
  mean, population variance (Spark's stable central-moment aggregate) and
  the number of imputed and clamped values;
- categorical and binary keys are the *raw* lookup code: the index of the
  declared value, −1 for an undeclared value, −2 for a missing one. The
  driver folds them as the encoder does (categorical: both into ``other``;
  binary: undeclared → ``values[0]``, missing → ``fill_code``) and counts
  ``mapped_to_other`` / ``imputed`` from the same keys;
- values are compared as text, as :func:`dpcli.data.encode.to_text` writes
  them: strings as they are, integers in decimal, booleans as
  ``true``/``false`` (Spark's casts write exactly these). Columns of another
  Spark type (floats or binary used as categories, dates, ...) are not
  served here: the whole request then takes the Python path;
- numeric keys are ``4·bin + flag`` (flag 0 in bounds, 1 imputed, 2 clamped
  below, 3 clamped above); the value is cast to double (NaN or null →
  missing → ``fill_value``), clamped into the declared bounds, and binned by
  the arithmetic of :func:`dpcli.stats.accumulators.bin_index` (the same
  IEEE operations) followed by two corrections against the edges, so a
  value on an edge lands where the edges say;
- moments: count = the class's rows (every row has a value after
  imputation), mean, and M2 = variance × count (counts exact; means and M2
  to float tolerance: Spark adds in another order).

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

from dpcli.data.encode import INTEGER_TEXT, INTEGRAL_FLOAT_TEXT
from dpcli.data.report import DataReport
from dpcli.data.schema import (
    BinaryColumn,
    CategoricalColumn,
    Column,
    NumericColumn,
    Schema,
)
from dpcli.errors import DataError
from dpcli.stats.accumulators import histogram_edges, n_levels
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
    found = F.element_at(table, text)
    if any(INTEGER_TEXT.fullmatch(v) for v in values):
        # "1.0" finds a declared "1" as the local encoder's _integral_text_codes does; only
        # where an integer is declared (elsewhere no text can match: the regexes would cost
        # every row of a word column, 3× the whole select-features at 10^7 rows)
        whole = F.regexp_replace(F.regexp_replace(text, r"\.0+\z", ""), r"^-0\z", "0")
        found = F.when(found.isNull() & text.rlike(INTEGRAL_FLOAT_TEXT),
                       F.element_at(table, whole)).otherwise(found)
    return (F.when(text.isNull(), F.lit(MISSING))
            .otherwise(F.coalesce(found, F.lit(NOT_DECLARED)))
            .cast("int"))


@dataclass(frozen=True)
class _Entry:
    feature: int
    column: Column
    bins: int  # histogram bins (0: no histogram)


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


def _numeric_entry(x: SparkColumn, col: NumericColumn, bins: int
                   ) -> tuple[SparkColumn | None, SparkColumn, SparkColumn]:
    """(bin or None, flag, clamped value) of a numeric column, as encode_numeric and
    bin_index compute them."""
    from pyspark.sql import functions as F

    raw = x.cast("double")
    missing = raw.isNull() | F.isnan(raw)
    lower, upper = float(col.lower), float(col.upper)
    value = (F.when(missing, F.lit(float(col.fill_value)))
             .when(raw < F.lit(lower), F.lit(lower))
             .when(raw > F.lit(upper), F.lit(upper))
             .otherwise(raw))
    # the fill value is declared inside the bounds (spec validation), so it is not clamped
    flag = (F.when(missing, F.lit(IMPUTED)).when(raw < F.lit(lower), F.lit(BELOW))
            .when(raw > F.lit(upper), F.lit(ABOVE)).otherwise(F.lit(IN_BOUNDS)))
    if bins < 1:
        return None, flag, value
    if bins == 1:
        return F.lit(0).cast("long"), flag, value
    edges = histogram_edges(col, bins)
    scale = bins / (upper - lower) if upper > lower else 0.0
    b = ((value - F.lit(lower)) * F.lit(scale)).cast("long")  # >= 0: truncation is floor
    b = F.least(F.greatest(b, F.lit(0)), F.lit(bins - 1))
    table = F.array(*[F.lit(float(e)) for e in edges])

    def edge(i: SparkColumn) -> SparkColumn:
        return F.element_at(table, (i + 1).cast("int"))  # 1-based

    for _ in range(2):  # rounding puts a value at most one bin off; the edges decide
        down = (value < edge(b)).cast("long")
        up = ((b < F.lit(bins - 1)) & (value >= edge(F.least(b + 1, F.lit(bins))))).cast("long")
        b = b - down + up
    return b.cast("long"), flag, value


def aggregate(df: DataFrame, schema: Schema, request: StatsRequest,
              needed: Sequence[str]) -> tuple[Stats, list[tuple[int, int, int, int]]]:
    """Exact statistics of ``request`` over ``df`` (the needed columns, Parquet-typed).

    Two aggregations over one projection of codes, values and flags (why two:
    exploding a row into one entry per column multiplies the rows the hash
    aggregate sees, which costs more than a second scan of a few columns):

    - per (class, column, key) counts of the categorical and binary raw codes
      and of the histogram bins (rows exploded by ``inline``);
    - per class: the row count, and per numeric column the mean, the
      population variance and the number of imputed and clamped values.

    Only those groups reach the driver. Returns the statistics (data report
    included) and the count groups (class, column, key, count). Raises
    DataError when a label is missing or undeclared, or a value is missing in
    a column whose policy is ``error`` (the pre-charge check passed, so the
    data changed during the run).
    """
    from pyspark.sql import functions as F

    label = schema.label
    types = {f.name: f.dataType for f in df.schema.fields}
    text = _as_text(_col(label.column), types[label.column])
    assert text is not None
    y = _lookup(text, [str(c) for c in label.classes])
    hist = dict(request.histograms)
    entries: list[_Entry] = []
    keys, structs, per_class = [y.alias("y")], [], [F.count(F.lit(1)).alias("n")]
    for name in needed:
        if name == label.column:
            continue
        col = schema.column(name)
        i = len(entries)
        if isinstance(col, NumericColumn):
            bins = int(hist.get(name, 0))
            key, flag, value = _numeric_entry(_col(name), col, bins)
            keys += [flag.alias(f"g{i}"), value.alias(f"v{i}")]
            if key is not None:
                keys.append(key.alias(f"k{i}"))
            bins = bins if key is not None else 0
            per_class += [F.avg(f"v{i}").alias(f"mean{i}"), F.var_pop(f"v{i}").alias(f"var{i}")]
            per_class += [F.count_if(F.col(f"g{i}") == F.lit(g)).alias(f"g{i}_{g}")
                          for g in (IMPUTED, BELOW, ABOVE)]
        else:
            values = (col.categories if isinstance(col, CategoricalColumn)
                      else col.values)  # type: ignore[union-attr]
            t = _as_text(_col(name), types[name])
            assert t is not None
            keys.append(_lookup(t, [str(v) for v in values]).cast("long").alias(f"k{i}"))
            bins = 0
        entries.append(_Entry(i, col, bins))
        if bins or not isinstance(col, NumericColumn):  # counted per key
            structs.append(F.struct(F.lit(i).alias("f"), F.col(f"k{i}").alias("k")))
    codes = df.select(*keys)  # codes first: small generated methods, each value computed once
    groups: list[tuple[int, int, int, int]] = []
    if structs:
        rows = (codes.select("y", F.inline(F.array(*structs)))
                .groupBy("y", "f", "k").count().collect())
        groups = sorted((int(r["y"]), int(r["f"]), int(r["k"]), int(r["count"])) for r in rows)
    classes = sorted((r.asDict() for r in codes.groupBy("y").agg(*per_class).collect()),
                     key=lambda r: int(r["y"]))
    return _fold(schema, request, needed, entries, groups, classes), groups


def _fold(schema: Schema, request: StatsRequest, needed: Sequence[str],
          entries: list[_Entry], groups: list[tuple[int, int, int, int]],
          classes: list[dict[str, Any]]) -> Stats:
    """The statistics and data report from the count groups (class, column, key, count)
    and the per-class rows (count, means, variances, flag counts)."""
    label = schema.label
    k_classes = len(label.classes)
    if any(int(r["y"]) < 0 for r in classes):
        raise DataError(f"column '{label.column}': a label is missing or outside the "
                        "declared classes although the check before the run found none; "
                        "the data changed during the run")
    report = DataReport()
    for name in needed:
        if name != label.column:
            report.column(name, schema.column(name).kind)
    class_counts = np.zeros(k_classes, dtype=np.int64)
    for r in classes:
        class_counts[int(r["y"])] = int(r["n"])
    stats = Stats(n=int(class_counts.sum()), class_counts=class_counts, report=report)
    report.rows = stats.n
    by_feature: dict[int, list[tuple[int, int, int, int]]] = {}
    for g in groups:
        by_feature.setdefault(g[1], []).append(g)
    contingency = set(request.contingency)
    moments = set(request.moments)
    for e in entries:
        col, mine, i = e.column, by_feature.get(e.feature, []), e.feature
        counts = report.column(col.name, col.kind)
        if isinstance(col, NumericColumn):
            missing = sum(int(r[f"g{i}_{IMPUTED}"]) for r in classes)
            if missing and col.missing != "impute":
                raise DataError(f"column '{col.name}': a value is missing although the check "
                                "before the run found none; the data changed during the run")
            counts.imputed += missing
            counts.clamped_below += sum(int(r[f"g{i}_{BELOW}"]) for r in classes)
            counts.clamped_above += sum(int(r[f"g{i}_{ABOVE}"]) for r in classes)
            if e.bins:
                table = np.zeros((k_classes, e.bins), dtype=np.int64)
                for y, _, key, n in mine:
                    table[y, key] += n
                stats.histograms[col.name] = table
                stats.edges[col.name] = histogram_edges(col, e.bins)
            if col.name in moments:
                mean = np.zeros(k_classes, dtype=np.float64)
                m2 = np.zeros(k_classes, dtype=np.float64)
                for r in classes:
                    y = int(r["y"])
                    mean[y] = float(r[f"mean{i}"])
                    m2[y] = float(r[f"var{i}"]) * int(r["n"])  # population variance × n
                stats.moments[col.name] = Moments(count=class_counts.copy(), mean=mean, m2=m2)
            continue
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
    text = _as_text(_col(label.column), types[label.column])
    if text is None:
        return None
    bad = _lookup(text, [str(c) for c in label.classes]) < 0
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
