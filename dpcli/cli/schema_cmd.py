"""``dpcli schema suggest``: private suggestions for the domains a spec still marks TODO."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dpcli.cli.common import (
    RunOptions,
    SourceArg,
    SpecOpt,
    number,
    spending_command,
)

app = typer.Typer(help="The spec's schema: private suggestions for undeclared domains.",
                  no_args_is_help=True)

DEFAULT_DELTA = 1e-6   # dpcli.api.schema_suggest.DEFAULT_DELTA (kept light: no import here)


@app.command("suggest")
@spending_command
def suggest(
    data: SourceArg,
    spec: SpecOpt,
    epsilon: Annotated[float, typer.Option(
        "--epsilon", "-e", parser=number,
        help="ε this run spends, split equally between the columns.")],
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="YAML file of suggestions to review (required unless --dry-run).",
        dir_okay=False)] = None,
    columns: Annotated[str | None, typer.Option(
        help="Comma-separated columns to suggest for (default: every numeric column whose "
        "bounds and every categorical column whose categories are TODO).")] = None,
    delta: Annotated[float, typer.Option(
        parser=number,
        help="δ for the category suggestions (split equally between them); the spec's budget "
        "must have δ to spend. Not used for bounds.")] = DEFAULT_DELTA,
    opts: RunOptions = RunOptions(),
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
            --columns limit_bal,age,education,marriage --epsilon 1 \\
            --out mine/suggested.schema.yaml
    """
    from dpcli.api.schema_suggest import schema_suggest as run
    from dpcli.cli.spend import UIReporter, released, require_out
    from dpcli.spec import load_spec

    ui = opts.ui()
    require_out(out, opts.dry_run)
    result = run(load_spec(spec, todo_domains=True), data, epsilon=epsilon, out=out,
                 columns=columns, delta=delta, seed=opts.seed, dry_run=opts.dry_run,
                 reporter=UIReporter(ui))
    done = released(ui, result)
    ui.say(f"wrote suggestions for {done.summary['columns']} column(s) to {out} (review them "
           f"before copying into the schema), spent {done.plan.total} "
           f"(run {done.run_id[:8]})")
    if opts.json:
        ui.emit_json({"command": "schema-suggest", "dataset": done.envelope.get("dataset"),
                      "run_id": done.run_id, "out": str(out), "suggestions": done.value,
                      "spent": done.plan.total.to_json(), "breakdown": done.plan.to_json()})
