"""``dpcli roc``: a private ROC curve of a classifier on a private test set (PriROC)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

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

if TYPE_CHECKING:
    import numpy as np

    from dpcli.algorithms.roc import RocPass

ModelOpt = Annotated[Path | None, typer.Option(
    "--model", "-m", dir_okay=False, help="A dpcli model JSON whose scores to evaluate "
    "(the positive class's probability).")]
ScoreColumnOpt = Annotated[str | None, typer.Option(
    "--score-column", help="Evaluate a score column of DATA instead of a model (needs a "
    "declared range).")]
ScoreRangeOpt = Annotated[str | None, typer.Option(
    "--score-range", metavar="LOWER,UPPER", help="Public range of --score-column; values "
    "outside it are clamped (default: the spec's, or the column's declared bounds).")]


@handle_errors
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
        "--alpha", help="Fixed-space: floor(α·n) bins instead of 2^k (the paper's α; at "
        "most 65,536).")] = None,
    counts: Annotated[str | None, typer.Option(
        help="How TP and FP counts are noised: hierarchical (b-ary tree with constrained "
        "inference; default), privelet (Haar wavelet, as in the paper) or laplace (each "
        "cumulative count: the baseline).")] = None,
    compare_true: Annotated[bool, typer.Option(
        "--compare-true", help="Also draw the TRUE curve in curve.png. Not private: refused "
        "unless the spec declares public_data: true (benchmarks, teaching).")] = False,
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
    """Draw a differentially private ROC curve and its AUC on a private test set.

    PriROC (Stoddard, Chen & Machanavajjhala 2014): thresholds are equal
    bins of the score range (or, with --thresholds recursive-medians, noisy
    medians bought with 20% of ε); the true- and false-positive counts at
    every threshold are released as noisy prefix sums; the curve is then
    made monotone from (0, 0) to (1, 1). Releases the thresholds, the curve
    and its AUC.

    Example:

        dpcli roc sample_data/adult_test.parquet --spec configs/adult.yaml \\
            --model models/nb.json --out roc/ --epsilon 1.0
    """
    import numpy as np

    from dpcli.algorithms import roc as pr
    from dpcli.budget import Budget
    from dpcli.cli.scoring import fold_scores, parse_range, score_input
    from dpcli.cli.spend import (
        noise_generator,
        preflight,
        release_json,
        report_data,
        resolve_section,
    )
    from dpcli.errors import DataError, UsageError
    from dpcli.io import Outputs
    from dpcli.mechanisms import Plan
    from dpcli.run import charged
    from dpcli.spec import RocSection, load_spec

    ui = UI(quiet=quiet, json=json, force_progress=progress, report=report)
    s = load_spec(spec)
    section = resolve_section(s, "roc", RocSection, epsilon, thresholds=thresholds, k=k,
                              alpha=alpha, counts=counts, score_column=score_column,
                              score_range=parse_range(score_range))
    config = pr.ROCConfig(**section.config_values())
    si = score_input(s, section, model, score_column, score_range)
    si.require_binary("roc")
    if compare_true and not s.public_data:
        raise UsageError("--compare-true draws the true ROC curve, which is NOT private; it is "
                         f"refused because {spec} does not declare 'public_data: true'. Use it "
                         "only on public data (benchmarks, teaching).")
    total = Budget(section.epsilon)
    checked_n = 0  # the record count of the pre-charge check (public)

    def plan_for(n: int) -> Plan:
        nonlocal checked_n
        if n < 2:
            raise UsageError(f"{data}: an ROC curve needs at least 2 records, found {n}")
        checked_n = n
        return pr.plan(config, n, total)

    files = [] if out is None else [out / "curve.csv", out / "curve.json", out / "curve.png"]
    if out is not None and out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is a file; give a folder")
    from dpcli import protect

    source, plan = preflight(ui, si.spec, plan_for, data, si.columns, out, files, dry_run,
                             total=total, inputs=protect.model_inputs(model, si.model))
    assert out is not None  # preflight ended a run without --out
    outputs = Outputs()
    arguments = {"data": str(data.resolve()), "out": str(out.resolve()),
                 **si.source_note, "epsilon": section.epsilon,
                 "thresholds": config.thresholds, "counts": config.counts,
                 "compare_true": compare_true}
    rng = noise_generator(ui, si.spec, seed, command="roc", arguments=arguments,
                          data=data)
    with charged(si.spec, plan, command="roc", arguments=arguments, input_path=data,
                 seeded=seed is not None) as charge, outputs:
        # one pass folds every batch into counts (memory bounded by the bins, not the rows)
        roc_pass = pr.RocPass(config, n=checked_n, lower=si.lower, upper=si.upper)
        kept: list[tuple[np.ndarray, np.ndarray]] = []  # --compare-true only: public data
        n = fold_scores(ui, source, si, si.scores,
                        _folder(roc_pass, si.positive, kept if compare_true else None), rng)
        if n != checked_n:
            raise DataError(f"{data}: changed while being read ({n:,} records, {checked_n:,} "
                            "when checked)")
        curve, cuts = roc_pass.release(plan, rng)
        noise = pr.count_noise_scale(config, n, plan)
        payload = {**curve.to_payload(), "n": n,
                   "positive_class": si.classes[si.positive],
                   "rule": "predicted positive when score > threshold",
                   "score_range": [si.lower, si.upper], "parameters": config.parameters(n),
                   "thresholds": [float(t) for t in cuts], "count_noise_scale": noise,
                   **si.source_note,
                   "compare_true": compare_true, "breakdown": plan.to_json()}
        true_curve = None
        if compare_true:
            true_curve = pr.true_roc(np.concatenate([s for s, _ in kept]),
                                     np.concatenate([p for _, p in kept]))
        del roc_pass, kept  # nothing below may touch private values
        title = f"private ROC, ε={section.epsilon:g} ({config.thresholds}, {config.counts})"
        outputs.write_text(out / "curve.csv", _csv(curve))
        outputs.write_text(out / "curve.json", release_json("roc_curve", payload, si.spec, plan,
                                                            charge, seeded=seed is not None))
        from dpcli.plot import roc_png

        outputs.write_bytes(out / "curve.png", roc_png(curve, title=title, true_curve=true_curve))
        charge.outputs = outputs.commit()
        charge.summary = {"auc": round(curve.auc, 6), "bins": config.bins(n),
                          **({"non_private_output": "curve.png shows the true curve "
                              "(spec declares public_data)"} if compare_true else {})}

    report_data(ui, source.report)
    ui.say(f"private ROC: AUC {curve.auc:.3f} over {len(cuts):,} thresholds "
           f"({config.thresholds}, {config.counts}); wrote {out}/curve.csv, curve.json, "
           f"curve.png; spent {plan.total} (run {charge.run_id[:8]})")
    smaller = min(curve.positives, curve.negatives)  # released (noisy) class sizes
    if noise > 0.05 * smaller:
        ui.warn(f"the counts' noise (scale {noise:.3g}) is large next to the smaller class "
                f"(about {smaller:,.0f} records): this curve is mostly noise. Spend more ε, "
                "or use fewer bins (--k), or evaluate on more records.")
    if true_curve is not None:
        ui.warn(f"curve.png also shows the TRUE curve (AUC {true_curve.auc:.3f}): NOT private, "
                "for public data only")
    if json:
        ui.emit_json({"command": "roc", "dataset": s.dataset, "run_id": charge.run_id,
                      "auc": curve.auc, "out": str(out), "spent": plan.total.to_json(),
                      "breakdown": plan.to_json()})


def _folder(roc_pass: RocPass, positive: int, kept: list[tuple[np.ndarray, np.ndarray]] | None
            ) -> Callable[[np.ndarray, np.ndarray], None]:
    """Fold a batch's scores and label codes into ``roc_pass`` (and ``kept``, if given)."""
    def add(scores: np.ndarray, labels: np.ndarray) -> None:
        is_positive = labels == positive
        roc_pass.add(scores, is_positive)
        if kept is not None:
            kept.append((scores, is_positive))

    return add


def _csv(curve: object) -> str:
    lines = ["threshold,fpr,tpr"]
    for t, f, r in zip(curve.thresholds, curve.fpr, curve.tpr, strict=True):  # type: ignore[attr-defined]
        lines.append(f"{float(t)!r},{float(f)!r},{float(r)!r}")
    return "\n".join(lines) + "\n"
