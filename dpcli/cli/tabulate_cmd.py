"""``dpcli tabulate``: noisy per-class counts of declared columns."""

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
    """Release noisy counts per class of declared columns (discrete Laplace).

    One table per column (categorical levels incl. 'other', binary values,
    numeric bins, or vocabulary words) plus the class counts, each with
    L1 sensitivity 2 under replace-one (2r for a tokens column capped at r
    per row); ε is split equally between the tables.

    Example:

        dpcli tabulate sample_data/adult_train.parquet --spec configs/adult.yaml \\
            --out out/adult_counts.csv --epsilon 0.5
    """
    from dpcli.algorithms import tabulate as algo
    from dpcli.budget import Budget
    from dpcli.cli.spend import (
        compute_stats,
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
    from dpcli.spec import TabulateSection, load_spec

    ui = UI(quiet=quiet, json=json, force_progress=progress, report=report)
    location = parse_location(data)
    s = load_spec(spec)
    section = resolve_section(s, "tabulate", TabulateSection, epsilon, columns, bins=bins)
    chosen = section.columns or algo.default_columns(s.schema)
    if not chosen:
        raise UsageError("no columns to tabulate: pass --columns")
    plan = algo.plan(s.schema, chosen, Budget(section.epsilon))
    request = algo.request(s.schema, chosen, section.bins)
    request.validate(s.schema)  # before the charge: a bad request must cost nothing

    if out is not None and out.suffix.lower() == ".json":
        raise UsageError(f"--out {out}: give the table a .csv name; the JSON record of the "
                         "release is written beside it with the same stem")
    meta = out.with_suffix(".json") if out is not None else None
    source, _ = preflight(ui, s, plan, location, chosen, out, [out, meta], dry_run, engine=engine)
    assert out is not None and meta is not None  # preflight ended a run without --out
    outputs = Outputs()

    arguments = {"data": location_text(location), "engine": engine,
                 "out": str(out.resolve()), "columns": list(chosen),
                 "bins": section.bins, "epsilon": section.epsilon}
    rng = noise_generator(ui, s, seed, command="tabulate", arguments=arguments,
                          data=location)
    with charged(s, plan, command="tabulate", arguments=arguments, input_path=location,
                 seeded=seed is not None) as charge, outputs:
        stats = compute_stats(ui, source, request, rng, "counting")
        rows = algo.release(stats, plan, s.schema, chosen, section.bins, rng)
        import pandas as pd

        outputs.write_bytes(out, pd.DataFrame(rows).to_csv(index=False).encode())
        payload = {"columns": list(chosen), "bins": section.bins,
                   "breakdown": plan.to_json(), "table_file": out.name}
        outputs.write_text(meta, release_json("tabulate", payload, s, plan, charge,
                                              seeded=seed is not None))
        charge.outputs = outputs.commit()
        charge.summary = {"tables": len(chosen) + 1, "rows_out": len(rows)}

    report_data(ui, stats.report)
    ui.say(f"released {len(chosen) + 1} tables ({len(rows)} noisy counts) to {out}, "
           f"spent {plan.total} (run {charge.run_id[:8]})")
    if json:
        ui.emit_json({"command": "tabulate", "dataset": s.dataset, "run_id": charge.run_id,
                      "spent": plan.total.to_json(), "outputs": [str(out), str(meta)],
                      "breakdown": plan.to_json()})
