"""The YAML spec: one private dataset, its public schema and the budget that protects it.

A spec names the dataset (the ledger's key), its lifetime budget, the ledger
path, the label, the schema (inline or a file) and one section per
subcommand. It is parsed with ``yaml.safe_load`` into frozen dataclasses;
every error names the file and the key path and exits with code 2, before
anything is charged.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dpcli import checks, params
from dpcli.budget import Budget
from dpcli.checks import Where
from dpcli.data.schema import (
    BinaryColumn,
    CategoricalColumn,
    NumericColumn,
    Schema,
    TokensColumn,
    parse_label,
    parse_schema,
)
from dpcli.errors import SpecError, UsageError

_DATASET_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclass(frozen=True)
class TabulateSection:
    """``tabulate``: noisy per-class counts of declared columns."""

    epsilon: float
    columns: tuple[str, ...] = ()
    bins: int = 10


@dataclass(frozen=True)
class TrainNBSection:
    """``train-nb``: None leaves a value to ``naive_bayes.NBConfig``'s default."""

    epsilon: float
    method: str | None = None
    columns: tuple[str, ...] = ()
    r: int | None = None
    trim: float | None = None
    distribution: str | None = None
    smoothing: float | None = None
    split: tuple[tuple[str, float], ...] = ()   # only the parts the spec sets
    threshold: str | None = None   # balanced, accuracy or none (false)
    numeric: str | None = None     # auto, histogram or gaussian
    bins: int | None = None        # a numeric histogram's bins (None: the rule)

    def config_values(self) -> dict[str, Any]:
        """The section's NBConfig fields that were set (a partial split: weight 1 elsewhere)."""
        from dpcli.params import EQUAL_SPLIT

        out = _set(self, ("method", "trim", "distribution", "smoothing", "threshold", "numeric",
                          "bins"))
        if self.split:
            out["split"] = {**EQUAL_SPLIT, **dict(self.split)}
        return out


@dataclass(frozen=True)
class SelectFeaturesSection:
    """``select-features``: None leaves a value to ``feature_selection.FSConfig``'s default."""

    epsilon: float
    score: str | None = None
    method: str | None = None
    threshold: float | None = None
    k: int | None = None
    r: int | None = None
    bins: int | None = None
    centers: int | None = None
    rounds: int | None = None
    columns: tuple[str, ...] = ()
    min_effect: float | None = None
    allow_noise: bool | None = None

    def config_values(self) -> dict[str, Any]:
        """The section's FSConfig fields that were set."""
        return _set(self, ("score", "method", "threshold", "k", "r", "bins", "centers",
                           "rounds", "min_effect", "allow_noise"))


def _set(section: Any, names: tuple[str, ...]) -> dict[str, Any]:
    return {n: getattr(section, n) for n in names if getattr(section, n) is not None}


@dataclass(frozen=True)
class ScoreSource:
    """Where evaluation scores come from when no model is given: a column and its range."""

    score_column: str | None = None
    score_range: tuple[float, float] | None = None


@dataclass(frozen=True)
class RocSection(ScoreSource):
    """``roc``: PriROC private ROC curves; None leaves a value to ``roc.ROCConfig``'s default."""

    epsilon: float = 1.0
    thresholds: str | None = None
    k: int | None = None
    alpha: float | None = None
    counts: str | None = None
    threshold_share: float | None = None
    branching: int | None = None
    auc_share: float | None = None
    transform: str | None = None   # logit | identity (roc_scale); not a ROCConfig field

    def config_values(self) -> dict[str, Any]:
        """The section's ROCConfig fields that were set."""
        return _set(self, ("thresholds", "k", "alpha", "counts", "threshold_share",
                           "branching", "auc_share"))


@dataclass(frozen=True)
class EvaluateSection(ScoreSource):
    """``evaluate``: a private confusion matrix (see dpcli.algorithms.evaluate)."""

    epsilon: float = 0.2
    cutoff: float | None = None


@dataclass(frozen=True)
class PublishGridSection:
    """``publish-grid``: PrivPfC's synopsis; None leaves max_pool to ``privpfc.MAX_POOL``.

    ``decision`` is the histogram classifier's rule (``dpcli.algorithms.synopsis.GridModel``):
    ``balanced`` (default) or ``majority``.
    """

    epsilon: float
    max_pool: int | None = None
    columns: tuple[str, ...] = ()
    decision: str = "balanced"


