"""``dpcli synthesize``: synthetic records drawn from a grid synopsis (no budget spent)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dpcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, handle_errors
from dpcli.cli.ui import UI


@handle_errors
def synthesize(
    synopsis: Annotated[Path, typer.Argument(
        metavar="SYNOPSIS", help="A publish-grid output folder, or its grid.json.")],
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="Synthetic records (.parquet or .csv). An existing .parquet is "
        "replaced only when it is an earlier synthesize output (marked in its metadata); "
        "an existing .csv never is (a CSV cannot be marked): anything else exits 64.")],
    rows: Annotated[int | None, typer.Option(
        "--rows", min=1, help="How many records (default: n of the private data, which is "
        "public under replace-one).")] = None,
    seed: Annotated[int | None, typer.Option(
        "--seed", min=0, help="Seed the draw (reproducible synthetic data).")] = None,
    json: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Draw synthetic records from a grid synopsis; spends no budget.

    Each record's cell and class are drawn in proportion to the synopsis'
    noisy counts; each grid column's value is drawn uniformly within the
    cell (a category of the node, or a number in its interval). Only the
    grid's columns and the label are written: the synopsis says nothing
    about the other columns, and the command names those the records lack
    (a warning when the grid kept no column: label-only records). The
    synopsis' own cautions (a degenerate grid, an unusable verdict) are
    repeated on stderr. This is post-processing of a private release.

    Example:

        dpcli synthesize synopsis/ --rows 45000 --out synth.parquet
    """
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from dpcli import protect, signals
    from dpcli.algorithms.synopsis import synthesize as draw
    from dpcli.errors import UsageError
    from dpcli.io import Outputs, envelope_cautions
    from dpcli.mechanisms import make_rng
    from dpcli.predict import OUTPUT_FORMATS, load_grid_envelope

    ui = UI(quiet=quiet, json=json)
    model, env = load_grid_envelope(synopsis)
    count = model.n if rows is None else rows
    outputs = Outputs()
    outputs.check_writable(out, protected=protect.model_inputs(synopsis, model))
    fmt = OUTPUT_FORMATS.get(out.suffix.lower())
    if fmt is None:
        raise UsageError(f"{out}: unknown output format (use {', '.join(OUTPUT_FORMATS)})")
    protect.check_own_output(out, "synthesize", fmt)  # CSV: never replaced (no mark)
    table = draw(model, count, make_rng(seed))
    with outputs:
        tmp = outputs.stage(out)
        if fmt == "parquet":
            # the mark lets a rerun replace this file (dpcli.protect.check_own_output)
            pq.write_table(table.replace_schema_metadata(
                {**(table.schema.metadata or {}), **protect.output_mark("synthesize")}), tmp)
        else:
            pacsv.write_csv(table, tmp)
        outputs.commit()
    signals.deliver()  # a signal held while the file was renamed into place
    # the release's own cautions (degeneracy, an unusable verdict) travel with its records
    cautions = [f"{c}; the synthetic records inherit it" for c in envelope_cautions(env)]
    payload = env["payload"]
    spec_columns = payload.get("spec_columns") or [c["column"] for c in payload["candidates"]]
    lacks = [c for c in spec_columns if c not in table.column_names]
    if not model.grid:  # a 1-cell grid: label-only records, which say nothing about a row
        cautions.append(
            f"the synopsis kept no column (a grid of one cell): the records hold only the "
            f"label {model.schema.label.column!r}, drawn from its noisy class counts; they "
            f"lack every column of the spec's schema: {', '.join(lacks) or '(none)'}")
    for caution in cautions:
        ui.warn(f"{synopsis}: {caution}")
    ui.say(f"wrote {count:,} synthetic records ({', '.join(table.column_names)}) to {out}; "
           "no budget spent")
    if lacks and model.grid:
        ui.say(f"not in the synopsis, so not in the records: {', '.join(lacks)}")
    if json:
        ui.emit_json({"command": "synthesize", "synopsis": str(synopsis), "rows": count,
                      "columns": table.column_names, "lacks": lacks, "cautions": cautions,
                      "out": str(out), "spent": {"epsilon": 0.0, "delta": 0.0}})
