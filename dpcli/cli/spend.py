"""Steps every spending command shares: show the noise plan, answer --dry-run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import typer

from dpcli.budget import Budget
from dpcli.cli.ui import UI
from dpcli.mechanisms import Plan
from dpcli.spec import Spec

if TYPE_CHECKING:
    from dpcli.api.spend import DryRun


def show_plan(ui: UI, spec: Spec, plan: Plan, neighbouring: str | None = None) -> None:
    """Print the planned spend before anything runs (data-independent: plan and ε only).

    By default one line per mechanism (how many steps, their total ε and δ, and
    their calibration when all share one) and the total: a plan of 30 numeric
    columns stays a few lines, also in a log. ``-v`` prints every step (mechanism,
    ε share, sensitivity and scale) as a table.
    """
    from dpcli import NEIGHBOURING_RELATION

    relation = neighbouring or NEIGHBOURING_RELATION
    if ui.verbose:
        _plan_table(ui, spec, plan, relation)
    else:
        for line in plan_summary(spec, plan, relation):
            ui.say(line, markup=False)
    show_relation(ui, relation)


def plan_summary(spec: Spec, plan: Plan, relation: str) -> list[str]:
    """The short form of the plan: a title, one line per mechanism family, the total."""
    from dpcli.budget import ZERO, format_amount

    families: dict[str, list[Any]] = {}
    for step in plan:
        families.setdefault(step.mechanism, []).append(step)
    steps = len(plan)
    lines = [f"privacy plan for dataset {spec.dataset} (neighbours: {relation}): "
             f"{steps} step{'s' if steps != 1 else ''}"
             + ("; -v lists every step" if steps > len(families) else "")]
    width = max(len(m) for m in families)
    for mechanism, members in families.items():
        total = ZERO
        for step in members:
            total = total + step.budget
        count = f"{len(members)} step{'s' if len(members) != 1 else ''}"
        amount = f"ε {format_amount(total.epsilon)}"
        if total.delta:
            amount += f", δ {format_amount(total.delta)}"
        notes = {step.note for step in members}
        note = ""
        if len(notes) == 1 and next(iter(notes)):
            each = " each" if len(members) > 1 else ""
            note = f"  ({next(iter(notes))}{each})"
        lines.append(f"  {mechanism:<{width}}  {count:>9}  {amount}{note}")
    lines.append(f"  total {plan.total} (for Laplace, scale = sensitivity / ε of the step)")
    return lines


def _plan_table(ui: UI, spec: Spec, plan: Plan, relation: str) -> None:
    from rich.table import Table

    from dpcli.budget import format_amount

    table = Table(title=f"privacy plan for dataset {spec.dataset} (neighbours: {relation})",
                  title_justify="left")
    for col in ("step", "mechanism", "ε", "δ", "calibration"):
        table.add_column(col, justify="right" if col in ("ε", "δ") else "left")
    for name, step in _numbered_runs(plan):
        table.add_row(name, step.mechanism, format_amount(step.budget.epsilon),
                      format_amount(step.budget.delta), step.note)
    ui.show(table)
    ui.say(f"calibration: each step's sensitivity under {relation} and the noise it sets "
           f"(for Laplace, scale = Δ / ε of the step); total {plan.total}")


def show_relation(ui: UI, relation: str) -> None:
    """The guarantee in words, before anything is charged: neighbours, protected, public."""
    from dpcli.relation import lines

    for line in lines(relation):
        ui.say(line, markup=False)


def _numbered_runs(plan: Plan) -> list[tuple[str, Any]]:
    """Steps for display, a run of like steps named prefix1 … prefixK shown as one row.

    Like steps share mechanism, budget and note; the row shows "each" ε
    (e.g. 25 boosting rounds). The ledger keeps every step.
    """
    import re

    rows: list[tuple[str, Any]] = []
    runs: list[tuple[str, int, int, Any]] = []   # prefix, first, last, step
    for step in plan:
        m = re.fullmatch(r"(.*?)(\d+)", step.name)
        if m and runs and runs[-1][0] == m.group(1) and runs[-1][2] + 1 == int(m.group(2)) \
                and (runs[-1][3].mechanism, runs[-1][3].budget, runs[-1][3].note) == (
                    step.mechanism, step.budget, step.note):
            prefix, first, _, kept = runs[-1]
            runs[-1] = (prefix, first, int(m.group(2)), kept)
        elif m:
            runs.append((m.group(1), int(m.group(2)), int(m.group(2)), step))
        else:
            runs.append((step.name, -1, -1, step))
    for prefix, first, last, step in runs:
        if first < 0 or first == last:
            rows.append((step.name, step))
        else:
            rows.append((f"{prefix}{first}…{last} (each)", step))
    return rows


def dry_run_exit(ui: UI, spec: Spec, plan: Plan, extra: dict[str, Any] | None = None,
                 neighbouring: str | None = None) -> None:
    """Report what the run would spend and whether it fits; exit 0 if it does, 3 if not."""
    from dpcli import NEIGHBOURING_RELATION
    from dpcli.api.spend import DryRun
    from dpcli.run import open_ledger

    summary = open_ledger(spec).summary(runs=False)
    render_dry_run(ui, DryRun(spec.dataset, plan, summary.remaining, summary.total,
                              neighbouring or NEIGHBOURING_RELATION, dict(extra or {})))


def render_dry_run(ui: UI, dry: DryRun) -> None:
    """Say what a dry run found and exit: 0 if the plan fits what remains, 3 if not."""
    if ui.json:
        ui.emit_json(dry.to_json())
    verdict = "fits" if dry.fits else "does NOT fit"
    ui.say(f"dry run: this run would spend {dry.plan.total}; remaining {dry.remaining} "
           f"of {dry.budget} — it {verdict}. Nothing was charged.")
    raise typer.Exit(0 if dry.fits else 3)


class UIReporter:
    """The library's talk on the CLI's stderr (see :class:`dpcli.api.report.Reporter`)."""

    def __init__(self, ui: UI) -> None:
        self.ui = ui

    def say(self, text: str) -> None:
        self.ui.say(text, markup=False)

    def warn(self, text: str) -> None:
        self.ui.warn(text)

    def plan(self, spec: Spec, plan: Plan, relation: str) -> None:
        show_plan(self.ui, spec, plan, relation)

    def progress(self, description: str, total: int | None) -> Any:
        return self.ui.progress(description, total)


def report_lines(ui: UI, lines: Sequence[str]) -> None:
    """The custodian's data report, with --report only (see :func:`report_data`)."""
    if not ui.report or not lines:
        return
    ui.say("data report (for the custodian; not part of any output):")
    for line in lines:
        ui.say(f"  {line}", markup=False)


