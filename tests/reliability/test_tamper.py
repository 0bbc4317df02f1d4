"""Issue 19, failures 3, 4 and 5: a tampered, cut, emptied, renamed or re-created ledger is
detected by `ledger verify` (exit 76) and refused by a spend (exit 76, nothing written)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from dpcli.ledger import companion_paths, head_path, key_path, verify_file
from tests.cli.conftest import Project


def lines(project: Project) -> list[bytes]:
    return project.ledger.read_bytes().splitlines(keepends=True)


def rewrite(project: Project, new: list[bytes]) -> None:
    project.ledger.write_bytes(b"".join(new))


def edit_in_place(project: Project) -> None:
    """One digit of the first reserve changed, same length."""
    old = lines(project)
    assert b'"epsilon":0.1,' in old[1]
    old[1] = old[1].replace(b'"epsilon":0.1,', b'"epsilon":0.2,', 1)
    rewrite(project, old)


def reorder(project: Project) -> None:
    old = lines(project)
    rewrite(project, [old[0], old[3], old[4], old[1], old[2]])


def delete_middle(project: Project) -> None:
    old = lines(project)
    rewrite(project, old[:2] + old[3:])


def truncate_tail(project: Project) -> None:
    """The last reserve + complete pair dropped: a valid, shorter chain."""
    rewrite(project, lines(project)[:-2])


def truncate_to_empty(project: Project) -> None:
    project.ledger.write_bytes(b"")


def append_garbage(project: Project) -> None:
    with project.ledger.open("ab") as handle:
        handle.write(b"garbage\n")


def rename_dataset(project: Project) -> None:
    project.write_spec(lambda s: s.update(dataset="toy-renamed"), sync=False)


def delete_and_reinit(project: Project) -> None:
    project.ledger.unlink()


def replace_key(project: Project) -> None:
    key_path(project.ledger).write_text("ab" * 32 + "\n")


def delete_checkpoint(project: Project) -> None:
    head_path(project.ledger).unlink()


def delete_checkpoint_and_cut(project: Project) -> None:
    delete_checkpoint(project)
    truncate_tail(project)


CASES: dict[str, Callable[[Project], None]] = {
    "edit in place": edit_in_place, "reorder": reorder, "delete a middle line": delete_middle,
    "truncate the tail": truncate_tail, "truncate to empty": truncate_to_empty,
    "append garbage": append_garbage, "rename the dataset id": rename_dataset,
    "delete the ledger and re-init": delete_and_reinit, "replace the key": replace_key,
    "delete the checkpoint": delete_checkpoint,
    "delete the checkpoint and cut the tail": delete_checkpoint_and_cut,
}


def two_spends(project: Project, cli) -> None:
    for name in ("a.csv", "b.csv"):
        r = cli("tabulate", project.data, "--spec", project.spec, "--out", project.root / name,
                "--epsilon", "0.1", "--quiet")
        assert r.exit_code == 0, r.stderr
    assert len(lines(project)) == 5  # genesis, 2 x (reserve, complete)


@pytest.mark.parametrize("case", list(CASES))
def test_tampering_is_detected_and_refused(project: Project, cli, case: str) -> None:
    two_spends(project, cli)
    CASES[case](project)
    if case == "delete the ledger and re-init":
        r = cli("ledger", "init", "--spec", project.spec)
        assert r.exit_code == 76 and "deleted or moved" in r.stderr
        assert not project.ledger.exists()
    before = project.ledger.read_bytes() if project.ledger.exists() else None

    r = cli("ledger", "verify", "--spec", project.spec)
    assert r.exit_code == 76, r.stderr
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", project.root / "c.csv",
            "--epsilon", "0.1")
    assert r.exit_code == 76, r.stderr
    assert not (project.root / "c.csv").exists()
    assert (project.ledger.read_bytes() if project.ledger.exists() else None) == before
    if case == "rename the dataset id":
        assert "no genesis" in r.stderr and "dpcli ledger init" in r.stderr


def test_rolling_every_file_back_together_is_caught_only_by_an_anchored_head(
        project: Project, cli) -> None:
    """The documented limit: a copy of the ledger and its sidecars taken earlier, restored
    later, verifies; the head recorded elsewhere after the later spend gives it away."""
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", project.root / "a.csv",
            "--epsilon", "0.1", "--quiet")
    assert r.exit_code == 0
    backup = project.root / "backup"
    backup.mkdir()
    for path in companion_paths(project.ledger):
        if path.exists():
            shutil.copy2(path, backup / path.name)
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", project.root / "b.csv",
            "--epsilon", "0.1", "--quiet")
    assert r.exit_code == 0
    anchored = verify_file(project.ledger).head
    for copy in backup.iterdir():
        shutil.copy2(copy, project.ledger.parent / copy.name)
    assert cli("ledger", "verify", "--spec", project.spec).exit_code == 0  # undetectable here
    r = cli("ledger", "verify", "--spec", project.spec, "--expect-head", anchored)
    assert r.exit_code == 76 and f"expected head {anchored} is not" in r.stderr
    earlier = verify_file(project.ledger).head
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", project.root / "c.csv",
            "--epsilon", "0.1", "--quiet")
    assert r.exit_code == 0
    r = cli("ledger", "verify", "--spec", project.spec, "--expect-head", earlier)
    assert r.exit_code == 0, r.stderr  # an anchored head stays valid as the ledger grows


def test_the_head_is_printed_for_anchoring(project: Project, cli) -> None:
    r = cli("ledger", "verify", "--spec", project.spec)
    assert r.exit_code == 0 and verify_file(project.ledger).head in r.stderr


def test_companion_paths_name_every_sidecar(project: Project) -> None:
    names = {p.name for p in companion_paths(project.ledger)}
    assert names == {"ledger.jsonl", "ledger.jsonl.key", "ledger.jsonl.head",
                     "ledger.jsonl.head.tmp", "ledger.jsonl.lock"}
    existing = {p.name for p in Path(project.root).iterdir() if p.name.startswith("ledger")}
    assert existing <= names
