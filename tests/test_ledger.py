"""Tests of the budget ledger: locking across processes, no refunds, tamper evidence."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from dpcli import NEIGHBOURING_RELATION, __version__
from dpcli.budget import Budget
from dpcli.errors import BudgetExhausted, LedgerError
from dpcli.fingerprint import file_digest, input_digest
from dpcli.ledger import (
    GENESIS,
    Ledger,
    Reservation,
    entry_hash,
    init_ledger,
    key_path,
    read_entries,
    verify_file,
)

ROOT = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).with_name("ledger_worker.py")


class FakePlan:
    """A stand-in for composition.Plan: anything with .total and .to_json()."""

    def __init__(self, epsilon: float | str | Fraction, delta: float | str = 0) -> None:
        self.total = Budget(epsilon, delta)

    def to_json(self) -> list[dict[str, Any]]:
        return [{"name": "counts", "mechanism": "laplace", "epsilon": self.total.eps,
                 "delta": self.total.dlt, "note": "ε for the histogram"}]


def reserve(ledger: Ledger, epsilon: float | str | Fraction, delta: float | str = 0,
            **arguments: Any) -> Reservation:
    return ledger.reserve(FakePlan(epsilon, delta), command="train-nb", arguments=arguments,
                          spec_digest="ab" * 32, input_file="data.csv",
                          input_digest="cd" * 32, seeded=False)


def start_worker(mode: str, path: Path, epsilon: str, total: str = "1.0") -> subprocess.Popen[str]:
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, str(WORKER), mode, str(path), "uci-adult", total, epsilon],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def opened(path: Path, dataset: str, total: Budget) -> Ledger:
    """The dataset's ledger, its genesis recorded first if it has none yet."""
    if not any(e["kind"] == "genesis" and e["dataset"] == dataset for e in read_entries(path)):
        init_ledger(path, dataset, total)
    return Ledger(path, dataset, total)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / "audit" / "ledger.jsonl"  # parent folder does not exist yet
    assert init_ledger(p, "uci-adult", Budget(1)) == "created"
    return p


@pytest.fixture
def small_ledger(path: Path, tmp_path: Path) -> Path:
    """reserve, complete, reserve, failed -- with a non-ASCII reason."""
    ledger = Ledger(path, "uci-adult", Budget(1))
    output = tmp_path / "model.json"
    output.write_text("{}")
    first = reserve(ledger, 0.25, alpha=0.5)
    ledger.complete(first, [output], {"accuracy_is_private": False})
    second = reserve(ledger, 0.5, seed=None)
    ledger.fail(second, "DataError: column 'âge' missing")
    assert verify_file(path).ok
    return path


# -- concurrency and crashes ------------------------------------------------


def test_eight_racing_processes_never_overspend(path: Path) -> None:
    workers = [start_worker("race", path, "0.3") for _ in range(8)]
    for worker in workers:  # every child has imported dpcli and is waiting
        assert worker.stdout is not None
        assert worker.stdout.readline().strip() == "ready"
    for worker in workers:  # release them together
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.close()
    codes = sorted(worker.wait(timeout=60) for worker in workers)
    for worker in workers:
        assert worker.stdout is not None
        worker.stdout.close()
    assert codes == [0, 0, 0, 3, 3, 3, 3, 3]
    assert verify_file(path).ok
    summary = Ledger(path, "uci-adult", Budget(1)).summary()
    assert summary.spent == Budget("0.9")
    assert summary.spent.epsilon == Fraction(9, 10)
    assert len(summary.runs) == 3


def test_run_killed_after_reservation_keeps_its_charge(path: Path) -> None:
    worker = start_worker("hold", path, "0.6")
    assert worker.stdout is not None and worker.stdin is not None
    line = worker.stdout.readline()
    assert line.startswith("reserved ")
    os.kill(worker.pid, signal.SIGKILL)
    assert worker.wait(timeout=30) == -signal.SIGKILL
    worker.stdout.close()
    worker.stdin.close()

    ledger = Ledger(path, "uci-adult", Budget("1.0"))
    assert ledger.verify().ok
    summary = ledger.summary()
    assert [(r.run_id, r.status) for r in summary.runs] == [(line.split()[1], "interrupted")]
    assert summary.spent == Budget("0.6")
    with pytest.raises(BudgetExhausted):
        reserve(ledger, 0.5)
    later = reserve(ledger, 0.4)
    assert later.remaining == Budget(0)
    assert ledger.summary().spent == Budget(1)
    assert ledger.verify().ok


# -- tamper evidence --------------------------------------------------------


def test_every_single_byte_edit_is_detected(small_ledger: Path) -> None:
    original = small_ledger.read_bytes()
    assert len(original) > 1000
    for position in range(len(original)):
        edited = bytearray(original)
        edited[position] = ord("x") if original[position] != ord("x") else ord("y")
        small_ledger.write_bytes(bytes(edited))
        report = verify_file(small_ledger)
        assert not report.ok, f"edit at byte {position} went undetected"
        assert report.problems[0].startswith("line ")
    small_ledger.write_bytes(original)
    assert verify_file(small_ledger).ok


@pytest.mark.parametrize("damage", ["delete middle", "swap", "truncate last", "drop newline",
                                    "insert copy", "crlf", "reformat"])
