"""Options shared by commands, and the one place where errors become exit codes."""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from dpcli.cli.ui import UI, VERBOSE
from dpcli.errors import EX_USAGE, INTERNAL_EXIT, DpcliError

F = TypeVar("F", bound=Callable[..., Any])

SpecOpt = Annotated[Path, typer.Option(
    "--spec", "-s", help="YAML spec of the dataset: schema, budget, ledger, command sections.",
    dir_okay=False)]


def number(text: str | float) -> float:
    """A number option's value: Python's ``float()`` minus the digit separator it accepts.

    Why: ``float("0_1")`` is 1 and ``float("1_0")`` is 10, so a typo in ``--epsilon 0_1``
    would spend ten times the ε meant; the shell has no such numbers, so nobody means them.
    """
    if isinstance(text, int | float):  # an option's default, passed through as well
        return float(text)
    text = text.strip()
    if "_" in text:
        raise typer.BadParameter(f"{text!r} is not a number (write it with digits, a dot and "
                                 "an optional exponent, e.g. 0.1 or 1e-3)")
    try:
        return float(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a number") from None


EpsilonOpt = Annotated[float | None, typer.Option(
    "--epsilon", "-e", parser=number,
    help="ε this run spends (overrides the spec's section for this run).")]
SeedOpt = Annotated[int | None, typer.Option(
    "--seed", min=0, help="Seed the noise for a reproducible test or benchmark; the run is marked "
    "'seeded' in the ledger. Omit it for real releases (OS randomness).")]
DryRunOpt = Annotated[bool, typer.Option(
    "--dry-run", help="Validate spec, options and file, show the planned spend; charge nothing.")]
JsonOpt = Annotated[bool, typer.Option(
    "--json", help="Print a machine-readable summary on stdout.")]
QuietOpt = Annotated[bool, typer.Option(
    "--quiet", "-q", help="No talk on stderr, only warnings and errors.")]
ReuseOpt = Annotated[bool, typer.Option(
    "--reuse", help="If the ledger holds this exact release (same command, parameters, ε, spec "
    "and input file) completed, with its outputs unchanged, exit 0 without spending; "
    "otherwise run as usual. Identical --reuse runs started together wait for each other and "
    "charge once. For Makefiles and retried cron jobs.")]
ReportOpt = Annotated[bool, typer.Option(
    "--report", help="Also print the custodian's data report on stderr: exact private figures "
    "(rows read, values clamped, mapped, imputed or dropped; the data row of a bad value). "
    "Off by default so that logs and cron mail hold only released or data-independent text.")]
VerboseOpt = Annotated[bool, typer.Option(
    "--verbose", "-v", help="The full privacy plan (every step, its calibration) instead of "
    "one line per mechanism; tracebacks for unexpected errors.")]
ProgressOpt = Annotated[bool, typer.Option(
    "--progress", help="Report progress on stderr even without a terminal (a line every 10 s, "
    "for cron logs). On a terminal a bar (rows, rows/s, time left) shows anyway.")]
DataArg = Annotated[Path, typer.Argument(
    metavar="DATA", help="Private data: a CSV or Parquet file (or a folder of Parquet files).")]
SourceArg = Annotated[str, typer.Argument(
    metavar="DATA", help="Private data: a CSV or Parquet file (or a folder of Parquet files); "
    "with --engine spark, any path Spark reads (a folder, hdfs://…, s3a://bucket/dir/).")]
EngineOpt = Annotated[str, typer.Option(
    "--engine", help="Who computes the statistics: local (this process, streaming the file in "
    "batches; memory bounded by the statistics) or spark (a Spark cluster: needs "
    "pip install 'dpcli[spark]' and Java 17; master from the spec's spark section or "
    "DPCLI_SPARK_MASTER). Noise is always added here, by the same mechanisms.")]


@dataclass(frozen=True)
class RunOptions:
    """The options every spending command takes, handed to it as one value."""

    seed: int | None = None
    dry_run: bool = False
    json: bool = False
    quiet: bool = False
    progress: bool = False
    report: bool = False
    reuse: bool = False
    verbose: bool = False

    def ui(self) -> UI:
        return UI(quiet=self.quiet, json=self.json, force_progress=self.progress,
                  report=self.report)


_RUN_OPTIONS: dict[str, tuple[Any, Any]] = {
    "seed": (SeedOpt, None), "dry_run": (DryRunOpt, False), "json": (JsonOpt, False),
    "quiet": (QuietOpt, False), "progress": (ProgressOpt, False),
    "report": (ReportOpt, False), "reuse": (ReuseOpt, False), "verbose": (VerboseOpt, False)}


def spending_command(fn: F) -> F:
    """A spending command: ``fn`` takes ``opts: RunOptions`` in place of the eight options
    every spending command shares (--seed, --dry-run, --json, --quiet, --progress, --report,
    --reuse, -v), which are declared here once and added to its command line; errors
    become exit codes (:func:`handle_errors`)."""
    import inspect
    import typing

    sig = inspect.signature(fn)
    # the command modules use postponed annotations: resolve them here, since the new
    # signature is read as given (Typer does not resolve strings in a __signature__)
    hints = typing.get_type_hints(fn, include_extras=True)
    kept = [p.replace(annotation=hints.get(name, p.annotation))
            for name, p in sig.parameters.items() if name != "opts"]
    added = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                               annotation=annotation)
             for name, (annotation, default) in _RUN_OPTIONS.items()]

    @functools.wraps(fn)
    def with_options(*args: Any, **kwargs: Any) -> Any:
        opts = RunOptions(**{name: kwargs.pop(name) for name in _RUN_OPTIONS if name in kwargs})
        return fn(*args, opts=opts, **kwargs)

    with_options.__signature__ = sig.replace(parameters=kept + added)  # type: ignore[attr-defined]
    annotations = {k: v for k, v in hints.items() if k != "opts"}
    with_options.__annotations__ = {**annotations,
                                    **{name: a for name, (a, _) in _RUN_OPTIONS.items()}}
    return handle_errors(with_options)  # type: ignore[return-value]


