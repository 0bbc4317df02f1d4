"""The one door to private data: pre-checks, reservation, noise, reads and the release.

A spending run goes through :class:`Spend` and nothing else (docs/design.md
rule 5, "the life of a spending run"):

1. :meth:`Spend.prepare` checks everything that needs no private value (the
   outputs, the file's structure, the budget), runs the pre-charge value check
   and shows the plan. The source it opens is private to the object.
2. :meth:`Spend.dry_run` answers ``--dry-run``: does the plan fit?
3. :meth:`Spend.charged` reserves the plan in the ledger and only then yields a
   :class:`Charged`, the only object that can read the data
   (:meth:`Charged.statistics`, :meth:`Charged.passes`) and release a result
   (:meth:`Charged.release`). Leaving the block commits the outputs and
   completes the ledger entry; an error records the run as failed and the
   charge stays — except a data error the pre-charge check reports, met
   before the first noise draw: aborted, the charge given back
   (:func:`dpcli.run.charged`).

So charge-before-read is structural: no statistics pass can start without a
reservation.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dpcli.api.report import Reporter, Silent
from dpcli.budget import Budget
from dpcli.data.source import BatchSource, Source
from dpcli.errors import UsageError
from dpcli.io import path_state
from dpcli.mechanisms import Plan, Spending
from dpcli.spec import Spec

if TYPE_CHECKING:
    from dpcli.forecast import Forecast
    from dpcli.protect import Hashed

#: a command's forecast once n is known (dpcli.forecast; None: the command has none)
ForecastAt = Callable[[int], "Forecast | None"]


@dataclass(frozen=True)
class DryRun:
    """What a run would spend and whether it fits in what the ledger has left."""

    dataset: str
    plan: Plan
    remaining: Budget
    budget: Budget
    neighbouring: str
    extra: dict[str, Any] = field(default_factory=dict)
    forecast: Forecast | None = None
    command: str = ""

    @property
    def fits(self) -> bool:
        return self.plan.total.fits_in(self.remaining)

    def to_json(self) -> dict[str, Any]:
        from dpcli.relation import describe

        neighbours, protected, public = describe(self.neighbouring)
        # led by the keys every command's line leads with, so a cron log has one shape
        return {"command": self.command, "dry_run": True, "dataset": self.dataset,
                "planned": self.plan.total.to_json(), "neighbouring": self.neighbouring,
                "relation": {"neighbours": neighbours, "protected": protected,
                             "public": public},
                "breakdown": self.plan.to_json(), "remaining": self.remaining.to_json(),
                "fits": self.fits, **forecast_json(self.forecast), **self.extra}


def forecast_json(fc: Forecast | None) -> dict[str, Any]:
    """The keys a forecast adds to ``--dry-run --json`` (the same ``forecast`` object as
    ``dpcli plan --json``: metric → {expected, interval, level}; and the verdict)."""
    if fc is None:
        return {}
    return {"forecast": {k: m.to_json() for k, m in fc.metrics.items()},
            "verdict": fc.verdict.to_json(), "forecast_method": fc.method, "forecast_n": fc.n}


def recorded_runs(spec: Spec) -> list[Any]:
    """The dataset's runs in its ledger (none when the ledger does not exist yet)."""
    from dpcli.run import open_ledger

    ledger = open_ledger(spec)
    if not ledger.file.exists():
        return []
    return list(ledger.summary(runs=True).runs)


def forecast_of(command: str, spec: Spec, section: Any, **context: Any) -> ForecastAt | None:
    """``n ↦`` the command's forecast (:mod:`dpcli.forecast`), or None when it has none yet.

    For :meth:`Spend.prepare`'s ``forecast``: computed from public facts once n
    is known (costs nothing, reads no data).
    """
    from dpcli.forecast import forecast, has_forecast

    if not has_forecast(command):
        return None
    return lambda n: forecast(command, spec, section, n, **context)


