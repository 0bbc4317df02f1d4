"""``train-brc`` as a function: a private boosted linear classifier (brc, Shen et al.)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from dpcli.api.report import Reporter, Silent
from dpcli.api.result import Released
from dpcli.api.spend import DryRun, Spend, forecast_of, resolve_section
from dpcli.errors import UsageError
from dpcli.mechanisms import Spending
from dpcli.spec import Spec


def train_brc(spec: Spec, data: Path, *, out: Path | None = None,
              rounds: int | str | None = None, c1: float | None = None,
              c2: float | None = None, columns: Sequence[str] | str | None = None,
              epsilon: float | None = None, seed: int | None = None, dry_run: bool = False,
              reporter: Reporter | None = None) -> Released | DryRun:
    """Train brc on ``data`` and release the ensemble; ``out`` gets the model file if given.

    Costs the section's ε: with a private label 1/20 releases the positive
    count (class weights), T rounds release each random hyperplane's
    class-weighted error (Laplace), 1/10 a noisy margin histogram by class
    (calibration and threshold). Columns under the spec's ``train-brc.public``
    with ``label: public: true`` run the partially private Algorithm 2. See
    ``dpcli train-brc --help`` and docs/design.md, "train-brc".
    """
    from dpcli.algorithms import brc, inputs
    from dpcli.budget import Budget
    from dpcli.errors import SpecError
    from dpcli.io import dumps_json
    from dpcli.mechanisms import Plan
    from dpcli.spec import TrainBRCSection

    reporter = reporter or Silent()
    data = Path(data)
    s = spec
    # rounds, c1 and c2 are checked by their one declaration (dpcli.params) in the override
    section = resolve_section(s, "train-brc", TrainBRCSection, epsilon, columns, rounds=rounds,
                              c1=c1, c2=c2)
    if s.schema.n_classes != 2:
        raise UsageError(f"train-brc needs a binary label; {s.path}: label.classes declares "
                         f"{s.schema.n_classes}")
    chosen = section.columns or tuple(c for c in s.schema.names
                                      if inputs.usable(s.schema.column(c)))
    for where, names in (("train-brc", chosen), (f"{s.path}: train-brc.public", section.public)):
        for c in names:
            if not inputs.usable(s.schema.column(c)):
                raise UsageError(f"{where}: {c!r} is a {s.schema.column(c).kind} column; brc "
                                 "reads numeric, categorical and binary columns")
    declared = tuple(c for c in chosen if c in set(section.public))
    if declared and s.schema.label.public is None:
        raise SpecError(label_undeclared(s.path, declared, s.schema.label.column))
    mode, public = brc.resolve_mode(chosen, section.public, bool(s.schema.label.public))
    if mode == "partial" and len(public) == len(chosen):
        raise UsageError(f"train-brc: every chosen column is declared public in {s.path}; "
                         "brc needs at least one private feature to spend ε on")
    if section.public and mode == "private":
        why = ("the label is declared private (label: public: false)" if declared
               else "none of the public columns is among the chosen ones")
        reporter.say(f"note: {why}: running Algorithm 3 (all private); the columns listed "
                     "under train-brc.public are used as ordinary, protected features")
    reporter.say("algorithm: " + ("Algorithm 2 (partially private: public label and columns)"
                                  if mode == "partial" else "Algorithm 3 (all private)"))
    neighbouring = brc.relation(mode, public)
    total = Budget(section.epsilon)
    base = base_config(s, section, chosen)
    configs: list[brc.BRCConfig] = []
    sizes: list[int] = []

    def plan_for(n: int) -> Plan:
        if n == 0:
            raise UsageError(f"{data}: holds no rows to train on")
        sizes.append(n)
        configs.append(config_at(section, n, base))
        if brc.breaks_rule(configs[-1], section.epsilon, n):
            ratio = brc.noise_scale(configs[-1], section.epsilon, n)
            reporter.warn(f"c1·c2·T/(ε_r·n) = {ratio:.3g} exceeds the paper's rule of thumb "
                          f"({brc.RULE_OF_THUMB:g}): the noise may swamp each round's error. "
                          "Use --rounds auto, fewer rounds or more ε.")
        return plan_at(s, section, n, config=configs[-1])

    spend = Spend.prepare(s, plan_for, data, chosen, command="train-brc", reporter=reporter,
                          outputs=[out], total=total, neighbouring=neighbouring,
                          dry_run=dry_run,
                          forecast=forecast_of("train-brc", s, section, columns=chosen))
    if dry_run:
        return spend.dry_run()
    plan = spend.plan
    config, n = configs[-1], sizes[-1]
    arguments: dict[str, Any] = {
        "data": str(data.resolve()), "out": None if out is None else str(out.resolve()),
        "columns": list(chosen), "public": list(public), "mode": mode,
        "epsilon": section.epsilon, "rounds": config.rounds, "c1": config.c1, "c2": config.c2}
    positive = s.schema.label.positive_index
    positive = 1 if positive is None else positive
    with spend.charged(arguments, seed=seed) as run:
        # One pass over the file per round and one for the calibration, a batch at a time
        # (decoded a batch ahead in a second thread). brc reads no tokens column, so reading
        # draws nothing from rng: the noise comes in the same order as with rows in memory.
        _draw(run.plan, config, section.epsilon)
        stream = brc.TrainingStream(run.batch_source(chosen), n, s.schema, tuple(chosen),
                                    public, positive)
        upto = "up to " if config.rounds_after_count else ""
        with reporter.progress(f"boosting (class count, {upto}{config.rounds} rounds, "
                               "calibration: a pass each)", (config.rounds + 2) * n) as advance:
            ensemble, calibration, _ = brc.fit(stream, config, section.epsilon, run.rng,
                                               advance)
        config = brc.config_ran(config, ensemble)   # T after the class count, when set there
        model = brc.BRCModel(inputs.model_schema(s.schema, chosen), tuple(chosen), mode, public,
                             ensemble, config, n, section.epsilon, calibration)
        payload = {**model.to_payload(), "breakdown": plan.to_json(), **run.check_model(model)}
        noise = brc.calibration_noise(calibration, n,
                                      float(plan.step(brc.CALIBRATION).budget.epsilon))
        if noise > brc.CALIBRATION_NOISE_LIMIT:
            # detected from released values: the cut's noise can move most of the smaller class
            reporter.warn(f"near chance on the data: the calibration histogram's noise (sd of "
                          f"a class total {noise:.2f} × the smaller class) can move the class "
                          "cut anywhere, and it may put (almost) every record in one class. "
                          f"Spend more ε (about {section.epsilon * noise / 0.16:.2g} keeps it "
                          "small) or train on more rows.")
            payload["degeneracy"] = {**payload.get("degeneracy", {}), "degenerate": True,
                                     "near_chance_on_rows": True,
                                     "calibration_noise": round(noise, 4)}
        envelope = run.envelope(brc.KIND, payload)
        if out is not None:
            run.write(out, dumps_json(envelope))
        kinds = [r.kind for r in ensemble]
        run.summary = {"mode": mode, "rounds": config.rounds,
                       "public_rounds": kinds.count("public")}
    details = {"mode": mode, "neighbouring": neighbouring, "rounds": config.rounds,
               "public_rounds": kinds.count("public"), "private_columns": len(chosen) - len(public),
               "public_columns": len(public),
               "noise_scale": payload["noise_scale"],
               "degenerate": bool(payload.get("degeneracy", {}).get("degenerate"))}
    return Released(brc.KIND, model, envelope, plan, run.run_id, out, dict(run.summary),
                    tuple(spend.data_report()), details)


def config_at(section: Any, n: int, base: Any) -> Any:
    """``base`` (a BRCConfig) with its c1 = c2 and rounds: the section's, else the rules of n
    and ε (``auto_constant``, ``auto_rounds``)."""
    from dpcli.algorithms import brc

    given = section.config_values()
    # c1 = c2 from n and ε unless the spec sets either (brc.auto_constant)
    c = (base.c1, base.c2) if "c1" in given or "c2" in given else (
        (brc.auto_constant(section.epsilon, n, base.counted),) * 2)
    # K from n unless the spec sets it (brc.auto_candidates); with K > 1 and rounds auto, T
    # is set after the class count (brc.select_rounds; here its balanced bound, m = n/2)
    k = given.get("candidates") or brc.auto_candidates(n)
    # Algorithm 2's selecting rounds release the private vote where its noise is small
    voted = base.partial and k > 1 and brc.vote_pays(section.epsilon, n, c[1])
    if k > 1:
        t = given.get("rounds") or brc.select_rounds(section.epsilon, n / 2, c[1], base.counted,
                                                     voted)
    else:
        t = given.get("rounds") or brc.auto_rounds(section.epsilon, n, c[0], c[1],
                                                   base.counted)
    return replace(base, rounds=t, c1=c[0], c2=c[1], candidates=k,
                   rounds_after_count=k > 1 and "rounds" not in given, voted=voted)


def base_config(spec: Spec, section: Any, columns: Sequence[str] | None = None) -> Any:
    """The BRCConfig before its rounds: the section's values, the label's mode (public facts)."""
    from dpcli.algorithms import brc, inputs

    chosen = tuple(columns or section.columns or (
        c for c in spec.schema.names if inputs.usable(spec.schema.column(c))))
    mode, _ = brc.resolve_mode(chosen, section.public, bool(spec.schema.label.public))
    return brc.BRCConfig(**{k: v for k, v in section.config_values().items()
                            if k not in ("rounds", "candidates")}, counted=mode == "private",
                          partial=mode == "partial")


def plan_at(spec: Spec, section: Any, n: int, *, columns: Sequence[str] | None = None,
            config: Any = None) -> Any:
    """train-brc's plan at ``section.epsilon`` on ``n`` records (public facts only).

    The one builder of the plan: the command's run and dry run use it, and so does
    its forecast (``dpcli.forecast.train_brc.plan``). ``config`` is the BRCConfig with
    its rounds (default: :func:`base_config` and :func:`config_at` at n).
    """
    from dpcli.algorithms import brc
    from dpcli.budget import Budget

    if config is None:
        config = config_at(section, n, base_config(spec, section, columns))
    return brc.plan(Budget(section.epsilon), config, n)


def _draw(plan: Spending, config: Any, epsilon: float) -> None:
    """Draw every planned step where brc's ε is handed over, checking that each is the ε
    :func:`brc.fit` spends on it (its split rule: the class count's share, ε_r/T a round, the
    calibration's share); a plan that disagrees is refused before any noise."""
    from dpcli.algorithms import brc
    from dpcli.mechanisms import PlanMisuse

    expected = {brc.CALIBRATION: float(epsilon * brc.CALIBRATION_SHARE)}
    if config.counted:
        expected[brc.CLASS_COUNT] = float(epsilon * brc.CLASS_COUNT_SHARE)
    if config.candidates > 1:
        expected[brc.SELECTION] = brc.rounds_epsilon(epsilon, config.counted, config.voted)
    if config.voted:
        expected[brc.VOTE] = float(epsilon * brc.VOTE_SHARE)
    for t in range(1, config.rounds + 1 if config.candidates == 1 else 1):
        expected[f"{brc.STEP}{t}"] = brc.rounds_epsilon(epsilon, config.counted) / config.rounds
    for name, eps in expected.items():
        if not math.isclose(plan.draw(name).budget.eps, eps, rel_tol=1e-9):
            raise PlanMisuse(f"brc would spend ε = {eps:g} on step {name!r}, not the plan's "
                             f"{plan.step(name).budget.eps:g}")


def label_undeclared(spec: Path, public: tuple[str, ...], label: str) -> str:
    """The refusal for public columns without a word about the label: both ways to write it."""
    return (
        f"{spec}: train-brc.public declares {', '.join(public)} public, but the spec says "
        f"nothing about the label {label!r}. The partially private algorithm (Algorithm 2) "
        "also treats the label as public knowledge, not protected, so it runs only when the "
        "spec says so. Add one line to the spec's 'label:' section:\n"
        "  label:\n"
        "    public: true    # the label is public knowledge: Algorithm 2, ε protects the "
        "private features only\n"
        "or\n"
        "  label:\n"
        "    public: false   # the label is private: Algorithm 3, every column and the label "
        "protected (the public columns become ordinary features)")
