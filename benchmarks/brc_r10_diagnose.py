"""Why train-brc's partial variant lost to the all-private one on nycflights13 (round 10,
benchmarks/results/brc_r10.md).

On the tuning split of the suite's flights train file (brc_tune.load: stratified 70/30, seed
12345; the test file is never read), at one ε and seed: boosting the public stumps alone (no
ε: public columns, public label, public weights), then Algorithm 2 as before round 10 (the
stump competes in each round's selection, private rounds vote ±EDGE) and as now (the stump
joins every round for free, private rounds vote the released mean edge). For each: which
columns the rounds took, their total |α|, AUC of the public part, the private part and the
whole on the validation rows, and the chosen private classifiers' true mean balanced edge
(private, printed only for the diagnosis).

    cd benchmarks && PYTHONPATH=.. python brc_r10_diagnose.py 1 1000
"""

from __future__ import annotations

import collections
import sys
import time
from dataclasses import replace

import brc_tune
import numpy as np
from _common import auc

from dpcli.algorithms import brc
from dpcli.mechanisms import make_rng


def main() -> None:
    eps, seed = float(sys.argv[1]), int(sys.argv[2])
    d = brc_tune.load("flights")
    public = tuple(d["public"])
    data = brc.training_set([d["fit"]], d["schema"], d["cols"], public, positive=1)
    val = brc.training_set([d["val"]], d["schema"], d["cols"], public, positive=1)
    yv = val.y > 0
    # the public stumps alone: AdaBoost's loop with the stump's exact α = 1/2 − err
    t0 = time.time()
    log_w = np.zeros(data.n)
    lam = brc.class_weights(data.n, int((data.y > 0).sum()))[(data.y > 0).astype(int)]
    f = np.zeros(val.n)
    for t in range(200):
        stump, err = brc.fit_stump(data.public, data.y, np.exp(log_w - log_w.max()) * lam)
        assert stump is not None
        miss = stump.predict(data.public.inputs, data.public.raw) != data.y
        log_w += (0.5 - err) * miss
        f += (0.5 - err) * stump.predict(val.public.inputs, val.public.raw)
        if t + 1 in (10, 50, 200):
            print(f"public stumps alone, T = {t + 1}: AUC {auc(f, yv):.4f} "
                  f"({time.time() - t0:.0f} s)", flush=True)
    sizes = np.array([(data.y < 0).sum(), (data.y > 0).sum()], dtype=float)
    new = brc.auto_config(eps, data.n, partial=True)
    for name, config in (("before round 10", replace(new, voted=False, rounds=brc.select_rounds(
            eps, float(sizes.min()), new.c2))), ("round 10", new)):
        t0 = time.time()
        rounds, _, _ = brc.fit(data, config, eps, make_rng(seed))
        kinds = collections.Counter(r.stump.column if r.stump is not None else "private"
                                    for r in rounds)
        weight: dict[str, float] = collections.defaultdict(float)
        for r in rounds:
            weight[r.stump.column if r.stump is not None else "private"] += abs(r.alpha)
        f_pub = sum((r.alpha * r.vote(val) for r in rounds if r.stump is not None),
                    np.zeros(val.n))
        f_pri = sum((r.alpha * r.vote(val) for r in rounds if r.hyperplane is not None),
                    np.zeros(val.n))
        edges = [np.sign(r.alpha) * 0.25 * float(np.sum(
            (2 * (r.hyperplane.predict(data.private) == data.y) - 1)
            / sizes[(data.y > 0).astype(int)])) for r in rounds if r.hyperplane is not None]
        print(f"{name} (ε = {eps:g}, seed {seed}, T = {config.rounds}, K = "
              f"{config.candidates}): rounds {dict(kinds)}, Σ|α| "
              f"{ {k: round(v, 3) for k, v in weight.items()} }", flush=True)
        print(f"  AUC: whole {auc(f_pub + f_pri, yv):.4f}, public part "
              f"{auc(f_pub, yv):.4f}, private part {auc(f_pri, yv):.4f}; chosen private "
              f"classifiers' true mean balanced edge {np.mean(edges):.4f} "
              f"({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
