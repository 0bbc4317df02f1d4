"""``schema suggest`` as a function: private bounds and categories for TODO domains."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpcli.api.report import Reporter, Silent
from dpcli.api.result import Released
from dpcli.api.spend import Charged, DryRun, Spend
from dpcli.errors import UsageError
from dpcli.spec import Spec

DEFAULT_DELTA = 1e-6


def schema_suggest(spec: Spec, data: Path | str, *, epsilon: float,
                   out: Path | None = None, columns: Sequence[str] | str | None = None,
                   delta: float = DEFAULT_DELTA, seed: int | None = None,
                   dry_run: bool = False, reporter: Reporter | None = None) -> Released | DryRun:
    """Suggest, privately, the numeric bounds and category lists ``spec`` still marks TODO.

    ``spec`` must be loaded with ``todo_domains=True``. Costs ``epsilon``,
    split equally between the columns: bounds are two quantiles on a public
    grid of round numbers (exponential mechanism, ε-DP); categories the
    values whose noisy count passes a threshold set by δ ((ε, δ)-DP, δ split
    between them). The value maps each column to its suggestion; ``out``
    gets them as YAML for the custodian to review. Nothing is applied.
    """
    from dpcli.algorithms import suggest as algo
    from dpcli.budget import Budget
    from dpcli.data.location import location_text, parse_location
    from dpcli.mechanisms.composition import Plan, Step

    reporter = reporter or Silent()
    location = parse_location(str(data))
    s = spec
    todo = dict(s.todo)
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",") if c.strip()]
    if columns is not None:
        chosen = list(columns)
        for c in chosen:
            if c not in todo:
                raise UsageError(f"--columns: {c!r} has no TODO bounds or categories in the "
                                 f"schema of {s.path}")
    else:
        chosen = list(todo)
    if not chosen:
        raise UsageError(f"{s.path}: no numeric bounds or categories are TODO; nothing to "
                         "suggest")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise UsageError(f"--epsilon must be a positive number, got {epsilon}")
    categorical = [c for c in chosen if todo[c] == "categorical"]
    if categorical and not 0 < delta < 1:
        raise UsageError(f"--delta must be in (0, 1), got {delta}")
    each = Fraction(1, len(chosen))
    steps = []
    for c in chosen:
        share = Budget(epsilon).scaled(each)
        if todo[c] == "numeric":
            steps.append(Step(f"bounds:{c}", "exponential", share,
                              "two quantiles on the public grid, Δ=1, ε/2 per quantile",
                              sensitivity=1.0))
        else:
            budget = Budget(share.epsilon, Fraction(str(delta)) / len(categorical))
            tau = algo.threshold(float(share.epsilon), float(budget.delta))
            steps.append(Step(f"categories:{c}", "thresholded_discrete_laplace", budget,
                              f"Δ=2, scale {2 / float(share.epsilon):.4g}, released if ≥ {tau}",
                              sensitivity=2.0))
    plan = Plan(steps)
    if plan.total.delta > 0 and s.budget.delta == 0:
        raise UsageError(f"{s.path}: budget.delta is 0, and suggesting categories needs δ "
                         f"({delta:g} here): declare a δ budget (e.g. 1e-5) or leave out "
                         f"{', '.join(categorical)} with --columns")
    coverage: dict[str, float] = {}

    def checked(n: int) -> Plan:
        # public facts only (n, each column's ε): bounds that the noise cannot resolve, or
        # categories no value can reach, are refused before the charge (design notes, rule 3)
        for c in chosen:
            share = float(plan.step(f"bounds:{c}" if todo[c] == "numeric"
                                    else f"categories:{c}").budget.eps)
            if todo[c] == "numeric":
                tail = algo.bounds_tail(n, share)
                if tail is None:
                    need = algo.bounds_epsilon(n, algo.MIN_COVERAGE) * len(chosen)
                    raise UsageError(
                        f"refused before any charge: {c!r}: at ε = {share:.3g} for its bounds "
                        f"and n = {n:,}, the private quantiles would be chosen by the noise "
                        f"(they could not hold even {algo.MIN_COVERAGE:.0%} of the values "
                        f"reliably). Spend about --epsilon {need:.2g} on these "
                        f"{len(chosen)} column(s), suggest fewer columns at once (--columns), "
                        "or declare the bounds from the data's documentation")
                coverage[c] = 1 - 2 * tail
            else:
                tau = algo.threshold(share, float(plan.step(f"categories:{c}").budget.delta))
                if tau > n:
                    raise UsageError(
                        f"refused before any charge: {c!r}: at ε = {share:.3g} a value needs a "
                        f"noisy count of {tau:,} to be suggested, more than the {n:,} rows; "
                        "spend more ε or suggest fewer columns at once (--columns)")
                reporter.say(f"note: {c}: values held by fewer than about {tau:,} of the "
                             f"{n:,} rows will not be suggested (the threshold that keeps a "
                             "rare value private)")
        for c, cov in coverage.items():
            if cov < algo.COVERAGE:
                reporter.say(f"note: {c}: at this ε and n the bounds aim to hold {cov:.1%} "
                             f"of the values (not {algo.COVERAGE:.0%}): a tighter tail would "
                             "be placed by the noise")
        return plan

    spend = Spend.prepare(s, checked, location, chosen, command="schema-suggest",
                          reporter=reporter, outputs=[out], total=plan.total, dry_run=dry_run)
    if dry_run:
        return spend.dry_run()
    arguments: dict[str, Any] = {
        "data": location_text(location), "out": None if out is None else str(out.resolve()),
        "columns": chosen, "epsilon": epsilon, "delta": delta}
    with spend.charged(arguments, seed=seed) as run:
        found = _release(run, chosen, todo, run.plan)
        text = suggestions_yaml(s.path.name, chosen, todo, found, plan, coverage)
        if out is not None:
            run.write(out, text)
        run.summary = {"columns": len(chosen)}
    return Released("schema_suggestions", found, {"dataset": s.dataset, "payload": found}, plan,
                    run.run_id, out, dict(run.summary), tuple(spend.data_report()),
                    {"yaml": text})


def _release(run: Charged, chosen: list[str], todo: dict[str, str],
             plan: Any) -> dict[str, Any]:
    """One pass over the data, then each column's release with its step's budget."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from dpcli.algorithms import suggest as algo
    from dpcli.data.schema import OTHER

    grid = algo.candidates()
    below = {c: np.zeros(grid.size, dtype=np.int64) for c in chosen if todo[c] == "numeric"}
    counts: dict[str, dict[str, int]] = {c: {} for c in chosen if todo[c] == "categorical"}
    n = 0
    for raw in run.raw_passes(chosen):
        n += raw.num_rows
        for c in below:
            arr = raw.column(c).cast(pa.float64())
            below[c] += algo.count_at_or_below(
                pc.fill_null(arr, float("nan")).to_numpy(zero_copy_only=False), grid)
        for c in counts:
            algo.add_counts(counts[c], raw.column(c).cast(pa.string()))
    found: dict[str, Any] = {}
    for c in chosen:
        # the column's step, drawn once
        step = plan.draw(f"bounds:{c}" if todo[c] == "numeric" else f"categories:{c}")
        if todo[c] == "numeric":
            found[c] = list(algo.private_bounds(below[c], n, step.budget.eps, run.rng))
        else:
            # never proposed: a schema may not list it, since every categorical column has an
            # implicit 'other' level, and a value 'other' in the data already falls in it
            # (a public rule on names, the same for every dataset: the release stays DP)
            counts[c].pop(OTHER, None)
            found[c] = algo.frequent_values(counts[c], step.budget.eps, step.budget.dlt, run.rng)
    return found