def test_structural_edits_are_detected(small_ledger: Path, damage: str) -> None:
    lines = small_ledger.read_bytes().splitlines(keepends=True)[1:]  # after the genesis
    genesis = small_ledger.read_bytes().splitlines(keepends=True)[0]
    assert len(lines) == 4
    if damage == "delete middle":
        lines = [lines[0], lines[1], lines[3]]
    elif damage == "swap":
        lines = [lines[0], lines[2], lines[1], lines[3]]
    elif damage == "truncate last":
        lines[-1] = lines[-1][: len(lines[-1]) // 2]
    elif damage == "drop newline":
        lines[-1] = lines[-1][:-1]
    elif damage == "insert copy":
        lines.insert(2, lines[1])
    elif damage == "reformat":  # same JSON value, different bytes
        lines[0] = json.dumps(json.loads(lines[0]), ensure_ascii=False).encode() + b"\n"
    else:
        lines[0] = lines[0][:-1] + b"\r\n"
    small_ledger.write_bytes(genesis + b"".join(lines))
    report = verify_file(small_ledger)
    assert not report.ok
    assert all(problem.startswith(("line ", "the ledger has")) for problem in report.problems)
    with pytest.raises(LedgerError):
        reserve(Ledger(small_ledger, "uci-adult", Budget(1)), 0.01)


def test_torn_last_line_is_reported_with_its_line_number(small_ledger: Path) -> None:
    data = small_ledger.read_bytes()
    small_ledger.write_bytes(data[:-40])
    report = verify_file(small_ledger)
    assert not report.ok
    assert report.entries == 5
    assert report.problems[0] == "line 5: no final newline (a write torn by a crash?)"


def rechain(path: Path, entries: list[dict[str, Any]], *, renumber: bool = True,
            relink: bool = True) -> None:
    """Rewrite a ledger with recomputed hashes (what a forger would do).

    ``renumber`` rewrites seq to 0, 1, ...; ``relink`` rewrites prev to the chain.
    """
    prev, lines = GENESIS, []
    for seq, entry in enumerate(entries):
        if renumber:
            entry["seq"] = seq
        if relink:
            entry["prev"] = prev
        prev = entry_hash(entry)
        lines.append(json.dumps({"entry": entry, "hash": prev}, sort_keys=True,
                                separators=(",", ":"), ensure_ascii=False) + "\n")
    path.write_text("".join(lines), encoding="utf-8")


def test_consistent_rewrite_of_later_hashes_is_caught_by_the_checkpoint(
        small_ledger: Path) -> None:
    """A chain alone cannot see a full rewrite; the keyed checkpoint (or an anchored head) can."""
    head = verify_file(small_ledger).head
    entries = read_entries(small_ledger)
    entries[2]["outputs"] = []
    rechain(small_ledger, entries)
    report = verify_file(small_ledger)
    assert not report.ok
    assert any("differs from its checkpoint" in p for p in report.problems), report.problems
    assert report.head != head
    (small_ledger.parent / "ledger.jsonl.head").unlink()  # the checkpoint deleted too
    report = verify_file(small_ledger, expect_head=head)
    assert not report.ok
    assert any("checkpoint ledger.jsonl.head is missing" in p for p in report.problems)
    assert any(f"expected head {head} is not" in p for p in report.problems)


@pytest.mark.parametrize(("forgery", "problem"), [
    ("orphan finish", "line 3: complete run .* has no earlier reserve"),
    ("finish twice", "line 6: run .* is finished twice"),
    ("finish other dataset", "line 3: complete run .* no earlier reserve for dataset 'bank'"),
    ("changed total", "line 4: total of dataset 'uci-adult' differs"),
    ("overspend", "line 4: dataset 'uci-adult' is overspent"),
    ("missing field", "line 2: field 'epsilon' is missing"),
    ("unknown kind", "line 5: field 'kind'"),
    ("delete, keep seq", "line 3: seq is 3, expected 2"),
    ("delete, keep prev", "line 3: prev does not match"),
    ("second genesis", "line 6: dataset 'uci-adult' has a second genesis"),
    ("other key", "line 1: genesis of dataset 'uci-adult' names another key"),
])
def test_rechained_forgeries_that_break_the_rules_are_detected(
        small_ledger: Path, forgery: str, problem: str) -> None:
    genesis, *entries = read_entries(small_ledger)
    if forgery == "orphan finish":
        entries[1]["run_id"] = "f" * 32
    elif forgery == "finish twice":
        entries.append(dict(entries[1]))
    elif forgery == "finish other dataset":
        entries[1]["dataset"] = "bank"
    elif forgery == "changed total":
        entries[2]["total_epsilon"] = 5.0
    elif forgery == "overspend":
        entries[2]["epsilon"] = 0.8
    elif forgery == "missing field":
        del entries[0]["epsilon"]
    elif forgery == "unknown kind":
        entries[3]["kind"] = "refund"
    elif forgery == "second genesis":
        entries.append(dict(genesis))
    elif forgery == "other key":
        genesis["key_fingerprint"] = "0" * 64
    else:
        del entries[1]
    entries.insert(0, genesis)
    rechain(small_ledger, entries, renumber=forgery != "delete, keep seq",
            relink=forgery != "delete, keep prev")
    report = verify_file(small_ledger)
    assert not report.ok
    assert any(re.match(problem, p) for p in report.problems), report.problems


def test_reserve_on_a_tampered_ledger_is_refused_and_writes_nothing(small_ledger: Path) -> None:
    tampered = small_ledger.read_bytes().replace(b'"epsilon":0.5', b'"epsilon":0.1', 1)
    small_ledger.write_bytes(tampered)
    ledger = Ledger(small_ledger, "uci-adult", Budget(1))
    with pytest.raises(LedgerError, match="refusing to use a ledger that fails "
                                          r"verification: .*ledger\.jsonl: line 4"):
        reserve(ledger, 0.1)
    assert small_ledger.read_bytes() == tampered
    with pytest.raises(LedgerError):
        ledger.summary()


def test_new_ledger_holds_its_genesis_and_is_valid(path: Path) -> None:
    report = verify_file(path)
    (genesis,) = read_entries(path)
    assert (report.ok, report.entries, report.problems) == (True, 1, [])
    assert report.head == entry_hash(genesis) and genesis["prev"] == GENESIS
    assert (genesis["kind"], genesis["dataset"], genesis["total_epsilon"]) == (
        "genesis", "uci-adult", 1.0)
    assert len(genesis["key_fingerprint"]) == 64
    assert key_path(path).read_text().strip() not in path.read_text()  # never the key itself
    summary = opened(path, "d", Budget(2)).summary()
    assert (summary.spent, summary.remaining, summary.runs) == (Budget(0), Budget(2), [])
    assert key_path(path).stat().st_mode & 0o777 == 0o600
    before = path.read_bytes()
    with pytest.raises(LedgerError, match="already has its genesis"):
        init_ledger(path, "uci-adult", Budget(1))
    assert path.read_bytes() == before


def test_missing_ledger_is_refused_not_reset(tmp_path: Path) -> None:
    """A deleted or moved ledger must never read as a fresh, full budget."""
    path = tmp_path / "nowhere.jsonl"
    ledger = Ledger(path, "d", Budget(1))
    for action in (ledger.summary, ledger.verify, lambda: reserve(ledger, 0.1)):
        with pytest.raises(LedgerError, match="ledger init"):
            action()
    assert not path.exists()


def test_input_digest_is_keyed(path: Path, tmp_path: Path) -> None:
    data = tmp_path / "data.csv"
    data.write_text("a,b\n1,2\n")
    keyed = input_digest(path, data)
    assert keyed.startswith("hmac-sha256:")
    assert file_digest(data) not in keyed  # the plain hash of private data is never logged
    assert keyed == input_digest(path, data)
    key_path(path).unlink()
    with pytest.raises(LedgerError, match="key is missing"):
        input_digest(path, data)


# -- accounting -------------------------------------------------------------


def test_ten_tenths_fit_exactly_and_the_eleventh_is_refused(path: Path) -> None:
    ledger = Ledger(path, "uci-adult", Budget(1.0))
    for _ in range(10):
        reserve(ledger, 0.1)
    with pytest.raises(BudgetExhausted):
        reserve(ledger, 0.1)
    summary = ledger.summary()
    assert summary.spent.epsilon == 1
    assert summary.remaining.epsilon == 0
    assert len(read_entries(path)) == 11  # genesis + 10 reserves


def test_exhaustion_message_gives_need_remaining_and_spent(path: Path) -> None:
    ledger = Ledger(path, "uci-adult", Budget(1))
    for _ in range(3):
        reserve(ledger, 0.3)
    with pytest.raises(BudgetExhausted) as info:
        reserve(ledger, 0.3)
    assert str(info.value) == ("budget exhausted for dataset 'uci-adult': this run needs ε=0.3 "
                               "but only ε=0.1 of ε=1 remains (spent ε=0.9)")
    assert info.value.exit_code == 3


def test_delta_is_accounted_too(path: Path) -> None:
    ledger = opened(path, "d", Budget(1, "1e-6"))
    reserve(ledger, 0.1, "6e-7")
    with pytest.raises(BudgetExhausted, match="δ"):
        reserve(ledger, 0.1, "6e-7")
    assert ledger.summary().spent == Budget("0.1", "6e-7")
    pure = opened(path, "pure", Budget(1))
    with pytest.raises(BudgetExhausted):
        reserve(pure, 0.1, "1e-9")


def test_non_decimal_spend_is_rounded_up_never_down(path: Path) -> None:
    ledger = opened(path, "d", Budget(1))
    charged = reserve(ledger, Fraction(1, 3)).budget
    assert charged.epsilon >= Fraction(1, 3)
    assert charged.epsilon - Fraction(1, 3) < Fraction(1, 10**15)
    assert ledger.summary().spent == charged


def test_zero_epsilon_plan_is_rejected(path: Path) -> None:
    before = path.read_bytes()
    with pytest.raises(ValueError, match="positive"):
        reserve(Ledger(path, "uci-adult", Budget(1)), 0)
    assert path.read_bytes() == before  # nothing written


def test_changing_the_declared_total_is_refused(path: Path) -> None:
    reserve(Ledger(path, "uci-adult", Budget(1)), 0.5)
    before = path.read_bytes()
    bigger = Ledger(path, "uci-adult", Budget(2))
    with pytest.raises(LedgerError, match=r"fixed at `dpcli ledger init`.*dpcli ledger raise"):
        reserve(bigger, 0.1)
    with pytest.raises(LedgerError):
        bigger.summary()
    assert path.read_bytes() == before
    reserve(Ledger(path, "uci-adult", Budget("1.0")), 0.5)  # same total written differently


def test_two_datasets_in_one_file_keep_separate_budgets(path: Path) -> None:
    adult = Ledger(path, "uci-adult", Budget(1))
    bank = opened(path, "bank", Budget(2))
    reserve(adult, 1)
    reserve(bank, 1.5)
    with pytest.raises(BudgetExhausted):
        reserve(adult, 0.1)
    reserve(bank, 0.5)
    assert adult.summary().spent == Budget(1)
    assert bank.summary().spent == Budget(2)
    assert [run.epsilon for run in bank.summary().runs] == [Fraction(3, 2), Fraction(1, 2)]
    assert verify_file(path).ok


# -- entries and statuses ---------------------------------------------------


def test_entries_hold_the_audit_fields_and_statuses(small_ledger: Path, tmp_path: Path) -> None:
    genesis, *entries = read_entries(small_ledger)
    assert [e["kind"] for e in entries] == ["reserve", "complete", "reserve", "failed"]
    assert [e["seq"] for e in entries] == [1, 2, 3, 4]
    assert genesis["prev"] == GENESIS
    assert all(b["prev"] == entry_hash(a)
               for a, b in itertools.pairwise([genesis, *entries]))
    first = entries[0]
    assert first["neighbouring"] == NEIGHBOURING_RELATION
    assert first["dpcli_version"] == __version__
    assert first["time"].endswith("Z")
    assert first["arguments"] == {"alpha": 0.5}
    assert first["breakdown"][0]["mechanism"] == "laplace"
    assert (first["epsilon"], first["total_epsilon"]) == (0.25, 1.0)
    assert (entries[2]["spent_epsilon"], entries[2]["remaining_epsilon"]) == (0.75, 0.25)
    assert entries[1]["outputs"] == [{"path": str(tmp_path / "model.json"),
                                      "resolved": os.path.realpath(tmp_path / "model.json"),
                                      "sha256": file_digest(tmp_path / "model.json")}]
    assert entries[3]["reason"] == "DataError: column 'âge' missing"

    ledger = Ledger(small_ledger, "uci-adult", Budget(1))
    open_run = reserve(ledger, 0.125)
    runs = ledger.summary().runs
    assert [r.status for r in runs] == ["complete", "failed", "interrupted"]
    assert runs[0].outputs == entries[1]["outputs"]
    assert runs[2].run_id == open_run.run_id
    assert ledger.summary().remaining == Budget("0.125")


def test_a_run_can_be_finished_only_once(path: Path) -> None:
    ledger = opened(path, "d", Budget(1))
    reservation = reserve(ledger, 0.1)
    ledger.fail(reservation, "interrupted by user")
    with pytest.raises(LedgerError, match="already finished"):
        ledger.complete(reservation, [])
    with pytest.raises(LedgerError):
        Ledger(path, "other", Budget(1)).fail(reservation, "x")
    assert ledger.summary().spent == Budget("0.1")  # no refund for a failed run
    assert ledger.verify().ok


def test_line_separators_inside_strings_do_not_split_lines(path: Path) -> None:
    ledger = opened(path, "d", Budget(1))
    reservation = reserve(ledger, 0.1, note="a\u2028b\u0085c\nd\re")
    ledger.fail(reservation, "x\u2029y")
    assert ledger.verify().ok
    assert read_entries(path)[-2]["arguments"]["note"] == "a\u2028b\u0085c\nd\re"


def test_unserialisable_arguments_write_nothing(path: Path) -> None:
    with pytest.raises(TypeError, match="JSON"):
        reserve(Ledger(path, "uci-adult", Budget(1)), 0.1, where=Path("x"))
    assert verify_file(path).ok
    assert [e["kind"] for e in read_entries(path)] == ["genesis"]


# -- digests ----------------------------------------------------------------


def test_file_digest_of_a_file(tmp_path: Path) -> None:
    target = tmp_path / "data.csv"
    target.write_bytes(b"a,b\n1,2\n")
    assert file_digest(target) == hashlib.sha256(b"a,b\n1,2\n").hexdigest()
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(3 * (1 << 20) + 17))  # spans several 1 MiB chunks
    assert file_digest(big) == hashlib.sha256(big.read_bytes()).hexdigest()


