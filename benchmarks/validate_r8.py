"""validate's default λ rule, old against new, at large n (tuning splits only).

Old (main before r8): ``lambda: auto`` searched the paper's grid (0.001 … 1) by stability
whenever its selection noise was ≤ 1 % of the ramp score's range (n·ε ≳ 800,000), else
trained at λ0 = 4√d/(ε·n). New: it searches a grid only if, besides, the grid's smallest λ is
≤ 4·λ0 (with no grid in the spec the candidates are λ0 × (1/4 … 16), whose noise is never
that small), else trains at λ0. The whole default pipeline runs in process (decide, the
search or the one fit, the class threshold), at the same seeds for both rules: where the two
rules decide the same, they give the same model.

Data (never a suite test file):

- ``carseats:N``: ISLP Carseats (400 rows, label High = Sales > 8), N rows drawn with
  replacement (seed 8), the spec's domains from the dataset's documentation (as a tester's).
- ``adult:N`` and other ``name:N``: the suite's *train* file resampled to N rows (seed 8);
  ``name`` alone: the suite's train file as it is.

Each design is cut by validate's public row rule (fraction 0.3, seed 7) into a fitting part
(the rows validate is given) and a holdout; AUC and balanced accuracy on the holdout. With
``--resample-fit`` the file is cut first and only the fitting part is resampled to N rows, so
the holdout holds no copy of a fitted row.

    nice -n 10 python benchmarks/validate_r8.py --datasets carseats:1500000 --epsilons 0.5,1,2 \
        --seeds 5
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))
CACHE = HERE / ".cache" / "validate_r8"
MULTIPLES = (0.25, 1.0, 4.0, 16.0, 64.0)

CARSEATS_SCHEMA = """\
missing: error
columns:
  CompPrice: {type: numeric, bounds: [0, 200]}
  Income: {type: numeric, bounds: [0, 150]}
  Advertising: {type: numeric, bounds: [0, 40]}
  Population: {type: numeric, bounds: [0, 600]}
  Price: {type: numeric, bounds: [0, 200]}
  ShelveLoc: {type: categorical, categories: [Bad, Medium, Good]}
  Age: {type: numeric, bounds: [18, 90]}
  Education: {type: numeric, bounds: [10, 18]}
  Urban: {type: categorical, categories: ["No", "Yes"]}
  US: {type: binary, values: ["No", "Yes"]}
