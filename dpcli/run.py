"""The life of a spending run: validate, charge, release, record (docs/design.md rule 5).

1. Everything that needs no private value is checked first: spec, options,
   output paths, file readable, columns present with compatible types.
2. The record count n (public under replace-one; a plan may depend on it):
   a Parquet footer's, or one parse of a CSV file's record structure (a
   broken record fails here, exit 65, no charge). The keyed digest of the
   input that the ledger records is computed in a thread beside it
   (:func:`dpcli.fingerprint.start_input_digest`). The Spark engine runs its
   full value check here instead.
3. The run's whole planned budget is reserved in the ledger under a lock.
4. Only then are values read and statistics computed, in ONE pass that also
   checks them (labels, numbers, missing values); noise is added.
5. Outputs are committed together and the ledger entry is completed. A
   failure after the charge records a ``failed`` entry and the charge stays,
   with one exception (docs/design.md, rule 5 "aborted runs"): a data error
   met by the pass before anything was released, which the pre-charge check
   would have reported for free, ends the run with exactly that check's
   message and an ``aborted`` entry that gives the reservation back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpcli import NEIGHBOURING_RELATION
from dpcli.budget import Budget
from dpcli.data.location import location_text
from dpcli.data.source import Source
from dpcli.errors import BudgetExhausted, DataError, DpcliError, LedgerError, Reused, UsageError
from dpcli.fingerprint import input_digest
from dpcli.ledger import Ledger, Reservation, RunView
from dpcli.mechanisms import Plan
from dpcli.protect import Hashed
from dpcli.spec import Spec

#: ``--reuse`` for this command (set by :func:`dpcli.cli.common.handle_errors` from the
#: option): an identical completed run whose outputs are unchanged is returned, not redone
REUSE: ContextVar[bool] = ContextVar("dpcli_reuse", default=False)
#: run ids reserved by this command so far (a list that :func:`dpcli.cli.common.handle_errors`
#: sets per command): a failure's ``--json`` object says whether anything was charged
RESERVED: ContextVar[list[str] | None] = ContextVar("dpcli_reserved", default=None)
#: the run ids this command recorded ``complete`` (so that a signal met afterwards is not
#: reported as a failure: the release happened and its charge is spent)
COMPLETED: ContextVar[set[str] | None] = ContextVar("dpcli_completed", default=None)


@dataclass
class Charge:
    """A reservation in progress: outputs and a public summary to record on completion."""

    reservation: Reservation
    outputs: list[Path] = field(default_factory=list)
    #: each output's SHA-256 as written (dpcli.io.Outputs.digests)
    digests: dict[Path, str] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    #: True once the run may have released something (noise drawn for a release): from
    #: then on a data error is a failure and the charge stays (the default: always)
    released: Callable[[], bool] = lambda: True
    #: the full pre-charge check of the run's inputs (raises its DataError): asked on a
    #: data error before any release, to end the run as aborted (None: never aborted)
    recheck: Callable[[], None] | None = None

    @property
    def run_id(self) -> str:
        return self.reservation.run_id


def open_ledger(spec: Spec) -> Ledger:
    return Ledger(spec.ledger_path, spec.dataset, spec.budget,
                  setting=(spec.path, spec.ledger_setting) if spec.ledger_setting else None)


def prepare_source(spec: Spec, data: Path | str, columns: Sequence[str], total: Budget, *,
                   dry_run: bool = False, batch_rows: int = 65_536,
                   engine: str = "local") -> tuple[Source, int]:
    """Open ``data`` under the spec's schema and run every pre-charge check on it.

    Returns the source and its number of records n (public under replace-one:
    a plan may depend on it). ``total`` is what the run will spend.

    ``engine`` picks the source: "local" a :class:`~dpcli.data.DataSource`
    (a local file or folder), "spark" a :class:`~dpcli.stats.spark.SparkSource`
    (a local path or any URI Spark reads: ``s3a://bucket/dir/``, ``hdfs://…``;
    Spark's master and conf come from the spec's ``spark:`` section or
    ``DPCLI_SPARK_MASTER``). Both have the same surface; ``source.engine``
    names the engine that computes its statistics.

    Order matters: the file's structure (no values), then the budget (an
    unlocked look at the ledger, so that a run that cannot fit exits 3 before
    any value is read; the locked check at reservation is the binding one),
    then the record count (the local engine: a Parquet footer's, or a CSV
    file's records parsed without converting a value; the values are checked
    by the statistics pass after the charge, docs/design.md rule 5 "aborted
    runs") or, on Spark and in a dry run, the full validation pass. A dry run
    skips the budget look: it reports whether the plan fits once everything
    else is checked.
    """
    from dpcli.data import DataSource

    source: Source
    if engine == "spark":
        from dpcli.stats.spark import SparkSource

        source = SparkSource(data, spec.schema, config=spec.spark, batch_rows=batch_rows)
    elif engine == "local":
        from dpcli.data.location import is_remote, local_path

        if is_remote(data):
            raise UsageError(f"{data}: the local engine reads local files only; use "
                             "--engine spark for a URI")
        source = DataSource(local_path(data), spec.schema, batch_rows=batch_rows)
    else:
        from dpcli.stats import available_engines

        raise UsageError(f"unknown statistics engine {engine!r} "
                         f"(available: {', '.join(available_engines())})")
    source.check_structure(columns)
    summary = open_ledger(spec).summary(runs=False)
    if not dry_run:
        from dpcli.io import require_ledger_room

        require_ledger_room(spec.ledger_path)
    if summary.relocated and not REUSE.get():
        # refused at its reservation anyway: said before the plan and the forecast, not after
        # (with --reuse an earlier release may still answer: that spends nothing)
        from dpcli.ledger import moved_message

        raise LedgerError(moved_message(spec.ledger_path))
    remaining = summary.remaining
    # with --reuse an identical earlier release may answer without any spend, so the binding
    # check at reservation decides (after the reuse look), not this early one
    if not dry_run and not REUSE.get() and not total.fits_in(remaining):
        raise BudgetExhausted(f"budget exhausted for dataset {spec.dataset!r}: this run needs "
                              f"{total} but only {remaining} remains")
    if engine == "local" and not dry_run:
        from dpcli.fingerprint import start_input_digest

        # the keyed digest the reservation records reads the file once more: it runs in a
        # thread, beside the count below (a CSV's parse), instead of after it
        start_input_digest(spec.ledger_path, data)
    # local: n only; the values are checked by the statistics pass itself, after the charge
    # (one read of the values instead of two), and a bad one ends the run as aborted.
    # Spark: its value check stays a pre-charge job.
    # A dry run spends nothing and is how a custodian checks a file: it keeps the full check
    if isinstance(source, DataSource) and not dry_run:
        n = source.count_records(columns)
    else:
        n = source.check_values(columns)
    if n == 0:  # a release over no rows is noise alone: refuse it rather than charge for it
        raise DataError(f"{location_text(data)}: holds no records (a header only, or an "
                        "empty Parquet file); nothing was charged")
    return source, n


def _reuse(like: Sequence[RunView], hashed: Hashed, dataset: str) -> None:
    """Raise :class:`Reused` if ``like`` (the ledger's completed runs of this exact release:
    command, arguments — ε and output paths included —, spec digest, input digest) holds
    one with every output still there and byte for byte as recorded. Otherwise return: the
    run goes ahead. Each output is hashed once (``hashed`` keeps the digests for the
    replacement check that follows)."""
    from dpcli.protect import output_digest, recorded_location

    for run in like:
        # where the run wrote them (the arguments hold the resolved output paths, so a match
        # writes to the same files whatever folder it runs from), byte for byte as recorded
        outputs = [recorded_location(o) for o in run.outputs]
        if outputs and all(where and Path(where).is_file()
                           and output_digest(where, hashed) == o["sha256"]
                           for where, o in zip(outputs, run.outputs, strict=True)):
            raise Reused(f"reused run {run.run_id[:8]} of {run.time[:19].replace('T', ' ')} "
                         f"UTC: the same release, outputs unchanged "
                         f"({', '.join(outputs)}); nothing spent", run.run_id, outputs,
                         command=run.command, dataset=dataset)


def _found_by_check(charge: Charge, exc: BaseException) -> DataError | None:
    """The pre-charge check's own error when ``exc`` may end the run as aborted, else None.

    Only a DataError raised before anything was released qualifies; then the full check
    of the inputs runs (the one a run made before its charge when it read the data
    twice), and only a problem IT reports counts: its message is the first problem in
    file order by file, column and row, never a value, and never anything the partial
    statistics pass computed. A DataError the check does not reproduce (one of the
    statistics' own) is a failure as before: the charge stays.
    """
    if not isinstance(exc, DataError) or charge.recheck is None or charge.released():
        return None
    try:
        charge.recheck()
    except DataError as found:
        return found
    return None


@contextmanager
def charged(spec: Spec, plan: Plan, *, command: str, arguments: dict[str, Any],
            input_path: Path | str, seeded: bool,
            neighbouring: str = NEIGHBOURING_RELATION,
            on_wait: Callable[[Path], None] | None = None,
            before_charge: Callable[[list[RunView], Hashed], None] | None = None,
            outputs: Sequence[Path] = (),
            on_claimed: Callable[[], None] | None = None
            ) -> Iterator[Charge]:
    """Reserve ``plan.total`` in the ledger, then run the body; record how it ended.

    ``input_path`` is a local file or folder (recorded with its absolute path
    and a keyed digest of its bytes) or a remote URI read by Spark (recorded
    as given, with a keyed digest of its file listing: see
    :func:`dpcli.fingerprint.input_digest`).

    With ``--reuse`` (:data:`REUSE`), an identical completed release whose outputs
    are unchanged raises :class:`Reused` (exit 0) before anything is reserved. The
    look, ``before_charge`` (the outputs' replacement check, done here under --reuse;
    given the dataset's runs and the outputs already hashed, from the look's one read
    of the ledger and of each output),
    the charge and the record are serialised with identical ``--reuse`` requests
    (:func:`dpcli.reuse.serialised`; ``on_wait`` is told when this run has to wait):
    an identical request never charges twice.

    ``outputs`` are claimed (:func:`dpcli.reuse.claimed`) from before the look or the
    charge until the record: a run whose output another live run is writing is refused
    with OutputBusy (exit 75), nothing charged. Without --reuse, ``on_claimed`` is called
    once they are held (the outputs' checks made before the claim may need redoing).

    Raises BudgetExhausted (exit 3) before the body runs when the plan does
    not fit in what remains. If the body raises, a ``failed`` entry is
    appended (with the error's class only: its message can locate private
    values) and the charge stays — unless the error is a DataError raised
    before :attr:`Charge.released` and :attr:`Charge.recheck` (the full
    pre-charge check) finds a problem: then that problem is raised instead
    (its exact message; nothing from the partial pass) and an ``aborted``
    entry gives the reservation back (docs/design.md, rule 5 "aborted runs").
    If the outputs were written but the ``complete`` entry cannot be, a
    LedgerError says exactly that.
    """
    from dpcli.reuse import claimed, sweep_stale

    ledger = open_ledger(spec)
    digest = input_digest(spec.ledger_path, input_path)
    # --reuse locks of killed runs would stay until the same request ran again
    sweep_stale(ledger.file)
    reuse = REUSE.get()
    lock: AbstractContextManager[Any] = nullcontext()
    if reuse:
        from dpcli.reuse import request_digest, serialised

        # identical --reuse requests run one at a time, from this look to the complete
        # entry: a duplicate started meanwhile finds this run's release (dpcli.reuse)
        lock = serialised(ledger.file, request_digest(
            dataset=spec.dataset, command=command, arguments=arguments,
            spec_digest=spec.digest, input_digest=digest), on_wait)
    with lock, claimed(ledger.file, outputs):
        if not reuse and on_claimed is not None:
            on_claimed()
        if reuse:
            # one read of the ledger and one hash of each output serve the look and the check
            runs, like = ledger.runs_and_completed_like(
                command=command, arguments=arguments, spec_digest=spec.digest,
                input_digest=digest)
            hashed: Hashed = {}
            _reuse(like, hashed, spec.dataset)
            if before_charge is not None:
                before_charge(runs, hashed)
        with _charged(ledger, spec, plan, command=command, arguments=arguments,
                      input_path=input_path, digest=digest, seeded=seeded,
                      neighbouring=neighbouring) as charge:
            yield charge


@contextmanager
def _charged(ledger: Ledger, spec: Spec, plan: Plan, *, command: str,
             arguments: dict[str, Any], input_path: Path | str, digest: str | None,
             seeded: bool, neighbouring: str) -> Iterator[Charge]:
    """The reservation, the body and its record (see :func:`charged`)."""
    from dpcli import signals
    from dpcli.reuse import running

    with ExitStack() as stack:
        # a signal now is raised in _recorded's try, once the line is down and the run holds
        # its lock (held until the record: `ledger show` tells it, running, from a dead one)
        with signals.held(keep=True):
            reservation = ledger.reserve(
                plan, command=command, arguments=arguments, spec_digest=spec.digest,
                input_file=location_text(input_path), input_digest=digest, seeded=seeded,
                neighbouring=neighbouring)
            reserved = RESERVED.get()
            if reserved is not None:
                reserved.append(reservation.run_id)
            stack.enter_context(running(ledger.file, reservation.run_id))
        charge = Charge(reservation)
        with _recorded(ledger, reservation, charge, reserved):
            yield charge


@contextmanager
def _recorded(ledger: Ledger, reservation: Reservation, charge: Charge,
              reserved: list[str] | None) -> Iterator[None]:
    """The body of a reserved run and its ``complete``, ``failed`` or ``aborted`` entry."""
    from dpcli import signals

    try:
        signals.deliver()
        yield
    except BaseException as exc:
        try:
            found = _found_by_check(charge, exc)
        except BaseException as other:  # a signal or an internal error during the re-check
            with signals.held(keep=True):
                ledger.fail(reservation, type(other).__name__)
            raise
        if found is not None:
            with signals.held(keep=True):  # this run is ending anyway
                ledger.abort(reservation, type(found).__name__)
            if reserved is not None:  # a --json error object says: nothing charged
                reserved.remove(reservation.run_id)
            raise found from None
        # only the error's class: a data error's text names columns and row numbers, which
        # are derived from private values and belong on the custodian's stderr, not in a log
        # that may be shared more widely
        with signals.held(keep=True):  # this run is ending anyway
            ledger.fail(reservation, type(exc).__name__)
        raise
    with signals.held():  # a signal held since the outputs' commit ends the run once recorded
        try:
            ledger.complete(reservation, charge.outputs, charge.summary,
                            digests=charge.digests)
        except DpcliError as exc:
            if not charge.outputs:
                raise
            # the outputs exist: saying only "failed" would hide a release that happened
            written = ", ".join(str(p) for p in charge.outputs)
            err = type(exc)(
                f"the outputs were written ({written}) and the charge of {reservation.budget} "
                f"is kept, but the ledger's 'complete' entry could not be recorded ({exc}); "
                f"`dpcli ledger show` lists run {reservation.run_id[:8]} as interrupted")
            err.charge_said = True   # the CLI adds no "recorded as failed" to this one
            raise err from exc
        completed = COMPLETED.get()
        if completed is not None:   # a signal delivered from here on ends a completed run
            completed.add(reservation.run_id)
