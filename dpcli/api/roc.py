"""``roc`` as a function: a private ROC curve and AUC of a classifier on a private test set."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpcli.api.report import Reporter, Silent
from dpcli.api.result import Released
from dpcli.api.spend import DryRun, Spend, resolve_section
from dpcli.errors import UsageError
from dpcli.spec import Spec

if TYPE_CHECKING:
    import numpy as np

    from dpcli.algorithms.roc import RocPass

#: the files ``roc`` writes into its output folder
FILES = ("curve.csv", "curve.json", "curve.png")


def roc(spec: Spec, data: Path, *, model: Path | None = None, out: Path | None = None,
        score_column: str | None = None, score_range: str | None = None,
        thresholds: str | None = None, k: int | None = None, alpha: float | None = None,
        counts: str | None = None, transform: str | None = None,
        auc_share: float | None = None, compare_true: bool = False,
        epsilon: float | None = None, seed: int | None = None, dry_run: bool = False,
        reporter: Reporter | None = None) -> Released | DryRun:
    """Release a private ROC curve (PriROC, Stoddard, Chen & Machanavajjhala 2014) and AUC.

    The scores are ``model``'s (a released model file) or ``score_column``'s
    (with its public ``score_range``). Costs the section's ε: noisy TP/FP
    prefix counts over public (or privately chosen) thresholds, and with
    ``auc_share`` > 0 the AUC from a noisy signed pair count. ``out`` (a
    folder) gets curve.csv, curve.json and curve.png. See docs/design.md, "roc".
    """
    import dataclasses

    import numpy as np

    from dpcli import protect
    from dpcli.algorithms import roc as pr
    from dpcli.algorithms import roc_scale
    from dpcli.api.scoring import (
        ledger_cautions,
        parse_range,
        score_input,
        warn_model_cautions,
        warn_training_file,
    )
    from dpcli.api.spend import forecast_of
    from dpcli.budget import Budget
    from dpcli.errors import DataError
    from dpcli.forecast import evaluate as efc
    from dpcli.forecast import roc as fc
    from dpcli.io import dumps_json
    from dpcli.mechanisms import Plan
    from dpcli.spec import RocSection

    reporter = reporter or Silent()
    data = Path(data)
    s = spec
    section = resolve_section(s, "roc", RocSection, epsilon, thresholds=thresholds, k=k,
                              alpha=alpha, counts=counts, score_column=score_column,
                              score_range=parse_range(score_range), transform=transform,
                              auc_share=auc_share)
    config = pr.ROCConfig(**section.config_values())
    si = score_input(s, section, model, score_column, score_range)
    recorded, ledgered = ledger_cautions(reporter, s, si)   # an edited model file
    cautioned = warn_model_cautions(reporter, si)
    si.require_binary("roc")
    # a public function of the released model (or of the declared range): free
    scale = roc_scale.resolve(section.transform, model=si.model, lower=si.lower, upper=si.upper)
    if compare_true and not s.public_data:
        raise UsageError("--compare-true draws the true ROC curve, which is NOT private; it is "
                         f"refused because {s.path} does not declare 'public_data: true'. Use "
                         "it only on public data (benchmarks, teaching).")
    total = Budget(section.epsilon)
    checked_n = 0  # the record count of the pre-charge check (public)

    def plan_for(n: int) -> Plan:
        nonlocal checked_n
        if n < 2:
            raise UsageError(f"{data}: an ROC curve needs at least 2 records, found {n}")
        checked_n = n
        return fc.plan(si.spec, section, n)

    if out is not None and out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is a file; give a folder")
    files = [] if out is None else [out / f for f in FILES]
    # public: a released model's own class share sets the forecast's class balance
    prevalence = (None if si.model is None or len(si.classes) != 2
                  else efc.model_prevalence(si.model, si.positive))
    fc_context = {} if prevalence is None else {"prevalence": prevalence}
    spend = Spend.prepare(si.spec, plan_for, data, si.columns, command="roc", reporter=reporter,
                          outputs=files, total=total, dry_run=dry_run,
                          inputs=protect.model_inputs(model, si.model),
                          forecast=forecast_of("roc", si.spec, section,
                                               **fc_context))
    # its own training rows? stderr only (by the digest prepare started beside the count)
    warn_training_file(reporter, s, recorded, data)
    if dry_run:
        return spend.dry_run()
    plan = spend.plan
    arguments: dict[str, Any] = {
        "data": str(data.resolve()), "out": None if out is None else str(out.resolve()),
        **si.source_note, "epsilon": section.epsilon, "thresholds": config.thresholds,
        "counts": config.counts, "transform": scale.transform, "auc_share": config.auc_share,
        "compare_true": compare_true}
    with spend.charged(arguments, seed=seed) as run:
        # one pass folds every batch into counts (memory bounded by the bins, not the rows)
        roc_pass = pr.RocPass(config, n=checked_n, lower=scale.lower, upper=scale.upper)
        kept: list[tuple[np.ndarray, np.ndarray]] = []  # compare_true only: public data
        n = run.fold(si.columns, roc_scale.scorer(scale, si.model, si.positive, si.scores),
                     _folder(roc_pass, si.positive, kept if compare_true else None))
        if n != checked_n:
            raise DataError(f"{data}: changed while being read ({n:,} records, {checked_n:,} "
                            "when checked)")
        curve, cuts = roc_pass.release(run.plan, run.rng)   # draws each step once
        # error bars from the released values and the noise alone (post-processing, free)
        bars = fc.error_bars(curve, config, plan, n)
        noise = pr.count_noise_scale(config, n, plan)
        scaled_cuts = cuts
        if scale.transform != "identity":  # thresholds back on the score's own scale
            curve = dataclasses.replace(curve, thresholds=np.where(
                np.isfinite(curve.thresholds), scale.to_score(curve.thresholds),
                curve.thresholds))
            cuts = scale.to_score(cuts)
        # the degenerate-output check keeps roc_scale's first-order expected error (its
        # rule); what the user reads is the one uncertainty of the AUC: its 90 % interval
        dominated = curve.auc_error is not None and curve.auc_error > roc_scale.NOISE_DOMINATES
        lo, hi = bars["auc"]
        warning = (f"noise dominates the AUC: its {bars['level']:.0%} interval from the noise "
                   f"is [{lo:.3f}, {hi:.3f}]. Spend more ε (or a larger --auc-share), or "
                   "evaluate on more records." if dominated else None)
        chance = None if dominated else _chance_caution(lo, hi, bars["level"])
        payload = {**_with_bars(curve.to_payload(), bars), "n": n,
                   "positive_class": si.classes[si.positive],
                   "rule": "predicted positive when score > threshold",
                   "score_range": [si.lower, si.upper], "parameters": config.parameters(n),
                   "scale": scale.to_json(),
                   "scale_thresholds": [float(t) for t in scaled_cuts],
                   **({"noise_dominates": warning} if warning else {}),
                   **({"auc_caution": chance} if chance else {}),
                   **ledgered, **cautioned,
                   "thresholds": [float(t) for t in cuts], "count_noise_scale": noise,
                   **si.source_note,
                   "compare_true": compare_true, "breakdown": plan.to_json()}
        true_curve = None
        if compare_true:
            true_curve = pr.true_roc(np.concatenate([v for v, _ in kept]),
                                     np.concatenate([p for _, p in kept]))
        del roc_pass, kept  # nothing below may touch private values
        curve_warning = _curve_noise_warning(curve, noise)   # from released values
        if curve_warning is not None:   # in the file too: the warning travels with it
            payload["caution"] = curve_warning
        envelope = run.envelope("roc_curve", payload)
        if out is not None:
            from dpcli.plot import roc_png

            title = f"private ROC, ε={section.epsilon:g} ({config.thresholds}, {config.counts})"
            run.write(out / "curve.csv", _csv(curve, bars))
            run.write(out / "curve.json", dumps_json(envelope))
            # the picture carries the interval and the caution too (it travels alone)
            caution = warning or curve_warning or chance or (
                f"its model: {si.model_cautions[0]}" if si.model_cautions else None)
            run.write_bytes(out / "curve.png", roc_png(curve, title=title,
                                                       true_curve=true_curve, bars=bars,
                                                       warning=caution))
        run.summary = {"auc": round(curve.auc, 6), "bins": config.bins(n),
                       "auc_interval": bars["auc"],
                       **({"non_private_output": "curve.png shows the true curve "
                           "(spec declares public_data)"} if compare_true else {})}
    if curve_warning is not None:
        reporter.warn(curve_warning)
    if chance is not None:
        reporter.warn(chance)
    if warning is not None:
        reporter.warn(warning)
    if true_curve is not None:
        reporter.warn(f"curve.png also shows the TRUE curve (AUC {true_curve.auc:.3f}): NOT "
                      "private, for public data only")
    details = {"thresholds": len(cuts), "rule": config.thresholds, "counts": config.counts}
    return Released("roc_curve", curve, envelope, plan, run.run_id, out, dict(run.summary),
                    tuple(spend.data_report()), details)


def _chance_caution(lo: float, hi: float, level: float) -> str | None:
    """The AUC's caution, from its released interval (post-processing, free): a model whose
    ranking the release cannot tell from chance, or that ranks the classes the wrong way
    (tester 13: AUC 0.510 [0.491, 0.528] was released without a word)."""
    if hi < 0.5:
        return (f"the AUC's {level:.0%} interval [{lo:.3f}, {hi:.3f}] lies below 0.5: on "
                "these records the model ranks the classes the wrong way round (the "
                "positive class or the score may be inverted)")
    if lo <= 0.5:
        return (f"the AUC's {level:.0%} interval [{lo:.3f}, {hi:.3f}] includes 0.5: on these "
                "records the model may rank no better than chance")
    return None


def _curve_noise_warning(curve: Any, noise: float) -> str | None:
    """The curve's caution, from released values: the counts' noise next to the smaller
    released class size (post-processing, free)."""
    from dpcli.algorithms.roc import CURVE_NOISE_SHARE

    smaller = min(curve.positives, curve.negatives)  # released (noisy) class sizes
    if noise <= CURVE_NOISE_SHARE * smaller:
        return None
    return (f"the counts' noise (scale {noise:.3g}) is large next to the smaller class "
            f"(released size about {smaller:,.0f}, itself noisy): this curve is mostly noise. "
            "Spend more ε, or use fewer bins (--k), or evaluate on more records.")


def _folder(roc_pass: RocPass, positive: int, kept: list[tuple[np.ndarray, np.ndarray]] | None
            ) -> Callable[[np.ndarray, np.ndarray], None]:
    """Fold a batch's scores and label codes into ``roc_pass`` (and ``kept``, if given)."""
    def add(scores: np.ndarray, labels: np.ndarray) -> None:
        is_positive = labels == positive
        roc_pass.add(scores, is_positive)
        if kept is not None:
            kept.append((scores, is_positive))

    return add


