"""``--reuse`` under concurrency: identical requests started together charge once (dpcli.reuse).

Before, each duplicate looked for a completed release before any of them had completed, and
each charged and released its own noisy table (a tester's `make -j` / overlapping cron: 14
charges where 8 were meant). Through the real entry point, in separate processes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from dpcli.reuse import lock_path, serialised
from tests.cli.conftest import Project


def _tab_args(project: Project, *extra: str) -> list[str]:
    return [sys.executable, "-m", "dpcli", "tabulate", str(project.data), "--spec",
            str(project.spec), "--out", str(project.root / "t.csv"), "--epsilon", "0.3",
            "--reuse", "--json", *extra]


def test_identical_reuse_runs_started_together_charge_once(project: Project, cli) -> None:
    procs = [subprocess.Popen(_tab_args(project), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = [(p.wait(timeout=180), p.stdout.read(), p.stderr.read()) for p in procs]
    assert [code for code, _, _ in results] == [0] * 4, results
    reserves = project.reserves()
    assert len(reserves) == 1, results  # one charge, never one per duplicate
    first = reserves[0]["run_id"]
    outs = [json.loads(out.strip().splitlines()[-1]) for _, out, _ in results]
    assert sorted("reused" in o for o in outs) == [False, True, True, True]
    assert all(o.get("reused", o.get("run_id")) == first for o in outs)
    # the released files are the first run's, as recorded; no lock file is left behind
    r = cli("ledger", "verify", "--spec", project.spec)
    assert r.exit_code == 0
    assert not list(project.root.glob("ledger.jsonl.reuse-*.lock"))


def test_a_duplicate_waits_for_the_run_in_progress_then_reuses_it(project: Project) -> None:
    """The lock of a request is held by a first run (here: this test, holding it as a run
    would, until its release is recorded); the duplicate says it waits, then reuses."""
    first = subprocess.run(_tab_args(project), capture_output=True, text=True, timeout=180)
    assert first.returncode == 0, first.stderr
    (project.root / "t.csv").unlink()  # no reusable release: the next run will charge
    from dpcli.reuse import request_digest  # the lock the next run asks for, named as dpcli does

    reserve = project.reserves()[0]
    request = request_digest(dataset=reserve["dataset"], command="tabulate",
                             arguments=reserve["arguments"], spec_digest=reserve["spec_digest"],
                             input_digest=reserve["input_digest"])
    with serialised(project.ledger, request):
        proc = subprocess.Popen(_tab_args(project), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        told = None
        for line in iter(proc.stderr.readline, ""):  # blocks until the run says it waits
            if "waiting for an identical --reuse run" in line:
                told = line
                break
        assert told is not None, "the duplicate ended without waiting"
        assert proc.poll() is None  # still waiting: nothing charged meanwhile
        assert len(project.reserves()) == 1
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    assert len(project.reserves()) == 2  # the holder released nothing: the duplicate runs
    assert not lock_path(project.ledger, request).exists()


def test_the_lock_serialises_one_request_and_not_another(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    ledger.write_text("")
    waited = threading.Event()
    order: list[str] = []

    def second() -> None:
        with serialised(ledger, "a" * 32, lambda _: waited.set()):
            order.append("second")

    with serialised(ledger, "a" * 32):
        with serialised(ledger, "b" * 32):  # another request never waits
            order.append("other")
        t = threading.Thread(target=second)
        t.start()
        assert waited.wait(timeout=60)
        order.append("first")
    t.join(timeout=60)
    assert order == ["other", "first", "second"]
    assert not lock_path(ledger, "a" * 32).exists()
