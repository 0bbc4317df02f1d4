"""``select-features`` as a function: which features to train on, chosen privately."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from dpcli.api.report import Reporter, Silent
from dpcli.api.result import Released
from dpcli.api.spend import DryRun, Spend, forecast_of, resolve_section
from dpcli.errors import UsageError
from dpcli.spec import Spec


def select_features(spec: Spec, data: Path | str, *, out: Path | None = None,
                    score: str | None = None, method: str | None = None,
                    threshold: float | None = None, k: int | None = None, r: int | None = None,
                    columns: Sequence[str] | str | None = None, epsilon: float | None = None,
                    total_epsilon: float | None = None, min_effect: float | None = None,
                    allow_noise: bool = False, seed: int | None = None, engine: str = "local",
                    dry_run: bool = False,
                    reporter: Reporter | None = None) -> Released | DryRun:
    """Release WHICH features were selected (never a score), scored against the label.

    Costs the section's ε (or, with ``total_epsilon``, the split rule's share
    of it; the training share is in ``details["split"]``). Before any charge
    the selection's noise is compared with ``min_effect``, from public facts:
    a selection that would be made by noise is refused unless ``allow_noise``.
    ``out`` gets the selection file that trainers take as ``features``.
    """
    from dpcli.algorithms import feature_selection as fs
    from dpcli.budget import Budget
    from dpcli.data.location import location_text, parse_location
    from dpcli.io import dumps_json
    from dpcli.mechanisms import Plan
    from dpcli.spec import SelectFeaturesSection

    reporter = reporter or Silent()
    location = parse_location(str(data))
    s = spec
    if total_epsilon is not None and epsilon is not None:
        raise UsageError("pass --epsilon or --total-epsilon, not both")
    # --total-epsilon stands in for a missing section's ε; the split rule sets the spend
    section = resolve_section(s, "select-features", SelectFeaturesSection,
                              epsilon if total_epsilon is None else total_epsilon, columns,
                              score=score, method=method, threshold=threshold, k=k, r=r,
                              min_effect=min_effect, allow_noise=allow_noise or None)
    schema, chosen, config, defaults = setup(s, section)
    for note in defaults:
        reporter.say(f"default: {note}")
    s = replace(s, schema=schema)
    fs.positive_index(s.schema)
    if config.method == "perturb" and config.score not in ("tc", "dc"):
        reporter.warn(f"perturb with {config.score} adds noise scaled to every candidate's "
                      "change (one record moves all of them); threshold and topk pay only for "
                      "one. See the plan's Δ1.")
    request = fs.request(s.schema, chosen, config)
    request.validate(s.schema)  # before the charge: a bad request must cost nothing
    checked: dict[str, Any] = {}  # filled by make_plan once n is known; also the dry run's

    def make_plan(n: int) -> Plan:
        """The plan at n (public): the split rule's ε, and the noise check before any charge."""
        eps, split = selection_epsilon(s.schema, chosen, config, n, section.epsilon,
                                       total_epsilon)
        if split is not None:
            assert total_epsilon is not None
            checked["split"] = split.to_json()
            reporter.say(f"split rule: selection ε = {split.selection:g}, training ε = "
                         f"{split.training:g} of the total {total_epsilon:g} (set by the "
                         f"{split.bound}); pass --epsilon {split.training:g} to the trainer")
        check = fs.noise_check(s.schema, chosen, config, n, eps)
        checked["noise_check"] = {**check.to_json(), "allowed": config.allow_noise}
        if not check.passes:
            if not config.allow_noise:
                total_note = ("" if total_epsilon is None else
                              f" (under --total-epsilon the selection gets at most half: a "
                              f"total ≥ {check.needed_epsilon / fs.SPLIT_CAP:.3g})")
                raise UsageError("refused before any charge: " + check.message() + total_note)
            reporter.warn("--allow-noise: " + check.message().split(". Train on")[0]
                          + "; selecting anyway (recorded in the output under 'noise_check')")
        return plan_at(s, section, n, total_epsilon=total_epsilon, prepared=(chosen, config))

    upper = (section.epsilon if total_epsilon is None
             else fs.SPLIT_CAP * total_epsilon)  # the unlocked budget look: at most this
    spend = Spend.prepare(s, make_plan, location, chosen, command="select-features",
                          reporter=reporter, outputs=[out], engine=engine, total=Budget(upper),
                          dry_run=dry_run,
                          forecast=forecast_of("select-features", spec, section,
                                                    total_epsilon=total_epsilon is not None))
    if dry_run:
        return spend.dry_run(extra=checked)
    plan = spend.plan
    arguments: dict[str, Any] = {
        "data": location_text(location), "engine": engine,
        "out": None if out is None else str(out.resolve()), "columns": list(chosen),
        "score": config.score, "method": config.method, "epsilon": plan.total.eps,
        "total_epsilon": total_epsilon, "min_effect": config.effect(),
        "allow_noise": config.allow_noise, **config.parameters()}
    with spend.charged(arguments, seed=seed) as run:
        stats = run.statistics(request)
        selection = fs.select(stats, s.schema, chosen, run.plan, config, run.rng)
        payload = {**selection.to_payload(), **checked, "breakdown": plan.to_json()}
        envelope = run.envelope("feature_selection", payload)
        if out is not None:
            run.write(out, dumps_json(envelope))
        run.summary = {"score": config.score, "method": config.method,
                       "candidates": selection.candidates,
                       "selected": len(selection.selected)}
    problem = selection.released.problem() if selection.released is not None else None
    if problem is not None:
        reporter.warn(problem)
    if not selection.selected:
        reporter.warn("nothing was selected: a trainer can not use this file. Lower "
                      "--threshold, raise --k or spend more ε (the spend is final).")
    details = {**checked, "score": config.score, "method": config.method,
               **({"degeneracy": selection.released.to_json()}
                  if selection.released is not None else {})}
    return Released("feature_selection", selection, envelope, plan, run.run_id, out,
                    dict(run.summary), tuple(stats.report.lines()), details)


