"""The privacy-budget ledger: an append-only, hash-chained audit log with a keyed checkpoint.

One JSON Lines file (its path comes from the spec) records every run against
one or more datasets; budgets are kept per dataset id. Each line is
``{"entry": {...}, "hash": "<sha256 hex>"}`` written canonically (sorted keys,
no spaces, UTF-8) where ``hash`` is the SHA-256 of the canonical form of
``entry`` and every entry holds the hash of the previous line's entry in
``prev`` (64 zeros for the first line).

Entries
-------
* ``genesis`` (written by ``dpcli ledger init``): a dataset's total ε and δ
  and the fingerprint of the ledger's key (never the key). A dataset id with
  no genesis in the ledger cannot spend: a renamed id is not a fresh budget.
* ``raise``: the custodian deliberately raised a dataset's total.
* ``reserve`` (before a run touches any private value: the planned ε/δ,
  checked against what remains) and later ``complete``, ``failed`` or
  ``aborted``.
* ``aborted``: the run stopped on a data error found by its pass before it
  released anything (docs/design.md, rule 5 "aborted runs"); it records the
  amount its reserve charged, and that amount is no longer spent.
* ``repair``: ``dpcli ledger repair`` dropped a torn last line, or (with
  ``trusted_chain``: :func:`trust_chain`) rebuilt a deleted or damaged
  checkpoint from the chain as it was, dropping nothing.

The spent budget is the exact sum of ε (and δ) over all reserve entries of
the dataset, including runs that failed or were killed, minus only the runs
recorded as ``aborted`` (a data error before any release: it released
nothing that the pre-charge check would not have told for free). Amounts are
stored as JSON numbers and read back with ``budget.exact``; a planned spend
that is not exactly such a decimal is rounded *up* before it is recorded, and
a lifetime total is rounded *down*.

Files beside the ledger (see :func:`companion_paths`)
----------------------------------------------------
* ``<ledger>.key`` (mode 0600): the secret key of the input digests and of the
  checkpoint's MAC.
* ``<ledger>.head``: the checkpoint -- entry count, byte length, head hash,
  total and spent per dataset, open runs, the first 64 bits of each keyed
  input digest per dataset (to warn when one file is charged under two
  dataset ids without reading the file), and the ledger file's identity
  (device, inode, size, ctime) -- with an HMAC-SHA-256 under the key. It is
  rewritten atomically (temp file ``<ledger>.head.tmp``, fsync, rename) after
  every append.

A symlinked ledger is followed: its key and checkpoint live beside the file
it points to. A ledger file with more than one hard link is refused (the
sidecars sit beside one name only; link with a symlink instead).

Locking, appends and cost
-------------------------
Every reader takes a shared and every writer an exclusive ``flock`` on the
ledger file's own open descriptor, so the lock is per file (inode) whatever
path reaches it; after locking, the descriptor is checked to still be the
file at the path (not replaced by a rename). Under the lock, a writer loads
the state: if the file's identity, size and ctime are those the checkpoint
recorded, nothing was written since and the checkpoint's figures are used
(O(1)); otherwise the whole file is re-verified (streamed, flat memory) and
must pass through the checkpointed point. Then it appends one line (fsynced)
and rewrites the checkpoint. A failed or short append, or a failed
checkpoint, is rolled back (``ftruncate`` to the previous length) under the
lock: nothing half-written stays.

What is detected, and what is not
---------------------------------
``verify`` re-serialises every line and rejects any byte that differs from the
canonical form, recomputes every hash, follows the ``prev`` chain, and checks
the checkpoint's MAC and that the file still contains the checkpointed entries
with the same head. So edits, insertions, reorderings, removals, a cut tail,
a ledger emptied or deleted (its key and checkpoint stay) are detected, by
``verify`` and by every spend. Not detected: rolling back the ledger, its
checkpoint (and key) *together* to an earlier copy, or deleting all three.
Against that, anchor the head elsewhere: ``verify`` prints it, and
``verify --expect-head H`` checks that ``H`` is still in the chain.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import hmac
import json
import math
import os
import secrets
import stat
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol

from dpcli import NEIGHBOURING_RELATION, __version__
from dpcli.budget import ZERO, Budget, exact, format_amount
from dpcli.errors import BudgetExhausted, LedgerError
from dpcli.fingerprint import file_digest

GENESIS = "0" * 64
RUN_KINDS = ("reserve", "complete", "failed", "aborted")
KINDS = ("genesis", "raise", *RUN_KINDS, "repair")
CHECKPOINT_FORMAT = 1
_MAX_REASON = 500
_LOCK_TRIES = 20


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
    #: other dataset ids of this ledger whose runs recorded the same keyed input digest
    #: (the same file charged under two ids: two budgets for the same people)
    shared_with: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunView:
    """One run of a dataset as seen in the ledger."""

    run_id: str
    time: str
    command: str
    epsilon: Fraction
    delta: Fraction
    # "complete" | "failed" | "aborted" | "running" (reserved, its process alive, holding its
    # run lock) | "interrupted" (reserved, never finished, its process gone)
    status: str
    seeded: bool
    outputs: list[dict[str, str]] = field(default_factory=list)
    neighbouring: str = NEIGHBOURING_RELATION
    #: the keyed digests of the private inputs it read (its data; validate's validation file)
    input_digests: tuple[str, ...] = ()


@dataclass(frozen=True)
class LedgerSummary:
    """A dataset's budget as recorded in the ledger."""

    dataset: str
    total: Budget
    spent: Budget
    remaining: Budget
    runs: list[RunView]
    #: this dataset's ``repair`` entries, oldest first (collected with the runs)
    repairs: list[dict[str, Any]] = field(default_factory=list)
    #: the checkpoint was written for another file: a copy or a move, refused for spending
    #: until ``dpcli ledger repair --moved`` (:func:`adopt_moved`)
    relocated: bool = False


@dataclass(frozen=True)
class VerifyReport:
    """Result of checking a whole ledger file (all datasets)."""

    ok: bool
    entries: int  # number of lines read (including bad ones)
    problems: list[str]  # each starts with "line N:" (1-based) when it is about a line
    head: str  # hash of the last line's entry (GENESIS for an empty ledger)
    #: every well-formed ``repair`` entry of the file (any dataset), oldest first: read by the
    #: same scan, so that listing them costs no second read
    repairs: list[dict[str, Any]] = field(default_factory=list)
    #: the checkpoint was written for another file (a copy or a move): intact, but refused
    #: for spending until ``ledger repair --moved``
    relocated: bool = False


@dataclass(frozen=True)
class Repair:
    """What ``repair_ledger`` dropped (or, for a whole line that lost only its final
    newline, completed: ``newline_only``)."""

    line: int  # 1-based number of the dropped (or completed) line
    dropped: bytes
    kept_bytes: int
    newline_only: bool = False


@dataclass(frozen=True)
class TrustedChain:
    """What ``trust_chain`` would rebuild the checkpoint from: the chain as it is now."""

    entries: int
    head: str
    checkpoint: str  # what became of the old one: "missing" or "fails its MAC"
    datasets: dict[str, tuple[Budget, Budget]]  # name -> (total, spent), as the chain says
    #: the chain names another file than this one (its last genesis or --moved repair):
    #: the rebuilt checkpoint keeps that file's identity, so spending stays refused until
    #: `ledger repair --moved`
    relocated: bool = False
    #: the chain records its file (a genesis of round 11 on, or a --moved repair)
    identified: bool = False


def canonical(obj: Any) -> str:
    """The one serialisation the ledger writes and accepts."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def entry_hash(entry: dict[str, Any]) -> str:
    """SHA-256 hex of the canonical serialisation of ``entry``."""
    return hashlib.sha256(canonical(entry).encode("utf-8", "surrogatepass")).hexdigest()


def _real(path: Path) -> Path:
    """The ledger file itself: symlinks followed (its sidecars live beside it)."""
    return Path(os.path.realpath(Path(path)))


def key_path(path: Path) -> Path:
    """Where the ledger's secret key lives (beside the ledger file, mode 0600)."""
    real = _real(path)
    return real.with_name(real.name + ".key")


def companion_paths(path: Path) -> tuple[Path, ...]:
    """The ledger file and every sidecar file it uses: outputs must never be written on them.

    Symlinks are resolved (the sidecars live beside the real file): the
    ledger, its key, its checkpoint, the checkpoint's temporary file, and the
    ``.lock`` file of earlier versions (which older processes may still use).
    """
    real = _real(path)
    return (real, key_path(real), head_path(real), real.with_name(real.name + ".head.tmp"),
            real.with_name(real.name + ".lock"))


def head_path(path: Path) -> Path:
    """Where the ledger's keyed checkpoint lives (beside the ledger file)."""
    real = _real(path)
    return real.with_name(real.name + ".head")


def read_key(path: Path) -> bytes:
    """The ledger's secret key; LedgerError when it is missing or unreadable."""
    key_file = key_path(path)
    try:
        key = _read_regular(key_file).strip()
    except OSError:
        raise LedgerError(f"{key_file}: the ledger's key is missing or unreadable; "
                          "restore it from the custodian's backup") from None
    if not key:
        raise LedgerError(f"{key_file}: the ledger's key is empty; restore it from the "
                          "custodian's backup")
    return key


