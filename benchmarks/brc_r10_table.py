"""Tables of round 10's train-brc comparisons (benchmarks/results/brc_r10.md).

Reads the JSON lines ``brc_tune.py --jsonl`` appends (one run each: dataset, ε, mode, seed,
the dpcli tree that ran it, AUC, balanced accuracy, accuracy, one-class flag) and prints one
Markdown row per (dataset, ε, mode, tree): mean ± sd over the seeds.

    python benchmarks/brc_r10_table.py /tmp/brcpart/*.jsonl
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np


def main() -> None:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for path in sys.argv[1:]:
        for line in Path(path).read_text().splitlines():
            r = json.loads(line)
            tree = "round 10" if "brcpart" in r["code"] else "main (before)"
            rows = groups[(r["dataset"], r["eps"], r["mode"], tree)]
            if all(x["seed"] != r["seed"] for x in rows):   # a seed run twice counts once
                rows.append(r)
    print("| dataset | ε | mode | code | runs | AUC | balanced acc. | acc. | one-class |")
    print("| --- | ---: | --- | --- | ---: | --- | --- | ---: | ---: |")
    for key in sorted(groups, key=lambda k: (k[0], k[1], k[2], k[3] != "main (before)")):
        rows = groups[key]
        auc = np.array([r["auc"] for r in rows])
        bacc = np.array([r["bacc"] for r in rows])
        acc = np.mean([r["acc"] for r in rows])
        print(f"| {key[0]} | {key[1]:g} | {key[2]} | {key[3]} | {len(rows)} | "
              f"{auc.mean():.3f} ± {auc.std(ddof=1) if len(rows) > 1 else 0:.3f} | "
              f"{bacc.mean():.3f} ± {bacc.std(ddof=1) if len(rows) > 1 else 0:.3f} | "
              f"{acc:.3f} | {sum(r['one'] for r in rows)} |")


if __name__ == "__main__":
    main()