def test_file_digest_of_a_directory_ignores_creation_order(tmp_path: Path) -> None:
    contents = {"part-0.parquet": b"zero", "sub/part-1.parquet": b"one", ".meta": b"m",
                "a/x.parquet": b"x", "b.parquet": b"b"}  # "a/x" sorts before "b"

    def build(folder: Path, order: list[str]) -> str:
        for name in order:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(contents[name])
        return file_digest(folder)

    forward = build(tmp_path / "a", list(contents))
    backward = build(tmp_path / "b", list(reversed(contents)))
    assert forward == backward
    manifest = "".join(f"{name}\0{hashlib.sha256(contents[name]).hexdigest()}\n"
                       for name in sorted(contents))  # documented format, sorted by path
    assert forward == hashlib.sha256(manifest.encode()).hexdigest()
    (tmp_path / "b" / "sub" / "part-1.parquet").write_bytes(b"ONE")
    assert file_digest(tmp_path / "b") != forward
    (tmp_path / "a" / "sub" / "part-1.parquet").rename(tmp_path / "a" / "sub" / "part-2.parquet")
    assert file_digest(tmp_path / "a") != forward


def test_an_unusable_ledger_path_is_a_ledger_error(tmp_path: Path) -> None:
    folder = tmp_path / "ledger.jsonl"
    folder.mkdir()  # a directory where the ledger file should be
    (tmp_path / "ledger.jsonl.key").write_text("ab" * 32)
    ledger = Ledger(folder, "d", Budget(1))
    with pytest.raises(LedgerError, match=r"ledger\.jsonl: cannot use the ledger"):
        reserve(ledger, 0.1)
    with pytest.raises(LedgerError):
        ledger.verify()


