"""The class cut's accuracy over many calibration-noise draws (brc_r10.md, "The class cut
after round 10"): for each run saved by brc_r10_cut_margins.py, rebuild the margin histogram
at B bins, draw its discrete Laplace noise 30 times (ε_cal = ε/10 at ε = 1), take the
released cut (brc.decision_threshold) and average accuracy, balanced accuracy and the share
predicted positive on the validation rows. Averaging over the noise separates the cut rule
from one draw's luck.

    cd benchmarks && PYTHONPATH=.. python brc_r10_cut_sim.py credit 16,32
"""

from __future__ import annotations

import glob
import os
import sys

import numpy as np

from dpcli.algorithms import brc
from dpcli.mechanisms import make_rng

OUT = os.environ.get("CUT_DIR", "/tmp/brc_r10_cut")
EPS_CAL = 0.1
DRAWS = 30


def main() -> None:
    name, bins_list = sys.argv[1], [int(b) for b in sys.argv[2].split(",")]
    res: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
    for path in sorted(glob.glob(f"{OUT}/m_{name}_*.npz")):
        z = np.load(path)
        tag = path.split("_")[-1][:3]
        ft, fv, yt, yv = z["ft"], z["fv"], z["yt"], z["yv"]
        for bins in bins_list:
            edges, counts = brc.margin_histogram(ft, np.where(yt, 1, -1), float(z["span"]), bins)
            for r in range(DRAWS):
                noisy = brc._noisy_counts(counts, EPS_CAL, make_rng(r))
                p = fv > brc.decision_threshold(edges, noisy)
                res.setdefault((tag, bins), []).append(
                    (float((p == yv).mean()), float((p[yv].mean() + (~p[~yv]).mean()) / 2),
                     float(p.mean())))
    for key in sorted(res):
        a = np.array(res[key])
        acc, bacc, ppos = a.mean(0)
        print(name, key, f"acc {acc:.4f} bacc {bacc:.4f} ppos {ppos:.3f} (n={len(a)})")


if __name__ == "__main__":
    main()