def _read_regular(path: Path) -> bytes:
    """A small sidecar file's bytes; OSError (ENXIO or EINVAL) for anything but a regular
    file, instead of blocking on a FIFO put in its place."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read()
    finally:
        os.close(fd)


def key_fingerprint(key: bytes) -> str:
    """A public fingerprint of the key (SHA-256 of a labelled copy): it names, never reveals."""
    return hashlib.sha256(b"dpcli-ledger-key-fingerprint\0" + key).hexdigest()


def init_ledger(path: Path, dataset: str, total: Budget) -> str:
    """Record the genesis of ``dataset`` (total ``total``), creating the ledger if needed.

    Returns "created" (new ledger, key and checkpoint), "added" (a genesis
    appended to a ledger other datasets use) or "upgraded" (a ledger written
    by an earlier dpcli, without genesis entries or checkpoint: its runs are
    verified, kept and counted, and its checkpoint is created).

    Refuses (LedgerError) when the dataset already has a genesis, when a key
    or checkpoint exists without its ledger (deleted or moved: re-creating it
    would silently restore the budget), when the ledger fails verification,
    and when the dataset's earlier runs recorded another total.
    """
    if not isinstance(dataset, str) or not dataset:
        raise ValueError("a dataset id must be a non-empty string")
    if total.epsilon <= 0:
        raise ValueError("a dataset's total ε must be positive")
    real = _real(path)
    key_file, head = key_path(real), head_path(real)
    outcome = "added"
    if not real.exists():
        for sidecar in (key_file, head):
            if sidecar.exists():
                raise LedgerError(
                    f"{path}: no ledger here, but its {sidecar.name} exists: the ledger was "
                    "deleted or moved, and a new one would silently restore the budget. Restore "
                    f"it; only to really start over, delete {sidecar} (and the other sidecars) "
                    "first")
        real.parent.mkdir(parents=True, exist_ok=True)
        try:
            _create_exclusive(key_file, secrets.token_hex(32).encode() + b"\n", 0o600)
        except FileExistsError:
            raise LedgerError(f"{path}: another `dpcli ledger init` is creating this ledger; "
                              "run it again once that one has finished") from None
        _write_checkpoint(real, read_key(real), _Fold(), None)
        _create_exclusive(real, b"", 0o644, exact_mode=False)  # under the umask, as before
        outcome = "created"
    ledger = Ledger(path, dataset, total)
    key = read_key(real)
    with _locked(real, exclusive=True) as fd:
        fold = _load_state(real, fd, key, allow_legacy=True, path=path)
        if outcome == "added" and not head.exists():
            outcome = "upgraded"
        state = fold.datasets.get(dataset)
        if state is not None and state.genesis:
            raise LedgerError(f"{path}: dataset {dataset!r} already has its genesis in this "
                              "ledger (total " f"{state.total}); nothing changed")
        recorded = ledger.recorded_total
        if state is not None and state.total != recorded:
            raise LedgerError(
                f"{path}: the spec declares a total of {total} for dataset {dataset!r} but its "
                f"runs recorded {state.total}: init with the recorded total, then raise it with "
                "`dpcli ledger raise` if you mean to")
        here = _identity(_stamp(os.fstat(fd), _birth_ns(fd)))
        entry = ledger._common("genesis", fold.entries, fold.head) | {
            "total_epsilon": float(recorded.epsilon), "total_delta": float(recorded.delta),
            "key_fingerprint": key_fingerprint(key),
            # the file the chain lives in, for `repair --trust-chain` on a copy (no checkpoint)
            # (on a copy, the original's: the copy's own identity comes only from --moved)
            "file": _file_record(fold.origin if fold.relocated and fold.origin else here,
                                 real)}
        _append(real, fd, key, fold, entry, path=path)
    return outcome


def _create_exclusive(path: Path, data: bytes, mode: int, *, exact_mode: bool = True) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        if exact_mode:
            os.fchmod(fd, mode)  # whatever the umask
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    with suppress(OSError):
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def read_entries(path: Path) -> list[dict[str, Any]]:
    """The entries of a ledger file in order ([] when the file does not exist).

    Checks only that each line is a JSON object with an ``entry`` object; it
    does not check hashes -- use ``verify_file`` for that. Raises LedgerError
    naming the file and line when a line cannot be read.
    """
    real = _real(path)
    if not real.exists():
        return []
    entries = []
    with _locked(real, exclusive=False) as fd:
        for number, raw in enumerate(_lines(fd), start=1):
            try:
                entries.append(_parse(raw.rstrip(b"\n"))[0])
            except ValueError as exc:
                raise LedgerError(f"{path}: line {number}: {exc}") from None
    return entries


def verify_file(path: Path, *, expect_head: str | None = None, dataset: str | None = None,
                total: Budget | None = None) -> VerifyReport:
    """Check a whole ledger file, streamed: chain, rules, key, checkpoint (and one dataset).

    ``expect_head``: a head hash anchored elsewhere earlier; it must still be
    the hash of some entry (the ledger may have grown since). ``dataset`` and
    ``total`` (the recorded form) add: that dataset has its genesis and the
    given total. A missing file with no sidecars is an empty, valid ledger.

    Bad content never raises: every problem is reported (with its line number
    when it is about a line). Raises LedgerError only when the file cannot be
    read at all.
    """
    real = _real(path)
    if not real.exists():
        sidecars = [p.name for p in (key_path(real), head_path(real)) if p.exists()]
        if sidecars:
            return VerifyReport(False, 0, [f"the ledger is missing but its {' and '.join(sidecars)}"
                                           " exist: deleted or moved?"], GENESIS)
        return VerifyReport(True, 0, [], GENESIS)
    problems: list[str] = []
    try:
        key: bytes | None = read_key(real)
    except LedgerError as exc:
        key, problems = None, [str(exc)]
    with _locked(real, exclusive=False) as fd:
        checkpoint = None
        if key is not None:
            try:
                checkpoint = _read_checkpoint(real, key)
            except LedgerError as exc:
                problems.append(str(exc))
        fold = _scan(fd, checkpoint, key, expect_head=expect_head)
        stamp = checkpoint.get("stamp") if checkpoint is not None else None
        relocated = isinstance(stamp, list) and _other_file(_identity(stamp), os.fstat(fd),
                                                            _birth_ns(fd))
    problems = fold.problems + problems
    if key is not None and checkpoint is None and not any("checkpoint" in p for p in problems):
        problems.append(_no_checkpoint_problem(real, fold))
    for name, state in fold.datasets.items():
        if not state.genesis:
            problems.append(f"dataset {name!r} has runs but no genesis entry (a ledger written "
                            "by an earlier dpcli: run `dpcli ledger init --spec SPEC` once)")
    if dataset is not None:
        current = fold.datasets.get(dataset)
        if current is None or not current.genesis:
            problems.append(_no_genesis_message(real, dataset))
        elif total is not None and current.total != total:
            problems.append(_total_message(dataset, total, current.total))
    if expect_head is not None and not fold.anchor_seen:
        problems.append(f"the expected head {expect_head} is not the hash of any entry: entries "
                        "up to it were removed or rewritten")
    return VerifyReport(not problems, fold.entries, problems, fold.head, fold.repairs,
                        relocated)


class Ledger:
    """The budget of one dataset, kept in a (possibly shared) ledger file."""

    def __init__(self, path: Path, dataset: str, total: Budget, *,
                 setting: tuple[Path, str] | None = None) -> None:
        """``setting``: the spec and its ``ledger:`` value as written, named when the
        ledger is missing (a spec copied to another folder finds no ledger there)."""
        if not isinstance(dataset, str) or not dataset:
            raise ValueError("a dataset id must be a non-empty string")
        if total.epsilon <= 0:
            raise ValueError("a dataset's total ε must be positive")
        self.path = Path(path)
        self.file = _real(self.path)
        self.dataset = dataset
        self.total = total
        self.setting = setting
        # The total as recorded (rounded down to a float if it is not one already).
        self.recorded_total = Budget(_amount(total.epsilon, up=False),
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
        file fails verification, the dataset has no genesis, or the spec's
        total differs from the recorded one; ValueError when the planned ε is
        not positive.
        """
        self.require_initialised()
        planned = plan.total
        if planned.epsilon <= 0:
            raise ValueError("a run's planned ε must be positive")
        charge_eps, charge_dlt = _amount(planned.epsilon, up=True), _amount(planned.delta, up=True)
        charge = Budget(charge_eps, charge_dlt)
        breakdown = plan.to_json()
        key = read_key(self.file)
        with _locked(self.file, exclusive=True) as fd:
            fold = _load_state(self.file, fd, key, path=self.path, exclusive=True)
            if fold.relocated:
                raise LedgerError(moved_message(self.path))
            total, spent = self._account(fold)
            remaining = total - spent
            if not charge.fits_in(remaining):
                raise BudgetExhausted(
                    f"budget exhausted for dataset {self.dataset!r}: this run needs {charge} "
                    f"but only {remaining} of {total} remains (spent {spent})")
            spent_after, remaining_after = spent + charge, total - (spent + charge)
            run_id = uuid.uuid4().hex
            seq = fold.entries
            entry = self._common("reserve", seq, fold.head) | {
                "run_id": run_id,
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
            entry |= _file_if_moved(fold, fd, self.file)
            shared = fold.datasets_with_input(input_digest, besides=self.dataset)
            digest = _append(self.file, fd, key, fold, entry, path=self.path)
        return Reservation(run_id, self.dataset, charge, digest, seq, remaining_after, shared)

    def complete(self, reservation: Reservation, outputs: Sequence[Path],
                 summary: dict[str, Any] | None = None, *,
                 digests: dict[Path, str] | None = None) -> None:
        """Record that a reserved run finished, with each output's path as given, the
        absolute path it resolved to (symlinked folders followed) and its SHA-256.

        ``digests`` gives an output's SHA-256 as the run wrote it (hashed before its
        rename into place: another process writing the same path meanwhile cannot put
        its bytes into this run's record); an output without one is hashed on disk.

        Guarantees: on return the line is fsynced. Raises LedgerError when the
        file fails verification, or the reservation is not in it or is
        already finished.
        """
        known = digests or {}
        # "path" as given (relative to the folder the run ran in), "resolved" the file it
        # named then: what a later run from another folder compares (dpcli.protect)
        extra: dict[str, Any] = {
            "outputs": [{"path": str(p), "resolved": os.path.realpath(p),
                         "sha256": known.get(Path(p)) or file_digest(Path(p))}
                        for p in outputs]}
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

    def abort(self, reservation: Reservation, reason: str) -> None:
        """Record that a reserved run stopped on a data error before releasing anything: its
        charge no longer counts as spent (docs/design.md, rule 5 "aborted runs").

        Only for a run that drew no noise into any output and wrote nothing, whose error is
        one the pre-charge check reports for free (the caller's duty: see
        :func:`dpcli.run.charged`). The entry records the amount given back (the
        reservation's, checked against its reserve entry by every verification).
        ``reason`` as for :meth:`fail`. Same guarantees and errors as ``complete``.
        """
        if len(reason) > _MAX_REASON:
            reason = reason[: _MAX_REASON - 1] + "…"
        self._finish(reservation, "aborted", {
            "reason": reason, "epsilon": _amount(reservation.budget.epsilon, up=True),
            "delta": _amount(reservation.budget.delta, up=True)})

    def summary(self, *, runs: bool = True) -> LedgerSummary:
        """Total, spent, remaining and (unless ``runs`` is False) the runs and repairs of this
        dataset.

        Without runs it costs O(1) when nothing was written since the last
        checkpoint (the pre-charge look of a spending command); with runs it
        streams the file once more. Raises LedgerError when the file fails
        verification, the dataset has no genesis, or the spec's total differs
        from the recorded one.
        """
        self.require_initialised()
        key = read_key(self.file)
        with _locked(self.file, exclusive=False) as fd:
            fold = _load_state(self.file, fd, key, path=self.path)
            total, spent = self._account(fold)
            views, repairs, _ = self._runs(fd) if runs else ([], [], set())
        return LedgerSummary(self.dataset, total, spent, total - spent, views, repairs,
                             fold.relocated)

    def completed_like(self, *, command: str, arguments: dict[str, Any], spec_digest: str,
                       input_digest: str | None) -> list[RunView]:
        """This dataset's completed runs of ``command`` with exactly these arguments, spec
        digest and input digest, newest first (for ``--reuse``). Verifies the file first."""
        return self.runs_and_completed_like(command=command, arguments=arguments,
                                            spec_digest=spec_digest,
                                            input_digest=input_digest)[1]

    def runs_and_completed_like(self, *, command: str, arguments: dict[str, Any],
                                spec_digest: str, input_digest: str | None
                                ) -> tuple[list[RunView], list[RunView]]:
        """This dataset's runs (as :meth:`summary` lists them) and, newest first, those
        :meth:`completed_like` returns, from one read of the file (``--reuse`` needs both:
        its look, then the outputs' replacement check)."""
        self.require_initialised()
        key = read_key(self.file)
        wanted = _canonical(reuse_arguments(arguments))

        def like(e: dict[str, Any]) -> bool:
            return (e["command"] == command and e.get("spec_digest") == spec_digest
                    and e.get("input_digest") == input_digest
                    and _canonical(reuse_arguments(e.get("arguments"))) == wanted)

        with _locked(self.file, exclusive=False) as fd:
            _load_state(self.file, fd, key, path=self.path)
            views, _, matching = self._runs(fd, like)
        return views, [v for v in reversed(views)
                       if v.run_id in matching and v.status == "complete"]

    def verify(self, expect_head: str | None = None) -> VerifyReport:
        """Check the whole file (every dataset in it) and this dataset's genesis and total."""
        self.require_initialised()
        return verify_file(self.file, expect_head=expect_head, dataset=self.dataset,
                           total=self.recorded_total)

    def require_initialised(self) -> None:
        """LedgerError unless the ledger file exists (see :func:`init_ledger`) under one name.

        A multiply linked ledger is refused here, first, so that the message says so
        rather than that the key beside the other name is missing.
        """
        if self.file.exists():
            st = self.file.stat()
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:  # a folder is refused on opening
                raise LedgerError(_hard_links_message(self.file, st.st_nlink))
            return
        sidecars = [p for p in (key_path(self.file), head_path(self.file)) if p.exists()]
        if sidecars:
            raise LedgerError(
                f"{self.path}: the ledger is missing but {', '.join(map(str, sidecars))} "
                "exist: it was deleted or moved. Restore it before spending anything")
        raise LedgerError(_missing_message(Path(os.path.abspath(self.path)), self.dataset,
                                           self.setting))

    # -- internals ---------------------------------------------------------

    def _account(self, fold: _Fold) -> tuple[Budget, Budget]:
        """(recorded total, exact spent) of this dataset; LedgerError without genesis or
        when the spec's total is not the recorded one."""
        state = fold.datasets.get(self.dataset)
        if state is None or not state.genesis:
            raise LedgerError(_no_genesis_message(self.path, self.dataset))
        if state.total != self.recorded_total:
            raise LedgerError(f"{self.path}: " + _total_message(
                self.dataset, self.total, state.total))
        return state.total, state.spent

    def _runs(self, fd: int, like: Callable[[dict[str, Any]], bool] | None = None
              ) -> tuple[list[RunView], list[dict[str, Any]], set[str]]:
        """This dataset's runs, its repair entries (and any dataset's ``--moved`` repair: it
        adopted the file for every dataset in it) and the run ids whose reserve entry
        ``like`` accepts, in one streamed read; only the fields shown are kept per run."""
        views: dict[str, RunView] = {}
        repairs: list[dict[str, Any]] = []
        matching: set[str] = set()
        for raw in _lines(fd):
            e = _parse(raw.rstrip(b"\n"))[0]
            if e.get("dataset") != self.dataset:
                if e.get("kind") == "repair" and "moved" in e:
                    repairs.append(e)
                continue
            if e["kind"] == "repair":
                repairs.append(e)
            elif e["kind"] == "reserve":
                if like is not None and like(e):
                    matching.add(e["run_id"])
                views[e["run_id"]] = RunView(
                    run_id=e["run_id"], time=e["time"], command=e["command"],
                    epsilon=exact(e["epsilon"]), delta=exact(e["delta"]),
                    status="interrupted", seeded=e["seeded"],
                    neighbouring=e.get("neighbouring", NEIGHBOURING_RELATION),
                    input_digests=_read_digests(e))
            elif e["kind"] in ("complete", "failed", "aborted") and e["run_id"] in views:
                views[e["run_id"]] = replace(views[e["run_id"]], status=e["kind"],
                                             outputs=list(e.get("outputs", [])))
        from dpcli.reuse import is_running

        for run_id, view in views.items():   # no end yet: alive (its lock held), or dead
            if view.status == "interrupted" and is_running(self.file, run_id):
                views[run_id] = replace(view, status="running")
        return list(views.values()), repairs, matching

    def _common(self, kind: str, seq: int, prev: str) -> dict[str, Any]:
        return {"seq": seq, "kind": kind, "time": _now(), "dpcli_version": __version__,
                "dataset": self.dataset, "prev": prev}

    def _finish(self, reservation: Reservation, kind: str, extra: dict[str, Any]) -> None:
        if reservation.dataset != self.dataset:
            raise LedgerError(f"{self.path}: reservation {reservation.run_id} belongs to "
                              f"dataset {reservation.dataset!r}, not {self.dataset!r}")
        key = read_key(self.file)
        with _locked(self.file, exclusive=True) as fd:
            fold = _load_state(self.file, fd, key, path=self.path, exclusive=True)
            opened = fold.open.get(reservation.run_id)
            if opened is None:
                if reservation.seq < fold.entries and fold.reserved(reservation.run_id):
                    raise LedgerError(
                        f"{self.path}: run {reservation.run_id} is already finished")
                raise LedgerError(f"{self.path}: reservation {reservation.run_id} "
                                  f"is not at line {reservation.seq + 1}")
            if tuple(opened[:3]) != (self.dataset, reservation.seq, reservation.entry_hash):
                raise LedgerError(f"{self.path}: reservation {reservation.run_id} "
                                  f"is not at line {reservation.seq + 1}")
            entry = self._common(kind, fold.entries, fold.head) | {
                "run_id": reservation.run_id} | extra
            _append(self.file, fd, key, fold, entry, path=self.path)


def _read_digests(reserve: dict[str, Any]) -> tuple[str, ...]:
    """The keyed digests of the private inputs a reserve entry records: its input's, and
    the one its arguments name (validate's ``validation_digest``)."""
    arguments = reserve.get("arguments")
    found = (reserve.get("input_digest"),
             arguments.get("validation_digest") if isinstance(arguments, dict) else None)
    return tuple(d for d in found if isinstance(d, str))


def raise_total(path: Path, dataset: str, epsilon: float | str | None,
                delta: float | str | None = None) -> tuple[Budget, Budget]:
    """Record that the custodian raised ``dataset``'s total; returns (old, new) totals.

    ``epsilon`` None keeps the recorded ε, ``delta`` None the recorded δ. The new total
    (rounded down to a float) must be at least the old one in ε and δ and differ from it.
    Afterwards the spec must declare the new total.
    """
    real = _real(path)
    Ledger(path, dataset, Budget(1)).require_initialised()
    key = read_key(real)
    with _locked(real, exclusive=True) as fd:
        fold = _load_state(real, fd, key, path=Path(path))
        if fold.relocated:   # its append would adopt the copy's identity without a word
            raise LedgerError(moved_message(Path(path)))
        state = fold.datasets.get(dataset)
        if state is None or not state.genesis:
            raise LedgerError(_no_genesis_message(Path(path), dataset))
        wanted = Budget(state.total.epsilon if epsilon is None else epsilon,
                        state.total.delta if delta is None else delta)
        ledger = Ledger(path, dataset, wanted)
        new = ledger.recorded_total
        if new == state.total:   # the command line's mistake, not the ledger's: 64
            from dpcli.errors import UsageError

            raise UsageError(f"{path}: dataset {dataset!r} already has a total of "
                             f"{state.total}: nothing to raise (give a larger total)")
        if not state.total.fits_in(new):
            raise LedgerError(f"{path}: dataset {dataset!r} has a total of {state.total}; "
                              f"{wanted} would lower it, and a total is never lowered")
        old = state.total  # the append folds the entry into ``state``: keep the old total
        entry = ledger._common("raise", fold.entries, fold.head) | {
            "total_epsilon": float(new.epsilon), "total_delta": float(new.delta),
            "previous_epsilon": float(old.epsilon), "previous_delta": float(old.delta),
            **_file_if_moved(fold, fd, real)}
        _append(real, fd, key, fold, entry, path=Path(path))
        return old, new


def repair_ledger(path: Path, dataset: str,
                  confirm: Callable[[Repair], bool]) -> Repair | None:
    """Drop a torn last line (only that) and record the repair as an entry of ``dataset``.

    ``confirm`` is shown what would be dropped and returns whether to go on.
    Returns what was dropped, or None when there was nothing to repair or it
    was not confirmed. Raises LedgerError when the damage is not a torn last
    line (a human must restore the ledger from a backup).
    """
    ledger = Ledger(path, dataset, Budget(1))
    ledger.require_initialised()
    key = read_key(ledger.file)
    with _locked(ledger.file, exclusive=True) as fd:
        torn = _find_torn(ledger.file, fd, key, path)
        if torn is None:
            return None
        if _read_checkpoint(ledger.file, key) is None:
            # without it nothing shows that the torn line was never counted (a damaged charge
            # dropped would be budget forgotten): refused before anything is cut (review 12)
            raise LedgerError(f"{path}: the last line is torn and the checkpoint "
                              f"({head_path(ledger.file)}) is missing: without it dpcli cannot "
                              "tell a torn write from a counted entry damaged since, so it "
                              "drops nothing. Restore the checkpoint (or the ledger) from a "
                              "backup")
        if not confirm(torn):
            return None
        if torn.newline_only:
            os.lseek(fd, torn.kept_bytes, os.SEEK_SET)
            os.write(fd, b"\n")
        else:
            os.ftruncate(fd, torn.kept_bytes)
        os.fsync(fd)
        fold = _load_state(ledger.file, fd, key, path=ledger.path)
        gone = b"" if torn.newline_only else torn.dropped
        entry = ledger._common("repair", fold.entries, fold.head) | {
            "dropped_line": torn.line, "dropped_bytes": len(gone),
            "dropped_sha256": hashlib.sha256(gone).hexdigest()}
        if torn.newline_only:
            entry["completed_line"] = torn.line  # nothing dropped: its final newline restored
        _append(ledger.file, fd, key, fold, entry, path=ledger.path)
    return torn


def trust_chain(path: Path, dataset: str, confirm: Callable[[TrustedChain], bool], *,
                expect_head: str | None = None) -> TrustedChain | None:
    """Rebuild a lost checkpoint from the chain as it is now, and record that in the ledger.

    The checkpoint is what detects a ledger cut short or rolled back (with the key, it
    vouches for how far the chain had grown). Once it is deleted or damaged, nothing on
    this disk can tell whether the chain lost its tail before: rebuilding it trusts the
    chain as it is. So this is an explicit act (``dpcli ledger repair --trust-chain``):
    allowed only when the checkpoint is missing or fails its MAC — never over an intact
    checkpoint that the chain contradicts, which is the very rollback it exists to catch
    —, when the key is there and every line verifies (hashes, chain, fields, the genesis
    key fingerprints), with at least one genesis, and ``expect_head`` (a head anchored
    elsewhere), if given, in the chain. ``confirm`` is shown what would be trusted. A
    ``repair`` entry of ``dataset`` records it (``trusted_chain``: entries, head, what
    became of the old checkpoint); its append writes the new checkpoint.

    Returns what was trusted, or None when the checkpoint is intact and matches the chain
    (nothing to rebuild) or it was not confirmed. LedgerError otherwise.
    """
    ledger = Ledger(path, dataset, Budget(1))
    ledger.require_initialised()
    key = read_key(ledger.file)
    with _locked(ledger.file, exclusive=True) as fd:
        try:
            old = "missing" if _read_checkpoint(ledger.file, key) is None else None
        except LedgerError:
            old = "fails its MAC"
        if old is None:
            try:
                _load_state(ledger.file, fd, key, path=ledger.path)
            except LedgerError as exc:
                raise LedgerError(
                    f"{path}: the checkpoint is intact (its MAC holds) and the ledger does not "
                    f"match it ({exc}): that is the cut or rolled-back ledger it exists to "
                    "catch, and --trust-chain never overrides it. Restore the ledger from a "
                    "backup") from None
            return None  # intact and matching: nothing to rebuild
        fold = _scan(fd, None, key, expect_head=expect_head)
        if fold.problems:
            raise LedgerError(
                f"{path}: the chain itself fails verification ({fold.problems[0]}); "
                "--trust-chain rebuilds a lost checkpoint only over a chain that verifies "
                "(a torn last line: `dpcli ledger repair` first; otherwise restore a backup)")
        if not any(state.genesis for state in fold.datasets.values()):
            raise LedgerError(f"{path}: the chain holds no genesis: nothing to trust (if "
                              "nothing was ever spent from it, delete it and its key, then "
                              "run `dpcli ledger init`)")
        if expect_head is not None and not fold.anchor_seen:
            raise LedgerError(f"{path}: the expected head {expect_head} is not the hash of any "
                              "entry: the ledger was cut or rewritten since it was anchored; "
                              "restore it from a backup")
        if fold.identity is not None and _other_file(fold.identity, os.fstat(fd),
                                                     _birth_ns(fd)):
            # a copy (or a move) that lost its checkpoint: rebuilt, it stays what it is
            fold.relocated, fold.origin = True, list(fold.identity)
        trusted = TrustedChain(fold.entries, fold.head, old,
                               {name: (state.total, state.spent)
                                for name, state in fold.datasets.items()}, fold.relocated,
                               fold.identity is not None)
        if not confirm(trusted):
            return None
        entry = ledger._common("repair", fold.entries, fold.head) | {
            "dropped_line": 0, "dropped_bytes": 0,
            "dropped_sha256": hashlib.sha256(b"").hexdigest(),
            "trusted_chain": {"entries": fold.entries, "head": fold.head,
                              "checkpoint": old,
                              **({"expect_head": expect_head} if expect_head else {})}}
        _append(ledger.file, fd, key, fold, entry, path=ledger.path)
    return trusted


# -- the state of a ledger prefix ---------------------------------------------


@dataclass
class _Dataset:
    genesis: bool
    total: Budget
    spent: Budget


class _Fold:
    """The accounting state of a ledger prefix, built line by line with flat memory.

    Holds per dataset: genesis seen, recorded total, exact spent; the open
    (reserved, unfinished) runs; the problems found. ``_reserved`` (every
    run id seen) exists only when the fold was built from line 1.
    """

    def __init__(self, key: bytes | None = None) -> None:
        self.entries = 0
        self.offset = 0
        self.last_start = 0
        self.head = GENESIS
        self._prev: str | None = GENESIS  # None after a line that could not be parsed
        self.datasets: dict[str, _Dataset] = {}
        # run_id -> (dataset, seq, hash, ε, δ as exact decimal text); the amounts let an
        # ``aborted`` entry be checked against its reserve (a checkpoint written before
        # aborted runs existed holds the first three only: None then)
        self.open: dict[str, tuple[Any, ...]] = {}
        self.problems: list[str] = []
        self._reserved: set[str] | None = set()
        self._key_fp = key_fingerprint(key) if key is not None else None
        # dataset -> the first 64 bits (hex) of each keyed input digest its runs recorded, in
        # order of first use (None: a checkpoint written before they were kept)
        self.inputs: dict[str, _Inputs] | None = {}
        self.anchor: str | None = None
        # the file is not the one the checkpoint was written for (another device or inode),
        # and that file's [device, inode]: every checkpoint written for this fold keeps it,
        # so no append on a copy (a genesis, a repair, a run's end) adopts the copy silently
        self.relocated = False
        self.origin: list[int] | None = None
        # the [device, inode] the chain itself last recorded for its file (a genesis, a
        # --moved repair): what `repair --trust-chain` compares a file without checkpoint to
        self.identity: list[int] | None = None
        # every path the chain recorded for that file (a move, a bind mount, a rename back):
        # `repair --moved` is refused while any of them still opens to the original
        self.identity_paths: list[str] = []
        self.anchor_seen = False
        # the repair entries fed (few; not kept in a checkpoint: a full scan's only)
        self.repairs: list[dict[str, Any]] = []

    def reserved(self, run_id: str) -> bool:
        return self._reserved is None or run_id in self._reserved

    def datasets_with_input(self, digest: str | None, *, besides: str) -> tuple[str, ...]:
        """The datasets other than ``besides`` whose runs recorded the keyed input ``digest``."""
        short = _short_digest(digest)
        if short is None or self.inputs is None:
            return ()
        return tuple(sorted(name for name, seen in self.inputs.items()
                            if name != besides and seen.has(short)))

    def feed(self, raw: bytes) -> None:
        """Add one line (with its newline, if it has one)."""
        index, where = self.entries, f"line {self.entries + 1}: "
        self.last_start, self.offset, self.entries = self.offset, self.offset + len(raw), index + 1
        if raw.endswith(b"\n"):
            raw = raw[:-1]
        else:
            self.problems.append(where + "no final newline (a write torn by a crash?)")
        try:
            entry, stored = _parse(raw)
        except ValueError as exc:
            self.problems.append(where + str(exc))
            self._prev = None
            return
        # one serialisation for both checks: sorted keys put "entry" before "hash"
        body = canonical(entry).encode("utf-8", "surrogatepass")
        if b'{"entry":' + body + b',"hash":' + canonical(stored).encode() + b"}" != raw:
            self.problems.append(where + "bytes differ from the canonical serialisation (edited?)")
        if hashlib.sha256(body).hexdigest() != stored:
            self.problems.append(where + "hash does not match the entry (edited?)")
        if self._prev is not None and entry.get("prev") != self._prev:
            self.problems.append(where + "prev does not match the previous line's hash "
                                 "(line removed, inserted or reordered?)")
        self._prev = self.head = stored
        if stored == self.anchor:
            self.anchor_seen = True
        if entry.get("seq") != index:
            self.problems.append(where + f"seq is {entry.get('seq')!r}, expected {index}")
        bad_fields = _field_problems(entry)
        self.problems.extend(where + p for p in bad_fields)
        if not bad_fields:
            self._apply(entry, stored, index, where)
            if entry["kind"] == "repair":
                self.repairs.append(entry)
            # the file the chain lives in: a genesis's, a reserve's after a move, a --moved
            # repair's (the last one counts)
            named = (entry.get("moved") if entry["kind"] == "repair" else
                     entry.get("file") if entry["kind"] in ("genesis", "reserve", "raise")
                     else None)
            if (isinstance(named, dict) and isinstance(named.get("device"), int)
                    and isinstance(named.get("inode"), int)):
                birth = named.get("birth_ns")
                identity = [named["device"], named["inode"],
                            *([birth] if isinstance(birth, int) and birth else [])]
                if identity != self.identity:   # another file (a genesis, an adoption)
                    self.identity, self.identity_paths = identity, []
                path = named.get("path")
                if isinstance(path, str) and path not in self.identity_paths:
                    self.identity_paths.append(path)

    def _apply(self, entry: dict[str, Any], stored: str, index: int, where: str) -> None:
        kind, name = entry["kind"], entry["dataset"]
        state = self.datasets.get(name)
        if kind in ("genesis", "raise", "reserve"):
            total = Budget(entry["total_epsilon"], entry["total_delta"])
        if kind == "genesis":
            if state is not None and state.genesis:
                self.problems.append(where + f"dataset {name!r} has a second genesis")
            elif state is not None and state.total != total:
                self.problems.append(where + f"genesis total of dataset {name!r} differs from "
                                     "the total its earlier runs recorded")
            if self._key_fp is not None and entry["key_fingerprint"] != self._key_fp:
                self.problems.append(where + f"genesis of dataset {name!r} names another key "
                                     "than the one beside the ledger (key replaced?)")
            self.datasets[name] = _Dataset(True, total, state.spent if state else ZERO)
        elif kind == "raise":
            if state is None or not state.genesis:
                self.problems.append(where + f"raise for dataset {name!r}, which has no genesis")
            elif total == state.total or not state.total.fits_in(total):
                self.problems.append(where + f"raise does not raise dataset {name!r}'s total")
            else:
                state.total = total
        elif kind == "reserve":
            run_id = entry["run_id"]
            if run_id in self.open or (self._reserved is not None and run_id in self._reserved):
                self.problems.append(where + f"run_id {run_id} is reserved twice")
            if self._reserved is not None:
                self._reserved.add(run_id)
            if state is None:  # runs of a ledger written before genesis entries existed
                state = self.datasets[name] = _Dataset(False, total, ZERO)
            elif total != state.total:
                self.problems.append(where + f"total of dataset {name!r} differs from its "
                                     "recorded total")
            state.spent = state.spent + Budget(entry["epsilon"], entry["delta"])
            if not state.spent.fits_in(state.total):
                self.problems.append(where + f"dataset {name!r} is overspent "
                                     f"({state.spent} of {state.total})")
            self.open[run_id] = (name, index, stored, str(exact(entry["epsilon"])),
                                 str(exact(entry["delta"])))
            short = _short_digest(entry.get("input_digest"))
            if short is not None and self.inputs is not None:
                self.inputs.setdefault(name, _Inputs()).add(short)
        elif kind in ("complete", "failed", "aborted"):
            run_id = entry["run_id"]
            start = self.open.get(run_id)
            if start is not None and start[0] == name:
                del self.open[run_id]
                if kind == "aborted":
                    self._give_back(entry, start, where)
            elif start is None and self._reserved is not None and run_id in self._reserved:
                self.problems.append(where + f"run {run_id} is finished twice")
            else:
                self.problems.append(where + f"{kind} run {run_id} has no earlier "
                                     f"reserve for dataset {name!r}")

    def _give_back(self, entry: dict[str, Any], start: tuple[Any, ...], where: str) -> None:
        """An aborted run's charge is no longer spent: exactly its reserve's amount."""
        back = Budget(entry["epsilon"], entry["delta"])
        if len(start) >= 5 and back != Budget(Fraction(start[3]), Fraction(start[4])):
            self.problems.append(where + f"aborted run {entry['run_id']} gives back another "
                                 "amount than its reserve charged")
            return
        state = self.datasets.get(start[0])
        if state is None or not back.fits_in(state.spent):
            self.problems.append(where + f"aborted run {entry['run_id']} gives back more than "
                                 "was spent")
            return
        state.spent = state.spent - back

    # the checkpoint's body (without its MAC) and back

    def to_json(self, stamp: list[int] | None) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT, "entries": self.entries, "offset": self.offset,
            "last_start": self.last_start, "head": self.head, "stamp": stamp,
            "datasets": {name: {"genesis": s.genesis,
                                "total": [float(s.total.epsilon), float(s.total.delta)],
                                "spent": [str(s.spent.epsilon), str(s.spent.delta)]}
                         for name, s in self.datasets.items()},
            "open": {run_id: list(v) for run_id, v in self.open.items()},
            **({"inputs": {name: seen.text() for name, seen in self.inputs.items()}}
               if self.inputs is not None else {}),
            **({"file": {"identity": self.identity, "paths": self.identity_paths}}
               if self.identity is not None else {}),
        }

    @classmethod
    def from_json(cls, body: dict[str, Any], key: bytes) -> _Fold:
        fold = cls(key)
        fold.entries, fold.offset = int(body["entries"]), int(body["offset"])
        fold.last_start, fold.head = int(body["last_start"]), str(body["head"])
        fold._prev = fold.head
        fold.datasets = {name: _Dataset(bool(s["genesis"]), Budget(*s["total"]),
                                        Budget(Fraction(s["spent"][0]), Fraction(s["spent"][1])))
                         for name, s in body["datasets"].items()}
        fold.open = {run_id: (str(v[0]), int(v[1]), str(v[2]), *(str(x) for x in v[3:5]))
                     for run_id, v in body["open"].items()}
        fold._reserved = None  # unknown without reading the file
        inputs = body.get("inputs")
        fold.inputs = None if not isinstance(inputs, dict) else {
            name: _Inputs(str(text)) for name, text in inputs.items()}
        known = body.get("file")   # absent in a checkpoint written before it was kept
        if isinstance(known, dict) and isinstance(known.get("identity"), list):
            fold.identity = [int(x) for x in known["identity"]]
            paths = known.get("paths")
            path = known.get("path")   # written by an unreleased build as one path
            fold.identity_paths = ([str(x) for x in paths] if isinstance(paths, list)
                                   else [path] if isinstance(path, str) else [])
        return fold


