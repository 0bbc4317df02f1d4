"""Spark scale: train-nb / select-features with --engine spark on local[2] vs the local engine.

Issue 22's goal: ``--engine spark`` on ``local[2]`` at 10^7 rows within 3× of
dpcli's own local engine. Both engines run in the same invocation of this
script, on the same file, each command in a fresh process through the CLI
(``-q``), timed end to end by the house wrapper (``_common.run_once``: wall
clock and peak RSS of the largest process). The Spark cells include starting
the JVM (a few seconds on 2 cores) — a user pays it too.

Data: the Adult resamples of benchmarks/scale.py (same generator, same files,
cached in --workdir): ``adult_N.parquet`` (row groups of 10^6 rows) and, with
``--formats csv``, ``adult_N.csv``. Spec: scale.py's (configs/adult.yaml with
its own id, ε = 1e9, a fresh ledger in --workdir).

    python benchmarks/spark_scale.py --rows 1e6            # a few minutes
    python benchmarks/spark_scale.py --rows 1e6,1e7        # about half an hour on 2 cores
    # the code of another checkout (e.g. main, for a before/after table):
    python benchmarks/spark_scale.py --dpcli "env PYTHONPATH=/work/main python -m dpcli"

Run it from a Python that has pyspark (``make test-spark`` installs it into
.venv). Prints one line per cell (local wall, Spark wall, ratio) and, with
--out, writes the table as Markdown and JSON. Timings are not asserted.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
from pathlib import Path

from _common import DEFAULT_DATA, dpcli_command, environment, run_once
from scale import (
    data_path,
    dpcli_run,
    ensure_data,
    make_spec,
    parse_rows,
    spark_ready,
    warm,
)

COMMANDS = ("train-nb", "select-features")
GOAL = 3.0  # Spark on local[2] within 3× of the local engine


def measure(cmd: list[str], repeat: int, timeout: float) -> dict:
    runs = [run_once(cmd, timeout) for _ in range(repeat)]
    if any(r.get("timeout") for r in runs):
        return {"timeout": True}
    return {"wall_s": statistics.median(r["wall_s"] for r in runs),
            "rss_mb": max(r["peak_rss_mb"] for r in runs)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=parse_rows, default=[10**6])
    parser.add_argument("--formats", type=lambda s: [f for f in s.split(",") if f],
                        default=["parquet"])
    parser.add_argument("--commands", type=lambda s: [c for c in s.split(",") if c],
                        default=list(COMMANDS))
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA / "adult_train.parquet")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/dpcli-scale"))
    parser.add_argument("--dpcli", type=str, default=None,
                        help="the dpcli command (default: the one beside this Python)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--label", type=str, default="", help="a name for this run's code")
    parser.add_argument("--out", type=Path, default=None, help="write FILE.md and FILE.json")
    args = parser.parse_args()
    if not args.data.exists():
        print(f"spark_scale: {args.data} not found (pass --data)", file=sys.stderr)
        return 2
    dpcli = shlex.split(args.dpcli) if args.dpcli else dpcli_command()
    why = spark_ready(dpcli) if not args.dpcli else None
    if why:
        print(f"spark_scale: {why}", file=sys.stderr)
        return 2
    args.workdir.mkdir(parents=True, exist_ok=True)
    ensure_data(args.data, {n: set(args.formats) for n in args.rows}, args.workdir)
    # the benchmark's own throw-away ledger starts afresh: its sidecars go with it
    for old in args.workdir.glob("ledger.jsonl*"):
        old.unlink()
    spec = make_spec(args.workdir, dpcli)
    model = args.workdir / "unused-model.json"
    results = []
    for rows in args.rows:
        for fmt in args.formats:
            path = data_path(args.workdir, rows, fmt)
            warm(path)
            for command in args.commands:
                cell = {"rows": rows, "format": fmt, "command": command}
                for engine in ("local", "spark"):
                    cmd = dpcli_run(dpcli, command, path, spec, args.workdir, model, engine)
                    cell[engine] = measure(cmd, args.repeat, args.timeout)
                loc, spk = cell["local"], cell["spark"]
                if "wall_s" in loc and "wall_s" in spk:
                    cell["ratio"] = spk["wall_s"] / loc["wall_s"]
                results.append(cell)
                print(line(cell), flush=True)
    if args.out is not None:
        env = environment("pyspark", label=args.label, dpcli_command=" ".join(dpcli))
        args.out.with_suffix(".json").write_text(json.dumps(
            {"environment": env, "results": results}, indent=2) + "\n")
        args.out.with_suffix(".md").write_text("\n".join(table(results, args.label)) + "\n")
    return 0


def wall(m: dict) -> str:
    return "timeout" if m.get("timeout") else f"{m['wall_s']:.1f} s"


def line(cell: dict) -> str:
    ratio = f"{cell['ratio']:.2f}×" if "ratio" in cell else "–"
    return (f"{cell['rows']:>11,} {cell['format']:<8} {cell['command']:<16} "
            f"local {wall(cell['local']):>9}  spark {wall(cell['spark']):>9}  "
            f"ratio {ratio}  (goal ≤ {GOAL:g}×)")


def table(results: list[dict], label: str) -> list[str]:
    out = [f"### {label or 'this run'}", "",
           "| rows | format | command | local wall | spark wall (local[2]) | ratio | "
           "spark peak RSS |", "| ---: | --- | --- | ---: | ---: | ---: | ---: |"]
    for c in results:
        ratio = f"{c['ratio']:.2f}×" if "ratio" in c else "–"
        rss = f"{c['spark'].get('rss_mb', 0):.0f} MB" if "rss_mb" in c["spark"] else "–"
        out.append(f"| {c['rows']:,} | {c['format']} | {c['command']} | {wall(c['local'])} | "
                   f"{wall(c['spark'])} | {ratio} | {rss} |")
    return out


if __name__ == "__main__":
    sys.exit(main())
