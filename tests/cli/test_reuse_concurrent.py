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


def test_a_spend_sweeps_the_reuse_locks_no_process_holds(project: Project, cli) -> None:
    """A killed --reuse run leaves its lock file; any spend on the ledger removes the ones no
    live process holds (taken without waiting) and keeps a held one."""
    import fcntl
    import os

    stale = lock_path(project.ledger, "a" * 32)
    stale.touch()                                  # a killed run's: nobody holds it
    held = lock_path(project.ledger, "b" * 32)
    fd = os.open(held, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)                 # a live run's (another open file)
    other = project.ledger.with_name("other.jsonl.reuse-" + "c" * 32 + ".lock")
    other.touch()                                  # another ledger's: not this spend's
    try:
        r = cli("tabulate", project.data, "--spec", project.spec, "--out",
                project.root / "t.csv", "--epsilon", 0.3)   # a spend without --reuse too
        assert r.exit_code == 0, r.stderr
        assert not stale.exists()
        assert held.exists() and os.path.samestat(os.stat(held), os.fstat(fd))
        assert other.exists()
    finally:
        os.close(fd)
    assert project.run_kinds() == ["reserve", "complete"]


def test_a_run_that_opened_a_swept_lock_does_not_take_it_for_its_own(tmp_path: Path,
                                                                     monkeypatch) -> None:
    """The race the sweep must not lose: a run opens the stale file, the sweep (another
    process's spend) takes its lock and removes it, then the run takes the old file's lock.
    It finds the path gone and takes a new file (serialised's check), so it never holds a
    removed file that an identical request, creating the path anew, could hold too."""
    import fcntl
    import os

    import dpcli.reuse as reuse

    ledger = tmp_path / "l.jsonl"
    ledger.write_text("")
    path = lock_path(ledger, "a" * 32)
    path.touch()                                    # a killed run's
    swept: list[list[Path]] = []

    class SweepBeforeLocking:                       # fcntl as serialised sees it
        LOCK_EX, LOCK_NB = fcntl.LOCK_EX, fcntl.LOCK_NB

        def flock(self, fd: int, op: int) -> None:
            if not swept:                           # opened the old file, not yet locked
                monkeypatch.setattr(reuse, "fcntl", fcntl)
                swept.append(reuse.sweep_stale(ledger))
                monkeypatch.setattr(reuse, "fcntl", self)
                assert not os.path.exists(path)
            fcntl.flock(fd, op)

    monkeypatch.setattr(reuse, "fcntl", SweepBeforeLocking())
    opened: list[int] = []
    real_open = os.open

    def counted(file: object, flags: int, *rest: int) -> int:
        if flags & os.O_CREAT:                      # serialised's opens (the sweep never creates)
            opened.append(1)
        return real_open(file, flags, *rest)

    monkeypatch.setattr(reuse.os, "open", counted)
    with serialised(ledger, "a" * 32):
        monkeypatch.undo()
        assert swept == [[path]]
        assert len(opened) == 2                     # the old file, then a new one
        assert path.exists() and reuse.sweep_stale(ledger) == []   # held: never swept
    assert not path.exists()


