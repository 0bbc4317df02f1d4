"""``validate`` as a function: private logistic regression, λ and class cut chosen privately."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dpcli.api.report import Reporter, Silent
from dpcli.api.result import Released
from dpcli.api.spend import Companion, DryRun, Spend, resolve_section
from dpcli.errors import UsageError
from dpcli.spec import Spec

HISTOGRAM_NOTE = (
    "--learner histogram is not available: the paper gives its histogram case study (the "
    "validation score and its stability constants) only in supplementary material that is "
    "not part of the published text dpcli follows, so there is nothing to reproduce faithfully")


def validate(spec: Spec, data: Path, *, validation: Path | None = None,
             out: Path | None = None, learner: str = "logreg",
             grid: Sequence[float] | str | None = None, method: str | None = None,
             score: str | None = None, trainer: str | None = None, delta: float | None = None,
             columns: Sequence[str] | str | None = None, lam: float | str | None = None,
             threshold_share: float | str | None = None, epsilon: float | None = None,
             seed: int | None = None, dry_run: bool = False,
             reporter: Reporter | None = None) -> Released | DryRun:
    """Train private logistic regression with its regulariser λ and class cut chosen privately.

    Costs the section's ε (and δ for the hinge and logistic scores). By
    default (``lam`` "auto") λ0 = 4√d/(ε·n) from public facts, unless a grid
    reaching down to 4·λ0 can be searched with little noise; "search" always
    searches (Chaudhuri & Vinterbo 2013), a number fixes λ. A share of ε
    releases the class threshold (exponential mechanism). ``validation``
    names disjoint validation rows (default: about 10 % of ``data`` by a
    public hash of the row number). See docs/design.md, "validate".
    """
    import numpy as np

    from dpcli import params, protect
    from dpcli.algorithms import inputs
    from dpcli.algorithms import validate as tuning
    from dpcli.budget import Budget
    from dpcli.data import DataSource
    from dpcli.errors import BudgetExhausted
    from dpcli.fingerprint import input_digest
    from dpcli.io import dumps_json
    from dpcli.mechanisms import Plan
    from dpcli.spec import ValidateSection

    reporter = reporter or Silent()
    data = Path(data)
    validation = None if validation is None else Path(validation)
    if learner == "histogram":
        raise UsageError(HISTOGRAM_NOTE)
    if learner not in tuning.LEARNERS:
        raise UsageError(f"--learner must be one of {', '.join(tuning.LEARNERS)}, got "
                         f"{learner!r}")
    s = spec
    # one declaration per parameter (dpcli.params): the same checks as the spec's, each a
    # UsageError naming the option; method, score, trainer and delta are checked by override
    grid_values = None if grid is None else params.grid(grid, params.Option("--grid"))
    lam_value = None if lam is None else params.lambda_value(lam, params.Option("--lambda"))
    share_value = None if threshold_share is None else params.threshold_share(
        threshold_share, params.Option("--threshold-share"))
    section = resolve_section(s, "validate", ValidateSection, epsilon, columns, grid=grid_values,
                              method=method, score=score, trainer=trainer, delta=delta,
                              lam=lam_value, threshold_share=share_value)
    # "auto" given for this run overrides a number in the spec (override() skips None)
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
        reporter.say(f"note: --delta is not used: {why}, so this run is pure ε-DP (δ = 0)")
    total = Budget(section.epsilon, config.run_delta)
    if total.delta > s.budget.delta:
        raise BudgetExhausted(f"the {config.score} score needs δ = {config.run_delta:g}, but the "
                              f"budget of dataset {s.dataset!r} has δ = {s.budget.dlt:g} "
                              f"({s.path}: budget.delta); use --score ramp, which needs none")
    from dpcli.forecast import forecast as forecast_at

    sizes: dict[str, int] = {}
    decided: dict[str, tuning.Decision] = {}
    design: dict[str, tuple[str, ...]] = {}
    companions: dict[str, Companion] = {}
    if validation is not None:
        check_disjoint(data, validation, out)
        DataSource(validation, s.schema).check_structure(chosen)

    def plan_for(rows: int) -> Plan:
        m_file = None
        if validation is not None:   # its validation pass, after every structural check
            companions["validation"] = Companion()
            m_file = companions["validation"].open(s, validation, chosen, total,
                                                   dry_run=dry_run)
        where = f"{data}" if validation is None else f"{data} or {validation}"
        planned = plan_at(s, section, rows, validation_rows=m_file, where=where)
        n, m, rows_all, decision = planned.n, planned.m, planned.n_all, planned.decision
        d = planned.d
        sizes.update(n=n, m=m, n_all=rows_all, d=d)
        decided["decision"] = decision
        design.update(columns=planned.columns, left_out=planned.left_out)
        if planned.left_out:
            reporter.warn(_left_out_note(s.schema, planned.left_out, rows,
                                         float(section.epsilon)))
        if decision.mode == "auto":
            reporter.say(f"note: λ chosen without the data: {decision.reason}")
        elif decision.mode == "select" and config.method == "stability":
            noise = tuning.selection_noise_mean(config, float(decision.epsilon_model), n, m,
                                                d)
            if noise > tuning.NOISY_SELECTION:
                reporter.warn(
                    f"the selection noise has mean {noise:.3g} (2β/ε2, β = max(2/(λ_min·n), "
                    f"β2/m)), large next to differences of validation scores (the ramp loss "
                    f"keeps them within 1): the choice may be close to random. Raise the "
                    f"smallest λ (now {min(config.grid):g}), or use more ε or rows.")
        if decision.mode == "select":
            lam0 = tuning.auto_lambda(n + m if validation is None else n,
                                      float(decision.epsilon_model), d)
            if min(config.grid) > tuning.REACH * lam0:
                reporter.say(
                    f"note: the grid's smallest λ {min(config.grid):.3g} is "
                    f"{min(config.grid) / lam0:.0f} × λ0 = 4√d/(ε·n) = {lam0:.3g}: on this "
                    "many rows every candidate may be over-regularised (lambda: auto trains "
                    "at λ0 here)")
        # the class cut's error is the forecast's headline: its verdict, printed after the
        # plan, says whether the cut is usable (one story: no second, worst-case warning)
        return planned.plan

    spend = Spend.prepare(s, plan_for, data, chosen, command="validate", reporter=reporter,
                          outputs=[out], total=total, dry_run=dry_run, companions=companions,
                          inputs=protect.inputs("the --validation file", validation),
                          forecast=lambda rows: forecast_at(
                              "validate", s, section, rows, columns=section.columns,
                              validation_rows=None if validation is None
                              else companions["validation"].n))
    if dry_run:
        return spend.dry_run()
    plan = spend.plan
    n, m, d = sizes["n"], sizes["m"], sizes["d"]
    chosen, left_out = design["columns"], design["left_out"]
    arguments: dict[str, Any] = {
        "data": str(data.resolve()), "out": None if out is None else str(out.resolve()),
        "columns": list(chosen), "left_out": list(left_out), "method": config.method,
        "score": config.score,
        "trainer": config.trainer, "grid": list(config.grid), "epsilon": section.epsilon,
        "delta": config.run_delta, "n_train": n, "n_validation": m,
        "lambda": "auto" if config.lam is None else config.lam,
        "threshold_share": "auto" if config.threshold_share is None else config.threshold_share}
    if validation is None:
        arguments["split"] = {"validation_fraction": config.validation_fraction,
                              "split_seed": config.split_seed}
    else:
        # the validation rows are part of the charged input: their keyed digest is logged too
        arguments.update(validation=str(validation.resolve()),
                         validation_digest=input_digest(s.ledger_path, validation))
    positive = s.schema.label.positive_index
    positive = 1 if positive is None else positive
    with spend.charged(arguments, seed=seed) as run:
        rng = run.rng
        y: np.ndarray | None  # x too: both dropped (None) once split, to free the memory
        x, y = tuning.design_rows(run.passes(chosen), s.schema, chosen, positive)
        decision = decided["decision"]
        _draw(run.plan, decision)
        valid_set = None
        if validation is not None:
            valid_set = tuning.design_rows(run.passes(chosen, "validation",
                                                      companion="validation"),
                                           s.schema, chosen, positive)
        if decision.mode != "select":
            # no search: every row of DATA trains the one model
            with reporter.progress("training", 1, unit="fits") as advance:
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
            with reporter.progress("tuning", config.k + 1, unit="fits") as advance:
                outcome = tuning.tune(config, train_set, search_set,
                                      float(decision.epsilon_model), rng, advance)
        report = tuning.fit_report(config, outcome, section.epsilon, decision.n_model
                                   if decision.mode != "select" else n, m, decision)
        edge = report.get("lambda_at_grid_edge")
        if edge is not None:
            reporter.warn(
                f"the chosen λ = {outcome.fit.lam:.4g} is the {edge} value of the grid "
                f"({min(config.grid):.3g} … {max(config.grid):.3g}): the best λ may lie "
                f"beyond it. λ0 = 4√d/(ε·n) (lambda: auto) is "
                f"{tuning.auto_lambda(n, float(decision.epsilon_model), d):.3g} on these "
                "rows; a grid reaching past the edge, or that λ, may do better "
                "(the model file records lambda_at_grid_edge)")
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
        if left_out:
            report["left_out"] = {
                "columns": {c: len(s.schema.column(c).levels)  # type: ignore[union-attr]
                            for c in left_out},
                "why": "one-hot blocks wider than the rest of the design and than √(n·ε): "
                       "left out by rule (public facts); name the columns to keep them"}
        payload = {**model.to_payload(), "breakdown": plan.to_json(), **run.check_model(model)}
        side = cut.one_class()
        if side is not None and "degeneracy" in payload:
            # the domain allows both classes, but the released count says the rows get one
            from dpcli.algorithms.degenerate import one_class_words

            reporter.warn(
                f"degenerate on the data: by the released count of rows predicted positive at "
                f"the cut (logit {cut.logit:.4g}; noisy count "
                f"{cut.noisy_predicted_positive:,} ± {cut.check_halfwidth:,} at 95 %, of "
                f"{cut.n_rows:,}) the model may {one_class_words(side)}. The model's ranking "
                "(score) may still be useful; more ε or rows, or threshold_share 0 for the "
                "0.5 cut")
            payload["degeneracy"] = {**payload["degeneracy"], "degenerate": True,
                                     "one_class_on_rows": side}
        envelope = run.envelope(tuning.KIND, payload)
        if out is not None:
            run.write(out, dumps_json(envelope))
        run.summary = {"method": config.method, "chosen_index": outcome.index,
                       "chosen_lambda": outcome.fit.lam, "lambda_rule": decision.mode,
                       "threshold_logit": cut.logit}
    lines = spend.data_report() + [
        line for c in companions.values() for line in c.data_report()]
    details = {"method": config.method, "chosen_index": outcome.index,
               "lambda": outcome.fit.lam, "lambda_rule": decision.mode,
               "reason": decision.reason, "n_model": decision.n_model,
               "threshold_logit": cut.logit, "n_train": n, "n_validation": m, "k": config.k,
               "report": report,
               "delta_note": tuning.describe_delta(config.run_delta, config.score)
               if config.method == "stability" and outcome.index is not None else None}
    return Released(tuning.KIND, model, envelope, plan, run.run_id, out, dict(run.summary),
                    tuple(lines), details)


def check_disjoint(data: Path, validation: Path, out: Path | None) -> None:
    """The training and validation files must be different files (not a copy, not a link).

    Every guarantee of validate counts each record once, in T or in V: a
    record in both would move a score by β1/n + β2/m and double the ε of the
    selection. dpcli can refuse the same file, a link or a byte-identical
    copy; that no person has rows in both files is the custodian's to ensure.
    """
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


@dataclass(frozen=True)
class ValidatePlan:
    """validate's plan at a row count, with the public decision and sizes behind it."""

    plan: Any          # dpcli.mechanisms.Plan
    decision: Any      # dpcli.algorithms.validate.Decision
    config: Any        # dpcli.algorithms.validate.ValidateConfig
    n: int             # training rows (DATA less its validation rows, or all of DATA)
    m: int             # validation rows
    n_all: int         # every row the class threshold reads
    d: int             # the design's width
    columns: tuple[str, ...]    # the design's columns
    left_out: tuple[str, ...]   # usable columns the default design leaves out (wide_columns)


