"""``dpcli validate``: private logistic regression, λ and class cut chosen privately."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from dpcli.cli.common import (
    DataArg,
    DryRunOpt,
    EpsilonOpt,
    JsonOpt,
    ProgressOpt,
    QuietOpt,
    ReportOpt,
    ReuseOpt,
    SeedOpt,
    SpecOpt,
    VerboseOpt,
    handle_errors,
)
from dpcli.cli.ui import UI

HISTOGRAM_NOTE = (
    "--learner histogram is not available: the paper gives its histogram case study (the "
    "validation score and its stability constants) only in supplementary material that is "
    "not part of the published text dpcli follows, so there is nothing to reproduce faithfully")


@handle_errors
def validate(
    data: DataArg,
    spec: SpecOpt,
    validation: Annotated[Path | None, typer.Option(
        "--validation", help="Validation rows (the same dataset and budget, disjoint rows). "
        "Default: about 10% of DATA's rows, chosen by a public hash of the row number that "
        "reads no value (spec keys validate.validation_fraction, validate.split_seed).",
        dir_okay=False)] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Model JSON to write (required unless --dry-run).")] = None,
    learner: Annotated[str, typer.Option(
        help="The model tuned: logreg (L2-regularised logistic regression).")] = "logreg",
    grid: Annotated[str | None, typer.Option(
        help="Comma-separated regularisers λ to choose from (default: the paper's ten, "
        "0.001,0.112,…,1).")] = None,
    method: Annotated[str | None, typer.Option(
        help="stability (default; Algorithms 1-2), or a §5 baseline: alpha-split, data-split, "
        "random.")] = None,
    score: Annotated[str | None, typer.Option(
        help="Validation loss for stability: ramp (default; bounded, δ = 0), hinge or "
        "logistic (need δ).")] = None,
    trainer: Annotated[str | None, typer.Option(
        help="objective (default: objective perturbation) or output (output perturbation).")
    ] = None,
    delta: Annotated[float | None, typer.Option(
        "--delta", help="δ for the hinge and logistic scores (default 1e-6); the ramp score "
        "needs none.")] = None,
    columns: Annotated[str | None, typer.Option(
        help="Comma-separated feature columns (default: the spec's 'validate.columns', else "
        "every numeric, categorical and binary column).")] = None,
    lam: Annotated[str | None, typer.Option(
        "--lambda", help="The regulariser: a number > 0 (no search); search (always search "
        "the grid by --method, the paper's procedure); or auto (default: search only when the "
        "selection noise is ≤ 1% of the score range, else λ0 = 4√d/(ε·n)). Spec key "
        "validate.lambda.")] = None,
    threshold_share: Annotated[str | None, typer.Option(
        "--threshold-share", help="Share of ε for the private class threshold, in [0, 0.25], "
        "or auto (default: clip(1207/(N·ε), 0.05, 0.25)); 0 keeps the 0.5 cut. Spec key "
        "validate.threshold_share.")] = None,
    epsilon: EpsilonOpt = None,
    seed: SeedOpt = None,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
    quiet: QuietOpt = False,
    progress: ProgressOpt = False,
    report: ReportOpt = False,
    reuse: ReuseOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Train private logistic regression, its regulariser and class cut chosen privately.

    By default (lambda auto) λ is searched on a grid only where n·ε makes
    the search's noise small (≤ 1 % of the score range); otherwise
    λ0 = 4√d/(ε·n) is used, decided from public facts. A share of ε
    (clip(1207/(N·ε), 0.05, 0.25); threshold_share 0: the 0.5 cut) then
    releases the class threshold by the exponential mechanism, so that
    predict gives both classes even from a strongly regularised model.

    stability (Chaudhuri & Vinterbo 2013; --lambda search forces it): one private model per λ is
    trained on the training rows with ε/2; each is scored on the validation
    rows by a 1-Lipschitz loss (ramp by default); only the index of the best
    score plus exponential noise is released; the chosen λ is retrained with
    fresh noise and ε/2. The noise is calibrated to how much one training
    or validation row can move a score when the models' noise is held fixed
    (β = max(2/(λ_min·n), β2/m)): the budget does not grow with the grid.

    Models are trained by objective perturbation (Chaudhuri, Monteleoni &
    Sarwate 2011, Algorithm 2, with its ε′ correction and extra regulariser)
    on rows mapped into the unit ball by the declared bounds. The baselines
    alpha-split, data-split and random are the paper's §5 comparisons.

    Example:

        dpcli validate sample_data/adult_train.parquet --spec configs/adult.yaml \\
            --epsilon 1 --out models/lr.json
        dpcli predict models/lr.json sample_data/adult_test.parquet --out preds.parquet
    """
    import numpy as np

    from dpcli import checks
    from dpcli.algorithms import inputs
    from dpcli.algorithms import validate as tuning
    from dpcli.budget import Budget
    from dpcli.cli.spend import (
        degeneracy,
        noise_generator,
        preflight,
        release_json,
        report_data,
        resolve_section,
    )
    from dpcli.data import DataSource
    from dpcli.errors import BudgetExhausted, UsageError
    from dpcli.fingerprint import input_digest
    from dpcli.io import Outputs
    from dpcli.mechanisms import Plan
    from dpcli.run import charged, prepare_source
    from dpcli.spec import ValidateSection, auto_or_number, lambda_value, load_spec
    from dpcli.spec import grid as parse_grid

    ui = UI(quiet=quiet, json=json, force_progress=progress, report=report)
    if learner == "histogram":
        raise UsageError(HISTOGRAM_NOTE)
    if learner not in tuning.LEARNERS:
        raise UsageError(f"--learner must be one of {', '.join(tuning.LEARNERS)}, got "
                         f"{learner!r}")
    for name, value, options in (("--method", method, tuning.METHODS),
                                 ("--score", score, tuning.SCORES),
                                 ("--trainer", trainer, tuning.TRAINERS)):
        if value is not None and value not in options:
            raise UsageError(f"{name} must be one of {', '.join(options)}, got {value!r}")
    if delta is not None and not tuning.MIN_DELTA <= delta < 1:
        raise UsageError(f"--delta must be in [{tuning.MIN_DELTA:g}, 1), got {delta}")
    s = load_spec(spec)
    grid_values = parse_grid(grid, checks.Where(Path("--grid"))) if grid is not None else None
    top = tuning.MAX_SHARE
    lam_value = None if lam is None else lambda_value(lam, checks.Where(Path("--lambda")))
    share_value = None if threshold_share is None else auto_or_number(
        threshold_share, checks.Where(Path("--threshold-share")), f"in [0, {top:g}]",
        lambda v: 0 <= v <= top)
    section = resolve_section(s, "validate", ValidateSection, epsilon, columns, grid=grid_values,
                              method=method, score=score, trainer=trainer, delta=delta,
                              lam=lam_value, threshold_share=share_value)
    # "auto" on the command line overrides a number in the spec (override() skips None)
    if lam is not None and lam_value is None:
        section = replace(section, lam=None)
    if threshold_share is not None and share_value is None:
        section = replace(section, threshold_share=None)
    if s.schema.n_classes != 2:
        raise UsageError(f"validate needs a binary label; {s.path}: label.classes declares "
                         f"{s.schema.n_classes}")
    chosen = section.columns or tuple(c for c in s.schema.names
                                      if inputs.usable(s.schema.column(c)))
    for c in chosen:
        if not inputs.usable(s.schema.column(c)):
            raise UsageError(f"validate: {c!r} is a {s.schema.column(c).kind} column; logistic "
                             "regression reads numeric, categorical and binary columns")
    if not chosen:
        raise UsageError(f"validate: {s.path} declares no numeric, categorical or binary column")
    config = tuning.ValidateConfig(**section.config_values())
    if delta is not None and not config.needs_delta:
        why = (f"the {config.method} baseline selects by 0/1 errors" if config.method != "stability"
               else "the ramp score is bounded")
        ui.say(f"note: --delta is not used: {why}, so this run is pure ε-DP (δ = 0)",
               markup=False)
    d = inputs.design_width(s.schema, chosen)
    total = Budget(section.epsilon, config.run_delta)
    if total.delta > s.budget.delta:
        raise BudgetExhausted(f"the {config.score} score needs δ = {config.run_delta:g}, but the "
                              f"budget of dataset {s.dataset!r} has δ = {s.budget.dlt:g} "
                              f"({s.path}: budget.delta); use --score ramp, which needs none")
    sizes: dict[str, int] = {}
    decided: dict[str, tuning.Decision] = {}
    vsource = None
    if validation is not None:
        _check_disjoint(data, validation, out)
        DataSource(validation, s.schema).check_structure(chosen)

    def plan_for(rows: int) -> Plan:
        nonlocal vsource
        if validation is None:
            m = int(tuning.validation_rows(rows, config.validation_fraction,
                                           config.split_seed).sum())
            n = rows - m
        else:   # its validation pass, after every structural check
            vsource, m = prepare_source(s, validation, chosen, total, dry_run=dry_run)
            n = rows
        where = f"{data}" if validation is None else f"{data} or {validation}"
        need_n = config.k if config.method == "data-split" else 1
        if n < need_n or m < 1:
            raise UsageError(f"{where}: {n} training and {m} validation rows; validate needs at "
                             f"least {need_n} and 1 (more rows, or another "
                             "validate.validation_fraction)")
        rows_all = rows + (m if validation is not None else 0)
        decision = tuning.decide(config, section.epsilon, n, m, d, rows_all,
                                 split=validation is None)
        sizes.update(n=n, m=m, n_all=rows_all)
        decided["decision"] = decision
        if decision.mode == "auto":
            ui.say(f"note: λ chosen without the data: {decision.reason}", markup=False)
        elif decision.mode == "select" and config.method == "stability":
            noise = tuning.selection_noise_mean(config, float(decision.epsilon_model), n, m, d)
            if noise > tuning.NOISY_SELECTION:
                ui.warn(f"the selection noise has mean {noise:.3g} (2β/ε2, β = max(2/(λ_min·n), "
                        f"β2/m)), large next to differences of validation scores (the ramp loss "
                        f"keeps them within 1): the choice may be close to random. Raise the "
                        f"smallest λ (now {min(config.grid):g}), or use more ε or rows.")
        error = tuning.threshold_error(rows_all, float(decision.epsilon_threshold))
        if error > tuning.FORECAST_WARNING:
            ui.warn(f"the class threshold's forecast error is {100 * error:.0f} % of the "
                    f"{rows_all:,} rows (> {100 * tuning.FORECAST_WARNING:.0f} %) at "
                    f"threshold ε = {float(decision.epsilon_threshold):.3g}: the class cut may "
                    "be far from the best; more ε or rows help (or threshold_share 0 for the "
                    "0.5 cut)")
        return tuning.full_plan(config, decision, n, m, d, rows_all)

    from dpcli import protect

    source, plan = preflight(ui, s, plan_for, data, chosen, out, [out], dry_run, total=total,
                             inputs=protect.inputs("the --validation file", validation))
    assert out is not None
    n, m = sizes["n"], sizes["m"]
    outputs = Outputs()
    arguments = {"data": str(data.resolve()), "out": str(out.resolve()), "columns": list(chosen),
                 "method": config.method, "score": config.score, "trainer": config.trainer,
                 "grid": list(config.grid), "epsilon": section.epsilon, "delta": config.run_delta,
                 "n_train": n, "n_validation": m,
                 "lambda": "auto" if config.lam is None else config.lam,
                 "threshold_share": "auto" if config.threshold_share is None
                 else config.threshold_share}
    if validation is None:
        arguments["split"] = {"validation_fraction": config.validation_fraction,
                              "split_seed": config.split_seed}
    else:
        # the validation rows are part of the charged input: their keyed digest is logged too
        arguments.update(validation=str(validation.resolve()),
                         validation_digest=input_digest(s.ledger_path, validation))
    positive = s.schema.label.positive_index
    positive = 1 if positive is None else positive
    rng = noise_generator(ui, s, seed, command="validate", arguments=arguments,
                          data=data)
    with charged(s, plan, command="validate", arguments=arguments, input_path=data,
                 seeded=seed is not None) as charge, outputs:
        with ui.progress("reading", source.num_rows_hint()) as advance:
            x, y = tuning.design_rows(source.batches(chosen, rng=rng), s.schema, chosen,
                                      positive, advance)
        decision = decided["decision"]
        valid_set = None
        if vsource is not None:
            valid_set = tuning.design_rows(vsource.batches(chosen, rng=rng), s.schema, chosen,
                                           positive)
        if decision.mode != "select":
            # no search: every row of DATA trains the one model
            with ui.progress("training", 1, unit="fits") as advance:
                outcome = tuning.fit_fixed(config, decision, x, y, rng)
                advance(1)
        else:
            if valid_set is None:
                held = tuning.validation_rows(len(y), config.validation_fraction,
                                              config.split_seed)
                keep, hold = np.flatnonzero(~held), np.flatnonzero(held)
                train_set, search_set = (x[keep], y[keep]), (x[hold], y[hold])
                # the two parts hold every row once: keep them, not a third copy (memory)
                x, y = None, None
                valid_set = search_set
            else:
                train_set, search_set = (x, y), valid_set
            with ui.progress("tuning", config.k + 1, unit="fits") as advance:
                outcome = tuning.tune(config, train_set, search_set,
                                      float(decision.epsilon_model), rng, advance)
        report = tuning.fit_report(config, outcome, section.epsilon, decision.n_model
                                   if decision.mode != "select" else n, m, decision)
        model = tuning.LogRegModel(inputs.model_schema(s.schema, chosen), tuple(chosen),
                                   outcome.fit.weights, report)
        # the class threshold reads every row (DATA and the validation file) once, in any
        # order (its utility is a count): its own ε
        parts = [(x, y) if x is not None else train_set]
        if valid_set is not None:
            parts.append(valid_set)
        logits = np.concatenate([np.asarray(px @ model.weights) for px, _ in parts])
        labels_all = np.concatenate([py for _, py in parts])
        cut = tuning.choose_threshold(model, logits, labels_all, decision.epsilon_threshold,
                                      rng)
        model.threshold = cut.logit
        report["threshold"] = cut.to_json()
        payload = {**model.to_payload(), "breakdown": plan.to_json(), **degeneracy(ui, model)}
        side = cut.one_class()
        if side is not None and "degeneracy" in payload:
            # the domain allows both classes, but the released count says the rows get one
            other = "negative" if side == "positive" else "positive"
            ui.warn(f"degenerate on the data: the released cut (logit {cut.logit:.4g}) calls "
                    f"{'almost every' if side == 'positive' else 'almost no'} row positive "
                    f"(noisy count {cut.noisy_predicted_positive:,} of {cut.n_rows:,}): the "
                    f"{other} class is (almost) never predicted. The model's ranking (score) may "
                    "still be useful; more ε or rows, or threshold_share 0 for the 0.5 cut")
            payload["degeneracy"] = {**payload["degeneracy"], "degenerate": True,
                                     "one_class_on_rows": side}
        outputs.write_text(out, release_json(tuning.KIND, payload, s, plan, charge,
                                             seeded=seed is not None))
        charge.outputs = outputs.commit()
        charge.summary.update(method=config.method, chosen_index=outcome.index,
                              chosen_lambda=outcome.fit.lam, lambda_rule=decision.mode,
                              threshold_logit=cut.logit)

    report_data(ui, source.report)
    if vsource is not None:
        report_data(ui, vsource.report)
    if outcome.index is None:
        ui.say(f"λ = {outcome.fit.lam:.4g} ({decision.reason}) on {decision.n_model:,} rows; "
               f"class cut at logit {cut.logit:.4g}; wrote {out}, spent {plan.total} "
               f"(run {charge.run_id[:8]})", markup=False)
    else:
        ui.say(f"{config.method}: chose λ = {outcome.fit.lam:g} (#{outcome.index + 1} of "
               f"{config.k}) on {n:,} training and {m:,} validation rows; class cut at logit "
               f"{cut.logit:.4g}; wrote {out}, spent {plan.total} (run {charge.run_id[:8]})",
               markup=False)
    if config.method == "stability" and outcome.index is not None:
        ui.say(tuning.describe_delta(config.run_delta, config.score), markup=False)
    if json:
        ui.emit_json({"command": "validate", "dataset": s.dataset, "run_id": charge.run_id,
                      "model": str(out), "method": config.method, "chosen_index": outcome.index,
                      "lambda": outcome.fit.lam, "lambda_rule": decision.mode,
                      "threshold_logit": cut.logit, "n_train": n, "n_validation": m,
                      "spent": plan.total.to_json(), "breakdown": plan.to_json(),
                      "report": report})


def _check_disjoint(data: Path, validation: Path, out: Path | None) -> None:
    """The training and validation files must be different files (not a copy, not a link).

    Every guarantee of validate counts each record once, in T or in V: a
    record in both would move a score by β1/n + β2/m and double the ε of the
    selection. dpcli can refuse the same file, a link or a byte-identical
    copy; that no person has rows in both files is the custodian's to ensure.
    """
    from dpcli.errors import UsageError
    from dpcli.fingerprint import file_digest

    if out is not None and out.exists() and out.resolve() == validation.resolve():
        raise UsageError(f"--out {out}: would overwrite the validation file")
    try:
        same = data.exists() and validation.exists() and (
            data.resolve() == validation.resolve() or data.samefile(validation)
            or file_digest(data) == file_digest(validation))
    except OSError:
        same = False   # unreadable files are reported by the structural checks that follow
    if same:
        raise UsageError(f"--validation {validation}: is the training file {data} (or a copy of "
                         "it); the validation rows must be disjoint from the training rows")
