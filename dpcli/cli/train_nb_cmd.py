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
    smooth sensitivity of the trimmed sample with heavy-tailed noise), and for a
    binary label a decision threshold (exponential mechanism, balanced accuracy).
    The ε split is a rule of public facts (n, ε, declared domains: ε_i ∝
    c_i^(2/3), README "train-nb"; the spec's train-nb.split overrides it); the
    plan shows every share before anything runs.

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
    if config.method == "smooth" and engine != "local":
        from dpcli.errors import UsageError

        # its order statistics need a second, banded pass, which only the local engine makes;
        # collecting every value to Spark's driver would fail on big data after the charge
        raise UsageError("--method smooth runs on the local engine only (its second pass over "
                         "the data is not built for Spark); use --method global with "
                         "--engine spark")
    if config.threshold != "none" and engine != "local":
        # the threshold's counts need a second pass with the released model, which only the
        # local engine makes: no threshold step is planned (no ε is spent on it)
        config = replace(config, threshold="none")
        ui.say("note: --engine spark releases no decision threshold (its second pass is "
               "built for the local engine only); the model predicts the most probable class")
    total = Budget(section.epsilon)
    chosen_split: dict[str, Any] = {}

    def make_plan(n: int) -> Any:
        # the split is a rule of public facts: n (public under replace-one), ε, the columns'
        # kinds and declared domains (nb_allocation); printed with the plan and recorded
        alloc = nb.allocation(s.schema, chosen, total, config, n)
        chosen_split.update(alloc.to_json())
        for reason in alloc.reasons:
            ui.say(f"budget split: {reason}")
        return nb.plan(s.schema, chosen, total, config, n)

    from dpcli import protect

    source, plan = preflight(ui, s, make_plan, location, chosen, out, [out], dry_run,
                             engine=engine, total=total,
                             inputs=protect.inputs("the --features file", features))
    # the local engine re-reads the file for the smooth method's order statistics (bounded
    # memory) instead of keeping every value
    request = nb.request(s.schema, chosen, config, rows_in_memory=False, p=plan)
    request.validate(s.schema)  # before the charge: a bad request must cost nothing
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
        if nb.has_step(plan, nb.THRESHOLD):
            # the decision threshold: a second pass scores the training rows with the
            # released model (still after the charge) and the exponential mechanism picks
            with ui.progress("threshold", source.num_rows_hint()) as advance:
                def scored() -> Iterator[Any]:
                    for batch in prefetch(source.batches(chosen, rng=rng)):
                        advance(batch.n)
                        yield batch

                nb.fit_threshold(model, plan, scored(), rng)
            if (note := nb.threshold_note(model)) is not None:
                ui.say(note, markup=False)
        payload = {**model.to_payload(), "breakdown": plan.to_json(),
                   "allocation": chosen_split, **degeneracy(ui, model)}
        outputs.write_text(out, release_json("naive_bayes", payload, s, plan, charge,
                                             seeded=seed is not None))
        charge.outputs = outputs.commit()
        charge.summary = {"method": config.method, "columns": len(chosen),
                          "threshold": model.threshold}

    report_data(ui, stats.report)
    ui.say(f"trained naive Bayes ({config.method}) on {len(chosen)} columns, wrote {out}, "
           f"spent {plan.total} (run {charge.run_id[:8]})")
    if json:
        ui.emit_json({"command": "train-nb", "dataset": s.dataset, "run_id": charge.run_id,
                      "model": str(out), "method": config.method,
                      "spent": plan.total.to_json(), "breakdown": plan.to_json()})
