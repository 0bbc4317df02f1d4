"""Every command parameter, declared once: its spec key, what it accepts, and what it means.

The spec parser reads each command's section through :data:`SECTIONS`; the
command line and Python keyword arguments go through the same declarations
(:func:`check_override`), so a value is accepted or refused the same way
wherever it is given, with one error type per origin: a :class:`SpecError`
naming the spec file and key, or a :class:`UsageError` naming the option.
The JSON Schema of the spec (``dpcli/schemas/spec.schema.json``) is generated
from the same declarations.

The algorithm modules import their option tuples and limits from here (this
module imports no algorithm): one definition per parameter.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpcli import checks
from dpcli.checks import Where
from dpcli.errors import UsageError

# ---------------------------------------------------------------- the options and limits

MAX_BINS = 10_000
NB_METHODS = ("smooth", "global")
NB_DISTRIBUTIONS = ("truncated", "gaussian")
NB_THRESHOLDS = ("balanced", "accuracy", "none")
NB_SPLIT_PARTS = ("prior", "categorical", "mean", "variance")
#: how train-nb models a numeric column: by the rule (nb_allocation), a per-class histogram
#: over equal-width bins of the declared bounds, or a per-class mean and variance
NB_NUMERIC = ("auto", "histogram", "gaussian")
#: the most bins of a train-nb numeric histogram
NB_MAX_BINS = 64
#: train-nb's split weights when the spec sets none (each part weight 1; the rule of public
#: facts in nb_allocation replaces it when n is known)
EQUAL_SPLIT = {"prior": 1, "categorical": 1, "mean": 1, "variance": 1}
FS_SCORES = ("tc", "dc", "pi", "ig", "chi2")
FS_METHODS = ("perturb", "cluster", "threshold", "topk")
ROC_THRESHOLDS = ("recursive-medians", "fixed-space")
#: the range-query strategies of roc's counts (dpcli.mechanisms.range_queries' STRATEGIES;
#: declared here so that reading a spec does not import the mechanisms and numpy)
ROC_COUNTS = ("privelet", "hierarchical", "laplace")
ROC_MAX_LEVELS = 16  # 2^16 bins: a curve of 65,536 points is plenty, and its files stay small
ROC_TRANSFORMS = ("logit", "identity")
GRID_DECISIONS = ("balanced", "majority")
BRC_MAX_ROUNDS = 10_000
BRC_MAX_CANDIDATES = 256   # random classifiers a brc round may draw (brc.MAX_CANDIDATES)
BRC_MAX_C = 1000.0   # c1, c2 at most this: keeps c1·c2/n and the noise finite
VALIDATE_METHODS = ("stability", "alpha-split", "data-split", "random")
VALIDATE_SCORES = ("ramp", "hinge", "logistic")
VALIDATE_TRAINERS = ("objective", "output")
VALIDATE_LEARNERS = ("logreg",)
VALIDATE_MIN_DELTA = 1e-100   # smaller δ/k underflows the Gamma quantile
VALIDATE_MAX_GRID = 1000
VALIDATE_MAX_SHARE = 0.25


class Option(Where):
    """A command-line option or Python keyword as the place of a bad value: its errors are
    usage errors (exit 64) that name the option."""

    def __init__(self, name: str) -> None:
        super().__init__(Path(name), "")

    def __truediv__(self, key: str | int) -> Option:
        return self

    def error(self, message: str) -> UsageError:   # type: ignore[override]
        return UsageError(f"{self.file} {message}")   # "--alpha must be in (0, 1], got 2"


Check = Callable[[Any, Where], Any]


@dataclass(frozen=True)
class Param:
    """One parameter of a command section.

    ``key`` is its spec key (the option is ``--key`` with dashes), ``attr``
    the section field it fills, ``check`` parses and validates a raw value at
    a :class:`Where` (returning the value to store), ``json`` its JSON Schema,
    ``columns`` marks a list of declared column names (checked against the
    schema).
    """

    key: str
    check: Check
    json: Mapping[str, Any]
    help: str
    attr: str = ""
    columns: bool = False

    @property
    def field(self) -> str:
        return self.attr or self.key

    @property
    def option(self) -> str:
        return "--" + self.key.replace("_", "-")


@dataclass(frozen=True)
class Section:
    """A command's spec section: its parameters (``epsilon`` always required) and the checks
    that relate several of them."""

    name: str
    params: tuple[Param, ...]
    help: str
    #: called with the parsed values and the section's place, after every key is checked
    relate: Callable[[dict[str, Any], Where], None] | None = None
    #: keys no longer read, each with the message that says what replaced it
    retired: Mapping[str, str] = field(default_factory=dict)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.field == name or p.key == name:
                return p
        raise KeyError(f"section {self.name} has no parameter {name!r}")


# ---------------------------------------------------------------- value checks


def _epsilon(raw: Any, where: Where) -> float:
    return float(checks.epsilon(raw, where))


def _int(minimum: int, maximum: int | None = None, too_big: str = "") -> Check:
    """An integer ≥ minimum (and ≤ maximum); ``too_big`` words the refusal of a larger one
    ({value} and {maximum} are filled in)."""
    def check(raw: Any, where: Where) -> int:
        value = checks.integer(raw, where, minimum=minimum)
        if maximum is not None and value > maximum:
            text = too_big or "must be at most {maximum:,}, got {value:,}"
            raise where.error(text.format(maximum=maximum, value=value))
        return value
    return check


def _choice(options: tuple[str, ...]) -> Check:
    return lambda raw, where: checks.choice(raw, where, options)


def _number(test: Callable[[float], bool], what: str) -> Check:
    def check(raw: Any, where: Where) -> float:
        value = float(checks.number(raw, where))
        if not test(value):
            raise where.error(f"must be {what}, got {value}")
        return value
    return check


def _positive(raw: Any, where: Where) -> float:
    return float(checks.positive(raw, where))


def _number_any(raw: Any, where: Where) -> float:
    return float(checks.number(raw, where))


def _bool(raw: Any, where: Where) -> bool:
    if not isinstance(raw, bool):
        raise where.error("must be true or false")
    return raw


def _columns(raw: Any, where: Where) -> tuple[str, ...]:
    """Names only here; the spec parser checks them against the schema."""
    if isinstance(raw, tuple):
        raw = list(raw)
    return checks.scalar_list(raw, where)


def _nb_split(raw: Any, where: Where) -> tuple[tuple[str, float], ...]:
    split = checks.mapping(raw, where, allowed=set(NB_SPLIT_PARTS))
    return tuple((k, float(checks.positive(split[k], where / k)))
                 for k in NB_SPLIT_PARTS if k in split)


def _nb_threshold(raw: Any, where: Where) -> str:
    if isinstance(raw, bool):
        return "balanced" if raw else "none"
    return checks.choice(raw, where, NB_THRESHOLDS)


def _score_column(raw: Any, where: Where) -> str:
    return checks.string(raw, where)


def score_range(raw: Any, where: Where) -> tuple[float, float]:
    """A [lower, upper] pair of finite numbers with lower < upper (or 'LOWER,UPPER' text: the
    spec's ``score_range`` and ``--score-range`` alike; an :class:`Option` makes the error a
    usage error naming the option)."""
    pair = raw
    if isinstance(raw, str):
        pair = [p.strip() for p in raw.split(",")]
        try:
            pair = [float(p) for p in pair]
        except ValueError:
            raise where.error(f"must be two numbers LOWER,UPPER, got {raw!r}") from None
        if len(pair) != 2:
            raise where.error(f"must be two numbers LOWER,UPPER, got {raw!r}")
    if not isinstance(pair, list | tuple) or len(pair) != 2:
        raise where.error("must be a pair [lower, upper]")
    lower = float(checks.number(pair[0], where / 0))
    upper = float(checks.number(pair[1], where / 1))
    if not (math.isfinite(lower) and math.isfinite(upper) and lower < upper):
        raise where.error(f"must be finite with LOWER < UPPER, got [{lower}, {upper}]")
    return lower, upper


def rounds(raw: Any, where: Where) -> int | str:
    """``rounds``: a whole number of boosting rounds, or ``auto`` (from ε, n, c1 and c2)."""
    return _whole_or_auto(raw, where, BRC_MAX_ROUNDS)


def candidates(raw: Any, where: Where) -> int | str:
    """``candidates``: random classifiers per brc round (1 to 256), or ``auto`` (from n)."""
    return _whole_or_auto(raw, where, BRC_MAX_CANDIDATES)


def _whole_or_auto(raw: Any, where: Where, maximum: int) -> int | str:
    """A whole number in [1, ``maximum``] (digits, as a command line gives it too) or ``auto``."""
    if isinstance(raw, str):
        text = raw.strip()
        if text.lower() == "auto":
            return "auto"
        if not text.isdigit():   # int() would read "1_0" as 10
            raise where.error(f"must be a whole number or 'auto', got {raw!r}")
        raw = int(text)
    value = checks.integer(raw, where, minimum=1)
    if value > maximum:
        raise where.error(f"must be at most {maximum:,}, got {value:,}")
    return value


def _boost_constant(raw: Any, where: Where) -> float:
    """c1 or c2: in [1, MAX_C] (the private weights start at 1, inside [1/c1, c2])."""
    value = float(checks.number(raw, where))
    if not 1 <= value <= BRC_MAX_C:
        raise where.error(f"must be a number in [1, {BRC_MAX_C:g}], got {raw}")
    return value


def lambda_value(raw: Any, where: Where) -> float | str | None:
    """validate's ``lambda``: auto (None), search (always search the grid), or a number > 0."""
    if isinstance(raw, str) and raw.strip().lower() == "search":
        return "search"
    return auto_or_number(raw, where, "> 0 (or search)", lambda v: math.isfinite(v) and v > 0)