def handle_errors(fn: F) -> F:
    """Turn dpcli errors into a one-line message and their exit code.

    The codes are the BSD sysexits listed in :mod:`dpcli.errors` and
    docs/exit-codes.md: 3 budget, 64 usage, 65 data, 66 no input, 73 an output
    that changed after the checks could not be created (after the charge), 74 the
    system refused an I/O operation (no space, permission, read-only: also
    when it surfaces as a ledger error), 76 ledger, 78 spec, 128 + N a signal
    (130 SIGINT, 143 SIGTERM, 129 SIGHUP). Unexpected errors exit 70
    (EX_SOFTWARE) with the exception type only: a traceback's text or locals could echo
    private rows, so it is shown only with -v.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from dpcli.errors import IOFailure, Reused, describe_environment, environment_errno
        from dpcli.run import COMPLETED, RESERVED
        from dpcli.signals import Terminated

        ui = UI(quiet=bool(kwargs.get("quiet")), verbose=bool(kwargs.get("verbose")),
                report=bool(kwargs.get("report")), json=bool(kwargs.get("json")))
        reset = None
        if kwargs.get("reuse"):
            from dpcli.run import REUSE

            token = REUSE.set(True)
            reset = lambda: REUSE.reset(token)  # noqa: E731
        reserved: list[str] = []
        reserved_token = RESERVED.set(reserved)
        completed: set[str] = set()
        completed_token = COMPLETED.set(completed)
        verbose_token = VERBOSE.set(ui.verbose)

        def fail(kind: str, message: str, code: int, said: bool = False) -> typer.Exit:
            if said:   # the message itself says what became of the charge
                pass
            elif reserved and reserved[-1] in completed:   # a signal after the record
                message += (f" — after this run had completed: its outputs are written and "
                            f"recorded (ledger run {reserved[-1]}, complete); do not run it "
                            "again")
            elif reserved:  # say it in words too, not only in --json's "charged"
                message += (f" — this run's charge stays (ledger run {reserved[-1]}, "
                            "recorded as failed)")
            ui.error(message)
            if ui.json:
                ui.emit_json(error_object(kind, message, code, charged=bool(reserved)))
            return typer.Exit(code)

        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except Reused as exc:
            ui.say(str(exc), markup=False)
            for caution in reused_cautions(exc.outputs):   # a rerun repeats what was said
                ui.warn(caution)
            if ui.json:
                # the keys every command's line leads with, so a cron log has one shape
                ui.emit_json({"command": exc.command, "dataset": exc.dataset,
                              "run_id": exc.run_id, "reused": exc.run_id,
                              "outputs": exc.outputs, "spent": {"epsilon": 0.0, "delta": 0.0}})
            raise typer.Exit(0) from None
        except DpcliError as exc:
            code = exc.exit_code
            kind = error_kind(exc)
            if code != IOFailure.exit_code and environment_errno(exc) is not None:
                code, kind = IOFailure.exit_code, "io"  # e.g. the ledger's disk is full
            elif code == EX_USAGE and reserved:
                # 64 promises that nothing was charged: a usage check met after this run's
                # reservation came too late (dpcli's bug), so it must not exit 64
                code, kind = INTERNAL_EXIT, "internal"
            # a bad value's data row is a private figure: shown only to a custodian who asks
            raise fail(kind, str(exc) if ui.report else exc.redacted(), code,
                       said=exc.charge_said) from None
        except Terminated as exc:
            raise fail("signal", exc.message, exc.exit_code) from None
        except KeyboardInterrupt:
            raise fail("signal", "interrupted", 130) from None
        except OSError as exc:
            if environment_errno(exc) is None:
                raise _unexpected(ui, exc, fail) from None
            raise fail("io", describe_environment(exc), IOFailure.exit_code) from None
        except Exception as exc:
            raise _unexpected(ui, exc, fail) from None
        finally:
            RESERVED.reset(reserved_token)
            COMPLETED.reset(completed_token)
            VERBOSE.reset(verbose_token)
            if reset is not None:
                reset()

    return wrapper  # type: ignore[return-value]


def reused_cautions(outputs: list[str]) -> list[str]:
    """The cautions a reused release's JSON outputs carry in their envelopes (a degenerate
    model, a verdict that was not usable, …), one line each with its file: the first run
    said them on stderr, and a cron job that only ever sees the reruns must see them too.
    Reads public outputs only; an output that is not a dpcli envelope says nothing."""
    from dpcli.io import envelope_cautions, read_envelope

    found = []
    for out in outputs:
        if not out.endswith(".json"):
            continue
        try:
            env = read_envelope(Path(out))
        except (DpcliError, OSError):
            continue
        found += [f"{out}: {c}" for c in envelope_cautions(env)]
    return found


#: the ``error`` field of a failure's ``--json`` object, by the exception's class
ERROR_KINDS = {"UsageError": "usage", "DataError": "data", "NoInput": "no_input",
               "SpecError": "spec", "SpecNotFound": "no_input", "LedgerError": "ledger",
               "BudgetExhausted": "budget", "IOFailure": "io",
               "CannotCreate": "cant_create", "OutputBusy": "busy"}


def error_kind(exc: DpcliError) -> str:
    """``usage``, ``data``, ``no_input``, ``spec``, ``ledger``, ``budget``, ``io``,
    ``cant_create`` or ``busy``
    (the nearest dpcli class in the exception's ancestry)."""
    for cls in type(exc).__mro__:
        if cls.__name__ in ERROR_KINDS:
            return ERROR_KINDS[cls.__name__]
    return "internal"


def error_object(kind: str, message: str, exit_code: int, *, charged: bool) -> dict[str, Any]:
    """What ``--json`` prints on stdout when a command fails (one line, like a success's
    summary, so that a cron log of ``--json`` lines records failures too).

    ``charged`` says whether this run reserved budget in the ledger: a failure after
    the reservation keeps its charge (the ledger records the run ``failed``).
    ``message`` is the stderr line, without private figures unless ``--report``.
    """
    return {"error": kind, "message": message, "exit_code": exit_code, "charged": charged}


def _unexpected(ui: UI, exc: BaseException, fail: Callable[[str, str, int], typer.Exit]
                ) -> typer.Exit:
    if ui.verbose:
        ui.err.print(traceback.format_exc(), markup=False)
    return fail("internal", f"unexpected {type(exc).__name__}; rerun with -v for a traceback",
                INTERNAL_EXIT)
