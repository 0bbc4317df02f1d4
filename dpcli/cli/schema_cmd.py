"""``dpcli schema suggest``: private suggestions for the domains a spec still marks TODO."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any

import typer

from dpcli.cli.common import (
    DryRunOpt,
    JsonOpt,
    ProgressOpt,
    QuietOpt,
    ReportOpt,
    ReuseOpt,
    SeedOpt,
    SourceArg,
    SpecOpt,
    VerboseOpt,
    handle_errors,
)
from dpcli.cli.ui import UI

app = typer.Typer(help="The spec's schema: private suggestions for undeclared domains.",
                  no_args_is_help=True)

DEFAULT_DELTA = 1e-6


@app.command("suggest")
@handle_errors
def suggest(
    data: SourceArg,
    spec: SpecOpt,
    epsilon: Annotated[float, typer.Option(
        "--epsilon", "-e", help="ε this run spends, split equally between the columns.")],
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="YAML file of suggestions to review (required unless --dry-run).",
        dir_okay=False)] = None,
    columns: Annotated[str | None, typer.Option(
        help="Comma-separated columns to suggest for (default: every numeric column whose "
        "bounds and every categorical column whose categories are TODO).")] = None,
    delta: Annotated[float, typer.Option(
        help="δ for the category suggestions (split equally between them); the spec's budget "
        "must have δ to spend. Not used for bounds.")] = DEFAULT_DELTA,
    seed: SeedOpt = None,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
    quiet: QuietOpt = False,
    progress: ProgressOpt = False,
    report: ReportOpt = False,
    reuse: ReuseOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Suggest, privately, the numeric bounds and category lists a spec still marks TODO.

    Bounds: two private quantiles (0.5 % and 99.5 %) on a public grid of
    round numbers, by the exponential mechanism (ε-DP). Categories: the
    values whose noisy count passes a threshold set by δ ((ε, δ)-DP; a value
    held by very few records is never suggested). The suggestions are written
    to --out for the custodian to review and copy into the schema; nothing is
    applied. The run is charged to the ledger like any release. Declared
    domains from the data's documentation are better where they exist: they
    cost nothing and fit every future file.

    Example (once init's spec has its budget, with a δ, and its label filled in):

        dpcli schema suggest sample_data/credit_train.parquet --spec mine/credit.yaml \\
            --epsilon 0.1 --out mine/suggested.schema.yaml
    """
    import math

    from dpcli.algorithms import suggest as algo
    from dpcli.budget import Budget
    from dpcli.cli.spend import noise_generator, preflight, report_data
    from dpcli.data.location import location_text, parse_location
    from dpcli.errors import UsageError
    from dpcli.io import Outputs
    from dpcli.mechanisms.composition import Plan, Step
    from dpcli.run import charged
    from dpcli.spec import load_spec

    ui = UI(quiet=quiet, json=json, force_progress=progress, report=report)
    location = parse_location(data)
    s = load_spec(spec, todo_domains=True)
    todo = dict(s.todo)
    if columns is not None:
        chosen = [c.strip() for c in columns.split(",") if c.strip()]
        for c in chosen:
            if c not in todo:
                raise UsageError(f"--columns: {c!r} has no TODO bounds or categories in the "
                                 f"schema of {s.path}")
    else:
        chosen = list(todo)
    if not chosen:
        raise UsageError(f"{s.path}: no numeric bounds or categories are TODO; nothing to "
                         "suggest")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise UsageError(f"--epsilon must be a positive number, got {epsilon}")
    categorical = [c for c in chosen if todo[c] == "categorical"]
    if categorical and not 0 < delta < 1:
        raise UsageError(f"--delta must be in (0, 1), got {delta}")
    each = Fraction(1, len(chosen))
    steps = []
    for c in chosen:
        share = Budget(epsilon).scaled(each)
        if todo[c] == "numeric":
            steps.append(Step(f"bounds:{c}", "exponential", share,
                              "two quantiles on the public grid, Δ=1, ε/2 each"))
        else:
            budget = Budget(share.epsilon, Fraction(str(delta)) / len(categorical))
            tau = algo.threshold(float(share.epsilon), float(budget.delta))
            steps.append(Step(f"categories:{c}", "thresholded_discrete_laplace", budget,
                              f"Δ=2, scale {2 / float(share.epsilon):.4g}, released if ≥ {tau}"))
    plan = Plan(steps)
    if plan.total.delta > 0 and s.budget.delta == 0:
        raise UsageError(f"{s.path}: budget.delta is 0, and suggesting categories needs δ "
                         f"({delta:g} here): declare a δ budget (e.g. 1e-5) or leave out "
                         f"{', '.join(categorical)} with --columns")
    source, _ = preflight(ui, s, plan, location, chosen, out, [out], dry_run)
    assert out is not None
    arguments = {"data": location_text(location), "out": str(out.resolve()),
                 "columns": chosen, "epsilon": epsilon, "delta": delta}
    rng = noise_generator(ui, s, seed, command="schema-suggest", arguments=arguments,
                          data=location)
    outputs = Outputs()
    with charged(s, plan, command="schema-suggest", arguments=arguments, input_path=location,
                 seeded=seed is not None) as charge, outputs:
        found = _release(ui, source, chosen, todo, plan, rng)
        text = suggestions_yaml(s.path.name, chosen, todo, found, plan)
        outputs.write_text(out, text)
        charge.outputs = outputs.commit()
        charge.summary = {"columns": len(chosen)}
    report_data(ui, source.report)
    ui.say(f"wrote suggestions for {len(chosen)} column(s) to {out} (review them before "
           f"copying into the schema), spent {plan.total} (run {charge.run_id[:8]})")
    if json:
        ui.emit_json({"command": "schema-suggest", "dataset": s.dataset,
                      "run_id": charge.run_id, "out": str(out), "suggestions": found,
                      "spent": plan.total.to_json(), "breakdown": plan.to_json()})