def plan_at(spec: Spec, section: Any, rows: int, *, columns: Sequence[str] | None = None,
            validation_rows: int | None = None, where: str = "the data") -> ValidatePlan:
    """validate's plan at ``section.epsilon`` on ``rows`` records of DATA (public facts only).

    The one builder of the plan: the command's run and dry run use it, and so does
    its forecast (``dpcli.forecast.validate.plan``). Without ``validation_rows``
    (the --validation file's count) the validation rows are cut from DATA by the
    public hash rule. ``columns`` defaults to the section's, else every usable one less
    those :func:`tuning.wide_columns` leaves out at this n and ε.
    """
    from dpcli.algorithms import inputs
    from dpcli.algorithms import validate as tuning

    config = tuning.ValidateConfig(**section.config_values())
    named = columns or section.columns
    chosen = tuple(named or (
        c for c in spec.schema.names if inputs.usable(spec.schema.column(c))))
    left_out = () if named else tuning.wide_columns(spec.schema, chosen, rows,
                                                    float(section.epsilon))
    chosen = tuple(c for c in chosen if c not in left_out)
    d = inputs.design_width(spec.schema, chosen)
    if validation_rows is None:
        m = held_out(rows, config.validation_fraction, config.split_seed)
        n = rows - m
    else:
        m, n = validation_rows, rows
    need_n = config.k if config.method == "data-split" else 1
    if n < need_n or m < 1:
        raise UsageError(f"{where}: {n} training and {m} validation rows; validate needs at "
                         f"least {need_n} and 1 (more rows, or another "
                         "validate.validation_fraction)")
    rows_all = rows + (m if validation_rows is not None else 0)
    decision = tuning.decide(config, section.epsilon, n, m, d, rows_all,
                             split=validation_rows is None)
    return ValidatePlan(tuning.full_plan(config, decision, n, m, d, rows_all), decision,
                        config, n, m, rows_all, d, chosen, left_out)