def test_input_digest_started_early_is_the_same_and_follows_changes(path: Path,
                                                                    tmp_path: Path) -> None:
    from dpcli.fingerprint import _input_digest, start_input_digest

    data = tmp_path / "early.csv"
    data.write_bytes(b"a,b\n" + b"1,2\n" * 100_000)
    start_input_digest(path, data)  # in a thread, beside the validation pass
    assert input_digest(path, data) == _input_digest(path, data)
    start_input_digest(path, data)  # already known: not computed again
    assert input_digest(path, data) == _input_digest(path, data)
    before = input_digest(path, data)
    data.write_bytes(b"a,b\n" + b"1,3\n" * 100_000)  # same size, new bytes, new time
    os.utime(data, ns=(1, 10**18))
    assert input_digest(path, data) == _input_digest(path, data) != before
    key_path(path).unlink()  # a missing key is an error whenever the digest is asked for
    start_input_digest(path, data)
    with pytest.raises(LedgerError, match="key is missing"):
        input_digest(path, data)


# -- aborted runs (docs/design.md, rule 5 "aborted runs") ------------------------------


def test_an_aborted_run_gives_back_exactly_its_charge(path: Path) -> None:
    """reserve → aborted: the remaining budget is what it was before the reserve, in the
    O(1) checkpoint's figures and in a full re-verification alike; only once."""
    ledger = Ledger(path, "uci-adult", Budget(1))
    kept = reserve(ledger, 0.25)
    ledger.fail(kept, "Terminated")  # a failed run keeps its charge
    before = ledger.summary(runs=False).remaining
    assert before == Budget("0.75")
    run = reserve(ledger, "0.3")
    assert ledger.summary(runs=False).remaining == Budget("0.45")
    ledger.abort(run, "DataError")
    assert ledger.summary(runs=False).remaining == before           # from the checkpoint
    (path.parent / "ledger.jsonl.head").unlink()
    report = verify_file(path)
    assert any("checkpoint" in p for p in report.problems)   # (a missing checkpoint says so)
    *_, last = read_entries(path)
    assert (last["kind"], last["epsilon"], last["delta"]) == ("aborted", 0.3, 0.0)
    assert last["reason"] == "DataError"