def auto_or_number(raw: Any, where: Where, what: str, ok: Callable[[float], bool]
                   ) -> float | None:
    """``auto`` (None: the learner decides from public facts) or a number that is ``what``."""
    if isinstance(raw, str) and raw.strip().lower() == "auto":
        return None
    if isinstance(raw, str):
        try:
            raw = float(raw)
        except ValueError:
            raise where.error(f"must be auto or a number {what}, got {raw!r}") from None
    value = float(checks.number(raw, where))
    if not ok(value):
        raise where.error(f"must be auto or a number {what}, got {value:g}")
    return value


def threshold_share(raw: Any, where: Where) -> float | None:
    """validate's ``threshold_share``: auto (None) or a number in [0, MAX_SHARE]."""
    top = VALIDATE_MAX_SHARE
    return auto_or_number(raw, where, f"in [0, {top:g}]", lambda v: 0 <= v <= top)


def grid(raw: Any, where: Where) -> tuple[float, ...]:
    """A grid of regularisers λ: distinct finite numbers > 0 (a list, or comma-separated text)."""
    if isinstance(raw, str):
        items: list[Any] = []
        for part in raw.split(","):
            try:
                items.append(float(part))
            except ValueError:
                raise where.error(f"{part.strip()!r} is not a number") from None
    elif isinstance(raw, list | tuple):
        items = [checks.number(v, where / i) for i, v in enumerate(raw)]
    else:
        raise where.error("must be a list of numbers")
    if not 1 <= len(items) <= VALIDATE_MAX_GRID:
        raise where.error(f"must hold 1 to {VALIDATE_MAX_GRID} values, got {len(items)}")
    for i, v in enumerate(items):
        if not (math.isfinite(v) and v > 0):
            raise (where / i).error(f"a regulariser λ must be a finite number > 0, got {v}")
        if v in items[:i]:
            raise (where / i).error(f"{v} is listed twice")
    return tuple(float(v) for v in items)


