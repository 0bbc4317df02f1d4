"""Typed access to parsed YAML that fails with a message naming file and key.

Every spec (and schema) error reads ``<file>: <key.path>: <what is wrong>``
and is a :class:`~dpcli.errors.SpecError` (exit code 78).
"""

from __future__ import annotations

import copy
import math
import os
import re
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dpcli.errors import SpecError, SpecNotFound


@dataclass(frozen=True)
class Where:
    """A position in a YAML document: the file and the dotted key path."""

    file: Path
    path: str = ""

    def __truediv__(self, key: str | int) -> Where:
        key = f"[{key}]" if isinstance(key, int) else str(key)
        if not self.path:
            return Where(self.file, key)
        sep = "" if key.startswith("[") else "."
        return Where(self.file, f"{self.path}{sep}{key}")

    def error(self, message: str) -> SpecError:
        where = f"{self.file}: {self.path}" if self.path else f"{self.file}"
        return SpecError(f"{where}: {message}")


def mapping(value: Any, where: Where, allowed: AbstractSet[str] | None = None,
            required: AbstractSet[str] = frozenset()) -> Mapping[str, Any]:
    """``value`` as a mapping with string keys; unknown or missing keys are errors."""
    if not isinstance(value, Mapping):
        raise where.error(f"must be a mapping, got {_kind(value)}")
    for key in value:
        if not isinstance(key, str):
            raise where.error(f"keys must be strings, got {key!r}")
        if allowed is not None and key not in allowed:
            hint = ", ".join(sorted(allowed))
            raise (where / key).error(f"unknown key (allowed here: {hint})")
    for key in sorted(required):
        if key not in value:
            raise (where / key).error("is required")
    return value


def string(value: Any, where: Where) -> str:
    if not isinstance(value, str) or not value.strip():
        raise where.error(f"must be a non-empty string, got {_kind(value)}")
    return value


def number(value: Any, where: Where) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise where.error(f"must be a number, got {_kind(value)}")
    if not math.isfinite(value):
        raise where.error("must be finite")
    return value


def positive(value: Any, where: Where) -> float:
    value = number(value, where)
    if value <= 0:
        raise where.error(f"must be positive, got {value}")
    return value


MIN_RUN_EPSILON = 1e-6


def epsilon(value: Any, where: Where) -> float:
    """A run's ε: finite and at least 1e-6 (smaller budgets give noise beyond any use)."""
    value = positive(value, where)
    if value < MIN_RUN_EPSILON:
        raise where.error(f"must be at least {MIN_RUN_EPSILON:g}, got {value}")
    return value


def integer(value: Any, where: Where, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.error(f"must be an integer, got {_kind(value)}")
    if minimum is not None and value < minimum:
        raise where.error(f"must be at least {minimum}, got {value}")
    return value


def probability(value: Any, where: Where) -> float:
    value = number(value, where)
    if not 0 <= value < 1:
        raise where.error(f"must be in [0, 1), got {value}")
    return value


def choice(value: Any, where: Where, options: tuple[str, ...]) -> str:
    if value not in options:
        raise where.error(f"must be one of {', '.join(options)}, got {value!r}")
    return value


def scalar_label(value: Any, where: Where) -> str:
    """A category or class value; ints and strings are compared as text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str) and str(value) != "":
        return str(value)
    raise where.error(f"must be a string or an integer, got {_kind(value)}")


def scalar_list(value: Any, where: Where, min_len: int = 1) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise where.error(f"must be a list, got {_kind(value)}")
    items = tuple(scalar_label(v, where / i) for i, v in enumerate(value))
    if len(items) < min_len:
        raise where.error(f"must list at least {min_len} value(s)")
    seen: set[str] = set()
    for i, item in enumerate(items):
        if item in seen:
            raise (where / i).error(f"duplicate value {item!r}")
        seen.add(item)
    return items


def resolve_path(value: Any, where: Where) -> Path:
    """A path from the spec, relative paths taken against the folder of the spec file itself.

    A symlinked spec resolves them where the file really is: reached from another
    folder, the same spec names the same ledger (not a second, fresh one there).
    """
    text = string(value, where)
    path = Path(text).expanduser()
    base = Path(os.path.realpath(where.file)).parent
    return Path(os.path.normpath(path if path.is_absolute() else base / path))


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


class _StrictLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses duplicate keys and types plain scalars as YAML 1.2 does.

    A duplicated ``budget:`` or ``epsilon:`` would otherwise silently let the
    last one win. PyYAML follows YAML 1.1, whose plain scalars surprise: ``No``,
    ``yes``, ``on`` and ``off`` are booleans (``categories: [No, Yes]``, common in
    data from R, became ``false``/``true`` and matched no value of the column),
    ``0_1`` is the number 1 and ``1_0`` is 10 (ε ten times the one meant),
    ``010`` is 8 and ``1e-3`` is text. Here only ``true``/``false`` are
    booleans, numbers are written with digits alone (``0x``/``0o`` prefixes
    aside), and every other plain scalar is text.
    """


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode,
                       deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {seen[key] + 1})",
                key_node.start_mark)
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                              _construct_mapping)
_BOOL, _INT, _FLOAT = ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:int",
                       "tag:yaml.org,2002:float")
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_BOOL, _INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_StrictLoader.add_implicit_resolver(
    _BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_StrictLoader.add_implicit_resolver(
    _INT, re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), list("-+0123456789"))