def test_aborted_status_and_full_rescan_agree(path: Path) -> None:
    ledger = Ledger(path, "uci-adult", Budget(1))
    run = reserve(ledger, 0.5)
    ledger.abort(run, "DataError")
    with pytest.raises(LedgerError, match="already finished"):
        ledger.abort(run, "DataError")
    with pytest.raises(LedgerError, match="already finished"):
        ledger.complete(run, [])
    assert [r.status for r in ledger.summary().runs] == ["aborted"]
    # any write outside dpcli forces a full scan: it must give the same figures
    with path.open("a"):
        os.utime(path)
    os.chmod(path, 0o644)  # changes ctime: the checkpoint's stamp no longer matches
    assert ledger.summary(runs=False).remaining == Budget(1)
    assert ledger.verify().ok
    # the whole budget can now be spent: nothing of the aborted run counts
    reserve(ledger, 1)
    with pytest.raises(BudgetExhausted):
        reserve(ledger, 0.001)


@pytest.mark.parametrize(("forgery", "problem"), [
    ("other amount", "line 3: aborted run .* gives back another amount"),
    ("abort a completed run", "line 4: run .* is finished twice"),
    ("orphan abort", "line 3: aborted run .* has no earlier reserve"),
])
def test_forged_aborts_are_detected(path: Path, tmp_path: Path, forgery: str,
                                    problem: str) -> None:
    ledger = Ledger(path, "uci-adult", Budget(1))
    run = reserve(ledger, 0.5)
    if forgery == "abort a completed run":
        ledger.complete(run, [])
    else:
        ledger.abort(run, "DataError")
    genesis, *entries = read_entries(path)
    if forgery == "other amount":
        entries[1]["epsilon"] = 0.75
    elif forgery == "abort a completed run":
        entries.append(dict(entries[1], kind="aborted", reason="DataError", epsilon=0.5,
                            delta=0.0))
        del entries[-1]["outputs"]
    else:
        entries[1]["run_id"] = "f" * 32
    rechain(path, [genesis, *entries])
    report = verify_file(path)
    assert not report.ok
    assert any(re.match(problem, p) for p in report.problems), report.problems


def test_an_abort_after_a_checkpoint_without_amounts_still_gives_back(path: Path) -> None:
    """A checkpoint written by an earlier dpcli lists open runs without their amounts: the
    aborted entry's own amount is given back then (a full verification checks it)."""
    from dpcli.ledger import _Fold, _read_checkpoint, read_key

    ledger = Ledger(path, "uci-adult", Budget(1))
    run = reserve(ledger, 0.25)
    key = read_key(path)
    body = _read_checkpoint(path, key)
    assert body is not None and len(body["open"][run.run_id]) == 5
    body["open"] = {r: v[:3] for r, v in body["open"].items()}   # the earlier format
    fold = _Fold.from_json(body, key)
    fold._apply({"kind": "aborted", "dataset": "uci-adult", "run_id": run.run_id,
                 "epsilon": 0.25, "delta": 0.0, "reason": "DataError"}, "0" * 64, 2, "")
    assert not fold.problems
    assert fold.datasets["uci-adult"].spent == Budget(0)


