"""Exceptions that carry the exit code the CLI turns them into.

Exit codes follow the BSD sysexits(3) convention so that a Makefile or cron
job can tell a bad command line from bad data, a bad spec or a ledger that
cannot be trusted (the table, with what was charged in each case, is
docs/exit-codes.md): 0 ok, 3 budget exhausted (dpcli's own, kept from 0.x),
64 usage (EX_USAGE), 65 data (EX_DATAERR), 66 an input file does not exist
(EX_NOINPUT), 70 an internal error (EX_SOFTWARE), 73 an output could not be
created after the charge (EX_CANTCREAT), 74 the system refused an I/O
operation (EX_IOERR), 76 the ledger is unusable or fails verification
(EX_PROTOCOL: the budget's record broke its own hash-chain protocol), 75 another
run is writing the same output now (EX_TEMPFAIL: try again), 78 spec
(EX_CONFIG), 128 + N ended by signal N (130 SIGINT, 143 SIGTERM, 129 SIGHUP).
Messages name the file, column or key, never a private value.
"""

from __future__ import annotations

import errno
import os
import re

#: errno values that say the environment, not dpcli or its input, refused an operation
ENVIRONMENT_ERRNOS = frozenset(
    e for e in (errno.ENOSPC, errno.EACCES, errno.EPERM, errno.EROFS,
                getattr(errno, "EDQUOT", None), errno.EIO, errno.EFBIG) if e is not None)
_ARROW_ERRNO = re.compile(r"\[errno (\d+)\]", re.IGNORECASE)  # pyarrow's "... [errno 28] ..."

# A private figure inside a message (a data row's number) is wrapped in these two
# control characters: shown with --report, withheld otherwise (see docs on stderr).
_OPEN, _CLOSE = "\x02", "\x03"
_MARKED = re.compile(f"{_OPEN}(.*?){_CLOSE}", re.S)
WITHHELD = " (where: withheld; rerun with --report to see the data row)"


def private(text: str) -> str:
    """Mark ``text`` (e.g. "in data row 50") as an exact private figure of a message.

    It is part of the message for the custodian who asks (``--report``) and for
    Python callers (``str(error)``); without ``--report`` the CLI leaves it out.
    """
    return f"{_OPEN}{text}{_CLOSE}"


class DpcliError(Exception):
    """Base class for errors a user can act on."""

    exit_code = 1
    #: the message itself says what became of the run's charge (the CLI adds nothing)
    charge_said = False

    def __init__(self, message: str = "", *args: object) -> None:
        self.marked = message
        super().__init__(_MARKED.sub(r"\1", message), *args)

    def redacted(self) -> str:
        """The message without its private figures (what stderr says without --report)."""
        if not _MARKED.search(self.marked):
            return self.marked
        text = re.sub(r" {2,}", " ", _MARKED.sub("", self.marked)).replace(" ;", ";")
        return text.rstrip() + WITHHELD


#: BSD sysexits(3) values dpcli uses (see the module docstring and docs/exit-codes.md)
(EX_USAGE, EX_DATAERR, EX_NOINPUT, EX_SOFTWARE, EX_CANTCREAT, EX_IOERR, EX_TEMPFAIL,
 EX_PROTOCOL, EX_CONFIG) = (64, 65, 66, 70, 73, 74, 75, 76, 78)
#: the exit code of an unexpected exception (a bug in dpcli)
INTERNAL_EXIT = EX_SOFTWARE


class SpecError(DpcliError):
    """The YAML spec (or a file it names) is malformed: exit code 78 (EX_CONFIG)."""

    exit_code = EX_CONFIG


class DataError(DpcliError):
    """The data file does not match the declared schema: exit code 65 (EX_DATAERR).

    ``column`` names the declared column at fault, where there is one (``inspect`` marks
    it in its table)."""

    exit_code = EX_DATAERR

    def __init__(self, message: str = "", *args: object, column: str | None = None) -> None:
        super().__init__(message, *args)
        self.column = column


