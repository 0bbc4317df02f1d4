"""Issue 19, failure 6 (full disk): a failed append is rolled back and blocks nothing; a
`complete` that cannot be written after the outputs were says so."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dpcli.budget import Budget
from dpcli.errors import LedgerError
from dpcli.ledger import Ledger, head_path, init_ledger, read_entries, verify_file
from tests.cli.conftest import Project


class Plan:
    def __init__(self, epsilon: float) -> None:
        self.total = Budget(epsilon)

    def to_json(self) -> list[dict[str, Any]]:
        return [{"name": "all", "mechanism": "laplace", "epsilon": self.total.eps}]


def reserve(ledger: Ledger, epsilon: float = 0.1, **arguments: Any) -> Any:
    return ledger.reserve(Plan(epsilon), command="test", arguments=arguments,
                          spec_digest="0" * 64, input_file=None, input_digest=None,
                          seeded=False)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs (root only: skipped elsewhere, with the reason)."""
    mount = tmp_path / "fs"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root; the monkeypatched tests below cover "
                    "the rollback")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}); "
                    "the monkeypatched tests below cover the rollback")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(folder: Path) -> Path:
    """Write a file until the file system is full; return it."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def test_disk_full_on_a_real_small_tmpfs_rolls_back_and_blocks_nothing(small_fs: Path) -> None:
    path = small_fs / "ledger.jsonl"
    init_ledger(path, "d", Budget(1))
    ledger = Ledger(path, "d", Budget(1))
    reserve(ledger)
    filler = fill(small_fs)
    before, checkpoint = path.read_bytes(), head_path(path).read_bytes()
    failures = 0
    for _ in range(3):
        with pytest.raises(LedgerError, match=r"rolled back to its previous .* nothing was"):
            reserve(ledger, note="x" * 5000)  # more than the free space left in a page
        failures += 1
        assert path.read_bytes() == before
    assert head_path(path).read_bytes() == checkpoint
    assert verify_file(path).ok
    filler.unlink()  # space freed: the dataset is not blocked
    reserve(ledger)
    assert verify_file(path).ok
    assert [e["kind"] for e in read_entries(path)] == ["genesis", "reserve", "reserve"]
    assert failures == 3


def test_a_short_ledger_write_is_rolled_back(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "ledger.jsonl"
    init_ledger(path, "d", Budget(1))
    ledger = Ledger(path, "d", Budget(1))
    reserve(ledger)
    before = path.read_bytes()
    real_write = os.write
    calls = []

    def half_then_full(fd: int, data: bytes) -> int:
        calls.append(len(data))
        if len(calls) == 1:  # the ledger line: half of it lands, then the disk is full
            real_write(fd, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(LedgerError, match=r"No space left on device.*rolled back"):
        reserve(ledger)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert verify_file(path).ok
    reserve(ledger)
    assert verify_file(path).ok


def test_a_checkpoint_that_cannot_be_written_rolls_the_line_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dpcli.ledger as ledger_module

    path = tmp_path / "ledger.jsonl"
    init_ledger(path, "d", Budget(1))
    ledger = Ledger(path, "d", Budget(1))
    before, checkpoint = path.read_bytes(), head_path(path).read_bytes()

    def no_space(*args: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(ledger_module, "_write_checkpoint", no_space)
    with pytest.raises(LedgerError, match=r"Input/output error.*rolled back"):
        reserve(ledger)
    monkeypatch.undo()
    assert (path.read_bytes(), head_path(path).read_bytes()) == (before, checkpoint)
    reserve(ledger)
    assert verify_file(path).ok


def test_complete_failing_after_the_outputs_says_so(project: Project, cli,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*args: object, **kwargs: object) -> None:
        raise LedgerError("ledger.jsonl: cannot append to the ledger (No space left on device)")

    monkeypatch.setattr(Ledger, "complete", full)
    out = project.root / "counts.csv"
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", out, "--epsilon", "0.3")
    monkeypatch.undo()
    assert r.exit_code == 76
    assert f"{out}" in r.stderr and "the charge of ε=0.3 is kept" in r.stderr
    assert "No space left on device" in r.stderr
    assert out.exists()
    r = cli("ledger", "show", "--spec", project.spec, "--json")
    assert '"status": "interrupted"' in r.stdout and '"epsilon": 0.3' in r.stdout
