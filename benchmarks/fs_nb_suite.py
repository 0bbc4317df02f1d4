"""select-features + train-nb against train-nb alone, at the same total ε (issue 20, point 5).

Reads the cells of one or more ``benchmarks/suite.py`` runs (``suite.json``, learners
``nb-global`` and ``fs-nb``) and writes ``benchmarks/results/fs_nb_suite.md``: per dataset and
ε, mean ± sample std over the seeds of accuracy, AUC, balanced accuracy and share predicted
positive, the fs-nb − nb-global accuracy difference with its standard error (the two learners'
runs are independent: different seeds), how many fs-nb runs fell back to train-nb on every
column because the noise check refused the selection, and how many runs were degenerate.

Next to each dataset: what the split rule and the noise check decide, recomputed here from
public facts only (n of the training file, the spec's select-features section, ε), exactly as
``select-features --total-epsilon ε`` does before its charge.

    python benchmarks/suite.py --datasets tweets,digits,breast_cancer,oj \\
        --learners nb-global,fs-nb --epsilons 1 --seeds 5 --no-noise-free --out /tmp/s
    python benchmarks/fs_nb_suite.py /tmp/s/suite.json [more suite.json ...]

Nothing is chosen on the test split: the suite's specs fix every parameter in advance
(tweets: perturb, top k = 200 noisy counts, r = 10; the others chi2 + topk with k = ⌈columns/2⌉).
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def decision(name: str, n: int, eps: float) -> str:
    """The split rule and noise check for one dataset at total ε (public facts only)."""
    from dpcli.algorithms import feature_selection as fs
    from dpcli.spec import load_spec

    spec = load_spec(HERE / "suite" / f"{name}.yaml")
    section = spec.sections["select-features"]
    config = fs.FSConfig(**section.config_values())
    cols = fs.scored_columns(spec.schema, section.columns, config.score)
    schema = fs.selection_schema(spec.schema, cols, config.r)
    needed = fs.noise_check(schema, cols, config, n, eps).needed_epsilon
    split = fs.split_rule(eps, needed)
    check = fs.noise_check(schema, cols, config, n, split.selection)
    verdict = ("passes" if check.passes
               else f"refused (needs ε ≥ {check.needed_epsilon:.3g} for selection alone)")
    return (f"{config.score} + {config.method}, m = {len(fs.candidates(schema, cols)):,}; "
            f"selection ε {split.selection:g} / training {split.training:g} "
            f"({split.bound}); resolution {check.resolution:,.4g} vs gap {check.gap:,.4g}: "
            f"{verdict}")


def stat(values: list[float]) -> str:
    a = np.array(values, dtype=float)
    return f"{a.mean():.3f} ± {a.std(ddof=1):.3f}" if len(a) > 1 else f"{a.mean():.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suites", nargs="*", type=Path)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "fs_nb_suite.md")
    args = ap.parse_args()
    if not args.suites:   # run_all.py: nothing to rebuild from without the suite's runs
        print("fs_nb_suite.py: pass the suite.json files of benchmarks/suite.py runs "
              "(see its docstring); nothing written")
        return
    cells: dict[tuple, list[dict]] = collections.defaultdict(list)
    infos: dict[str, dict] = {}
    argv = []
    env = None
    for path in args.suites:
        d = json.loads(path.read_text())
        argv.append(" ".join(d["argv"]) if isinstance(d["argv"], list) else str(d["argv"]))
        env = env or d["environment"]
        infos.update({i["name"]: i for i in d["datasets"]} if isinstance(d["datasets"], list)
                     else d["datasets"])
        for c in d["cells"]:
            if c.get("kind") == "dpcli" and c["learner"] in ("nb-global", "fs-nb"):
                key = (c["dataset"], c["epsilon"], c["learner"], c["rep"])
                cells[key[:3]] = [x for x in cells[key[:3]] if x["rep"] != c["rep"]] + [c]
    lines = ["# select-features + train-nb vs train-nb alone, same total ε (issue 20, point 5)",
             "", f"Suite runs: {'; '.join(f'`{a}`' for a in argv)}. Environment: "
             f"{json.dumps(env, ensure_ascii=False)[:600]}.", "",
             "fs-nb = `select-features --total-epsilon ε` (the split rule's share), then "
             "`train-nb --features --epsilon <training share>` (tweets: `--r 10`, the "
             "selection's cap); when the noise check refuses the selection, fs-nb is train-nb "
             "on every column with the whole ε (\"fallback\"). nb-global = `train-nb` on every "
             "column with ε, the spec's defaults (tweets: the declared cap r = 24). Cells: mean "
             "± sample std over the seeds (each learner its own seeds). Δ acc: fs-nb − nb-global "
             "with its standard error.", ""]
    for name in sorted({k[0] for k in cells}, key=lambda x: (x != "tweets", x)):
        info = infos.get(name, {})
        prevalence = float(info.get("prevalence_test", math.nan))
        lines += [f"## {name} (train {info.get('n_train', 0):,}, test "
                  f"{info.get('n_test', 0):,}; majority-class accuracy on test "
                  f"{max(prevalence, 1 - prevalence):.3f})", ""]
        lines += ["| ε | learner | runs | accuracy | AUC | balanced acc. | predicted positive "
                  "| fallback | degenerate (warned) | Δ acc (± s.e.) |",
                  "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        notes = []
        for eps in sorted({k[1] for k in cells if k[0] == name}):
            base = [c for c in cells.get((name, eps, "nb-global"), []) if c["status"] == "ok"]
            for learner in ("nb-global", "fs-nb"):
                runs = [c for c in cells.get((name, eps, learner), []) if c["status"] == "ok"]
                if not runs:
                    continue
                acc = [c["accuracy"] for c in runs]
                delta = ""
                if learner == "fs-nb" and len(base) > 1 and len(runs) > 1:
                    b = [c["accuracy"] for c in base]
                    d = np.mean(acc) - np.mean(b)
                    se = math.sqrt(np.var(acc, ddof=1) / len(acc) + np.var(b, ddof=1) / len(b))
                    delta = f"{100 * d:+.1f} pts (± {100 * se:.1f})"
                degenerate = [c for c in runs if c.get("degenerate")]
                lines.append(
                    f"| {eps:g} | {learner} | {len(runs)} | {stat(acc)} | "
                    f"{stat([c['auc'] for c in runs])} | "
                    f"{stat([c['balanced_accuracy'] for c in runs])} | "
                    f"{np.mean([c['positive_rate'] for c in runs]):.3f} | "
                    f"{sum(bool(c.get('fs_fallback')) for c in runs) if learner == 'fs-nb' else ''}"
                    f" | {len(degenerate)} ({sum(bool(c.get('warned')) for c in degenerate)}) "
                    f"| {delta} |")
            if info.get("n_train"):
                notes.append(f"* ε = {eps:g}: {decision(name, int(info['n_train']), eps)}")
        lines += ["", "Split rule and noise check (public facts, before any charge):", "",
                  *notes, ""]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
