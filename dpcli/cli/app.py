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
from dpcli.errors import EX_USAGE

HELP = f"""dpcli {__version__}: differentially private machine learning on tabular data.

Every command that reads private values spends a declared ε from the
dataset's lifetime budget, reserved in an append-only, hash-chained ledger
before any value is read. Guarantees are ε-DP (or (ε, δ)-DP) under
replace-one neighbours (train-brc with public features: replace-one on the
private features). Exit codes (BSD sysexits; docs/exit-codes.md): 0 ok,
3 budget exhausted, 64 usage, 65 bad data, 66 input file missing,
70 internal error, 73 an output's path changed under the run after its
charge, 74 the system refused an I/O operation (disk full, permission,
read-only file system), 75 another run is writing one of its outputs now
(try again later), 76 ledger unusable or fails verification (or copied),
78 bad spec, 130 / 143 / 129 ended by SIGINT / SIGTERM /
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


#: the commands in the order --help lists them: name, module in dpcli.cli, and the function
#: it holds (None: the module's ``app``, a group of subcommands)
COMMANDS: tuple[tuple[str, str, str | None], ...] = (
    ("ledger", "ledger_cmd", None),
    ("init", "init_cmd", "init"),
    ("schema", "schema_cmd", None),
    ("inspect", "inspect_cmd", "inspect"),
    ("tabulate", "tabulate_cmd", "tabulate"),
    ("select-features", "select_features_cmd", "select_features"),
    ("publish-grid", "publish_grid_cmd", "publish_grid"),
    ("synthesize", "synthesize_cmd", "synthesize"),
    ("train-nb", "train_nb_cmd", "train_nb"),
    ("train-brc", "train_brc_cmd", "train_brc"),
    ("validate", "validate_cmd", "validate"),
    ("predict", "predict_cmd", "predict"),
    ("roc", "roc_cmd", "roc"),
    ("evaluate", "evaluate_cmd", "evaluate"),
    ("show", "show_cmd", "show"),
    ("plan", "plan_cmd", "plan"),
)


def _register(target: typer.Typer, name: str, module_name: str, function: str | None) -> None:
    """Import one command's module (only now: each holds its options' declarations) and add
    the command, or its group of subcommands, to ``target``."""
    module = importlib.import_module(f"dpcli.cli.{module_name}")
    if function is None:
        target.add_typer(module.app, name=name)
    else:
        target.command(name)(getattr(module, function))


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dpcli {__version__}")
        raise typer.Exit()


def root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="Print the version and exit.")) -> None:
    pass


def _with_root(target: typer.Typer) -> typer.Typer:
    target.callback()(root)
    return target


_app: typer.Typer | None = None


def whole_app() -> typer.Typer:
    """The whole application, every command's module imported: built on first use (also
    as this module's ``app``)."""
    global _app
    if _app is None:
        _app = _with_root(_new_app())
        for entry in COMMANDS:
            _register(_app, *entry)
    return _app


def __getattr__(name: str) -> Any:
    """``app`` is :func:`whole_app` (PEP 562: importing this module imports no command)."""
    if name == "app":
        return whole_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def app_for(args: Sequence[str]) -> typer.Typer:
    """The whole app, or, when ``args`` start with the name of one of its commands, an app
    that holds that command alone (the same root options, group class and settings), for
    which only that command's module is imported.

    typer builds the click options of every registered command before it parses
    anything: ~15 ms of every run's start-up for the nineteen commands it does not run;
    importing their modules cost ~8 ms more. ``--help`` and other root options, no
    command, a misspelt one (its "did you mean" lists the others) and shell completion
    get the whole app."""
    if args and not args[0].startswith("-") and not any(
            k.endswith("_COMPLETE") for k in os.environ):
        named = [entry for entry in COMMANDS if entry[0] == args[0]]
        if len(named) == 1:
            one = _with_root(_new_app())
            _register(one, *named[0])
            return one
    return whole_app()


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