@dataclass(frozen=True)
class TrainBRCSection:
    """``train-brc``: None leaves a value to ``brc.BRCConfig``'s default.

    ``public`` lists the columns declared public knowledge. The partially
    private Algorithm 2 runs only when the spec also declares the label public
    (``label: public: true``); see :func:`dpcli.algorithms.brc.resolve_mode`.
    """

    epsilon: float
    rounds: int | str | None = None   # a number, or "auto" (train-brc's default when unset)
    candidates: int | str | None = None   # a number, or "auto" (from n; the default)
    c1: float | None = None
    c2: float | None = None
    columns: tuple[str, ...] = ()
    public: tuple[str, ...] = ()

    def config_values(self) -> dict[str, Any]:
        """The section's BRCConfig fields that were set (``rounds: auto`` is resolved from n)."""
        out = _set(self, ("c1", "c2"))
        if isinstance(self.rounds, int):
            out["rounds"] = self.rounds
        if isinstance(self.candidates, int):
            out["candidates"] = self.candidates
        return out


@dataclass(frozen=True)
class ValidateSection:
    """``validate``: None leaves a value to ``validate.ValidateConfig``'s default."""

    epsilon: float
    learner: str = "logreg"
    grid: tuple[float, ...] | None = None
    method: str | None = None
    score: str | None = None
    trainer: str | None = None
    delta: float | None = None
    validation_fraction: float | None = None
    split_seed: int | None = None
    columns: tuple[str, ...] = ()
    lam: float | str | None = None         # spec key ``lambda``: a number, "search"; None: auto
    threshold_share: float | None = None   # None: auto

    def config_values(self) -> dict[str, Any]:
        """The section's ValidateConfig fields that were set."""
        return _set(self, ("grid", "method", "score", "trainer", "delta",
                           "validation_fraction", "split_seed", "lam", "threshold_share"))


@dataclass(frozen=True)
class SparkConfig:
    """The optional top-level ``spark:`` section: where the Spark engine runs.

    ``master`` is a Spark master URL (``local[4]``, ``spark://host:7077``,
    ``yarn``, ``k8s://…``); the environment variable ``DPCLI_SPARK_MASTER``
    overrides it, and without either the engine uses ``local[*]``. ``conf``
    holds Spark configuration properties (``spark.executor.memory``, Hadoop
    options as ``spark.hadoop.<key>``), as text. Only ``--engine spark``
    reads this section.
    """

    master: str | None = None
    conf: tuple[tuple[str, str], ...] = ()


# Spark's own redaction pattern (spark.redaction.regex), with credentials spelled out
_SECRET_KEY = re.compile(r"(?i)secret|password|passwd|token|credential|access[._-]?key")


def _parse_forecast(raw: Any, where: Where, label: Any) -> float | None:
    """The ``forecast:`` section: ``positive_share``, the share of the positive class the
    forecasts assume instead of their stated 25 % (a rare class makes every release noisier
    than that assumption says). Public knowledge the user declares (a published rate, last
    year's report), never read off the data; no release reads it."""
    raw = checks.mapping(raw, where, allowed={"positive_share"})
    if "positive_share" not in raw:
        return None
    w = where / "positive_share"
    if len(label.classes) != 2:
        raise w.error("needs a binary label (label.classes declares "
                      f"{len(label.classes)} classes)")
    share = checks.number(raw["positive_share"], w)
    if not 0 < share < 1:
        raise w.error(f"must be strictly between 0 and 1 (got {share:g})")
    return share


