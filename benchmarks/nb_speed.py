"""train-nb speed: the dpcli CLI end to end (global, smooth) vs pyarrow read + sklearn GaussianNB.

Resamples UCI Adult train (../shared/data/adult_train.parquet) with a fixed
seed to 10^5, 10^6 and 5·10^6 rows, writes Parquet to a temporary folder and,
on each file, measures in a fresh process per run:

* ``dpcli train-nb FILE --method global|smooth --epsilon 1 --quiet``: the CLI
  end to end (interpreter start, imports, spec, pre-charge validation pass,
  keyed input digest, ledger reservation, one statistics pass, noise, model
  write, ledger completion) on all 14 declared columns, against a copy of
  configs/adult.yaml with its own dataset id, a huge budget and a ledger in
  the temporary folder (never in the repository);
* ``dpcli library``: the same statistics pass + ``nb.fit`` in-process (no CLI),
  to show what the CLI adds;
* ``pyarrow + sklearn``: ``pq.read_table`` of the 6 numeric columns and the
  label, conversion to numpy, ``sklearn.naive_bayes.GaussianNB().fit``.
  sklearn fits fewer columns (6 numeric, no categorical): it is a speed
  reference, not the same model.

Each measurement is one process started by a small wrapper process, which
times it (wall clock, end to end) and reads its peak RSS from
``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` (the measured process is the
wrapper's only child; Linux keeps the pre-exec peak of the forked wrapper in
that figure, about 10 MB). Python workers also report their in-process time
(after imports) and /proc/self/status VmHWM. Medians over --repeat runs.
Growth exponent: least-squares slope of log(time) against log(rows) over
the sizes measured, and the slope between the two largest sizes (where
start-up costs matter least). Timings are not asserted.

    python benchmarks/nb_speed.py                    # a few minutes on 2 cores
    python benchmarks/nb_speed.py --max-rows 1000000  # quick run

Run it from the benchmark venv (benchmarks/requirements.txt) for the sklearn
rows; without sklearn they are skipped with a message. Writes
benchmarks/results/nb_speed.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import dpcli_command, environment, run_once

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "adult_train.parquet"
SIZES = (100_000, 1_000_000, 5_000_000)
NUMERIC = ["age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week"]

VMHWM = """
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
print(json.dumps({"inproc_s": elapsed, "vmhwm_mb": int(hwm.split()[1]) / 1024, "check": check}))
"""

SKLEARN = """
import json, sys, time
import numpy as np
import pyarrow.parquet as pq
from sklearn.naive_bayes import GaussianNB
PATH, NUMERIC = sys.argv[1], json.loads(sys.argv[2])
t0 = time.perf_counter()
t = pq.read_table(PATH, columns=NUMERIC + ["label"])
x = np.column_stack([t[c].to_numpy() for c in NUMERIC]).astype(np.float64)
y = t["label"].to_numpy()
clf = GaussianNB().fit(x, y)
elapsed = time.perf_counter() - t0
check = int(clf.class_count_.sum())
""" + VMHWM

LIBRARY = """
import json, sys, time
import numpy as np
from dpcli.algorithms import naive_bayes as nb
from dpcli.budget import Budget
from dpcli.data import DataSource
from dpcli.spec import load_spec
from dpcli.stats import LocalEngine
PATH, SPEC, METHOD = sys.argv[1], sys.argv[2], sys.argv[3]
t0 = time.perf_counter()
spec = load_spec(SPEC)
cols = spec.schema.names
cfg = nb.NBConfig(method=METHOD)
stats = LocalEngine().compute(DataSource(PATH, spec.schema), nb.request(spec.schema, cols, cfg),
                              rng=np.random.default_rng(0))
model = nb.fit(stats, spec.schema, cols, nb.plan(spec.schema, cols, Budget(1.0), cfg), cfg,
               np.random.default_rng(0))
