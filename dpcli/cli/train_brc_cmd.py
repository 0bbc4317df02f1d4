"""``dpcli train-brc``: boosting with random classifiers (Shen et al.)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

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


@handle_errors
def train_brc(
    data: DataArg,
    spec: SpecOpt,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Model JSON to write (required unless --dry-run).")] = None,
    rounds: Annotated[str | None, typer.Option(
        "--rounds", "-T", help="Boosting rounds T, or 'auto': the most rounds up to 25 with "
        "c1·c2·T/(0.9·ε·n) ≤ 1/2. Default: the spec's, else 25.")] = None,
    c1: Annotated[float | None, typer.Option(
        "--c1", help="Private weights stay ≥ 1/c1 (1 ≤ c1 ≤ 1000; default √2).")] = None,
    c2: Annotated[float | None, typer.Option(
        "--c2", help="Private weights stay ≤ c2 (1 ≤ c2 ≤ 1000; default √2).")] = None,
    columns: Annotated[str | None, typer.Option(
        help="Comma-separated feature columns (default: the spec's 'train-brc.columns', else "
        "every numeric, categorical and binary column).")] = None,
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
    """Train a private boosted linear classifier (brc, Shen et al.).

    Each of T rounds draws a random linear classifier over the private
    features (they are scaled into [-1, 1] with their declared bounds) and
    releases its weighted error with Laplace noise of scale
    c1·c2·T/(0.9·ε·n): 9/10 of ε shared by the rounds. The private weights
    are clipped to [1/c1, c2], so one record moves that error by at most
    c1·c2/n. The last 1/10 of ε releases a noisy histogram of the training
    margins by class, to which the score σ(a·F + b) is fitted (Platt
    scaling). The predicted class is the paper's sign(F); on unbalanced
    labels classify by score > 1/2 instead (see the README).

    The file is read once per round and once more for the calibration, a
    batch at a time: memory does not grow with the number of rows (a
    numeric public column keeps one sum per distinct value).

    Columns listed under the spec's 'train-brc: public:' are public
    knowledge. If the spec also declares the label public ('label: public:
    true'), a weighted decision stump on the public columns competes each round
    at no privacy cost (Algorithm 2), and ε protects the private features only.
    With 'label: public: false', or no public column, every feature and the
    label are private (Algorithm 3, replace-one). Public columns with nothing
    said about the label are refused before any charge.

    Example:

        dpcli train-brc sample_data/adult_train.parquet --spec configs/adult.yaml \\
            --out models/brc.json --epsilon 0.16
        dpcli predict models/brc.json sample_data/adult_test.parquet --out preds.parquet
    """
    from dataclasses import replace

    from dpcli.algorithms import brc, inputs
    from dpcli.budget import Budget
    from dpcli.cli.spend import (
        noise_generator,
        preflight,
        release_json,
        report_data,
        resolve_section,
    )
    from dpcli.data.prefetch import prefetch
    from dpcli.errors import SpecError, UsageError
    from dpcli.io import Outputs
    from dpcli.mechanisms import Plan
    from dpcli.run import charged
    from dpcli.spec import TrainBRCSection, load_spec

    ui = UI(quiet=quiet, json=json, force_progress=progress, report=report)
    s = load_spec(spec)
    overrides = {"rounds": _rounds(rounds), "c1": _constant("--c1", c1),
                 "c2": _constant("--c2", c2)}
    section = resolve_section(s, "train-brc", TrainBRCSection, epsilon, columns, **overrides)
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
        ui.say(f"note: {why}: running Algorithm 3 (all private); the columns listed under "
               "train-brc.public are used as ordinary, protected features", markup=False)
    ui.say("algorithm: " + ("Algorithm 2 (partially private: public label and columns)"
                            if mode == "partial" else "Algorithm 3 (all private)"), markup=False)
    neighbouring = brc.relation(mode, public)
    total = Budget(section.epsilon)
    base = brc.BRCConfig(**{k: v for k, v in section.config_values().items()
                            if k != "rounds"})
    configs: list[brc.BRCConfig] = []
    sizes: list[int] = []

    def plan_for(n: int) -> Plan:
        if n == 0:
            raise UsageError(f"{data}: holds no rows to train on")
        sizes.append(n)
        t = (brc.auto_rounds(section.epsilon, n, base.c1, base.c2) if section.rounds == "auto"
             else section.config_values().get("rounds", base.rounds))
        configs.append(replace(base, rounds=t))
        if brc.breaks_rule(configs[-1], section.epsilon, n):
            ratio = brc.noise_scale(configs[-1], section.epsilon, n)
            ui.warn(f"c1·c2·T/(0.9·ε·n) = {ratio:.3g} exceeds the paper's rule of thumb "
                    f"({brc.RULE_OF_THUMB:g}): the noise may swamp each round's error. Use "
                    "--rounds auto, fewer rounds or more ε.")
        return brc.plan(total, configs[-1], n)

    source, plan = preflight(ui, s, plan_for, data, chosen, out, [out], dry_run, total=total,
                             neighbouring=neighbouring)
    assert out is not None
    config, n = configs[-1], sizes[-1]
    outputs = Outputs()
    arguments = {"data": str(data.resolve()), "out": str(out.resolve()), "columns": list(chosen),
                 "public": list(public), "mode": mode, "epsilon": section.epsilon,
                 "rounds": config.rounds, "c1": config.c1, "c2": config.c2}
    positive = s.schema.label.positive_index
    positive = 1 if positive is None else positive
    rng = noise_generator(ui, s, seed, command="train-brc", arguments=arguments,
                          data=data)
    with charged(s, plan, command="train-brc", arguments=arguments, input_path=data,
                 seeded=seed is not None, neighbouring=neighbouring) as charge, outputs:
        # One pass over the file per round and one for the calibration, a batch at a time
        # (decoded a batch ahead in a second thread). brc reads no tokens column, so reading
        # draws nothing from rng: the noise comes in the same order as with rows in memory.
        stream = brc.TrainingStream(lambda: prefetch(source.batches(chosen, rng=rng)), n,
                                    s.schema, tuple(chosen), public, positive)
        with ui.progress(f"boosting ({config.rounds} rounds + calibration: a pass each)",
                         (config.rounds + 1) * n) as advance:
            ensemble, calibration, _ = brc.fit(stream, config, section.epsilon, rng, advance)
        model = brc.BRCModel(inputs.model_schema(s.schema, chosen), tuple(chosen), mode, public,
                             ensemble, config, n, section.epsilon, calibration)
        payload = {**model.to_payload(), "breakdown": plan.to_json()}
        outputs.write_text(out, release_json(brc.KIND, payload, s, plan, charge,
                                             seeded=seed is not None, neighbouring=neighbouring))
        charge.outputs = outputs.commit()
        kinds = [r.kind for r in ensemble]
        charge.summary = {"mode": mode, "rounds": config.rounds,
                          "public_rounds": kinds.count("public")}

    report_data(ui, source.report)
    ratio = brc.noise_scale(config, section.epsilon, n)
    ui.say(f"trained brc ({mode}: {len(chosen) - len(public)} private, {len(public)} public "
           f"columns) with T = {config.rounds} rounds ({kinds.count('public')} public), "
           f"noise scale c1·c2·T/(0.9·ε·n) = {ratio:.3g}; wrote {out}, spent {plan.total} "
           f"(run {charge.run_id[:8]})")
    if json:
        ui.emit_json({"command": "train-brc", "dataset": s.dataset, "run_id": charge.run_id,
                      "model": str(out), "mode": mode, "neighbouring": neighbouring,
                      "rounds": config.rounds, "public_rounds": kinds.count("public"),
                      "noise_scale": ratio, "spent": plan.total.to_json(),
                      "breakdown": plan.to_json()})


def _rounds(text: str | None) -> int | str | None:
    from dpcli.algorithms.brc import MAX_ROUNDS
    from dpcli.errors import UsageError

    if text is None or text.strip().lower() == "auto":
        return None if text is None else "auto"
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_ROUNDS:
        raise UsageError(f"--rounds must be a whole number in [1, {MAX_ROUNDS:,}] or 'auto', "
                         f"got {text!r}")
    return value


def _constant(name: str, value: float | None) -> float | None:
    from dpcli.algorithms.brc import MAX_C
    from dpcli.errors import UsageError

    if value is not None and not 1 <= value <= MAX_C:
        raise UsageError(f"{name} must be a number in [1, {MAX_C:g}], got {value}")
    return value


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
