"""Is λ0 = 4√d/(ε·n) a sound default? λ0 against its multiples and the stability search.

Train files only (never a test split): each dataset's suite train file
(``benchmarks/.cache/suite/data/<name>/train.parquet``, written by ``benchmarks/suite.py``)
is cut by the public row rule of ``validate`` (``validation_rows``, fraction 0.3, seed 7) into
a fitting part (70 %) and a holdout (30 %). On the fitting part, objective-perturbation
logistic regression at ε for λ ∈ {λ0/4, λ0/2, λ0, 2λ0, 4λ0} (λ0 from that part's n), and the
paper's stability search (ramp score, paper grid, 10 % of the fitting part as V) at the same
ε; AUC on the holdout. Seeds 0 … reps−1 (``make_rng(1000·seed + index)``).

    python benchmarks/validate_lambda.py --datasets adult,default,breast_cancer,fair,anes96 \
        --epsilons 0.5,1,2 --reps 3
    python benchmarks/validate_lambda.py --weights      # the class threshold's weighting

``--weights``: how the threshold's class weights (a₊, a₋) = (min(1, (q/p)^e), min(1, (p/q)^e))
trade accuracy for balanced accuracy, e ∈ {0 (accuracy), ½, 1 (balanced)}: a model at λ0
(ε = 0.75, three noise draws) on the fitting part, the cut maximising the utility on the
fitting part (exactly, without the mechanism's noise), accuracy and balanced accuracy on the
holdout (both from the train file).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MULTIPLES = (0.25, 0.5, 1.0, 2.0, 4.0)


def auc(score: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import rankdata

    pos = y > 0
    ranks = rankdata(score)
    npos, nneg = int(pos.sum()), int((~pos).sum())
    return float((ranks[pos].sum() - npos * (npos + 1) / 2) / (npos * nneg))


def load(name: str):
    from dpcli.algorithms import inputs
    from dpcli.algorithms import validate as v
    from dpcli.data import DataSource
    from dpcli.mechanisms import make_rng
    from dpcli.spec import load_spec

    spec = load_spec(ROOT / "benchmarks" / "suite" / f"{name}.yaml")
    cols = [c for c in spec.schema.names if inputs.usable(spec.schema.column(c))]
    positive = spec.schema.label.positive_index
    src = DataSource(ROOT / "benchmarks" / ".cache" / "suite" / "data" / name / "train.parquet",
                     spec.schema)
    x, y = v.design_rows(src.batches(cols, rng=make_rng(0)), spec.schema, cols,
                         1 if positive is None else positive)
    return x, y


def weights(datasets: list[str]) -> None:
    from dpcli.algorithms import validate as v
    from dpcli.mechanisms import make_rng, objective_perturbation

    print("| dataset | majority (holdout) | e = 0: acc / bal. acc | e = ½ | e = 1 |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name in datasets:
        x, y = load(name)
        hold = v.validation_rows(len(y), 0.3, 7)
        f, h = np.flatnonzero(~hold), np.flatnonzero(hold)
        xf, yf, xh, yh = x[f], y[f], x[h], y[h]
        n, d = xf.shape
        res: dict[float, list] = {}
        for rep in range(3):
            fit = objective_perturbation(xf, yf, v.auto_lambda(n, 0.75, d), 0.75,
                                         make_rng(rep))
            zf, zh = np.asarray(xf @ fit.weights), np.asarray(xh @ fit.weights)
            cands = np.linspace(zf.min(), zf.max(), v.THRESHOLD_CANDIDATES)
            p = float(np.mean(yf > 0))
            q = 1 - p
            for e in (0.0, 0.5, 1.0):
                wts = (min(1.0, (q / p) ** e), min(1.0, (p / q) ** e))
                t = cands[np.argmax(v.threshold_utility(zf, yf, cands, wts))]
                pred = zh > t
                bal = (np.mean(pred[yh > 0]) + np.mean(~pred[yh < 0])) / 2
                res.setdefault(e, []).append((np.mean(pred == (yh > 0)), bal))
        majority = max(np.mean(yh > 0), np.mean(yh < 0))
        cells = [" / ".join(f"{m:.3f}" for m in np.mean(res[e], axis=0)) for e in (0, .5, 1)]
        print(f"| {name} | {majority:.3f} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    from dpcli.algorithms import validate as v
    from dpcli.mechanisms import make_rng, objective_perturbation

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="adult,default,breast_cancer,fair,anes96")
    parser.add_argument("--epsilons", default="0.5,1,2")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" /
                        "validate_lambda.json")
    parser.add_argument("--weights", action="store_true", help="the class weights instead")
    args = parser.parse_args()
    if args.weights:
        weights(args.datasets.split(","))
        return
    rows = []
    for name in args.datasets.split(","):
        x, y = load(name)
        hold = v.validation_rows(len(y), 0.3, 7)
        fit_i, hold_i = np.flatnonzero(~hold), np.flatnonzero(hold)
        xf, yf, xh, yh = x[fit_i], y[fit_i], x[hold_i], y[hold_i]
        n, d = xf.shape
        inner = v.validation_rows(n, 0.1, 0)
        t_i, v_i = np.flatnonzero(~inner), np.flatnonzero(inner)
        for eps in map(float, args.epsilons.split(",")):
            lam0 = v.auto_lambda(n, eps, d)
            for rep in range(args.reps):
                out = {"dataset": name, "n": n, "d": d, "epsilon": eps, "rep": rep,
                       "lambda0": lam0}
                for j, k in enumerate(MULTIPLES):
                    fit = objective_perturbation(xf, yf, k * lam0, eps,
                                                 make_rng(1000 * rep + j))
                    out[f"auc_{k:g}"] = auc(np.asarray(xh @ fit.weights), yh)
                config = v.ValidateConfig(lam="search")
                o = v.tune(config, (xf[t_i], yf[t_i]), (xf[v_i], yf[v_i]), eps,
                           make_rng(1000 * rep + 99))
                out["auc_search"] = auc(np.asarray(xh @ o.fit.weights), yh)
                out["search_lambda"] = o.fit.lam
                rows.append(out)
                print(json.dumps(out), flush=True)
    args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