class NoInput(DataError):
    """The data file (or a released file read as input) does not exist: exit code 66
    (EX_NOINPUT). A DataError, so callers that catch bad data catch this too."""

    exit_code = EX_NOINPUT


class SpecNotFound(SpecError):
    """The spec file named on the command line does not exist: exit code 66 (EX_NOINPUT)."""

    exit_code = EX_NOINPUT


class UsageError(DpcliError):
    """Command-line arguments are inconsistent: exit code 64 (EX_USAGE), like the
    option parser's own errors (unknown option, missing argument)."""

    exit_code = EX_USAGE


class CannotCreate(DpcliError):
    """An output could not be created once the run was charged, though the system allowed it:
    its path changed after the pre-charge checks (another process wrote or replaced it), so
    the release is not written over it. Exit code 73 (EX_CANTCREAT, "a user-specified output
    file cannot be created").

    Not 64: a usage error is found before the charge and charges nothing, while this one
    comes after the reservation, whose charge stays (the ledger records the run failed).
    """

    exit_code = EX_CANTCREAT


class OutputBusy(DpcliError):
    """Another dpcli run is writing one of this run's outputs now (it holds the output's lock
    beside the ledger, docs/ledger.md): refused before the charge. Exit code 75
    (EX_TEMPFAIL, "try again later"): overlapping cron jobs or ``make -j`` with one output
    twice; the first run's release is kept, and nothing of this one is charged."""

    exit_code = EX_TEMPFAIL


class LedgerError(DpcliError):
    """The ledger cannot be used or fails verification (unreadable, tampered, cut,
    forged, rolled back, no genesis for the dataset): exit code 76.

    Not 65 (bad data): a broken ledger is the budget's record failing its own
    hash-chain protocol, a matter for the custodian, and a cron job must be able
    to alert on it apart from a malformed input file. EX_PROTOCOL is the sysexits
    value nothing else in dpcli uses.
    """

    exit_code = EX_PROTOCOL


class BudgetExhausted(DpcliError):
    """The planned spend exceeds what remains of the dataset's budget: exit code 3."""

    exit_code = 3


class Reused(DpcliError):
    """``--reuse`` found this exact release already made and its outputs unchanged: nothing
    was spent, exit code 0. ``run_id`` and ``outputs`` name the earlier run; ``command``
    and ``dataset`` are this run's (the earlier one's too), for its ``--json`` line."""

    exit_code = 0

    def __init__(self, message: str, run_id: str, outputs: list[str], *, command: str = "",
                 dataset: str = "") -> None:
        super().__init__(message)
        self.run_id = run_id
        self.outputs = outputs
        self.command = command
        self.dataset = dataset


class IOFailure(DpcliError):
    """The system refused an I/O operation (no space, permission, read-only, I/O error):
    exit code 74 (EX_IOERR). The message names the path and the cause."""

    exit_code = EX_IOERR


def environment_errno(exc: BaseException) -> int | None:
    """The errno of an environment failure behind ``exc`` (itself, its cause or context).

    pyarrow's writers raise an OSError without ``errno`` whose text carries
    "[errno N]"; that is read too.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError):
            code = current.errno
            if code is None:
                m = _ARROW_ERRNO.search(str(current))
                code = int(m.group(1)) if m else None
            if code in ENVIRONMENT_ERRNOS:
                return code
        current = current.__cause__ or current.__context__
    return None


def describe_environment(exc: BaseException, path: object = None) -> str:
    """One line: the path (``path``, else the OSError's file name) and the cause."""
    code = environment_errno(exc)
    cause = os.strerror(code) if code is not None else type(exc).__name__
    if path is None:
        current: BaseException | None = exc
        while current is not None and path is None:
            path = getattr(current, "filename", None)
            current = current.__cause__ or current.__context__
    return f"{path}: {cause}" if path is not None else cause
