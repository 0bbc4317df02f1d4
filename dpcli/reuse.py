"""One ``--reuse`` request at a time: identical requests wait for each other (docs/ledger.md).

Why: ``--reuse`` looks for a completed identical release before it charges. Two
identical jobs started together (overlapping cron retries, ``make -j`` with one
target twice) both looked before either had completed, and both charged and
released a fresh noisy table. The look and the charge must be one step for
identical requests: the first one's outcome must be visible to the next.

So a ``--reuse`` run holds an exclusive ``flock`` on a lock file named by a
hash of its request — dataset, command, arguments (ε and outputs included),
spec digest and the input's keyed digest — from before its look until its
``complete`` (or ``failed``) entry is written. An identical run started
meanwhile waits there (saying so on stderr), then looks: it finds the first
one's release and is ``reused`` (nothing spent), or, if the first failed or was
killed (a lock dies with its process), runs itself. Different requests never
wait for each other, and runs without ``--reuse`` never take this lock.

Outputs are claimed the same way, by every spending run, with or without
``--reuse`` (:func:`claimed`): a run holds a lock named by the hash of each
output's resolved path (``<ledger>.out-<hash>.lock``), and one beside the
output (``.<name>.dpcli-claim``, seen by runs on other ledgers), from before
its charge until its ``complete`` entry is written. A run whose output is claimed by
another live run is refused before its charge (OutputBusy, exit 75): two
overlapping runs writing one file used to both charge and one lose its
release (exit 73). It never waits: a second run of the same release is what
``--reuse`` is for (taken inside the request's lock, so identical ``--reuse``
runs still wait for each other and end ``reused``).

A run also holds ``<ledger>.run-<run id>.lock`` from its reservation to its
record (:func:`running`), so that ``dpcli ledger show`` can tell a run still
in progress (``running``) from one whose process died (``interrupted``):
both have a reserve entry and no end yet.

The lock file sits beside the ledger (``<ledger>.reuse-<hash>.lock``, empty)
and is removed by its holder when it is done. A killed run cannot remove its
own: every spend on the ledger sweeps the lock files no process holds
(:func:`sweep_stale`), so they do not pile up until the same request runs
again. As in the ledger's own lock, a holder checks once locked that the path
still names the file it locked (its holder or the sweep may have unlinked it
meanwhile): otherwise it tries again.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

from dpcli.errors import LedgerError, OutputBusy

_TRIES = 20
_LOCK_NAME = re.compile(r"\.(reuse|out|run)-[0-9a-f]{32}\.lock")


def request_digest(*, dataset: str, command: str, arguments: dict[str, Any],
                   spec_digest: str, input_digest: str | None) -> str:
    """A hash naming one ``--reuse`` request (what :meth:`dpcli.ledger.Ledger.completed_like`
    matches); it reveals nothing beyond what the ledger already records."""
    from dpcli.ledger import reuse_arguments

    text = json.dumps([dataset, command, reuse_arguments(arguments), spec_digest, input_digest],
                      sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def lock_path(ledger_file: Path, request: str) -> Path:
    """The lock file of ``request`` beside the ledger file (symlinks followed)."""
    real = Path(os.path.realpath(ledger_file))
    return real.with_name(f"{real.name}.reuse-{request}.lock")


@contextmanager
def serialised(ledger_file: Path, request: str,
               on_wait: Callable[[Path], None] | None = None) -> Iterator[None]:
    """Hold the lock of ``request`` for the block; wait (calling ``on_wait`` once) while an
    identical request holds it. A signal while waiting ends the wait (Terminated)."""
    with _held(lock_path(ledger_file, request), on_wait=on_wait):
        yield


def output_lock_path(ledger_file: Path, output: Path) -> Path:
    """The lock file claiming ``output`` (by its resolved path) beside the ledger file."""
    real = Path(os.path.realpath(ledger_file))
    name = hashlib.sha256(os.fsencode(os.path.realpath(output))).hexdigest()[:32]
    return real.with_name(f"{real.name}.out-{name}.lock")


#: the claim beside an output: ``.<name>.dpcli-claim`` (:func:`beside_lock_path`)
CLAIM_MARK = ".dpcli-claim"


def beside_lock_path(output: Path) -> Path:
    """The lock file claiming ``output`` in its own folder, whatever the ledger."""
    real = Path(os.path.realpath(output))
    return real.with_name(f".{real.name}{CLAIM_MARK}")


@contextmanager
def claimed(ledger_file: Path, outputs: Sequence[Path]) -> Iterator[None]:
    """Hold the lock of every output for the block; OutputBusy (nothing waited for, nothing
    charged yet) when another live run holds one. Locks are taken in the order of their
    paths, so two runs with overlapping outputs cannot each hold one the other needs.

    Each output is claimed twice: beside the ledger (``<ledger>.out-<hash>.lock``, the
    claim every run of the ledger sees) and beside the output (``.<name>.dpcli-claim``),
    which runs on *other* ledgers see too: two projects writing one file at once used to
    be caught only after both had charged (exit 73, a release lost). The second claim is
    best effort (a folder where no lock file can be made still has the first); a killed
    run's is taken and removed by the next run that writes that output."""
    paths = sorted({output_lock_path(ledger_file, o): o for o in outputs}.items())
    beside = sorted({beside_lock_path(o): o for o in outputs}.items())
    with ExitStack() as stack:
        for lock, output in paths:
            stack.enter_context(_held(lock, busy=functools.partial(_busy, output, lock)))
        # a folder the outputs will go into is made now, so that the claim can sit in it
        # (the first run into a new folder was otherwise unclaimed); removed again at the
        # end if nothing was written into it (a refused run leaves no empty folder)
        stack.callback(_remove_if_empty, _make_folders(lock.parent for lock, _ in beside))
        for lock, output in beside:
            with suppress(OSError):
                stack.enter_context(_held(lock, busy=functools.partial(_busy, output, lock),
                                          mode=0o644, beside=True))
        yield


