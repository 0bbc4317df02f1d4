"""SIGINT, SIGTERM and SIGHUP end a run the same way: a message, a ``failed`` entry, no temp file.

Why: ``kill``, a closed terminal or a cron timeout (SIGTERM, SIGHUP) used
to kill a run outright: no message, a reservation that never ended and
temporary files left behind. :func:`install` (called by the console entry
point) makes each of these signals raise :class:`Terminated` in the main
thread, so the ``charged`` context records the failure (the charge stays),
outputs discard their temporary files and the CLI exits 128 + the signal's
number (130, 143, 129).

Appends to the ledger run inside :func:`held`: a signal that arrives then is
kept and raised by :func:`deliver` once the line is on disk, so a signal never
tears a ledger line or leaves a reservation that ``charged`` does not know of.
Once a run is ending, further signals are ignored so that its cleanup (a
ledger line, a few unlinks) completes.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypedDict

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Terminated(BaseException):
    """A signal asked the run to stop (a BaseException, like KeyboardInterrupt: no
    ``except Exception`` may swallow it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def message(self) -> str:
        if self.signum == signal.SIGINT:
            return "interrupted"
        return f"terminated by {signal.Signals(self.signum).name}"


class _State(TypedDict):
    holding: int         # depth of nested held() blocks
    pending: int | None  # a signal kept pending by held(), delivered on leaving it
    ending: bool         # a Terminated was raised: later signals let its cleanup finish


_state: _State = {"holding": 0, "pending": None, "ending": False}
_lock = threading.Lock()


def _handler(signum: int, _frame: FrameType | None) -> None:
    if _state["ending"]:
        return  # the run is already ending: let its cleanup finish
    if _state["holding"]:
        if _state["pending"] is None:
            _state["pending"] = signum
        return
    _state["ending"] = True
    raise Terminated(signum)


_saved: dict[int, Any] = {}


def install() -> None:
    """Make SIGINT, SIGTERM and SIGHUP raise :class:`Terminated` (main thread only).

    A signal the caller ignores stays ignored: ``nohup dpcli …`` must survive
    a hangup, and a background job of a non-interactive shell ignores SIGINT.
    """
    _state.update({"holding": 0, "pending": None, "ending": False})
    for sig in HANDLED:
        previous = signal.getsignal(sig)
        if previous == signal.SIG_IGN:
            continue
        _saved[sig] = previous
        signal.signal(sig, _handler)


def restore() -> None:
    """The handlers found by :func:`install` (the run is over)."""
    while _saved:
        sig, previous = _saved.popitem()
        signal.signal(sig, previous)


@contextmanager
def held(*, keep: bool = False) -> Iterator[None]:
    """Keep signals pending while the block runs (a ledger append must not be cut).

    On leaving the outermost block a pending signal is raised, unless ``keep``:
    then the caller raises it with :func:`deliver` where a run can end cleanly.
    """
    with _lock:
        _state["holding"] += 1
    try:
        yield
    finally:
        with _lock:
            _state["holding"] -= 1
    if not keep:
        deliver()


def deliver() -> None:
    """Raise :class:`Terminated` for a signal kept pending by :func:`held`, if any."""
    signum = _state["pending"]
    if signum is not None and not _state["holding"]:
        _state.update({"pending": None, "ending": True})
        raise Terminated(signum)