elapsed = time.perf_counter() - t0
check = int(stats.class_counts.sum())
""" + VMHWM


def make_spec(folder: Path) -> Path:
    """A copy of configs/adult.yaml: own dataset id, ε = 1e9, ledger in ``folder``."""
    import yaml

    raw = yaml.safe_load((ROOT / "configs" / "adult.yaml").read_text())
    raw["dataset"] = f"nb-speed-benchmark-{os.getpid()}"
    raw["budget"] = {"epsilon": 1e9, "delta": 0.0}
    raw["ledger"] = str(folder / "ledger.jsonl")
    if isinstance(raw["schema"], str):
        raw["schema"] = str((ROOT / "configs" / raw["schema"]).resolve())
    spec = folder / "adult-bench.yaml"
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    subprocess.run([*dpcli_command(), "ledger", "init", "--spec", str(spec)], check=True,
                   capture_output=True, text=True)
    return spec


def make_data(source: Path, rows: int, folder: Path) -> Path:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    base = pq.read_table(source)
    idx = np.random.default_rng(0).integers(0, base.num_rows, rows)
    path = folder / f"adult_{rows}.parquet"
    pq.write_table(base.take(pa.array(idx)), path, row_group_size=1 << 20)
    return path


def measure(cmd: list[str], repeat: int, timeout: float) -> dict:
    runs = []
    for _ in range(repeat):
        r = run_once(cmd, timeout)
        if r.get("timeout"):
            return {"timeout": True, "timeout_s": timeout}
        runs.append(r)
    runs.sort(key=lambda r: r["wall_s"])
    mid = runs[len(runs) // 2]
    out = {"wall_s": mid["wall_s"], "wall_s_all": [round(r["wall_s"], 3) for r in runs],
           "peak_rss_mb": max(r["peak_rss_mb"] for r in runs)}
    if "inproc_s" in mid:
        out["inproc_s"] = sorted(r["inproc_s"] for r in runs)[len(runs) // 2]
        out["vmhwm_mb"] = max(r["vmhwm_mb"] for r in runs)
        out["check"] = mid["check"]
    return out


def slopes(points: list[tuple[int, float]]) -> dict:
    pts = [(n, t) for n, t in points if t]
    if len(pts) < 2:
        return {"fit": None, "last_two": None}
    xs = [math.log(n) for n, _ in pts]
    ys = [math.log(t) for _, t in pts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    fit = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs)
    (n1, t1), (n2, t2) = pts[-2], pts[-1]
    return {"fit": fit, "last_two": math.log(t2 / t1) / math.log(n2 / n1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="Adult train Parquet to resample (default: %(default)s)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--max-rows", type=int, default=None,
                        help="skip sizes above this (quick runs)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per cell (median)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds before one run is abandoned and reported as such")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    if not args.data.exists():  # skipped, not failed: `make bench` runs without ../shared
        print(f"nb_speed: skipped, {args.data} not found (pass --data; the shared data is "
              "not shipped with dpcli)", file=sys.stderr)
        return
    sizes = sorted(n for n in args.sizes if args.max_rows is None or n <= args.max_rows)
    if not sizes:
        raise SystemExit("nb_speed: no size left under --max-rows")
    try:
        import sklearn  # noqa: F401
        have_sklearn = True
    except ImportError:
        have_sklearn = False
        print("pyarrow + sklearn GaussianNB: skipped, scikit-learn not importable here; run "
              "from the benchmark venv (benchmarks/requirements.txt)", file=sys.stderr)

    t_start = time.perf_counter()
    env = environment(
        "scipy", "sklearn",
        peak_rss_method=("resource.getrusage(RUSAGE_CHILDREN).ru_maxrss in a one-shot wrapper "
                         "process (Python workers: also /proc/self/status VmHWM)"))
    results: list[dict] = []
    tmp = Path(tempfile.mkdtemp(prefix="dpcli-nb-speed-"))
    try:
        spec = make_spec(tmp)
        tools: dict[str, list[str]] = {}
        for n in sizes:
            path = make_data(args.data, n, tmp)
            size_mb = path.stat().st_size / 2**20
            print(f"{n:,} rows: {size_mb:.1f} MB Parquet", file=sys.stderr, flush=True)
            model = tmp / "model.json"
            for method in ("global", "smooth"):
                tools[f"dpcli train-nb --method {method} (CLI)"] = [
                    *dpcli_command(), "train-nb", str(path), "--spec", str(spec), "--out",
                    str(model), "--epsilon", "1", "--method", method, "--quiet"]
            for method in ("global", "smooth"):
                tools[f"dpcli library, {method} (stats + fit)"] = [
                    sys.executable, "-c", LIBRARY, str(path), str(spec), method]
            if have_sklearn:
                tools["pyarrow read + sklearn GaussianNB (6 numeric)"] = [
                    sys.executable, "-c", SKLEARN, str(path), json.dumps(NUMERIC)]
            for name, cmd in tools.items():
                r = measure(cmd, args.repeat, args.timeout)
                r.update(tool=name, rows=n, parquet_mb=round(size_mb, 2))
                if "check" in r and r["check"] != n:
                    raise RuntimeError(f"{name}: counted {r['check']} rows, expected {n}")
                if model.exists():
                    model.unlink()
                results.append(r)
                shown = "timeout" if r.get("timeout") else f"{r['wall_s']:.2f} s"
                print(f"  {name}: {shown}", file=sys.stderr, flush=True)
            path.unlink()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    env["total_seconds"] = round(time.perf_counter() - t_start, 1)

    sk = {r["rows"]: r for r in results if r["tool"].startswith("pyarrow")}
    for r in results:
        base = sk.get(r["rows"])
        if base and not r.get("timeout") and not base.get("timeout"):
            r["ratio_vs_sklearn_wall"] = r["wall_s"] / base["wall_s"]
            if "inproc_s" in r:
                r["ratio_vs_sklearn_inproc"] = r["inproc_s"] / base["inproc_s"]
    growth = {}
    for name in dict.fromkeys(r["tool"] for r in results):
        mine = [r for r in results if r["tool"] == name and not r.get("timeout")]
        growth[name] = {"wall": slopes([(r["rows"], r["wall_s"]) for r in mine])}
        if all("inproc_s" in r for r in mine):
            growth[name]["inproc"] = slopes([(r["rows"], r["inproc_s"]) for r in mine])

    def f(x, spec=".2f"):
        return "" if x is None else format(x, spec)

    lines = [f"# train-nb speed ({', '.join(f'{n:,}' for n in sizes)} rows of resampled UCI "
             f"Adult, Parquet; median of {args.repeat})", "",
             f"{env['date_utc']}; {env['cpus_usable']} usable CPUs (os.cpu_count() = "
             f"{env['cpu_count']}), {env['machine']}, Python {env['python']}, numpy "
             f"{env['numpy']}, pyarrow {env['pyarrow']}, scikit-learn {env['scikit-learn']}, dpcli "
             f"{env['dpcli']} (git {env['git_head']}"
             f"{', dpcli/ modified' if env['dpcli_tree_modified'] else ''}); "
             f"{env['total_seconds']} s in all.", "",
             "Wall = the measured process end to end (interpreter start and imports included); "
             "in-process = after imports (library and sklearn workers only). Peak RSS: "
             f"{env['peak_rss_method']}. Ratio = this row's time / pyarrow + sklearn's at the "
             "same size (sklearn fits 6 numeric columns, dpcli all 14). dpcli runs at ε = 1 "
             "on a throw-away ledger.", "",
             "| tool | rows | wall s | in-process s | peak RSS MB | rows/s (wall) | "
             "ratio (wall) | ratio (in-process) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        if r.get("timeout"):
            lines.append(f"| {r['tool']} | {r['rows']:,} | > {r['timeout_s']:.0f} (stopped) "
                         "| | | | | |")
            continue
        lines.append(
            f"| {r['tool']} | {r['rows']:,} | {r['wall_s']:.2f} | {f(r.get('inproc_s'))} | "
            f"{r['peak_rss_mb']:.0f} | {r['rows'] / r['wall_s']:,.0f} | "
            f"{f(r.get('ratio_vs_sklearn_wall'), '.1f')} | "
            f"{f(r.get('ratio_vs_sklearn_inproc'), '.1f')} |")
    lines += ["", "Growth exponent (slope of log time vs log rows; 1 = linear):", "",
              "| tool | wall, fit over all sizes | wall, two largest | in-process, fit | "
              "in-process, two largest |", "| --- | ---: | ---: | ---: | ---: |"]
    for name, g in growth.items():
        w, i = g["wall"], g.get("inproc", {})
        lines.append(f"| {name} | {f(w['fit'])} | {f(w['last_two'])} | {f(i.get('fit'))} | "
                     f"{f(i.get('last_two'))} |")
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        out = ROOT / "benchmarks" / "results"
        out.mkdir(parents=True, exist_ok=True)
        payload = {"environment": env, "sizes": sizes, "repeat": args.repeat,
                   "results": results, "growth_exponent": growth}
        (out / "nb_speed.json").write_text(json.dumps(payload, indent=2, ensure_ascii=False)
                                           + "\n")
        (out / "nb_speed.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
