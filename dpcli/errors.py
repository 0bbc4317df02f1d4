"""Exceptions that carry the exit code the CLI turns them into.

Exit codes: 0 ok, 2 bad input or spec, 3 budget exhausted, 1 anything
unexpected. Messages name the file, column or key, never a private value.
"""

from __future__ import annotations

import re

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

    def __init__(self, message: str = "", *args: object) -> None:
        self.marked = message
        super().__init__(_MARKED.sub(r"\1", message), *args)

    def redacted(self) -> str:
        """The message without its private figures (what stderr says without --report)."""
        if not _MARKED.search(self.marked):
            return self.marked
        text = re.sub(r" {2,}", " ", _MARKED.sub("", self.marked)).replace(" ;", ";")
        return text.rstrip() + WITHHELD


class SpecError(DpcliError):
    """The YAML spec (or a file it names) is malformed: exit code 2."""

    exit_code = 2


class DataError(DpcliError):
    """The data file does not match the declared schema: exit code 2."""

    exit_code = 2


class UsageError(DpcliError):
    """Command-line arguments are inconsistent: exit code 2."""

    exit_code = 2


class LedgerError(DpcliError):
    """The ledger is unreadable or fails verification: exit code 2."""

    exit_code = 2


class BudgetExhausted(DpcliError):
    """The planned spend exceeds what remains of the dataset's budget: exit code 3."""

    exit_code = 3
