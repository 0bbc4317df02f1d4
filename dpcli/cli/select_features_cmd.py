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
    total_epsilon: Annotated[float | None, typer.Option(
        "--total-epsilon", help="The ε for selection AND the training after it: the command "
        "spends the split rule's share (what the selection needs to resolve --min-effect, "
        "within 10-50 % of it) and prints the training share to pass to the trainer's "
        "--epsilon. Instead of --epsilon.")] = None,
    min_effect: Annotated[float | None, typer.Option(
        "--min-effect", help="The smallest score gap that matters, per record: a share of n "
        "for tc, dc, pi and chi2 (default 0.05), nats for ig (default 0.01). A selection "
        "whose noise cannot resolve it is refused before any charge.")] = None,
    allow_noise: Annotated[bool, typer.Option(
        "--allow-noise", help="Select even when the noise exceeds --min-effect (a warning "
        "on stderr and in the output). Spec: allow_noise: true.")] = False,
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

    Before any charge the selection's noise is compared with a meaningful score
    gap (--min-effect), from public facts only (n, ε, candidates, k, method):
    when the noise is larger it would select by noise, and the run is refused
    (exit 64, nothing charged) with the ε or n that would suffice; --allow-noise
    runs it anyway, with a warning. After the release, a selection whose noisy
    scores are indistinguishable from noise alone is flagged (stderr and the
    file's 'degeneracy'). With --total-epsilon the command takes the split
    rule's share of one total and prints the training share.

    Example:

        dpcli select-features data/train.parquet --spec configs/tweets.yaml \\
            --out features.json --score tc --method perturb --threshold 50 --r 10 --epsilon 0.2
        dpcli train-nb data/train.parquet --spec configs/tweets.yaml \\
            --features features.json --out nb.json --epsilon 0.8
        dpcli select-features data/train.parquet --spec configs/tweets.yaml \\
            --total-epsilon 1 --dry-run      # prints both shares, charges nothing
    """
    from dpcli.algorithms import feature_selection as fs
    from dpcli.budget import Budget
    from dpcli.cli.defaults import select_features_defaults
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
    from dpcli.mechanisms import Plan
    from dpcli.run import charged
    from dpcli.spec import SelectFeaturesSection, load_spec

    ui = UI(quiet=quiet, json=json, force_progress=progress, report=report)
    location = parse_location(data)
    s = load_spec(spec)
    if total_epsilon is not None and epsilon is not None:
        raise UsageError("pass --epsilon or --total-epsilon, not both")
    # --total-epsilon stands in for a missing section's ε; the split rule sets the spend
    section = resolve_section(s, "select-features", SelectFeaturesSection,
                              epsilon if total_epsilon is None else total_epsilon, columns,
                              score=score, method=method, threshold=threshold, k=k, r=r,
                              min_effect=min_effect, allow_noise=allow_noise or None)
    values, defaults = select_features_defaults(s.schema, section.columns,
                                                section.config_values())
    for note in defaults:
        ui.say(f"default: {note}", markup=False)
    config = fs.FSConfig(**values)
    chosen = fs.scored_columns(s.schema, section.columns, config.score)
    s = replace(s, schema=fs.selection_schema(s.schema, chosen, config.r))
    fs.positive_index(s.schema)
    if config.method == "perturb" and config.score not in ("tc", "dc"):
        ui.warn(f"perturb with {config.score} adds noise scaled to every candidate's change "
                "(one record moves all of them); threshold and topk pay only for one. "
                "See the plan's Δ1.")
    request = fs.request(s.schema, chosen, config)
    request.validate(s.schema)  # before the charge: a bad request must cost nothing

    checked: dict = {}  # filled by make_plan once n is known; also the dry run's JSON

    def make_plan(n: int) -> Plan:
        """The plan at n (public): the split rule's ε, and the noise check before any charge."""
        eps = section.epsilon
        if total_epsilon is not None:
            needed = fs.noise_check(s.schema, chosen, config, n, total_epsilon).needed_epsilon
            split = fs.split_rule(total_epsilon, needed)
            eps = split.selection
            checked["split"] = split.to_json()
            ui.say(f"split rule: selection ε = {split.selection:g}, training ε = "
                   f"{split.training:g} of the total {total_epsilon:g} (set by the "
                   f"{split.bound}); pass --epsilon {split.training:g} to the trainer")
        check = fs.noise_check(s.schema, chosen, config, n, eps)
        checked["noise_check"] = {**check.to_json(), "allowed": config.allow_noise}
        if not check.passes:
            if not config.allow_noise:
                total_note = ("" if total_epsilon is None else
                              f" (under --total-epsilon the selection gets at most half: a "
                              f"total ≥ {check.needed_epsilon / fs.SPLIT_CAP:.3g})")
                raise UsageError("refused before any charge: " + check.message() + total_note)
            ui.warn("--allow-noise: " + check.message().split(". Train on")[0]
                    + "; selecting anyway (recorded in the output under 'noise_check')")
        return fs.plan(s.schema, chosen, Budget(eps), config)

    upper = (section.epsilon if total_epsilon is None
             else fs.SPLIT_CAP * total_epsilon)  # the unlocked budget look: at most this
    source, plan = preflight(ui, s, make_plan, location, chosen, out, [out], dry_run,
                             engine=engine, total=Budget(upper), extra=checked)
    assert out is not None  # preflight ended a run without --out
    outputs = Outputs()

    arguments = {"data": location_text(location), "engine": engine,
                 "out": str(out.resolve()), "columns": list(chosen),
                 "score": config.score, "method": config.method,
                 "epsilon": plan.total.eps, "total_epsilon": total_epsilon,
                 "min_effect": config.effect(), "allow_noise": config.allow_noise,
                 **config.parameters()}
    rng = noise_generator(ui, s, seed, command="select-features", arguments=arguments,
                          data=location)
    with charged(s, plan, command="select-features", arguments=arguments, input_path=location,
                 seeded=seed is not None) as charge, outputs:
        stats = compute_stats(ui, source, request, rng)
        selection = fs.select(stats, s.schema, chosen, plan, config, rng)
        payload = {**selection.to_payload(), **checked, "breakdown": plan.to_json()}
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
    problem = selection.released.problem() if selection.released is not None else None
    if problem is not None:
        ui.warn(problem)
    if "split" in checked:
        ui.say(f"train on it with --epsilon {checked['split']['training']:g} (the rest of the "
               f"total {total_epsilon:g})")
    if not selection.selected:
        ui.warn("nothing was selected: a trainer can not use this file. Lower --threshold, "
                "raise --k or spend more ε (the spend is final).")
    if json:
        ui.emit_json({"command": "select-features", "dataset": s.dataset,
                      "run_id": charge.run_id, "selection": str(out), "score": config.score,
                      "method": config.method, "candidates": selection.candidates,
                      "selected": len(selection.selected), "spent": plan.total.to_json(),
                      **checked, **({"degeneracy": selection.released.to_json()}
                                    if selection.released is not None else {}),
                      "breakdown": plan.to_json()})
