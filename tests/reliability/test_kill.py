"""Issue 19, failure 6 (crashes): real CLI spends killed with SIGKILL at random moments.

After every batch of kills: the ledger verifies, or its only damage is a torn last line that
`dpcli ledger repair` drops; every entry recorded before stays (the verified bytes are a prefix
of the next ones); every output at its final path is whole, and every `complete` entry's
digest is its output's.
"""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import time
from pathlib import Path

import pandas as pd

from dpcli.ledger import read_entries, verify_file
from tests.cli.conftest import Project
from tests.reliability.conftest import dpcli

KILLS = 32
SEED = 20261126
POLL = 0.002  # seconds between two looks at the ledger while waiting for a run's reserve


def spend(project: Project, out: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(dpcli("tabulate", project.data, "--spec", project.spec, "--out", out,
                                  "--epsilon", "0.01", "--quiet"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_for_reserve(project: Project, proc: subprocess.Popen[bytes], out: Path) -> bool:
    """Poll until the run's reserve line (it names ``out``) is in the ledger; False if the
    process ended first."""
    needle = str(out.resolve()).encode()
    while proc.poll() is None:
        if needle in project.ledger.read_bytes():
            return True
        time.sleep(POLL)  # a poll with a condition, bounded by the process's own life
    return False


def check(project: Project, cli, verified: bytes, rows: int) -> tuple[bytes, int]:
    """Verify (repairing only a torn last line); return the verified bytes and repairs made."""
    repairs = 0
    report = verify_file(project.ledger)
    if not report.ok:
        last = f"line {report.entries}: "
        assert all(p.startswith(last) for p in report.problems), report.problems
        r = cli("ledger", "repair", "--spec", project.spec, "--yes")
        assert r.exit_code == 0, r.stderr
        repairs = 1
        report = verify_file(project.ledger)
        assert report.ok, report.problems
    data = project.ledger.read_bytes()
    assert data.startswith(verified)  # nothing recorded earlier was lost
    for entry in read_entries(project.ledger):
        for output in entry.get("outputs", []):
            digest = hashlib.sha256(Path(output["path"]).read_bytes()).hexdigest()
            assert digest == output["sha256"]
    for out in project.root.glob("out*.csv"):
        assert len(pd.read_csv(out)) == rows, out  # never a half-written file at a final path
    return data, repairs


def test_sigkill_at_random_moments_loses_no_charge(project: Project, cli) -> None:
    """Half the kills come at a random moment after launch (anywhere: imports, checks, the
    reserve's write), half at a random moment after the run's reserve is on disk (computing,
    committing outputs, writing `complete`). The moments come from a seeded RNG."""
    project.write_spec(lambda s: s["budget"].update(epsilon=100.0))
    out = project.root / "out_first.csv"
    start = time.monotonic()
    first = spend(project, out)
    assert wait_for_reserve(project, first, out)
    reserved = time.monotonic()
    assert first.wait(timeout=120) == 0
    whole, after_reserve = time.monotonic() - start, time.monotonic() - reserved
    rows = len(pd.read_csv(out))
    verified, _ = check(project, cli, b"", rows)

    rng = random.Random(SEED)
    kills = finished = repairs = 0
    for i in range(3 * KILLS):  # until KILLS kills: a run that ends before its moment is fine
        if kills == KILLS:
            break
        out = project.root / f"out{i}.csv"
        proc = spend(project, out)
        if i % 2:
            started, delay = time.monotonic(), rng.uniform(0.2, 1.2) * whole
        else:
            wait_for_reserve(project, proc, out)
            started, delay = time.monotonic(), rng.uniform(0.0, 1.0) * after_reserve
        try:  # a wait with a deadline, not a blind sleep
            proc.wait(timeout=max(0.0, started + delay - time.monotonic()))
            finished += 1
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=60)
            kills += 1
        verified, repaired = check(project, cli, verified, rows)
        repairs += repaired
    assert kills == KILLS

    reserves = [e for e in read_entries(project.ledger) if e["kind"] == "reserve"]
    r = cli("ledger", "show", "--spec", project.spec, "--json")
    assert r.exit_code == 0, r.stderr
    assert len(reserves) >= 1 + finished  # and every run killed after its reserve
    spent = json.loads(r.stdout)["spent"]["epsilon"]
    assert abs(spent - 0.01 * len(reserves)) < 1e-9  # every reserve stays charged
    assert cli("tabulate", project.data, "--spec", project.spec, "--out",
               project.root / "out_last.csv", "--epsilon", "0.01").exit_code == 0
    print(f"{kills} kills, {finished} runs finished, {len(reserves)} reserves, "
          f"{repairs} repairs")
