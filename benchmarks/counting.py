"""Counting pass: dpcli's in-process engine vs pyarrow + pandas groupby (and DuckDB if installed).

Resamples UCI Adult (../shared/data if present, else the shipped sample) to N
rows, writes Parquet and CSV, and times the per-label contingency tables of
the 8 categorical columns — the statistics `dpcli tabulate` and naive Bayes
need. Each measurement runs in a fresh subprocess so peak RSS is its own.

    python benchmarks/counting.py --rows 1000000

Prints a table and writes benchmarks/results/counting.{json,md}. Timings are
wall-clock medians of --repeat runs after imports; they are not asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "adult_train.parquet"
SAMPLE = ROOT / "sample_data" / "adult_train.parquet"
COLUMNS = ["workclass", "education", "marital_status", "occupation", "relationship", "race",
           "sex", "native_country"]

WORKERS = {
    "dpcli-local": """
import numpy as np
from dpcli.spec import load_spec
from dpcli.data import DataSource
from dpcli.stats import LocalEngine, StatsRequest
t0 = time.perf_counter()
spec = load_spec(SPEC)
src = DataSource(PATH, spec.schema)
stats = LocalEngine().compute(src, StatsRequest(contingency=tuple(COLUMNS)),
                              rng=np.random.default_rng(0))
check = int(sum(t.sum() for t in stats.contingency.values()))
""",
    "pandas-groupby": """
import pyarrow.parquet as pq, pyarrow.csv as pc, pandas
t0 = time.perf_counter()
t = pq.read_table(PATH, columns=COLUMNS + ["label"]) if PATH.endswith(".parquet") \\
    else pc.read_csv(PATH, convert_options=pc.ConvertOptions(include_columns=COLUMNS + ["label"]))
df = t.to_pandas()
check = int(sum(df.groupby(["label", c], observed=True).size().sum() for c in COLUMNS))
""",
    "duckdb": """
import duckdb
t0 = time.perf_counter()
con = duckdb.connect()
reader = "read_parquet" if PATH.endswith(".parquet") else "read_csv_auto"
check = 0
for c in COLUMNS:
    sql = f"SELECT label, {c}, count(*) FROM {reader}('{PATH}') GROUP BY ALL"
    rows = con.execute(sql).fetchall()
    check += sum(r[2] for r in rows)
""",
}

HARNESS = """
import sys, time, json
PATH, SPEC, COLUMNS = {path!r}, {spec!r}, {columns!r}
{body}
elapsed = time.perf_counter() - t0
# VmHWM, not ru_maxrss: ru_maxrss survives exec and would report the parent's peak
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
rss = int(hwm.split()[1]) / 1024
print(json.dumps({{"seconds": elapsed, "peak_rss_mb": rss, "check": check}}))
"""


def make_data(rows: int, folder: Path) -> dict[str, Path]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pc
    import pyarrow.parquet as pq

    source = SHARED if SHARED.exists() else SAMPLE
    base = pq.read_table(source)
    idx = np.random.default_rng(0).integers(0, base.num_rows, rows)
    table = base.take(pa.array(idx))
    paths = {"parquet": folder / "adult.parquet", "csv": folder / "adult.csv"}
    pq.write_table(table, paths["parquet"], row_group_size=1 << 20)
    pc.write_csv(table, paths["csv"])
    print(f"data: {rows:,} rows resampled from {source.relative_to(ROOT.parent)}", file=sys.stderr)
    return paths


def measure(name: str, path: Path, repeat: int) -> dict | None:
    code = HARNESS.format(path=str(path), spec=str(ROOT / "configs" / "adult.yaml"),
                          columns=COLUMNS, body=WORKERS[name])
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             cwd=ROOT)
        if out.returncode != 0:
            if "ModuleNotFoundError" in out.stderr:
                return None
            raise RuntimeError(f"{name} failed:\n{out.stderr}")
        runs.append(json.loads(out.stdout))
    runs.sort(key=lambda r: r["seconds"])
    best = runs[len(runs) // 2]
    return {"seconds": best["seconds"], "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
            "check": best["check"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_data(args.rows, Path(tmp))
        for fmt, path in paths.items():
            for name in WORKERS:
                r = measure(name, path, args.repeat)
                if r is None:
                    print(f"{name}: not installed, skipped", file=sys.stderr)
                    continue
                r.update(engine=name, format=fmt, rows=args.rows,
                         rows_per_s=args.rows / r["seconds"])
                results.append(r)
    checks = {r["check"] for r in results}
    assert checks == {args.rows * len(COLUMNS)}, f"engines disagree on totals: {checks}"

    lines = [f"Counting pass, 8 categorical columns x label, {args.rows:,} rows "
             f"({platform.machine()}, {platform.python_version()}), median of {args.repeat}",
             "", "| format | engine | seconds | rows/s | peak RSS (MB) |",
             "| --- | --- | ---: | ---: | ---: |"]
    for r in results:
        lines.append(f"| {r['format']} | {r['engine']} | {r['seconds']:.2f} | "
                     f"{r['rows_per_s']:,.0f} | {r['peak_rss_mb']:.0f} |")
    text = "\n".join(lines)
    print(text)
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "counting.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "counting.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