#: hex digits of a keyed input digest the checkpoint keeps (64 bits: a chance collision
#: between two of a ledger's inputs is negligible, and the record stays small)
_SHORT = 16


class _Inputs:
    """A dataset's short input digests, in order of first use: the checkpoint's text as
    loaded (searched, not split: a load stays cheap with many inputs) plus those added."""

    def __init__(self, loaded: str = "") -> None:
        self._loaded = loaded
        self._added: dict[str, None] = {}

    def has(self, short: str) -> bool:
        if short in self._added:
            return True
        at = self._loaded.find(short)
        while at >= 0 and at % _SHORT:  # a match across two digests does not count
            at = self._loaded.find(short, at + 1)
        return at >= 0

    def add(self, short: str) -> None:
        if not self.has(short):
            self._added[short] = None

    def text(self) -> str:
        return self._loaded + "".join(self._added)


def _short_digest(digest: Any) -> str | None:
    """The checkpoint's short form of a recorded input digest ("hmac-sha256:<hex>")."""
    if not isinstance(digest, str) or not digest:
        return None
    return digest.rsplit(":", 1)[-1][:_SHORT].ljust(_SHORT, "0")


def _stamp(st: os.stat_result, birth: int = 0) -> list[int]:
    """The ledger file's identity and last change: any write outside dpcli changes it.
    [device, inode, size, ctime], and the birth time where the file system keeps one."""
    return [st.st_dev, st.st_ino, st.st_size, st.st_ctime_ns, *([birth] if birth else [])]


