"""Issue 19, failure 7: a spend costs O(new entries) thanks to the keyed checkpoint; and the
genesis rules (failure 4, 5) and the upgrade of a ledger written by an earlier dpcli."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import dpcli.ledger as ledger_module
from dpcli.budget import Budget
from dpcli.errors import LedgerError
from dpcli.ledger import (
    GENESIS,
    Ledger,
    entry_hash,
    head_path,
    init_ledger,
    key_path,
    read_entries,
    verify_file,
)


class Plan:
    def __init__(self, epsilon: float) -> None:
        self.total = Budget(epsilon)

    def to_json(self) -> list[dict[str, Any]]:
        return [{"name": "all", "mechanism": "laplace", "epsilon": self.total.eps}]


def reserve(ledger: Ledger, epsilon: float = 0.1) -> Any:
    return ledger.reserve(Plan(epsilon), command="test", arguments={}, spec_digest="0" * 64,
                          input_file=None, input_digest=None, seeded=False)


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the whole-file scans (each appends the number of lines it read)."""
    counted: list[int] = []
    real = ledger_module._scan

    def counting(*args: Any, **kwargs: Any) -> Any:
        fold = real(*args, **kwargs)
        counted.append(fold.entries)
        return fold

    monkeypatch.setattr(ledger_module, "_scan", counting)
    return counted


def test_a_spend_on_an_untouched_ledger_reads_no_entry(tmp_path: Path, scans: list[int]) -> None:
    path = tmp_path / "ledger.jsonl"
    init_ledger(path, "d", Budget(100))
    ledger = Ledger(path, "d", Budget(100))
    for _ in range(50):
        ledger.complete(reserve(ledger, 0.5), [])
    scans.clear()
    run = reserve(ledger, 0.5)
    ledger.fail(run, "x")
    assert ledger.summary(runs=False).spent == Budget("25.5")
    assert scans == []  # O(1): the checkpoint's figures, no line read


def test_a_write_outside_dpcli_makes_the_next_spend_verify_everything(
        tmp_path: Path, scans: list[int]) -> None:
    path = tmp_path / "ledger.jsonl"
    init_ledger(path, "d", Budget(1))
    ledger = Ledger(path, "d", Budget(1))
    reserve(ledger)
    path.write_bytes(path.read_bytes())  # same bytes, but the file's ctime changed
    scans.clear()
    reserve(ledger)
    assert scans == [2]  # one full scan, then the checkpoint holds again
    reserve(ledger)
    assert scans == [2]


def test_a_crash_between_append_and_checkpoint_is_picked_up(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    init_ledger(path, "d", Budget(1))
    ledger = Ledger(path, "d", Budget(1))
    reserve(ledger)
    stale = head_path(path).read_bytes()
    reserve(ledger)
    head_path(path).write_bytes(stale)  # as if killed after the line, before the checkpoint
    assert verify_file(path).ok
    assert ledger.summary().spent == Budget("0.2")
    reserve(ledger)
    assert ledger.summary().spent == Budget("0.3")


def test_a_forged_checkpoint_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    init_ledger(path, "d", Budget(1))
    ledger = Ledger(path, "d", Budget(1))
    reserve(ledger, 0.9)
    body = json.loads(head_path(path).read_text())
    body["datasets"]["d"]["spent"] = ["0", "0"]  # give the budget back
    head_path(path).write_text(json.dumps(body))
    with pytest.raises(LedgerError, match="fails its MAC"):
        reserve(ledger)
    assert not verify_file(path).ok


def test_datasets_share_a_ledger_each_with_its_genesis(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    assert init_ledger(path, "a", Budget(1)) == "created"
    assert init_ledger(path, "b", Budget(2, "1e-6")) == "added"
    with pytest.raises(LedgerError, match="already has its genesis"):
        init_ledger(path, "b", Budget(5))
    with pytest.raises(LedgerError, match=r"no genesis.*ledger init"):
        reserve(Ledger(path, "c", Budget(1)))
    with pytest.raises(LedgerError, match="records ε=2, δ=1e-06"):
        reserve(Ledger(path, "b", Budget(3, "1e-6")))
    reserve(Ledger(path, "b", Budget(2, "1e-6")), 1.5)
    assert [e["kind"] for e in read_entries(path)] == ["genesis", "genesis", "reserve"]
    assert verify_file(path, dataset="b", total=Budget(2, "1e-6")).ok


def legacy_ledger(path: Path, spends: list[float], total: float = 1.0) -> None:
    """A ledger as the previous dpcli wrote it: reserves with no genesis, no checkpoint."""
    path.parent.mkdir(parents=True, exist_ok=True)
    key_path(path).write_text("cd" * 32 + "\n")
    prev, lines = GENESIS, []
    for seq, eps in enumerate(spends):
        entry = {"seq": seq, "kind": "reserve", "run_id": f"{seq:032x}", "time": "t",
                 "dpcli_version": "0.9", "dataset": "d", "prev": prev, "command": "tabulate",
                 "arguments": {}, "breakdown": [], "seeded": False, "epsilon": eps,
                 "delta": 0.0, "total_epsilon": total, "total_delta": 0.0}
        prev = entry_hash(entry)
        lines.append(json.dumps({"entry": entry, "hash": prev}, sort_keys=True,
                                separators=(",", ":")) + "\n")
    path.write_text("".join(lines))


def test_a_ledger_from_an_earlier_dpcli_is_upgraded_by_init(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    legacy_ledger(path, [0.25, 0.25])
    ledger = Ledger(path, "d", Budget(1))
    with pytest.raises(LedgerError, match=r"earlier dpcli.*ledger init"):
        reserve(ledger)
    report = verify_file(path)
    assert not report.ok and any("no genesis" in p for p in report.problems)
    with pytest.raises(LedgerError, match="recorded ε=1"):
        init_ledger(path, "d", Budget(2))  # the genesis must declare the recorded total
    assert init_ledger(path, "d", Budget(1)) == "upgraded"
    assert ledger.summary().spent == Budget("0.5")  # the earlier runs still count
    reserve(ledger, 0.5)
    with pytest.raises(Exception, match="budget exhausted"):
        reserve(ledger, 0.01)
    assert verify_file(path).ok


def test_an_empty_ledger_without_checkpoint_is_not_a_fresh_budget(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    init_ledger(path, "d", Budget(1))
    reserve(Ledger(path, "d", Budget(1)), 1)
    path.write_bytes(b"")
    head_path(path).unlink()
    with pytest.raises(LedgerError, match=r"empty and its checkpoint .* is missing"):
        init_ledger(path, "d", Budget(1))
    with pytest.raises(LedgerError, match="empty and its checkpoint"):
        reserve(Ledger(path, "d", Budget(1)))
