"""Terminal output: talk on stderr, data on stdout, no colour or bars without a TTY.

rich already drops colour when stderr is not a terminal and honours NO_COLOR;
progress bars are shown only on a terminal and never with ``--quiet``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.text import Text


@dataclass
class UI:
    quiet: bool = False
    json: bool = False
    verbose: bool = False

    def __post_init__(self) -> None:
        # markup off: paths and messages may hold '[...]', which rich would eat or reject
        self.err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)

    def say(self, text: str = "", **kwargs: Any) -> None:
        """A line of talk on stderr (suppressed by --quiet)."""
        if not self.quiet:
            self.err.print(text, **kwargs)

    def show(self, renderable: Any) -> None:
        if not self.quiet:
            self.err.print(renderable)

    def warn(self, text: str) -> None:
        """Warnings are shown even with --quiet."""
        self.err.print(Text("warning: ", style="yellow") + Text(text))

    def error(self, text: str) -> None:
        self.err.print(Text("error: ", style="red") + Text(text))

    def emit_json(self, obj: Any) -> None:
        """The machine-readable summary: one line of JSON on stdout (JSON Lines friendly)."""
        sys.stdout.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")
        sys.stdout.flush()

    @contextmanager
    def progress(self, description: str, total: int | None) -> Iterator[Any]:
        """Yield ``advance(rows)``; draws a bar (rows, rows/s, ETA) only on a terminal."""
        if self.quiet or not self.err.is_terminal:
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
        class RowRate(ProgressColumn):
            def render(self, task: Any) -> Text:
                speed = task.finished_speed or task.speed
                return Text("" if speed is None else f"{speed:,.0f} rows/s")

        columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("rows"), RowRate(), TimeRemainingColumn()]
        with Progress(*columns, console=self.err, transient=True) as bar:
            task = bar.add_task(description, total=total)
            yield lambda rows: bar.advance(task, rows)

