"""The privacy-budget ledger: an append-only, hash-chained audit log.

One JSON Lines file (its path comes from the spec) records every run against
one or more datasets; budgets are kept per dataset id. Each line is
``{"entry": {...}, "hash": "<sha256 hex>"}`` written canonically (sorted keys,
no spaces, UTF-8) where ``hash`` is the SHA-256 of the canonical form of
``entry`` and every entry holds the hash of the previous line's entry in
``prev`` (64 zeros for the first line).

A run writes two lines: ``reserve`` (before it touches any private value: the
planned ε/δ, checked against what remains) and later ``complete`` or
``failed``. Both are appended under an exclusive ``fcntl.flock`` on the
sidecar file ``<ledger>.lock`` and fsynced before the call returns, so
concurrent runs on one machine (or on a file system with working ``flock``)
can never together overspend. Nothing is ever refunded: the spent budget is
the exact sum of ε (and δ) over *all* reserve entries of the dataset,
including runs that failed or were killed.

Amounts are stored as JSON numbers and read back with ``budget.exact`` (the
shortest decimal the float prints as). A planned spend that is not exactly
such a decimal (e.g. 1/3) is rounded *up* to the next float before it is
recorded and checked, and a lifetime total is rounded *down*, so the ledger
never undercharges. The ``spent_*`` and ``remaining_*`` fields of a reserve
entry are informational; accounting is always recomputed from per-run amounts.

What the hash chain detects, and what it does not
-------------------------------------------------
``verify`` re-serialises every line and rejects any byte that differs from the
canonical form, recomputes every hash and follows the ``prev`` chain. So any
edit, insertion, reordering or removal of an entry is detected -- except

* truncating the tail: removing the last k lines leaves a valid, shorter
  chain (a run "un-spent");
* a consistent rewrite: whoever can write the file can also recompute all
  later hashes (SHA-256 is not a signature; there is no secret key).

Both are caught only by comparing the head hash that ``verify`` reports with
a copy kept elsewhere (a custodian's notebook, a ticket, another machine).
The chain is tamper-evidence against accidents and casual edits, not
protection against someone with write access who wants to hide a run.

A ledger that fails verification (including a last line torn by a crash
mid-write, i.e. without a final newline) is never charged against: a human
must look at it and repair it. ``reserve`` returns only after its line is on
disk, so a torn reserve line belongs to a run that never touched the data.
The lock file is never deleted (deleting lock files reintroduces races).
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import math
import os
import secrets
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol

from dpcli import NEIGHBOURING_RELATION, __version__
from dpcli.budget import ZERO, Budget, exact
from dpcli.errors import BudgetExhausted, LedgerError

GENESIS = "0" * 64
KINDS = ("reserve", "complete", "failed")
_CHUNK = 1 << 20
_MAX_REASON = 500


class PlanLike(Protocol):
    """What the ledger needs from a composition plan."""

    @property
    def total(self) -> Budget: ...

    def to_json(self) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class Reservation:
    """Proof that a run's budget was charged: pass it to ``complete`` or ``fail``."""

    run_id: str
    dataset: str
    budget: Budget  # the amount recorded (planned spend, rounded up to a float if needed)
    entry_hash: str
    seq: int
    remaining: Budget  # what is left of the dataset's budget after this charge


@dataclass(frozen=True)
class RunView:
    """One run of a dataset as seen in the ledger."""

    run_id: str
    time: str
    command: str
    epsilon: Fraction
    delta: Fraction
    status: str  # "complete" | "failed" | "interrupted" (reserved, never finished)
    seeded: bool
    outputs: list[dict[str, str]] = field(default_factory=list)
    neighbouring: str = NEIGHBOURING_RELATION


@dataclass(frozen=True)
class LedgerSummary:
    """A dataset's budget as recorded in the ledger."""

    dataset: str
    total: Budget
    spent: Budget
    remaining: Budget
    runs: list[RunView]


@dataclass(frozen=True)
class VerifyReport:
    """Result of checking a whole ledger file (all datasets)."""

    ok: bool
    entries: int  # number of lines read (including bad ones)
    problems: list[str]  # each starts with "line N:" (1-based)
    head: str  # hash of the last line's entry (GENESIS for an empty ledger)


