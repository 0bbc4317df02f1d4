"""Fixed cost: whole dpcli processes on a 1,000-row file, old against new, beside DuckDB.

Issue 22's goal: ``dpcli train-nb`` on a 1,000-row file within 2× of a Python
process that imports duckdb and runs the same query. On a tiny file a run is
all start-up (imports, spec, ledger, forecast), so this measures that, paired:
for each command, every round runs the baseline dpcli (``--old``), the dpcli
under test (``--new``) and DuckDB's worker, one after the other (A B D A B D
…), so that both dpclis see the same load; medians of --rounds rounds. Wall
time and CPU time (user + system of the child, from ``getrusage``) are both
reported: on a shared machine the CPU time is the steadier of the two.

Files, spec and queries are benchmarks/scale.py's (its FLOOR_ROWS = 1,000-row
Parquet file of resampled Adult, its spec with ε = 1e9 and a fresh ledger in
the work folder, its DuckDB statements and checks); roc and evaluate score
with scale.py's model trained on the 10^6-row file. ``--help`` rows time
``dpcli --help`` and ``dpcli train-nb --help`` (no DuckDB counterpart).

Byte-compile both packages first (``python -m compileall``): with
``PYTHONDONTWRITEBYTECODE`` set, an editable install recompiles every module
in every run.

    python benchmarks/fixed_cost.py --old /path/to/old/dpcli --rounds 7

Run it from the benchmark venv (duckdb). Writes benchmarks/results/NAME.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import scale
from _common import data_missing, dpcli_command, environment, write_results

COMMANDS = ("train-nb", "select-features", "tabulate", "publish-grid", "roc", "evaluate")
HELP = {"--help": ["--help"], "train-nb --help": ["train-nb", "--help"]}


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one run of ``cmd``, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise RuntimeError(f"{cmd} exited {out.returncode}:\n{out.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def summary(runs: list[tuple[float, float]]) -> dict[str, Any]:
    return {"wall_s": statistics.median(w for w, _ in runs),
            "cpu_s": statistics.median(c for _, c in runs),
            "wall_s_all": [round(w, 3) for w, _ in runs],
            "cpu_s_all": [round(c, 3) for _, c in runs]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="the baseline dpcli executable")
    parser.add_argument("--new", default=None, help="dpcli under test (default: the one "
                        "beside this Python)")
    parser.add_argument("--data", type=Path, default=scale.SOURCE)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--commands", type=lambda s: [c for c in s.split(",") if c],
                        default=list(COMMANDS))
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/dpcli-fixed-cost"))
    parser.add_argument("--out", type=Path, default=scale.ROOT / "benchmarks" / "results")
    parser.add_argument("--name", default="fixed_cost")
    args = parser.parse_args()
    if data_missing("fixed_cost", [args.data]):
        return
    for exe in (args.old, args.new):
        if exe and not shutil.which(exe):
            raise SystemExit(f"fixed_cost: {exe}: not an executable")
    old = [args.old]
    new = [args.new] if args.new else dpcli_command()

    t_start = time.perf_counter()
    args.workdir.mkdir(parents=True, exist_ok=True)
    scale.ensure_data(args.data, {scale.FLOOR_ROWS: {"parquet"}, scale.MODEL_ROWS: {"parquet"}},
                      args.workdir)
    for stale in args.workdir.glob("fixed_*"):  # outputs a former ledger recorded
        shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
    spec = scale.make_spec(args.workdir, new)
    schema = scale.load_schema(spec)
    model = scale.train_model(new, scale.data_path(args.workdir, scale.MODEL_ROWS, "parquet"),
                              spec, args.workdir)
    model_sql, _ = scale.nb_score_sql(model, schema[2])
    extras, cut = scale.spec_extras(spec), scale.model_cut(model)
    path = scale.data_path(args.workdir, scale.FLOOR_ROWS, "parquet")
    src = scale.sql_source(path, "parquet", scale.duckdb_types(args.data))
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    env = environment("duckdb", "scipy", load_average_start=[round(x, 2) for x in os.getloadavg()],
                      old=old, new=new, rounds=args.rounds, duckdb_threads=threads)

    def dpcli_cmd(dpcli: list[str], command: str) -> list[str]:
        if command in HELP:
            return [*dpcli, *HELP[command]]
        out = args.workdir / f"fixed_{command}"
        cmd = [*dpcli, command, str(path), "--spec", str(spec), "-q"]
        if command in ("roc", "evaluate"):
            cmd += ["--model", str(model)]
        if command != "evaluate":
            suffix = {"train-nb": ".json", "select-features": ".json", "tabulate": ".csv"}
            cmd += ["--out", str(out) + suffix.get(command, "")]
        return cmd

    results = []
    for command in [*HELP, *[c for c in COMMANDS if c in args.commands]]:
        duck = None
        if command not in HELP:
            queries, expected = scale.duckdb_queries(command, src, schema, model_sql,
                                                     scale.FLOOR_ROWS, extras, cut)
            duck = [sys.executable, "-c", scale.DUCKDB,
                    json.dumps({"queries": queries, "threads": threads})]
            check = scale.measure_duckdb(queries, expected, threads, 1, 600.0)  # checks counts
            if "wall_s" not in check:
                raise SystemExit(f"fixed_cost: DuckDB failed on {command}: {check}")
        runs: dict[str, list[tuple[float, float]]] = {"old": [], "new": [], "duckdb": []}
        for _ in range(args.rounds):
            runs["old"].append(timed(dpcli_cmd(old, command)))
            runs["new"].append(timed(dpcli_cmd(new, command)))
            if duck is not None:
                runs["duckdb"].append(timed(duck))
        row = {"command": command, **{k: summary(v) for k, v in runs.items() if v}}
        results.append(row)
        print(show(row), flush=True)

    env["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    env["total_seconds"] = round(time.perf_counter() - t_start, 1)
    text = "\n".join(report(env, results))
    print(text)
    write_results(args.out, args.name, text, {"environment": env, "results": results})


def show(row: dict[str, Any]) -> str:
    db = row.get("duckdb")
    vs = f", DuckDB {db['wall_s']:.2f} s" if db else ""
    return (f"{row['command']}: old {row['old']['wall_s']:.2f} s, new "
            f"{row['new']['wall_s']:.2f} s{vs}")


def report(env: dict[str, Any], results: list[dict[str, Any]]) -> list[str]:
    lines = [f"# Fixed cost: dpcli on {scale.FLOOR_ROWS:,} rows, old vs new, beside DuckDB", "",
             f"{env['date_utc']}; {env['cpus_usable']} usable CPUs, Python {env['python']}, "
             f"numpy {env['numpy']}, pyarrow {env['pyarrow']}, duckdb {env['duckdb']}, scipy "
             f"{env['scipy']}; git {env['git_head']}; old `{' '.join(env['old'])}`, new "
             f"`{' '.join(env['new'])}`; load average {env['load_average_start']} at start, "
             f"{env['load_average_end']} at the end; {env['rounds']} rounds (old, new, DuckDB "
             f"in turn), medians; {env['total_seconds']} s in all.", "",
             "Whole process, `-q`, Parquet file of 1,000 resampled Adult rows, the scale "
             "benchmark's spec (ε = 1e9 ledger). CPU = user + system time of the process. "
             f"DuckDB: a Python process that imports duckdb and runs the same statistics "
             f"(`SET threads = {env['duckdb_threads']}`). Ratio = dpcli wall / DuckDB wall.", "",
             "| command | old wall s | new wall s | new / old wall | old CPU s | new CPU s | "
             "new / old CPU | DuckDB wall s | DuckDB CPU s | old ratio | new ratio |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        o, n, d = r["old"], r["new"], r.get("duckdb")
        cells = [r["command"], f"{o['wall_s']:.3f}", f"{n['wall_s']:.3f}",
                 f"{n['wall_s'] / o['wall_s']:.2f}", f"{o['cpu_s']:.3f}", f"{n['cpu_s']:.3f}",
                 f"{n['cpu_s'] / o['cpu_s']:.2f}"]
        if d:
            cells += [f"{d['wall_s']:.3f}", f"{d['cpu_s']:.3f}",
                      f"{o['wall_s'] / d['wall_s']:.1f}", f"{n['wall_s'] / d['wall_s']:.1f}"]
        else:
            cells += ["", "", "", ""]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


if __name__ == "__main__":
    main()
