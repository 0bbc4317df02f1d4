"""publish-grid's verdict against its own degeneracy check (round 11).

For each dataset and size: subsample (public sampling, ``random_state=7``, before
dpcli), read the ε X the ``--dry-run`` verdict names ("usable from ε ≥ X", or the
spec's ε when usable: ``epsilon_for`` of the headline), then release at X, 1.5·X and
3·X with ``--runs`` seeds each (consecutive from ``--seed``, never one twice) and count
the releases whose ``grid.json`` reports ``degeneracy.degenerate``. Datasets: UCI Adult
(../shared/data/adult_train.parquet, configs/adult.yaml; 24 % positives) and ISLP's
Default (the bench venv's ``ISLP.load_data("Default")``, 3.3 % positives; schema below:
student, balance [0, 3000] and income [0, 80000] with taxonomies of 2/4/8/16 bins).
``--declare P`` writes ``forecast: {positive_share: P}`` into Default's spec.

    PYTHONPATH=/path/to/build python benchmarks/grid_verdict.py --work /tmp/gv --seed 1000
    PYTHONPATH=$PWD python benchmarks/grid_verdict.py --work /tmp/gv2 --seed 2000 --declare 0.033

Run it from the benchmark venv (ISLP, pandas). Prints one line per (dataset, n, multiple).
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

from _common import DEFAULT_DATA, data_missing

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"


def adult(work: Path, n: int, declare: str | None, data: Path) -> tuple[Path, Path]:
    import pandas as pd

    df = pd.read_parquet(data / "adult_train.parquet")
    df = df.sample(n=n, random_state=7).reset_index(drop=True)   # public sampling
    for f in ("adult.schema.yaml", "adult_taxonomy.json"):
        shutil.copy(CONFIGS / f, work / f)
    spec = (CONFIGS / "adult.yaml").read_text().replace("epsilon: 10.0", "epsilon: 100000.0")
    spec = spec.replace("../ledgers/uci-adult.jsonl", f"ledger-adult-{n}.jsonl")
    spec = spec.replace("dataset: uci-adult", f"dataset: adult-sub-{n}")
    (work / f"adult{n}.yaml").write_text(spec)
    df.to_parquet(work / f"adult{n}.parquet")
    return work / f"adult{n}.yaml", work / f"adult{n}.parquet"


def default(work: Path, n: int, declare: str | None, data: Path) -> tuple[Path, Path]:
    from ISLP import load_data

    df = load_data("Default")
    df = df.sample(n=n, random_state=7).reset_index(drop=True) if n < len(df) else df
    df = df.rename(columns={"default": "label"})
    df["student"] = df["student"].astype(str)
    df["label"] = df["label"].astype(str)
    (work / "default.schema.yaml").write_text(
        "missing: error\ncolumns:\n"
        '  student: {type: binary, values: ["No", "Yes"]}\n'
        "  balance: {type: numeric, bounds: [0, 3000], taxonomy: {bins: [2, 4, 8, 16]}}\n"
        "  income: {type: numeric, bounds: [0, 80000], taxonomy: {bins: [2, 4, 8, 16]}}\n")
    (work / f"default{n}.yaml").write_text(
        f"dataset: islp-default-{n}\nbudget: {{epsilon: 100000.0, delta: 0.0}}\n"
        f"ledger: ledger-default-{n}.jsonl\n"
        'label: {column: label, classes: ["No", "Yes"], positive: "Yes", public: false}\n'
        "schema: default.schema.yaml\npublish-grid: {epsilon: 1.0}\n"
        + (f"forecast: {{positive_share: {declare}}}\n" if declare else ""))
    df.to_parquet(work / f"default{n}.parquet")
    return work / f"default{n}.yaml", work / f"default{n}.parquet"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--declare", default=None, help="Default's declared positive share")
    ap.add_argument("--only", default=None, help="adult or default")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    a = ap.parse_args()
    if data_missing(__file__, [a.data / "adult_train.parquet"]):
        return
    warnings.simplefilter("ignore")
    from dpcli.api.publish_grid import publish_grid
    from dpcli.spec import load_spec

    a.work.mkdir(parents=True, exist_ok=True)
    seeds = itertools.count(a.seed)
    for name, make, sizes in (("adult", adult, (500, 2000)),
                              ("default", default, (500, 2000, 10_000))):
        if a.only and name != a.only:
            continue
        for n in sizes:
            spec_path, data = make(a.work, n, a.declare, a.data)
            if not (a.work / f"ledger-{name}-{n}.jsonl").exists():
                subprocess.run([sys.executable, "-m", "dpcli", "ledger", "init", "--spec",
                                str(spec_path)], check=True, capture_output=True)
            spec = load_spec(spec_path)
            dry = publish_grid(spec, data, dry_run=True)
            assert dry.forecast is not None
            v = dry.forecast.verdict
            x = v.epsilon_usable if not v.usable else dry.forecast.epsilon_for(v.metric,
                                                                               v.target)
            print(f"{name} n={n} X={x} headline={v.metric}", flush=True)
            if x is None:
                continue
            for mult in (1.0, 1.5, 3.0):
                eps = round(x * mult, 4)
                flags = []
                for _ in range(a.runs):
                    s = next(seeds)
                    out = a.work / f"out-{name}-{n}-{s}"
                    r = publish_grid(spec, data, out=out, epsilon=eps, seed=s)
                    deg = r.payload.get("degeneracy", {})
                    if deg.get("degenerate"):
                        flags.append("no_signal" if deg.get("no_signal") else "other")
                    shutil.rmtree(out, ignore_errors=True)
                f = publish_grid(spec, data, dry_run=True, epsilon=eps).forecast
                assert f is not None
                m = f.metrics
                extra = (f" degenerate {m['degenerate'].expected:.3f} failure "
                         f"{m['failure'].expected:.3f}" if "failure" in m else "")
                print(f"  {mult:g}X ε={eps:g}: flagged {len(flags)}/{a.runs} "
                      f"({','.join(flags)}) selection {m['selection'].expected:.3f} "
                      f"T {f.extra.get('cells_at_most')}{extra}", flush=True)


if __name__ == "__main__":
    main()