def _release(ui: UI, source: Any, chosen: list[str], todo: dict[str, str], plan: Any,
             rng: Any) -> dict[str, Any]:
    """One pass over the data, then each column's release with its step's budget."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from dpcli.algorithms import suggest as algo

    grid = algo.candidates()
    below = {c: np.zeros(grid.size, dtype=np.int64) for c in chosen if todo[c] == "numeric"}
    counts: dict[str, dict[str, int]] = {c: {} for c in chosen if todo[c] == "categorical"}
    n = 0
    with ui.progress("reading", source.num_rows_hint()) as advance:
        for raw, _ in source.raw_batches(chosen, rng=rng):
            n += raw.num_rows
            for c in below:
                arr = raw.column(c).cast(pa.float64())
                below[c] += algo.count_at_or_below(
                    pc.fill_null(arr, float("nan")).to_numpy(zero_copy_only=False), grid)
            for c in counts:
                algo.add_counts(counts[c], raw.column(c).cast(pa.string()))
            advance(raw.num_rows)
    found: dict[str, Any] = {}
    for c in chosen:
        step = plan.step(f"bounds:{c}" if todo[c] == "numeric" else f"categories:{c}")
        if todo[c] == "numeric":
            found[c] = list(algo.private_bounds(below[c], n, step.budget.eps, rng))
        else:
            found[c] = algo.frequent_values(counts[c], step.budget.eps, step.budget.dlt, rng)
    return found


def suggestions_yaml(spec_name: str, chosen: list[str], todo: dict[str, str],
                     found: dict[str, Any], plan: Any) -> str:
    """The suggestions as schema entries, each with how it was released."""
    import yaml

    from dpcli.algorithms.suggest import COVERAGE

    lines = [f"# Private suggestions for the TODO domains of {spec_name}, by `dpcli schema "
             "suggest`.",
             "# Review each, then copy what you accept into the schema. Bounds are private "
             "quantiles",
             f"# aiming to hold {COVERAGE:.0%} of the values (the rest would be "
             "clamped); categories are the",
             "# values frequent enough to pass the noise threshold (rarer ones would map to "
             "'other').",
             "columns:"]
    for c in chosen:
        key = yaml.safe_dump(c).strip().removesuffix("...").strip()
        if todo[c] == "numeric":
            lo, hi = found[c]
            step = plan.step(f"bounds:{c}")
            lines.append(f"  {key}: {{type: numeric, bounds: [{lo:g}, {hi:g}]}}   "
                         f"# ε={step.budget.eps:g}")
        else:
            step = plan.step(f"categories:{c}")
            values = yaml.safe_dump(found[c], default_flow_style=True, width=10**6).strip()
            note = "" if found[c] else " none passed the threshold: too few rows per value"
            lines.append(f"  {key}: {{type: categorical, categories: {values}}}   "
                         f"# ε={step.budget.eps:g}, δ={step.budget.dlt:g}{note}")
    return "\n".join(lines) + "\n"