def report_data(ui: UI, report: Any) -> None:
    """What the data layer clamped, mapped or imputed: for the custodian, on stderr, with
    --report only (exact private figures must not reach logs and cron mail unasked)."""
    if not ui.report:
        return
    lines = report.lines()
    if lines:
        ui.say("data report (for the custodian; not part of any output):")
        for line in lines:
            ui.say(f"  {line}", markup=False)


def resolve_section(spec: Spec, name: str, default: type, epsilon: float | None,
                    columns: str | None = None, **overrides: Any) -> Any:
    """The spec's section for ``name`` with command-line overrides for this run.

    Without a section in the spec, ``--epsilon`` is enough to run with the
    defaults. ``--columns`` (comma-separated) must name declared columns.
    """
    from dpcli.errors import UsageError
    from dpcli.spec import override

    base = spec.sections.get(name)
    if base is None:
        if epsilon is None:
            spec.section(name)  # raises: names the missing section and the file
        base = default(epsilon=epsilon)
    cols = tuple(c.strip() for c in columns.split(",") if c.strip()) if columns else None
    for i, c in enumerate(cols or ()):
        if not spec.schema.has(c):
            raise UsageError(f"--columns: {c!r} is not declared in the schema of {spec.path}")
        if c in cols[:i]:
            raise UsageError(f"--columns: {c!r} is listed twice")
    return override(base, epsilon=epsilon, columns=cols, **overrides)


