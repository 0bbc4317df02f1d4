"""Text, path and number options converted without pydantic (a start-up cost).

Why: typer (0.2x) converts every option value through a pydantic ``TypeAdapter``
built on first use; importing pydantic and building adapters costs about 0.1 s
of CPU in every command (docs/scale.md, fixed cost), although dpcli's options
are text, paths and plain numbers: a command-line value is already a ``str``,
pydantic's path conversion is ``Path(value)``, and its reading of decimal text
is ``int()``'s or ``float()``'s.

:func:`install` gives each such parameter of the command tree a converter that
does exactly what typer's adapter does for a ``str`` from the command line —
the text itself; for a path, ``Path(value)`` and then typer's own checks and
messages (a file or a folder where ``file_okay`` / ``dir_okay`` forbid it, not
readable); for a number written in plain decimals, ``int``/``float`` within the
option's min and max; text with a digit separator ("1_000") is refused, where
pydantic would read it as 1000 — and hands any other value (out of range,
"inf") to typer's own adapter, for its value or its message. Every other
parameter gets typer's adapter when a value arrives: typer builds one for each
parameter of the command even when the option is not given (its value None,
which needs no conversion), and that alone imports pydantic.
``tests/cli/test_coercion.py`` checks the two agree on values that exercise
each check. With a typer that has no such converters (older, click-based
versions) :func:`install` does nothing.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

#: the number text converted here (else typer's adapter): digits, a sign, a decimal point,
#: an exponent — what int() and float() read exactly as pydantic does
_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def install(group: Any) -> None:
    """Give the text, path and number parameters of ``group``'s commands (and sub-groups')
    the pydantic-free converters; other parameters get typer's when a value arrives.

    A typer whose converters changed shape keeps its own (slower, never wrong):
    tests/cli/test_coercion.py fails on such a typer, so the pinned one is covered."""
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
        from typer.core import _TyperParameter

        fast = _classes(RuntimeParam, build_runtime_param)
    except (ImportError, AttributeError, TypeError):  # older (click-based) or changed typer
        return

    def give(param: Any) -> None:
        try:
            if not isinstance(param, _TyperParameter) or param._runtime_param is not None:
                return
            desc = param.type_descriptor
            kind = (fast[desc.annotation] if _plain(param) else
                    fast["parsed"] if _parsed(param) else fast[None])
            param._runtime_param = kind(parameter_info=desc.parameter_info,
                                        annotation=desc.annotation)
        except (AttributeError, TypeError):
            return  # typer's own converter, built as typer builds it

    for command in _commands(group):
        for param in getattr(command, "params", ()):
            give(param)
        if hasattr(command, "get_help_option") and not hasattr(command, "_dpcli_converters"):
            command._dpcli_converters = True  # once per command (a tree may be parsed again)
            # the --help option is made while the command's arguments are parsed (its value
            # None when not given): it gets its converter then
            made = command.get_help_option

            def get_help_option(ctx: Any, made: Any = made) -> Any:
                option = made(ctx)
                give(option)
                return option

            command.get_help_option = get_help_option


def _commands(group: Any) -> list[Any]:
    """``group`` and every command below it."""
    out = [group]
    for sub in getattr(group, "commands", {}).values():
        out += _commands(sub)
    return out


def _plain(param: Any) -> bool:
    """A single text, path or number value whose conversion this module copies exactly: no
    custom parser, no ``exists``, ``-``, ``resolve_path`` or ``path_type`` for a path, no
    ``clamp`` for a number (typer's adapter for those)."""
    desc = param.type_descriptor
    info = desc.parameter_info
    if desc.annotation not in (str, Path, int, float) or desc.file_annotation is not None:
        return False
    if param.multiple or param.nargs != 1 or getattr(info, "parser", None) is not None:
        return False
    if desc.annotation in (int, float):
        return not getattr(info, "clamp", False)
    return not (getattr(info, "exists", False) or getattr(info, "allow_dash", False)
                or getattr(info, "resolve_path", False)
                or getattr(info, "path_type", None) is not None)


def _parsed(param: Any) -> bool:
    """A single number read by the option's own ``parser`` (dpcli's ``cli.common.number``):
    the parser's value is the option's, as typer's adapter gives it for a float."""
    desc = param.type_descriptor
    return (desc.annotation in (int, float) and not param.multiple and param.nargs == 1
            and getattr(desc.parameter_info, "parser", None) is not None)


def _classes(base: Any, build: Any) -> dict[type | str | None, Any]:
    """The converters, as subclasses of typer's ``RuntimeParam`` (its ``coerce`` keeps the
    handling of a missing value: None, or () for a list, converted by no one), by the
    annotation they serve (None: any other). They add no field: typer's frozen dataclass
    ``__init__``, ``__eq__`` and ``__hash__`` serve them as they are (a ``@dataclass`` on
    each regenerated the same methods with ``exec``, ~2 ms of every command's start)."""
    class Deferred(base):
        """typer's own converter, built when a value arrives."""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            return build(param.type_descriptor)._coerce_value(value, param=param, ctx=ctx)

    class Text(base):
        """typer's str adapter on a str: the text unchanged."""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if type(value) is str:
                return value
            return build(param.type_descriptor)._coerce_value(value, param=param, ctx=ctx)

    class Number(base):
        """typer's number adapter (pydantic's lax int/float, the option's min and max) on
        plain decimal text: ``int(value)`` / ``float(value)`` (both correctly rounded, as
        pydantic's parser is) within the range; text with a digit separator ("1_000",
        which they would read as 1000) is refused; anything else (a value out of range,
        "inf", " 2") goes to typer's adapter and its message."""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            kind = self.annotation
            if type(value) is str and "_" in value:
                # pydantic, like int() and float(), reads "1_0" as 10: a typo, not a number
                from typer._click.exceptions import BadParameter

                raise BadParameter(f"{value!r} is not a number (digits, a dot and an "
                                   "optional exponent)", ctx=ctx, param=param)
            if type(value) is str and (_INT if kind is int else _FLOAT).fullmatch(value):
                number = kind(value)
                low, high = self.parameter_info.min, self.parameter_info.max
                if (low is None or number >= low) and (high is None or number <= high):
                    return number
            return build(param.type_descriptor)._coerce_value(value, param=param, ctx=ctx)

    class File(base):
        """typer's path adapter on a str: ``Path(value)``, then its checks."""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if type(value) is not str:
                return build(param.type_descriptor)._coerce_value(value, param=param, ctx=ctx)
            return checked_path(value, self.parameter_info, param=param, ctx=ctx)

    class Parsed(base):
        """The option's own parser on the value (its errors are typer's BadParameter)."""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            return self.parameter_info.parser(value)

    return {str: Text, Path: File, int: Number, float: Number, "parsed": Parsed,
            None: Deferred}


def checked_path(value: str, info: Any, *, param: Any = None, ctx: Any = None) -> Path:
    """``Path(value)`` with typer's checks for a path option without ``exists``: a file
    where ``file_okay`` is off, a folder where ``dir_okay`` is off, an unreadable path
    where ``readable`` is on (typer's ``coerce_cli_path``, same messages)."""
    from typer._click.exceptions import BadParameter
    from typer._click.utils import format_filename

    rv = Path(value)
    label = ("file" if info.file_okay and not info.dir_okay else
             "dir" if info.dir_okay and not info.file_okay else "path")
    try:
        st = os.stat(rv)
    except OSError:
        return rv
    loc = repr(format_filename(value))
    if not info.file_okay and stat.S_ISREG(st.st_mode):
        raise BadParameter(f"{label} {loc} is a file.", ctx=ctx, param=param)
    if not info.dir_okay and stat.S_ISDIR(st.st_mode):
        raise BadParameter(f"{label} {loc} is a directory.", ctx=ctx, param=param)
    if info.readable and not os.access(rv, os.R_OK):
        raise BadParameter(f"{label} {loc} is not readable.", ctx=ctx, param=param)
    if info.writable and not os.access(rv, os.W_OK):
        raise BadParameter(f"{label} {loc} is not writable.", ctx=ctx, param=param)
    return rv
