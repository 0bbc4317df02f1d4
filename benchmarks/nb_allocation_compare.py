"""Before/after table for train-nb (issue 20): two suite.json files, nb-global and nb-smooth.

    python benchmarks/nb_allocation_compare.py BEFORE/suite.json AFTER/suite.json

Prints a Markdown table per learner: per dataset and ε, mean AUC / balanced accuracy /
accuracy over the runs found (their count shown), before → after, and the degenerate runs
(k/m, and how many said nothing on stderr). Reads only the suite's cached cells.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict

import numpy as np


def load(path: str) -> dict:
    with open(path) as f:
        cells = json.load(f)["cells"]
    out: dict = defaultdict(list)
    for c in cells:
        if c.get("kind") == "dpcli" and c.get("status") == "ok" and c["epsilon"] < 100:
            out[(c["learner"], c["dataset"], c["epsilon"])].append(c)
    return out


def cell(runs: list) -> str:
    if not runs:
        return "–"
    def m(key: str) -> float:
        return float(np.nanmean([r[key] for r in runs]))
    deg = sum(r["degenerate"] for r in runs)
    silent = sum(r["degenerate"] and not r.get("warnings") for r in runs)
    flag = f" D{deg}/{len(runs)}" + (f" (silent {silent})" if silent else "") if deg else ""
    return (f"{m('auc'):.3f} / {m('balanced_accuracy'):.3f} / {m('accuracy'):.3f} "
            f"[{len(runs)}]{flag}")


def main(before_path: str, after_path: str) -> None:
    before, after = load(before_path), load(after_path)
    keys = sorted(set(before) | set(after))
    for learner in sorted({k[0] for k in keys}):
        print(f"\n### {learner}\n")
        print("| dataset | ε | before: AUC / bal. acc / acc [runs] | after: AUC / bal. acc / acc "
              "[runs] | Δ AUC | Δ bal. acc |")
        print("| --- | ---: | --- | --- | ---: | ---: |")
        for _, dataset, eps in [k for k in keys if k[0] == learner]:
            b, a = before.get((learner, dataset, eps), []), after.get((learner, dataset, eps), [])
            if b and a:
                d_auc = np.nanmean([r["auc"] for r in a]) - np.nanmean([r["auc"] for r in b])
                d_bal = (np.nanmean([r["balanced_accuracy"] for r in a])
                         - np.nanmean([r["balanced_accuracy"] for r in b]))
                deltas = f"{d_auc:+.3f} | {d_bal:+.3f}"
            else:
                deltas = "– | –"
            print(f"| {dataset} | {eps:g} | {cell(b)} | {cell(a)} | {deltas} |")


if __name__ == "__main__":
    main(*sys.argv[1:3])
