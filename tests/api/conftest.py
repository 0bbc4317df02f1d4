"""The CLI tests' small project (data, vocabulary, spec, ledger) for the library's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import Project, cli_runner, make_project


@pytest.fixture
def project(tmp_path: Path) -> Project:
    p = make_project(tmp_path)
    p.write_spec(lambda s: s["budget"].update(epsilon=20.0))
    return p


@pytest.fixture
def cli():
    return cli_runner()
