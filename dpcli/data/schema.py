"""The public schema: declared domains of every column a run may read.

Nothing here is ever read off the data (docs/design.md rule 2). Numeric bounds,
category sets, binary values, vocabularies and the label's classes come
from the spec (or a schema file it names). Values outside a declared domain
are clamped or mapped to an explicit ``other`` level by the data layer and
counted in the run report.

Missing values follow a declared policy: ``error`` (the default) or
``impute`` (numeric and binary -> the declared ``fill``, categorical ->
``other``, tokens -> no tokens). Rows are never dropped: dropping would make
the number of records a run sees data-dependent and break the replace-one
neighbouring relation that every sensitivity assumes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpcli import checks
from dpcli.checks import Where

MISSING_POLICIES = ("error", "impute")
OTHER = "other"


@dataclass(frozen=True)
class NumericColumn:
    """A real-valued column clamped into the declared ``[lower, upper]``."""

    name: str
    lower: float
    upper: float
    missing: str = "error"
    fill: float | None = None
    taxonomy: Any = None

    kind = "numeric"

    @property
    def fill_value(self) -> float:
        return (self.lower + self.upper) / 2 if self.fill is None else self.fill

    @property
    def width(self) -> float:
        return self.upper - self.lower


@dataclass(frozen=True)
class CategoricalColumn:
    """A column over declared categories; anything else maps to the ``other`` level.

    Levels are ``categories + ("other",)``: code ``len(categories)`` is ``other``.
    """

    name: str
    categories: tuple[str, ...]
    missing: str = "error"
    taxonomy: Any = None

    kind = "categorical"

    @property
    def levels(self) -> tuple[str, ...]:
        return (*self.categories, OTHER)


@dataclass(frozen=True)
class BinaryColumn:
    """A two-valued column encoded 0 (``values[0]``) / 1 (``values[1]``).

    A value outside the pair is mapped to ``values[0]`` and counted; a binary
    column has no ``other`` level (declare it categorical if you need one).
    """

    name: str
    values: tuple[str, str] = ("0", "1")
    missing: str = "error"
    fill: str | None = None

    kind = "binary"

    @property
    def levels(self) -> tuple[str, ...]:
        return self.values

    @property
    def fill_code(self) -> int:
        return 0 if self.fill is None else self.values.index(self.fill)


@dataclass(frozen=True)
class TokensColumn:
    """A list-of-strings column read against a declared public vocabulary.

    Each row counts as the *set* of its in-vocabulary tokens; tokens outside
    the vocabulary are dropped and counted. With ``max_per_row = r`` a row
    with more than r distinct tokens keeps a uniformly random r of them, so
    one record touches at most r vocabulary entries.
    """

    name: str
    vocabulary: tuple[str, ...]
    vocabulary_file: Path = field(compare=False)
    max_per_row: int | None = None
    missing: str = "error"

    kind = "tokens"

    @property
    def levels(self) -> tuple[str, ...]:
        return self.vocabulary


Column = NumericColumn | CategoricalColumn | BinaryColumn | TokensColumn


@dataclass(frozen=True)
class Label:
    """The label column and its declared classes (class code = index in ``classes``)."""

    column: str
    classes: tuple[str, ...]
    positive: str | None = None
    # Whether the spec declares the label public knowledge (``label: public: true``), says
    # it is private (``false``), or says nothing (None: private). Only a command that can use
    # a public label (train-brc's Algorithm 2) reads it; every other command protects it.
    public: bool | None = field(default=None, compare=False)
    # "int" when the spec lists the classes as integers ([0, 1]): classes are compared as
    # text everywhere, but `predict` writes its prediction (and a text label column) back as
    # integers, so that a 0/1 label stays numeric in the user's own tools.
    class_type: str = field(default="string", compare=False)

    @property
    def positive_index(self) -> int | None:
        return None if self.positive is None else self.classes.index(self.positive)


@dataclass(frozen=True)
class Schema:
    """Declared columns (in spec order) and the label."""

    columns: tuple[Column, ...]
    label: Label
    source: Path | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {c.name: c for c in self.columns})

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column:
        """The declared column ``name`` (KeyError if it is not declared)."""
        return self._by_name[name]  # type: ignore[attr-defined]

    def has(self, name: str) -> bool:
        return name in self._by_name  # type: ignore[attr-defined]

    @property
    def n_classes(self) -> int:
        return len(self.label.classes)


_COLUMN_KEYS = {
    "numeric": {"type", "bounds", "missing", "fill", "taxonomy"},
    "categorical": {"type", "categories", "missing", "taxonomy"},
    "binary": {"type", "values", "missing", "fill"},
    "tokens": {"type", "vocabulary", "max_per_row", "missing"},
}


def parse_label(raw: Any, where: Where) -> Label:
    raw = checks.mapping(raw, where, allowed={"column", "classes", "positive", "public"},
                         required={"column", "classes"})
    column = checks.string(raw["column"], where / "column")
    classes = checks.scalar_list(raw["classes"], where / "classes", min_len=2)
    positive = None
    if "positive" in raw:
        positive = checks.scalar_label(raw["positive"], where / "positive")
        if positive not in classes:
            raise (where / "positive").error(
                f"{positive!r} is not one of the declared classes {list(classes)}")
    elif len(classes) == 2:
        positive = classes[1]
    public = None
    if "public" in raw:
        if not isinstance(raw["public"], bool):
            raise (where / "public").error(
                "must be true (the label is public knowledge and not protected) or false")
        public = raw["public"]
    listed = raw["classes"]
    class_type = "int" if all(isinstance(v, int) and not isinstance(v, bool)
                              for v in listed) else "string"
    return Label(column=column, classes=classes, positive=positive, public=public,
                 class_type=class_type)


def parse_schema(raw: Any, where: Where, label: Label) -> Schema:
    """Parse a ``schema`` mapping, or load it from the file a string names."""
    if isinstance(raw, str):
        path = checks.resolve_path(raw, where)
        if not path.is_file():
            raise where.error(f"cannot read file {path}: no such file")
        raw, where = checks.load_yaml(path), Where(path)
    raw = checks.mapping(raw, where, allowed={"columns", "missing"}, required={"columns"})
    default_missing = "error"
    if "missing" in raw:
        default_missing = checks.choice(raw["missing"], where / "missing", MISSING_POLICIES)
    cols_where = where / "columns"
    cols = checks.mapping(raw["columns"], cols_where)
    if not cols:
        raise cols_where.error("declares no columns")
    columns = []
    for name, spec in cols.items():
        if name == label.column:
            raise (cols_where / name).error(
                "is the label column: declare it under 'label', not as a feature")
        columns.append(_parse_column(name, spec, cols_where / name, default_missing))
    return Schema(columns=tuple(columns), label=label, source=where.file)


def _parse_column(name: str, raw: Any, where: Where, default_missing: str) -> Column:
    raw = checks.mapping(raw, where)
    if "type" not in raw:
        raise (where / "type").error(f"is required (one of {', '.join(_COLUMN_KEYS)})")
    kind = checks.choice(raw["type"], where / "type", tuple(_COLUMN_KEYS))
    checks.mapping(raw, where, allowed=_COLUMN_KEYS[kind])
    missing = default_missing
    if "missing" in raw:
        missing = checks.choice(raw["missing"], where / "missing", MISSING_POLICIES)
    if kind == "numeric":
        return _parse_numeric(name, raw, where, missing)
    if kind == "categorical":
        if "categories" not in raw:
            raise (where / "categories").error("is required for a categorical column")
        categories = checks.scalar_list(raw["categories"], where / "categories")
        if OTHER in categories:
            raise (where / "categories").error(
                f"must not list {OTHER!r}: every categorical column has an implicit "
                f"{OTHER!r} level, for undeclared values and for a value {OTHER!r} in the "
                f"data alike; delete {OTHER!r} from the list (a real category named "
                f"{OTHER!r} is counted in that level, with the values left undeclared)")
        return CategoricalColumn(name, categories, missing, _taxonomy(raw, where))
    if kind == "binary":
        values: tuple[str, ...] = ("0", "1")
        if "values" in raw:
            values = checks.scalar_list(raw["values"], where / "values", min_len=2)
            if len(values) != 2:
                raise (where / "values").error("must list exactly two values")
        fill = None
        if "fill" in raw:
            fill = checks.scalar_label(raw["fill"], where / "fill")
            if fill not in values:
                raise (where / "fill").error(f"must be one of {list(values)}")
        return BinaryColumn(name, (values[0], values[1]), missing, fill)
    return _parse_tokens(name, raw, where, missing)


def _parse_numeric(name: str, raw: Mapping[str, Any], where: Where, missing: str) -> NumericColumn:
    if "bounds" not in raw:
        raise (where / "bounds").error(
            "is required: declare [lower, upper] from the domain, never from the data")
    bounds = raw["bounds"]
    if not isinstance(bounds, list) or len(bounds) != 2:
        raise (where / "bounds").error("must be a list of two numbers [lower, upper]")
    lower = checks.number(bounds[0], where / "bounds" / 0)
    upper = checks.number(bounds[1], where / "bounds" / 1)
    if not lower < upper:
        raise (where / "bounds").error(f"lower bound {lower} must be below upper bound {upper}")
    fill = None
    if "fill" in raw:
        fill = checks.number(raw["fill"], where / "fill")
        if not lower <= fill <= upper:
            raise (where / "fill").error(f"must lie within the bounds [{lower}, {upper}]")
    return NumericColumn(name, float(lower), float(upper), missing,
                         None if fill is None else float(fill), _taxonomy(raw, where))


def _taxonomy(raw: Mapping[str, Any], where: Where) -> Any:
    """A generalisation hierarchy: nested groups inline, or the path of a public file.

    Kept as declared for the subcommands that use hierarchies (publish-grid).
    """
    if "taxonomy" not in raw:
        return None
    value = raw["taxonomy"]
    if isinstance(value, str):
        path = checks.resolve_path(value, where / "taxonomy")
        if not path.is_file():
            raise (where / "taxonomy").error(f"cannot read file {path}: no such file")
        return path
    if isinstance(value, Mapping) and value:
        return value
    raise (where / "taxonomy").error(
        "must be a mapping of nested groups or the path of a hierarchy file")


def _parse_tokens(name: str, raw: Mapping[str, Any], where: Where, missing: str) -> TokensColumn:
    if "vocabulary" not in raw:
        raise (where / "vocabulary").error(
            "is required: a file of public words, one per line (never built from the data)")
    path = checks.resolve_path(raw["vocabulary"], where / "vocabulary")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise (where / "vocabulary").error(
            f"cannot read vocabulary file {path}: {exc.strerror}") from None
    words: list[str] = []
    seen: set[str] = set()
    for line in text.splitlines():
        word = line.strip()
        if word and word not in seen:
            seen.add(word)
            words.append(word)
    if not words:
        raise (where / "vocabulary").error(f"vocabulary file {path} lists no words")
    cap = None
    if "max_per_row" in raw:
        cap = checks.integer(raw["max_per_row"], where / "max_per_row", minimum=1)
    return TokensColumn(name, tuple(words), path, cap, missing)


def schema_to_dict(schema: Schema) -> dict[str, Any]:
    """The public schema as plain JSON data (models carry it so predict needs no spec).

    Vocabularies are embedded as word lists: they are public by declaration.
    """
    cols: dict[str, Any] = {}
    for c in schema.columns:
        if isinstance(c, NumericColumn):
            cols[c.name] = {"type": "numeric", "bounds": [c.lower, c.upper], "missing": c.missing,
                            "fill": c.fill}
        elif isinstance(c, CategoricalColumn):
            cols[c.name] = {"type": "categorical", "categories": list(c.categories),
                            "missing": c.missing}
        elif isinstance(c, BinaryColumn):
            cols[c.name] = {"type": "binary", "values": list(c.values), "missing": c.missing,
                            "fill": c.fill}
        else:
            cols[c.name] = {"type": "tokens", "vocabulary": list(c.vocabulary),
                            "vocabulary_file": c.vocabulary_file.name,
                            "max_per_row": c.max_per_row, "missing": c.missing}
    label = schema.label
    typed = {"class_type": label.class_type} if label.class_type != "string" else {}
    return {"label": {"column": label.column, "classes": list(label.classes),
                      "positive": label.positive, **typed},
            "columns": cols}


def schema_from_dict(data: Any, source: Path) -> Schema:
    """Inverse of :func:`schema_to_dict`; a SpecError naming ``source`` if malformed."""
    where = Where(source, "payload.schema")
    try:
        lab = data["label"]
        label = Label(str(lab["column"]), tuple(str(c) for c in lab["classes"]),
                      None if lab["positive"] is None else str(lab["positive"]),
                      class_type="int" if lab.get("class_type") == "int" else "string")
        columns: list[Column] = []
        for name, c in data["columns"].items():
            kind = c["type"]
            if kind == "numeric":
                columns.append(NumericColumn(name, float(c["bounds"][0]), float(c["bounds"][1]),
                                             c["missing"], c["fill"]))
            elif kind == "categorical":
                columns.append(CategoricalColumn(name, tuple(c["categories"]), c["missing"]))
            elif kind == "binary":
                columns.append(BinaryColumn(name, (c["values"][0], c["values"][1]),
                                            c["missing"], c["fill"]))
            elif kind == "tokens":
                columns.append(TokensColumn(name, tuple(c["vocabulary"]),
                                            Path(c["vocabulary_file"]), c["max_per_row"],
                                            c["missing"]))
            else:
                raise where.error(f"column {name!r} has unknown type {kind!r}")
    except (KeyError, TypeError, IndexError, AttributeError) as exc:
        raise where.error(f"malformed schema in model file ({type(exc).__name__}: {exc})") from None
    return Schema(columns=tuple(columns), label=label, source=source)