def _parse_spark(raw: Any, where: Where) -> SparkConfig:
    raw = checks.mapping(raw, where, allowed={"master", "conf"})
    master = None
    if "master" in raw:
        master = checks.string(raw["master"], where / "master").strip()
    conf: list[tuple[str, str]] = []
    if "conf" in raw:
        cw = where / "conf"
        for key, value in checks.mapping(raw["conf"], cw).items():
            if not key.startswith("spark.") or key == "spark.":
                raise (cw / key).error("is not a Spark property: keys start with 'spark.' "
                                       "(Hadoop options are written spark.hadoop.<key>)")
            if key == "spark.master":
                raise (cw / key).error("set the master with the section's 'master:' key "
                                       "(or DPCLI_SPARK_MASTER), not in conf")
            if _SECRET_KEY.search(key):
                # the spec's digest goes into every released file: a low-entropy secret in
                # the spec could be guessed from it offline
                raise (cw / key).error("looks like a secret; keep secrets out of the spec "
                                       "(environment variables, an instance profile or "
                                       "spark-defaults.conf)")
            if isinstance(value, bool):
                text = "true" if value else "false"
            elif isinstance(value, int | float | str) and str(value).strip():
                text = str(value)
            else:
                raise (cw / key).error("must be a string, a number or true/false")
            conf.append((key, text))
    return SparkConfig(master=master, conf=tuple(conf))


SECTIONS: dict[str, type] = {"tabulate": TabulateSection, "train-nb": TrainNBSection,
                             "select-features": SelectFeaturesSection, "roc": RocSection,
                             "evaluate": EvaluateSection, "publish-grid": PublishGridSection,
                             "train-brc": TrainBRCSection, "validate": ValidateSection}
_SECTION_NAMES = {cls: name for name, cls in SECTIONS.items()}
_TOP_KEYS = {"dataset", "description", "budget", "ledger", "label", "schema", "public_data",
             "spark", "forecast", *SECTIONS}


@dataclass(frozen=True)
class Spec:
    """A validated spec. ``digest`` covers the spec and every public file it read."""

    path: Path
    dataset: str
    budget: Budget
    ledger_path: Path
    schema: Schema
    digest: str
    description: str = ""
    sections: Mapping[str, Any] = field(default_factory=dict)
    public_data: bool = False  # declared public (benchmarks): allows non-private research output
    #: the 'forecast:' section's positive_share: a public guess of the positive class's share,
    #: read by forecasts only (no release reads it; None: the forecasts' stated assumption)
    positive_share: float | None = None
    spark: SparkConfig | None = None  # where --engine spark runs (the 'spark:' section)
    files: tuple[Path, ...] = ()  # public files it names: schema, vocabularies, taxonomies
    #: loaded with ``todo_domains``: (column, "numeric" | "categorical") whose bounds or
    #: categories are still TODO; their declared domains are placeholders, not to be used
    todo: tuple[tuple[str, str], ...] = ()
    ledger_setting: str = ""  # the 'ledger:' value as written (for messages about the ledger)

    def section(self, name: str) -> Any:
        """The parsed section for subcommand ``name``; a SpecError if the spec has none."""
        if name not in self.sections:
            raise Where(self.path, name).error(
                f"is missing: add a '{name}:' section with at least 'epsilon', "
                f"or pass the values on the command line")
        return self.sections[name]


def _todos(raw: Any, where: Where) -> list[Where]:
    """The spec's TODO placeholders and, when it names a schema file, that file's too."""
    found = checks.todos(raw, where)
    schema = raw.get("schema") if isinstance(raw, dict) else None
    if isinstance(schema, str):
        path = checks.resolve_path(schema, where / "schema")
        if path.is_file():
            found += checks.todos(checks.load_yaml(path), Where(path))
    return found


#: the domain keys ``dpcli schema suggest`` can fill, by column type
SUGGESTIBLE = {"bounds": "numeric", "categories": "categorical"}


def _domain_todos(found: list[Where], spec_file: Path
                  ) -> tuple[list[Where], list[tuple[str, str]]]:
    """Split TODOs into those ``schema suggest`` can fill (a column's bounds or categories)
    and the rest."""
    rest, todo = [], []
    for w in found:
        part = _column_part(w, spec_file)
        if part is not None and part[1] in SUGGESTIBLE:
            todo.append((part[0], SUGGESTIBLE[part[1]]))
        else:
            rest.append(w)
    return rest, todo


def _column_part(w: Where, spec_file: Path) -> tuple[str, str] | None:
    """(column, key) when ``w`` is a key of a schema column (in a schema file or inline)."""
    parts = w.path.split(".")
    if parts[0] == "schema" and w.file == spec_file:   # an inline schema
        parts = parts[1:]
    if len(parts) == 3 and parts[0] == "columns":
        return parts[1], parts[2]
    return None