def _delta(raw: Any, where: Where) -> float:
    value = checks.number(raw, where)
    if not VALIDATE_MIN_DELTA <= value < 1:
        # δ = 0 would make the hinge/logistic stability bound infinite; ramp needs no δ
        raise where.error(f"must be in [{VALIDATE_MIN_DELTA:g}, 1), got {value}")
    return float(value)


# ---------------------------------------------------------------- JSON Schema fragments

_NUM: dict[str, Any] = {"type": "number"}
_INT: dict[str, Any] = {"type": "integer", "minimum": 1}
_COLS: dict[str, Any] = {"type": "array", "items": {"type": ["string", "integer"]},
                         "minItems": 1, "uniqueItems": True}


def _enum(options: tuple[str, ...]) -> dict[str, Any]:
    return {"enum": list(options)}


EPSILON = Param("epsilon", _epsilon, {"type": "number", "minimum": checks.MIN_RUN_EPSILON},
                "ε this command spends per run (the command line's --epsilon overrides it)")
COLUMNS = Param("columns", _columns, _COLS, "declared columns to use (default: every "
                "column the command reads)", columns=True)
SCORE_COLUMN = Param("score_column", _score_column, {"type": "string"},
                     "evaluate this column of the data instead of a model's scores")
SCORE_RANGE = Param("score_range", score_range,
                    {"type": "array", "items": _NUM, "minItems": 2, "maxItems": 2},
                    "public [lower, upper] of score_column; values outside are clamped")


