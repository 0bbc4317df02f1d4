"""``dpcli train-brc``: boosting with random classifiers (Shen et al.)."""

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
def train_brc(
    data: DataArg,
    spec: SpecOpt,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Model JSON to write (required unless --dry-run).")] = None,
    rounds: Annotated[str | None, typer.Option(
        "--rounds", "-T", help="Boosting rounds T, or 'auto'. Selecting rounds (the "
        "default): T = ⌊0.1·ε_r·m/(3·c2)⌋ clipped to [5, 200], m the smaller class as "
        "released (the selection's noise at most a third of a random hyperplane's typical "
        "edge 0.1; ε_r the rounds' share of ε). With 'train-brc: candidates: 1' (the "
        "paper's round): T = ⌊0.1·n·ε_r/(√2·c1·c2)⌋ clipped to [10, 200]. Default: the "
        "spec's, else auto.")] = None,
    c1: Annotated[float | None, typer.Option(
        "--c1", parser=number,
        help="Private weights stay ≥ 1/c1 (1 ≤ c1 ≤ 1000; default √2).")] = None,
    c2: Annotated[float | None, typer.Option(
        "--c2", parser=number,
        help="Private weights stay ≤ c2 (1 ≤ c2 ≤ 1000; default √2).")] = None,
    columns: Annotated[str | None, typer.Option(
        help="Comma-separated feature columns (default: the spec's 'train-brc.columns', else "
        "every numeric, categorical and binary column).")] = None,
    epsilon: EpsilonOpt = None,
    opts: RunOptions = RunOptions(),
) -> None:
    """Train a private boosted linear classifier (brc, Shen et al.).

    With a private label, 1/20 of ε first releases the number of positive
    records (discrete Laplace, sensitivity 1); with a public label it is
    exact.

    By default each of T rounds draws K random linear classifiers over the
    private features (K = 2^22/n in [16, 256], the spec's 'candidates' to
    set it) and releases only which one it keeps: report-noisy-max with
    exponential noise on their class-balanced edges (sensitivity
    c2/(2·m), m the smaller released class), at ε_r/T a round; the chosen
    one (or its mirror) votes with ±0.1. T follows the released count.
    With a public label and public columns (Algorithm 2) and n·ε at least
    about 800 (where the vote's noise is small), the best public stump joins
    every round at no cost beside the selected classifier, and 1/20 of ε
    releases the chosen classifiers' mean edge, which becomes their vote
    instead of 0.1 (shrunk towards 0.1 by its noise); below that the stump
    competes in each round's selection.

    With 'candidates: 1' (the paper's round) the count sets class weights
    under which each class carries half the
    weight (their ratio capped by the noise budget the rounds leave, and 20),
    and each of T rounds draws a random linear classifier over the private
    features (they are scaled into [-1, 1] with their
    declared bounds; one constant on the domain is drawn again) and releases
    its class-weighted error with Laplace noise of scale
    ρ·c1·c2·T/(ε_r·n), ρ the class-weight ratio, ε_r the rounds' share of ε
    (17/20 with a private label, else 9/10). The private weights are clipped
    to [1/c1, c2], so one record moves that error by at most ρ·c1·c2/n.
    The last 1/10 of ε releases a noisy histogram of the training margins by
    class, to which the score σ(a·F + b) is fitted (Platt scaling). The
    predicted class is positive where F exceeds a threshold stored in the
    model: the margin bin edge of the best balanced accuracy on that noisy
    histogram (post-processing). A near-constant ensemble, or
    one that never predicts a class, is reported on stderr and in the model
    file ('degeneracy').

    The file is read once for the class count, once per round and once more
    for the calibration, a batch at a time: memory does not grow with the
    number of rows (a numeric public column keeps one sum per distinct
    value).

    Columns listed under the spec's 'train-brc: public:' are public
    knowledge. If the spec also declares the label public ('label: public:
    true'), a weighted decision stump on the public columns joins (selecting
    rounds) or competes in (the paper's round) each round at no privacy cost
    (Algorithm 2), and ε protects the private features only.
    With 'label: public: false', or no public column, every feature and the
    label are private (Algorithm 3, replace-one). Public columns with nothing
    said about the label are refused before any charge.

    Example:

        dpcli train-brc sample_data/adult_train.parquet --spec configs/adult.yaml \\
            --out models/brc.json --epsilon 0.16
        dpcli predict models/brc.json sample_data/adult_test.parquet --out preds.parquet
    """
    from dpcli.api.train_brc import train_brc as run
    from dpcli.cli.spend import UIReporter, released, require_out
    from dpcli.spec import load_spec

    ui = opts.ui()
    require_out(out, opts.dry_run)
    result = run(load_spec(spec), data, out=out, rounds=rounds, c1=c1, c2=c2, columns=columns,
                 epsilon=epsilon, seed=opts.seed, dry_run=opts.dry_run, reporter=UIReporter(ui))
    done = released(ui, result)
    d, model = done.details, done.value
    cal = model.calibration
    k = model.config.candidates
    noise = (f"{k} random classifiers a round, selection noise scale c2·T/(m·ε_r) = "
             f"{d['noise_scale']:.3g} (m the smaller class)" if k > 1 else
             f"class weights {model.class_ratio:.3g}:1, noise scale ρ·c1·c2·T/(ε_r·n) = "
             f"{d['noise_scale']:.3g}")
    ui.say(f"trained brc ({d['mode']}: {d['private_columns']} private, {d['public_columns']} "
           f"public columns) with T = {d['rounds']} rounds ({d['public_rounds']} public), "
           f"class prior {cal.prior:.3g} ({'exact' if cal.exact_count else 'noisy'}), {noise}, "
           f"threshold F > {cal.threshold:.3g}; wrote {out}, spent "
           f"{done.plan.total} (run {done.run_id[:8]})")
    if opts.json:
        ui.emit_json({"command": "train-brc", "dataset": done.envelope["dataset"],
                      "run_id": done.run_id, "model": str(out), "mode": d["mode"],
                      "neighbouring": d["neighbouring"], "rounds": d["rounds"],
                      "public_rounds": d["public_rounds"], "noise_scale": d["noise_scale"],
                      "prior": cal.prior, "threshold": cal.threshold,
                      "degenerate": d["degenerate"], "spent": done.plan.total.to_json(),
                      "breakdown": done.plan.to_json()})
