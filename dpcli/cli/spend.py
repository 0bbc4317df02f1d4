"""The CLI's side of a spending run: show the plan, answer --dry-run, relay the library's talk."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import typer

from dpcli.cli.ui import UI
from dpcli.mechanisms import Plan
from dpcli.spec import Spec

if TYPE_CHECKING:
    from dpcli.api.result import Released
    from dpcli.api.spend import DryRun
    from dpcli.forecast import Forecast


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
            text = next(iter(notes))
            # "each" once: a note may already say it ("…, ε/2 each" would read "each each")
            each = " each" if len(members) > 1 and not text.endswith(" each") else ""
            note = f"  ({text}{each})"
        lines.append(f"  {mechanism:<{width}}  {count:>9}  {amount}{note}")
    lines.append(f"  total {plan.total} (for Laplace, scale = sensitivity / ε of the step)")
    return lines


def _plan_table(ui: UI, spec: Spec, plan: Plan, relation: str) -> None:
    from rich.table import Table

    from dpcli.budget import format_amount

    table = Table(title=f"privacy plan for dataset {spec.dataset} (neighbours: {relation})",
                  title_justify="left")
    for col in ("step", "mechanism", "ε", "δ", "Δ", "calibration"):
        table.add_column(col, justify="right" if col in ("ε", "δ", "Δ") else "left")
    for name, step in numbered_runs(plan):
        # Δ: the sensitivity the step's noise is calibrated to, the plan's own field
        table.add_row(name, step.mechanism, format_amount(step.budget.epsilon),
                      format_amount(step.budget.delta),
                      "—" if step.sensitivity is None else f"{step.sensitivity:.4g}", step.note)
    ui.show(table)
    ui.say(f"calibration: each step's sensitivity under {relation} and the noise it sets "
           f"(for Laplace, scale = Δ / ε of the step); total {plan.total}")


def show_relation(ui: UI, relation: str) -> None:
    """The guarantee in words, before anything is charged: neighbours, protected, public."""
    from dpcli.relation import lines

    for line in lines(relation):
        ui.say(line, markup=False)


def numbered_runs(plan: Plan) -> list[tuple[str, Any]]:
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

    def forecast(self, fc: Forecast) -> None:
        """The forecast right after the plan: its headline and the verdict (``-v``: every
        metric), before anything is charged."""
        for line in fc.lines(self.ui.verbose):
            self.ui.say(line, markup=False)

    def progress(self, description: str, total: int | None, unit: str = "rows") -> Any:
        return self.ui.progress(description, total, unit)


def report_lines(ui: UI, lines: Sequence[str]) -> None:
    """The custodian's data report, with --report only (see :func:`report_data`)."""
    if not ui.report or not lines:
        return
    ui.say("data report (for the custodian; not part of any output):")
    for line in lines:
        ui.say(f"  {line}", markup=False)









def require_out(out: Any, dry_run: bool) -> None:
    """A command that releases a file needs --out, unless it only shows its plan."""
    from dpcli.errors import UsageError

    if out is None and not dry_run:
        raise UsageError("--out is required (or pass --dry-run to only see the plan)")


def released(ui: UI, done: Released | DryRun) -> Released:
    """A library run's result for a command to render: a dry run is answered here (exit 0 if
    it fits, 3 if not); a release has the custodian's data report printed (with --report)."""
    from dpcli.api.spend import DryRun

    if isinstance(done, DryRun):
        render_dry_run(ui, done)   # raises typer.Exit
    assert not isinstance(done, DryRun)
    report_lines(ui, done.data_report)
    return done
