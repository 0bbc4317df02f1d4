"""``publish-grid`` as a function: a private grid synopsis of the label (PrivPfC)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dpcli.api.report import Reporter, Silent
from dpcli.api.result import Released
from dpcli.api.spend import DryRun, Spend, resolve_section
from dpcli.errors import UsageError
from dpcli.spec import Spec


def publish_grid(spec: Spec, data: Path | str, *, out: Path | None = None,
                 columns: Sequence[str] | str | None = None, max_pool: int | None = None,
                 epsilon: float | None = None, seed: int | None = None, engine: str = "local",
                 dry_run: bool = False, reporter: Reporter | None = None) -> Released | DryRun:
    """Release a grid synopsis: a privately chosen grid over taxonomy levels and its noisy
    per-class cell counts (PrivPfC). Costs the section's ε (grid choice, and the histogram;
    with many columns a column pre-selection). ``out`` (a folder) gets grid.json and the cell
    counts; the value is the synopsis, usable by ``dpcli synthesize`` and ``predict``."""
    import hashlib

    import numpy as np

    from dpcli.algorithms import privpfc
    from dpcli.algorithms import synopsis as syn_io
    from dpcli.api.spend import forecast_of
    from dpcli.budget import Budget
    from dpcli.data.location import location_text, parse_location
    from dpcli.forecast import publish_grid as fc
    from dpcli.io import dumps_json
    from dpcli.spec import PublishGridSection
    from dpcli.stats import StatsRequest

    reporter = reporter or Silent()
    location = parse_location(str(data))
    s = spec
    section = resolve_section(s, "publish-grid", PublishGridSection, epsilon, columns,
                              max_pool=max_pool)
    if s.schema.n_classes != 2:
        raise UsageError(f"publish-grid needs a binary label; {s.path}: label.classes declares "
                         f"{s.schema.n_classes}")
    hierarchies = privpfc.candidate_hierarchies(s.schema, section.columns)
    for h in hierarchies:
        for note in h.notes:
            reporter.say(f"note: {note}")
    unplaced = [h.column for h in hierarchies if not h.places_other]
    if unplaced:
        reporter.say(f"note: the taxonomies of {', '.join(unplaced)} place no 'other' leaf: a "
                     "row with an undeclared value there is in no cell (the data report counts "
                     "them)")
    chosen = [h.column for h in hierarchies]
    left_out = [c.name for c in s.schema.columns if c.name not in chosen
                and (not section.columns or c.name in section.columns)]
    if left_out:
        # a user reading "usable" must know the synopsis never saw these columns: a warning
        # (--quiet keeps it, --json lists it), and the grid file records them
        reporter.warn(f"not grid axes, so the synopsis ignores them: {', '.join(left_out)} "
                      "(a numeric column needs a 'taxonomy:', e.g. {bins: [2, 4, 8]}; tokens "
                      "columns cannot be axes); synthesize writes no such column")
    total = Budget(section.epsilon)
    designs: list[privpfc.Design] = []

    def plan_for(n: int) -> privpfc.Plan:
        designs.append(fc.design(s, section, n, hierarchies))
        return designs[-1].plan

    grid_file, cells_file = (None, None) if out is None else (
        out / syn_io.GRID_FILE, out / syn_io.CELLS_FILE)
    spend = Spend.prepare(s, plan_for, location, chosen, command="publish-grid",
                          reporter=reporter, outputs=[grid_file, cells_file], total=total,
                          engine=engine, dry_run=dry_run,
                          forecast=forecast_of("publish-grid", s, section,
                                               hierarchies=hierarchies))
    if dry_run:
        return spend.dry_run()
    plan = spend.plan
    d = designs[-1]
    arguments: dict[str, Any] = {
        "data": location_text(location), "engine": engine,
        "out": None if out is None else str(out.resolve()), "columns": chosen,
        "epsilon": section.epsilon, "max_pool": d.max_pool}
    positive = s.schema.label.positive_index
    positive = 1 if positive is None else positive
    request = StatsRequest(joint=tuple(hierarchies))
    with spend.charged(arguments, seed=seed) as run:
        stats = run.statistics(request)
        assert stats.joint is not None
        with reporter.progress("scoring", d.pool_size if d.select_k is None else None,
                               "grids") as advance:
            synopsis = privpfc.publish(stats.joint, hierarchies, d, positive, run.rng, advance,
                                       plan=run.plan)
        # one row group at a time: the grid holds up to T ∝ n cells (syn_io.cells_parquet)
        cells = syn_io.cells_parquet(synopsis)
        payload = syn_io.payload(synopsis, s.schema, hashlib.sha256(cells).hexdigest(),
                                 section.decision)
        counts = np.asarray(synopsis.counts, dtype=np.int64)   # cells.parquet's counts
        model = syn_io.GridModel(payload, counts, grid_file or Path(syn_io.GRID_FILE))
        payload |= run.check_model(model)
        if left_out:
            payload["ignored_columns"] = left_out
        envelope = run.envelope(syn_io.KIND, payload)
        if grid_file is not None and cells_file is not None:
            run.write_bytes(cells_file, cells)
            run.write(grid_file, dumps_json(envelope))
        run.summary = {"grid": {g["column"]: g["level"] for g in payload["grid"]},
                       "cells": payload["n_cells"], "threshold": d.threshold,
                       "pool": synopsis.pool_size}
    details = {"threshold": d.threshold, "pool_size": synopsis.pool_size,
               "selected": synopsis.selected, "grid_file": grid_file, "cells_file": cells_file}
    return Released(syn_io.KIND, model, envelope, plan, run.run_id, out, dict(run.summary),
                    tuple(stats.report.lines()), details)
