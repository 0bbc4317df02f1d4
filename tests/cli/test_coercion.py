"""dpcli.cli.coercion: the pydantic-free converters agree with typer's own adapters.

For every kind of option dpcli declares (text, paths with and without dir_okay/file_okay,
numbers with and without a range) and values that exercise each branch, the converter
:func:`dpcli.cli.coercion.install` gives a parameter returns the same value (and type), or
raises the same error with the same message, as typer's adapter built for it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import pytest
import typer

coercion = pytest.importorskip("typer._coercion")  # typer 0.2x: per-parameter converters

from dpcli.cli.coercion import install  # noqa: E402


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def cmd(
        text: Annotated[str, typer.Argument()],
        maybe: Annotated[str | None, typer.Option()] = None,
        path: Annotated[Path | None, typer.Option()] = None,
        file: Annotated[Path | None, typer.Option(dir_okay=False)] = None,
        folder: Annotated[Path | None, typer.Option(file_okay=False)] = None,
        count: Annotated[int | None, typer.Option(min=1)] = None,
        seed: Annotated[int | None, typer.Option(min=0)] = None,
        levels: Annotated[int | None, typer.Option(min=1, max=16)] = None,
        eps: Annotated[float | None, typer.Option()] = None,
        share: Annotated[float, typer.Option(min=0.0, max=1.0)] = 0.5,
        words: Annotated[list[str] | None, typer.Option()] = None,
    ) -> None:
        pass

    @app.command()
    def other() -> None:
        pass

    return app


def _outcome(converter, value, param, ctx):  # type: ignore[no-untyped-def]
    try:
        out = converter.coerce(value, param=param, ctx=ctx)
    except Exception as exc:
        return ("error", type(exc).__name__, getattr(exc, "format_message", exc.__str__)())
    return ("value", type(out).__name__, repr(out))  # repr: nan equals nan


def test_each_converter_matches_typers_adapter(tmp_path) -> None:
    from typer._click.core import Context
    from typer.main import get_command

    a_file = tmp_path / "data.csv"
    a_file.write_text("x\n")
    a_dir = tmp_path / "folder"
    a_dir.mkdir()
    paths = [str(a_file), str(a_dir), str(tmp_path / "missing.csv"), "", ".", "./x",
             str(a_file) + "/", str(a_dir) + "/", str(a_dir) + "//" + "y", "-", "~", " x ",
             "a\udcffb", str(tmp_path / "missing") + "/"]
    numbers = ["0", "1", "-1", "+3", "007", "16", "17", "0.5", "1.", ".5", "1e3", "1E-3",
               "-0", "1e400", "5e-324", "1.5", "1_000", " 2", "2 ", "inf", "-inf", "nan",
               "0x10", "", "abc", "1e", "١٢", "99999999999999999999999", "1.0", "0.0",
               "-0.0", "1.0000000000000002"]
    values = {"text": ["x", "", " a b ", "é", "a\udcffb", "[x]"], "maybe": ["y", ""],
              "path": paths, "file": paths, "folder": paths, "count": numbers,
              "seed": numbers, "levels": numbers, "eps": numbers, "share": numbers}

    ours = get_command(_app())
    install(ours)
    theirs = get_command(_app())
    compared = 0
    for name, sub in ours.commands.items():  # type: ignore[attr-defined]
        ctx = Context(sub)
        reference = {p.name: p for p in theirs.commands[name].params}  # type: ignore[attr-defined]
        for param in sub.params:
            mine = param._runtime_param
            assert mine is not None, param.name  # every parameter has one, built or not
            ref = coercion.build_runtime_param(reference[param.name].type_descriptor)
            for value in [None, *values.get(param.name, [])]:
                got = _outcome(mine, value, param, ctx)
                if value is not None and "_" in value and values.get(param.name) is numbers:
                    # the one difference, on purpose: typer reads "1_000" as 1000, a typo
                    assert got[0] == "error" and "is not a number" in got[2], (param.name, got)
                    continue
                want = _outcome(ref, value, reference[param.name], ctx)
                assert got == want, (param.name, value, got, want)
                compared += 1
    assert compared > 200


def test_an_unreadable_file_is_refused_as_typer_refuses_it(tmp_path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    from dpcli.cli.coercion import checked_path

    secret = tmp_path / "secret.yaml"
    secret.write_text("x: 1\n")
    secret.chmod(0)
    info = typer.models.OptionInfo(dir_okay=False)
    with pytest.raises(Exception, match="is not readable"):
        checked_path(str(secret), info)


def test_the_help_option_gets_a_converter_too() -> None:
    from typer._click.core import Context
    from typer.main import get_command

    command = get_command(_app())
    install(command)
    sub = command.commands["cmd"]  # type: ignore[attr-defined]
    option = sub.get_help_option(Context(sub))
    assert option is not None and option._runtime_param is not None
    install(command)  # again (a tree parsed twice): the help option is not wrapped twice
    assert sub.get_help_option(Context(sub)) is option


def test_a_typer_whose_converters_changed_shape_keeps_its_own(monkeypatch) -> None:
    # e.g. a later typer whose RuntimeParam needs another field: install leaves every
    # parameter to typer (slower, never wrong) instead of failing the command
    from dataclasses import dataclass

    from typer.main import get_command

    @dataclass(frozen=True)
    class Changed(coercion.RuntimeParam):  # type: ignore[misc]
        new_field: int

    monkeypatch.setattr(coercion, "RuntimeParam", Changed)
    command = get_command(_app())
    install(command)
    assert all(p._runtime_param is None for p in command.commands["cmd"].params)  # type: ignore[attr-defined]
    # the command still parses, through typer's own converters
    command.main(["cmd", "x", "--count", "3", "--eps", "0.5"], standalone_mode=False)
    params = command.commands["cmd"].params  # type: ignore[attr-defined]
    assert all(p._runtime_param is not None for p in params if p.name in ("count", "eps"))
