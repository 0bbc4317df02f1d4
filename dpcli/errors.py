"""Exceptions that carry the exit code the CLI turns them into.

Exit codes: 0 ok, 2 bad input or spec, 3 budget exhausted, 1 anything
unexpected. Messages name the file, column or key, never a private value.
"""

from __future__ import annotations


class DpcliError(Exception):
    """Base class for errors a user can act on."""

    exit_code = 1


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