def test_the_checkpoints_input_digests_match_whole_digests_only() -> None:
    """The checkpoint keeps each dataset's short input digests as one text, searched without
    splitting it: a match across two digests must not count."""
    from dpcli.ledger import _Inputs

    seen = _Inputs("0123456789abcdef" + "fedcba9876543210")
    assert seen.has("fedcba9876543210") and seen.has("0123456789abcdef")
    assert not seen.has("89abcdeffedcba98")  # the tail of one and the head of the next
    seen.add("89abcdeffedcba98")
    seen.add("fedcba9876543210")  # already there: kept once
    assert seen.has("89abcdeffedcba98")
    assert seen.text() == "0123456789abcdef" + "fedcba9876543210" + "89abcdeffedcba98"


def test_a_copied_ledger_refuses_to_spend_until_it_is_adopted(small_ledger: Path,
                                                                tmp_path: Path) -> None:
    """A copy (its checkpoint written for another file) is a second account of one budget:
    every reserve and raise on it is refused, nothing written, until ``adopt_moved`` records
    that it is the ledger now; the original is untouched throughout (tester 13 spent ε 7
    twice against a total of 10 when the copy only warned once)."""
    import shutil

    from dpcli.ledger import adopt_moved, companion_paths, raise_total

    copy = tmp_path / "copy"
    copy.mkdir()
    for path in companion_paths(small_ledger):
        if path.is_file():
            shutil.copy2(path, copy / path.name)
    moved = copy / small_ledger.name
    ledger = Ledger(moved, "uci-adult", Budget(1))
    before = moved.read_bytes()
    for _ in range(2):   # refused every time, not only the first
        with pytest.raises(LedgerError, match="checkpoint was written for"):
            reserve(ledger, 0.1)
    with pytest.raises(LedgerError, match="checkpoint was written for"):
        raise_total(moved, "uci-adult", 5)
    assert moved.read_bytes() == before
    assert ledger.summary(runs=False).relocated and verify_file(moved).relocated
    assert verify_file(moved).ok   # intact: a copy is not damage
    with pytest.raises(LedgerError, match="still at"):   # the original is there: refused
        adopt_moved(moved, "uci-adult")
    away = small_ledger.with_name("away.jsonl")
    small_ledger.rename(away)   # the original gone from its place: the copy may be adopted
    assert adopt_moved(moved, "uci-adult")
    assert not adopt_moved(moved, "uci-adult")   # once only: nothing more to record
    assert not ledger.summary(runs=False).relocated and not verify_file(moved).relocated
    reserve(ledger, 0.1)
    repairs = verify_file(moved).repairs
    assert repairs[-1]["moved"]["inode"] == moved.stat().st_ino
    away.rename(small_ledger)
    original = Ledger(small_ledger, "uci-adult", Budget(1))
    assert not original.summary(runs=False).relocated
    reserve(original, 0.1)


def _copied(small_ledger: Path, tmp_path: Path) -> Path:
    import shutil

    from dpcli.ledger import companion_paths

    copy = tmp_path / "copy"
    copy.mkdir()
    for path in companion_paths(small_ledger):
        if path.is_file():
            shutil.copy2(path, copy / path.name)
    return copy / small_ledger.name


def test_no_other_write_adopts_a_copy(small_ledger: Path, tmp_path: Path) -> None:
    """Review: a genesis of another dataset, a torn line's repair or a run's end on a copy
    rewrote the checkpoint for the copy, which then spent without a word. Every write keeps
    the original's identity in the checkpoint; only adopt_moved gives the copy its own."""
    from dpcli.ledger import repair_ledger

    moved = _copied(small_ledger, tmp_path)
    assert init_ledger(moved, "other", Budget(2)) == "added"
    with pytest.raises(LedgerError, match="copied"):
        reserve(Ledger(moved, "uci-adult", Budget(1)), 0.1)
    with moved.open("ab") as fh:   # a copy taken mid-write: a torn last line
        fh.write(b'{"entry": {"kind"')
    assert repair_ledger(moved, "uci-adult", lambda torn: True) is not None
    with pytest.raises(LedgerError, match="copied"):
        reserve(Ledger(moved, "other", Budget(2)), 0.1)
    assert verify_file(moved).relocated and verify_file(moved).ok


def test_a_snapshot_with_the_same_inode_on_another_device_is_a_copy(small_ledger: Path,
                                                                     tmp_path: Path) -> None:
    """Review: a file system snapshot or clone keeps the inode and changes the device; the
    inode alone let such a copy spend. Simulated by a checkpoint stamped with another device
    (its MAC recomputed with the key, as the snapshot's own would hold)."""
    import hashlib
    import hmac
    import json

    from dpcli.ledger import canonical, head_path, read_key

    head = head_path(small_ledger)
    body = json.loads(head.read_text())
    body.pop("mac")
    body["stamp"][0] += 1
    body["mac"] = hmac.new(read_key(small_ledger), canonical(body).encode(),
                           hashlib.sha256).hexdigest()
    head.write_text(canonical(body) + "\n")
    with pytest.raises(LedgerError, match="copied"):
        reserve(Ledger(small_ledger, "uci-adult", Budget(1)), 0.1)