def _with_bars(payload: dict[str, Any], bars: dict[str, Any]) -> dict[str, Any]:
    """The curve's payload with the AUC's interval and each point's TPR/FPR error bars."""
    keys = ("tpr_lower", "tpr_upper", "fpr_lower", "fpr_upper")
    points = [{**p, **{k: float(bars[k][i]) for k in keys}}
              for i, p in enumerate(payload["points"])]
    # one uncertainty per released number: the AUC's is its interval (the first-order
    # `auc_error` it replaced gave scripts a second, different one)
    payload = {k: v for k, v in payload.items() if k != "auc_error"}
    return {**payload, "auc_interval": bars["auc"], "points": points,
            "error_bars": {"level": bars["level"], "method": bars["method"]}}


def _csv(curve: object, bars: dict[str, Any]) -> str:
    keys = ("tpr_lower", "tpr_upper", "fpr_lower", "fpr_upper")
    lines = ["threshold,fpr,tpr," + ",".join(keys)]
    for i, (t, f, r) in enumerate(zip(curve.thresholds, curve.fpr, curve.tpr, strict=True)):  # type: ignore[attr-defined]
        extra = ",".join(repr(float(bars[k][i])) for k in keys)
        lines.append(f"{float(t)!r},{float(f)!r},{float(r)!r},{extra}")
    return "\n".join(lines) + "\n"