def resolve_section(spec: Spec, name: str, default: type, epsilon: float | None,
                    columns: Sequence[str] | str | None = None, **overrides: Any) -> Any:
    """The spec's section for ``name`` with this run's overrides (``None`` keeps the spec's).

    Without a section in the spec, an ``epsilon`` is enough to run with the
    defaults. ``columns`` (a sequence, or comma-separated text) must name
    declared columns, each once.
    """
    from dpcli.spec import override

    base = spec.sections.get(name)
    if base is None:
        if epsilon is None:
            spec.section(name)  # raises: names the missing section and the file
        base = default(epsilon=epsilon)
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",") if c.strip()]
    cols = tuple(columns) if columns else None
    listed = cols or ()
    for i, c in enumerate(listed):
        if not spec.schema.has(c):
            raise UsageError(f"--columns: {c!r} is not declared in the schema of {spec.path}")
        if c in listed[:i]:
            raise UsageError(f"--columns: {c!r} is listed twice")
    return override(base, epsilon=epsilon, columns=cols, **overrides)


class Spend:
    """A spending run before its charge: the checked source, the plan, and n.

    Build it with :meth:`prepare`. ``plan`` may be refined with :meth:`replan`
    before the charge (a plan that depends on n is built inside ``prepare``).
    """

    def __init__(self, spec: Spec, plan: Plan, source: Source, n: int, data: Path | str, *,
                 command: str, reporter: Reporter, neighbouring: str,
                 companions: dict[str, Companion] | None = None,
                 forecast: Forecast | None = None) -> None:
        self.spec = spec
        self.forecast = forecast
        self.plan = plan
        self.n = n
        self._source = source
        self._companions = companions if companions is not None else {}
        self._data = data
        self.command = command
        self.reporter = reporter
        self.neighbouring = neighbouring
        self._outputs: list[Path] = []  # the output files, checked again under --reuse
        self._expected: dict[str, tuple[int, ...] | None] = {}

    @classmethod
    def prepare(cls, spec: Spec, plan: Plan | Callable[[int], Plan], data: Path | str,
                columns: Sequence[str], *, command: str, reporter: Reporter | None = None,
                outputs: Sequence[Path | None] = (),
                inputs: Sequence[tuple[str, Any]] = (), total: Budget | None = None,
                engine: str = "local", neighbouring: str | None = None,
                dry_run: bool = False,
                companions: dict[str, Companion] | None = None,
                forecast: ForecastAt | None = None) -> Spend:
        """Every check before the charge; the plan is shown.

        ``outputs`` must be writable and replace none of the protected files:
        the spec and the files it names, the ledger and its companions,
        ``data`` and the command's other ``inputs`` ((what, path) pairs: a
        model, a features or validation file). The file is checked against
        the schema and the budget (a dry run skips the budget look: it says
        whether the plan fits). ``plan`` may be a function of the record count
        n (public under replace-one), with its ``total`` given. ``companions``
        holds the run's other private inputs (a validation file), opened by
        :meth:`Companion.open` — possibly while the plan is made. ``forecast``
        (:func:`forecast_of`) gives the release's forecast from n: shown right
        after the plan, carried by the dry run and recorded in the envelope.
        """
        from dpcli import NEIGHBOURING_RELATION, protect
        from dpcli.io import Outputs
        from dpcli.run import REUSE, prepare_source

        reporter = reporter or Silent()
        real = [Path(p) for p in outputs if p is not None]
        if REUSE.get() and not real:
            # --reuse finds an earlier release by its files: with none, every rerun would
            # spend again while the user believes it reuses (tester 12: evaluate without
            # --out, three --reuse runs, three charges)
            raise UsageError(f"--reuse finds an earlier release by the files it wrote, and this "
                             f"{command} run writes none: give --out FILE to make the release "
                             "reusable, or drop --reuse")
        checked = dry_run or not REUSE.get()   # else under --reuse's lock (Spend.charged)
        if real:
            protected = [*protect.spec_protected(spec), *protect.inputs("the input data", data),
                         *inputs]
            Outputs().check_writable(*real, protected=protected)
            if checked:
                protect.check_replacements(real, command, lambda: recorded_runs(spec))
            # else under --reuse, once the request's lock is held (Spend.charged): an identical
            # run may be writing these outputs now, and its record decides what they are
        if isinstance(plan, Plan):
            total = plan.total
        elif total is None:
            raise TypeError("a plan that depends on n needs its total")
        source, n = prepare_source(spec, data, columns, total, dry_run=dry_run, engine=engine)
        made = plan if isinstance(plan, Plan) else plan(n)
        relation = neighbouring or NEIGHBOURING_RELATION
        reporter.plan(spec, made, relation)
        fc = None
        if forecast is not None:
            try:
                fc = forecast(n)
            except Exception as exc:  # advisory: a failing forecast must not block the run
                reporter.warn(f"no forecast for this run ({type(exc).__name__}: {exc})")
        if fc is not None:
            show = getattr(reporter, "forecast", None)  # a reporter may render it itself (-v)
            if callable(show):
                show(fc)
            else:
                for line in fc.lines():
                    reporter.say(line)
        spend = cls(spec, made, source, n, data, command=command, reporter=reporter,
                    neighbouring=relation, companions=companions, forecast=fc)
        spend._outputs = real
        if real and checked:
            spend._saw_outputs()
        return spend

    def dry_run(self, extra: dict[str, Any] | None = None) -> DryRun:
        """What this run would spend against what remains (reads the ledger, charges nothing)."""
        from dpcli.run import open_ledger

        summary = open_ledger(self.spec).summary(runs=False)
        if summary.relocated:   # the run itself would be refused: the dry run says so
            from dpcli.errors import LedgerError
            from dpcli.ledger import moved_message

            raise LedgerError(moved_message(self.spec.ledger_path))
        return DryRun(self.spec.dataset, self.plan, summary.remaining, summary.total,
                      self.neighbouring, dict(extra or {}), self.forecast, self.command)

    def _generator(self, seed: int | None, arguments: dict[str, Any]) -> np.random.Generator:
        """OS entropy, or a seeded stream with a warning (docs/design.md, "seeded runs").

        A seeded stream (:func:`dpcli.seeding.seeded_stream`) is keyed with the
        ledger's secret key and derived from the command, its ``arguments``,
        the spec's digest and the input's keyed fingerprint: the same seed
        reproduces a run on the same data and gives independent noise anywhere
        else. The seed is never written to the ledger or the outputs.
        """
        from dpcli.fingerprint import input_digest
        from dpcli.ledger import read_key
        from dpcli.mechanisms import make_rng
        from dpcli.seeding import seeded_stream

        if seed is None:
            return make_rng(None)
        self.reporter.warn(
            "--seed makes this run's noise reproducible by whoever holds the seed and the "
            "ledger key, on this input with these parameters only. Use it for tests and "
            "benchmarks only; the run is marked 'seeded'.")
        key = read_key(self.spec.ledger_path)  # LedgerError naming the key file when missing
        return make_rng(seeded_stream(key, seed, command=self.command, arguments=arguments,
                                      spec_digest=self.spec.digest,
                                      input_fingerprint=input_digest(self.spec.ledger_path,
                                                                     self._data)))

    @contextmanager
    def charged(self, arguments: dict[str, Any], *, seed: int | None = None,
                rng: np.random.Generator | None = None) -> Iterator[Charged]:
        """Reserve the plan in the ledger, then yield the run's only access to the data.

        ``arguments`` are recorded in the ledger (and key a seeded stream and
        ``--reuse``). ``rng`` replaces the generator (for tests that compare
        with an in-memory fit). On a clean exit the outputs are committed and
        the entry completed — only if every planned step was drawn from
        :attr:`Charged.plan` (else :class:`~dpcli.mechanisms.PlanMisuse`, an
        internal error, with nothing written).
        """
        from dpcli.io import Outputs
        from dpcli.run import charged

        generator = rng if rng is not None else self._generator(seed, arguments)
        outputs = Outputs(digest=True, expected=self._expected)
        with charged(self.spec, self.plan, command=self.command, arguments=arguments,
                     input_path=self._data, seeded=seed is not None,
                     neighbouring=self.neighbouring, on_wait=self._waiting,
                     before_charge=self._check_replacements, outputs=self._outputs,
                     on_claimed=self._outputs_claimed) as charge, outputs:
            self._shared_input(charge.reservation.shared_with)
            run = Charged(self, charge, generator, outputs, seeded=seed is not None)
            # a data error before any noise (no step drawn, or the generator untouched: a
            # trainer may draw its steps before its first pass), with nothing written, may end
            # the run as aborted, its reservation given back (dpcli.run.charged)
            start = _rng_state(generator)
            charge.released = lambda: (len(run.plan.undrawn()) < len(list(run.plan))
                                       and _rng_state(generator) != start)
            charge.recheck = self._recheck
            yield run
            # every planned step drawn, or nothing is released: the ledger's charge must be
            # what the mechanisms spent (raised before the commit: nothing written, the run
            # recorded as failed, the charge kept)
            run.plan.check_spent()
            charge.outputs = outputs.commit()
            charge.digests = dict(outputs.digests)
            charge.summary = run.summary

    def _shared_input(self, others: Sequence[str]) -> None:
        """Warn when this input was charged under other dataset ids of the same ledger: each
        id has its own budget, and dpcli does not add them up (docs/ledger.md)."""
        if not others:
            return
        ids = ", ".join(repr(o) for o in others)
        self.reporter.warn(
            f"this input file was charged before under dataset id {ids} in this ledger "
            f"({self.spec.ledger_path}), and now under {self.spec.dataset!r}: each id has a "
            "budget of its own, so the privacy loss of the people in it is the sum of the "
            "ε (and δ) spent under every id, which dpcli does not add up for you. If it is "
            "the same data, spend it under one dataset id")

    def _waiting(self, lock: Path) -> None:
        self.reporter.say(f"waiting for an identical --reuse run of `dpcli {self.command}` "
                          f"in progress (lock {lock}): its release will be reused if it "
                          "completes")

    def _check_replacements(self, runs: list[Any], hashed: Hashed) -> None:
        """The outputs replace only their own recorded bytes (:func:`dpcli.protect.
        check_replacements`): under --reuse, checked once the request's lock is held, on the
        ``runs`` its look read and the outputs it ``hashed`` (neither is read twice)."""
        from dpcli import protect

        if self._outputs:
            protect.check_replacements(self._outputs, self.command, lambda: runs,
                                       hashed=hashed)
        self._saw_outputs()

    def _outputs_claimed(self) -> None:
        """Once this run holds its outputs' locks: if another run wrote one of them since the
        checks (it finished between them and the claim), check the replacements again, so a
        file that is not this command's own is refused before the charge, not after it."""
        from dpcli import protect
        from dpcli.io import refuse_special, refuse_symlink

        changed = [p for p in self._outputs
                   if path_state(p) != self._expected.get(os.path.abspath(p))]
        for p in changed:
            refuse_special(p)
            refuse_symlink(p)
        if changed:
            protect.check_replacements(self._outputs, self.command,
                                       lambda: recorded_runs(self.spec))
            self._saw_outputs()

    def _saw_outputs(self) -> None:
        """Note what each output path holds once its checks passed: the commit replaces a
        path only if it still holds that (:attr:`dpcli.io.Outputs.expected`)."""
        self._expected.update({os.path.abspath(p): path_state(p) for p in self._outputs})

    def _recheck(self) -> None:
        """The full pre-charge check of the main input, then of each companion (raises the
        first DataError); a source that checked its values before the charge (Spark) has
        nothing to re-check."""
        sources = [self._source, *(c.source for c in self._companions.values())]
        for source in sources:
            recheck = getattr(source, "recheck", None)
            if recheck is not None:
                recheck()

    def data_report(self) -> list[str]:
        """What the data layer clamped, mapped or imputed (exact private figures: for the
        custodian who asks, never in an output)."""
        return list(self._source.report.lines())