def _make_folders(folders: Iterable[Path]) -> list[Path]:
    """Create the missing ``folders`` (and their missing parents); returns those created,
    innermost first. Best effort: a folder that cannot be made is left to the run's own
    checks."""
    made: list[Path] = []
    for folder in sorted(set(folders)):
        missing = []
        at = folder
        while not at.exists() and at != at.parent:
            missing.append(at)
            at = at.parent
        for new in reversed(missing):
            try:
                new.mkdir()
            except FileExistsError:
                continue
            except OSError:
                break
            made.append(new)
    return list(reversed(made))


def _remove_if_empty(folders: list[Path]) -> None:
    for folder in folders:
        with suppress(OSError):
            folder.rmdir()      # refused when anything is in it: a written output stays


def _busy(output: Path, lock: Path) -> OutputBusy:
    other = (" (perhaps a run on another ledger)" if lock.name.endswith(CLAIM_MARK)
             else "")
    return OutputBusy(f"{output}: another dpcli run{other} is writing this output now (it "
                      f"holds {lock}); nothing was charged. Run again once it has finished "
                      "(when both runs use --reuse on one ledger, an identical one waits for "
                      "the other and takes its release)")


def run_lock_path(ledger_file: Path, run_id: str) -> Path:
    """The lock file a run holds from its reservation to its record."""
    real = Path(os.path.realpath(ledger_file))
    return real.with_name(f"{real.name}.run-{run_id}.lock")


@contextmanager
def running(ledger_file: Path, run_id: str) -> Iterator[None]:
    """Hold the run's lock for the block. Others only look (:func:`is_running`, a shared lock
    for an instant) or sweep (an exclusive one for an instant): waited for, with the same
    check that the path still names the file locked as every lock here, so a look or a
    sweep at the moment of creation never leaves the run without its lock. Best effort: a
    lock file that cannot be made (a full disk) only costs ``ledger show`` the difference
    between running and interrupted, never the run. Readable by all (mode 0644): an
    auditor's ``ledger show`` under another account can look."""
    with ExitStack() as stack:
        with suppress(OSError, LedgerError):
            stack.enter_context(_held(run_lock_path(ledger_file, run_id), mode=0o644))
        yield