_StrictLoader.add_implicit_resolver(
    _FLOAT, re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                       r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."))


def _construct_int(loader: _StrictLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    if text.startswith(("0o", "0x")):
        return int(text, 0)
    return int(text, 10)  # 010 is ten, as YAML 1.2 reads it (1.1: octal 8)


_StrictLoader.add_constructor(_INT, _construct_int)


#: the placeholder ``dpcli init`` writes where only the custodian can declare a value
TODO = "TODO"


def todos(value: Any, where: Where) -> list[Where]:
    """Every place in a parsed YAML document whose value is still the ``TODO`` placeholder."""
    if isinstance(value, str):
        return [where] if value.strip().upper().startswith(TODO) else []
    if isinstance(value, Mapping):
        return [w for k, v in value.items() for w in todos(v, where / str(k))]
    if isinstance(value, list):
        return [w for i, v in enumerate(value) for w in todos(v, where / i)]
    return []


def refuse_todos(found: list[Where]) -> None:
    """A SpecError listing every TODO left (the first file's name leads), or nothing."""
    if not found:
        return
    shown = [f"{w.file.name}: {w.path}" for w in found[:12]]
    more = f" and {len(found) - 12} more" if len(found) > 12 else ""
    raise SpecError(f"{found[0].file}: {len(found)} value(s) still TODO, to be declared from "
                    f"the data's documentation (see the comments beside them): "
                    f"{'; '.join(shown)}{more}")


#: files parsed during one :func:`parse_once` block, by (path, inode, size, modification
#: time): reading a spec parses its schema file for TODOs and then for its columns, and
#: pure-Python YAML costs ~15 ms a parse. None outside such a block: every call parses.
_PARSED: ContextVar[dict[tuple[str, int, int, int], Any] | None] = ContextVar(
    "dpcli_parsed_yaml", default=None)


@contextmanager
def parse_once() -> Iterator[None]:
    """Within the block, :func:`load_yaml` parses each unchanged file once (callers get
    copies of that parse); the memory ends with the block."""
    token = _PARSED.set({})
    try:
        yield
    finally:
        _PARSED.reset(token)


def load_yaml(path: Path) -> Any:
    """Parse the YAML file at ``path``; SpecError naming the file (and line) on failure."""
    parsed = _PARSED.get()
    if parsed is None:
        return _parse_yaml(path)
    try:
        st = path.stat()
    except OSError:
        return _parse_yaml(path)  # the error names the file
    key = (str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in parsed:
        parsed[key] = _parse_yaml(path)
    return copy.deepcopy(parsed[key])  # callers may change what they get


def _parse_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecNotFound(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{path}: cannot read file ({exc})") from None
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no objects
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None)
        detail = f": {problem}" if problem and "duplicate key" in problem else ""
        raise SpecError(f"{path}: not valid YAML{at}{detail}") from None
