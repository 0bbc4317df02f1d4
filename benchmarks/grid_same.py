"""publish-grid's pool qualities on Adult's own rows: save them, time them, compare two builds.

The check behind "the same floats, bit for bit" (benchmarks/results/grid_r9.md): the
joint table of UCI Adult's training file (../shared/data/adult_train.parquet, 30,162
rows) over configs/adult.yaml's candidates, the design of publish-grid at ε = 1
(T = 1,723, 120,614 grids, no pre-selection), and ``privpfc.score_pool`` on it with the
histogram's noise rate, as ``privpfc.publish`` calls it. Run it with each build on
``PYTHONPATH`` (``--save`` writes the qualities as .npy with the CPU and wall seconds of
the scoring alone), then ``--compare A.npy B.npy`` checks them bit for bit.

    PYTHONPATH=/path/to/main python benchmarks/grid_same.py --save /tmp/q_main.npy
    PYTHONPATH=$PWD python benchmarks/grid_same.py --save /tmp/q_new.npy
    python benchmarks/grid_same.py --compare /tmp/q_main.npy /tmp/q_new.npy

``--method`` forces "dense" or "sparse" (default "auto", publish-grid's choice);
``--reference`` times ``privpfc.score_pool_dense`` (one grid at a time) instead.
``--spec``/``--file``/``--epsilon`` score another dataset's pool (with a pre-selection,
the pool of its first k candidates); ``--threads`` sets score_pool's workers.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from _common import DEFAULT_DATA, data_missing

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "configs" / "adult.yaml"


def save(out: Path, data: Path, method: str, reference: bool, spec_path: Path = SPEC,
         file: Path | None = None, epsilon: float = 1.0, threads: int | None = None) -> None:
    import dpcli
    from dpcli.algorithms import privpfc
    from dpcli.budget import Budget
    from dpcli.data import DataSource
    from dpcli.mechanisms import make_rng
    from dpcli.spec import load_spec
    from dpcli.stats import StatsRequest, get_engine
    from dpcli.stats.engine import JointTable

    spec = load_spec(spec_path)
    hier = privpfc.candidate_hierarchies(spec.schema)
    file = data / "adult_train.parquet" if file is None else file
    stats = get_engine().compute(DataSource(file, spec.schema),
                                 StatsRequest(joint=tuple(hier)), rng=make_rng(0))
    assert stats.joint is not None
    d = privpfc.design(hier, stats.n, Budget(epsilon))
    table, columns = stats.joint, list(range(len(hier)))
    if d.select_k is not None:     # the pool of the first k columns (no selection noise)
        columns = list(range(d.select_k))
        hier = [hier[j] for j in columns]
        table = JointTable(tuple(h.column for h in hier), table.leaves[:, columns],
                           table.counts)
    rate = d.plan.step(privpfc.HISTOGRAM).budget.eps / privpfc.HIST_SENSITIVITY
    grids = privpfc.pool([h.sizes for h in hier], d.threshold)
    positive = spec.schema.label.positive_index
    positive = 1 if positive is None else positive
    wall, cpu = time.perf_counter(), time.process_time()
    if reference:
        quality = privpfc.score_pool_dense(table, hier, grids, rate, positive)
    else:
        kw = {} if threads is None else {"threads": threads}
        quality = privpfc.score_pool(table, hier, grids, rate, positive, method=method, **kw)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    np.save(out, quality)
    print(f"{dpcli.__file__}: n {stats.n}, T {d.threshold}, {len(grids):,} grids; scoring "
          f"cpu {cpu:.2f} s, wall {wall:.2f} s -> {out}")


def compare(a: Path, b: Path) -> int:
    x, y = np.load(a), np.load(b)
    same = x.shape == y.shape and np.array_equal(x.view(np.int64), y.view(np.int64))
    differ = int(np.sum(x != y)) if x.shape == y.shape else -1
    print(f"{a} vs {b}: {len(x):,} / {len(y):,} qualities, "
          f"{'identical bit for bit' if same else f'{differ} differ'}")
    return 0 if same else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", type=Path)
    parser.add_argument("--compare", type=Path, nargs=2)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--method", default="auto", choices=["auto", "dense", "sparse"])
    parser.add_argument("--reference", action="store_true")
    parser.add_argument("--spec", type=Path, default=SPEC,
                        help="another dataset's spec (default configs/adult.yaml)")
    parser.add_argument("--file", type=Path, help="its data file (default: Adult's)")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--threads", type=int, help="score_pool's worker threads")
    args = parser.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))
    if args.save is None:
        parser.error("--save or --compare")
    if data_missing("grid_same.py", [args.file or args.data / "adult_train.parquet"]):
        return
    save(args.save, args.data, args.method, args.reference, args.spec, args.file,
         args.epsilon, args.threads)


if __name__ == "__main__":
    main()
