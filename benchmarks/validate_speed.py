"""Memory and time of ``dpcli validate`` on 200,000 rows × 40 mixed columns (issue 20).

Synthetic data (the shape, not the values, is what is measured): 20 numeric columns in
[0, 1] and 20 categorical columns of ``--levels`` declared levels each (+ ``other``:
d = 241 after one-hot for 10 levels, 1,041 for 50, intercept included), label from a fixed
logistic model (seed 0). Written once per level count to ``benchmarks/.cache/validate_speed/``.
Each command has a timeout of 900 s (then reported as not ok).

Each command runs in its own process under ``/usr/bin/time -v``: wall time, CPU time (user +
system: less sensitive to other jobs on a shared machine) and peak RSS.

* ``dpcli validate`` at ε = 1 with the defaults (λ0 and the private class threshold), from
  the code tree given by ``--code`` (default: this checkout), through ``python -m dpcli``;
* ``--lambda search`` (ten fits of the paper's grid plus the final one), the worst case;
* scikit-learn ``LogisticRegression`` (lbfgs, C = 1, not private) on the same unit-ball
  design as a CSR matrix, for scale.

    python benchmarks/validate_speed.py [--code /path/to/other/checkout] [--skip-search]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "benchmarks" / ".cache" / "validate_speed"
N, NUMERIC, CATEGORICAL = 200_000, 20, 20
TIMEOUT = 900   # seconds per command


def make_data(levels: int) -> tuple[Path, Path]:
    import pandas as pd

    CACHE.mkdir(parents=True, exist_ok=True)
    data, schema = CACHE / f"data{levels}.parquet", CACHE / f"schema{levels}.yaml"
    if data.exists() and schema.exists():
        return data, schema
    rng = np.random.default_rng(0)
    frame = {f"x{j}": rng.random(N) for j in range(NUMERIC)}
    for j in range(CATEGORICAL):
        frame[f"c{j}"] = np.char.add("v", rng.integers(0, levels, N).astype(str))
    z = sum((frame[f"x{j}"] - 0.5) * (1 if j % 2 else -1) for j in range(NUMERIC))
    z = z + sum(0.3 * (frame[f"c{j}"] == "v0") for j in range(CATEGORICAL)) - 0.5
    frame["label"] = (rng.random(N) < 1 / (1 + np.exp(-z))).astype(int)
    pd.DataFrame(frame).to_parquet(data, index=False)
    lines = ["missing: error", "columns:"]
    lines += [f"  x{j}: {{type: numeric, bounds: [0, 1]}}" for j in range(NUMERIC)]
    names = ", ".join(f"v{k}" for k in range(levels))
    lines += [f"  c{j}: {{type: categorical, categories: [{names}]}}"
              for j in range(CATEGORICAL)]
    schema.write_text("\n".join(lines) + "\n")
    return data, schema


def spec(folder: Path, schema: Path) -> Path:
    path = folder / "spec.yaml"
    path.write_text(f"dataset: speed\nbudget: {{epsilon: 1000}}\nledger: {folder}/ledger.jsonl\n"
                    f"label: {{column: label, classes: [0, 1], positive: 1}}\n"
                    f"schema: {schema}\nvalidate: {{epsilon: 1.0}}\n")
    return path


def timed(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> dict:
    import os

    full = {**os.environ, **(env or {})}
    # cwd matters: ``python -m`` puts the working folder ahead of PYTHONPATH, so run from a
    # folder without a dpcli package or --code would measure this checkout instead
    r = subprocess.run(["/usr/bin/time", "-v", "timeout", str(TIMEOUT), *cmd],
                       capture_output=True, text=True, env=full, cwd=cwd)
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", r.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    cpu = sum(float(v) for v in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)",
                                           r.stderr))
    h, m, s = wall.groups() if wall else (None, "0", "nan")
    seconds = int(h or 0) * 3600 + int(m) * 60 + float(s)
    return {"ok": r.returncode == 0, "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1),
            "peak_mb": round(int(rss.group(1)) / 1024) if rss else None,
            "tail": r.stderr.strip().splitlines()[-25:-23] if r.returncode else []}


SKLEARN = """
import sys, numpy as np, pandas as pd
from sklearn.linear_model import LogisticRegression
sys.path.insert(0, sys.argv[2])
from dpcli.algorithms.inputs import Inputs
from dpcli.algorithms.validate import labels
from dpcli.spec import load_spec
s = load_spec(sys.argv[1]); frame = pd.read_parquet(sys.argv[3])
cols = [c for c in s.schema.names]
enc = {c: frame[c].to_numpy() if c.startswith("x") else
       np.array([s.schema.column(c).levels.index(v) for v in frame[c]], dtype=np.int32)
       for c in cols}
x = Inputs.from_columns(s.schema, cols, enc, len(frame)).unit_ball_sparse()
LogisticRegression(C=1.0, max_iter=1000).fit(x, frame["label"].to_numpy())
print(x.shape, x.nnz)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout whose dpcli runs")
    parser.add_argument("--skip-search", action="store_true")
    parser.add_argument("--levels", type=int, default=10,
                        help="declared levels per categorical column (d = 21 + 20·(levels + 1))")
    args = parser.parse_args()
    data, schema = make_data(args.levels)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        s = spec(folder, schema)
        env = {"PYTHONPATH": str(args.code)}
        py = sys.executable
        subprocess.run([py, "-m", "dpcli", "ledger", "init", "--spec", str(s)], check=True,
                       capture_output=True, env={**__import__("os").environ, **env}, cwd=folder)
        base = [py, "-m", "dpcli", "validate", str(data), "--spec", str(s), "--seed", "1"]
        results["dpcli validate (defaults)"] = timed([*base, "--out", str(folder / "a.json")],
                                                     env, folder)
        if not args.skip_search:
            results["dpcli validate --lambda search"] = timed(
                [*base, "--lambda", "search", "--out", str(folder / "b.json")], env, folder)
        results["sklearn LogisticRegression (CSR, lbfgs)"] = timed(
            [py, "-c", SKLEARN, str(s), str(ROOT), str(data)], cwd=folder)
    print(json.dumps({"code": str(args.code), "rows": N, "columns": NUMERIC + CATEGORICAL,
                      "levels": args.levels, "width": 1 + NUMERIC + CATEGORICAL * (args.levels + 1),
                      "results": results}, indent=1))


if __name__ == "__main__":
    main()