def _original_still_there(fold: _Fold, here: Path) -> str | None:
    """A path the chain recorded for its file where a file is still there that is the one
    the checkpoint names (``fold.origin``) and not ``here``: the original of a copy."""
    if fold.origin is None:
        return None
    for where in fold.identity_paths:
        if Path(where) == here.resolve():
            continue
        try:
            fd = os.open(where, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            if not _other_file(fold.origin, os.fstat(fd), _birth_ns(fd)):
                return where
        finally:
            os.close(fd)
    return None


def _file_if_moved(fold: _Fold, fd: int, real: Path) -> dict[str, Any]:
    """``{"file": …}`` for a reserve or raise entry when the chain never named its file at
    this path (moved on its file system, a bind mount: the same file, so no adoption), so
    that `repair --moved` on a copy made from here finds this original where the chain
    says; {} otherwise. Only on a file its checkpoint was written for (callers refuse a
    relocated one first)."""
    if str(real) in fold.identity_paths:
        return {}
    return {"file": _file_record(_identity(_stamp(os.fstat(fd), _birth_ns(fd))), real)}


def _file_record(identity: list[int], path: Path) -> dict[str, Any]:
    """An identity as the chain records it (a genesis's ``file``, a --moved repair's)."""
    return {"device": identity[0], "inode": identity[1],
            **({"birth_ns": identity[2]} if len(identity) > 2 else {}),
            "path": str(path.resolve())}


def _identity(stamp: list[int]) -> list[int]:
    """A stamp's file identity: device, inode and (when recorded) birth time."""
    return [*stamp[:2], *stamp[4:5]]


def _other_file(recorded: list[int], st: os.stat_result, birth: int) -> bool:
    """Whether ``recorded`` (an identity) names another file than the one open: device or
    inode differ, or both record a birth time and they differ (an inode number reused by a
    restored backup, an overlay copy-up keeping the lower file's inode)."""
    if recorded[:2] != [st.st_dev, st.st_ino]:
        return True
    return len(recorded) > 2 and bool(birth) and recorded[2] != birth


_STATX: Any = None


#: FS_IOC_GETVERSION (_IOR('v', 1, long)): the inode's generation number (ext2/3/4)
_GETVERSION = 0x80087601
#: marks a generation number kept in place of a birth time (birth times in ns stay below it
#: until the year 2116), so the two can never be taken for each other
_GENERATION_MARK = 1 << 62


def _birth_ns(fd: int) -> int:
    """The open file's birth mark: its birth time in ns (statx, Linux), else its inode's
    generation number (marked), else 0. Why: a file's device and inode can recur (an inode
    reused after a delete: a `git checkout` or a restored backup; an overlay copy-up; a
    device number handed out again); its birth time changes with each new file, and where
    the file system keeps none (ext4 with 128-byte inodes) the generation number does
    (tester 17: a git checkout of the ledger and its checkpoint reused the inode and the
    restored, smaller spend was accepted)."""
    birth = _btime(fd)
    if birth:
        return birth
    generation = _generation(fd)
    return _GENERATION_MARK | generation if generation else 0


def _generation(fd: int) -> int:
    """The open file's inode generation number (FS_IOC_GETVERSION), 0 where the file
    system has none to give."""
    with suppress(OSError, ValueError, ImportError):
        import struct

        return int(struct.unpack_from("I", fcntl.ioctl(fd, _GETVERSION, b"\0" * 8))[0])
    return 0


def _btime(fd: int) -> int:
    """The open file's birth time in ns (statx, Linux), 0 where it cannot be had."""
    global _STATX
    if _STATX is False:   # not this system's: asked once
        return 0
    try:
        import ctypes

        if _STATX is None:
            fn = ctypes.CDLL(None, use_errno=True).statx
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint,
                           ctypes.c_void_p]
            fn.restype = ctypes.c_int
            _STATX = fn
        buf = ctypes.create_string_buffer(256)   # struct statx
        if _STATX(fd, b"", 0x1000, 0x800, buf) != 0:   # AT_EMPTY_PATH, STATX_BTIME
            return 0
        raw = buf.raw
        if not int.from_bytes(raw[0:4], sys.byteorder) & 0x800:   # stx_mask: no btime here
            return 0
        sec = int.from_bytes(raw[80:88], sys.byteorder, signed=True)   # stx_btime.tv_sec
        return sec * 1_000_000_000 + int.from_bytes(raw[88:92], sys.byteorder)
    except (OSError, AttributeError, ImportError):
        _STATX = False
        return 0


