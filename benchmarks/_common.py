"""What the benchmark scripts share: the run environment, AUC, the tweets split, timing,
the skip when the shared data is missing, and writing the results files.

Not a benchmark (``run_all.py`` skips files whose name starts with "_").
Scripts run as ``python benchmarks/NAME.py`` import it as ``_common``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data"

# Runs a command in a one-shot process so that RUSAGE_CHILDREN is that command's peak RSS.
WRAPPER = """
import json, resource, subprocess, sys, time
cmd = json.loads(sys.argv[1])
t0 = time.perf_counter()
out = subprocess.run(cmd, capture_output=True, text=True, timeout=float(sys.argv[2]))
wall = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024   # KiB -> MiB
print(json.dumps({"wall_s": wall, "peak_rss_mb": peak, "returncode": out.returncode,
                  "stdout": out.stdout[-4000:], "stderr": out.stderr[-4000:]}))
"""

_NAMES = {"sklearn": "scikit-learn"}


def environment(*modules: str, **extra: Any) -> dict:
    """Date, CPUs, platform, versions (dpcli, numpy, pyarrow + ``modules``) and git state."""
    def version(mod: str) -> str | None:
        try:
            return __import__(mod).__version__
        except Exception:
            return None

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                                  check=True).stdout.strip()
        except Exception:
            return ""

    return {
        "date_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "machine": platform.machine(), "python": platform.python_version(),
        "platform": platform.platform(),
        **{_NAMES.get(m, m): version(m) for m in ("dpcli", "numpy", "pyarrow", *modules)},
        "git_head": git("rev-parse", "--short", "HEAD"),
        "dpcli_tree_modified": bool(git("status", "--porcelain", "dpcli")),
        **extra,
    }


def data_missing(script: str, paths: Iterable[Path], option: str = "--data") -> bool:
    """Whether a file of ``paths`` is missing; if so, says on stderr that ``script`` is skipped.

    Skipped, not failed: `make bench` runs on machines without ../shared.
    """
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        print(f"{script}: skipped, data not found: " + ", ".join(map(str, missing))
              + f" (pass {option}; the shared data is not shipped with dpcli)", file=sys.stderr)
    return bool(missing)


def write_results(out: Path, name: str, text: str, payload: dict) -> None:
    """Writes ``out``/``name``.json (``payload``, UTF-8) and ``out``/``name``.md (``text``)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    (out / f"{name}.md").write_text(text + "\n")


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Area under the ROC curve by the rank formula (ties get average ranks)."""
    from scipy.stats import rankdata

    pos = positive.astype(bool)
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def split_tweets(path: Path, folder: Path, seed: int = 0,
                 test_fraction: float = 0.2) -> tuple[Path, Path, int, int]:
    """The fixed train/test split of the tweets (tokens, label) as Parquet files in ``folder``."""
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=["tokens", "label"])
    n = table.num_rows
    perm = np.random.default_rng(seed).permutation(n)
    n_test = round(test_fraction * n)
    train, test = folder / "train.parquet", folder / "test.parquet"
    pq.write_table(table.take(np.sort(perm[n_test:])), train)
    pq.write_table(table.take(np.sort(perm[:n_test])), test)
    return train, test, n - n_test, n_test


def dpcli_command() -> list[str]:
    """The dpcli beside this interpreter, else ``python -m dpcli``."""
    exe = Path(sys.executable).parent / "dpcli"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "dpcli"]


def run_once(cmd: list[str], timeout: float) -> dict:
    """Wall time and peak RSS of ``cmd``, plus the last JSON line it printed (if any)."""
    out = subprocess.run([sys.executable, "-c", WRAPPER, json.dumps(cmd), str(timeout)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        if "TimeoutExpired" in out.stderr:
            return {"timeout": True}
        raise RuntimeError(f"wrapper failed for {cmd}:\n{out.stderr}")
    r = json.loads(out.stdout)
    if r["returncode"] != 0:
        raise RuntimeError(f"{cmd} exited {r['returncode']}:\n{r['stderr']}")
    reports = [line for line in r["stdout"].splitlines() if line.startswith("{")]
    if reports:
        r.update(json.loads(reports[-1]))
    return {k: v for k, v in r.items() if k not in ("stdout", "stderr", "returncode")}