def test_a_copy_without_its_checkpoint_stays_a_copy_through_trust_chain(
        small_ledger: Path, tmp_path: Path) -> None:
    """Tester 14: the ledger and its key copied without `.head` (a natural backup of "the
    account"), then `repair --trust-chain`, spent as a second account. The genesis records
    the file; a rebuilt checkpoint keeps that identity, so the copy stays refused until
    adopt_moved. On the original itself the rebuild changes nothing."""
    import shutil

    from dpcli.ledger import adopt_moved, head_path, trust_chain

    copy = tmp_path / "copy"
    copy.mkdir()
    moved = copy / small_ledger.name
    shutil.copy2(small_ledger, moved)
    shutil.copy2(key_path(small_ledger), key_path(moved))
    done = trust_chain(moved, "uci-adult", lambda chain: True)
    assert done is not None and done.relocated
    with pytest.raises(LedgerError, match="checkpoint was written for"):
        reserve(Ledger(moved, "uci-adult", Budget(1)), 0.1)
    with pytest.raises(LedgerError, match="still at"):
        adopt_moved(moved, "uci-adult")
    away = small_ledger.with_name("away.jsonl")
    small_ledger.rename(away)
    assert adopt_moved(moved, "uci-adult")
    reserve(Ledger(moved, "uci-adult", Budget(1)), 0.1)
    away.rename(small_ledger)
    head_path(small_ledger).unlink()   # the original's own checkpoint lost: rebuilt as itself
    again = trust_chain(small_ledger, "uci-adult", lambda chain: True)
    assert again is not None and not again.relocated
    reserve(Ledger(small_ledger, "uci-adult", Budget(1)), 0.1)


def test_a_move_on_its_file_system_is_recorded_by_the_next_spend(small_ledger: Path,
                                                                  tmp_path: Path) -> None:
    """Tester 15: the ledger's folder renamed (the same file: it spends on), then copied; the
    chain still named the old path, so `repair --moved` on the copy found nothing there and
    adopted it: two accounts of one budget. The first spend after a move records the file
    where it is now, and adoption of a copy is refused while the original is there."""

    from dpcli.ledger import adopt_moved, raise_total

    folder = tmp_path / "renamed"
    small_ledger.parent.rename(folder)
    here = folder / small_ledger.name
    reserve(Ledger(here, "uci-adult", Budget(1)), 0.1)   # accepted: the same file
    last = [json.loads(line)["entry"] for line in here.read_text().splitlines()][-1]
    assert last["kind"] == "reserve" and last["file"]["path"] == str(here.resolve())
    assert last["file"]["inode"] == here.stat().st_ino
    reserve(Ledger(here, "uci-adult", Budget(1)), 0.05)   # recorded once, not every run
    assert "file" not in json.loads(here.read_text().splitlines()[-1])["entry"]
    again = tmp_path / "again"   # moved once more, then a raise is its first write
    folder.rename(again)
    here = again / small_ledger.name
    raise_total(here, "uci-adult", 2)
    last = json.loads(here.read_text().splitlines()[-1])["entry"]
    assert last["kind"] == "raise" and last["file"]["path"] == str(here.resolve())
    with pytest.raises(LedgerError, match=f"still at {here.resolve()}"):
        adopt_moved(_copied(here, tmp_path), "uci-adult")
    assert verify_file(here).ok


def test_a_copy_is_refused_while_the_original_is_at_any_path_the_chain_recorded(
        small_ledger: Path, tmp_path: Path) -> None:
    """Review: a spend through a temporary path (a folder renamed and renamed back, a bind
    mount) replaced the one path `repair --moved` checked, so a copy taken afterwards was
    adopted while the original was back in use. Every path recorded for the file counts,
    and a path already recorded is not recorded again (a bind mount's back and forth)."""

    from dpcli.ledger import adopt_moved

    folder = small_ledger.parent
    away = tmp_path / "away"
    folder.rename(away)
    reserve(Ledger(away / small_ledger.name, "uci-adult", Budget(1)), 0.05)  # records away
    away.rename(folder)
    reserve(Ledger(small_ledger, "uci-adult", Budget(1)), 0.05)   # home: recorded already
    assert "file" not in json.loads(small_ledger.read_text().splitlines()[-1])["entry"]
    with pytest.raises(LedgerError, match=f"still at {small_ledger.resolve()}"):
        adopt_moved(_copied(small_ledger, tmp_path), "uci-adult")


def test_a_fifo_in_place_of_the_ledger_or_its_checkpoint_is_refused_not_waited_on(
        path: Path) -> None:
    """Testers 16 and 17: a FIFO at the ledger's path (or its .head's) hung `ledger show`,
    `verify` and every spend in open(); it is refused as not a regular file."""
    from dpcli.ledger import head_path

    head = head_path(path)
    head.unlink()
    os.mkfifo(head)
    with pytest.raises(LedgerError, match="not a regular file"):
        Ledger(path, "uci-adult", Budget(1)).summary()
    head.unlink()
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(LedgerError, match="not a regular file"):
        verify_file(path)