def suggestions_yaml(spec_name: str, chosen: list[str], todo: dict[str, str],
                     found: dict[str, Any], plan: Any,
                     coverage: dict[str, float] | None = None) -> str:
    """The suggestions as schema entries, each with how it was released."""
    import yaml

    from dpcli.algorithms.suggest import COVERAGE

    lines = [f"# Private suggestions for the TODO domains of {spec_name}, by `dpcli schema "
             "suggest`.",
             "# Review each, then copy what you accept into the schema. Bounds are private "
             "quantiles",
             f"# aiming to hold {COVERAGE:.0%} of the values (the rest would be "
             "clamped); categories are the",
             "# values frequent enough to pass the noise threshold (rarer ones would map to "
             "'other').",
             "# 'other' itself is never listed: it is every categorical column's implicit "
             "level, and",
             "# a value 'other' in the data falls in it.",
             "columns:"]
    for c in chosen:
        key = yaml.safe_dump(c).strip().removesuffix("...").strip()
        if todo[c] == "numeric":
            lo, hi = found[c]
            step = plan.step(f"bounds:{c}")
            aim = (coverage or {}).get(c, COVERAGE)
            lines.append(f"  {key}: {{type: numeric, bounds: [{lo:g}, {hi:g}]}}   "
                         f"# ε={step.budget.eps:g}, aims to hold {aim:.1%}")
        else:
            step = plan.step(f"categories:{c}")
            values = yaml.safe_dump(found[c], default_flow_style=True, width=10**6).strip()
            note = "" if found[c] else " none passed the threshold: too few rows per value"
            lines.append(f"  {key}: {{type: categorical, categories: {values}}}   "
                         f"# ε={step.budget.eps:g}, δ={step.budget.dlt:g}{note}")
    return "\n".join(lines) + "\n"