def _refuse_type_todos(found: list[Where], spec_file: Path) -> None:
    """A SpecError saying exactly what to write where a column's *type* is still TODO.

    ``dpcli init`` writes ``{type: TODO}`` for a CSV column (a header has no types, and
    init reads no value). Only the custodian knows the kind; once it is declared,
    ``dpcli schema suggest`` can propose the domain left TODO.
    """
    typed = [(w, part[0]) for w in found
             if (part := _column_part(w, spec_file)) is not None and part[1] == "type"]
    if not typed:
        return
    names = [name for _, name in typed]
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    first = names[0]
    others = [f"{w.file.name}: {w.path}" for w in found if all(w is not t for t, _ in typed)]
    rest = (f". Still TODO besides: {'; '.join(others[:12])}"
            f"{f' and {len(others) - 12} more' if len(others) > 12 else ''}" if others else "")
    raise SpecError(
        f"{typed[0][0].file}: the type of {len(names)} column(s) is still TODO ({shown}): "
        f"a CSV header has no types, so declare each column's kind from its documentation "
        f"and leave only its domain TODO, e.g. `{first}: {{type: numeric, bounds: TODO}}` or "
        f"`{first}: {{type: categorical, categories: TODO}}` (a two-valued column: "
        f"`{{type: binary, values: [a, b]}}`); `dpcli schema suggest` then proposes, "
        f"privately, the bounds or categories left TODO{rest}")


def _placeholders(schema: Mapping[str, Any], todo: list[tuple[str, str]]) -> dict[str, Any]:
    """The schema mapping with each TODO domain replaced by a placeholder that parses."""
    columns = dict(schema["columns"])
    for name, kind in todo:
        col = dict(columns[name])
        if kind == "numeric":
            col["bounds"] = [0, 1]
        else:
            col["categories"] = [checks.TODO]
        columns[name] = col
    return {**schema, "columns": columns}


def load_spec(path: Path | str, *, todo_domains: bool = False) -> Spec:
    """Read and validate the spec at ``path``; raise SpecError (exit 78) naming file and key.

    ``todo_domains`` (for ``dpcli schema suggest`` only) accepts numeric bounds and category
    lists still marked TODO, parses them as placeholders and lists them in ``Spec.todo``;
    every other TODO is still refused. A schema file is parsed once (its TODOs and its
    columns read the same parse).
    """
    with checks.parse_once():
        return _load_spec(Path(path), todo_domains)


def _load_spec(path: Path, todo_domains: bool) -> Spec:
    where = Where(path)
    raw = checks.load_yaml(path)
    if raw is None:
        raise where.error("is empty")
    found = _todos(raw, where)
    todo: list[tuple[str, str]] = []
    if todo_domains:
        found, todo = _domain_todos(found, path)
    _refuse_type_todos(found, path)
    checks.refuse_todos(found)
    if todo:
        raw = dict(raw)
        schema_where = where / "schema"
        if isinstance(raw["schema"], str):
            schema_file = checks.resolve_path(raw["schema"], schema_where)
            schema_where = Where(schema_file)
            raw_schema = checks.mapping(checks.load_yaml(schema_file), schema_where)
        else:
            raw_schema = checks.mapping(raw["schema"], schema_where)
        raw["schema"] = _placeholders(raw_schema, todo)
    raw = checks.mapping(raw, where, allowed=_TOP_KEYS,
                         required={"dataset", "budget", "ledger", "label", "schema"})

    dataset = checks.string(raw["dataset"], where / "dataset")
    if not _DATASET_ID.match(dataset):
        raise (where / "dataset").error(
            "must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit")
    description = ""
    if "description" in raw:
        description = checks.string(raw["description"], where / "description")

    bw = where / "budget"
    budget_raw = checks.mapping(raw["budget"], bw, allowed={"epsilon", "delta"},
                                required={"epsilon"})
    epsilon = checks.positive(budget_raw["epsilon"], bw / "epsilon")
    delta = checks.probability(budget_raw.get("delta", 0), bw / "delta")
    budget = Budget(epsilon, delta)

    ledger_path = checks.resolve_path(raw["ledger"], where / "ledger")
    if ledger_path.exists() and ledger_path.is_dir():
        raise (where / "ledger").error(f"{ledger_path} is a folder; name a .jsonl file")

    label = parse_label(raw["label"], where / "label")
    schema = parse_schema(raw["schema"], schema_where if todo else where / "schema", label)

    public_data = False
    if "public_data" in raw:
        if not isinstance(raw["public_data"], bool):
            raise (where / "public_data").error("must be true or false")
        public_data = raw["public_data"]
    sections = {name: _parse_section(name, raw[name], where / name, schema)
                for name in SECTIONS if name in raw}
    spark = _parse_spark(raw["spark"], where / "spark") if "spark" in raw else None
    positive_share = (_parse_forecast(raw["forecast"], where / "forecast", label)
                      if "forecast" in raw else None)
    files = tuple(_public_files(raw, where, schema))
    if todo and schema_where.file != path:
        files = (schema_where.file, *files)
    digest = _digest([path, *files])
    return Spec(path=path, dataset=dataset, budget=budget, ledger_path=ledger_path,
                schema=schema, digest=digest, description=description, sections=sections,
                public_data=public_data, spark=spark, files=files, todo=tuple(todo),
                positive_share=positive_share, ledger_setting=str(raw["ledger"]))


