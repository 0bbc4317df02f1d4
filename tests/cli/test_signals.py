"""Signals and a closed stdout, on a real ``dpcli`` process (issue 19, failure 9).

SIGTERM, SIGHUP and SIGINT end a run with a message, a ``failed`` entry (the charge stays),
no temporary file and exit 128 + N; a summary that cannot be printed after a release does
not turn the recorded release into a failure. Each test waits for a state it can see (the
reserve line in the ledger, a temp file) by polling with a deadline, never a blind sleep.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.cli.conftest import Project
from tests.cli.conftest import run_entries as read_entries  # runs only, no genesis

DEADLINE = 180.0  # seconds: a loaded 2-core machine starts Python slowly


def _dpcli(*args: object, **kwargs: object) -> subprocess.Popen:
    def child() -> None:  # an interactive user's signals, whatever the test runner ignores
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)

    return subprocess.Popen([sys.executable, "-m", "dpcli", *map(str, args)],
                            stdout=kwargs.pop("stdout", subprocess.DEVNULL),
                            stderr=subprocess.PIPE, text=True, preexec_fn=child, **kwargs)


def _wait_for(what: str, ready: Callable[[], bool], proc: subprocess.Popen) -> None:
    end = time.monotonic() + DEADLINE
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"dpcli ended (exit {proc.returncode}) before {what}: "
                        f"{proc.stderr.read() if proc.stderr else ''}")
        if time.monotonic() > end:
            proc.kill()
            pytest.fail(f"no {what} within {DEADLINE:.0f} s")
        time.sleep(0.02)  # a poll interval, not a wait for the event itself


def _runs(ledger: Path) -> list[dict]:
    """The ledger's run entries (whatever else a ledger may hold, e.g. a genesis entry)."""
    return [e for e in read_entries(ledger) if e["kind"] in ("reserve", "complete", "failed")]


def _reserved(ledger: Path) -> Callable[[], bool]:
    def ready() -> bool:
        try:
            return any(e["kind"] == "reserve" for e in read_entries(ledger))
        except Exception:  # a line being written
            return False
    return ready