def _write_checkpoint(real: Path, key: bytes, fold: _Fold, st: os.stat_result | None,
                      birth: int = 0) -> None:
    """Write the keyed checkpoint atomically (temp file, fsync, rename, fsync the folder)."""
    stamp = _stamp(st, birth) if st is not None else None
    if stamp is not None and fold.relocated and fold.origin is not None:
        # still the original's identity: only adopt_moved changes it
        stamp = [*fold.origin[:2], *stamp[2:4], *fold.origin[2:3]]
    body = fold.to_json(stamp)
    body["mac"] = hmac.new(key, canonical(body).encode(), hashlib.sha256).hexdigest()
    head = head_path(real)
    temp = head.with_name(head.name + ".tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            data = (canonical(body) + "\n").encode()
            if os.write(fd, data) != len(data):
                raise OSError(errno.ENOSPC, "short write")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, head)
    except OSError:
        with suppress(OSError):
            temp.unlink()
        raise
    _fsync_dir(real.parent)


def _read_checkpoint(real: Path, key: bytes) -> dict[str, Any] | None:
    """The checkpoint's body if its MAC holds; None when there is none; LedgerError if forged."""
    head = head_path(real)
    try:
        raw = _read_regular(head)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LedgerError(f"{head}: cannot read the ledger's checkpoint: {exc.strerror}") from None
    try:
        body = json.loads(raw)
        mac = body.pop("mac")
        expected = hmac.new(key, canonical(body).encode(), hashlib.sha256).hexdigest()
        good = isinstance(mac, str) and hmac.compare_digest(mac, expected)
    except (ValueError, AttributeError, KeyError, TypeError):
        good = False
    if not good or body.get("format") != CHECKPOINT_FORMAT:
        raise LedgerError(f"{head}: the ledger's checkpoint fails its MAC (edited, damaged, or "
                          "written with another key): restore it; or, if the ledger was not cut "
                          "or rolled back meanwhile, rebuild it from the chain as it is now "
                          "with `dpcli ledger repair --spec SPEC --trust-chain`")
    return body


