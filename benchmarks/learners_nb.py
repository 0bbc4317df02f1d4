"""train-nb accuracy at small ε (issue 20 goal: ≥ 0.80 on Adult at ε = 0.1), as the CLI fits it.

The library path of ``dpcli train-nb``: the plan with the public n (the ε rule of
nb_allocation), ``nb.fit`` and, for a binary label, ``nb.fit_threshold`` on the
training rows. The one-pass statistics are computed once; each seed draws all the
noise anew (the same as independent runs). Reports, per threshold utility
(balanced, the default; accuracy; none = the argmax), mean ± sd over the seeds of
accuracy (the model's own decision), AUC and balanced accuracy.

Tuning protocol: ``--train`` / ``--test`` default to a 70/30 split of adult_train
(``--make-split``: rows permuted by ``default_rng(12345)``); every choice in
train-nb's rule was made on that split. adult_test is read once, for the report
(``--train ../shared/data/adult_train.parquet --test ../shared/data/adult_test.parquet``).

    PYTHONPATH=$PWD python benchmarks/learners_nb.py --eps 0.1 --reps 10 --threshold none
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from _common import auc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def make_split(data: Path, out: Path) -> None:
    t = pq.read_table(data / "adult_train.parquet")
    perm = np.random.default_rng(12345).permutation(t.num_rows)
    k = int(0.7 * t.num_rows)
    pq.write_table(t.take(np.sort(perm[:k])), out / "adult_fit.parquet")
    pq.write_table(t.take(np.sort(perm[k:])), out / "adult_val.parquet")


def main() -> None:
    from dpcli.algorithms import naive_bayes as nb
    from dpcli.budget import Budget
    from dpcli.data import DataSource
    from dpcli.spec import load_spec
    from dpcli.stats import LocalEngine

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", default="/tmp/learners/adult_fit.parquet")
    ap.add_argument("--test", default="/tmp/learners/adult_val.parquet")
    ap.add_argument("--make-split", type=Path, help="write the tuning split from this data dir")
    ap.add_argument("--spec", default=str(ROOT / "configs" / "adult.yaml"))
    ap.add_argument("--eps", type=float, default=0.1)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--threshold", default="balanced")
    ap.add_argument("--numeric", default=None, help="auto, histogram or gaussian")
    ap.add_argument("--bins", type=int, default=None)
    ap.add_argument("--columns", default=None)
    ap.add_argument("--max-share", default=None, help="exploration: the threshold's cap")
    a = ap.parse_args()
    if a.max_share:
        from fractions import Fraction

        from dpcli.algorithms import nb_allocation
        nb_allocation.THRESHOLD_MAX_SHARE = Fraction(a.max_share)
    if a.make_split:
        make_split(a.make_split, Path(a.train).parent)
    spec = load_spec(a.spec)
    cols = a.columns.split(",") if a.columns else list(spec.schema.names)
    extra = {}
    if "numeric" in inspect.signature(nb.NBConfig).parameters:   # main before this change
        extra = {k: v for k, v in (("numeric", a.numeric), ("bins", a.bins)) if v is not None}
    cfg = nb.NBConfig(threshold=a.threshold, **extra)
    n = pq.read_metadata(a.train).num_rows
    total = Budget(a.eps)
    plan = nb.plan(spec.schema, cols, total, cfg, n)
    alloc = nb.allocation(spec.schema, cols, total, cfg, n)
    kw = {"bins": alloc.bins} if getattr(alloc, "bins", None) else {}
    src = DataSource(a.train, spec.schema)
    stats = LocalEngine().compute(src, nb.request(spec.schema, cols, cfg, p=plan, **kw),
                                  rng=np.random.default_rng(0))
    test = list(DataSource(a.test, spec.schema).batches(cols, rng=np.random.default_rng(0)))
    train_b = list(src.batches(cols, rng=np.random.default_rng(0)))
    y = np.concatenate([b.label for b in test]).astype(int)
    rows = []
    for seed in range(a.reps):
        rng = np.random.default_rng(seed)
        m = nb.fit(stats, spec.schema, cols, plan, cfg, rng)
        if nb.has_step(plan, nb.THRESHOLD):
            nb.fit_threshold(m, plan, train_b, rng)
        pred = np.concatenate([m.classify(b)[1] for b in test])
        proba = np.vstack([m.predict_proba(b) for b in test])
        rows.append(((pred == y).mean(), auc(proba[:, 1], y == 1),
                     0.5 * ((pred[y == 1] == 1).mean() + (pred[y == 0] == 0).mean()),
                     float(min((pred == 1).mean(), (pred == 0).mean()) < 1e-3)))
    r = np.array(rows)
    print(f"eps={a.eps:g} n={n:,} threshold={a.threshold} numeric={extra.get('numeric', '-')} "
          f"bins={getattr(alloc, 'bins', {}) and sorted(set(alloc.bins.values()))} "
          f"seeds={a.reps}: accuracy {r[:, 0].mean():.4f} ± {r[:, 0].std(ddof=1):.4f} "
          f"(min {r[:, 0].min():.4f}) AUC {r[:, 1].mean():.4f} ± {r[:, 1].std(ddof=1):.4f} "
          f"balanced accuracy {r[:, 2].mean():.4f}; one-class runs {int(r[:, 3].sum())}")


if __name__ == "__main__":
    main()
