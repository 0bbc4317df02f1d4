"""Terminal output: talk on stderr, data on stdout, no colour or bars without a TTY.

rich already drops colour when stderr is not a terminal and honours NO_COLOR.
Progress: a bar on a terminal (not with ``--quiet``); without a terminal
(cron, a Makefile piped to a log) nothing, unless ``--progress`` asks for it —
then a plain line every few seconds, which a log file can hold.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

PROGRESS_LINE_SECONDS = 10.0
#: variables that make rich treat a stream as a terminal (or a notebook) and colour it
_TERMINAL_VARIABLES = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS",
                       "JUPYTER_LINES")

#: ``-v/--verbose`` of the running command (set by :func:`dpcli.cli.common.handle_errors`),
#: the default of :attr:`UI.verbose` so that every UI a command builds honours it
VERBOSE: ContextVar[bool] = ContextVar("dpcli_verbose", default=False)


@contextmanager
def _pipe_errors_raised() -> Iterator[None]:
    """SIGPIPE ignored for the block (main thread): a closed pipe raises BrokenPipeError
    there instead of killing the process after its release was recorded."""
    import signal
    import threading

    if not hasattr(signal, "SIGPIPE") or threading.current_thread() is not \
            threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGPIPE, old)


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so that the exit's flush of what is buffered cannot fail."""
    import os

    try:
        fd = sys.stdout.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except (AttributeError, OSError, ValueError):
        pass