def is_running(ledger_file: Path, run_id: str) -> bool:
    """Whether a live process holds the run's lock (:func:`running`): looked at without
    waiting, never created, never through a link."""
    try:
        fd = os.open(run_lock_path(ledger_file, run_id), os.O_RDONLY | os.O_CLOEXEC
                     | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


@contextmanager
def _held(path: Path, *, on_wait: Callable[[Path], None] | None = None,
          busy: Callable[[], Exception] | None = None, mode: int = 0o600,
          beside: bool = False) -> Iterator[None]:
    """Hold ``path``'s flock for the block, then remove the file. A lock held by another
    process is waited for (``on_wait`` told once), or with ``busy`` refused by raising
    ``busy()``. The release is made with signals held: a signal then must not cut it, nor
    be reported as this run's end (dpcli.signals).

    ``beside``: a claim in an output's folder, which may be shared and less trusted than
    the ledger's: never opened through a link (a planted link would make dpcli create a
    file wherever it points), opened read-only when another account made it (flock needs
    no write access, so runs under two accounts still see each other), and removed again
    if this run made it but the file system refuses flock (it would be left behind)."""
    from dpcli import signals

    fd = -1
    told = held = False
    flags = os.O_CLOEXEC | (os.O_NOFOLLOW if beside else 0)
    try:
        for _ in range(_TRIES):
            made = False
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | flags, mode)
                made = True
            except FileExistsError:
                try:
                    fd = os.open(path, os.O_RDWR | flags)
                except PermissionError:
                    if not beside:
                        raise
                    fd = os.open(path, os.O_RDONLY | flags)
                except FileNotFoundError:
                    continue     # removed by its holder in between: make it again
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if busy is not None:
                    if not _free_soon(fd):
                        raise busy() from None
                else:
                    if on_wait is not None and not told:
                        on_wait(path)
                        told = True
                    fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:
                if made:       # no flock here (some network file systems): leave nothing
                    with suppress(OSError):
                        os.unlink(path)
                raise
            try:
                now = os.stat(path)
            except FileNotFoundError:
                now = None
            mine = os.fstat(fd)
            if now is not None and (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
                held = True
                break
            os.close(fd)  # its holder removed it while we waited: take the new one
            fd = -1
        else:
            if busy is not None:   # released and replaced over and over: others are at work
                raise busy()
            raise LedgerError(f"{path}: this lock file keeps being replaced while dpcli "
                              "waits for it; refusing to run")
        yield
    finally:
        with signals.held(keep=True):
            if held:
                with suppress(OSError):  # removed while still held: a waiter takes a new one
                    os.unlink(path)
            if fd >= 0:
                os.close(fd)  # also releases the lock


def _free_soon(fd: int, within: float = 0.05) -> bool:
    """Take ``fd``'s lock if it is freed within ``within`` seconds. Why: :func:`sweep_stale`
    holds a killed run's lock file for microseconds before removing it; a run claiming that
    output at that moment must not be refused for it. A live run holds its lock for the
    whole of its run, far longer."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        time.sleep(0.005)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            continue
    return False


def sweep_stale(ledger_file: Path) -> list[Path]:
    """Remove the lock files (``--reuse`` requests' and outputs') of ``ledger_file`` that no
    live process holds (left by killed runs); returns what was removed. Called when the
    ledger is opened for a spend.

    A lock file is removed only while this process holds its ``flock`` (taken without
    waiting: a lock held by a live run is never waited for nor touched) and only if the
    path still names the file locked (its holder may have removed it and a new run created
    another meanwhile). A run that opened the old file before the removal takes its lock
    afterwards, finds the path gone or naming another file, and tries again
    (:func:`serialised`): it never takes a removed file for its request's lock.
    """
    real = Path(os.path.realpath(ledger_file))
    prefix = real.name
    removed: list[Path] = []
    try:
        entries = list(os.scandir(real.parent))
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        if not (name.startswith(prefix) and _LOCK_NAME.fullmatch(name[len(prefix):])):
            continue
        try:  # never created here, never through a link
            fd = os.open(entry.path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # held by a live run (or a run about to check it): keep it
                continue
            try:
                now = os.lstat(entry.path)
            except OSError:
                continue
            mine = os.fstat(fd)
            if (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
                with suppress(OSError):
                    os.unlink(entry.path)
                    removed.append(Path(entry.path))
        finally:
            os.close(fd)  # releases the lock: a waiter on the old file now looks and retries
    return removed