def _scan(fd: int, checkpoint: dict[str, Any] | None, key: bytes | None, *,
          expect_head: str | None = None, limit: int | None = None) -> _Fold:
    """Fold the file from line 1 (up to byte ``limit``), checking it against the checkpoint."""
    fold = _Fold(key)
    fold.anchor = expect_head
    cp_entries = int(checkpoint["entries"]) if checkpoint is not None else -1

    def at_checkpoint() -> None:
        assert checkpoint is not None
        if (fold.offset, fold.head) != (checkpoint["offset"], checkpoint["head"]):
            fold.problems.append(
                f"line {fold.entries}: the ledger differs from its checkpoint, which recorded "
                f"{checkpoint['entries']} entries ending at byte {checkpoint['offset']} with "
                f"head {checkpoint['head']} (rewritten?)")

    if cp_entries == 0:
        at_checkpoint()
    for raw in _lines(fd):
        if limit is not None and fold.offset >= limit:
            break
        fold.feed(raw)
        if fold.entries == cp_entries:
            at_checkpoint()
    if checkpoint is not None and fold.entries < cp_entries and limit is None:
        fold.problems.append(
            f"the ledger has {fold.entries} entries but its checkpoint recorded {cp_entries} "
            f"(head {checkpoint['head']}): its tail was cut or it was emptied")
    return fold


