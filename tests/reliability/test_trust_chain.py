"""A deleted or damaged checkpoint blocked a dataset for good, though chain and key verified:
`ledger repair --trust-chain` rebuilds it from the chain as it is now — an explicit act,
confirmed, recorded in the ledger — and never overrides an intact checkpoint the chain
contradicts (the rollback it exists to catch). Through the real entry point."""

from __future__ import annotations

import json
import shutil

from dpcli.ledger import head_path, read_entries, verify_file
from tests.cli.conftest import Project


def spend(project: Project, cli, name: str) -> None:
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", project.root / name,
            "--epsilon", "0.1", "--quiet")
    assert r.exit_code == 0, r.stderr


def _head(project: Project) -> str:
    return json.loads(project.ledger.read_text().splitlines()[-1])["hash"]


def test_a_deleted_checkpoint_is_rebuilt_only_when_asked(project: Project, cli) -> None:
    spend(project, cli, "a.csv")
    anchored = _head(project)
    head_path(project.ledger).unlink()
    before = project.ledger.read_bytes()

    r = cli("tabulate", project.data, "--spec", project.spec, "--out", project.root / "b.csv")
    assert r.exit_code == 76 and "--trust-chain" in r.stderr  # the way out is named
    r = cli("ledger", "repair", "--spec", project.spec, "--yes")  # not a torn line
    assert r.exit_code == 76 and "--trust-chain" in r.stderr
    assert "restore the damaged file from a backup" not in r.stderr
    r = cli("ledger", "repair", "--spec", project.spec, "--trust-chain")  # no terminal
    assert r.exit_code == 64 and "pass --yes" in r.stderr
    assert "trusts that the ledger was not cut short or rolled back" in r.stderr
    assert project.ledger.read_bytes() == before and not head_path(project.ledger).exists()
    r = cli("ledger", "repair", "--spec", project.spec, "--trust-chain", "--yes",
            "--expect-head", "0" * 64)  # an anchor the chain does not hold: refused
    assert r.exit_code == 76 and "not the hash of any entry" in r.stderr
    assert project.ledger.read_bytes() == before

    r = cli("ledger", "repair", "--spec", project.spec, "--trust-chain", "--yes",
            "--expect-head", anchored, "--json")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["trusted_chain"] == {"entries": 3, "head": anchored, "checkpoint": "missing"}
    last = read_entries(project.ledger)[-1]
    assert last["kind"] == "repair" and last["dataset"] == "toy"
    assert last["trusted_chain"] == {"entries": 3, "head": anchored, "checkpoint": "missing",
                                     "expect_head": anchored}
    assert verify_file(project.ledger).ok
    spend(project, cli, "b.csv")  # unblocked, and the earlier spend still counts
    r = cli("ledger", "show", "--spec", project.spec, "--json")
    assert json.loads(r.stdout)["spent"]["epsilon"] == 0.2
    # the rebuilt checkpoint is in the account a reviewer reads, not only in the raw file
    repairs = json.loads(r.stdout)["repairs"]
    assert [x["what"] for x in repairs] == ["trusted_chain"]
    assert repairs[0]["trusted_chain"]["head"] == anchored
    for command in ("show", "verify"):
        r = cli("ledger", command, "--spec", project.spec)
        assert r.exit_code == 0 and "rebuilt the checkpoint" in r.stderr, r.stderr
        assert anchored[:16] in r.stderr
    r = cli("ledger", "verify", "--spec", project.spec, "--json")
    assert json.loads(r.stdout)["repairs"] == repairs
    # a second --trust-chain has nothing to rebuild, and writes nothing
    after = project.ledger.read_bytes()
    r = cli("ledger", "repair", "--spec", project.spec, "--trust-chain", "--yes")
    assert r.exit_code == 0 and "nothing to rebuild" in r.stderr
    assert project.ledger.read_bytes() == after


def test_a_checkpoint_that_fails_its_mac_can_be_rebuilt(project: Project, cli) -> None:
    spend(project, cli, "a.csv")
    head = head_path(project.ledger)
    head.write_text(head.read_text().replace('"entries":3', '"entries":2'))
    r = cli("ledger", "verify", "--spec", project.spec)
    assert r.exit_code == 76 and "fails its MAC" in r.stdout + r.stderr
    r = cli("ledger", "repair", "--spec", project.spec, "--trust-chain", "--yes")
    assert r.exit_code == 0, r.stderr
    assert read_entries(project.ledger)[-1]["trusted_chain"]["checkpoint"] == "fails its MAC"
    assert verify_file(project.ledger).ok


def test_an_intact_checkpoint_the_chain_contradicts_is_never_overridden(project: Project,
                                                                        cli) -> None:
    """The ledger rolled back to an earlier copy while its checkpoint stayed: exactly what the
    checkpoint catches. --trust-chain refuses; nothing is written."""
    spend(project, cli, "a.csv")
    shutil.copyfile(project.ledger, project.root / "old.jsonl")
    spend(project, cli, "b.csv")
    shutil.copyfile(project.root / "old.jsonl", project.ledger)  # the tail is gone
    rolled = project.ledger.read_bytes()
    r = cli("ledger", "repair", "--spec", project.spec, "--trust-chain", "--yes")
    assert r.exit_code == 76 and "never overrides it" in r.stderr
    assert project.ledger.read_bytes() == rolled
    assert not verify_file(project.ledger).ok


def test_a_chain_that_does_not_verify_is_not_trusted(project: Project, cli) -> None:
    spend(project, cli, "a.csv")
    head_path(project.ledger).unlink()
    lines = project.ledger.read_text().splitlines(keepends=True)
    project.ledger.write_text("".join([lines[0], lines[2]]))  # a line removed
    r = cli("ledger", "repair", "--spec", project.spec, "--trust-chain", "--yes")
    assert r.exit_code == 76 and "the chain itself fails verification" in r.stderr
    assert not head_path(project.ledger).exists()