def canonical(obj: Any) -> str:
    """The one serialisation the ledger writes and accepts."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def entry_hash(entry: dict[str, Any]) -> str:
    """SHA-256 hex of the canonical serialisation of ``entry``."""
    return hashlib.sha256(canonical(entry).encode("utf-8", "surrogatepass")).hexdigest()


def file_digest(path: Path) -> str:
    """SHA-256 hex of a file's bytes, or of a directory's files.

    For a directory the digest covers every regular file below it (hidden ones
    too; symlinked directories are not followed), in sorted order of their
    relative POSIX paths: it hashes the lines ``"<relative path>\\0<sha256>\\n"``,
    so it changes when any file's name or content changes and does not depend
    on the order in which files were created. Files are read in 1 MiB chunks.
    """
    path = Path(path)
    if not path.is_dir():
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
        return digest.hexdigest()
    files: list[tuple[str, Path]] = []
    for folder, _dirs, names in os.walk(path):
        for name in names:
            full = Path(folder, name)
            if full.is_file():
                files.append((full.relative_to(path).as_posix(), full))
    digest = hashlib.sha256()
    for rel, full in sorted(files):
        digest.update(f"{rel}\0{file_digest(full)}\n".encode())
    return digest.hexdigest()


def key_path(path: Path) -> Path:
    """Where the secret key of a ledger's input digests lives (beside the ledger, mode 0600)."""
    path = Path(path)
    return path.with_name(path.name + ".key")


def companion_paths(path: Path) -> tuple[Path, ...]:
    """The ledger file and every file kept beside it (key, lock): no output may replace one."""
    path = Path(path)
    return (path, key_path(path), path.with_name(path.name + ".lock"))


