"""``dpcli train-nb``: differentially private naive Bayes."""

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
def train_nb(
    data: SourceArg,
    spec: SpecOpt,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Model JSON to write (required unless --dry-run).")] = None,
    method: Annotated[str | None, typer.Option(
        help="global (per-class sums with global sensitivity; default) or smooth "
        "(smooth sensitivity of trimmed means and variances, Zafarani & Clifton).")] = None,
    columns: Annotated[str | None, typer.Option(
        help="Comma-separated declared columns to use (default: the spec's "
        "'train-nb.columns', else every declared column).")] = None,
    features: Annotated[Path | None, typer.Option(
        "--features", dir_okay=False, help="A select-features output: train on the selected "
        "columns and words only (instead of --columns).")] = None,
    r: Annotated[int | None, typer.Option(
        "--r", min=1, help="Words counted per row of each tokens column (default: the spec's "
        "train-nb.r, else the column's max_per_row). Fewer words, less noise per count.")] = None,
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
    """Train a differentially private naive Bayes classifier.

    Releases noisy class counts, per-class count tables of categorical,
    binary and token columns (discrete Laplace), and per-class means and
    variances of numeric columns (global sensitivity of per-class sums, or
    smooth sensitivity of the trimmed sample with heavy-tailed noise). The ε split
    follows Zafarani & Clifton: one share for the priors and for each
    categorical column, two for each numeric column; the plan shows every
    share before anything runs.

    Example:

        dpcli train-nb sample_data/adult_train.parquet --spec configs/adult.yaml \\
            --out models/nb.json --epsilon 1.0

    With a selection made by select-features (its ε was spent there):

        dpcli train-nb data/train.parquet --spec configs/tweets.yaml \\
            --features features.json --out nb.json --epsilon 0.8
    """
    from collections.abc import Iterator, Sequence
    from dataclasses import replace
    from typing import Any

    from dpcli.algorithms import naive_bayes as nb
    from dpcli.algorithms.common import cap_tokens
    from dpcli.algorithms.feature_selection import load_selection
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
    from dpcli.data.prefetch import prefetch
    from dpcli.io import Outputs
    from dpcli.run import charged
    from dpcli.spec import TrainNBSection, load_spec

    ui = UI(quiet=quiet, json=json, force_progress=progress, report=report)
    location = parse_location(data)
    s = load_spec(spec)
    section = resolve_section(s, "train-nb", TrainNBSection, epsilon, columns, method=method,
                              r=r)
    config = nb.NBConfig(**section.config_values())
    chosen = section.columns or s.schema.names
    if features is not None:
        if columns is not None:
            from dpcli.errors import UsageError

            raise UsageError("pass --columns or --features, not both")
        schema, chosen = load_selection(features, s.schema)
        s = replace(s, schema=schema)
    s = replace(s, schema=cap_tokens(s.schema, chosen, section.r))
    plan = nb.plan(s.schema, chosen, Budget(section.epsilon), config)
    if config.method == "smooth" and engine != "local":
        from dpcli.errors import UsageError

        # its order statistics need a second, banded pass, which only the local engine makes;
        # collecting every value to Spark's driver would fail on big data after the charge
        raise UsageError("--method smooth runs on the local engine only (its second pass over "
                         "the data is not built for Spark); use --method global with "
                         "--engine spark")
    # the local engine re-reads the file for the smooth method's order statistics (bounded
    # memory) instead of keeping every value
    request = nb.request(s.schema, chosen, config, rows_in_memory=False)
    request.validate(s.schema)  # before the charge: a bad request must cost nothing

    from dpcli import protect

    source, _ = preflight(ui, s, plan, location, chosen, out, [out], dry_run, engine=engine,
                          inputs=protect.inputs("the --features file", features))
    assert out is not None  # preflight ended a run without --out
    outputs = Outputs()

    arguments = {"data": location_text(location), "engine": engine,
                 "out": str(out.resolve()), "columns": list(chosen),
                 "method": config.method, "epsilon": section.epsilon, "trim": config.trim,
                 "r": section.r}
    if features is not None:
        arguments["features"] = str(features.resolve())
    rng = noise_generator(ui, s, seed, command="train-nb", arguments=arguments,
                          data=location)
    with charged(s, plan, command="train-nb", arguments=arguments, input_path=location,
                 seeded=seed is not None) as charge, outputs:
        stats = compute_stats(ui, source, request, rng)

        def reread(numeric: Sequence[str]) -> Iterator[Any]:
            # smooth method: the second pass for its order statistics (still after the charge;
            # numeric columns only, so the encoder draws nothing from rng)
            with ui.progress("re-reading", source.num_rows_hint()) as advance:
                for batch in prefetch(source.batches(numeric, rng=rng)):
                    advance(batch.n)
                    yield batch

        model = nb.fit(stats, s.schema, chosen, plan, config, rng, reread=reread)
        payload = {**model.to_payload(), "breakdown": plan.to_json(), **degeneracy(ui, model)}
        outputs.write_text(out, release_json("naive_bayes", payload, s, plan, charge,
                                             seeded=seed is not None))
        charge.outputs = outputs.commit()
        charge.summary = {"method": config.method, "columns": len(chosen)}

    report_data(ui, stats.report)
    ui.say(f"trained naive Bayes ({config.method}) on {len(chosen)} columns, wrote {out}, "
           f"spent {plan.total} (run {charge.run_id[:8]})")
    if json:
        ui.emit_json({"command": "train-nb", "dataset": s.dataset, "run_id": charge.run_id,
                      "model": str(out), "method": config.method,
                      "spent": plan.total.to_json(), "breakdown": plan.to_json()})
