"""The suite's brc cells, round 7 (benchmarks/results/suite_r7.json) against round 8's run of
the same cells (benchmarks/results/brc_r8_suite.json), beside diffprivlib's RandomForest (the
suite's nearest model for brc) at the same ε. Markdown on stdout (benchmarks/results/brc_r8.md).

The two runs share the suite's test files, seeds (suite.cell_seed) and references' seeds;
round 8 may cover fewer repetitions per cell (the table says how many).

    python benchmarks/brc_r8_compare.py [old.json] [new.json ...]
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
LEARNERS = ("brc-private", "brc-partial")
EPS = (0.5, 1.0, 2.0)


def cells(paths: list[Path]) -> dict:
    out: dict = defaultdict(list)
    for p in paths:
        for c in json.loads(p.read_text())["cells"]:
            if c.get("status") == "ok" and c.get("epsilon") in EPS:
                out[(c["dataset"], c["learner"], c["epsilon"])].append(c)
    return out


def mean(rows: list[dict], key: str) -> float:
    return float(np.mean([r[key] for r in rows])) if rows else float("nan")


def paired(old: list[dict], new: list[dict]) -> str:
    """Mean AUC difference over the repetitions both runs hold (same seed, same test file)."""
    o = {r["rep"]: r["auc"] for r in old}
    diffs = [r["auc"] - o[r["rep"]] for r in new if r["rep"] in o]
    return f"{np.mean(diffs):+.3f} ({len(diffs)})" if diffs else "–"


def main() -> None:
    old_path = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "results" / "suite_r7.json"
    new_paths = ([Path(p) for p in sys.argv[2:]] if len(sys.argv) > 2
                 else [HERE / "results" / "brc_r8_suite.json"])
    old, new = cells([old_path]), cells(new_paths)
    print("| dataset | learner | ε | diffprivlib RF AUC | r7 AUC (runs) | r8 AUC (runs) | "
          "r7 bal. acc. | r8 bal. acc. | r7 degenerate (warned) | r8 degenerate (warned) | "
          "r8 ≥ RF | r8 − r7 AUC, same runs |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    wins = losses = 0
    datasets = sorted({k[0] for k in new}, key=lambda d: [k[0] for k in new].index(d))
    for d in datasets:
        for lr in LEARNERS:
            for e in EPS:
                n_rows = new.get((d, lr, e), [])
                if not n_rows:
                    continue
                reps = {r["rep"] for r in n_rows}
                rf = [r for r in new.get((d, "dp-forest", e), []) + old.get((d, "dp-forest", e), [])
                      if r["rep"] in reps]
                seen, rf_rows = set(), []
                for r in rf:   # one reference per repetition (both files may hold it)
                    if r["rep"] not in seen:
                        seen.add(r["rep"])
                        rf_rows.append(r)
                o_rows = old.get((d, lr, e), [])
                ref = mean(rf_rows, "auc")
                ok = mean(n_rows, "auc") >= ref
                wins, losses = wins + ok, losses + (not ok)

                def deg(rows: list[dict]) -> str:
                    return (f"{sum(r['degenerate'] for r in rows)} "
                            f"({sum(r['degenerate'] and r['warned'] for r in rows)})")

                print(f"| {d} | {lr} | {e:g} | {ref:.3f} | {mean(o_rows, 'auc'):.3f} "
                      f"({len(o_rows)}) | {mean(n_rows, 'auc'):.3f} ({len(n_rows)}) | "
                      f"{mean(o_rows, 'balanced_accuracy'):.3f} | "
                      f"{mean(n_rows, 'balanced_accuracy'):.3f} | {deg(o_rows)} | "
                      f"{deg(n_rows)} | {'yes' if ok else '**no**'} | {paired(o_rows, n_rows)} |")
    print(f"\nr8 cells at or above diffprivlib's RandomForest: {wins} of {wins + losses}.")


if __name__ == "__main__":
    main()
