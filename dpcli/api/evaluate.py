"""``evaluate`` as a function: a private confusion matrix and the metrics it gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dpcli.api.report import Reporter, Silent
from dpcli.api.result import Released
from dpcli.api.spend import DryRun, Spend, resolve_section
from dpcli.errors import UsageError
from dpcli.spec import Spec


def evaluate(spec: Spec, data: Path, *, model: Path | None = None,
             score_column: str | None = None, score_range: str | None = None,
             cutoff: float | None = None, out: Path | None = None,
             epsilon: float | None = None, seed: int | None = None, dry_run: bool = False,
             reporter: Reporter | None = None) -> Released | DryRun:
    """Release a noisy confusion matrix of ``model`` (or of ``score_column`` > ``cutoff``).

    Costs the section's ε: discrete Laplace on every cell (Δ = 2 under
    replace-one), post-processed to non-negative cells summing to n;
    accuracy, precision, recall and F1 follow from it. The column of a class
    the model can never predict (decided exactly from the model and the
    declared domains) is released as exact zeros, without noise, and its
    precision as undefined (:mod:`dpcli.algorithms.evaluate`). ``out`` gets the JSON.
    """
    from dpcli import protect
    from dpcli.algorithms import evaluate as ev
    from dpcli.api.scoring import (
        ledger_cautions,
        parse_range,
        score_input,
        warn_model_cautions,
        warn_training_file,
    )
    from dpcli.api.spend import forecast_of
    from dpcli.budget import Budget
    from dpcli.forecast import evaluate as fc
    from dpcli.io import dumps_json
    from dpcli.mechanisms import Plan
    from dpcli.spec import EvaluateSection

    reporter = reporter or Silent()
    data = Path(data)
    s = spec
    section = resolve_section(s, "evaluate", EvaluateSection, epsilon, cutoff=cutoff,
                              score_column=score_column, score_range=parse_range(score_range))
    si = score_input(s, section, model, score_column, score_range)
    recorded, ledgered = ledger_cautions(reporter, s, si)   # an edited model file
    cautioned = warn_model_cautions(reporter, si)
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
    # public: the classes the model can never predict (exact decisions only), before the charge
    can = si.predictable(threshold)
    exact_zero = () if can is None else can.never(len(si.classes))
    exact_why = "" if can is None else can.how

    def plan_for(n: int) -> Plan:
        if n < 1:
            raise UsageError(f"{data}: holds no records to evaluate")
        return fc.plan(si.spec, section, n)

    # public: a released model's own class share sets the forecast's class balance
    prevalence = (None if si.model is None or len(si.classes) != 2
                  else fc.model_prevalence(si.model, si.positive))
    fc_context = {} if prevalence is None else {"prevalence": prevalence}
    spend = Spend.prepare(si.spec, plan_for, data, si.columns, command="evaluate",
                          reporter=reporter, outputs=[out], total=total, dry_run=dry_run,
                          inputs=protect.model_inputs(model, si.model),
                          forecast=forecast_of("evaluate", si.spec, section,
                                               **fc_context))
    # its own training rows? stderr only (by the digest prepare started beside the count)
    warn_training_file(reporter, s, recorded, data)
    if dry_run:
        return spend.dry_run()
    plan = spend.plan
    arguments: dict[str, Any] = {
        "data": str(data.resolve()), **si.source_note, "epsilon": section.epsilon,
        **({"cutoff": threshold} if threshold is not None else {}),
        **({"out": str(out.resolve())} if out is not None else {})}
    with spend.charged(arguments, seed=seed) as run:
        confusion = ev.ConfusionPass(len(si.classes))  # K² counts, whatever the rows
        run.fold(si.columns, lambda b: si.predictions(b, threshold), confusion.add)
        step = run.plan.draw("confusion")   # the plan's one step, drawn once
        result = ev.private_confusion(confusion.counts, si.classes, epsilon=step.budget.eps,
                                      sensitivity=step.integer_sensitivity(), rng=run.rng,
                                      positive=si.positive if len(si.classes) == 2 else None,
                                      exact_zero=exact_zero, exact_why=exact_why)
        del confusion  # nothing below may touch private values
        # error bars from the released matrix and the noise alone (post-processing, free)
        payload = {**result.to_payload(), **si.source_note,
                   "intervals": fc.error_bars(result.matrix, section.epsilon, si.classes,
                                              exact_zero=result.exact_zero),
                   **ledgered, **cautioned,
                   **({"cutoff": threshold} if threshold is not None else {}),
                   "breakdown": plan.to_json()}
        envelope = run.envelope("evaluation", payload)
        if out is not None:
            run.write(out, dumps_json(envelope))
        run.summary = {"accuracy": round(result.accuracy, 6)}
    caution = result.caution()
    if caution is not None:
        reporter.warn(caution)
    return Released("evaluation", result, envelope, plan, run.run_id, out, dict(run.summary),
                    tuple(spend.data_report()))
