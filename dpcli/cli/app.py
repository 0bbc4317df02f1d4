"""The ``dpcli`` entry point: wires one module per command."""

from __future__ import annotations

import importlib
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperGroup

from dpcli import __version__
from dpcli.cli import (
    evaluate_cmd,
    init_cmd,
    inspect_cmd,
    ledger_cmd,
    plan_cmd,
    predict_cmd,
    publish_grid_cmd,
    roc_cmd,
    schema_cmd,
    select_features_cmd,
    show_cmd,
    synthesize_cmd,
    tabulate_cmd,
    train_brc_cmd,
    train_nb_cmd,
    validate_cmd,
)
from dpcli.errors import EX_USAGE

HELP = f"""dpcli {__version__}: differentially private machine learning on tabular data.

Every command that reads private values spends a declared ε from the
dataset's lifetime budget, reserved in an append-only, hash-chained ledger
before any value is read. Guarantees are ε-DP (or (ε, δ)-DP) under
replace-one neighbours (train-brc with public features: replace-one on the
private features). Exit codes (BSD sysexits; docs/exit-codes.md): 0 ok,
3 budget exhausted, 64 usage, 65 bad data, 66 input file missing,
70 internal error, 74 the system refused an I/O operation (disk full,
permission, read-only file system), 76 ledger unusable or fails
verification, 78 bad spec, 130 / 143 / 129 ended by SIGINT / SIGTERM /
SIGHUP (a reserved charge stays, recorded as failed).
"""

def _parser_usage_error() -> type[Exception]:
    """The option parser's UsageError class. typer >= 0.20 vendors click; older versions use
    click itself: imported by name so that the type checker sees one binding, whichever
    typer is installed."""
    try:
        module = importlib.import_module("typer._click.exceptions")
    except ImportError:  # pragma: no cover - depends on the installed typer
        module = importlib.import_module("click.exceptions")
    error: type[Exception] = module.UsageError
    return error


_ParserUsageError = _parser_usage_error()


class _Group(TyperGroup):
    """The root command: the option parser's own errors (unknown option, missing
    argument, bad value) exit 64 (EX_USAGE) like dpcli's UsageError, not click's 2,
    and with ``--json`` print the same one-line error object as any failure."""

    _args: tuple[str, ...] = ()

    def make_context(self, info_name: str | None, args: list[str], *rest: Any,
                     **kwargs: Any) -> Any:
        from dpcli.cli.coercion import install

        install(self)  # text and path options without pydantic (dpcli/cli/coercion.py)
        self._args = tuple(args)
        try:
            return super().make_context(info_name, args, *rest, **kwargs)
        except _ParserUsageError as exc:
            raise self._usage(exc) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except _ParserUsageError as exc:  # a subcommand's arguments
            raise self._usage(exc) from None

    def _usage(self, exc: Any) -> Any:
        exc.exit_code = EX_USAGE
        if "--json" in self._args and type(exc).__name__ != "NoArgsIsHelpError":
            from dpcli.cli.common import error_object
            from dpcli.cli.ui import UI

            UI(json=True).emit_json(error_object("usage", exc.format_message(), EX_USAGE,
                                                 charged=False))
        return exc


def _new_app() -> typer.Typer:
    return typer.Typer(
        cls=_Group,
        help=HELP,
        no_args_is_help=True,
        add_completion=True,   # `dpcli --install-completion` (README "Quick start")
        pretty_exceptions_show_locals=False,  # a traceback's locals would be private rows
        context_settings={"help_option_names": ["-h", "--help"]},
    )


app = _new_app()
app.add_typer(ledger_cmd.app, name="ledger")
app.command("init")(init_cmd.init)
app.add_typer(schema_cmd.app, name="schema")
app.command("inspect")(inspect_cmd.inspect)
app.command("tabulate")(tabulate_cmd.tabulate)
app.command("select-features")(select_features_cmd.select_features)
app.command("publish-grid")(publish_grid_cmd.publish_grid)
app.command("synthesize")(synthesize_cmd.synthesize)
app.command("train-nb")(train_nb_cmd.train_nb)
app.command("train-brc")(train_brc_cmd.train_brc)
app.command("validate")(validate_cmd.validate)
app.command("predict")(predict_cmd.predict)
app.command("roc")(roc_cmd.roc)
app.command("evaluate")(evaluate_cmd.evaluate)
app.command("show")(show_cmd.show)
app.command("plan")(plan_cmd.plan)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dpcli {__version__}")
        raise typer.Exit()


@app.callback()
def root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="Print the version and exit.")) -> None:
    pass


def app_for(args: Sequence[str]) -> typer.Typer:
    """``app``, or, when ``args`` start with the name of one of its commands, a copy of it
    that holds that command alone (the same root options, group class and settings).

    typer builds the click options of every registered command before it parses
    anything: ~15 ms of every run's start-up for the nineteen commands it does not run.
    ``--help`` and other root options, no command, a misspelt one (its "did you mean"
    lists the others) and shell completion get the whole ``app``."""
    if not args or args[0].startswith("-") or any(k.endswith("_COMPLETE") for k in os.environ):
        return app
    commands = [c for c in app.registered_commands if c.name == args[0]]
    groups = [g for g in app.registered_groups if g.name == args[0]]
    if len(commands) + len(groups) != 1:
        return app
    one = _new_app()
    one.registered_commands, one.registered_groups = commands, groups
    one.registered_callback = app.registered_callback
    return one


def main() -> None:
    """Console-script entry point: standard streams, signals, then the command."""
    from dpcli import signals

    _open_standard_fds()
    if hasattr(signal, "SIGPIPE"):  # `dpcli ledger show | head` must not raise BrokenPipeError
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # (a release's summary: see UI.emit_json)
    signals.install()
    from dpcli.data.pandas_shim import defer_pandas

    defer_pandas()  # pyarrow would import pandas (0.3-0.5 s) on its first array
    code: int | str | None = 0
    try:
        app_for(sys.argv[1:])()
    except SystemExit as exc:
        code = exc.code
    except signals.Terminated as exc:  # before or after a command (its own errors are handled)
        sys.stderr.write(f"error: {exc.message}\n")
        code = exc.exit_code
    finally:
        signals.restore()
    _exit(code)


def _exit(code: int | str | None) -> None:
    """End the process with ``code`` once every thread dpcli started is joined.

    Ordinary exit runs the interpreter's teardown and then C++ static
    destructors; a native thread still alive then (pyarrow's reader and I/O
    pools, which dpcli does not own and cannot join) can abort the process
    with "terminate called without an active exception" (exit 134) after a
    run that succeeded, and after a release that is recorded. So: join our
    read-aheads and any non-daemon thread, run the atexit handlers, flush the
    standard streams, and leave with ``os._exit``: the exit code is the one
    the run chose.
    """
    import atexit
    import os
    import threading

    from dpcli.data.prefetch import stop_all

    if isinstance(code, str):  # sys.exit("message") semantics
        sys.stderr.write(code + "\n")
        code = 1
    status = 0 if code is None else int(code)
    stop_all()
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


def _open_standard_fds() -> None:
    """Hold /dev/null on any of fds 0-2 that the caller closed (``dpcli ... >&-``).

    Otherwise the next file opened (the ledger, an output) would get fd 1 or 2
    and receive whatever a library prints there.
    """
    import os

    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)
