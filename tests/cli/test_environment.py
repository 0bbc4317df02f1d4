"""Accidents of the environment (issue 19, failure 9): a full disk, file modes, temp files
left by killed runs, files with no rows."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dpcli.ledger import read_entries
from tests.cli.conftest import Project, base_spec
from tests.reliability.test_disk import fill


def _tabulate(cli, project: Project, out: Path, *extra: object):
    return cli("tabulate", project.data, "--spec", project.spec, "--out", out,
               "--epsilon", 0.1, "-q", *extra)


def _temps(folder: Path) -> list[Path]:
    return sorted(folder.glob(".*dpcli-tmp-*"))


def _spec_with_ledger(project: Project, ledger: Path) -> Path:
    """The project's spec with another ledger, in a file of its own (its ledger not created)."""
    spec = base_spec()
    spec["ledger"] = str(ledger)
    path = project.root / "other.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _runs(ledger: Path) -> list[dict]:
    """The ledger's run entries (whatever else a ledger may hold, e.g. a genesis entry)."""
    return [e for e in read_entries(ledger) if e["kind"] in ("reserve", "complete", "failed")]


def _assert_failed_and_kept(project: Project) -> None:
    entries = _runs(project.ledger)
    assert [e["kind"] for e in entries] == ["reserve", "failed"]
    assert entries[1]["reason"] == "IOFailure" and entries[0]["epsilon"] == 0.1


def test_enospc_on_an_output_exits_74_with_one_line(project: Project, cli,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    real = Path.write_bytes

    def full(self: Path, data: bytes) -> int:
        if ".dpcli-tmp-" in self.name:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", full)
    out = project.root / "out" / "counts.csv"
    r = _tabulate(cli, project, out)
    assert r.exit_code == 74, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(out) in lines[0] and "No space left" in lines[0], lines
    assert "unexpected" not in r.stderr
    assert not out.exists() and not _temps(out.parent)
    _assert_failed_and_kept(project)


def _fill(folder: Path) -> None:
    """Write ``folder/filler`` until the file system is full."""
    fill(folder)


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 64 KiB tmpfs, filled up (needs root and mount; the test is skipped otherwise)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode})")
    try:
        _fill(mnt)
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_a_real_full_disk_is_refused_before_the_charge(project: Project, cli,
                                                       small_disk: Path) -> None:
    """Less than MIN_ROOM at the output's folder: refused (74), nothing charged (tester 13:
    each retry on a full disk paid again)."""
    out = small_disk / "counts.csv"
    r = _tabulate(cli, project, out)
    assert r.exit_code == 74, r.stderr
    assert str(out) in r.stderr and "nothing was charged" in r.stderr, r.stderr
    assert not out.exists() and not _temps(small_disk)
    assert project.no_runs()


def test_a_real_full_disk_met_after_the_charge_exits_74_and_keeps_it(
        project: Project, cli, small_disk: Path, monkeypatch) -> None:
    """What the room check cannot foresee (an output larger than the room left, a disk
    filled by another process meanwhile) is still met cleanly after the charge."""
    from dpcli import io

    monkeypatch.setattr(io, "MIN_ROOM", 0)
    out = small_disk / "counts.csv"
    r = _tabulate(cli, project, out)
    assert r.exit_code == 74, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(out) in lines[0] and "No space left" in lines[0], lines
    assert not out.exists() and not _temps(small_disk)
    _assert_failed_and_kept(project)


def test_a_full_disk_under_the_ledger_exits_74_naming_it(project: Project, cli,
                                                         small_disk: Path) -> None:
    # the ledger and its key fit before the disk is full; the reserve line does not
    (small_disk / "filler").unlink()
    spec = _spec_with_ledger(project, small_disk / "ledger.jsonl")
    r = cli("ledger", "init", "--spec", spec)
    assert r.exit_code == 0, r.stderr
    _fill(small_disk)
    size = (small_disk / "ledger.jsonl").stat().st_size
    r = cli("tabulate", project.data, "--spec", spec, "--out", project.root / "counts.csv",
            "--epsilon", 0.1, "-q")
    assert r.exit_code == 74, r.stderr
    # refused before the charge now (the ledger's room is checked with the outputs'); an
    # append that still fails is rolled back (tests/reliability)
    assert "ledger.jsonl" in r.stderr and "the ledger cannot grow" in r.stderr, r.stderr
    assert (small_disk / "ledger.jsonl").stat().st_size == size  # nothing charged
    assert not (project.root / "counts.csv").exists()