#: arguments naming a private input's path: --reuse matches those inputs by their keyed
#: digests (the bytes), so the same file through a hard link or a copy is the same request
_INPUT_PATHS = ("data", "validation")


def reuse_arguments(arguments: Any) -> Any:
    """``arguments`` as ``--reuse`` compares them: without the private inputs' paths."""
    if not isinstance(arguments, dict):
        return arguments
    return {k: v for k, v in arguments.items() if k not in _INPUT_PATHS}


def _canonical(value: Any) -> str:
    """A JSON text that compares equal for equal arguments (key order ignored)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _lines(fd: int) -> Iterator[bytes]:
    """The file's lines from its start, each with its newline (the last one maybe without)."""
    with os.fdopen(os.dup(fd), "rb") as handle:
        handle.seek(0)
        yield from handle


def _load_state(real: Path, fd: int, key: bytes, *, path: Path,
                allow_legacy: bool = False, exclusive: bool = False) -> _Fold:
    """The verified state of the ledger open on ``fd`` (under its lock); LedgerError if bad.

    O(1) when the file is exactly as the checkpoint left it; otherwise the
    whole file is streamed and must verify and contain the checkpointed entries.
    ``allow_legacy``: a ledger without checkpoint and without any genesis (an
    earlier dpcli's) is accepted, for ``ledger init`` to upgrade it.
    ``exclusive`` (the caller holds the exclusive lock): after a full scan that
    passed, the checkpoint is rewritten at once, so that even a run refused
    for its budget leaves the next one O(1).
    """
    checkpoint = _read_checkpoint(real, key)
    st = os.fstat(fd)
    birth = _birth_ns(fd)
    if checkpoint is not None:
        if st.st_size < checkpoint["offset"]:
            raise LedgerError(
                f"{path}: the ledger is {st.st_size} bytes but its checkpoint recorded "
                f"{checkpoint['entries']} entries in {checkpoint['offset']} bytes: its tail was "
                "cut or it was emptied. Restore it from a backup; refusing to use it")
        # a checkpoint from before it kept the input digests is rebuilt once by a writer
        if (checkpoint["stamp"] == _stamp(st, birth)
                and ("inputs" in checkpoint or not exclusive)):
            return _Fold.from_json(checkpoint, key)
    fold = _scan(fd, checkpoint, key)
    stamp = checkpoint.get("stamp") if checkpoint is not None else None
    # device, inode and birth time: a copy gets a new inode, a file system snapshot keeps
    # the inode on another device, a restored backup may get a reused inode (a new birth
    # time). Fails closed: a remount that renumbers the device costs one `repair --moved`
    fold.relocated = isinstance(stamp, list) and _other_file(_identity(stamp), st, birth)
    if fold.relocated and isinstance(stamp, list):
        fold.origin = _identity(stamp)
    if fold.problems:
        more = len(fold.problems) - 1
        raise LedgerError(
            f"refusing to use a ledger that fails verification: {path}: {fold.problems[0]}"
            + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")
            + "; run `dpcli ledger verify`")
    if checkpoint is None:
        legacy = fold.entries > 0 and not any(s.genesis for s in fold.datasets.values())
        if not (allow_legacy and legacy):
            raise LedgerError(f"{path}: {_no_checkpoint_problem(real, fold)}")
    elif exclusive and not fold.relocated:
        # an optimisation only: the next run would scan again. Not on a copied or moved
        # ledger: the checkpoint keeps the other file's identity until the custodian says
        # this file is the ledger now (`ledger repair --moved`, :func:`adopt_moved`)
        with suppress(OSError):
            _write_checkpoint(real, key, fold, st, birth)
    return fold


def _no_checkpoint_problem(real: Path, fold: _Fold) -> str:
    head = head_path(real)
    if fold.entries == 0:
        return (f"the ledger is empty and its checkpoint {head.name} is missing: emptied? If "
                "nothing was ever spent from it, delete it and its key, then run "
                "`dpcli ledger init`")
    if any(s.genesis for s in fold.datasets.values()):
        return (f"the ledger's checkpoint {head.name} is missing (deleted?): restore it; or, "
                "if the ledger was not cut or rolled back meanwhile (check its head against "
                "your anchored copy), rebuild it from the chain as it is now with `dpcli "
                "ledger repair --spec SPEC --trust-chain` (recorded in the ledger)")
    return ("the ledger has no genesis entries and no checkpoint (written by an earlier dpcli): "
            "run `dpcli ledger init --spec SPEC` once per dataset to record its genesis")


def moved_message(path: Path) -> str:
    return (f"{path}: this ledger file is not the one its checkpoint was written for (another "
            "device or inode): it was copied (`cp -r` of a project, a backup restored, a "
            "snapshot), moved to another file system, or rewritten as a new file (an editor's "
            "save, rsync; or a file system without stable inode numbers). A copy spends the "
            "same budget a second time, so spending from it is refused; nothing was charged. "
            "If this file is now the dataset's only ledger, run `dpcli ledger repair --spec "
            "SPEC --moved` to say so (recorded in the ledger); otherwise point the spec's "
            "`ledger:` at the original. If it is a restored backup or an older version (git "
            "checkout, tar, rsync), do NOT run --moved: that forgets every run since the "
            "backup; compare `dpcli ledger verify`'s head with one recorded elsewhere first "
            "(docs/ledger.md)")


def relocated(path: Path, dataset: str) -> bool:
    """Whether the ledger at ``path`` is not the file its checkpoint was written for (a
    copy or a move; a shared-lock read, writes nothing)."""
    ledger = Ledger(path, dataset, Budget(1))
    ledger.require_initialised()
    key = read_key(ledger.file)
    with _locked(ledger.file, exclusive=False) as fd:
        return _load_state(ledger.file, fd, key, path=ledger.path).relocated


def adopt_moved(path: Path, dataset: str) -> bool:
    """Record that this file is now the ledger (``ledger repair --moved``): a ``repair`` entry
    of ``dataset`` naming the new file's device and inode, whose append writes the
    checkpoint for it. Returns False (nothing written) when the ledger was not copied or
    moved; LedgerError when it fails verification."""
    ledger = Ledger(path, dataset, Budget(1))
    ledger.require_initialised()
    key = read_key(ledger.file)
    with _locked(ledger.file, exclusive=True) as fd:
        fold = _load_state(ledger.file, fd, key, path=ledger.path, exclusive=True)
        if not fold.relocated:
            return False
        original = _original_still_there(fold, ledger.file)
        if original is not None:
            raise LedgerError(f"{path}: the ledger this file was copied from is still at "
                              f"{original} (the same file its checkpoint was written for): "
                              "adopting the copy would spend the same budget twice. Point "
                              "the spec's `ledger:` at the original, or move or delete it "
                              "first")
        fold.relocated = False   # the one write that gives the checkpoint this file's identity
        entry = ledger._common("repair", fold.entries, fold.head) | {
            "dropped_line": 0, "dropped_bytes": 0,
            "dropped_sha256": hashlib.sha256(b"").hexdigest(),
            "moved": _file_record(_identity(_stamp(os.fstat(fd), _birth_ns(fd))),
                                  ledger.file)}
        _append(ledger.file, fd, key, fold, entry, path=ledger.path)
    return True


def _hard_links_message(real: Path, links: int) -> str:
    return (f"{real}: the ledger file has {links} hard links; dpcli keeps its key and "
            "checkpoint beside one name, so it refuses multiply linked ledgers. Keep one "
            "name and point other spec folders at it with a symlink (ln -s)")


def _missing_message(path: Path, dataset: str, setting: tuple[Path, str] | None) -> str:
    """No ledger at ``path``. A relative ``ledger:`` is taken against the spec's folder, so a
    spec copied elsewhere looks for a ledger there: ``ledger init`` would then start a
    second, separate budget for the same data. The message says so before offering it."""
    where = ""
    if setting is not None:
        spec, value = setting
        where = (f" (the spec {spec} says `ledger: {value}`"
                 + (", taken relative to the spec's folder" if not Path(value).expanduser()
                    .is_absolute() else "") + ")")
    return (f"{path}: no ledger here{where}. If dataset {dataset!r} was charged before (a spec "
            "copied or moved from another folder, a ledger moved or deleted), point the "
            "spec's `ledger:` at that ledger file, or restore it, before spending anything. "
            f"`dpcli ledger init --spec SPEC` starts a new, separate budget for dataset "
            f"{dataset!r}: right only if no ledger for it exists anywhere")


def _no_genesis_message(path: Path, dataset: str) -> str:
    return (f"{path}: dataset {dataset!r} has no genesis in this ledger. If it has never been "
            "released, run `dpcli ledger init --spec SPEC`; if the spec's dataset id was "
            "renamed, restore the old id (a new id is not a fresh budget)")


