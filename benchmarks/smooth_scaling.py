"""Smooth sensitivity of trimmed mean / variance: dpcli's O(n log n) bound vs an O(n²) reference.

dpcli (dpcli/mechanisms/smooth_stats.py): sort, then S = max_k e^(-βk)·Â(k)
for the trimmed mean and the trimmed variance, with Â(k) in O(1) per k and
the maximum stopped at the first k with e^(-βk)·G <= the running maximum.
Timed: sort + both smooth sensitivities, for n = 10^3 .. 10^7 log-normal
values clamped to [0, 100], m = 5% of n, β = 0.01 and 0.001. K is the
number of distances examined.

Reference (timing only): the quadratic core of Zafarani & Clifton's variance
calibration (Theorem 7 style): for every distance k = 0..w, the k-maximal
variance of the trimmed window — slide a block of k consecutive sorted
values over the window and replace it by t copies of L and k - t copies of
U, with the best t for each block (the variance is concave in t, so its
integer maximiser is next to t* where the mean hits (L+U)/2). Prefix sums
make each (k, block) pair O(1), so each k is O(w) and all k together O(n²)
(evaluated as 2-D numpy blocks, so the quadratic term is what is timed). It is NOT
a calibration dpcli uses (it was derived for a fixed-size relation, not for
dpcli's edit relation on class samples); it is here to show the growth rate.

    python benchmarks/smooth_scaling.py            # about a minute on 2 cores

Prints a table and writes benchmarks/results/smooth_scaling.{md,json}.
Timings are wall-clock minima over --repeat runs; they are not asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dpcli.mechanisms.smooth_stats import (  # noqa: E402
    smooth_trimmed_mean_with_distances,
    smooth_trimmed_variance_with_distances,
)

LOWER, UPPER = 0.0, 100.0


def make_values(n: int, seed: int) -> np.ndarray:
    """Log-normal values (median e^3 ≈ 20) clamped to [0, 100], unsorted."""
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(3.0, 0.8, n), LOWER, UPPER)


def time_dpcli(values: np.ndarray, beta: float, repeat: int) -> dict:
    m = int(0.05 * values.size)
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        x = np.sort(values)
        t1 = time.perf_counter()
        s_mean, k_mean = smooth_trimmed_mean_with_distances(x, m=m, lower=LOWER, upper=UPPER,
                                                            beta=beta)
        s_var, k_var = smooth_trimmed_variance_with_distances(x, m=m, lower=LOWER, upper=UPPER,
                                                              beta=beta)
        t2 = time.perf_counter()
        run = {"sort_s": t1 - t0, "smooth_s": t2 - t1, "total_s": t2 - t0}
        if best is None or run["total_s"] < best["total_s"]:
            best = run
    return best | {"n": int(values.size), "m": m, "beta": beta, "S_mean": s_mean,
                   "S_variance": s_var, "K_mean": k_mean, "K_variance": k_var}


def k_maximal_variances(window: np.ndarray, lower: float, upper: float,
                        block: int = 1 << 16) -> np.ndarray:
    """For k = 0..w: the largest variance reachable by replacing k values of the sorted
    window with bounds (a block of k consecutive values, t of them -> L, k - t -> U).

    Θ(w²) work: every (k, start) pair is evaluated, in 2-D numpy blocks of about
    ``block`` pairs so that Python overhead does not hide the quadratic term.
    """
    w = window.size
    p1 = np.concatenate(([0.0], np.cumsum(window)))
    p2 = np.concatenate(([0.0], np.cumsum(window * window)))
    result = np.empty(w + 1)
    first = 0
    while first <= w:
        start = np.arange(w - first + 1)[None, :]  # block starts valid for the smallest k
        k = np.arange(first, min(first + max(1, block // start.size), w + 1))[:, None]
        valid = start <= w - k
        end = np.minimum(start + k, w)
        keep_sum = p1[start] + (p1[w] - p1[end])
        keep_sq = p2[start] + (p2[w] - p2[end])
        # the variance is concave in t; its real maximiser puts the mean at (L+U)/2
        t_real = (keep_sum + k * upper - w * (lower + upper) / 2) / (upper - lower)
        best = np.full(keep_sum.shape, -np.inf)
        for t in (np.floor(t_real), np.ceil(t_real)):
            t = np.clip(t, 0, k)
            total = keep_sum + t * lower + (k - t) * upper
            squares = keep_sq + t * lower**2 + (k - t) * upper**2
            best = np.maximum(best, squares / w - (total / w) ** 2)
        result[first:first + k.size] = np.where(valid, best, -np.inf).max(axis=1)
        first += k.size
    return result


def time_reference(values: np.ndarray, repeat: int) -> dict:
    m = int(0.05 * values.size)
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        x = np.sort(values)
        maximal = k_maximal_variances(x[m:x.size - m], LOWER, UPPER)
        elapsed = time.perf_counter() - t0
        best = elapsed if best is None else min(best, elapsed)
    return {"n": int(values.size), "m": m, "total_s": best, "K": int(maximal.size),
            "max_variance_at_k1": float(maximal[1])}


def slope(rows: list[dict], key: str = "total_s") -> float:
    n = np.log([r["n"] for r in rows])
    t = np.log([r[key] for r in rows])
    return float(np.polyfit(n, t, 1)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+",
                        default=[10**3, 10**4, 10**5, 10**6, 10**7])
    parser.add_argument("--betas", type=float, nargs="+", default=[0.01, 0.001])
    parser.add_argument("--reference-sizes", type=int, nargs="+", default=[10**3, 3 * 10**3, 10**4])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()

    started = time.perf_counter()
    ours = []
    for n in args.sizes:
        values = make_values(n, args.seed)
        repeat = args.repeat if n < 10**7 else max(1, min(args.repeat, 2))
        for beta in args.betas:
            ours.append(time_dpcli(values, beta, repeat))
            print(f"dpcli n={n:,} beta={beta}: {ours[-1]['total_s']:.4f} s", file=sys.stderr)
    reference = []
    for n in args.reference_sizes:
        reference.append(time_reference(make_values(n, args.seed), max(1, args.repeat - 1)))
        print(f"reference n={n:,}: {reference[-1]['total_s']:.3f} s", file=sys.stderr)

    slopes = {}
    for beta in args.betas:
        rows = [r for r in ours if r["beta"] == beta]
        slopes[f"dpcli_beta={beta}"] = slope(rows) if len(rows) > 1 else None
        large = [r for r in rows if r["n"] >= 10**5]
        slopes[f"dpcli_beta={beta}_n>=1e5"] = slope(large) if len(large) > 1 else None
    slopes["reference"] = slope(reference) if len(reference) > 1 else None
    wall = time.perf_counter() - started

    lines = [
        f"Smooth sensitivity of the trimmed mean + variance, log-normal values clamped to "
        f"[0, 100], m = 5% of n ({platform.machine()}, Python {platform.python_version()}, "
        f"numpy {np.__version__}); minimum of {args.repeat} runs",
        "",
        "dpcli: sort + S_mean + S_variance (K = distances examined)",
        "",
        "| n | β | sort (ms) | S mean + var (ms) | total (ms) | K mean | K var | S mean | S var |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in ours:
        lines.append(f"| {r['n']:,} | {r['beta']:g} | {1e3 * r['sort_s']:.3f} | "
                     f"{1e3 * r['smooth_s']:.3f} | {1e3 * r['total_s']:.3f} | "
                     f"{r['K_mean']:,} | {r['K_variance']:,} | "
                     f"{r['S_mean']:.3g} | {r['S_variance']:.3g} |")
    lines += [
        "",
        "O(n²) reference (paper style: k-maximal variance for every k = 0..w, sort included)",
        "",
        "| n | total (s) | distances |",
        "| ---: | ---: | ---: |",
    ]
    for r in reference:
        lines.append(f"| {r['n']:,} | {r['total_s']:.3f} | {r['K']:,} |")
    lines += ["", "Fitted growth exponents (log-log slope of total time against n):", ""]
    for name, value in slopes.items():
        lines.append(f"- {name}: {'n/a' if value is None else f'{value:.2f}'}")
    lines += ["", f"Whole run: {wall:.1f} s wall clock."]
    text = "\n".join(lines)
    print(text)

    args.out.mkdir(parents=True, exist_ok=True)
    payload = {"machine": platform.machine(), "python": platform.python_version(),
               "numpy": np.__version__, "repeat": args.repeat, "seed": args.seed,
               "lower": LOWER, "upper": UPPER, "trim_fraction": 0.05, "dpcli": ours,
               "reference": reference, "slopes": slopes, "wall_s": wall}
    (args.out / "smooth_scaling.json").write_text(json.dumps(payload, indent=2) + "\n")
    (args.out / "smooth_scaling.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