@dataclass
class UI:
    quiet: bool = False
    json: bool = False
    verbose: bool = field(default_factory=VERBOSE.get)  # -v: tracebacks, the full plan
    force_progress: bool = False  # --progress: report progress even without a terminal
    report: bool = False  # --report: the custodian's exact private figures on stderr too
    # every warning of the run, also put into the --json summary: a script or a cron job
    # reading only stdout must not log a degenerate or noise-dominated release as clean
    warnings: list[str] = field(default_factory=list)

    @cached_property
    def err(self) -> Console:
        """The console on stderr, made (and rich imported, about 30 ms) on first use: a
        quiet run that has nothing to say never needs it (docs/scale.md, fixed cost)."""
        from rich.console import Console

        # markup off: paths and messages may hold '[...]', which rich would eat or reject
        return Console(stderr=True, highlight=False, soft_wrap=True, markup=False,
                       emoji=False)

    def say(self, text: str = "", **kwargs: Any) -> None:
        """A line of talk on stderr (suppressed by --quiet)."""
        if not self.quiet:
            self.err.print(text, **kwargs)

    def show(self, renderable: Any) -> None:
        if not self.quiet:
            self.err.print(renderable)

    def result(self, renderable: Any) -> None:
        """The command's own result for a reader (a table, a total) on stdout, so that
        ``> file`` and pipes get it; talk and warnings stay on stderr. Not silenced by
        --quiet: asking for a report and then hiding it helps nobody."""
        from rich.console import Console

        Console(highlight=False, soft_wrap=True, markup=False, emoji=False).print(renderable)

    def warn(self, text: str) -> None:
        """Warnings are shown even with --quiet, and repeated in the --json summary."""
        self.warnings.append(text)
        if not self._plain_line("warning: " + text):
            from rich.text import Text

            self.err.print(Text("warning: ", style="yellow") + Text(text))

    def error(self, text: str) -> None:
        if not self._plain_line("error: " + text):
            from rich.text import Text

            self.err.print(Text("error: ", style="red") + Text(text))

    def _plain_line(self, line: str) -> bool:
        """Write ``line`` on stderr without rich when rich would write exactly it (a
        quiet run that only warns need not import rich: ~30 ms). True if written.

        rich writes a line unchanged where it uses no colour (not a terminal, no variable
        forcing one: see ``rich.console.Console.is_terminal``) and the line holds no tab
        (expanded) nor control character (removed); the stream must be UTF-8 (rich's own
        message for an encoding error). Anything else, or a console already made, goes
        through rich (tests/cli/test_ui_text.py compares the two).
        """
        import os

        stream = sys.stderr
        if "err" in self.__dict__ or stream is None or any(
                k in os.environ for k in _TERMINAL_VARIABLES):
            return False
        if not all(part.isprintable() for part in line.split("\n")):
            return False
        try:
            import codecs

            if stream.isatty() or codecs.lookup(stream.encoding or "ascii").name != "utf-8":
                return False
        except (AttributeError, LookupError, OSError, ValueError):
            return False
        stream.write(line + "\n")
        stream.flush()
        return True

    def emit_json(self, obj: Any) -> None:
        """The machine-readable summary: one line of JSON on stdout (JSON Lines friendly).

        A closed or broken stdout (``>&-``, ``| head -c0``) is reported on
        stderr and the command still ends 0: the summary comes after the
        release is recorded, which a missing reader must not turn into a
        failure. The run's warnings so far are added as ``warnings`` (a list of the stderr
        lines) when there are any and ``obj`` has none of its own.
        """
        if isinstance(obj, dict) and self.warnings and "warnings" not in obj:
            obj = {**obj, "warnings": list(self.warnings)}
        text = json.dumps(obj, ensure_ascii=False, default=str) + "\n"
        try:
            if sys.stdout is None:
                raise ValueError("no standard output")
            with _pipe_errors_raised():
                sys.stdout.write(text)
                sys.stdout.flush()
        except (OSError, ValueError) as exc:
            _silence_stdout()
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self.warn(f"the JSON summary could not be printed on standard output ({why}); "
                      "the run's result stands (see `dpcli ledger show`)")

    @contextmanager
    def progress(self, description: str, total: int | None,
                 unit: str = "rows") -> Iterator[Any]:
        """Yield ``advance(count)``: a bar (count, rate, ETA) on a terminal, else lines on request.

        ``unit`` names what is counted: rows for a pass over the data, or e.g.
        fits or grids for the steps of an algorithm.

        On a terminal the bar shows unless ``--quiet``; without one, progress
        is reported only with ``--progress`` (:meth:`_progress_lines`).
        """
        if self.force_progress and not self.err.is_terminal:
            with self._progress_lines(description, total, unit) as advance:
                yield advance
            return
        if (self.quiet and not self.force_progress) or not self.err.is_terminal:
            yield lambda rows: None
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            ProgressColumn,
            TextColumn,
            TimeRemainingColumn,
        )
        from rich.text import Text

        class Rate(ProgressColumn):
            def render(self, task: Any) -> Text:
                speed = task.finished_speed or task.speed
                return Text("" if speed is None else _rate(speed, unit))

        columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn(unit), Rate(), TimeRemainingColumn()]
        with Progress(*columns, console=self.err, transient=True) as bar:
            task = bar.add_task(description, total=total)
            yield lambda rows: bar.advance(task, rows)

    @contextmanager
    def _progress_lines(self, description: str, total: int | None, unit: str = "rows",
                        every: float = PROGRESS_LINE_SECONDS) -> Iterator[Any]:
        """Plain progress lines for a log: one every ``every`` seconds and one at the end."""
        start = last = time.monotonic()
        done = 0

        def line(now: float) -> None:
            rate = done / max(now - start, 1e-9)
            text = f"{description}: {done:,} {unit}"
            if total:
                text += f" of {total:,} ({100 * done / total:.0f}%)"
            text += f", {_rate(rate, unit)}"
            if total and rate > 0 and done < total:
                text += f", about {(total - done) / rate:,.0f} s left"
            self.err.print(text)

        def advance(rows: int) -> None:
            nonlocal done, last
            done += rows
            now = time.monotonic()
            if now - last >= every:
                last = now
                line(now)

        yield advance
        line(time.monotonic())


def _rate(per_second: float, unit: str) -> str:
    """A rate a slow unit can read: "3.2 fits/s", or "45 s per fit" below one a second (a
    14-minute train-brc printed "0 fits/s")."""
    if per_second >= 10:
        return f"{per_second:,.0f} {unit}/s"
    if per_second >= 1:
        return f"{per_second:.1f} {unit}/s"
    if per_second <= 0:
        return f"0 {unit}/s"
    return f"{1 / per_second:,.0f} s per {unit.removesuffix('s')}"