def _total_message(dataset: str, declared: Budget, recorded: Budget) -> str:
    """The spec's total is not the recorded one. A spec that declares less is one left
    behind by ``ledger raise`` (or lowered by hand): the fix is the spec, not another raise."""
    if declared.fits_in(recorded):
        wanted = f"epsilon: {format_amount(recorded.epsilon)}" + (
            f", delta: {format_amount(recorded.delta)}" if recorded.delta else "")
        return (f"the ledger records a total of {recorded} for dataset {dataset!r} (set by "
                "`dpcli ledger init`, or by a later `dpcli ledger raise`) but the spec still "
                f"declares {declared}: edit the spec's budget: to {{{wanted}}} to match the "
                "recorded total (a total is never lowered), then rerun")
    differ = [f"{name}: the spec {format_amount(d)}, the ledger {format_amount(r)}"
              for name, d, r in (("ε", declared.epsilon, recorded.epsilon),
                                 ("δ", declared.delta, recorded.delta)) if d != r]
    raised = Budget(max(declared.epsilon, recorded.epsilon), max(declared.delta, recorded.delta))
    options = "".join(f" --{option} {format_amount(new)}" for option, new, old in (
        ("epsilon", raised.epsilon, recorded.epsilon), ("delta", raised.delta, recorded.delta))
        if new != old)
    lowered = [f"{name}={format_amount(r)}" for name, d, r in (
        ("ε", declared.epsilon, recorded.epsilon), ("δ", declared.delta, recorded.delta)) if d < r]
    keep = (f" and declare the recorded {' and '.join(lowered)} in the spec (a total is never "
            "lowered)" if lowered else "")
    return (f"the spec declares a total of {_both(declared)} for dataset {dataset!r} but the "
            f"ledger records {_both(recorded)} ({'; '.join(differ)}), fixed at `dpcli ledger "
            "init` or the last `dpcli ledger raise`; to raise it deliberately, run `dpcli ledger "
            f"raise --spec SPEC{options}`{keep}; otherwise declare the recorded total")


def _both(budget: Budget) -> str:
    """ε and δ, δ shown even when 0 (a message about which of the two differs)."""
    return f"ε={format_amount(budget.epsilon)}, δ={format_amount(budget.delta)}"


def _append(real: Path, fd: int, key: bytes, fold: _Fold, entry: dict[str, Any], *,
            path: Path) -> str:
    """Append one line (under the exclusive lock), fsync it, rewrite the checkpoint.

    On any failure (ENOSPC, EIO, a short write, a checkpoint that cannot be
    written) the file is cut back to its previous length, so no torn or
    uncheckpointed line stays; raises LedgerError naming the cause.
    """
    try:
        entry = json.loads(canonical(entry))  # the form verify will read back
    except (TypeError, ValueError) as exc:
        raise TypeError(f"ledger entries must be JSON-serialisable: {exc}") from None
    digest = entry_hash(entry)
    line = (canonical({"entry": entry, "hash": digest}) + "\n").encode("utf-8")
    before = fold.offset
    try:
        written = os.write(fd, line)
        if written != len(line):
            raise OSError(errno.ENOSPC, f"short write ({written} of {len(line)} bytes)")
        os.fsync(fd)
        fold.feed(line)
        _write_checkpoint(real, key, fold, os.fstat(fd), _birth_ns(fd))
    except OSError as exc:
        _roll_back(fd, before)
        raise LedgerError(f"{path}: cannot append to the ledger ({exc.strerror or exc}); it was "
                          f"rolled back to its previous {before} bytes: nothing was recorded"
                          ) from exc
    return digest


def _roll_back(fd: int, length: int) -> None:
    with suppress(OSError):  # if even this fails, the next run re-verifies the whole file
        os.ftruncate(fd, length)
        os.fsync(fd)


def _find_torn(real: Path, fd: int, key: bytes, path: Path) -> Repair | None:
    fold = _scan(fd, _read_checkpoint(real, key), key)
    if not fold.problems:
        return None
    last = fold.entries
    if not all(p.startswith(f"line {last}: ") for p in fold.problems):
        raise LedgerError(f"{path}: the damage is not only a torn last line ({fold.problems[0]}"
                          "); `ledger repair` drops only that: restore the ledger from a backup")
    kept = fold.last_start
    with os.fdopen(os.dup(fd), "rb") as handle:
        handle.seek(kept)
        dropped = handle.read()
    try:
        _parse(dropped.rstrip(b"\n"))
        torn = not dropped.endswith(b"\n")
    except ValueError:
        torn = True
    if not torn:
        raise LedgerError(f"{path}: the last line is complete JSON but fails verification "
                          f"({fold.problems[0]}): it is not torn; restore the ledger from a backup")
    checkpoint = _read_checkpoint(real, key)
    if not dropped.endswith(b"\n"):
        # a whole, valid entry that lost only its final newline is completed, never dropped:
        # it may record a charge (and the checkpoint may count it)
        end = os.fstat(fd).st_size
        whole = _scan_bytes(fd, end, b"\n", checkpoint, key)
        if not whole.problems:
            return Repair(last, dropped, end, newline_only=True)
    prefix = _scan(fd, checkpoint, key, limit=kept)
    if prefix.problems:
        raise LedgerError(f"{path}: without its last line the ledger still fails verification "
                          f"({prefix.problems[0]}); restore it from a backup")
    if checkpoint is not None and int(checkpoint["entries"]) > prefix.entries:
        # the checkpoint is written after a line is complete: it counts this line, so the
        # line was whole once and dropping it would un-spend a run
        raise LedgerError(f"{path}: the checkpoint records line {last} as written; it was "
                          "damaged after the fact, not torn by a crash: restore the ledger from "
                          "a backup")
    return Repair(last, dropped, kept)


def _scan_bytes(fd: int, end: int, extra: bytes, checkpoint: dict[str, Any] | None,
                key: bytes) -> _Fold:
    """The fold of the file's first ``end`` bytes followed by ``extra`` (nothing is written)."""
    import tempfile

    with tempfile.TemporaryFile() as tmp:
        with os.fdopen(os.dup(fd), "rb") as handle:
            handle.seek(0)
            remaining = end
            while remaining > 0:
                chunk = handle.read(min(remaining, 1 << 20))
                if not chunk:
                    break
                tmp.write(chunk)
                remaining -= len(chunk)
        tmp.write(extra)
        tmp.flush()
        return _scan(tmp.fileno(), checkpoint, key)


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
def _locked(real: Path, *, exclusive: bool) -> Iterator[int]:
    """Open the ledger file and hold ``flock`` on that descriptor (exclusive for writers).

    The lock belongs to the file (its inode), whatever path reached it. After
    locking, the descriptor must still be the file at ``real`` (a rename may
    have replaced it while we waited: then try again). A file with several
    hard links is refused. An OSError becomes a LedgerError naming the file.
    """
    # O_NONBLOCK: a FIFO put at the ledger's path is refused below instead of hanging the
    # open (a regular file's reads and writes ignore the flag)
    flags = ((os.O_RDWR | os.O_APPEND if exclusive else os.O_RDONLY) | os.O_CLOEXEC
             | os.O_NONBLOCK)
    fd = -1
    try:
        for _ in range(_LOCK_TRIES):
            fd = os.open(real, flags)
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            st = os.fstat(fd)
            try:
                now = os.stat(real)
            except FileNotFoundError:
                now = None
            if now is not None and (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                break
            os.close(fd)
            fd = -1
        else:
            raise LedgerError(f"{real}: the ledger file keeps being replaced while dpcli waits "
                              "for its lock; refusing to use it")
        if not stat.S_ISREG(st.st_mode):
            raise LedgerError(f"{real}: cannot use the ledger: not a regular file")
        if st.st_nlink > 1:
            raise LedgerError(_hard_links_message(real, st.st_nlink))
        yield fd
    except OSError as exc:
        raise LedgerError(f"{real}: cannot use the ledger: {exc.strerror or exc}") from exc
    finally:
        if fd >= 0:
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


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_TOTALS = {"total_epsilon": lambda v: _is_amount(v) and v > 0,
           "total_delta": lambda v: _is_amount(v) and v < 1}
_FIELDS: dict[str, dict[str, Any]] = {
    "common": {"seq": _is_int, "kind": lambda v: v in KINDS, "time": _is_str,
               "dpcli_version": _is_str, "dataset": _is_str, "prev": _is_str},
    "genesis": _TOTALS | {"key_fingerprint": _is_str},
    "raise": dict(_TOTALS),
    "reserve": {"run_id": _is_str, "command": _is_str, "arguments": lambda v: isinstance(v, dict),
                "breakdown": lambda v: isinstance(v, list), "seeded": lambda v: isinstance(v, bool),
                "epsilon": lambda v: _is_amount(v) and v > 0, "delta": _is_amount} | _TOTALS,
    "complete": {"run_id": _is_str, "outputs": lambda v: isinstance(v, list)},
    "failed": {"run_id": _is_str, "reason": _is_str},
    "aborted": {"run_id": _is_str, "reason": _is_str,
                "epsilon": lambda v: _is_amount(v) and v > 0, "delta": _is_amount},
    "repair": {"dropped_line": _is_int, "dropped_bytes": _is_int, "dropped_sha256": _is_str},
}


def _field_problems(entry: dict[str, Any]) -> list[str]:
    checks = dict(_FIELDS["common"])
    if entry.get("kind") in KINDS:
        checks |= _FIELDS[entry["kind"]]
    return [f"field {name!r} is missing or has a wrong value"
            for name, ok in checks.items() if name not in entry or not ok(entry[name])]
