"""Each command reads the ledger once and hashes each output once: `ledger show` and `ledger
verify` list repairs from the read that made their table or check, and `--reuse` serves its
look and the outputs' replacement check from one read of the ledger and one hash of each
output. Through the real entry point, counting the ledger lines parsed and the outputs
hashed."""

from __future__ import annotations

import json
import os

import pytest

from tests.cli.conftest import Project


def _lines(project: Project) -> int:
    return len(project.ledger.read_bytes().splitlines())


@pytest.fixture
def parsed(monkeypatch) -> list[int]:
    """How many ledger lines were parsed (dpcli.ledger._parse calls)."""
    import dpcli.ledger

    calls: list[int] = []
    real = dpcli.ledger._parse

    def counting(raw: bytes):
        calls.append(1)
        return real(raw)

    monkeypatch.setattr(dpcli.ledger, "_parse", counting)
    return calls


def _tab(cli, project: Project, *extra: object):
    return cli("tabulate", project.data, "--spec", project.spec, "--out",
               project.root / "t.csv", "--epsilon", 0.1, *extra)


def _repaired(project: Project, cli) -> None:
    """Runs, then a torn last line dropped by `ledger repair` (a repair entry to list)."""
    for _ in range(3):
        assert _tab(cli, project).exit_code == 0
    with project.ledger.open("ab") as fh:
        fh.write(b'{"entry": {"torn')
    r = cli("ledger", "repair", "--spec", project.spec, "--yes")
    assert r.exit_code == 0, r.stderr


@pytest.mark.parametrize("command", ["show", "verify"])
def test_ledger_show_and_verify_read_the_ledger_once(project: Project, cli, parsed,
                                                     command: str) -> None:
    _repaired(project, cli)
    lines = _lines(project)
    parsed.clear()
    r = cli("ledger", command, "--spec", project.spec, "--json")
    assert r.exit_code == 0, r.stderr
    repairs = json.loads(r.stdout)["repairs"]
    assert [x["what"] for x in repairs] == ["dropped_torn_line"]   # still listed
    assert len(parsed) <= lines, (len(parsed), lines)               # every line at most once


def test_reuse_reads_the_ledger_once_and_hashes_each_output_once(project: Project, cli,
                                                                 parsed, monkeypatch) -> None:
    import dpcli.fingerprint

    assert _tab(cli, project, "--reuse").exit_code == 0
    assert _tab(cli, project).exit_code == 0       # an identical release without --reuse
    lines = _lines(project)
    parsed.clear()
    r = _tab(cli, project, "--reuse")
    assert r.exit_code == 0 and "reused run" in r.stderr, r.stderr
    assert len(parsed) <= lines, (len(parsed), lines)

    # t.json gone: the look hashes t.csv (two matching runs: still once), the replacement
    # check that follows takes that digest, and the run releases again
    (project.root / "t.json").unlink()
    hashed: list[str] = []
    real = dpcli.fingerprint.file_digest

    def counting(path, *args, **kwargs):
        if os.path.basename(path) == "t.csv":
            hashed.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(dpcli.fingerprint, "file_digest", counting)
    import dpcli.run  # (an earlier dpcli imported it there)

    monkeypatch.setattr(dpcli.run, "file_digest", counting, raising=False)
    lines = _lines(project)
    parsed.clear()
    r = _tab(cli, project, "--reuse")
    assert r.exit_code == 0 and "reused" not in r.stderr, r.stderr
    assert len(hashed) == 1, hashed
    # the look and the check share one read; the charge and the record add their own
    # (O(1) at the checkpoint): every line parsed once, plus the few new ones
    assert len(parsed) <= lines + 4, (len(parsed), lines)
    assert len(project.reserves()) == 3
