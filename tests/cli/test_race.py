"""Concurrent runs through the real CLI can never together overspend."""

from __future__ import annotations

import subprocess
import sys

from tests.cli.conftest import Project
from tests.cli.conftest import run_entries as read_entries  # runs only, no genesis


def test_eight_processes_racing(project: Project, cli) -> None:
    procs = [subprocess.Popen(
        [sys.executable, "-m", "dpcli", "tabulate", str(project.data), "--spec", str(project.spec),
         "--out", str(project.root / f"out{i}.csv"), "--epsilon", "0.3", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(8)]
    codes = [p.wait(timeout=120) for p in procs]
    stderr = [p.stderr.read() for p in procs]
    assert sorted(codes) == [0, 0, 0, 3, 3, 3, 3, 3], stderr
    refused = [s for c, s in zip(codes, stderr, strict=True) if c == 3]
    assert all("budget exhausted" in s for s in refused)
    written = [i for i in range(8) if (project.root / f"out{i}.csv").exists()]
    assert len(written) == 3
    reserves = [e for e in read_entries(project.ledger) if e["kind"] == "reserve"]
    assert len(reserves) == 3
    r = cli("ledger", "verify", "--spec", project.spec)
    assert r.exit_code == 0