def _brc_public(values: dict[str, Any], where: Where) -> None:
    outside = [c for c in values.get("public", ())
               if values.get("columns") and c not in values["columns"]]
    if outside:
        raise (where / "public").error(f"{outside[0]!r} is not one of the section's columns")


SECTIONS: dict[str, Section] = {s.name: s for s in (
    Section("tabulate", (
        EPSILON, COLUMNS,
        Param("bins", _int(1, MAX_BINS), {**_INT, "maximum": MAX_BINS},
              "equal-width bins for numeric columns, within their declared bounds (10)"),
    ), "noisy per-class counts of declared columns (discrete Laplace)"),
    Section("train-nb", (
        EPSILON,
        Param("method", _choice(NB_METHODS), _enum(NB_METHODS),
              "global (per-class sums, global sensitivity) or smooth (smooth sensitivity "
              "of trimmed statistics)"),
        COLUMNS,
        Param("r", _int(1), _INT, "words counted per row of a tokens column"),
        Param("trim", _number(lambda v: 0 <= v < 0.5, "in [0, 0.5)"),
              {**_NUM, "minimum": 0, "exclusiveMaximum": 0.5},
              "share trimmed from each end for the smooth method"),
        Param("distribution", _choice(NB_DISTRIBUTIONS), _enum(NB_DISTRIBUTIONS),
              "how numeric columns are modelled per class"),
        Param("smoothing", _positive, {**_NUM, "exclusiveMinimum": 0},
              "additive smoothing of the count tables"),
        Param("split", _nb_split,
              {"type": "object", "additionalProperties": False,
               "properties": {k: {**_NUM, "exclusiveMinimum": 0} for k in NB_SPLIT_PARTS}},
              "weights of the ε split (default: the rule of public facts)"),
        Param("threshold", _nb_threshold, {"oneOf": [_enum(NB_THRESHOLDS),
                                                      {"type": "boolean"}]},
              "the binary decision threshold: balanced, accuracy or none"),
        Param("numeric", _choice(NB_NUMERIC), _enum(NB_NUMERIC),
              "numeric columns as a histogram or a mean and variance (auto: the rule)"),
        Param("bins", _int(2, NB_MAX_BINS), {**_INT, "minimum": 2, "maximum": NB_MAX_BINS},
              "bins of a numeric histogram (default: the rule from n and ε)"),
    ), "a naive Bayes model"),
    Section("select-features", (
        EPSILON,
        Param("score", _choice(FS_SCORES), _enum(FS_SCORES), "how a candidate is scored"),
        Param("method", _choice(FS_METHODS), _enum(FS_METHODS), "how candidates are picked"),
        Param("threshold", _number_any, _NUM, "τ on the score's own scale"),
        Param("k", _int(1), _INT, "how many to select (or the cap)"),
        Param("r", _int(1), _INT, "words counted per row of a tokens column"),
        Param("bins", _int(1, MAX_BINS), {**_INT, "maximum": MAX_BINS},
              "bins for numeric columns under chi2"),
        Param("centers", _int(1), _INT, "k-means centres (cluster)"),
        Param("rounds", _int(1), _INT, "k-means rounds (cluster)"),
        COLUMNS,
        Param("min_effect", _positive, {**_NUM, "exclusiveMinimum": 0},
              "the smallest score gap that matters, per record"),
        Param("allow_noise", _bool, {"type": "boolean"},
              "select even when the noise exceeds min_effect"),
    ), "which features to train on"),
    Section("roc", (
        EPSILON,
        Param("thresholds", _choice(ROC_THRESHOLDS), _enum(ROC_THRESHOLDS),
              "fixed-space bins or recursive noisy medians"),
        Param("k", _int(1, ROC_MAX_LEVELS,
                        "must be at most {maximum} (2^k bins), got {value}"),
              {**_INT, "maximum": ROC_MAX_LEVELS},
              "2^k bins"),
        Param("alpha", _number(lambda v: 0 < v <= 1, "in (0, 1]"),
              {**_NUM, "exclusiveMinimum": 0, "maximum": 1}, "floor(α·n) bins"),
        Param("counts", _choice(ROC_COUNTS), _enum(ROC_COUNTS),
              "how the TP and FP counts are noised"),
        Param("threshold_share", _number(lambda v: 0 < v < 1, "in (0, 1)"),
              {**_NUM, "exclusiveMinimum": 0, "exclusiveMaximum": 1},
              "share of ε on the recursive medians"),
        Param("branching", _int(2, 1024, "must be at most {maximum}, got {value}"),
              {"type": "integer", "minimum": 2, "maximum": 1024},
              "the hierarchical counts' tree arity"),
        SCORE_COLUMN, SCORE_RANGE,
        Param("auc_share", _number(lambda v: 0 <= v < 1, "in [0, 1)"),
              {**_NUM, "minimum": 0, "exclusiveMaximum": 1},
              "share of ε on the AUC from a noisy pair count"),
        Param("transform", _choice(ROC_TRANSFORMS), _enum(ROC_TRANSFORMS),
              "the scale scores are binned on"),
    ), "a private ROC curve and AUC"),
    Section("evaluate", (
        EPSILON,
        Param("cutoff", _number_any, _NUM, "score_column > cutoff predicts positive"),
        SCORE_COLUMN, SCORE_RANGE,
    ), "a private confusion matrix"),
    Section("publish-grid", (
        EPSILON,
        Param("max_pool", _int(1), _INT, "the most candidate grids scored"),
        COLUMNS,
        Param("decision", _choice(GRID_DECISIONS), _enum(GRID_DECISIONS),
              "the histogram classifier's rule"),
    ), "a grid synopsis (PrivPfC)"),
    Section("train-brc", (
        EPSILON,
        Param("rounds", rounds, {"oneOf": [{"type": "integer", "minimum": 1,
                                            "maximum": BRC_MAX_ROUNDS}, {"const": "auto"}]},
              "boosting rounds T, or auto"),
        Param("candidates", candidates, {"oneOf": [{"type": "integer", "minimum": 1,
                                                    "maximum": BRC_MAX_CANDIDATES},
                                                   {"const": "auto"}]},
              "random classifiers per round (1: the paper's round), or auto"),
        Param("c1", _boost_constant, {**_NUM, "minimum": 1, "maximum": BRC_MAX_C},
              "private weights stay ≥ 1/c1"),
        Param("c2", _boost_constant, {**_NUM, "minimum": 1, "maximum": BRC_MAX_C},
              "private weights stay ≤ c2"),
        COLUMNS,
        Param("public", _columns, _COLS, "columns that are public knowledge (Algorithm 2, "
              "with label: public: true)", columns=True),
    ), "a boosted ensemble of random linear classifiers", relate=_brc_public, retired={
        "label_private": "is no longer read: the label is private unless the spec's label "
                         "section says 'public: true' (write 'public: false' there to keep "
                         "it private)"}),
    Section("validate", (
        EPSILON,
        Param("learner", _choice(VALIDATE_LEARNERS), _enum(VALIDATE_LEARNERS),
              "the model tuned"),
        Param("grid", grid, {"type": "array", "items": {**_NUM, "exclusiveMinimum": 0},
                             "minItems": 1, "maxItems": VALIDATE_MAX_GRID},
              "regularisers λ to choose from"),
        Param("method", _choice(VALIDATE_METHODS), _enum(VALIDATE_METHODS),
              "stability, or a §5 baseline"),
        Param("score", _choice(VALIDATE_SCORES), _enum(VALIDATE_SCORES), "validation loss"),
        Param("trainer", _choice(VALIDATE_TRAINERS), _enum(VALIDATE_TRAINERS),
              "objective or output perturbation"),
        Param("delta", _delta, {**_NUM, "minimum": VALIDATE_MIN_DELTA, "exclusiveMaximum": 1},
              "δ for the hinge and logistic scores"),
        Param("validation_fraction", _number(lambda v: 0 < v < 1, "in (0, 1)"),
              {**_NUM, "exclusiveMinimum": 0, "exclusiveMaximum": 1},
              "share of rows held out by a public hash"),
        Param("split_seed", _int(0, 2**32 - 1, "must be below 2^32, got {value}"),
              {"type": "integer", "minimum": 0, "maximum": 2**32 - 1},
              "the public hash's seed"),
        COLUMNS,
        Param("lambda", lambda_value, {"oneOf": [{**_NUM, "exclusiveMinimum": 0},
                                                 _enum(("auto", "search"))]},
              "the regulariser: auto, search, or a number", attr="lam"),
        Param("threshold_share", threshold_share,
              {"oneOf": [{**_NUM, "minimum": 0, "maximum": VALIDATE_MAX_SHARE},
                         {"const": "auto"}]}, "share of ε for the class threshold"),
    ), "logistic regression, λ and class cut chosen privately"),
)}


def parse_section(name: str, raw: Any, where: Where,
                  declared: Callable[[tuple[str, ...], Where], tuple[str, ...]]
                  ) -> dict[str, Any]:
    """A section's values from the spec, each checked by its declaration (``declared``
    checks column lists against the schema)."""
    section = SECTIONS[name]
    if isinstance(raw, Mapping):
        for key, why in section.retired.items():
            if key in raw:
                raise (where / key).error(why)
    raw = checks.mapping(raw, where, allowed={p.key for p in section.params},
                         required={"epsilon"})
    out: dict[str, Any] = {}
    for p in section.params:
        if p.key in raw:
            value = p.check(raw[p.key], where / p.key)
            out[p.field] = declared(value, where / p.key) if p.columns else value
    if section.relate is not None:
        section.relate(out, where)
    return out


def check_override(name: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """This run's values for section ``name`` (None: keep the spec's), each checked by its
    declaration; a bad one is a UsageError naming the option."""
    section = SECTIONS[name]
    out: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        try:
            p = section.param(key)
        except KeyError:
            out[key] = value   # not a spec parameter (e.g. a run-only option)
            continue
        out[key] = value if p.columns else p.check(value, Option(p.option))
    return out