def setup(spec: Spec, section: Any) -> tuple[Any, tuple[str, ...], Any, list[str]]:
    """The selection's schema, scored columns and FSConfig from the section (public facts),
    with the defaults it chose (said on stderr by the command)."""
    from dpcli.algorithms import feature_selection as fs
    from dpcli.api.defaults import select_features_defaults

    values, defaults = select_features_defaults(spec.schema, section.columns,
                                                section.config_values())
    config = fs.FSConfig(**values)
    chosen = fs.scored_columns(spec.schema, section.columns, config.score)
    return fs.selection_schema(spec.schema, chosen, config.r), chosen, config, defaults


def selection_epsilon(schema: Any, chosen: Sequence[str], config: Any, n: int,
                      epsilon: float, total_epsilon: float | None) -> tuple[float, Any]:
    """The selection's ε: ``epsilon``, or under ``total_epsilon`` the split rule's share
    (with the Split); public facts only."""
    from dpcli.algorithms import feature_selection as fs

    if total_epsilon is None:
        return epsilon, None
    needed = fs.noise_check(schema, chosen, config, n, total_epsilon).needed_epsilon
    split = fs.split_rule(total_epsilon, needed)
    return split.selection, split


def plan_at(spec: Spec, section: Any, n: int, *, total_epsilon: float | None = None,
            prepared: tuple[tuple[str, ...], Any] | None = None) -> Any:
    """select-features' plan at ``section.epsilon`` on ``n`` records (public facts only).

    The one builder of the plan: the command's run and dry run use it, and so does
    its forecast (``dpcli.forecast.select_features.plan``). ``spec`` is the command's
    spec; with ``prepared`` (the scored columns and FSConfig of :func:`setup`) its
    schema is already the selection's.
    """
    from dpcli.algorithms import feature_selection as fs
    from dpcli.budget import Budget

    if prepared is None:
        schema, chosen, config, _ = setup(spec, section)
    else:
        schema, (chosen, config) = spec.schema, prepared
    eps, _ = selection_epsilon(schema, chosen, config, n, section.epsilon, total_epsilon)
    return fs.plan(schema, chosen, Budget(eps), config, n)