def test_a_run_whose_output_another_run_is_writing_is_refused_before_the_charge(
        project: Project, cli) -> None:
    """This test holds t.csv's output lock as a live run does from its claim to its record;
    a run to the same file is refused at once (exit 75, EX_TEMPFAIL), charges nothing and
    writes nothing; once the lock is free it runs. Before, overlapping runs both charged and
    the later one lost its release (exit 73)."""
    from dpcli.reuse import claimed, output_lock_path

    out = project.root / "t.csv"
    args = [sys.executable, "-m", "dpcli", "tabulate", str(project.data), "--spec",
            str(project.spec), "--out", str(out), "--epsilon", "0.3", "--json"]
    with claimed(project.ledger, [project.root / "." / "t.csv"]):
        assert output_lock_path(project.ledger, out).exists()
        busy = subprocess.run(args, capture_output=True, text=True, timeout=180)
        again = subprocess.run([*args, "--reuse"], capture_output=True, text=True, timeout=180)
    for r in (busy, again):
        assert r.returncode == 75, r.stderr
        got = json.loads(r.stdout.strip().splitlines()[-1])
        assert got["error"] == "busy" and got["charged"] is False
        assert "another dpcli run is writing this output now" in r.stderr
    assert project.no_runs() and not out.exists()
    assert not output_lock_path(project.ledger, out).exists()   # its holder removed it
    done = subprocess.run(args, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert project.run_kinds() == ["reserve", "complete"]


def test_runs_started_together_on_one_output_charge_only_what_they_release(
        project: Project) -> None:
    """Four runs without --reuse writing one file, started together: each either completes
    (exit 0, charged) or is refused before its charge (exit 75); none exits 73 with a charge
    kept and its release lost. (How many complete depends on timing; the rule does not.)"""
    args = [sys.executable, "-m", "dpcli", "tabulate", str(project.data), "--spec",
            str(project.spec), "--out", str(project.root / "t.csv"), "--epsilon", "0.1",
            "--json"]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    codes = [p.wait(timeout=180) for p in procs]
    assert set(codes) <= {0, 75} and 0 in codes, [p.stderr.read() for p in procs]
    kinds = project.run_kinds()
    assert kinds.count("reserve") == kinds.count("complete") == codes.count(0)
    assert "failed" not in kinds


def test_a_run_on_another_ledger_writing_the_same_output_is_refused_before_the_charge(
        project: Project) -> None:
    """The claim beside the output (``.<name>.dpcli-claim``) is seen whatever the ledger: this
    test holds it as a run on another ledger would; the run exits 75 with nothing charged
    or written (before, both charged and the later one exited 73, its release lost). Once
    free it runs, and no claim file is left beside the output."""
    from dpcli.reuse import beside_lock_path, claimed

    out = project.root / "t.csv"
    other_ledger = project.root / "elsewhere" / "other.jsonl"
    other_ledger.parent.mkdir()
    args = [sys.executable, "-m", "dpcli", "tabulate", str(project.data), "--spec",
            str(project.spec), "--out", str(out), "--epsilon", "0.3", "--json"]
    with claimed(other_ledger, [out]):
        assert beside_lock_path(out).exists()
        busy = subprocess.run(args, capture_output=True, text=True, timeout=180)
    assert busy.returncode == 75, busy.stderr
    got = json.loads(busy.stdout.strip().splitlines()[-1])
    assert got["error"] == "busy" and got["charged"] is False
    assert "perhaps a run on another ledger" in busy.stderr
    assert project.no_runs() and not out.exists()
    done = subprocess.run(args, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert project.run_kinds() == ["reserve", "complete"]
    assert not beside_lock_path(out).exists()


def test_a_killed_runs_claim_beside_the_output_is_taken_over(project: Project) -> None:
    """A claim file no process holds (its run was killed) does not refuse the next run."""
    from dpcli.reuse import beside_lock_path

    out = project.root / "t.csv"
    beside_lock_path(out).touch()
    args = [sys.executable, "-m", "dpcli", "tabulate", str(project.data), "--spec",
            str(project.spec), "--out", str(out), "--epsilon", "0.3", "--json"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert out.exists() and not beside_lock_path(out).exists()


def test_a_run_into_a_new_folder_is_claimed_too(project: Project) -> None:
    """The first run into a folder that does not exist yet used to take no claim beside its
    output (the folder is made after the charge), so a run on another ledger racing it
    charged too and one exited 73. The folder is now made for the claim; a refused run
    leaves no empty folder behind."""
    from dpcli.reuse import beside_lock_path, claimed

    out = project.root / "new" / "day" / "t.csv"
    other_ledger = project.root / "elsewhere.jsonl"
    args = [sys.executable, "-m", "dpcli", "tabulate", str(project.data), "--spec",
            str(project.spec), "--out", str(out), "--epsilon", "0.3", "--json"]
    with claimed(other_ledger, [out]):
        assert beside_lock_path(out).exists()
        busy = subprocess.run(args, capture_output=True, text=True, timeout=180)
    assert busy.returncode == 75, busy.stderr
    assert project.no_runs() and not (project.root / "new").exists()
    done = subprocess.run(args, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert out.exists() and not beside_lock_path(out).exists()


def test_a_link_planted_as_the_claim_is_not_followed(project: Project) -> None:
    """The output's folder may be shared: a symbolic link planted where the claim goes must
    not make dpcli create a file where it points."""
    from dpcli.reuse import beside_lock_path

    out = project.root / "t.csv"
    target = project.root / "created_through_the_link"
    beside_lock_path(out).symlink_to(target)
    args = [sys.executable, "-m", "dpcli", "tabulate", str(project.data), "--spec",
            str(project.spec), "--out", str(out), "--epsilon", "0.3", "--json"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert not target.exists()


def test_a_claim_made_by_another_account_is_still_seen(tmp_path: Path) -> None:
    """A claim file this process may not write (another account's, mode 0644) is opened
    read-only and still locked: flock needs no write access."""
    import os

    from dpcli.errors import OutputBusy
    from dpcli.reuse import _held, beside_lock_path

    out = tmp_path / "x.csv"
    lock = beside_lock_path(out)
    lock.touch(mode=0o444)
    os.chmod(lock, 0o444)
    opened: list[int] = []
    real_open = os.open

    def no_write(path, flags, *args):   # as for a file of another account (root ignores modes)
        if str(path) == str(lock) and flags & os.O_EXCL:
            raise FileExistsError(17, "File exists", str(path))
        if str(path) == str(lock) and flags & (os.O_RDWR | os.O_WRONLY):
            raise PermissionError(13, "Permission denied", str(path))
        opened.append(flags)
        return real_open(path, flags, *args)

    os.open = no_write
    try:
        with _held(lock, busy=lambda: OutputBusy("busy"), beside=True):
            assert opened and opened[-1] & os.O_ACCMODE == os.O_RDONLY
    finally:
        os.open = real_open
