"""``dpcli evaluate``: a private confusion matrix, accuracy, precision and recall."""

from __future__ import annotations

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
from dpcli.cli.roc_cmd import ModelOpt, ScoreColumnOpt, ScoreRangeOpt
from dpcli.cli.ui import UI

if TYPE_CHECKING:
    from dpcli.algorithms.evaluate import Evaluation


@handle_errors
def evaluate(
    data: DataArg,
    spec: SpecOpt,
    model: ModelOpt = None,
    score_column: ScoreColumnOpt = None,
    score_range: ScoreRangeOpt = None,
    cutoff: Annotated[float | None, typer.Option(
        help="With --score-column: predict the positive class when score > cutoff (default: "
        "the middle of the score range; a spec's cutoff is ignored with --model).")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", dir_okay=False, help="Also write the released evaluation as JSON.")] = None,
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
    """Evaluate a classifier privately: noisy confusion matrix, accuracy, precision, recall.

    Releases the confusion matrix (true × predicted class) with discrete
    Laplace noise (Δ = 2 under replace-one), made non-negative and summing to
    the test set's size; accuracy, precision, recall and F1 are computed from
    it. The noise's scale and standard deviation are reported with it.

    Example:

        dpcli evaluate sample_data/adult_test.parquet --spec configs/adult.yaml \\
            --model models/nb.json --epsilon 0.2
    """
    from dpcli.algorithms import evaluate as ev
    from dpcli.api.scoring import fold_scores, parse_range, score_input
    from dpcli.budget import Budget
    from dpcli.cli.spend import (
        noise_generator,
        preflight,
        release_json,
        report_data,
        resolve_section,
    )
    from dpcli.errors import UsageError
    from dpcli.io import Outputs
    from dpcli.mechanisms import Plan
    from dpcli.run import charged
    from dpcli.spec import EvaluateSection, load_spec

    ui = UI(quiet=quiet, json=json, force_progress=progress, report=report)
    s = load_spec(spec)
    section = resolve_section(s, "evaluate", EvaluateSection, epsilon, cutoff=cutoff,
                              score_column=score_column, score_range=parse_range(score_range))
    si = score_input(s, section, model, score_column, score_range)
    threshold: float | None = None  # a model predicts its most probable class
    if si.model is None:
        si.require_binary("evaluate with --score-column")
        if section.cutoff is None:
            threshold = (si.lower + si.upper) / 2.0
        elif si.lower <= section.cutoff <= si.upper:
            threshold = section.cutoff
        else:
            raise UsageError(f"--cutoff {section.cutoff} is outside the score range "
                             f"[{si.lower}, {si.upper}]")
    elif cutoff is not None:
        raise UsageError("--cutoff applies to --score-column; a model predicts its most "
                         "probable class")
    total = Budget(section.epsilon)

    def plan_for(n: int) -> Plan:
        if n < 1:
            raise UsageError(f"{data}: holds no records to evaluate")
        return ev.plan(total, len(si.classes))

    from dpcli import protect

    source, plan = preflight(ui, si.spec, plan_for, data, si.columns, out,
                             [] if out is None else [out], dry_run, total=total,
                             require_out=False, inputs=protect.model_inputs(model, si.model))
    outputs = Outputs()
    arguments = {"data": str(data.resolve()), **si.source_note,
                 "epsilon": section.epsilon,
                 **({"cutoff": threshold} if threshold is not None else {}),
                 **({"out": str(out.resolve())} if out is not None else {})}
    rng = noise_generator(ui, si.spec, seed, command="evaluate", arguments=arguments,
                          data=data)
    with charged(si.spec, plan, command="evaluate", arguments=arguments, input_path=data,
                 seeded=seed is not None) as charge, outputs:
        confusion = ev.ConfusionPass(len(si.classes))  # K² counts, whatever the rows
        fold_scores(ui, source, si, lambda b: si.predictions(b, threshold), confusion.add, rng)
        result = ev.private_confusion(confusion.counts, si.classes, epsilon=section.epsilon,
                                      rng=rng,
                                      positive=si.positive if len(si.classes) == 2 else None)
        del confusion  # nothing below may touch private values
        payload = {**result.to_payload(), **si.source_note,
                   **({"cutoff": threshold} if threshold is not None else {}),
                   "breakdown": plan.to_json()}
        if out is not None:
            outputs.write_text(out, release_json("evaluation", payload, si.spec, plan, charge,
                                                 seeded=seed is not None))
            charge.outputs = outputs.commit()
        charge.summary = {"accuracy": round(result.accuracy, 6)}

    report_data(ui, source.report)
    _show(ui, result)
    ui.say(f"spent {plan.total} (run {charge.run_id[:8]})"
           + (f"; wrote {out}" if out is not None else ""))
    if json:
        ui.emit_json({"command": "evaluate", "dataset": s.dataset, "run_id": charge.run_id,
                      **payload, "spent": plan.total.to_json()})


def _show(ui: UI, result: Evaluation) -> None:
    from rich.table import Table

    from dpcli.algorithms.evaluate import noise_sd

    table = Table(title="private confusion matrix (rows: true class, columns: predicted)",
                  title_justify="left")
    table.add_column("true \\ predicted")
    for c in result.classes:
        table.add_column(str(c), justify="right")
    for c, row in zip(result.classes, result.matrix, strict=True):
        table.add_row(str(c), *(f"{int(v):,}" for v in row))
    ui.show(table)
    ui.say(f"accuracy {result.accuracy:.4f} ± {1.96 * result.accuracy_noise_sd():.4f} "
           f"(95% noise interval before post-processing; cell noise sd "
           f"{noise_sd(result.epsilon):.1f}; the test set's own sampling error is not included)")
    for c, m in result.per_class().items():
        parts = [f"{k} {v:.3f}" for k, v in m.items() if k != "support" and v is not None]
        ui.say(f"  class {c}: " + ", ".join(parts))
