"""Paired timings of two dpcli builds on the scale files: old and new alternate run by run.

On a machine shared with other jobs a single timing says little; alternating the two
builds (A B, then B A, ...) on each cell and taking medians makes their ratio mean
something. Each run is the CLI end to end (``-q``), pinned to the first k CPUs
(``taskset``, ``DPCLI_THREADS=k``), timed in a one-shot wrapper process: wall, user+system
CPU and peak RSS (``RUSAGE_CHILDREN``). The files, spec and ledger are those a
``benchmarks/scale.py --workdir W`` run left in W (``adult_<rows>.parquet``,
``adult-scale.yaml``).

Example::

    python benchmarks/scale_pairs.py --old /tmp/dpcli-main --new /tmp/dpcli-branch \\
        --workdir /tmp/dpcli-scale --rows 1e6,5e6 --commands publish-grid,train-nb \\
        --cores 1,2 --repeat 3 --out pairs.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

OUTPUTS = {"publish-grid": "grid", "train-nb": "nb.json", "tabulate": "tables.csv",
           "select-features": "features.json"}
TIMER = ("import json,resource,subprocess,sys,time;t=time.perf_counter();"
         "p=subprocess.run(sys.argv[1:]);w=time.perf_counter()-t;"
         "r=resource.getrusage(resource.RUSAGE_CHILDREN);"
         "print(json.dumps({'rc':p.returncode,'wall':w,'cpu':r.ru_utime+r.ru_stime,"
         "'rss':r.ru_maxrss/1024}))")


def once(dpcli: str, command: str, data: Path, spec: Path, out: Path, cores: int) -> dict:
    argv = ["taskset", "-c", f"0-{cores - 1}", dpcli, command, str(data), "--spec", str(spec),
            "--out", str(out), "-q"]
    env = dict(os.environ, DPCLI_THREADS=str(cores))
    if out.is_dir():            # the benchmark's own earlier output (a ledger started afresh
        shutil.rmtree(out)      # by scale.py would refuse to replace it)
    elif out.exists():
        out.unlink()
    done = subprocess.run([sys.executable, "-c", TIMER, *argv], env=env, capture_output=True,
                          text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if result["rc"] != 0:
        raise SystemExit(f"{dpcli} {command} on {data} failed (exit {result['rc']})")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="the reference dpcli executable")
    parser.add_argument("--new", required=True, help="the dpcli executable under test")
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--rows", default="1e6,5e6")
    parser.add_argument("--commands", default="publish-grid,train-nb,tabulate")
    parser.add_argument("--cores", default="1,2")
    parser.add_argument("--repeat", type=int, default=3, help="pairs per cell")
    parser.add_argument("--out", type=Path, help="JSON of every run and the medians")
    args = parser.parse_args()
    spec = args.workdir / "adult-scale.yaml"
    builds = {"old": args.old, "new": args.new}
    results = []
    for rows in (int(float(r)) for r in args.rows.split(",")):
        data = args.workdir / f"adult_{rows}.parquet"
        for command in args.commands.split(","):
            for cores in (int(c) for c in args.cores.split(",")):
                cell: dict[str, Any] = {"rows": rows, "command": command, "cores": cores,
                                        "old": [], "new": [], "load_start": os.getloadavg()}
                for r in range(args.repeat):
                    for which in (("old", "new") if r % 2 == 0 else ("new", "old")):
                        out = args.workdir / f"pairs-{which}-{OUTPUTS[command]}"
                        cell[which].append(once(builds[which], command, data, spec, out, cores))
                cell["load_end"] = os.getloadavg()
                med = {w: {k: statistics.median(m[k] for m in cell[w])
                           for k in ("wall", "cpu", "rss")} for w in ("old", "new")}
                cell["median"] = med
                results.append(cell)
                new, old = med["new"], med["old"]
                print(f"| {rows:,} | {command} | {cores} | {new['wall']:.2f} / {old['wall']:.2f} "
                      f"| {new['wall'] / old['wall']:.2f} | {new['cpu']:.2f} / {old['cpu']:.2f} "
                      f"| {new['cpu'] / old['cpu']:.2f} | {new['rss']:.0f} / {old['rss']:.0f} "
                      f"| {cell['load_start'][0]:.1f}–{cell['load_end'][0]:.1f} |", flush=True)
                if args.out is not None:
                    args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
