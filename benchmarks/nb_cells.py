"""Naive-Bayes cells against diffprivlib's GaussianNB on the tuning splits (round 9).

The library path of ``dpcli train-nb`` (as benchmarks/learners_nb.py: the plan with the
public n, ``nb.fit`` and ``nb.fit_threshold``) for ``--method global`` and ``smooth``,
next to diffprivlib's GaussianNB (the suite's ``dp-gnb`` reference: numeric columns onto
[0, 1] by the declared bounds, categorical one-hot) at the same ε on the same rows.
The splits are benchmarks/learners_split.py's (a stratified 70/30 split of each suite
dataset's train file, seed 12345): tune on fit / val, never on the suite's test files.

    cd benchmarks && PYTHONPATH=.. python nb_cells.py --datasets digits,penguins \\
        --eps 0.5,1,2 --reps 10 --tune /tmp/nbcells/tune
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from _common import auc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def dpcli_runs(folder: Path, eps: float, method: str, reps: int,
               threshold: str = "balanced") -> np.ndarray:
    """(AUC, balanced accuracy, one-class) per seed of train-nb's library path."""
    from dpcli.algorithms import naive_bayes as nb
    from dpcli.budget import Budget
    from dpcli.data import DataSource
    from dpcli.spec import load_spec
    from dpcli.stats import LocalEngine

    spec = load_spec(str(folder / "spec.yaml"))
    cols = list(spec.schema.names)
    cfg = (nb.NBConfig(numeric="gaussian", threshold=threshold) if method == "gaussian"
           else nb.NBConfig(method=method, threshold=threshold))
    train = str(folder / "fit.parquet")
    n = pq.read_metadata(train).num_rows
    total = Budget(eps)
    plan = nb.plan(spec.schema, cols, total, cfg, n)
    alloc = nb.allocation(spec.schema, cols, total, cfg, n)
    src = DataSource(train, spec.schema)
    stats = LocalEngine().compute(src, nb.request(spec.schema, cols, cfg, p=plan,
                                                  bins=alloc.bins or None),
                                  rng=np.random.default_rng(0))
    test = list(DataSource(str(folder / "val.parquet"), spec.schema).batches(
        cols, rng=np.random.default_rng(0)))
    train_b = list(src.batches(cols, rng=np.random.default_rng(0)))
    y = np.concatenate([b.label for b in test]).astype(int)
    rows = []
    for seed in range(reps):
        rng = np.random.default_rng(1000 + seed)
        m = nb.fit(stats, spec.schema, cols, plan, cfg, rng)
        if nb.has_step(plan, nb.THRESHOLD):
            nb.fit_threshold(m, plan, train_b, rng)
        pred = np.concatenate([m.classify(b)[1] for b in test])
        jll = np.vstack([m.joint_log_likelihood(b) for b in test])
        score = jll[:, 1] - jll[:, 0]        # log-odds: ranks even where P underflows
        rows.append((auc(score, y == 1),
                     0.5 * ((pred[y == 1] == 1).mean() + (pred[y == 0] == 0).mean()),
                     float(min((pred == 1).mean(), (pred == 0).mean()) < 1e-3),
                     float((pred == y).mean())))
    return np.array(rows)


def dp_gnb_runs(name: str, folder: Path, eps: float, reps: int) -> np.ndarray:
    import suite

    fit, val = pd.read_parquet(folder / "fit.parquet"), pd.read_parquet(folder / "val.parquet")
    x_tr, _ = suite.encode(name, fit)
    x_te, _ = suite.encode(name, val)
    y_tr, y = fit["label"].to_numpy(int), val["label"].to_numpy(int)
    rows = []
    for seed in range(reps):
        score, pred = suite.reference("dp-gnb", x_tr, y_tr, x_te, eps, seed)
        pred = pred.astype(int)
        rows.append((auc(score, y == 1),
                     0.5 * ((pred[y == 1] == 1).mean() + (pred[y == 0] == 0).mean()),
                     float(min((pred == 1).mean(), (pred == 0).mean()) < 1e-3)))
    return np.array(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="digits,breast_cancer,penguins,anes96,default,oj")
    ap.add_argument("--eps", default="0.5,1,2")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--methods", default="global,smooth,dp-gnb",
                    help="global, smooth, gaussian (global, numeric: gaussian), dp-gnb")
    ap.add_argument("--tune", type=Path, default=Path("/tmp/nbcells/tune"))
    ap.add_argument("--no-class-bins", action="store_true",
                    help="round 9's histograms: every class over the table's B (no coarser "
                         "bins for a class below n/K; nb_allocation.class_bins)")
    ap.add_argument("--threshold", default="balanced", help="train-nb's threshold utility")
    ap.add_argument("--variance-limit", type=float, default=None,
                    help="exploration: nb_allocation.VARIANCE_NOISE_LIMIT")
    ap.add_argument("--gaussian-below", type=float, default=None,
                    help="exploration: nb_allocation.GAUSSIAN_BELOW")
    ap.add_argument("--all-numeric-below", type=float, default=None,
                    help="nb_allocation.GAUSSIAN_BELOW_ALL_NUMERIC (round 10; 2 = round 9's "
                         "rule)")
    ap.add_argument("--nested-bins", action="store_true",
                    help="exploration: a histogram's B rounded to a power of two (nested "
                         "grids: a larger B keeps every edge of a smaller one)")
    a = ap.parse_args()
    if a.nested_bins:
        import math

        from dpcli.algorithms import nb_allocation as na

        def nested(n: int, epsilon: float, k: int, columns: int) -> int:
            raw = max(na.raw_bins(n, epsilon, k, columns), 1.0)
            return int(min(na.MAX_BINS, max(na.MIN_BINS, 2 ** round(math.log2(raw)))))
        na.histogram_bins = nested
    if a.gaussian_below is not None:
        from dpcli.algorithms import nb_allocation
        nb_allocation.GAUSSIAN_BELOW = a.gaussian_below
    if a.all_numeric_below is not None:
        from dpcli.algorithms import nb_allocation
        nb_allocation.GAUSSIAN_BELOW_ALL_NUMERIC = a.all_numeric_below
    if a.no_class_bins:
        from dpcli.algorithms import nb_allocation
        nb_allocation.class_bins = lambda bins, raw, released, n: [bins] * len(released)
    if a.variance_limit is not None:
        from dpcli.algorithms import nb_allocation
        nb_allocation.VARIANCE_NOISE_LIMIT = a.variance_limit
    print("| dataset | ε | learner | AUC | balanced accuracy | one-class runs |")
    print("| --- | ---: | --- | ---: | ---: | ---: |")
    for name in a.datasets.split(","):
        for eps in map(float, a.eps.split(",")):
            for method in a.methods.split(","):
                folder = a.tune / name
                r = (dp_gnb_runs(name, folder, eps, a.reps) if method == "dp-gnb"
                     else dpcli_runs(folder, eps, method, a.reps, a.threshold))
                print(f"| {name} | {eps:g} | {method} | {r[:, 0].mean():.3f} ± "
                      f"{r[:, 0].std(ddof=1):.3f} | {r[:, 1].mean():.3f} | "
                      f"{int(r[:, 2].sum())}/{len(r)} |"
                      + (f" accuracy {r[:, 3].mean():.4f} ± {r[:, 3].std(ddof=1):.4f} |"
                         if r.shape[1] > 3 else ""), flush=True)


if __name__ == "__main__":
    main()
