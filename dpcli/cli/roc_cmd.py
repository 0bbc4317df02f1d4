"""``dpcli roc``: a private ROC curve of a classifier on a private test set (PriROC)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dpcli.cli.common import (
    DataArg,
    EpsilonOpt,
    RunOptions,
    SpecOpt,
    number,
    spending_command,
)

if TYPE_CHECKING:

    pass

ModelOpt = Annotated[Path | None, typer.Option(
    "--model", "-m", help="A dpcli model JSON whose scores to evaluate (the positive "
    "class's probability), or a publish-grid folder (its grid.json), as predict takes.")]
ScoreColumnOpt = Annotated[str | None, typer.Option(
    "--score-column", help="Evaluate a score column of DATA instead of a model (needs a "
    "declared range).")]
ScoreRangeOpt = Annotated[str | None, typer.Option(
    "--score-range", metavar="LOWER,UPPER", help="Public range of --score-column; values "
    "outside it are clamped (default: the spec's, or the column's declared bounds).")]


@spending_command
def roc(
    data: DataArg,
    spec: SpecOpt,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", file_okay=False, help="Folder for curve.csv, curve.json and curve.png "
        "(required unless --dry-run).")] = None,
    model: ModelOpt = None,
    score_column: ScoreColumnOpt = None,
    score_range: ScoreRangeOpt = None,
    thresholds: Annotated[str | None, typer.Option(
        help="fixed-space (equal bins, data-independent, all of ε on the counts; default) "
        "or recursive-medians (the paper's noisy medians, 20% of ε).")] = None,
    k: Annotated[int | None, typer.Option(
        "--k", min=1, max=16, help="2^k bins; for recursive medians, k levels (default "
        "ceil(log2 n) - 3, at most 10).")] = None,
    alpha: Annotated[float | None, typer.Option(
        "--alpha", parser=number,
        help="Fixed-space: floor(α·n) bins instead of 2^k (the paper's α; at "
        "most 65,536).")] = None,
    counts: Annotated[str | None, typer.Option(
        help="How TP and FP counts are noised: hierarchical (b-ary tree with constrained "
        "inference; default), privelet (Haar wavelet, as in the paper) or laplace (each "
        "cumulative count: the baseline).")] = None,
    transform: Annotated[str | None, typer.Option(
        help="The scale scores are binned and ranked on: logit (the model's log-odds over its "
        "exact public range; default for naive Bayes and logistic regression) or identity "
        "(the score on its declared range; default otherwise).")] = None,
    auc_share: Annotated[float | None, typer.Option(
        "--auc-share", parser=number,
        help="Share of ε on the AUC released directly from a noisy signed "
        "pair count (default 0.5; 0: the AUC is the curve's trapezoid).")] = None,
    compare_true: Annotated[bool, typer.Option(
        "--compare-true", help="Also draw the TRUE curve in curve.png. Not private: refused "
        "unless the spec declares public_data: true (benchmarks, teaching).")] = False,
    epsilon: EpsilonOpt = None,
    opts: RunOptions = RunOptions(),
) -> None:
    """Draw a differentially private ROC curve and its AUC on a private test set.

    PriROC (Stoddard, Chen & Machanavajjhala 2014): thresholds are equal
    bins of the score range (or, with --thresholds recursive-medians, noisy
    medians bought with 20% of the curve's ε); the true- and false-positive
    counts at every threshold are released as noisy prefix sums; the curve is
    then made monotone from (0, 0) to (1, 1). A model's scores are binned on
    its log-odds (--transform). The AUC is released directly from a noisy
    signed count of positive/negative pairs (--auc-share of ε, default half).
    Releases the thresholds, the curve and the AUC, each with its 90 %
    interval from the noise (auc_interval; tpr_lower … fpr_upper per point).
    A test file that is, byte for byte, the model's training file (as this
    dataset's ledger recorded it) is named on stderr before the charge.

    Example:

        dpcli roc sample_data/adult_test.parquet --spec configs/adult.yaml \\
            --model models/nb.json --out roc/ --epsilon 1.0
    """
    from dpcli.api.roc import roc as run
    from dpcli.cli.spend import UIReporter, released, require_out
    from dpcli.spec import load_spec

    ui = opts.ui()
    require_out(out, opts.dry_run)
    result = run(load_spec(spec), data, model=model, out=out, score_column=score_column,
                 score_range=score_range, thresholds=thresholds, k=k, alpha=alpha, counts=counts,
                 transform=transform, auc_share=auc_share, compare_true=compare_true,
                 epsilon=epsilon, seed=opts.seed, dry_run=opts.dry_run, reporter=UIReporter(ui))
    done = released(ui, result)
    curve, d = done.value, done.details
    # one uncertainty for the AUC, as in curve.json: its 90 % interval from the noise
    lo, hi = done.summary["auc_interval"]
    level = done.payload["error_bars"]["level"]
    ui.say(f"private ROC: AUC {curve.auc:.3f}, {level:.0%} interval [{lo:.3f}, {hi:.3f}] "
           f"(noise only) over {d['thresholds']:,} thresholds ({d['rule']}, {d['counts']}); "
           f"each point's TPR and FPR interval in curve.csv (tpr_lower … fpr_upper); wrote "
           f"{out}/curve.csv, curve.json, curve.png; spent {done.plan.total} "
           f"(run {done.run_id[:8]})", markup=False)
    if opts.json:
        ui.emit_json({"command": "roc", "dataset": done.envelope["dataset"],
                      "run_id": done.run_id, "auc": curve.auc, "auc_interval": [lo, hi],
                      "level": level, "out": str(out),
                      # as evaluate's line: the curve's and its model's cautions, by key
                      **{k: done.payload[k] for k in ("caution", "noise_dominates",
                                                      "auc_caution", "model_caution",
                                                      "model_cautions")
                         if k in done.payload},
                      "spent": done.plan.total.to_json(), "breakdown": done.plan.to_json()})
