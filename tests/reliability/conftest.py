"""The reliability suite (issue 19): the ledger under races, kills, tampering and full disks.

Fixtures: ``project`` (a toy project with an initialised ledger, as in tests/cli) and ``cli``
(the real CLI in this process); ``dpcli(*args)`` builds the command line of a CLI subprocess.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.cli.conftest import Project, cli_runner, make_project

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return make_project(tmp_path)


@pytest.fixture
def cli():
    return cli_runner()


def dpcli(*args: object) -> list[str]:
    """The command line of a dpcli subprocess (this interpreter, the real entry point)."""
    return [sys.executable, "-m", "dpcli", *map(str, args)]
