"""``dpcli select-features``: private feature selection."""

from __future__ import annotations

from dataclasses import replace
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
def select_features(
    data: SourceArg,
    spec: SpecOpt,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Selection JSON to write (required unless --dry-run); "
        "trainers take it with --features.")] = None,
    score: Annotated[str | None, typer.Option(
        help="tc (total count), dc (difference count), pi (purity index), ig (information "
        "gain) — for words and binary columns — or chi2 (PrivPfC's Σ|o−e|, any column). "
        "Default: the spec's, else tc.")] = None,
    method: Annotated[str | None, typer.Option(
        help="threshold (sparse vector: scores above --threshold, at most --k), topk "
        "(exponential mechanism, --k rounds), perturb (noisy scores above --threshold "
        "and/or top --k) or cluster (k-means of noisy count vectors, clusters whose centre "
        "scores at least --threshold). Default: the spec's, else threshold.")] = None,
    threshold: Annotated[float | None, typer.Option(
        help="τ, on the score's own scale (a row count for tc and dc).")] = None,
    k: Annotated[int | None, typer.Option(
        "--k", min=1, help="How many to select (topk, perturb), or the cap on how many "
        "(threshold).")] = None,
    r: Annotated[int | None, typer.Option(
        "--r", min=1, help="Words counted per row of a tokens column (the paper's sampling; "
        "default: the spec's select-features.r, else the column's max_per_row).")] = None,
    columns: Annotated[str | None, typer.Option(
        help="Comma-separated declared columns to score (default: the spec's, else every "
        "column the score applies to).")] = None,
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
    """Select features privately: score each one against the label, then pick.

    Releases only WHICH features were selected (never a score). Candidates
    are the words of a tokens column's public vocabulary and binary columns
    (scores tc, dc, pi, ig), or whole columns (chi2; numeric columns in the
    spec's select-features.bins equal-width bins). The plan shows each
    score's sensitivity under replace-one and the noise before anything runs.
    Spend a small share of the budget here and train on the selection.

    Example:

        dpcli select-features data/train.parquet --spec configs/tweets.yaml \\
            --out features.json --score tc --method perturb --threshold 50 --r 10 --epsilon 0.2
        dpcli train-nb data/train.parquet --spec configs/tweets.yaml \\
            --features features.json --out nb.json --epsilon 0.8
    """
    from dpcli.algorithms import feature_selection as fs
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
    from dpcli.io import Outputs
    from dpcli.run import charged
    from dpcli.spec import SelectFeaturesSection, load_spec

    ui = UI(quiet=quiet, json=json, force_progress=progress, report=report)
    location = parse_location(data)
    s = load_spec(spec)
    section = resolve_section(s, "select-features", SelectFeaturesSection, epsilon, columns,
                              score=score, method=method, threshold=threshold, k=k, r=r)
    config = fs.FSConfig(**section.config_values())
    chosen = fs.scored_columns(s.schema, section.columns, config.score)
    s = replace(s, schema=fs.selection_schema(s.schema, chosen, config.r))
    fs.positive_index(s.schema)
    plan = fs.plan(s.schema, chosen, Budget(section.epsilon), config)
    if config.method == "perturb" and config.score not in ("tc", "dc"):
        ui.warn(f"perturb with {config.score} adds noise scaled to every candidate's change "
                "(one record moves all of them); threshold and topk pay only for one. "
                "See the plan's Δ1.")
    request = fs.request(s.schema, chosen, config)
    request.validate(s.schema)  # before the charge: a bad request must cost nothing

    source, _ = preflight(ui, s, plan, location, chosen, out, [out], dry_run, engine=engine)
    assert out is not None  # preflight ended a run without --out
    outputs = Outputs()

    arguments = {"data": location_text(location), "engine": engine,
                 "out": str(out.resolve()), "columns": list(chosen),
                 "score": config.score, "method": config.method, "epsilon": section.epsilon,
                 **config.parameters()}
    rng = noise_generator(ui, s, seed, command="select-features", arguments=arguments,
                          data=location)
    with charged(s, plan, command="select-features", arguments=arguments, input_path=location,
                 seeded=seed is not None) as charge, outputs:
        stats = compute_stats(ui, source, request, rng)
        selection = fs.select(stats, s.schema, chosen, plan, config, rng)
        payload = {**selection.to_payload(), "breakdown": plan.to_json()}
        outputs.write_text(out, release_json("feature_selection", payload, s, plan, charge,
                                             seeded=seed is not None))
        charge.outputs = outputs.commit()
        charge.summary = {"score": config.score, "method": config.method,
                          "candidates": selection.candidates,
                          "selected": len(selection.selected)}

    report_data(ui, stats.report)
    ui.say(f"selected {len(selection.selected):,} of {selection.candidates:,} candidates "
           f"({config.score}, {config.method}), wrote {out}, spent {plan.total} "
           f"(run {charge.run_id[:8]})")
    if not selection.selected:
        ui.warn("nothing was selected: a trainer can not use this file. Lower --threshold, "
                "raise --k or spend more ε (the spend is final).")
    if json:
        ui.emit_json({"command": "select-features", "dataset": s.dataset,
                      "run_id": charge.run_id, "selection": str(out), "score": config.score,
                      "method": config.method, "candidates": selection.candidates,
                      "selected": len(selection.selected), "spent": plan.total.to_json(),
                      "breakdown": plan.to_json()})
