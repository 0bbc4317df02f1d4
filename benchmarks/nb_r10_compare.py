"""Round 10's naive-Bayes suite cells next to round 9's and diffprivlib's (nb_r10.md).

Reads the suite's cell cache (this checkout's ``benchmarks/.cache/suite/cells``, written by
``suite.py --datasets breast_cancer,default,digits --learners nb-global,nb-smooth,fs-nb
...``) and ``results/nb_r9_suite.json`` (round 9's run of the same cells). Per dataset ×
learner × ε: mean AUC, balanced accuracy and degenerate runs of each, and diffprivlib's
GaussianNB (``dp-gnb``, deterministic in its seed) on this run's repetitions. Unpaired: a
dpcli run's noise depends on its ledger's random key as well as on ``--seed``, so a
repetition of r9 and one of r10 are independent draws.

    cd benchmarks && python nb_r10_compare.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
CELLS = HERE / ".cache" / "suite" / "cells"
DATASETS = ("breast_cancer", "default", "digits")
LEARNERS = ("nb-global", "nb-smooth", "fs-nb")
EPSILONS = (0.5, 1.0, 2.0)


def summary(cells: list[dict]) -> str:
    if not cells:
        return "– | – | –"
    auc = np.mean([c["auc"] for c in cells])
    bal = np.mean([c["balanced_accuracy"] for c in cells])
    deg = sum(bool(c["degenerate"]) for c in cells)
    return f"{auc:.3f} | {bal:.3f} | {deg}/{len(cells)}"


def main() -> None:
    old: dict[tuple, list[dict]] = {}
    for c in json.loads((HERE / "results" / "nb_r9_suite.json").read_text())["cells"]:
        if c.get("status") == "ok":
            old.setdefault((c["dataset"], c["learner"], c["epsilon"]), []).append(c)
    new: dict[tuple, dict] = {}
    for path in CELLS.glob("*/*/e*_r*.json"):
        c = json.loads(path.read_text())
        if c.get("status") == "ok":
            new[(c["dataset"], c["learner"], c["epsilon"], c["rep"])] = c
    print("| dataset | learner | ε | r9 AUC | r9 bal. acc. | r9 degenerate | r10 AUC | "
          "r10 bal. acc. | r10 degenerate | dp-gnb AUC (r10's reps) | r10 below dp-gnb |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for d in DATASETS:
        for lr in LEARNERS:
            for e in EPSILONS:
                runs = [c for (dd, ll, ee, _), c in sorted(new.items())
                        if (dd, ll, ee) == (d, lr, e)]
                refs = [new.get((d, "dp-gnb", e, c["rep"])) for c in runs]
                ref = [r["auc"] for r in refs if r is not None]
                dp = float(np.mean(ref)) if ref else float("nan")
                auc = float(np.mean([c["auc"] for c in runs])) if runs else float("nan")
                below = "**yes**" if runs and ref and auc < dp else ""
                print(f"| {d} | {lr} | {e:g} | {summary(old.get((d, lr, e), []))} | "
                      f"{summary(runs)} | {dp:.3f} | {below} |")


if __name__ == "__main__":
    main()