class Charged:
    """A reserved run: its noise, its reads of the data, its release.

    :attr:`plan` is the run's :class:`~dpcli.mechanisms.Spending` plan: the
    algorithm draws each step's budget from it once (``plan.draw(name)``, where
    the noise is drawn), and the run releases only if every step was drawn.
    """

    def __init__(self, spend: Spend, charge: Any, rng: np.random.Generator, outputs: Any, *,
                 seeded: bool) -> None:
        self._spend = spend
        self._charge = charge
        self.rng = rng
        self._outputs = outputs
        self.seeded = seeded
        self.summary: dict[str, Any] = {}
        self._plan = Spending(spend.plan)

    @property
    def run_id(self) -> str:
        return str(self._charge.run_id)

    @property
    def plan(self) -> Spending:
        """The reserved plan, handing out each step's budget once (see the class)."""
        return self._plan

    def statistics(self, request: Any, label: str = "reading") -> Any:
        """The run's statistics pass (counts, sums, histograms) by the source's engine."""
        from dpcli.stats import get_engine

        source = self._spend._source
        with self._spend.reporter.progress(label, source.num_rows_hint()) as advance:
            return get_engine(source.engine).compute(source, request, rng=self.rng,
                                                     progress=advance)

    def passes(self, columns: Sequence[str], label: str = "reading", *,
               companion: str | None = None) -> Pass:
        """One more pass over the encoded records (encoded ahead on every core, in order);
        of the named companion input instead of the main one if ``companion`` is given.
        Iterate it for the batches, or :meth:`Pass.map` a function over them on every core."""

        if companion is None:
            source = self._batches()
        else:
            opened = self._spend._companions[companion].source
            assert opened is not None, f"the {companion} input was never opened"
            source = self._batches(opened)
        return Pass(self._spend.reporter, label, source, columns, self.rng)

    def raw_passes(self, columns: Sequence[str], label: str = "reading") -> Iterator[Any]:
        """One pass over the raw Arrow batches of ``columns`` (for releases that need the
        values before the schema's encoding, e.g. domain suggestions)."""
        source = self._batches()
        with self._spend.reporter.progress(label, source.num_rows_hint()) as advance:
            for raw, _ in source.raw_batches(columns, rng=self.rng):
                advance(raw.num_rows)
                yield raw

    def fold(self, columns: Sequence[str], fn: Callable[[Any], np.ndarray],
             add: Callable[[np.ndarray, np.ndarray], None], label: str = "scoring") -> int:
        """One pass: ``add(fn(batch), label codes)`` per batch, nothing kept between batches;
        returns the record count (a DataError for a file with no rows)."""
        from dpcli.predict import fold

        source = self._batches()
        with self._spend.reporter.progress(label, source.num_rows_hint()) as advance:
            return fold(source, tuple(columns), fn, add, rng=self.rng, progress=advance)

    def batch_source(self, columns: Sequence[str]) -> Callable[[], Iterator[Any]]:
        """A function that starts a fresh pass (for algorithms that make several)."""

        source = self._batches()
        return lambda: _encoded(source, columns, self.rng)

    def _batches(self, source: Source | None = None) -> BatchSource:
        """The source as one this process reads batch by batch (the local engine's)."""
        source = self._spend._source if source is None else source
        if not isinstance(source, BatchSource):
            raise UsageError(f"this step reads the data batch by batch, which the "
                             f"{source.engine} engine does not; use --engine local")
        return source

    def envelope(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The released artefact wrapped with this run's spec, spend and ledger entry."""
        from dpcli.io import envelope

        spend = self._spend
        out = envelope(kind, payload, dataset=spend.spec.dataset,
                       spec_digest=spend.spec.digest, epsilon=spend.plan.total.eps,
                       delta=spend.plan.total.dlt, run_id=self.run_id, seeded=self.seeded,
                       neighbouring=spend.neighbouring)
        if spend.forecast is not None:   # what was expected before the spend (public)
            out["forecast"] = spend.forecast.to_json()
        return out

    def write_bytes(self, out: Path, data: bytes) -> None:
        """Stage ``data`` for ``out`` (see :meth:`write`)."""
        self._outputs.write_bytes(out, data)

    def write(self, out: Path, text: str) -> None:
        """Stage ``text`` for ``out``; every staged output is renamed into place together when
        the run ends cleanly (nothing partial otherwise)."""
        self._outputs.write_text(out, text)

    def stage(self, out: Path, *, private: bool = False) -> Path:
        """A temporary path to write ``out`` to, renamed into place with the other outputs."""
        return Path(self._outputs.stage(out, private=private))

    def check_model(self, model: Any) -> dict[str, Any]:
        """Check a released binary model for a degenerate output (post-processing, free): warn
        and return the payload entry that records the verdict ({} when not checkable)."""
        from dpcli.algorithms.degenerate import check, check_cells, check_ensemble

        if hasattr(model, "has_values_in_no_node"):
            verdict = check_cells(model)
        elif hasattr(model, "rounds"):   # a boosted ensemble (brc)
            verdict = check_ensemble(model)
        else:
            verdict = check(model)
        if verdict is None:
            return {}
        problem = verdict.problem()
        if problem is not None:
            self._spend.reporter.warn(problem)
        return {"degeneracy": verdict.to_json()}


class Pass(Iterator[Any]):
    """One pass over a source's encoded records, started when it is iterated or mapped.

    Iterating yields the batches in file order (encoded on every core). :meth:`map`
    yields ``fn(batch)`` in file order with ``fn`` run on the pass's worker pool too
    (:meth:`dpcli.data.DataSource.map_encoded`): for per-batch work such as scoring
    rows with a released model, which would otherwise run in the consumer's thread.
    """

    def __init__(self, reporter: Reporter, label: str, source: BatchSource,
                 columns: Sequence[str], rng: np.random.Generator) -> None:
        self._reporter = reporter
        self._label = label
        self._source = source
        self._columns = tuple(columns)
        self._rng = rng

    _batches: Iterator[Any] | None = None

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        if self._batches is None:
            self._batches = self.map(lambda batch: batch)
        return next(self._batches)

    def close(self) -> None:
        """Stop the pass early (its reader and workers end here, not at garbage collection)."""
        close = getattr(self._batches, "close", None)
        if close is not None:
            close()

    def map(self, fn: Callable[[Any], Any]) -> Iterator[Any]:
        """``fn(batch)`` for every batch, in file order, computed on every core."""
        source = self._source
        with self._reporter.progress(self._label, source.num_rows_hint()) as advance:
            for n, result in _encoded(source, self._columns, self._rng,
                                      lambda batch: (batch.n, fn(batch))):
                advance(n)
                yield result


class Companion:
    """Another private input of the run (validate's validation file): opened and checked
    before the charge like the main input, read only through :meth:`Charged.passes`."""

    def __init__(self) -> None:
        self.source: Source | None = None
        self.n = 0

    def open(self, spec: Spec, data: Path | str, columns: Sequence[str], total: Budget, *,
             dry_run: bool) -> int:
        """Run the pre-charge checks on ``data``; return its record count (public)."""
        from dpcli.run import prepare_source

        self.source, self.n = prepare_source(spec, data, columns, total, dry_run=dry_run)
        return self.n

    def data_report(self) -> list[str]:
        return [] if self.source is None else list(self.source.report.lines())


def _rng_state(rng: np.random.Generator) -> object:
    """The generator's state (equal states: no number was drawn in between); a fresh object,
    unequal to any other, when it can not be read (then the run counts as having drawn)."""
    import json

    try:  # as JSON text: a state may hold arrays, which do not compare as one truth value
        return json.dumps(rng.bit_generator.state, sort_keys=True,
                          default=lambda a: np.asarray(a).tolist())
    except (TypeError, ValueError):  # an exotic generator: assume it drew
        return object()


def with_schema(spec: Spec, schema: Any) -> Spec:
    """``spec`` with another schema (a selection's, or token columns capped for this run)."""
    return replace(spec, schema=schema)


def _encoded(source: Any, columns: Sequence[str], rng: np.random.Generator,
             fn: Callable[[Any], Any] | None = None) -> Iterator[Any]:
    """The encoded batches of one pass (or ``fn`` of each), in file order: encoded (and
    ``fn`` run) on every core when the source can (DataSource.map_encoded), else read one
    batch ahead by a worker thread."""
    parallel = getattr(source, "map_encoded", None)
    if parallel is not None:
        return parallel(columns, fn if fn is not None else (lambda batch: batch), rng=rng)
    from dpcli.data.prefetch import prefetch

    batches = prefetch(source.batches(columns, rng=rng))
    return batches if fn is None else (fn(batch) for batch in batches)