def noise_generator(ui: UI, spec: Spec, seed: int | None, *, command: str,
                    arguments: dict[str, Any], data: Any) -> Any:
    """The run's generator: OS entropy, or a seeded one with a warning that survives --quiet.

    A seeded stream (:func:`dpcli.seeding.seeded_stream`) is keyed with the ledger's
    secret key, so someone who merely guesses a small seed cannot regenerate the
    noise, and derived from the command, its ``arguments`` (as recorded in the
    ledger), the spec's digest and the input's keyed fingerprint, so the same seed
    reproduces a run on the same data and gives independent noise anywhere else.
    A seeded run reads the input once more for its fingerprint (tests and
    benchmarks only). The seed is never written to the ledger or the outputs.
    """
    from dpcli.fingerprint import input_digest
    from dpcli.ledger import read_key
    from dpcli.mechanisms import make_rng
    from dpcli.seeding import seeded_stream

    if seed is None:
        return make_rng(None)
    ui.warn("--seed makes this run's noise reproducible by whoever holds the seed and the "
            "ledger key, on this input with these parameters only. Use it for tests and "
            "benchmarks only; the run is marked 'seeded'.")
    key = read_key(spec.ledger_path)  # LedgerError naming the key file when it is missing
    return make_rng(seeded_stream(key, seed, command=command, arguments=arguments,
                                  spec_digest=spec.digest,
                                  input_fingerprint=input_digest(spec.ledger_path, data)))


def preflight(ui: UI, spec: Spec, plan: Plan | Callable[[int], Plan], data: Any, columns: Any,
              out: Any, out_files: list[Any], dry_run: bool, *,
              total: Budget | None = None, require_out: bool = True,
              neighbouring: str | None = None, engine: str = "local",
              inputs: Sequence[tuple[str, Any]] = (),
              extra: dict[str, Any] | None = None) -> tuple[Any, Plan]:
    """Every check a spending command makes before its charge; returns the source and plan.

    ``out`` is required unless ``dry_run``; ``out_files`` must be writable and
    replace none of the protected files: the spec and the files it names, the
    ledger and its companions, ``data`` and the command's other ``inputs``
    ((what, path) pairs: a model, a --features or --validation file). The
    file is checked against the schema and the budget; the plan is shown.
    A dry run ends here (exit 0 if the plan fits, 3 if not). ``plan`` may be
    a function of the record count n (public under replace-one), with its
    ``total`` given, for a run whose calibration depends on n. ``extra`` goes
    into the dry run's --json (read after ``plan`` has run: it may fill it).
    """
    from dpcli.errors import UsageError
    from dpcli.io import Outputs
    from dpcli.run import prepare_source

    if out is None and not dry_run and require_out:
        raise UsageError("--out is required (or pass --dry-run to only see the plan)")
    if out is not None:
        from dpcli import protect

        protected = [*protect.spec_protected(spec), *protect.inputs("the input data", data),
                     *inputs]
        Outputs().check_writable(*out_files, protected=protected)
    if isinstance(plan, Plan):
        total = plan.total
    elif total is None:
        raise TypeError("a plan that depends on n needs its total")
    source, n = prepare_source(spec, data, columns, total, dry_run=dry_run, engine=engine)
    if not isinstance(plan, Plan):
        plan = plan(n)
    show_plan(ui, spec, plan, neighbouring)
    if dry_run:
        dry_run_exit(ui, spec, plan, extra=extra, neighbouring=neighbouring)
    return source, plan


def compute_stats(ui: UI, source: Any, request: Any, rng: Any, label: str = "reading") -> Any:
    """The run's one statistics pass, with progress on a terminal (call only once charged)."""
    from dpcli.stats import get_engine

    with ui.progress(label, source.num_rows_hint()) as advance:
        return get_engine(source.engine).compute(source, request, rng=rng, progress=advance)


def degeneracy(ui: UI, model: Any) -> dict[str, Any]:
    """Check a released binary model for a degenerate output (post-processing, free): warn on
    stderr and return the payload entry that records the verdict ({} when not checkable)."""
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
        ui.warn(problem)
    return {"degeneracy": verdict.to_json()}


def release_json(kind: str, payload: dict[str, Any], spec: Spec, plan: Plan, charge: Any,
                 seeded: bool, neighbouring: str | None = None) -> str:
    """The JSON text of a released artefact, tied to this run's spec, spend and ledger entry."""
    from dpcli import NEIGHBOURING_RELATION
    from dpcli.io import dumps_json, envelope

    return dumps_json(envelope(kind, payload, dataset=spec.dataset, spec_digest=spec.digest,
                               epsilon=plan.total.eps, delta=plan.total.dlt,
                               run_id=charge.run_id, seeded=seeded,
                               neighbouring=neighbouring or NEIGHBOURING_RELATION))


def require_out(out: Any, dry_run: bool) -> None:
    """A command that releases a file needs --out, unless it only shows its plan."""
    from dpcli.errors import UsageError

    if out is None and not dry_run:
        raise UsageError("--out is required (or pass --dry-run to only see the plan)")
