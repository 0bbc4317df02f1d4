"""``dpcli publish-grid``: PrivPfC's private synopsis for classification."""

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
def publish_grid(
    data: SourceArg,
    spec: SpecOpt,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Folder for the synopsis: grid.json and cells.parquet (required "
        "unless --dry-run).", file_okay=False)] = None,
    max_pool: Annotated[int | None, typer.Option(
        "--max-pool", min=1, help="Most grids to score; a larger pool first selects columns "
        "by χ² (30% of ε). Default: the spec's, else 200,000.")] = None,
    columns: Annotated[str | None, typer.Option(
        help="Comma-separated candidate columns (default: the spec's, else every column with "
        "a taxonomy, and every categorical or binary one).")] = None,
    epsilon: EpsilonOpt = None,
    engine: EngineOpt = "local",
    opts: RunOptions = RunOptions(),
) -> None:
    """Publish a private grid synopsis (PrivPfC): noisy class counts over a chosen grid.

    Each candidate column has a taxonomy (schema 'taxonomy:'); a grid takes
    one level of each. Grids with at most T cells (T from n and ε, so that
    noise stays below a fifth of an average cell) are scored by their
    expected misclassification, one is chosen with the exponential
    mechanism (3/7 of ε), and its two class counts per cell are released
    with discrete Laplace noise (4/7 of ε). Use the synopsis with
    'dpcli synthesize' (synthetic rows) or 'dpcli predict' (a histogram
    classifier); neither spends budget. The classifier's rule is the spec's
    'decision:': 'balanced' (default: a cell predicts the class it holds
    more of than the grid overall, so a rare class is still predicted) or
    'majority' (a cell predicts its larger count: best plain accuracy). A grid
    whose counts are indistinguishable from noise, or that predicts a class
    nowhere, is reported on stderr and in grid.json ('degeneracy').

    Example:

        dpcli publish-grid sample_data/adult_train.parquet --spec configs/adult.yaml \\
            --out synopsis/ --epsilon 1.0
        dpcli synthesize synopsis/ --rows 45000 --out synth.parquet
        dpcli predict synopsis/grid.json sample_data/adult_test.parquet --out preds.parquet
    """
    from dpcli.api.publish_grid import publish_grid as run
    from dpcli.cli.spend import UIReporter, released, require_out
    from dpcli.spec import load_spec

    ui = opts.ui()
    require_out(out, opts.dry_run)
    result = run(load_spec(spec), data, out=out, columns=columns, max_pool=max_pool,
                 epsilon=epsilon, seed=opts.seed, engine=engine, dry_run=opts.dry_run,
                 reporter=UIReporter(ui))
    done = released(ui, result)
    payload, d = done.payload, done.details
    used = ", ".join(f"{g['column']}@{g['level']}({len(g['nodes'])})" for g in payload["grid"])
    ui.say(f"chose a grid of {payload['n_cells']:,} cells from {d['pool_size']:,} candidate "
           f"grid{'s' if d['pool_size'] != 1 else ''} of at most T = {d['threshold']:,} cells: "
           f"{used or 'no column (the majority class only)'}")
    if d["selected"] is not None:
        ui.say(f"pre-selected columns: {', '.join(d['selected'])}")
    ui.say(f"wrote {d['grid_file']} and {d['cells_file']}, spent {done.plan.total} "
           f"(run {done.run_id[:8]})")
    if opts.json:
        ui.emit_json({"command": "publish-grid", "dataset": done.envelope["dataset"],
                      "run_id": done.run_id, "grid": str(d["grid_file"]),
                      "cells": str(d["cells_file"]), "n_cells": payload["n_cells"],
                      "threshold": d["threshold"], "pool_size": d["pool_size"],
                      "columns": [g["column"] for g in payload["grid"]],
                      "spent": done.plan.total.to_json(), "breakdown": done.plan.to_json()})
