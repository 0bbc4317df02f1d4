"""Issue 19, failure 6: a torn last line blocked a dataset for good; `ledger repair` drops it
(only it), after showing it, and records the repair."""

from __future__ import annotations

import hashlib

import pytest

from dpcli.ledger import read_entries, verify_file
from tests.cli.conftest import Project


def spend(project: Project, cli, name: str) -> None:
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", project.root / name,
            "--epsilon", "0.1", "--quiet")
    assert r.exit_code == 0, r.stderr


@pytest.mark.parametrize("tear", ["half a line", "no final newline", "garbage line"])
def test_repair_drops_a_torn_last_line_and_records_it(project: Project, cli, tear: str) -> None:
    spend(project, cli, "a.csv")
    intact = project.ledger.read_bytes()
    last = intact.splitlines(keepends=True)[-1]
    torn = {"half a line": last[: len(last) // 2], "no final newline": last[:-1],
            "garbage line": b"{\"entry\": 1\n"}[tear]
    project.ledger.write_bytes(intact + torn)

    r = cli("tabulate", project.data, "--spec", project.spec, "--out", project.root / "b.csv",
            "--epsilon", "0.1")
    assert r.exit_code == 76 and "line 4" in r.stderr  # blocked until repaired
    r = cli("ledger", "repair", "--spec", project.spec)  # no terminal, no --yes
    assert r.exit_code == 64 and "pass --yes" in r.stderr
    assert torn[:40].decode() in r.stderr  # shown before anything is done
    assert project.ledger.read_bytes() == intact + torn

    r = cli("ledger", "repair", "--spec", project.spec, "--yes")
    assert r.exit_code == 0, r.stderr
    assert "dropped torn line 4" in r.stderr
    data = project.ledger.read_bytes()
    assert data.startswith(intact) and torn not in data[len(intact):]
    repair = read_entries(project.ledger)[-1]
    assert repair["kind"] == "repair" and repair["dropped_line"] == 4
    assert repair["dropped_sha256"] == hashlib.sha256(torn).hexdigest()
    assert verify_file(project.ledger).ok
    spend(project, cli, "b.csv")  # the dataset is not blocked any more
    r = cli("ledger", "repair", "--spec", project.spec, "--yes")
    assert r.exit_code == 0 and "nothing to repair" in r.stderr


@pytest.mark.parametrize("damage", ["middle line edited", "last line complete but edited",
                                    "tail cut"])
def test_repair_refuses_anything_but_a_torn_last_line(project: Project, cli,
                                                      damage: str) -> None:
    spend(project, cli, "a.csv")
    spend(project, cli, "b.csv")
    lines = project.ledger.read_bytes().splitlines(keepends=True)
    if damage == "middle line edited":
        lines[1] = lines[1].replace(b'"epsilon":0.1,', b'"epsilon":0.2,', 1)
        lines[-1] = lines[-1][:-5]  # and a torn last line too: still not only a torn line
    elif damage == "last line complete but edited":
        lines[-1] = lines[-1].replace(b'"kind":"complete"', b'"kind":"failed"', 1)
    else:
        lines = lines[:-2]
    project.ledger.write_bytes(b"".join(lines))
    before = project.ledger.read_bytes()
    r = cli("ledger", "repair", "--spec", project.spec, "--yes")
    assert r.exit_code == 76
    assert "restore" in r.stderr and "backup" in r.stderr
    assert project.ledger.read_bytes() == before


def test_a_whole_entry_that_lost_only_its_newline_is_completed_not_dropped(
        project: Project, cli) -> None:
    """`truncate -s -1 ledger.jsonl`: the last entry (a run's `complete`, which the checkpoint
    counts) is whole but for its newline. Dropping it would un-record a run and leave a ledger
    the checkpoint no longer matches; repair restores the newline instead."""
    spend(project, cli, "a.csv")
    intact = project.ledger.read_bytes()
    project.ledger.write_bytes(intact[:-1])
    assert not verify_file(project.ledger).ok
    r = cli("ledger", "repair", "--spec", project.spec, "--yes")
    assert r.exit_code == 0, r.stderr
    assert "restored the final newline of line" in r.stderr
    assert project.ledger.read_bytes().startswith(intact)  # every byte of every entry kept
    repair = read_entries(project.ledger)[-1]
    assert repair["kind"] == "repair" and repair["dropped_bytes"] == 0
    assert repair["completed_line"] == repair["dropped_line"]
    assert verify_file(project.ledger).ok
    shown = cli("ledger", "show", "--spec", project.spec)
    assert "restored the final newline of line" in shown.stderr + shown.stdout
    assert "dropped a torn last line" not in shown.stderr + shown.stdout   # tester 17
    spend(project, cli, "b.csv")


def test_repair_never_drops_a_line_the_checkpoint_counts(project: Project, cli) -> None:
    """A last line damaged after it was written (the checkpoint counts it) is not a crash's torn
    line: dropping it would un-spend a run, so repair refuses and changes nothing."""
    spend(project, cli, "a.csv")
    intact = project.ledger.read_bytes()
    damaged = intact[:-40] + b"\n"   # the last entry cut short, a newline after it
    project.ledger.write_bytes(damaged[:-1])
    r = cli("ledger", "repair", "--spec", project.spec, "--yes")
    assert r.exit_code == 76
    assert "restore the ledger from a backup" in r.stderr
    assert project.ledger.read_bytes() == damaged[:-1]


def test_repair_does_not_call_a_ledger_without_its_checkpoint_fine(project: Project,
                                                                     cli) -> None:
    """verify and spends refuse a ledger whose checkpoint is gone; repair must not answer
    'nothing to repair (it verifies)' then."""
    from dpcli.ledger import head_path

    spend(project, cli, "a.csv")
    head_path(project.ledger).unlink()
    r = cli("ledger", "repair", "--spec", project.spec, "--yes")
    assert r.exit_code == 76
    assert "fails verification" in r.stderr and "checkpoint" in r.stderr
