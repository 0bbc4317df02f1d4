"""Speed of the secure generator and of the float-safe samplers: ChaCha20 vs PCG64, and OpenDP.

dpcli's noise comes from ChaCha20 (randomgen) behind numpy's Generator
(:func:`dpcli.mechanisms.make_rng`) instead of numpy's default PCG64. This
measures what that costs:

* raw draws per second, in-process, for PCG64, ChaCha20 (dpcli's), and
  AES-128 counter mode (randomgen's AESCounter, for reference): uniform
  doubles, geometric variates (the discrete Laplace's building block), and
  dpcli's float-safe samplers (grid Laplace on a vector, discrete
  heavy-tailed noise);
* OpenDP's exact samplers (``make_laplace`` on float and integer vectors),
  when the ``opendp`` package is importable: the alternative to extending
  dpcli's grid construction that issue 23 asks to weigh;
* end to end: ``dpcli train-nb`` (global method, all columns) on the shipped
  sample_data/adult_train.parquet (3,000 rows), each run a fresh process,
  with make_rng as shipped (ChaCha20) and with make_rng swapped for PCG64
  (a wrapper that patches ``dpcli.mechanisms.make_rng`` before running the
  CLI), against a copy of configs/demo.yaml whose ledger lives in a
  temporary folder.

Medians over --repeat runs. Timings are not asserted; on a shared machine
they move by tens of percent. Writes benchmarks/results/rng_speed.{md,json}.

    python benchmarks/rng_speed.py            # about a minute
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _common import ROOT, environment, write_results
from randomgen import AESCounter

from dpcli.mechanisms import discrete_laplace_mechanism, laplace_mechanism, make_rng
from dpcli.mechanisms.smooth import discrete_heavy_tailed_noise

GENERATORS: dict[str, Callable[[], np.random.Generator]] = {
    "PCG64 (numpy default)": lambda: np.random.Generator(np.random.PCG64(1)),
    "ChaCha20 (dpcli make_rng)": lambda: make_rng(1),
    "AES-128 CTR (randomgen AESCounter)": lambda: np.random.Generator(AESCounter(1)),
}

# the CLI with make_rng swapped for PCG64: the same command, the other generator
PCG_WRAPPER = """
import sys
import numpy as np
import dpcli.mechanisms as mechanisms
import dpcli.mechanisms.rng as rng
def pcg(seed=None):
    return np.random.default_rng(seed)
mechanisms.make_rng = rng.make_rng = pcg
from dpcli.cli.app import main
sys.argv = ["dpcli", *sys.argv[1:]]
main()
"""


def per_second(work: Callable[[], object], count: int, repeat: int) -> float:
    """count / median wall time of ``work``."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return count / statistics.median(times)


def raw_draws(repeat: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    counts = np.full(1_000_000, 50, dtype=np.int64)
    values = np.linspace(-1e3, 1e3, 1_000_000)
    for name, make in GENERATORS.items():
        g = make()
        out[name] = {
            "uniform doubles": per_second(lambda g=g: g.random(10_000_000), 10_000_000, repeat),
            "geometric": per_second(lambda g=g: g.geometric(0.01, 2_000_000), 2_000_000, repeat),
            "discrete Laplace (counts)": per_second(
                lambda g=g: discrete_laplace_mechanism(counts, sensitivity=2, epsilon=1.0, rng=g),
                counts.size, repeat),
            "grid Laplace (real vector)": per_second(
                lambda g=g: laplace_mechanism(values, sensitivity=2.0, epsilon=1.0, rng=g,
                                              changes=2), values.size, repeat),
            "discrete heavy-tailed (γ=4, t=100)": per_second(
                lambda g=g: discrete_heavy_tailed_noise(200_000, gamma=4.0, scale=100.0, rng=g),
                200_000, repeat),
        }
    return out


def opendp_draws(repeat: int) -> dict[str, float] | None:
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")
    size = 20_000
    real = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=float, nan=False)),
                             dp.l1_distance(T=float), scale=1.0)
    whole = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int),
                              scale=1.0)
    reals, ints = [0.5] * size, [5] * size
    return {"Laplace on a float vector": per_second(lambda: real(reals), size, repeat),
            "discrete Laplace on an int vector": per_second(lambda: whole(ints), size, repeat),
            "version": dp.__version__ if hasattr(dp, "__version__") else None}


def end_to_end(repeat: int) -> dict[str, float]:
    data = ROOT / "sample_data" / "adult_train.parquet"
    times: dict[str, list[float]] = {"ChaCha20 (as shipped)": [], "PCG64 (patched)": []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name in ("adult.schema.yaml", "adult_taxonomy.json"):
            shutil.copy(ROOT / "configs" / name, folder)
        spec = (ROOT / "configs" / "demo.yaml").read_text().replace(
            "ledger: ../demo/ledger.jsonl", "ledger: ledger.jsonl").replace(
            "epsilon: 8.0 ", "epsilon: 1000.0 ")
        (folder / "demo.yaml").write_text(spec)
        dpcli = [sys.executable, "-m", "dpcli"]
        subprocess.run([*dpcli, "ledger", "init", "--spec", str(folder / "demo.yaml")],
                       check=True, capture_output=True)
        for i in range(repeat):
            args = ["train-nb", str(data), "--spec", str(folder / "demo.yaml"), "--epsilon",
                    "1", "--quiet"]
            for name, prefix in (("ChaCha20 (as shipped)", dpcli),
                                 ("PCG64 (patched)", [sys.executable, "-c", PCG_WRAPPER])):
                out = folder / f"nb_{i}_{len(times[name])}.json"
                start = time.perf_counter()
                subprocess.run([*prefix, *args, "--out", str(out)], check=True,
                               capture_output=True)
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    raw = raw_draws(args.repeat)
    odp = opendp_draws(args.repeat)
    e2e = end_to_end(args.repeat)
    lines = ["# rng_speed: the secure generator's cost and the float-safe samplers",
             "", "Draws per second (millions), median of "
             f"{args.repeat} runs, in-process, one thread:", ""]
    kinds = list(next(iter(raw.values())))
    lines.append("| generator | " + " | ".join(kinds) + " |")
    lines.append("|---|" + "---:|" * len(kinds))
    for name, row in raw.items():
        lines.append(f"| {name} | " + " | ".join(f"{row[k] / 1e6:.2f}" for k in kinds) + " |")
    lines.append("")
    if odp is None:
        lines.append("OpenDP: not installed here (pip install opendp), skipped.")
    else:
        lines.append(f"OpenDP {odp['version']} exact samplers, values per second: "
                     + "; ".join(f"{k}: {v:,.0f}" for k, v in odp.items() if k != "version"))
    lines += ["", f"End to end, `dpcli train-nb` on sample_data/adult_train.parquet (3,000 rows, "
              f"global method), median wall time of {args.repeat} fresh processes:", ""]
    lines += [f"- {name}: {seconds:.2f} s" for name, seconds in e2e.items()]
    payload = {"environment": environment("randomgen", "opendp"), "draws_per_second": raw,
               "opendp_per_second": odp, "train_nb_seconds": e2e, "repeat": args.repeat}
    write_results(args.out, "rng_speed", "\n".join(lines), payload)
    print("\n".join(lines))
    print(json.dumps(e2e))


if __name__ == "__main__":
    main()
