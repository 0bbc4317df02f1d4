"""``dpcli tabulate``: noisy per-class counts of declared columns."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dpcli.cli.common import (
    EngineOpt,
    EpsilonOpt,
    RunOptions,
    SourceArg,
    SpecOpt,
    spending_command,
)


@spending_command
def tabulate(
    data: SourceArg,
    spec: SpecOpt,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="CSV of noisy counts (required unless --dry-run); a JSON record "
        "of the release is written beside it.")] = None,
    columns: Annotated[str | None, typer.Option(
        help="Comma-separated declared columns (default: the spec's 'tabulate.columns', "
        "else every non-numeric column).")] = None,
    bins: Annotated[int | None, typer.Option(
        min=1, max=10_000,
        help="Equal-width bins for numeric columns, within their declared bounds.")] = None,
    epsilon: EpsilonOpt = None,
    engine: EngineOpt = "local",
    opts: RunOptions = RunOptions(),
) -> None:
    """Release noisy counts per class of declared columns (discrete Laplace).

    One table per column (categorical levels incl. 'other', binary values,
    numeric bins, or vocabulary words) plus the class counts, each with
    L1 sensitivity 2 under replace-one (2r for a tokens column capped at r
    per row); ε is split equally between the tables.

    Example:

        dpcli tabulate sample_data/adult_train.parquet --spec configs/adult.yaml \\
            --out out/adult_counts.csv --epsilon 0.5
    """
    from dpcli.api.tabulate import tabulate as run
    from dpcli.cli.spend import UIReporter, released, require_out
    from dpcli.spec import load_spec

    ui = opts.ui()
    require_out(out, opts.dry_run)
    result = run(load_spec(spec), data, out=out, columns=columns, bins=bins, epsilon=epsilon,
                 seed=opts.seed, engine=engine, dry_run=opts.dry_run, reporter=UIReporter(ui))
    done = released(ui, result)
    tables, rows = done.summary["tables"], done.summary["rows_out"]
    ui.say(f"released {tables} tables ({rows} noisy counts) to {out}, spent {done.plan.total} "
           f"(run {done.run_id[:8]})")
    ui.say(f"error bars: each count ± {done.summary['error_bar']:,} at most (90 % of the noise; "
           "columns lower, upper)")
    if opts.json:
        ui.emit_json({"command": "tabulate", "dataset": done.envelope["dataset"],
                      "run_id": done.run_id, "spent": done.plan.total.to_json(),
                      "outputs": [str(out), str(done.details["meta"])],
                      "breakdown": done.plan.to_json()})
