"""Why train-brc's class cut lost accuracy after round 10's vote rule (brc_r10.md, "The class
cut after round 10"): on a tuning split (brc_tune.load; the test file is never read), at one
ε and seeds, fit Algorithm 2 as before the rule (``voted`` forced false: ``old``) and as now
(``new``), print the cut, the share predicted positive, accuracy / balanced accuracy on the
validation rows, and the same for the Youden cut on the exact training margins (diagnosis
only, not a release), and save both margins for brc_r10_cut_sim.py.

    cd benchmarks && TAGS=old,new PYTHONPATH=.. python brc_r10_cut_margins.py credit 1 1000,1001
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace

import brc_tune
import numpy as np
from _common import auc

from dpcli.algorithms import brc
from dpcli.mechanisms import make_rng

OUT = os.environ.get("CUT_DIR", "/tmp/brc_r10_cut")


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    name, eps = sys.argv[1], float(sys.argv[2])
    seeds = [int(s) for s in sys.argv[3].split(",")]
    tags = os.environ.get("TAGS", "old,new").split(",")
    d = brc_tune.load(name)
    public = tuple(d["public"])
    data = brc.training_set([d["fit"]], d["schema"], d["cols"], public, positive=1)
    val = brc.training_set([d["val"]], d["schema"], d["cols"], public, positive=1)
    yv, yt = val.y > 0, data.y > 0
    new = brc.auto_config(eps, data.n, partial=True)
    print(name, eps, "n", data.n, "positive share", yt.mean(), "voted", new.voted, flush=True)

    def measure(f: np.ndarray, cut: float) -> tuple[float, float, float]:
        p = f > cut
        return (float(np.mean(p == yv)), float((p[yv].mean() + (~p[~yv]).mean()) / 2),
                float(p.mean()))

    configs = {"old": replace(new, voted=False), "new": new}
    for seed in seeds:
        for tag in tags:
            rounds, cal, _ = brc.fit(data, configs[tag], eps, make_rng(seed))
            span = sum(abs(r.alpha) for r in rounds)
            ft, fv = brc.ensemble_margin(rounds, data), brc.ensemble_margin(rounds, val)
            acc, bacc, pp = measure(fv, cal.threshold)
            e = np.asarray(cal.edges)
            idx = np.clip(np.searchsorted(e, ft, side="right") - 1, 0, len(e) - 2)
            occupied = np.count_nonzero(np.bincount(idx, minlength=len(e) - 1) > data.n * 0.005)
            grid = np.unique(np.quantile(ft, np.linspace(0.01, 0.99, 400)))
            j = [(ft[yt] > c).mean() - (ft[~yt] > c).mean() for c in grid]
            best = float(grid[int(np.argmax(j))])
            acc2, bacc2, pp2 = measure(fv, best)
            print(f"{seed} {tag} T={len(rounds)} bins={len(e) - 1} span={span:.3f} "
                  f"F 1-99%=[{np.quantile(ft, .01):.3f},{np.quantile(ft, .99):.3f}] "
                  f"occupied={occupied} cut={cal.threshold:.3f} AUC={auc(fv, yv):.4f} "
                  f"acc={acc:.4f} bacc={bacc:.4f} ppos={pp:.3f} | exact cut={best:.3f} "
                  f"acc={acc2:.4f} bacc={bacc2:.4f} ppos={pp2:.3f}", flush=True)
            np.savez(f"{OUT}/m_{name}_{eps}_{seed}_{tag}.npz", ft=ft, fv=fv, yt=yt, yv=yv,
                     span=span)


if __name__ == "__main__":
    main()