def test_without_birth_times_a_new_file_on_a_reused_inode_is_told_by_its_generation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tester 17: on ext4 with 128-byte inodes (no birth time) a `git checkout` of the
    ledger and its checkpoint reused the inode, and the restored, smaller spend was taken as
    the ledger. There the inode's generation number marks the file: a new file on the same
    inode number (simulated: its generation changed) is refused like a copy."""
    from dpcli import ledger as lg

    monkeypatch.setattr(lg, "_btime", lambda fd: 0)
    monkeypatch.setattr(lg, "_generation", lambda fd: 5)
    ledger = tmp_path / "ext4" / "ledger.jsonl"
    init_ledger(ledger, "uci-adult", Budget(1))              # genesis and checkpoint: 5
    assert json.loads(ledger.read_text().splitlines()[0])["entry"]["file"]["birth_ns"] == (
        lg._GENERATION_MARK | 5)
    reserve(Ledger(ledger, "uci-adult", Budget(1)), 0.05)    # the same file: fine
    monkeypatch.setattr(lg, "_generation", lambda fd: 7)      # another file, same inode
    with pytest.raises(LedgerError, match="checkpoint was written for"):
        reserve(Ledger(ledger, "uci-adult", Budget(1)), 0.05)


def test_a_chain_without_its_files_identity_records_it_at_the_first_spend(
        small_ledger: Path, tmp_path: Path) -> None:
    """A ledger from before the genesis named its file: its first spend records it, so a
    later copy without its checkpoint stays a copy through `repair --trust-chain`."""
    import shutil

    from dpcli.ledger import head_path, trust_chain

    entries = [json.loads(line)["entry"] for line in small_ledger.read_text().splitlines()]
    entries[0].pop("file")   # as an earlier dpcli wrote it: rechained, checkpoint rebuilt
    rechain(small_ledger, entries)
    head_path(small_ledger).unlink()
    assert trust_chain(small_ledger, "uci-adult", lambda chain: True) is not None
    assert verify_file(small_ledger).ok
    reserve(Ledger(small_ledger, "uci-adult", Budget(1)), 0.1)
    last = json.loads(small_ledger.read_text().splitlines()[-1])["entry"]
    assert last["file"]["inode"] == small_ledger.stat().st_ino
    copy = tmp_path / "copy"
    copy.mkdir()
    moved = copy / small_ledger.name
    shutil.copy2(small_ledger, moved)
    shutil.copy2(key_path(small_ledger), key_path(moved))
    done = trust_chain(moved, "uci-adult", lambda chain: True)
    assert done is not None and done.relocated
    with pytest.raises(LedgerError, match="checkpoint was written for"):
        reserve(Ledger(moved, "uci-adult", Budget(1)), 0.1)


def test_a_run_in_progress_shows_as_running_and_a_dead_one_as_interrupted(path: Path) -> None:
    """Both have a reserve entry and no end; the live one holds its run lock (dpcli.reuse.
    running) from its reservation to its record. Before, a 14-minute train-brc in progress
    showed as 'interrupted', inviting an operator to run it again and spend twice."""
    from dpcli.reuse import run_lock_path, running

    ledger = opened(path, "d", Budget(1))
    reservation = reserve(ledger, 0.1)
    with running(ledger.file, reservation.run_id):
        assert [r.status for r in ledger.summary().runs] == ["running"]
        assert run_lock_path(ledger.file, reservation.run_id).exists()
    assert [r.status for r in ledger.summary().runs] == ["interrupted"]
    assert not run_lock_path(ledger.file, reservation.run_id).exists()
    with running(ledger.file, reservation.run_id):
        ledger.complete(reservation, [])
        assert [r.status for r in ledger.summary().runs] == ["complete"]


def test_a_torn_line_is_not_cut_without_the_checkpoint(small_ledger: Path) -> None:
    """Review 12: repair cut the torn line, then failed on the missing checkpoint; without it
    nothing shows the line was never counted. Refused before anything is cut."""
    from dpcli.ledger import head_path, repair_ledger

    head_path(small_ledger).unlink()
    with small_ledger.open("ab") as fh:
        fh.write(b'{"entry":{"kind":"res')
    before = small_ledger.read_bytes()
    with pytest.raises(LedgerError, match=r"checkpoint .* is missing"):
        repair_ledger(small_ledger, "uci-adult", lambda torn: True)
    assert small_ledger.read_bytes() == before


def test_a_file_born_again_under_the_same_inode_is_a_copy(small_ledger: Path) -> None:
    """Review 12: a backup restored over a deleted original can get its inode number back
    (and an overlay copy-up keeps the lower file's): the birth time, where the file system
    keeps one, tells the two files apart. Simulated by a checkpoint naming another birth."""
    import hashlib
    import hmac
    import json

    from dpcli.ledger import _birth_ns, canonical, head_path, read_key

    fd = os.open(small_ledger, os.O_RDONLY)
    try:
        if not _birth_ns(fd):
            pytest.skip("this file system keeps no birth time")
    finally:
        os.close(fd)
    head = head_path(small_ledger)
    body = json.loads(head.read_text())
    assert len(body["stamp"]) == 5   # device, inode, size, ctime, birth
    body.pop("mac")
    body["stamp"][4] -= 1
    body["mac"] = hmac.new(read_key(small_ledger), canonical(body).encode(),
                           hashlib.sha256).hexdigest()
    head.write_text(canonical(body) + "\n")
    with pytest.raises(LedgerError, match="checkpoint was written for"):
        reserve(Ledger(small_ledger, "uci-adult", Budget(1)), 0.1)