def override(section: Any, **values: Any) -> Any:
    """The section with this run's values (those not None) replacing the spec's, each checked
    by the parameter's one declaration (:mod:`dpcli.params`); a bad one is a UsageError."""

    changes = {k: v for k, v in values.items() if v is not None}
    if "epsilon" in changes:
        eps = changes["epsilon"]
        if not (math.isfinite(eps) and eps >= checks.MIN_RUN_EPSILON):
            raise UsageError(f"--epsilon must be a finite number of at least "
                             f"{checks.MIN_RUN_EPSILON:g}, got {eps}")
    name = _SECTION_NAMES.get(type(section))
    if name is not None:
        changes = params.check_override(name, changes)
    return replace(section, **changes)


def _columns(raw: Any, where: Where, schema: Schema) -> tuple[str, ...]:
    columns = checks.scalar_list(raw, where)
    for i, col in enumerate(columns):
        if not schema.has(col):
            raise (where / i).error(f"column {col!r} is not declared in the schema")
    return columns


def _parse_section(name: str, raw: Any, where: Where, schema: Schema) -> Any:
    """A command's section, read through its declaration in :mod:`dpcli.params`."""
    values = params.parse_section(name, raw, where,
                                  lambda names, at: _columns(list(names), at, schema))
    if values.get("score_column") == schema.label.column:
        raise (where / "score_column").error("is the label column")
    return SECTIONS[name](**values)


def _public_files(raw: Mapping[str, Any], where: Where, schema: Schema) -> list[Path]:
    files = []
    if isinstance(raw["schema"], str):
        files.append(checks.resolve_path(raw["schema"], where / "schema"))
    files += [c.vocabulary_file for c in schema.columns if isinstance(c, TokensColumn)]
    taxonomies = {c.taxonomy for c in schema.columns
                  if isinstance(c, NumericColumn | CategoricalColumn)
                  and isinstance(c.taxonomy, Path)}
    return files + sorted(taxonomies)


def _digest(files: list[Path]) -> str:
    # each file by the name of what it is, not of the link that reached it: a spec used
    # through a symlink (current.yaml -> v3.yaml) is the same request for --reuse
    h = hashlib.sha256()
    for f in files:
        h.update(f.resolve().name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def describe_column(column: NumericColumn | CategoricalColumn | BinaryColumn | TokensColumn) -> str:
    """A one-line public description of a declared column (for inspect and --help output)."""
    if isinstance(column, NumericColumn):
        return f"numeric in [{_num(column.lower)}, {_num(column.upper)}]"
    if isinstance(column, CategoricalColumn):
        return f"categorical, {len(column.categories)} categories + other"
    if isinstance(column, BinaryColumn):
        return f"binary {column.values[0]}/{column.values[1]}"
    cap = f", at most {column.max_per_row} per row" if column.max_per_row else ""
    return f"tokens, vocabulary of {len(column.vocabulary)} words{cap}"


def _num(value: float) -> str:
    # as a spec would write it (a year bound 2001 must not read "2,001")
    return str(int(value)) if float(value).is_integer() else f"{value:.6g}"
