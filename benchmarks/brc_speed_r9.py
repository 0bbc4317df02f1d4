"""train-brc round 9 (issues 20/22): paired old-vs-new timings of selecting rounds.

Each run is ``dpcli train-brc DATA --spec S --out M --epsilon E --seed 1 --quiet`` in a
fresh process, with ``PYTHONPATH`` set to the old code (``--old``, a checkout of main
before the change) or the new one (this repository), alternated old, new, old, new, ...
in one invocation (a shared machine's load moves; pairs see the same load). Measured per
run: wall clock, and user + system CPU seconds of the child (``getrusage``), which a
loaded machine inflates less than the wall clock. Reported: medians over --repeats pairs,
the load average (1 min) before each run, and whether both codes wrote the same model
file (every field but ``created`` and ``ledger_run_id``, which name the run).

Inputs: Adult train (../shared/data/adult_train.parquet, 30,162 rows) and a resample of it
with replacement (seed 0) of --rows rows (default 10^6), written once to a temporary
folder. Specs: copies of configs/adult.yaml (and its schema) with a large budget and their
own ledger in the temporary folder: ``private`` (the label and every column private,
Algorithm 3) and ``partial`` (label public, the spec's public columns, Algorithm 2). Both
codes use one ledger per spec (its key seeds the noise, so both draw the same noise).
dpcli's defaults set K and T (``--rounds`` bounds T at 10^6 rows, where a round is one
pass over the file: the comparison is per round).

BLAS threads are 1 (OPENBLAS_NUM_THREADS etc.). ``--cpus 0`` runs every child under
``taskset -c 0`` (one core), the default both cores.

``--fit`` (instead of the runs above): ``brc.fit`` alone in a fresh process per run, records
in memory (``brc.training_set``), Adult private at ε 1, seed 1, dpcli's defaults (K 139,
T 150), old and new alternated; CPU seconds of the fit (``time.process_time``) and the
digest of the model payload.

``--threads`` (instead of the runs above): one selecting round's scoring on Adult
(``brc_candidates.add_cell_sums``, K = 139, 30,162 records in memory), its candidates
split in two halves added on two threads (numpy releases the GIL inside each block's
operations) against one thread and against the old candidate-at-a-time loop (wall
medians), alternated, under ``taskset -c 0`` and ``-c 0,1``; the
sums must be identical.

    cd benchmarks && python brc_speed_r9.py --old /path/to/main-checkout --repeats 3
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
THREADS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
VOLATILE = {"created", "ledger_run_id"}


def digest(path: Path) -> str:
    def strip(o):
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if k not in VOLATILE}
        if isinstance(o, list):
            return [strip(v) for v in o]
        return o
    blob = json.dumps(strip(json.loads(path.read_text())), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def make_specs(folder: Path, code: Path) -> dict[str, Path]:
    import yaml

    for name in ("adult.yaml", "adult.schema.yaml", "adult_taxonomy.json"):
        shutil.copy(ROOT / "configs" / name, folder / name)
    specs = {}
    for mode in ("private", "partial"):
        raw = yaml.safe_load((folder / "adult.yaml").read_text())
        raw["budget"]["epsilon"] = 1e6
        raw["ledger"] = f"ledger-{mode}.jsonl"
        if mode == "private":
            raw["train-brc"].pop("public", None)
        else:
            raw["label"]["public"] = True
        spec = folder / f"adult-{mode}.yaml"
        spec.write_text(yaml.safe_dump(raw, sort_keys=False))
        subprocess.run([sys.executable, "-m", "dpcli", "ledger", "init", "--spec", str(spec)],
                       check=True, capture_output=True,
                       env={**os.environ, **THREADS, "PYTHONPATH": str(code)})
        specs[mode] = spec
    return specs


def resample(source: Path, rows: int, folder: Path) -> Path:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    base = pq.read_table(source)
    idx = np.random.default_rng(0).integers(0, base.num_rows, rows)
    path = folder / f"adult_{rows}.parquet"
    pq.write_table(base.take(pa.array(idx)), path)
    return path


def run(code: Path, data: Path, spec: Path, out: Path, eps: str, extra: list[str],
        cpus: str | None) -> dict:
    cmd = [sys.executable, "-m", "dpcli", "train-brc", str(data), "--spec", str(spec),
           "--out", str(out), "--epsilon", eps, "--seed", "1", "--quiet", *extra]
    if cpus is not None:
        cmd = ["taskset", "-c", cpus, *cmd]
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True,
                          env={**os.environ, **THREADS, "PYTHONPATH": str(code)})
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    payload = json.loads(out.read_text())["payload"]
    return {"wall": wall, "cpu": cpu, "load": load, "digest": digest(out),
            "T": payload["T"], "K": payload["candidates"]}


def threads_worker(data: Path, repeats: int) -> None:
    """One round's scoring on 1 thread and on 2 (halves of the pool), alternated."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from dpcli.algorithms import brc, brc_candidates, inputs
    from dpcli.data import DataSource
    from dpcli.mechanisms import make_rng
    from dpcli.spec import load_spec

    spec = load_spec(ROOT / "configs" / "adult.yaml")
    cols = tuple(c for c in spec.schema.names if inputs.usable(spec.schema.column(c)))
    rows = brc.training_set(DataSource(data, spec.schema).batches(cols, rng=make_rng(0)),
                            spec.schema, cols, (), 1)
    k = brc.auto_candidates(rows.n)
    pool = brc_candidates.draw_pool(rows.private, make_rng(1), k, brc.MAX_DRAWS)
    ready = brc_candidates.prepare_batch(rows.private, rows.y)
    w = np.exp(make_rng(2).uniform(-0.3, 0.3, rows.n))
    halves = [slice(0, k // 2), slice(k // 2, k)]
    threads = ThreadPoolExecutor(2)

    def one() -> np.ndarray:
        sums = np.zeros((k, 4))
        brc_candidates.add_cell_sums(pool, rows.private, ready, w, sums)
        return sums

    def two() -> np.ndarray:
        parts = [np.zeros((h.stop - h.start, 4)) for h in halves]
        jobs = [threads.submit(brc_candidates.add_cell_sums, pool.part(h), rows.private,
                               ready, w, part)
                for h, part in zip(halves, parts, strict=True)]
        for job in jobs:
            job.result()
        return np.concatenate(parts)

    def old() -> np.ndarray:   # the candidate-at-a-time loop this round replaced
        sums = np.zeros((k, 4))
        positive = (rows.y > 0).astype(np.intp)
        for j in range(k):
            miss = (pool[j].predict(rows.private) != rows.y).astype(np.intp)
            np.add.at(sums[j], 2 * positive + miss, w)
        return sums

    if not (np.array_equal(one(), two()) and np.array_equal(one(), old())):
        raise SystemExit("two threads, or the old loop, gave other sums")
    times: dict[str, list[float]] = {"old loop": [], "1 thread": [], "2 threads": []}
    for _ in range(repeats):
        for name, f in (("old loop", old), ("1 thread", one), ("2 threads", two)):
            t = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t)
    threads.shutdown()
    print(json.dumps({"cpus": sorted(os.sched_getaffinity(0)), "n": rows.n, "K": k,
                      "load": os.getloadavg()[0],
                      **{name: 1e3 * statistics.median(v) for name, v in times.items()}}))


def fit_worker(data: Path) -> None:
    """``brc.fit`` on Adult, private, ε 1, seed 1, records in memory: CPU s and digest."""
    from dpcli.algorithms import brc, inputs
    from dpcli.data import DataSource
    from dpcli.mechanisms import make_rng
    from dpcli.spec import load_spec

    spec = load_spec(ROOT / "configs" / "adult.yaml")
    cols = tuple(c for c in spec.schema.names if inputs.usable(spec.schema.column(c)))
    rows = brc.training_set(DataSource(data, spec.schema).batches(cols, rng=make_rng(0)),
                            spec.schema, cols, (), 1)
    config = brc.auto_config(1.0, rows.n, True)
    t = time.process_time()
    ensemble, calibration, _ = brc.fit(rows, config, 1.0, make_rng(1))
    cpu = time.process_time() - t
    model = brc.BRCModel(inputs.model_schema(spec.schema, cols), cols, "private", (), ensemble,
                         brc.config_ran(config, ensemble), rows.n, 1.0, calibration)
    blob = json.dumps(model.to_payload(), sort_keys=True).encode()
    print(json.dumps({"cpu": cpu, "T": len(ensemble), "K": config.candidates,
                      "load": os.getloadavg()[0],
                      "digest": hashlib.sha256(blob).hexdigest()[:16]}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, required=True, help="checkout of the old code")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--big-rounds", default="20", help="--rounds at --rows rows")
    parser.add_argument("--cpus", default=None, help="taskset CPU list for every child")
    parser.add_argument("--cases", default="adult-private,adult-partial,big-private")
    parser.add_argument("--out-json", type=Path, default=None)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data",
                        help="folder of adult_train.parquet")
    parser.add_argument("--threads", action="store_true",
                        help="only the 1- vs 2-thread scoring check")
    parser.add_argument("--fit", action="store_true", help="only brc.fit in process")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--fit-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        threads_worker(args.data / "adult_train.parquet", args.repeats)
        return
    if args.fit_worker:
        fit_worker(args.data / "adult_train.parquet")
        return
    if args.fit:
        for r in range(args.repeats):
            for tag in (("old", "new") if r % 2 == 0 else ("new", "old")):
                code = args.old.resolve() if tag == "old" else ROOT
                done = subprocess.run([sys.executable, __file__, "--fit-worker", "--old",
                                       str(args.old), "--data", str(args.data)],
                                      capture_output=True, text=True, check=True,
                                      env={**os.environ, **THREADS, "PYTHONPATH": str(code)})
                print(tag, done.stdout.strip(), flush=True)
        return
    if args.threads:
        for cpus in ("0", "0,1"):
            subprocess.run(["taskset", "-c", cpus, sys.executable, __file__, "--worker",
                            "--old", str(args.old), "--data", str(args.data),
                            "--repeats", str(args.repeats)], check=True,
                           env={**os.environ, **THREADS, "PYTHONPATH": str(ROOT)})
        return
    codes = {"old": args.old.resolve(), "new": ROOT}
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="brc_speed_r9_") as tmp:
        folder = Path(tmp)
        specs = make_specs(folder, ROOT)
        big = (resample(args.data / "adult_train.parquet", args.rows, folder)
               if "big" in args.cases else None)
        for case in args.cases.split(","):
            size, mode = case.split("-")
            data = args.data / "adult_train.parquet" if size == "adult" else big
            extra = [] if size == "adult" else ["--rounds", args.big_rounds]
            runs: dict[str, list[dict]] = {"old": [], "new": []}
            for r in range(args.repeats):
                order = ("old", "new") if r % 2 == 0 else ("new", "old")
                for tag in order:
                    got = run(codes[tag], data, specs[mode], folder / f"{case}-{tag}.json", "1",
                              extra, args.cpus)
                    runs[tag].append(got)
                    print(f"{case} {tag}: {got}", flush=True)
            same = {r["digest"] for r in runs["old"] + runs["new"]}
            results[case] = {
                "runs": runs, "identical": len(same) == 1,
                **{f"{tag}_{key}_median": statistics.median(r[key] for r in runs[tag])
                   for tag in runs for key in ("wall", "cpu")}}
            res = results[case]
            print(f"{case}: wall old {res['old_wall_median']:.1f} s new "
                  f"{res['new_wall_median']:.1f} s; cpu old {res['old_cpu_median']:.1f} s new "
                  f"{res['new_cpu_median']:.1f} s; identical models: {res['identical']}",
                  flush=True)
    if args.out_json:
        args.out_json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                             "results": results}, indent=1))


if __name__ == "__main__":
    main()