def init_ledger(path: Path) -> bool:
    """Create an empty ledger and its digest key; False (nothing changed) if it exists.

    Spending runs refuse a missing ledger rather than start one, so that a
    moved spec or a deleted file can never silently reset a dataset's budget.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        return False
    key = key_path(path)
    if not key.exists():
        _create_exclusive(key, secrets.token_hex(32).encode(), 0o600)
    try:
        _create_exclusive(path, b"", 0o644)
    except FileExistsError:  # another process initialised it first
        return False
    return True


def _create_exclusive(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    with suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def listing_digest(files: Iterable[tuple[str, int, int]]) -> str:
    """SHA-256 hex of a file listing: (path, size in bytes, modification time in ms).

    Hashes the lines ``"<path>\\0<size>\\0<mtime>\\n"`` in sorted order, so it
    changes when a file is added, removed, renamed, resized or rewritten
    (as far as its modification time shows) — but not when bytes change in
    place with size and time kept: it is a digest of the listing, not of the
    contents.
    """
    digest = hashlib.sha256()
    for path, size, mtime in sorted((str(p), int(s), int(m)) for p, s, m in files):
        digest.update(f"{path}\0{size}\0{mtime}\n".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


#: prefix of an input digest computed from a file listing instead of the bytes
LISTING_DIGEST = "hmac-sha256-of-listing:"


def input_digest(ledger_path: Path, data: Path | str) -> str:
    """Keyed digest (HMAC-SHA-256) of a private input file, for the audit log.

    A plain hash of private data lets anyone who knows all records but one
    test guesses of that record against the log; the key, kept beside the
    ledger and readable only by the custodian, prevents it.

    A local file or folder is digested by its bytes (``hmac-sha256:<hex>``).
    A remote URI read by the Spark engine (``s3a://…``, ``hdfs://…``) would
    have to be downloaded in full for that, so it is digested by its Hadoop
    file listing instead (:func:`listing_digest` of every file the engine
    reads), marked ``hmac-sha256-of-listing:<hex>``: that records which
    files of which size and age were read, not their bytes.
    """
    key_file = key_path(ledger_path)
    try:
        key = key_file.read_bytes().strip()
    except OSError:
        raise LedgerError(f"{key_file}: the ledger's digest key is missing or unreadable; "
                          "restore it from the custodian's backup") from None
    from dpcli.data.location import is_remote, local_path
    from dpcli.stats.spark import input_listing

    if is_remote(data):
        listed = listing_digest(input_listing(data))
        mac = hmac.new(key, f"listing:{listed}".encode(), hashlib.sha256).hexdigest()
        return f"{LISTING_DIGEST}{mac}"
    mac = hmac.new(key, file_digest(local_path(data)).encode(), hashlib.sha256).hexdigest()
    return f"hmac-sha256:{mac}"


def read_entries(path: Path) -> list[dict[str, Any]]:
    """The entries of a ledger file in order ([] when the file does not exist).

    Checks only that each line is a JSON object with an ``entry`` object; it
    does not check hashes -- use ``verify_file`` for that. Raises LedgerError
    naming the file and line when a line cannot be read.
    """
    path = Path(path)
    if not path.exists():
        return []
    with _locked(path, exclusive=False):
        data = path.read_bytes()
    entries = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw:
            continue
        try:
            entries.append(_parse(raw)[0])
        except ValueError as exc:
            raise LedgerError(f"{path}: line {number}: {exc}") from None
    return entries


def verify_file(path: Path) -> VerifyReport:
    """Check a whole ledger file; a missing file is an empty, valid ledger.

    Bad content never raises: every problem is reported with its line number.
    Raises LedgerError only when the file cannot be read at all.
    """
    path = Path(path)
    if not path.exists():
        return VerifyReport(True, 0, [], GENESIS)
    with _locked(path, exclusive=False):
        return _scan(path.read_bytes())[1]


class Ledger:
    """The budget of one dataset, kept in a (possibly shared) ledger file."""

    def __init__(self, path: Path, dataset: str, total: Budget) -> None:
        if not isinstance(dataset, str) or not dataset:
            raise ValueError("a dataset id must be a non-empty string")
        if total.epsilon <= 0:
            raise ValueError("a dataset's total ε must be positive")
        self.path = Path(path)
        self.dataset = dataset
        self.total = total
        # The total as recorded (rounded down to a float if it is not one already).
        self._recorded_total = Budget(_amount(total.epsilon, up=False),
                                      _amount(total.delta, up=False))

    def reserve(self, plan: PlanLike, *, command: str, arguments: dict[str, Any],
                spec_digest: str, input_file: str | None, input_digest: str | None,
                seeded: bool, neighbouring: str = NEIGHBOURING_RELATION) -> Reservation:
        """Charge ``plan.total`` to the dataset, or refuse.

        ``neighbouring`` names the relation the run's guarantee holds under
        (replace-one unless the command says otherwise, e.g. train-brc with
        public features).

        Guarantees: on return the reserve line is fsynced and the charge fits
        in what remained; no two processes can both succeed when together they
        would overspend. Raises BudgetExhausted (nothing written) when the
        planned spend does not fit, LedgerError (nothing written) when the
        file fails verification or the spec's total differs from the recorded
        one, ValueError when the planned ε is not positive.
        """
        self.require_initialised()
        planned = plan.total
        if planned.epsilon <= 0:
            raise ValueError("a run's planned ε must be positive")
        charge_eps, charge_dlt = _amount(planned.epsilon, up=True), _amount(planned.delta, up=True)
        charge = Budget(charge_eps, charge_dlt)
        breakdown = plan.to_json()
        with _locked(self.path, exclusive=True):
            entries, head = self._read_verified("refusing to charge against")
            total, spent = self._account(entries)
            remaining = total - spent
            if not charge.fits_in(remaining):
                raise BudgetExhausted(
                    f"budget exhausted for dataset {self.dataset!r}: this run needs {charge} "
                    f"but only {remaining} of {total} remains (spent {spent})")
            spent_after, remaining_after = spent + charge, total - (spent + charge)
            run_id = uuid.uuid4().hex
            entry = self._common("reserve", run_id, len(entries), head) | {
                "command": command,
                "arguments": arguments,
                "spec_digest": spec_digest,
                "input_file": input_file,
                "input_digest": input_digest,
                "neighbouring": neighbouring,
                "breakdown": breakdown,
                "epsilon": charge_eps,
                "delta": charge_dlt,
                "total_epsilon": float(total.epsilon),
                "total_delta": float(total.delta),
                "spent_epsilon": float(spent_after.epsilon),
                "spent_delta": float(spent_after.delta),
                "remaining_epsilon": float(remaining_after.epsilon),
                "remaining_delta": float(remaining_after.delta),
                "seeded": bool(seeded),
            }
            digest = self._append(entry)
        return Reservation(run_id, self.dataset, charge, digest, len(entries), remaining_after)

    def complete(self, reservation: Reservation, outputs: Sequence[Path],
                 summary: dict[str, Any] | None = None) -> None:
        """Record that a reserved run finished, with the SHA-256 of each output.

        Guarantees: on return the line is fsynced. Raises LedgerError when the
        file fails verification, or the reservation is not in it or is
        already finished.
        """
        extra: dict[str, Any] = {
            "outputs": [{"path": str(p), "sha256": file_digest(Path(p))} for p in outputs]}
        if summary is not None:
            extra["summary"] = summary
        self._finish(reservation, "complete", extra)

    def fail(self, reservation: Reservation, reason: str) -> None:
        """Record that a reserved run failed; its charge is kept (no refund).

        ``reason`` must not contain private values (pass e.g. the error class
        and a message that names files/columns only); it is cut to 500 chars.
        Same guarantees and errors as ``complete``.
        """
        if len(reason) > _MAX_REASON:
            reason = reason[: _MAX_REASON - 1] + "…"
        self._finish(reservation, "failed", {"reason": reason})

    def summary(self) -> LedgerSummary:
        """Total, spent, remaining and the runs of this dataset.

        Raises LedgerError when the file fails verification or the spec's
        total differs from the recorded one.
        """
        self.require_initialised()
        with _locked(self.path, exclusive=False):
            entries, _head = self._read_verified("refusing to report a budget from")
        total, spent = self._account(entries)
        finished = {e["run_id"]: e for e in entries
                    if e["kind"] != "reserve" and e["dataset"] == self.dataset}
        runs = []
        for e in entries:
            if e["kind"] != "reserve" or e["dataset"] != self.dataset:
                continue
            end = finished.get(e["run_id"])
            runs.append(RunView(
                run_id=e["run_id"], time=e["time"], command=e["command"],
                epsilon=exact(e["epsilon"]), delta=exact(e["delta"]),
                status=end["kind"] if end else "interrupted", seeded=e["seeded"],
                outputs=list(end.get("outputs", [])) if end else [],
                neighbouring=e.get("neighbouring", NEIGHBOURING_RELATION)))
        return LedgerSummary(self.dataset, total, spent, total - spent, runs)

    def verify(self) -> VerifyReport:
        """Check the whole file (every dataset in it); see ``verify_file``."""
        self.require_initialised()
        return verify_file(self.path)

    def require_initialised(self) -> None:
        """LedgerError unless the ledger file exists (see :func:`init_ledger`)."""
        if not self.path.exists():
            raise LedgerError(
                f"{self.path}: no ledger here. If dataset {self.dataset!r} has never been "
                "released, create it with `dpcli ledger init --spec SPEC`; if it has, the "
                "ledger was moved or deleted: restore it before spending anything")

    # -- internals ---------------------------------------------------------

    def _read_verified(self, refusal: str) -> tuple[list[dict[str, Any]], str]:
        """Entries and head hash of the file; LedgerError if it fails verification.

        Must be called under the lock.
        """
        data = self.path.read_bytes() if self.path.exists() else b""
        entries, report = _scan(data)
        if not report.ok:
            more = len(report.problems) - 1
            raise LedgerError(
                f"{refusal} a ledger that fails verification: {self.path}: {report.problems[0]}"
                + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")
                + "; run `dpcli ledger verify`")
        return entries, report.head

    def _account(self, entries: list[dict[str, Any]]) -> tuple[Budget, Budget]:
        """(recorded total, exact spent) of this dataset; LedgerError if the total changed."""
        reserves = [e for e in entries if e["kind"] == "reserve" and e["dataset"] == self.dataset]
        total = self._recorded_total
        if reserves:
            first = reserves[0]
            recorded = Budget(first["total_epsilon"], first["total_delta"])
            if recorded != total:
                raise LedgerError(
                    f"{self.path}: the spec declares a total of {self.total} for dataset "
                    f"{self.dataset!r} but its first run recorded {recorded}; a dataset's "
                    "lifetime budget cannot be changed after its first run")
        spent = sum((Budget(e["epsilon"], e["delta"]) for e in reserves), ZERO)
        return total, spent

    def _common(self, kind: str, run_id: str, seq: int, prev: str) -> dict[str, Any]:
        return {"seq": seq, "kind": kind, "run_id": run_id, "time": _now(),
                "dpcli_version": __version__, "dataset": self.dataset, "prev": prev}

    def _finish(self, reservation: Reservation, kind: str, extra: dict[str, Any]) -> None:
        if reservation.dataset != self.dataset:
            raise LedgerError(f"{self.path}: reservation {reservation.run_id} belongs to "
                              f"dataset {reservation.dataset!r}, not {self.dataset!r}")
        with _locked(self.path, exclusive=True):
            entries, head = self._read_verified(f"refusing to record a {kind} run in")
            seq = reservation.seq
            if not (seq < len(entries) and entries[seq]["run_id"] == reservation.run_id
                    and entries[seq]["kind"] == "reserve"
                    and entry_hash(entries[seq]) == reservation.entry_hash):
                raise LedgerError(f"{self.path}: reservation {reservation.run_id} "
                                  f"is not at line {seq + 1}")
            if any(e["run_id"] == reservation.run_id and e["kind"] != "reserve"
                   for e in entries[seq + 1:]):
                raise LedgerError(f"{self.path}: run {reservation.run_id} is already finished")
            self._append(self._common(kind, reservation.run_id, len(entries), head) | extra)

    def _append(self, entry: dict[str, Any]) -> str:
        """Append one line (under the lock), fsync it, and return the entry's hash."""
        try:
            entry = json.loads(canonical(entry))  # the form verify will read back
        except (TypeError, ValueError) as exc:
            raise TypeError(f"ledger entries must be JSON-serialisable: {exc}") from None
        digest = entry_hash(entry)
        line = (canonical({"entry": entry, "hash": digest}) + "\n").encode("utf-8")
        created = not self.path.exists()
        with self.path.open("ab") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
        if created:
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        return digest


# -- module internals ------------------------------------------------------


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _amount(value: Fraction, *, up: bool) -> float:
    """The float nearest to ``value`` whose ``exact`` form is >= value (up) or <= value."""
    result = float(value)
    while (exact(result) < value) if up else (exact(result) > value):
        result = math.nextafter(result, math.inf if up else -math.inf)
    return result


@contextmanager
def _locked(path: Path, *, exclusive: bool) -> Iterator[None]:
    """Hold ``flock`` on ``<path>.lock`` (exclusive for writers, shared for readers).

    Writers create the lock file and parent folders. A reader that may not
    create or open the lock file reads without it. An OSError (unreadable
    ledger, disk full, ...) inside the block becomes a LedgerError naming the file.
    """
    lock_path = path.with_name(path.name + ".lock")
    fd: int | None = None
    try:
        if exclusive:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        else:
            with suppress(OSError):
                fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            if fd is None:
                with suppress(OSError):
                    fd = os.open(lock_path, os.O_RDONLY | os.O_CLOEXEC)
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    except OSError as exc:
        raise LedgerError(f"{path}: cannot use the ledger: {exc.strerror or exc}") from exc
    finally:
        if fd is not None:
            os.close(fd)  # also releases the lock


def _parse(raw: bytes) -> tuple[dict[str, Any], str]:
    """(entry, stored hash) of one line; ValueError saying what is wrong."""
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("not valid UTF-8") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not (isinstance(obj, dict) and set(obj) == {"entry", "hash"}
            and isinstance(obj["entry"], dict) and isinstance(obj["hash"], str)):
        raise ValueError('not an object with exactly "entry" (object) and "hash" (string)')
    return obj["entry"], obj["hash"]


def _is_amount(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


_FIELDS: dict[str, dict[str, Any]] = {
    "common": {"seq": lambda v: isinstance(v, int) and not isinstance(v, bool),
               "kind": lambda v: v in KINDS, "run_id": _is_str, "time": _is_str,
               "dpcli_version": _is_str, "dataset": _is_str, "prev": _is_str},
    "reserve": {"command": _is_str, "arguments": lambda v: isinstance(v, dict),
                "breakdown": lambda v: isinstance(v, list), "seeded": lambda v: isinstance(v, bool),
                "epsilon": lambda v: _is_amount(v) and v > 0, "delta": _is_amount,
                "total_epsilon": _is_amount, "total_delta": _is_amount},
    "complete": {"outputs": lambda v: isinstance(v, list)},
    "failed": {"reason": _is_str},
}


def _field_problems(entry: dict[str, Any]) -> list[str]:
    checks = dict(_FIELDS["common"])
    if entry.get("kind") in KINDS:
        checks |= _FIELDS[entry["kind"]]
    return [f"field {name!r} is missing or has a wrong value"
            for name, ok in checks.items() if name not in entry or not ok(entry[name])]


def _scan(data: bytes) -> tuple[list[dict[str, Any]], VerifyReport]:
    """Parse and check a whole ledger; entries are returned only for lines that parsed."""
    problems: list[str] = []
    lines = data.split(b"\n")  # not splitlines(): U+2028 etc. may occur inside strings
    if lines[-1]:
        problems.append(f"line {len(lines)}: no final newline (a write torn by a crash?)")
    else:
        lines.pop()
    entries: list[dict[str, Any]] = []
    prev: str | None = GENESIS  # None after a line that could not be parsed
    head = GENESIS
    reserves: dict[str, dict[str, Any]] = {}  # run_id -> reserve entry
    finished: set[str] = set()
    totals: dict[str, tuple[Budget, Budget]] = {}  # dataset -> (total, spent)
    for index, raw in enumerate(lines):
        where = f"line {index + 1}: "
        try:
            entry, stored = _parse(raw)
        except ValueError as exc:
            problems.append(where + str(exc))
            prev = None
            continue
        if canonical({"entry": entry, "hash": stored}).encode("utf-8", "surrogatepass") != raw:
            problems.append(where + "bytes differ from the canonical serialisation (edited?)")
        if entry_hash(entry) != stored:
            problems.append(where + "hash does not match the entry (edited?)")
        if prev is not None and entry.get("prev") != prev:
            problems.append(where + "prev does not match the previous line's hash "
                            "(line removed, inserted or reordered?)")
        prev = head = stored
        if entry.get("seq") != index:
            problems.append(where + f"seq is {entry.get('seq')!r}, expected {index}")
        bad_fields = _field_problems(entry)
        problems.extend(where + p for p in bad_fields)
        entries.append(entry)
        if bad_fields:
            continue
        run_id, dataset = entry["run_id"], entry["dataset"]
        if entry["kind"] == "reserve":
            if run_id in reserves:
                problems.append(where + f"run_id {run_id} is reserved twice")
            reserves[run_id] = entry
            total = Budget(entry["total_epsilon"], entry["total_delta"])
            first_total, spent = totals.get(dataset, (total, ZERO))
            spent = spent + Budget(entry["epsilon"], entry["delta"])
            totals[dataset] = (first_total, spent)
            if total != first_total:
                problems.append(where + f"total of dataset {dataset!r} differs from its first run")
            if not spent.fits_in(first_total):
                problems.append(where + f"dataset {dataset!r} is overspent "
                                f"({spent} of {first_total})")
        else:
            start = reserves.get(run_id)
            if start is None or start["dataset"] != dataset:
                problems.append(where + f"{entry['kind']} run {run_id} has no earlier "
                                f"reserve for dataset {dataset!r}")
            elif run_id in finished:
                problems.append(where + f"run {run_id} is finished twice")
            finished.add(run_id)
    report = VerifyReport(not problems, len(lines), problems, head)
    return entries, report