@pytest.mark.parametrize(("sig", "code", "message"), [
    (signal.SIGTERM, 143, "terminated by SIGTERM"),
    (signal.SIGHUP, 129, "terminated by SIGHUP"),
    (signal.SIGINT, 130, "interrupted"),
])
def test_a_signal_mid_run_records_failed_and_exits_128_plus_n(project: Project, sig: int,
                                                              code: int, message: str) -> None:
    out = project.root / "out"
    # 2,000 boosting rounds, a pass over the file each: a run that lasts long after its charge
    proc = _dpcli("train-brc", project.data, "--spec", project.spec, "--out", out / "m.json",
                  "--columns", "age,color,member", "--rounds", 2000, "--epsilon", 0.2, "-q")
    _wait_for("reserve entry", _reserved(project.ledger), proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == code, err
    assert message in err and "Traceback" not in err
    entries = _runs(project.ledger)
    assert [e["kind"] for e in entries] == ["reserve", "failed"]
    assert entries[1]["reason"] == "Terminated" and entries[0]["epsilon"] == 0.2
    assert not out.exists() or not any(out.iterdir())  # no temp file, no partial output


def test_sigterm_while_writing_removes_the_temp_file(project: Project, cli,
                                                     tmp_path: Path) -> None:
    model = project.root / "nb.json"
    r = cli("train-nb", project.data, "--spec", project.spec, "--out", model,
            "--columns", "age,color,member", "--epsilon", 0.3, "-q")
    assert r.exit_code == 0, r.stderr
    rng = np.random.default_rng(0)
    n = 2_000_000
    big = tmp_path / "big.parquet"
    pd.DataFrame({"age": rng.integers(17, 91, n),
                  "color": pd.Categorical.from_codes(rng.integers(0, 3, n),
                                                     ["red", "green", "blue"]),
                  "member": pd.Categorical.from_codes(rng.integers(0, 2, n), ["no", "yes"]),
                  }).to_parquet(big, index=False, row_group_size=50_000)
    out = tmp_path / "out"
    out.mkdir()
    proc = _dpcli("predict", model, big, "--out", out / "p.csv", "-q")
    _wait_for("temp file", lambda: any(out.glob(".p.csv.dpcli-tmp-*")), proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 143, err
    assert "terminated by SIGTERM" in err
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("how", ["closed", "broken pipe"])
def test_a_closed_stdout_after_a_release_is_not_a_failure(project: Project, how: str) -> None:
    args = ("tabulate", project.data, "--spec", project.spec, "--out",
            project.root / "c.csv", "--epsilon", 0.1, "--json", "-q")
    if how == "closed":  # `dpcli ... >&-`: Popen cannot start a child with fd 1 closed
        proc = subprocess.Popen(
            ["/bin/sh", "-c", 'exec "$@" >&-', "sh", sys.executable, "-m", "dpcli",
             *map(str, args)], stderr=subprocess.PIPE, text=True)
        _, err = proc.communicate(timeout=DEADLINE)
    else:
        proc = _dpcli(*args, stdout=subprocess.PIPE)
        assert proc.stdout is not None
        proc.stdout.close()  # the reader is gone before the summary is written
        _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 0, err
    assert "could not be printed" in err and "unexpected" not in err, err
    assert [e["kind"] for e in _runs(project.ledger)] == ["reserve", "complete"]
    assert (project.root / "c.csv").exists()


def test_the_summary_still_reaches_an_open_stdout(project: Project) -> None:
    proc = _dpcli("tabulate", project.data, "--spec", project.spec, "--out",
                  project.root / "c.csv", "--epsilon", 0.1, "--json", "-q",
                  stdout=subprocess.PIPE)
    out, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 0, err
    assert json.loads(out)["command"] == "tabulate"
    assert os.path.exists(project.root / "c.json")


def test_a_run_in_progress_is_running_and_a_killed_one_interrupted(project: Project,
                                                                   cli) -> None:
    """Through the real entry point: while a long train-brc runs (its reserve written),
    `ledger show` says running; after SIGKILL (no record, no clean-up) it says interrupted,
    and the next spend sweeps the dead run's lock file."""
    import json

    out = project.root / "out"
    proc = _dpcli("train-brc", project.data, "--spec", project.spec, "--out", out / "m.json",
                  "--columns", "age,color,member", "--rounds", 2000, "--epsilon", 0.2, "-q")
    try:
        _wait_for("reserve entry", _reserved(project.ledger), proc)
        _wait_for("run lock", lambda: any(project.root.glob("ledger.jsonl.run-*.lock")),
                  proc)
        r = cli("ledger", "show", "--spec", project.spec, "--json")
        assert [x["status"] for x in json.loads(r.stdout)["runs"]] == ["running"], r.stdout
    finally:
        proc.kill()
        proc.wait(timeout=DEADLINE)
    r = cli("ledger", "show", "--spec", project.spec, "--json")
    assert [x["status"] for x in json.loads(r.stdout)["runs"]] == ["interrupted"]
    assert list(project.root.glob("ledger.jsonl.run-*.lock"))          # left by the kill
    assert cli("tabulate", project.data, "--spec", project.spec, "--out",
               project.root / "t.csv", "--epsilon", 0.1, "-q").exit_code == 0
    assert not list(project.root.glob("ledger.jsonl.run-*.lock"))      # swept


def test_a_signal_after_the_record_says_the_run_completed(project: Project, cli,
                                                          monkeypatch) -> None:
    """A signal that arrives while the complete entry is written is delivered after it: the
    run exits 128 + N, but says its outputs are written and recorded, not 'recorded as
    failed' (which would invite a second spend)."""
    from dpcli import signals
    from dpcli.ledger import Ledger

    complete = Ledger.complete

    def complete_then_signal(self, *args, **kwargs):
        complete(self, *args, **kwargs)
        signals._state["pending"] = signal.SIGTERM   # as the handler does while held

    monkeypatch.setattr(Ledger, "complete", complete_then_signal)
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", project.root / "t.csv",
            "--epsilon", 0.1, "--json")
    signals._state.update({"pending": None, "ending": False})
    assert r.exit_code == 143, r.stderr
    assert "after this run had completed" in r.stderr and "recorded as failed" not in r.stderr
    assert project.run_kinds() == ["reserve", "complete"]
    assert (project.root / "t.csv").exists()
