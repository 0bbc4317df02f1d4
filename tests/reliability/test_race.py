"""Issue 19, failure 1: one ledger reached through several paths is still one lock.

32 processes race for a total that allows exactly 10 spends of ε = 0.1, through a relative
path, an absolute path and a symlink from another folder: never more than 10 releases, no
forked chain. A hard-linked ledger is refused (its sidecars sit beside one name only).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from dpcli.budget import Budget
from dpcli.ledger import Ledger, init_ledger, read_entries, verify_file
from tests.cli.conftest import Project
from tests.reliability.conftest import ROOT, dpcli

WORKER = ROOT / "tests" / "ledger_worker.py"


def race(spellings: list[tuple[str, Path]]) -> list[tuple[int, str]]:
    """Start one library reserve (ε = 0.1 of 1.0) per (path, cwd); release them together."""
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    workers = [subprocess.Popen(
        [sys.executable, str(WORKER), "race", path, "uci-adult", "1.0", "0.1"], cwd=cwd,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        for path, cwd in spellings]
    for worker in workers:  # every child has imported dpcli and is waiting
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.close()
    results = []
    for worker in workers:
        code = worker.wait(timeout=120)
        assert worker.stdout is not None
        results.append((code, worker.stdout.read()))
        worker.stdout.close()
    return results


def spellings_of(ledger: Path, link: Path) -> list[tuple[str, Path]]:
    """8 relative, 8 absolute, 16 through a relative symlink in another folder."""
    return ([("ledger.jsonl", ledger.parent)] * 8 + [(str(ledger), ROOT)] * 8
            + [(str(link), ROOT)] * 16)


def assert_one_chain(ledger: Path, releases: int) -> None:
    report = verify_file(ledger)
    assert report.ok, report.problems
    entries = read_entries(ledger)
    assert [e["seq"] for e in entries] == list(range(len(entries)))  # no forked chain
    assert sum(e["kind"] == "reserve" for e in entries) == releases


def test_32_processes_through_three_spellings_never_overspend(tmp_path: Path) -> None:
    for round_ in range(3):
        folder = tmp_path / f"round{round_}"
        ledger, other = folder / "a" / "ledger.jsonl", folder / "b"
        init_ledger(ledger, "uci-adult", Budget(1))
        other.mkdir()
        link = other / "ledger.jsonl"
        link.symlink_to(Path("..") / "a" / "ledger.jsonl")
        results = race(spellings_of(ledger, link))
        codes = sorted(code for code, _ in results)
        assert codes == [0] * 10 + [3] * 22, results
        assert_one_chain(ledger, releases=10)
        assert Ledger(link, "uci-adult", Budget(1)).summary().spent == Budget(1)
        assert not (other / "ledger.jsonl.key").exists()  # sidecars live beside the real file


def test_a_hard_linked_ledger_is_refused_until_unlinked(tmp_path: Path) -> None:
    ledger, other = tmp_path / "a" / "ledger.jsonl", tmp_path / "b"
    init_ledger(ledger, "uci-adult", Budget(1))
    other.mkdir()
    os.link(ledger, other / "ledger.jsonl")
    shutil.copy(ledger.with_name("ledger.jsonl.key"), other / "ledger.jsonl.key")
    before = ledger.read_bytes()
    results = race([(str(ledger), ROOT)] * 16 + [(str(other / "ledger.jsonl"), ROOT)] * 16)
    assert all(code == 76 and "2 hard links" in out for code, out in results), results
    assert ledger.read_bytes() == before
    (other / "ledger.jsonl").unlink()
    results = race([(str(ledger), ROOT)] * 2)
    assert sorted(code for code, _ in results) == [0, 0]
    assert_one_chain(ledger, releases=2)


def test_16_cli_runs_through_a_symlinked_ledger_release_at_most_10(project: Project,
                                                                   cli) -> None:
    """The real CLI: half the runs use the project's spec, half a spec in another folder
    whose ledger is a symlink to the project's; tabulate --epsilon 0.1 of a total of 1.
    (16 processes, not 32: each CLI start imports pandas and pyarrow, ~1.5 s of CPU.)"""
    other = project.root / "elsewhere"
    other.mkdir()
    shutil.copy(project.root / "vocab.txt", other / "vocab.txt")
    spec = yaml.safe_load(project.spec.read_text())
    (other / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    (other / "ledger.jsonl").symlink_to(project.ledger)
    specs = [project.spec, other / "spec.yaml"] * 8
    procs = [subprocess.Popen(
        dpcli("tabulate", project.data, "--spec", spec_path, "--out",
              project.root / f"out{i}.csv", "--epsilon", "0.1", "--quiet"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i, spec_path in enumerate(specs)]
    outcomes = [(p.wait(timeout=300), p.communicate()[1]) for p in procs]
    codes = sorted(code for code, _ in outcomes)
    assert codes == [0] * 10 + [3] * 6, outcomes
    assert all("budget exhausted" in err for code, err in outcomes if code == 3)
    assert len(list(project.root.glob("out*.csv"))) == 10
    assert_one_chain(project.ledger, releases=10)
    for spec_path in (project.spec, other / "spec.yaml"):
        assert cli("ledger", "verify", "--spec", spec_path).exit_code == 0
