"""Forecast versus measured error for train-nb, train-brc and validate (issue 27).

For each dataset (UCI Adult and UCI credit default from ../shared/data, statsmodels
fair, ISLP Default, and --datasets others of the suite; the suite's train / test splits,
benchmarks/suite.py), each ε and --seeds
seeded runs of the command's own algorithm (in process, the statistics computed once per
plan),
the forecast made from public facts only (n, ε, the spec) is put next to the error
measured on the data:

* train-nb (the command's defaults, every declared column, as it runs now: the plan's
  histogram bins, pseudo-counts, pooled class sizes and, for a binary label, the
  released balanced threshold on a second pass over the training rows): the test
  accuracy and balanced accuracy of each noisy fit minus the same plan's at ε = 1e4
  with the same bins (noise negligible) — the forecast's ``accuracy`` and
  ``balanced_accuracy`` — and the share of that model's edge over chance lost, on
  accuracy (over 1/K: ``edge_lost``, as the earlier forecast defined it) and on balanced
  accuracy (over 1/K: ``balanced_edge_lost``, what the forecast's ``edge_lost`` now
  forecasts under the default balanced threshold);
* train-brc (auto rounds, spec defaults, the label private): released minus exact
  weighted error of every round (recorded at the mechanism), the forecast's
  ``round_error``; the class weights ρ come from the run's own noisy count;
* validate (stability, ramp, objective perturbation, auto λ and share): the class
  cut's utility loss as a share of the rows (recorded at the exponential mechanism:
  best utility minus the chosen one), the forecast's ``threshold``, with the span of
  the candidates over the rows' logit range (``candidate_span``); and the ``margin``:
  the run's weights minus the noise-free minimiser of the same objective (objective
  perturbation with a zero noise vector), along a random unit direction.

Per cell: the forecast's median and interval, the measured median |error|, their
ratio and the share of runs (rounds for train-brc) inside the interval; the JSON keeps
every measured error. Nothing is
chosen on a test split (nothing is chosen at all). select-features is not here: its
forecast is the mechanism's noise alone (no data term), checked against the real
selection in tests/forecast/test_select_features.py.

    PYTHONPATH=$PWD /work/bench-venv/bin/python benchmarks/forecast_learners.py \\
        --data /work/shared/data

Writes benchmarks/results/forecast_learners.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

DATASETS = ("adult", "credit", "fair", "default")
EPSILONS = (0.1, 0.5, 1.0)
REFERENCE_EPS = 1e4


def load(name: str, data: Path) -> tuple[Any, Path, Path] | None:
    import suite

    from dpcli.spec import load_spec

    info = suite.prepare(name, data)
    if info is None:
        return None
    return load_spec(suite.SPECS / f"{name}.yaml"), HERE / info["train"], HERE / info["test"]


def batches(spec: Any, path: Path, columns: tuple[str, ...]) -> list[Any]:
    from dpcli.data import DataSource

    return list(DataSource(path, spec.schema).batches(columns, rng=np.random.default_rng(0)))


def summary(forecast_metric: Any, errors: np.ndarray) -> dict[str, Any]:
    lo, hi = forecast_metric.interval
    med = float(np.median(np.abs(errors)))
    return {"forecast_median": forecast_metric.expected, "interval": [lo, hi],
            "level": forecast_metric.level, "measured_median": med,
            "ratio": med / forecast_metric.expected if forecast_metric.expected > 0 else None,
            "inside": float(np.mean((errors >= lo - 1e-12) & (errors <= hi + 1e-12))),
            "runs": int(errors.size), "errors": [float(x) for x in errors]}


def run_nb(spec: Any, train: Path, test: Path, seeds: int) -> list[dict[str, Any]]:
    from dpcli.algorithms import naive_bayes as nb
    from dpcli.data import DataSource
    from dpcli.forecast import forecast
    from dpcli.forecast import train_nb as nbf
    from dpcli.spec import TrainNBSection
    from dpcli.stats import LocalEngine

    cols = tuple(spec.schema.names)
    import pyarrow.parquet as pq

    source = DataSource(train, spec.schema)
    n = int(pq.ParquetFile(train).metadata.num_rows)   # public: the file's metadata
    train_batches = batches(spec, train, cols)
    test_batches = batches(spec, test, cols)
    labels = np.concatenate([b.label for b in test_batches])
    k = spec.schema.n_classes

    def scores(section: Any, seed: int) -> tuple[float, float]:
        # the command as it runs (its own plan, histogram bins, pseudo-counts, pooled class
        # sizes and, for a binary label, the released decision threshold on a second pass)
        p = nbf.plan(spec, section, n)
        cfg = nb.NBConfig(**section.config_values())
        alloc = nb.allocation(spec.schema, cols, Budget(section.epsilon), cfg, n)
        key = tuple(sorted(alloc.bins.items()))
        if key not in stats_cache:
            stats_cache[key] = LocalEngine().compute(
                source, nb.request(spec.schema, cols, cfg, p=p, bins=dict(alloc.bins)),
                rng=np.random.default_rng(0))
        rng = np.random.default_rng(seed)
        model = nb.fit(stats_cache[key], spec.schema, cols, p, cfg, rng)
        if nb.has_step(p, nb.THRESHOLD):
            nb.fit_threshold(model, p, train_batches, rng)
        pred = np.concatenate([model.classify(b)[1] for b in test_batches])
        recall = [float((pred[labels == c] == c).mean()) for c in range(k)
                  if (labels == c).any()]
        return float((pred == labels).mean()), float(np.mean(recall))

    from dpcli.budget import Budget

    stats_cache: dict[Any, Any] = {}
    rows = []
    for eps in EPSILONS:
        section = TrainNBSection(epsilon=eps)
        bins = nb.allocation(spec.schema, cols, Budget(eps), nb.NBConfig(), n).bins
        # the noise-free model of the same plan: the same bins at an ε where noise is nil
        fixed = sorted(set(bins.values()))
        ref_section = TrainNBSection(epsilon=REFERENCE_EPS, bins=fixed[0] if fixed else None)
        if len(fixed) > 1:
            print(f"ε = {eps}: columns with different bins; the reference takes {fixed[0]}",
                  file=sys.stderr)
        ref_acc, ref_bal = scores(ref_section, 0)
        f = forecast("train-nb", spec, section, n)
        got = np.array([scores(section, seed) for seed in range(seeds)])
        acc_err, bal_err = got[:, 0] - ref_acc, got[:, 1] - ref_bal
        bal_edge = -bal_err / max(ref_bal - 0.5 if k == 2 else ref_bal - 1.0 / k, 1e-9)
        acc_edge = -acc_err / max(ref_acc - 1.0 / k, 1e-9)
        row = {"command": "train-nb", "epsilon": eps, "n": n, "reference": ref_acc,
               "reference_balanced": ref_bal, "bins": fixed, "verdict": f.verdict.line(),
               "accuracy": summary(f.metrics["accuracy"], acc_err),
               "edge_lost": summary(f.metrics["edge_lost"], acc_edge),
               # the same forecasts (or their balanced versions, when the forecast has them)
               # against the balanced accuracy, which the default threshold maximises
               "balanced_accuracy": summary(f.metrics.get("balanced_accuracy",
                                                          f.metrics["accuracy"]), bal_err),
               "balanced_edge_lost": summary(f.metrics.get("balanced_edge_lost",
                                                           f.metrics["edge_lost"]), bal_edge)}
        rows.append(row)
    return rows


def run_brc(spec: Any, train: Path, seeds: int) -> list[dict[str, Any]]:
    from dpcli.algorithms import brc, inputs
    from dpcli.api.train_brc import base_config, config_at
    from dpcli.forecast import forecast
    from dpcli.spec import TrainBRCSection

    cols = tuple(c for c in spec.schema.names if inputs.usable(spec.schema.column(c)))
    positive = spec.schema.label.positive_index
    data = brc.training_set(batches(spec, train, cols), spec.schema, cols, (),
                            1 if positive is None else positive)
    n = data.n
    recorded: list[float] = []
    real = brc.grid_laplace_mechanism

    def record(value: float, **kwargs: Any) -> Any:
        out = real(value, **kwargs)
        recorded.append(float(out) - float(value))
        return out

    brc.grid_laplace_mechanism = record   # the rounds' mechanism, recorded (restored below)
    rows = []
    try:
        for eps in EPSILONS:
            section = TrainBRCSection(epsilon=eps, columns=cols)
            f = forecast("train-brc", spec, section, n, columns=cols)
            config = config_at(section, n, base_config(spec, section, cols))
            recorded.clear()
            for seed in range(seeds):
                brc.fit(data, config, eps, np.random.default_rng(seed))
            rows.append({"command": "train-brc", "epsilon": eps, "n": n,
                         "rounds": config.rounds, "verdict": f.verdict.line(),
                         "round_error": summary(f.metrics["round_error"],
                                                np.asarray(recorded))})
    finally:
        brc.grid_laplace_mechanism = real
    return rows


def run_validate(spec: Any, train: Path, seeds: int) -> list[dict[str, Any]]:
    from dpcli.algorithms import inputs
    from dpcli.algorithms import validate as tuning
    from dpcli.api.validate import plan_at
    from dpcli.forecast import forecast
    from dpcli.mechanisms import objective_perturbation
    from dpcli.spec import ValidateSection

    cols = tuple(c for c in spec.schema.names if inputs.usable(spec.schema.column(c)))
    positive = spec.schema.label.positive_index
    x, y = tuning.design_rows(batches(spec, train, cols), spec.schema, cols,
                              1 if positive is None else positive)
    rows_all = len(y)
    losses: list[float] = []
    spans: list[float] = []
    real = tuning.threshold_index

    def record(logits: Any, yy: Any, cands: Any, weights: Any, epsilon: Any, rng: Any) -> int:
        i = real(logits, yy, cands, weights, epsilon, rng)
        utility = tuning.threshold_utility(logits, yy, cands, weights)
        losses.append(float(utility.max() - utility[i]) / len(yy))
        # the candidates' span over the data's logits' (the forecast's reference states one)
        spans.append(float((cands[-1] - cands[0]) / max(np.ptp(logits), 1e-12)))
        return i

    tuning.threshold_index = record   # the cut's mechanism, recorded (restored below)
    rows = []
    try:
        for eps in EPSILONS:
            section = ValidateSection(epsilon=eps, columns=cols)
            planned = plan_at(spec, section, rows_all, columns=cols)
            f = forecast("validate", spec, section, rows_all, columns=cols)
            decision = planned.decision
            if decision.mode == "select":
                print(f"validate ε = {eps}: the grid is searched; skipped", file=sys.stderr)
                continue
            losses.clear()
            spans.clear()
            # the margin: the noise-free minimiser of the same objective (objective
            # perturbation with a zero noise vector), and a random unit direction per run
            exact = None
            if planned.config.trainer == "objective":
                exact = objective_perturbation(x, y, decision.lam,
                                               float(decision.epsilon_model),
                                               standard_noise=np.zeros(x.shape[1])).weights
            margins = []
            for seed in range(seeds):
                rng = np.random.default_rng(seed)
                outcome = tuning.fit_fixed(planned.config, decision, x, y, rng)
                if exact is not None:
                    u = np.random.default_rng(10_000 + seed).normal(size=x.shape[1])
                    margins.append(float(u @ (outcome.fit.weights - exact))
                                   / float(np.linalg.norm(u)))
                model = tuning.LogRegModel(inputs.model_schema(spec.schema, cols), cols,
                                           outcome.fit.weights, {})
                logits = np.asarray(x @ model.weights)
                tuning.choose_threshold(model, logits, y, decision.epsilon_threshold, rng)
            rows.append({"command": "validate", "epsilon": eps, "n": rows_all,
                         "lambda_rule": decision.mode, "verdict": f.verdict.line(),
                         "candidate_span": float(np.median(spans)),
                         "threshold": summary(f.metrics["threshold"], -np.asarray(losses)),
                         **({"margin": summary(f.metrics["margin"], np.asarray(margins))}
                            if margins else {})})
    finally:
        tuning.threshold_index = real
    return rows


def fmt(x: float | None) -> str:
    return "—" if x is None else (f"{x:.2g}" if abs(x) < 0.01 else f"{x:.3g}")


def table(rows: list[dict[str, Any]], metric: str) -> list[str]:
    out = ["| dataset | ε | n | forecast median | forecast interval | measured median "
           "|error| | measured / forecast | inside the interval | runs | verdict |",
           "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        s = r[metric]
        lo, hi = s["interval"]
        out.append(f"| {r['dataset']} | {r['epsilon']:g} | {r['n']:,} | "
                   f"{fmt(s['forecast_median'])} | [{fmt(lo)}, {fmt(hi)}] ({s['level']:.0%}) | "
                   f"{fmt(s['measured_median'])} | {fmt(s['ratio'])} | {s['inside']:.0%} | "
                   f"{s['runs']} | {r['verdict'].replace('verdict: ', '')} |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=HERE.parent.parent / "shared" / "data")
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--commands", default="train-nb,train-brc,validate")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "forecast_learners")
    parser.add_argument("--update", action="store_true",
                        help="keep the other commands' rows of the existing --out JSON")
    args = parser.parse_args()
    commands = args.commands.split(",")
    rows: list[dict[str, Any]] = []
    if args.update and args.out.with_suffix(".json").exists():
        rows = [r for r in json.loads(args.out.with_suffix(".json").read_text())["rows"]
                if r["command"] not in commands]
    started = time.perf_counter()
    for name in args.datasets.split(","):
        got = load(name, args.data)
        if got is None:
            continue
        spec, train, test = got
        for command in ("train-nb", "train-brc", "validate"):
            if command not in commands:
                continue
            t0 = time.perf_counter()
            got_rows = (run_nb(spec, train, test, args.seeds) if command == "train-nb" else
                        run_brc(spec, train, args.seeds) if command == "train-brc" else
                        run_validate(spec, train, args.seeds))
            for r in got_rows:
                r["dataset"] = name
                rows.append(r)
            print(f"{name} {command}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    from _common import environment

    env = environment("numpy", "scipy")
    lines = ["# Forecast versus measured: train-nb, train-brc, validate (issue 27)", "",
             f"{env.get('date_utc', '')}, git {env.get('git_head', '')}; {args.seeds} seeded "
             f"runs per cell; this run ({', '.join(commands)}) "
             f"{time.perf_counter() - started:.0f} s. Produced by "
             "`benchmarks/forecast_learners.py` (its docstring says what is measured).", ""]
    for command, metrics in (("train-nb", ("accuracy", "edge_lost", "balanced_accuracy",
                                            "balanced_edge_lost")),
                             ("train-brc", ("round_error",)),
                             ("validate", ("threshold", "margin"))):
        mine = [r for r in rows if r["command"] == command]
        for metric in metrics:
            if mine and all(metric in r for r in mine):
                lines += [f"## {command}: {metric}", "", *table(mine, metric), ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps({"environment": env, "rows": rows},
                                                        indent=1))
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
