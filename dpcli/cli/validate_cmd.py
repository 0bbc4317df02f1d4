"""``dpcli validate``: private logistic regression, λ and class cut chosen privately."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dpcli.cli.common import (
    DataArg,
    EpsilonOpt,
    RunOptions,
    SpecOpt,
    number,
    spending_command,
)


@spending_command
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
        "--delta", parser=number,
        help="δ for the hinge and logistic scores (default 1e-6); the ramp score "
        "needs none.")] = None,
    columns: Annotated[str | None, typer.Option(
        help="Comma-separated feature columns (default: the spec's 'validate.columns', else "
        "every numeric, categorical and binary column, less any categorical whose declared "
        "levels outnumber both the rest of the design and √(n·ε): those are left out, with a "
        "warning; naming the columns keeps them).")] = None,
    lam: Annotated[str | None, typer.Option(
        "--lambda", help="The regulariser: a number > 0 (no search); search (always search "
        "the grid by --method, the paper's procedure); or auto (default: λ0 = 4√d/(ε·n), or a "
        "search of the grid (the spec's, else the paper's) only when its selection noise is "
        "≤ 1% of the score range and its smallest λ ≤ 4·λ0). A choice at the grid's edge "
        "is warned about. Spec key validate.lambda.")] = None,
    threshold_share: Annotated[str | None, typer.Option(
        "--threshold-share", help="Share of ε for the private class threshold, in [0, 0.25], "
        "or auto (default: clip(1207/(N·ε), 0.05, 0.25)); 0 keeps the 0.5 cut. Spec key "
        "validate.threshold_share.")] = None,
    epsilon: EpsilonOpt = None,
    opts: RunOptions = RunOptions(),
) -> None:
    """Train private logistic regression, its regulariser and class cut chosen privately.

    By default (lambda auto) λ0 = 4√d/(ε·n) is used, decided from public
    facts; a grid is searched instead only where its noise is small (≤ 1 %
    of the score range) and its smallest λ is at most 4·λ0 (the spec's grid,
    else the paper's). A search
    that picks the grid's smallest or largest λ warns. A share of ε
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
    from dpcli.api.validate import validate as run
    from dpcli.cli.spend import UIReporter, released, require_out
    from dpcli.spec import load_spec

    ui = opts.ui()
    require_out(out, opts.dry_run)
    result = run(load_spec(spec), data, validation=validation, out=out, learner=learner, grid=grid,
                 method=method, score=score, trainer=trainer, delta=delta, columns=columns,
                 lam=lam, threshold_share=threshold_share, epsilon=epsilon, seed=opts.seed,
                 dry_run=opts.dry_run, reporter=UIReporter(ui))
    done = released(ui, result)
    d = done.details
    spent = f"wrote {out}, spent {done.plan.total} (run {done.run_id[:8]})"
    cut = f"class cut at logit {d['threshold_logit']:.4g}"
    if d["chosen_index"] is None:
        ui.say(f"λ = {d['lambda']:.4g} ({d['reason']}) on {d['n_model']:,} rows; {cut}; {spent}",
               markup=False)
    else:
        ui.say(f"{d['method']}: chose λ = {d['lambda']:g} (#{d['chosen_index'] + 1} of {d['k']}) "
               f"on {d['n_train']:,} training and {d['n_validation']:,} validation rows; {cut}; "
               f"{spent}", markup=False)
    if d["delta_note"]:
        ui.say(d["delta_note"], markup=False)
    if opts.json:
        ui.emit_json({"command": "validate", "dataset": done.envelope["dataset"],
                      "run_id": done.run_id, "model": str(out), "method": d["method"],
                      "chosen_index": d["chosen_index"], "lambda": d["lambda"],
                      "lambda_rule": d["lambda_rule"], "threshold_logit": d["threshold_logit"],
                      "n_train": d["n_train"], "n_validation": d["n_validation"],
                      "spent": done.plan.total.to_json(), "breakdown": done.plan.to_json(),
                      "report": d["report"]})