"""
CARSEATS_SPEC = """\
dataset: r8-carseats
budget: {epsilon: 1000.0, delta: 0.0}
ledger: carseats.jsonl
label: {column: High, classes: ["No", "Yes"], positive: "Yes"}
schema: carseats.schema.yaml
validate: {epsilon: 1.0}
"""


def auc(score: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import rankdata

    pos = y > 0
    ranks = rankdata(score)
    npos, nneg = int(pos.sum()), int((~pos).sum())
    return float((ranks[pos].sum() - npos * (npos + 1) / 2) / (npos * nneg))


def design(name: str, rows: int | None):
    """(spec, columns, x, y) for a dataset name, resampled to ``rows`` (seed 8) if given."""
    import pandas as pd

    from dpcli.algorithms import inputs
    from dpcli.algorithms import validate as v
    from dpcli.data import DataSource
    from dpcli.mechanisms import make_rng
    from dpcli.spec import load_spec

    CACHE.mkdir(parents=True, exist_ok=True)
    if name == "carseats":
        from ISLP import load_data

        (CACHE / "carseats.schema.yaml").write_text(CARSEATS_SCHEMA)
        (CACHE / "carseats.yaml").write_text(CARSEATS_SPEC)
        spec = load_spec(CACHE / "carseats.yaml")
        frame = load_data("Carseats")
        frame["High"] = np.where(frame.pop("Sales") > 8, "Yes", "No")
        for c in ("ShelveLoc", "Urban", "US"):
            frame[c] = frame[c].astype(str)
    else:
        import suite

        info = suite.prepare(name, Path("/work/shared/data"))
        spec = load_spec(HERE / "suite" / f"{name}.yaml")
        frame = pd.read_parquet(HERE / info["train"])
    if rows is not None:
        pick = np.random.default_rng(8).integers(len(frame), size=rows)
        frame = frame.iloc[pick].reset_index(drop=True)
    path = CACHE / f"{name}_{rows or 'all'}.parquet"
    if not path.exists():
        frame.to_parquet(path, index=False)
    cols = [c for c in spec.schema.names if inputs.usable(spec.schema.column(c))]
    positive = spec.schema.label.positive_index
    x, y = v.design_rows(DataSource(path, spec.schema).batches(cols, rng=make_rng(0)),
                         spec.schema, cols, 1 if positive is None else positive)
    return spec, cols, x, y


def old_decide(v, eps: float, n: int, m: int, d: int, n_all: int):
    """main's rule: the paper's grid searched when its noise is ≤ 1 %, no reach condition."""
    saved = v.REACH
    v.REACH = math.inf
    try:
        return v.decide(v.ValidateConfig(grid_given=True), eps, n, m, d, n_all)
    finally:
        v.REACH = saved


def run(v, spec, cols, decision, xf, yf, xh, yh, seed: int) -> dict:
    """The default pipeline on the fitting part at this decision; metrics on the holdout."""
    from dpcli.algorithms import inputs
    from dpcli.mechanisms import make_rng

    rng = make_rng(seed)
    config = decision.searched(v.ValidateConfig())
    t0 = time.process_time()
    if decision.mode == "select":
        held = v.validation_rows(len(yf), config.validation_fraction, config.split_seed)
        keep, hold = np.flatnonzero(~held), np.flatnonzero(held)
        outcome = v.tune(config, (xf[keep], yf[keep]), (xf[hold], yf[hold]),
                         float(decision.epsilon_model), rng)
    else:
        outcome = v.fit_fixed(config, decision, xf, yf, rng)
    model = v.LogRegModel(inputs.model_schema(spec.schema, cols), tuple(cols),
                          outcome.fit.weights, {})
    cut = v.choose_threshold(model, np.asarray(xf @ model.weights), yf,
                             decision.epsilon_threshold, rng)
    z = np.asarray(xh @ model.weights)
    pred = z > cut.logit
    bal = (np.mean(pred[yh > 0]) + np.mean(~pred[yh < 0])) / 2
    edge = (v.grid_edge(config.grid, outcome.index) if outcome.index is not None else None)
    return {"mode": decision.mode, "lambda": outcome.fit.lam, "index": outcome.index,
            "edge": edge, "auc": auc(z, yh), "balanced_accuracy": float(bal),
            "accuracy": float(np.mean(pred == (yh > 0))), "cpu_s": time.process_time() - t0}


def multiples(v, decision, head: dict, xf, yf, xh, yh, seeds: int, out: Path) -> None:
    """One fit on the whole fitting part at the model's ε for each λ: holdout AUC."""
    from dpcli.mechanisms import make_rng

    eps = float(decision.epsilon_model)
    lam0 = v.auto_lambda(len(yf), eps, xf.shape[1])
    lams = {f"{f:g} λ0": f * lam0 for f in MULTIPLES} | {"0.001": 0.001}
    for seed in range(seeds):
        row = dict(head, seed=seed, kind="multiples")
        for j, (name, lam) in enumerate(lams.items()):
            fit = v.train("objective", xf, yf, lam, eps, make_rng(1000 * seed + j))
            row[name] = auc(np.asarray(xh @ fit.weights), yh)
        print(json.dumps(row), flush=True)
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")


