"""``dpcli publish-grid``: PrivPfC's private synopsis for classification."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dpcli.cli.common import (
    DryRunOpt,
    EngineOpt,
    EpsilonOpt,
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


@handle_errors
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
    seed: SeedOpt = None,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
    quiet: QuietOpt = False,
    progress: ProgressOpt = False,
    engine: EngineOpt = "local",
    report: ReportOpt = False,
    reuse: ReuseOpt = False,
    verbose: VerboseOpt = False,
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
    import hashlib

    import numpy as np

    from dpcli.algorithms import privpfc
    from dpcli.algorithms import synopsis as syn_io
    from dpcli.budget import Budget
    from dpcli.cli.spend import (
        compute_stats,
        degeneracy,
        noise_generator,
        preflight,
        release_json,
        report_data,
        resolve_section,
    )
    from dpcli.data.location import location_text, parse_location
    from dpcli.errors import UsageError
    from dpcli.io import Outputs
    from dpcli.run import charged
    from dpcli.spec import PublishGridSection, load_spec
    from dpcli.stats import StatsRequest

    ui = UI(quiet=quiet, json=json, force_progress=progress, report=report)
    location = parse_location(data)
    s = load_spec(spec)
    section = resolve_section(s, "publish-grid", PublishGridSection, epsilon, columns,
                              max_pool=max_pool)
    if s.schema.n_classes != 2:
        raise UsageError(f"publish-grid needs a binary label; {s.path}: label.classes declares "
                         f"{s.schema.n_classes}")
    hierarchies = privpfc.candidate_hierarchies(s.schema, section.columns)
    for h in hierarchies:
        for note in h.notes:
            ui.say(f"note: {note}", markup=False)
    unplaced = [h.column for h in hierarchies if not h.places_other]
    if unplaced:
        ui.say(f"note: the taxonomies of {', '.join(unplaced)} place no 'other' leaf: a row with "
               "an undeclared value there is in no cell (the data report counts them)",
               markup=False)
    chosen = [h.column for h in hierarchies]
    total = Budget(section.epsilon)

    designs: list[privpfc.Design] = []

    def plan_for(n: int) -> privpfc.Plan:
        designs.append(privpfc.design(hierarchies, n, total, section.max_pool))
        return designs[-1].plan

    grid_file, cells_file = (None, None) if out is None else (
        out / syn_io.GRID_FILE, out / syn_io.CELLS_FILE)
    source, plan = preflight(ui, s, plan_for, location, chosen, out,
                             [] if out is None else [grid_file, cells_file], dry_run,
                             total=total, engine=engine)
    assert out is not None and grid_file is not None and cells_file is not None
    d = designs[-1]
    outputs = Outputs()
    arguments = {"data": location_text(location), "engine": engine,
                 "out": str(out.resolve()), "columns": chosen,
                 "epsilon": section.epsilon, "max_pool": d.max_pool}
    positive = s.schema.label.positive_index
    positive = 1 if positive is None else positive
    request = StatsRequest(joint=tuple(hierarchies))
    rng = noise_generator(ui, s, seed, command="publish-grid", arguments=arguments,
                          data=location)
    with charged(s, plan, command="publish-grid", arguments=arguments, input_path=location,
                 seeded=seed is not None) as charge, outputs:
        stats = compute_stats(ui, source, request, rng)
        assert stats.joint is not None
        with ui.progress("scoring", d.pool_size if d.select_k is None else None, "grids") \
                as advance:
            synopsis = privpfc.publish(stats.joint, hierarchies, d, positive, rng, advance)
        table = syn_io.cells_table(synopsis)
        cells = syn_io.parquet_bytes(table)
        payload = syn_io.payload(synopsis, s.schema, hashlib.sha256(cells).hexdigest(),
                                 section.decision)
        counts = np.column_stack([table.column(c).to_numpy() for c in syn_io.COUNT_COLUMNS])
        payload |= degeneracy(ui, syn_io.GridModel(payload, counts, grid_file))
        outputs.write_bytes(cells_file, cells)
        outputs.write_text(grid_file, release_json(syn_io.KIND, payload, s, plan, charge,
                                                   seeded=seed is not None))
        charge.outputs = outputs.commit()
        charge.summary = {"grid": {g["column"]: g["level"] for g in payload["grid"]},
                          "cells": payload["n_cells"], "threshold": d.threshold,
                          "pool": synopsis.pool_size}

    report_data(ui, stats.report)
    used = ", ".join(f"{g['column']}@{g['level']}({len(g['nodes'])})" for g in payload["grid"])
    ui.say(f"chose a grid of {payload['n_cells']:,} cells from {synopsis.pool_size:,} "
           f"(T = {d.threshold:,}): {used or 'no column (the majority class only)'}")
    if synopsis.selected is not None:
        ui.say(f"pre-selected columns: {', '.join(synopsis.selected)}")
    ui.say(f"wrote {grid_file} and {cells_file}, spent {plan.total} (run {charge.run_id[:8]})")
    if json:
        ui.emit_json({"command": "publish-grid", "dataset": s.dataset, "run_id": charge.run_id,
                      "grid": str(grid_file), "cells": str(cells_file),
                      "n_cells": payload["n_cells"], "threshold": d.threshold,
                      "pool_size": synopsis.pool_size,
                      "columns": [g["column"] for g in payload["grid"]],
                      "spent": plan.total.to_json(), "breakdown": plan.to_json()})
