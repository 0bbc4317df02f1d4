"""``train-nb`` as a function: a differentially private naive Bayes model."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from dpcli.api.report import Reporter, Silent
from dpcli.api.result import Released
from dpcli.api.spend import DryRun, Spend, forecast_of, resolve_section, with_schema
from dpcli.errors import UsageError
from dpcli.spec import Spec


def train_nb(spec: Spec, data: Path | str, *, epsilon: float | None = None,
             method: str | None = None, columns: Sequence[str] | str | None = None,
             features: Path | None = None, r: int | None = None, out: Path | None = None,
             seed: int | None = None, engine: str = "local", dry_run: bool = False,
             reporter: Reporter | None = None) -> Released | DryRun:
    """Train naive Bayes on ``data`` and release it; ``out`` gets the model file if given.

    Releases noisy class counts, per-class count tables of categorical, binary
    and token columns (discrete Laplace), per-class means and variances of
    numeric columns (global sensitivity of per-class sums, or smooth
    sensitivity of the trimmed sample), and for a binary label a decision
    threshold (exponential mechanism, balanced accuracy). Costs the section's
    ε (``epsilon`` overrides it), split by a rule of public facts
    (docs/design.md, "train-nb"). ``dry_run`` returns the plan, charging nothing.
    """
    from dpcli import protect
    from dpcli.algorithms import naive_bayes as nb
    from dpcli.algorithms.common import cap_tokens
    from dpcli.budget import Budget
    from dpcli.data.location import location_text, parse_location
    from dpcli.spec import TrainNBSection

    reporter = reporter or Silent()
    location = parse_location(str(data))
    section = resolve_section(spec, "train-nb", TrainNBSection, epsilon, columns, method=method,
                              r=r)
    config = nb.NBConfig(**section.config_values())
    chosen = section.columns or spec.schema.names
    if features is not None:
        if columns is not None:
            raise UsageError("pass --columns or --features, not both")
        # imported only here: the feature-selection module costs every run's start-up
        from dpcli.algorithms.feature_selection import load_selection

        schema, chosen = load_selection(features, spec.schema)
        spec = with_schema(spec, schema)
    spec = with_schema(spec, cap_tokens(spec.schema, chosen, section.r))
    if config.method == "smooth" and engine != "local":
        # its order statistics need a second, banded pass, which only the local engine makes;
        # collecting every value to Spark's driver would fail on big data after the charge
        raise UsageError("--method smooth runs on the local engine only (its second pass over "
                         "the data is not built for Spark); use --method global with "
                         "--engine spark")
    if config.threshold != "none" and engine != "local":
        # the threshold's counts need a second pass with the released model, which only the
        # local engine makes: no threshold step is planned (no ε is spent on it)
        config = replace(config, threshold="none")
        reporter.say("note: --engine spark releases no decision threshold (its second pass is "
                     "built for the local engine only); the model predicts the most probable "
                     "class")
    total = Budget(section.epsilon)
    split: dict[str, Any] = {}
    s = spec

    def make_plan(n: int) -> Any:
        # the split is a rule of public facts: n (public under replace-one), ε, the columns'
        # kinds and declared domains (nb_allocation); printed with the plan and recorded
        alloc = nb.allocation(s.schema, chosen, total, config, n)
        split.update(alloc.to_json())
        for reason in alloc.reasons:
            reporter.say(f"budget split: {reason}")
        return plan_at(s, section, n, columns=chosen, config=config)

    spend = Spend.prepare(spec, make_plan, location, chosen, command="train-nb",
                          reporter=reporter, outputs=[out], total=total, engine=engine,
                          inputs=protect.inputs("the --features file", features),
                          dry_run=dry_run,
                          forecast=forecast_of("train-nb", spec, section, columns=chosen))
    if dry_run:
        return spend.dry_run()
    plan = spend.plan
    # the local engine re-reads the file for the smooth method's order statistics (bounded
    # memory) instead of keeping every value
    request = nb.request(spec.schema, chosen, config, rows_in_memory=False, p=plan,
                         bins=split.get("bins"))
    leaves = None
    if nb.has_step(plan, nb.THRESHOLD) and engine == "local":
        from dpcli.algorithms import nb_threshold

        # when the released model's score of a row is a function of its codes and bins
        # (public: declared domains, the plan's bins), the statistics pass also counts the
        # distinct (codes, bins, class) tuples, bounded; the threshold then scores those
        # instead of reading the file a second time (the same counts, docs/scale.md)
        methods = nb.column_methods(plan, spec.schema, chosen)
        binned = {c: b for c, b in (split.get("bins") or {}).items()
                  if methods.get(c) == "histogram"}
        leaves = nb_threshold.score_leaves(spec.schema, chosen, binned)
        if leaves is not None:
            request = replace(request, joint=leaves, joint_limit=nb_threshold.TUPLE_LIMIT)
    request.validate(spec.schema)  # before the charge: a bad request must cost nothing
    arguments: dict[str, Any] = {
        "data": location_text(location), "engine": engine,
        "out": str(out.resolve()) if out is not None else None, "columns": list(chosen),
        "method": config.method, "epsilon": section.epsilon, "trim": config.trim,
        "r": section.r}
    if features is not None:
        arguments["features"] = str(features.resolve())
    with spend.charged(arguments, seed=seed) as run:
        stats = run.statistics(request)

        def reread(numeric: Sequence[str]) -> Iterator[Any]:
            # smooth method: the second pass for its order statistics (still after the charge;
            # numeric columns only, so the encoder draws nothing from rng)
            return run.passes(numeric, "re-reading")

        # the algorithm draws each step's budget from the run's plan (once each)
        model = nb.fit(stats, spec.schema, chosen, run.plan, config, run.rng, reread=reread)
        if nb.has_step(plan, nb.THRESHOLD):
            # the decision threshold: a second pass scores the training rows with the
            # released model (still after the charge) and the exponential mechanism picks
            rows = _tuple_rows(stats, leaves, model)
            nb.fit_threshold(model, run.plan,
                             rows if rows is not None else run.passes(chosen, "threshold"),
                             run.rng)
            if (note := nb.threshold_note(model)) is not None:
                reporter.say(note)
        # the released tables against the declared domains (post-processing: free)
        domain = nb.domain_cautions(model, plan)
        for caution in domain:
            reporter.warn(caution)
        payload = {**model.to_payload(), "breakdown": plan.to_json(), "allocation": split,
                   **run.check_model(model),
                   **({"column_cautions": domain} if domain else {})}
        envelope = run.envelope("naive_bayes", payload)
        if out is not None:
            from dpcli.io import dumps_json

            run.write(out, dumps_json(envelope))
        run.summary = {"method": config.method, "columns": len(chosen),
                       "threshold": model.threshold}
    return Released("naive_bayes", model, envelope, plan, run.run_id, out, dict(run.summary),
                    tuple(stats.report.lines()))


def _tuple_rows(stats: Any, leaves: Any, model: Any) -> Any:
    """The statistics pass's distinct rows for the threshold's counts, or None when they
    were not asked for, outgrew their bound, or do not bin as the model does (then the
    threshold pass reads the file again)."""
    if leaves is None or stats.joint is None:
        return None
    from dpcli.algorithms.nb_threshold import TupleRows

    rows = TupleRows(stats.joint, leaves)
    return rows if rows.fits(model) else None


def plan_at(spec: Spec, section: Any, n: int, *, columns: Sequence[str] | None = None,
            config: Any = None) -> Any:
    """train-nb's plan at ``section.epsilon`` on ``n`` records (public facts only).

    The one builder of the plan: the command's run and dry run use it, and so does
    its forecast (``dpcli.forecast.train_nb.plan``). ``columns`` defaults to the
    section's (else every declared column); ``config`` to the section's NBConfig.
    """
    from dpcli.algorithms import naive_bayes as nb
    from dpcli.algorithms.common import cap_tokens
    from dpcli.budget import Budget

    chosen = tuple(columns or section.columns or spec.schema.names)
    config = config if config is not None else nb.NBConfig(**section.config_values())
    schema = cap_tokens(spec.schema, chosen, section.r)
    return nb.plan(schema, chosen, Budget(section.epsilon), config, n)