def test_predictions_and_the_key_are_0600_under_umask_022(project: Project, cli,
                                                          tmp_path: Path) -> None:
    model = project.root / "nb.json"
    old = os.umask(0o022)
    try:
        r = cli("train-nb", project.data, "--spec", project.spec, "--out", model,
                "--epsilon", 0.3, "-q")
        assert r.exit_code == 0, r.stderr
        r = cli("predict", model, project.data, "--out", project.root / "p.csv", "-q")
        assert r.exit_code == 0, r.stderr
        fresh = tmp_path / "fresh"
        fresh.mkdir()
        spec = _spec_with_ledger(project, fresh / "l.jsonl")
        r = cli("ledger", "init", "--spec", spec)
        assert r.exit_code == 0, r.stderr
    finally:
        os.umask(old)
    assert (project.root / "p.csv").stat().st_mode & 0o777 == 0o600  # private rows
    assert (fresh / "l.jsonl.key").stat().st_mode & 0o777 == 0o600   # the secret key
    assert model.stat().st_mode & 0o777 == 0o644                    # a release: the umask's
    assert (fresh / "l.jsonl").stat().st_mode & 0o777 == 0o644       # as docs/ledger.md says


def test_stale_temp_files_of_dead_runs_are_removed(project: Project, cli) -> None:
    from dpcli.io import _HOST

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead_pid = int(dead.stdout)
    out = project.root / "out"
    out.mkdir()
    stale = out / f".counts.csv.dpcli-tmp-{dead_pid}-{_HOST}-abc123"
    live = out / f".counts.csv.dpcli-tmp-{os.getppid()}-{_HOST}-def456"
    other_host = out / f".counts.csv.dpcli-tmp-{dead_pid}-0000beef-ghi789"
    for f in (stale, live, other_host):
        f.write_bytes(b"partial")
    r = _tabulate(cli, project, out / "counts.csv")
    assert r.exit_code == 0, r.stderr
    assert not stale.exists()
    assert live.exists() and other_host.exists()  # a live run's, another machine's: kept
    assert (out / "counts.csv").exists()


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_a_file_with_no_rows_is_refused_before_the_charge(project: Project, cli,
                                                          kind: str) -> None:
    frame = pd.read_parquet(project.data).iloc[:0]
    empty = project.root / f"empty.{kind}"
    if kind == "csv":
        empty.write_text(",".join(frame.columns) + "\n")
    else:
        frame.to_parquet(empty, index=False)
    before = project.ledger.read_bytes()
    for command in ("tabulate", "train-nb"):
        r = cli(command, empty, "--spec", project.spec, "--out", project.root / "o.csv",
                "--epsilon", 0.1)
        assert r.exit_code == 65, r.stderr
        assert str(empty) in r.stderr and "no records" in r.stderr, r.stderr
    assert project.ledger.read_bytes() == before


def test_a_complete_entry_that_cannot_be_written_says_the_output_exists(
        project: Project, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    from dpcli.errors import LedgerError
    from dpcli.ledger import Ledger

    def full(self: Ledger, *args: object, **kwargs: object) -> None:
        try:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        except OSError as exc:
            raise LedgerError(f"{self.path}: cannot use the ledger: {exc.strerror}") from exc

    monkeypatch.setattr(Ledger, "complete", full)
    out = project.root / "counts.csv"
    r = _tabulate(cli, project, out)
    assert r.exit_code == 74, r.stderr
    # the message says the output exists and the charge stays (not just "failed")
    assert "written" in r.stderr and "kept" in r.stderr and str(out) in r.stderr, r.stderr
    assert out.exists()
    assert [e["kind"] for e in _runs(project.ledger)] == ["reserve"]
