"""How a library run talks to whoever called it: the CLI's terminal, or nobody.

The library never prints. A run hands its talk (the plan, notes, warnings,
progress) to a :class:`Reporter`; the CLI passes one that writes to stderr,
a notebook gets :class:`Silent`, whose warnings are Python warnings.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from dpcli.mechanisms import Plan
    from dpcli.spec import Spec

Advance = Callable[[int], None]


class DpcliWarning(UserWarning):
    """A warning about a release (e.g. a degenerate model, a seeded run)."""


class Reporter(Protocol):
    def say(self, text: str) -> None:
        """A line of talk (a note, what was written)."""

    def warn(self, text: str) -> None:
        """Something the user must see: a weak or degenerate release, a seeded run."""

    def plan(self, spec: Spec, plan: Plan, relation: str) -> None:
        """The planned spend, shown before anything is charged."""

    def progress(self, description: str, total: int | None,
                 unit: str = "rows") -> AbstractContextManager[Advance]:
        """A context yielding ``advance(count)`` for a pass over the data (``unit`` rows) or
        the steps of an algorithm (e.g. fits)."""


class Silent:
    """The library's default: no talk; warnings become :class:`DpcliWarning`."""

    def say(self, text: str) -> None:
        pass

    def warn(self, text: str) -> None:
        warnings.warn(text, DpcliWarning, stacklevel=3)

    def plan(self, spec: Spec, plan: Plan, relation: str) -> None:
        pass

    @contextmanager
    def progress(self, description: str, total: int | None,
                 unit: str = "rows") -> Iterator[Advance]:
        yield lambda count: None