@functools.lru_cache(maxsize=64)
def held_out(rows: int, fraction: float, seed: int) -> int:
    """How many of ``rows`` the public hash rule holds out for validation (cached: a
    forecast's verdict evaluates the plan at many ε on the same n)."""
    from dpcli.algorithms import validate as tuning

    return int(tuning.validation_rows(rows, fraction, seed).sum())


def _left_out_note(schema: Any, left_out: Sequence[str], rows: int, epsilon: float) -> str:
    """The warning for columns the default design leaves out (tuning.wide_columns)."""
    import math

    named = ", ".join(f"{c!r} ({len(schema.column(c).levels):,} levels)" for c in left_out)
    return (f"validate leaves out {named}: a one-hot block wider than the rest of the design "
            f"and than √(n·ε) = {math.sqrt(rows * epsilon):,.0f} raises λ0 and the noise for "
            "every weight more than its levels can repay at this n and ε. Name the columns "
            "to keep (--columns or validate.columns) to decide otherwise.")


def _draw(plan: Any, decision: Any) -> None:
    """Draw every planned step where validate's ε is handed over (the model's ε to the
    search or the fit, the threshold's to :func:`tuning.choose_threshold`), checking that
    the steps add up to what those functions spend; a plan that disagrees is refused
    before any noise."""
    import math

    from dpcli.algorithms import validate as tuning
    from dpcli.mechanisms import PlanMisuse

    parts = {"threshold_prior": tuning.PRIOR_PART, "threshold": tuning.CUT_PART,
             "threshold_check": tuning.CHECK_PART}
    model = 0.0
    for step in list(plan):
        eps = plan.draw(step.name).budget.eps
        if step.name in parts:
            expected = float(decision.epsilon_threshold * parts[step.name])
            if not math.isclose(eps, expected, rel_tol=1e-9):
                raise PlanMisuse(f"validate would spend ε = {expected:g} on step "
                                 f"{step.name!r}, not the plan's {eps:g}")
        else:
            model += eps
    if not math.isclose(model, float(decision.epsilon_model), rel_tol=1e-9):
        raise PlanMisuse(f"validate would spend ε = {float(decision.epsilon_model):g} on the "
                         f"model, not the plan's {model:g}")
