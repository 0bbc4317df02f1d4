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


def save(out: Path, data: Path, method: str, reference: bool) -> None:
    import dpcli
    from dpcli.algorithms import privpfc
    from dpcli.budget import Budget
    from dpcli.data import DataSource
    from dpcli.mechanisms import make_rng
    from dpcli.spec import load_spec
    from dpcli.stats import StatsRequest, get_engine

    spec = load_spec(SPEC)
    hier = privpfc.candidate_hierarchies(spec.schema)
    stats = get_engine().compute(DataSource(data / "adult_train.parquet", spec.schema),
                                 StatsRequest(joint=tuple(hier)), rng=make_rng(0))
    assert stats.joint is not None
    d = privpfc.design(hier, stats.n, Budget(1.0))
    rate = d.plan.step(privpfc.HISTOGRAM).budget.eps / privpfc.HIST_SENSITIVITY
    grids = privpfc.pool([h.sizes for h in hier], d.threshold)
    wall, cpu = time.perf_counter(), time.process_time()
    if reference:
        quality = privpfc.score_pool_dense(stats.joint, hier, grids, rate, 1)
    else:
        quality = privpfc.score_pool(stats.joint, hier, grids, rate, 1, method=method)
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
    args = parser.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))
    if args.save is None:
        parser.error("--save or --compare")
    if data_missing("grid_same.py", [args.data / "adult_train.parquet"]):
        return
    save(args.save, args.data, args.method, args.reference)


if __name__ == "__main__":
    main()