def report(paths: list[Path]) -> None:
    """Markdown tables (mean ± sd over seeds) from the JSON lines the runs appended."""
    rows = [json.loads(line) for p in paths for line in p.read_text().splitlines() if line]
    cells: dict[tuple, list] = {}
    for r in rows:
        cells.setdefault((r["dataset"], r["epsilon"], r.get("kind", "rules")), []).append(r)

    def ms(values: list[float]) -> str:
        return f"{np.mean(values):.3f} ± {np.std(values, ddof=1) if len(values) > 1 else 0:.4f}"

    print("| data | n (fitting part) | d | ε | seeds | old rule: λ (edge) | old AUC | new AUC "
          "| old bal. acc | new bal. acc | new λ |")
    print("| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for (name, eps, kind), rs in sorted(cells.items()):
        if kind != "rules":
            continue
        old = [r["old"] for r in rs]
        new = [r["new"] for r in rs]
        lams = sorted({f"{o['lambda']:.3g}" + (f" ({o['edge']})" if o["edge"] else "")
                       for o in old})
        print(f"| {name} | {rs[0]['n_fit']:,} | {rs[0]['d']} | {eps:g} | {len(rs)} | "
              f"{rs[0]['old_rule']}: {', '.join(lams)} | "
              f"{ms([o['auc'] for o in old])} | {ms([o['auc'] for o in new])} | "
              f"{ms([o['balanced_accuracy'] for o in old])} | "
              f"{ms([o['balanced_accuracy'] for o in new])} | "
              f"{rs[0]['new_rule']}: {new[0]['lambda']:.3g} |")
    multi = [(k, rs) for k, rs in sorted(cells.items()) if k[2] == "multiples"]
    if multi:
        names = [f"{f:g} λ0" for f in MULTIPLES] + ["0.001"]
        print()
        print("| data | ε | seeds | " + " | ".join(names) + " |")
        print("| --- | ---: | ---: | " + " | ".join("---:" for _ in names) + " |")
        for (name, eps, _), rs in multi:
            print(f"| {name} | {eps:g} | {len(rs)} | "
                  + " | ".join(ms([r[c] for r in rs]) for c in names) + " |")


def main() -> None:
    from dpcli.algorithms import validate as v

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="carseats:1500000")
    ap.add_argument("--epsilons", default="0.5,1,2")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--decisions-only", action="store_true",
                    help="print each cell's old and new decision, train nothing")
    ap.add_argument("--multiples", action="store_true",
                    help="AUC of one fit at λ0 × (1/4, 1, 4, 16, 64) and at 0.001 instead")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "validate_r8.jsonl")
    ap.add_argument("--resample-fit", action="store_true",
                    help="name:N resamples the fitting part only (N rows); the holdout keeps the "
                         "file's own rows, none of them in the fitting part")
    ap.add_argument("--report", nargs="*", type=Path,
                    help="print the tables from these JSON-lines files and stop")
    args = ap.parse_args()
    if args.report:
        report(args.report)
        return
    for item in args.datasets.split(","):
        name, _, size = item.partition(":")
        fit_rows = int(size) if size and args.resample_fit else None
        spec, cols, x, y = design(name, None if args.resample_fit else
                                  (int(size) if size else None))
        hold = v.validation_rows(len(y), 0.3, 7)
        f, h = np.flatnonzero(~hold), np.flatnonzero(hold)
        if fit_rows is not None:   # only the fitting part is resampled: the holdout's people
            f = np.random.default_rng(8).choice(f, size=fit_rows)   # are not in it
            item += " (fit part resampled)"
        xf, yf, xh, yh = x[f], y[f], x[h], y[h]
        del x, y
        nf, d = xf.shape
        m = int(v.validation_rows(nf, v.VALIDATION_FRACTION, v.SPLIT_SEED).sum())
        for eps in map(float, args.epsilons.split(",")):
            old = old_decide(v, eps, nf - m, m, d, nf)
            new = v.decide(v.ValidateConfig(), eps, nf - m, m, d, nf)
            same = (old.mode, old.lam, old.grid) == (new.mode, new.lam, new.grid)
            head = {"dataset": item, "n_fit": nf, "n_holdout": len(yh), "d": d, "epsilon": eps,
                    "old_rule": old.mode, "new_rule": new.mode, "same_decision": same,
                    "lambda0": v.auto_lambda(nf, float(new.epsilon_model), d),
                    "new_reason": new.reason}
            if args.decisions_only:
                print(json.dumps(head), flush=True)
                continue
            if args.multiples:
                multiples(v, new, head, xf, yf, xh, yh, args.seeds, args.out)
                continue
            for seed in range(args.seeds):
                row = dict(head, seed=seed)
                row["old"] = run(v, spec, cols, old, xf, yf, xh, yh, 1000 + seed)
                row["new"] = (row["old"] if same else
                              run(v, spec, cols, new, xf, yf, xh, yh, 1000 + seed))
                print(json.dumps(row), flush=True)
                with args.out.open("a") as out:
                    out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
