"""select-features speed: the dpcli CLI score pass on 30,000-word token lists vs DuckDB and pandas.

Issue goal: "the score pass of `dpcli select-features` must handle 30,000+
binary/token features and 10^6 rows in one streaming pass".

Data (synthetic, generated once and cached in --workdir): N rows (10^5 and
10^6 by default) of a ``tokens`` list<string> column over a 30,000-word
vocabulary of made-up words (3-10 letters) with Zipf word frequencies
(p ∝ 1/(rank + 1)^1.1): each row gets a target of 5-30 distinct words
(uniform) and keeps the first that many distinct words of twice as many Zipf
draws, so a row has no repeated word and rarely falls short of its
target (0.01% do). Every token is in the vocabulary. ``label`` (0/1, int64) is
Bernoulli(sigmoid(-0.7 + 1.5·#positive signal words - 1.5·#negative signal
words in the row)), 5 signal words of each kind at Zipf ranks 20-2,000.
Parquet, zstd, row groups of --row-group-rows rows. The work folder also gets
the vocabulary file, a spec and schema modelled on configs/tweets.yaml
(``vocabulary: vocab.txt``, ``max_per_row: 24``, classes [0, 1], positive 1,
ε = 1000, ledger in the work folder); each invocation starts a fresh ledger
with ``dpcli ledger init --spec`` (once).

Measured, each in a fresh process per run:

* ``dpcli select-features FILE --spec SPEC --out OUT --epsilon 0.1 --seed 1
  --quiet`` with ``--score tc --method topk --k 500``, ``--score tc --method
  threshold --threshold 1000 --k 500`` and ``--score ig --method topk --k
  500``: the CLI end to end (interpreter start, imports, spec and its
  30,000-word vocabulary, structure check, pre-charge validation pass,
  keyed input digest of the file, ledger reservation, the counting pass with
  per-row dedupe and the random 24-word cap, scores, selection, output,
  ledger completion). The selection file is checked to hold 1-500 words;
* ``dpcli library (count pass only)``: the same counting pass in-process
  (``LocalEngine().compute`` of ``feature_selection.request``), no CLI, no
  validation pass, no digest, no selection: what the CLI adds on top;
* ``duckdb``: ``SELECT label, w, count(*) FROM (SELECT label, unnest(tokens)
  AS w FROM read_parquet(FILE)) GROUP BY ALL`` (DuckDB refuses to group on an
  unnest in the same SELECT), fetched with ``fetchall()``, with DuckDB's default
  threads (all usable CPUs) and with ``SET threads = 1``. It neither dedupes
  nor caps a row's words and has no vocabulary lookup (same counts here only
  because the generator writes distinct in-vocabulary words);
* ``duckdb, distinct + cap 24``: the same with ``list_slice(list_distinct(
  tokens), 1, 24)``: per-row dedupe and a 24-word cap (the first 24 of
  list_distinct's order, not a uniformly random 24), so it counts exactly as
  many (row, word) pairs as dpcli;
* ``pyarrow + pandas``: ``pq.read_table`` of both columns into pandas with
  Arrow-backed dtypes, ``DataFrame.explode("tokens")``, ``groupby(["label",
  "tokens"]).size()`` — all in memory, no dedupe, no cap (skipped above
  --pandas-max-rows).

Every worker reports the number of (row, word) pairs it counted, checked
against the generator's totals (dpcli and the capped DuckDB query: Σ
min(words, 24); the others: Σ words).

Each measurement is one process started by a small wrapper process, which
times it (wall clock, end to end) and reads its peak RSS from
``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` (the measured process is the
wrapper's only child; Linux keeps the pre-exec peak of the forked wrapper in
that figure, about 10 MB). Python workers also report their in-process time
(after imports) and /proc/self/status VmHWM. The --repeat runs of the
tools at one size are interleaved round-robin, so that a background job
slows all of them alike; medians (and minimum wall) over the runs, peak RSS
the largest of them. Timings are not asserted. The 1-minute
load average is recorded before and after: on a shared machine another job
may be competing for the same cores. The report ends with notes, computed
from the figures, on where dpcli loses (time, peak RSS) and where its time
goes.

    python benchmarks/fs_speed.py                     # 10^5 and 10^6 rows, ~2 min on 2 cores
    python benchmarks/fs_speed.py --sizes 100000 --repeat 1   # quick run
    python benchmarks/fs_speed.py --rows 3000000 --pandas-max-rows 0   # one larger point

Data generation takes about 10 s for 10^6 rows the first time (cached in
--workdir, default $TMPDIR/dpcli-fs-speed). Run it from the benchmark venv
(benchmarks/requirements.txt) for the DuckDB rows; without duckdb they are
skipped with a message. Writes benchmarks/results/fs_speed.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import dpcli_command, environment, run_once

ROOT = Path(__file__).resolve().parents[1]
SIZES = (100_000, 1_000_000)
VOCAB_SIZE = 30_000
ZIPF_S = 1.1
MIN_WORDS, MAX_WORDS = 5, 30
CAP = 24  # max_per_row in the schema
SIGNAL_POS = (20, 60, 150, 400, 1000)  # Zipf ranks (0-based) of the label's signal words
SIGNAL_NEG = (30, 90, 250, 700, 2000)
GENERATOR = 1  # bump when the data changes: the cache key
K = 500
LIBRARY_ROW = "dpcli library (count pass only)"
DUCK_ALL = "duckdb unnest + GROUP BY (all threads)"
DUCK_ONE = "duckdb unnest + GROUP BY (1 thread)"
DUCK_CAP = "duckdb, list_distinct + cap 24 (1 thread)"
PANDAS_ROW = "pyarrow + pandas explode + groupby"
CLI_RUNS = {
    "dpcli select-features tc topk (CLI)": ["--score", "tc", "--method", "topk", "--k", str(K)],
    "dpcli select-features tc threshold (CLI)": ["--score", "tc", "--method", "threshold",
                                                 "--threshold", "1000", "--k", str(K)],
    "dpcli select-features ig topk (CLI)": ["--score", "ig", "--method", "topk", "--k", str(K)],
}

VMHWM = """
elapsed = time.perf_counter() - t0
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
print(json.dumps({"inproc_s": elapsed, "vmhwm_mb": int(hwm.split()[1]) / 1024, "check": check,
                  **globals().get("extra", {})}))
"""

LIBRARY = """
import json, sys, time
import numpy as np
from dpcli.algorithms import feature_selection as fs
from dpcli.data import DataSource
from dpcli.spec import load_spec
from dpcli.stats import LocalEngine
PATH, SPEC = sys.argv[1], sys.argv[2]
rss = [l for l in open("/proc/self/status") if l.startswith("VmRSS")][0]
extra = {"import_rss_mb": int(rss.split()[1]) / 1024}
t0 = time.perf_counter()
spec = load_spec(SPEC)
cfg = fs.FSConfig(score="tc", method="topk", k=500)
cols = fs.scored_columns(spec.schema, (), "tc")
schema = fs.selection_schema(spec.schema, cols, None)
stats = LocalEngine().compute(DataSource(PATH, schema), fs.request(schema, cols, cfg),
                              rng=np.random.default_rng(0))
check = int(sum(stats.contingency[c].sum() for c in cols))
""" + VMHWM

DUCKDB = """
import json, sys, time
import duckdb
PATH, THREADS, CAPPED = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
t0 = time.perf_counter()
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")  # it would print on stdout
if THREADS:
    con.execute(f"SET threads = {THREADS}")
words = "list_slice(list_distinct(tokens), 1, 24)" if CAPPED else "tokens"
res = con.execute(f"SELECT label, w, count(*) AS n FROM (SELECT label, unnest({words}) AS w "
                  "FROM read_parquet(?)) GROUP BY ALL", [PATH]).fetchall()
check = sum(r[2] for r in res)
""" + VMHWM

PANDAS = """
import json, sys, time
import pandas as pd
import pyarrow.parquet as pq
PATH = sys.argv[1]
t0 = time.perf_counter()
df = pq.read_table(PATH, columns=["tokens", "label"]).to_pandas(types_mapper=pd.ArrowDtype)
counts = df.explode("tokens").groupby(["label", "tokens"], observed=True).size()
check = int(counts.sum())
""" + VMHWM


# ----------------------------------------------------------------------------- data
def make_vocabulary(rng) -> list[str]:
    """VOCAB_SIZE distinct made-up lower-case words of 3-10 letters, in Zipf rank order."""
    import numpy as np

    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
    words: dict[str, None] = {}
    while len(words) < VOCAB_SIZE:
        lengths = rng.integers(3, 11, VOCAB_SIZE)
        chars = letters[rng.integers(0, 26, int(lengths.sum()))].tobytes().decode()
        ends = np.cumsum(lengths)
        for a, b in zip(ends - lengths, ends, strict=True):
            words.setdefault(chars[a:b])
    return list(words)[:VOCAB_SIZE]


def make_data(rows: int, folder: Path, vocab: list[str], row_group: int) -> tuple[Path, dict]:
    """The cached Parquet file for ``rows`` rows and its totals (generated if missing)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = folder / f"tokens_{rows}_g{GENERATOR}_rg{row_group}.parquet"
    meta_path = path.with_suffix(".meta.json")
    if path.exists() and meta_path.exists():
        return path, json.loads(meta_path.read_text())
    t0 = time.perf_counter()
    rng = np.random.default_rng([GENERATOR, rows])
    p = 1.0 / np.arange(1, VOCAB_SIZE + 1) ** ZIPF_S
    cdf = np.cumsum(p / p.sum())
    target = rng.integers(MIN_WORDS, MAX_WORDS + 1, rows)
    draws = 2 * target
    parent = np.repeat(np.arange(rows, dtype=np.int64), draws)
    code = np.minimum(np.searchsorted(cdf, rng.random(len(parent))), VOCAB_SIZE - 1)
    # first occurrence of each (row, word) in draw order, then the first `target` per row
    _, first = np.unique(parent * VOCAB_SIZE + code, return_index=True)
    first.sort()
    parent, code = parent[first], code[first]
    per_row = np.bincount(parent, minlength=rows)
    start = np.cumsum(per_row) - per_row
    keep = (np.arange(len(parent)) - start[parent]) < target[parent]
    parent, code = parent[keep], code[keep]
    words = np.bincount(parent, minlength=rows)
    offsets = np.zeros(rows + 1, dtype=np.int32)
    np.cumsum(words, out=offsets[1:])
    hits = np.zeros((rows, 2), dtype=np.int64)
    for j, ranks in enumerate((SIGNAL_POS, SIGNAL_NEG)):
        hits[:, j] = np.bincount(parent[np.isin(code, ranks)], minlength=rows)
    logit = -0.7 + 1.5 * hits[:, 0] - 1.5 * hits[:, 1]
    label = (rng.random(rows) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    tokens = pa.ListArray.from_arrays(pa.array(offsets),
                                      pa.array(vocab).take(pa.array(code.astype(np.int32))))
    table = pa.table({"tokens": tokens, "label": label})
    tmp = path.with_suffix(".part")
    pq.write_table(table, tmp, row_group_size=row_group, compression="zstd")
    tmp.rename(path)
    meta = {"rows": rows, "pairs": int(words.sum()),
            "pairs_capped": int(np.minimum(words, CAP).sum()),
            "rows_over_cap": int((words > CAP).sum()),
            "rows_short_of_target": int((words < target).sum()),
            "words_per_row_mean": float(words.mean()),
            "positive_rate": float(label.mean()),
            "distinct_words_used": int(np.count_nonzero(np.bincount(code,
                                                                    minlength=VOCAB_SIZE))),
            "parquet_mb": round(path.stat().st_size / 2**20, 2),
            "row_group_rows": row_group,
            "generate_s": round(time.perf_counter() - t0, 1)}
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    return path, meta


def make_spec(folder: Path, vocab: list[str]) -> Path:
    """vocab.txt, schema and spec (tweets.yaml's shape) in ``folder``; a fresh ledger."""
    import yaml

    (folder / "vocab.txt").write_text("\n".join(sorted(vocab)) + "\n")
    schema = {"missing": "error",
              "columns": {"tokens": {"type": "tokens", "vocabulary": "vocab.txt",
                                     "max_per_row": CAP, "missing": "impute"}}}
    (folder / "fs_speed.schema.yaml").write_text(yaml.safe_dump(schema, sort_keys=False))
    ledger = folder / "ledger.jsonl"
    spec = {"dataset": "fs-speed-benchmark",
            "description": "Synthetic Zipf token lists (benchmarks/fs_speed.py)",
            "budget": {"epsilon": 1000.0, "delta": 0.0},
            "ledger": str(ledger),
            "label": {"column": "label", "classes": [0, 1], "positive": 1},
            "schema": "fs_speed.schema.yaml"}
    path = folder / "fs_speed.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    for old in (ledger, Path(str(ledger) + ".key")):  # a throw-away ledger per invocation
        old.unlink(missing_ok=True)
    subprocess.run([*dpcli_command(), "ledger", "init", "--spec", str(path)], check=True,
                   capture_output=True, text=True)
    return path


# ---------------------------------------------------------------------------- timing
def check_selection(out: Path) -> int:
    """Words selected in a select-features output (1..K of VOCAB_SIZE expected); removes it."""
    payload = json.loads(out.read_text())["payload"]
    out.unlink()
    n = payload["n_selected"]
    if payload["candidates"] != VOCAB_SIZE or not 1 <= n <= K:
        raise RuntimeError(f"{out}: {n} selected of {payload['candidates']} candidates, "
                           f"expected 1..{K} of {VOCAB_SIZE}")
    return n


def measure(tools: dict[str, list[str]], repeat: int, timeout: float,
            selection: Path) -> dict[str, dict]:
    """Run every tool ``repeat`` times, round-robin (a background job then slows all alike).

    CLI runs (names with "(CLI)") are checked through their ``selection`` file.
    """
    runs: dict[str, list[dict]] = {name: [] for name in tools}
    stopped: set[str] = set()
    for _ in range(repeat):
        for name, cmd in tools.items():
            if name in stopped:
                continue
            r = run_once(cmd, timeout)
            if r.get("timeout"):
                stopped.add(name)
                continue
            if "(CLI)" in name:
                r["selected"] = check_selection(selection)
            runs[name].append(r)
    return {name: {"timeout": True, "timeout_s": timeout} if name in stopped
            else summarise(runs[name]) for name in tools}


def summarise(runs: list[dict]) -> dict:
    """Median wall (and in-process) time, minimum wall, largest peak RSS of ``runs``."""
    runs = sorted(runs, key=lambda r: r["wall_s"])
    mid = runs[len(runs) // 2]
    out = {"wall_s": mid["wall_s"], "wall_s_min": runs[0]["wall_s"],
           "wall_s_all": [round(r["wall_s"], 3) for r in runs],
           "peak_rss_mb": max(r["peak_rss_mb"] for r in runs)}
    if "selected" in mid:
        out["selected"] = [r["selected"] for r in runs]
    if "inproc_s" in mid:
        out["inproc_s"] = sorted(r["inproc_s"] for r in runs)[len(runs) // 2]
        out["vmhwm_mb"] = max(r["vmhwm_mb"] for r in runs)
        out["check"] = sorted({r["check"] for r in runs})
        if "import_rss_mb" in mid:
            out["import_rss_mb"] = max(r["import_rss_mb"] for r in runs)
    return out


# ----------------------------------------------------------------------------- notes
def where_dpcli_loses(results: list[dict], sizes: list[int]) -> list[str]:
    """Markdown bullets: dpcli's CLI and count pass against each baseline, per size."""
    short = {DUCK_ALL: "DuckDB (all threads)", DUCK_ONE: "DuckDB (1 thread)",
             DUCK_CAP: "DuckDB dedupe + cap (1 thread)", PANDAS_ROW: "pandas"}
    notes = []
    for n in sizes:
        row = {r["tool"]: r for r in results if r["rows"] == n and not r.get("timeout")}
        cli = [row[name] for name in CLI_RUNS if name in row]
        if not cli:
            continue
        fast = min(cli, key=lambda r: r["wall_s"])
        verdict: dict[str, dict[str, list[str]]] = {"loses": {}, "wins": {}}
        for name, label in short.items():
            if name not in row:
                continue
            for what, key in (("time", "wall_s"), ("peak RSS", "peak_rss_mb")):
                ratio = fast[key] / row[name][key]
                side = "loses" if ratio > 1 else "wins"
                shown = ratio if ratio > 1 else 1 / ratio
                verdict[side].setdefault(what, []).append(f"{shown:.1f}× vs {label}")
        parts = [f"{side} on {what} ({', '.join(items)})"
                 for side in ("loses", "wins") for what, items in verdict[side].items()]
        notes.append(f"- {n:,} rows, the fastest CLI configuration ({fast['tool']}: median "
                     f"{fast['wall_s']:.2f} s, "
                     f"{fast['peak_rss_mb']:.0f} MB) {'; '.join(parts)}.")
        lib = row.get(LIBRARY_ROW)
        if lib is not None and "inproc_s" in lib:
            slow = max(cli, key=lambda r: r["wall_s"])
            notes.append(
                f"- {n:,} rows, where the CLI's time goes: interpreter start and imports "
                f"(library worker, wall - in-process) {lib['wall_s'] - lib['inproc_s']:.2f} s; "
                f"spec, 30,000-word vocabulary and the count pass {lib['inproc_s']:.2f} s; CLI "
                "wall - library wall (CLI-only imports, pre-charge validation pass, keyed "
                f"digest, ledger, scores, selection) {fast['wall_s'] - lib['wall_s']:+.2f} to "
                f"{slow['wall_s'] - lib['wall_s']:+.2f} s (median differences; a negative one "
                "is run-to-run noise on a shared machine).")
    lib = {r["rows"]: r for r in results
           if r["tool"] == LIBRARY_ROW and not r.get("timeout") and "vmhwm_mb" in r}
    if lib:
        lo, hi = min(lib), max(lib)
        grow = (f"{lib[lo]['vmhwm_mb']:.0f} MB at {lo:,} rows and "
                if lo != hi else "")
        notes.append(f"- Memory: the count pass (VmHWM) peaks at {grow}"
                     f"{lib[hi]['vmhwm_mb']:.0f} MB at {hi:,} rows, of which "
                     f"{lib[hi]['import_rss_mb']:.0f} MB is the interpreter and imports before "
                     "any data is read. It streams 65,536-row batches; the rest is one batch's "
                     "encode temporaries and pyarrow's Parquet reader buffers, which grow "
                     "slowly with the number of row groups read.")
    return notes


# ------------------------------------------------------------------------------ main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--rows", type=int, default=None,
                        help="measure only this many rows (overrides --sizes)")
    parser.add_argument("--workdir", type=Path,
                        default=Path(tempfile.gettempdir()) / "dpcli-fs-speed",
                        help="cache of generated data, spec, vocabulary and ledger "
                             "(default: %(default)s)")
    parser.add_argument("--row-group-rows", type=int, default=131_072,
                        help="Parquet row group size of the generated files")
    parser.add_argument("--repeat", type=int, default=3, help="runs per cell (median)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds before one run is abandoned and reported as such")
    parser.add_argument("--pandas-max-rows", type=int, default=1_000_000,
                        help="skip pyarrow + pandas (all in memory) above this many rows")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    sizes = sorted({args.rows} if args.rows else set(args.sizes))
    try:
        import duckdb  # noqa: F401
        have_duckdb = True
    except ImportError:
        have_duckdb = False
        print("duckdb: skipped, not importable here; run from the benchmark venv "
              "(benchmarks/requirements.txt)", file=sys.stderr)

    import numpy as np

    t_start = time.perf_counter()
    env = environment(
        "pandas", "duckdb", loadavg_1min_start=round(os.getloadavg()[0], 2),
        peak_rss_method=("resource.getrusage(RUSAGE_CHILDREN).ru_maxrss in a one-shot wrapper "
                         "process (Python workers: also /proc/self/status VmHWM)"))
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    vocab = make_vocabulary(np.random.default_rng([GENERATOR, 0]))
    spec = make_spec(work, vocab)
    results: list[dict] = []
    data_meta: dict[int, dict] = {}
    runs_dir = Path(tempfile.mkdtemp(prefix="dpcli-fs-speed-out-"))
    try:
        for n in sizes:
            path, meta = make_data(n, work, vocab, args.row_group_rows)
            data_meta[n] = meta
            print(f"{n:,} rows: {meta['parquet_mb']:.1f} MB Parquet, {meta['pairs']:,} "
                  f"(row, word) pairs, {meta['rows_over_cap']:,} rows over the cap "
                  f"(generated in {meta['generate_s']} s)", file=sys.stderr, flush=True)
            out = runs_dir / "selection.json"
            tools: dict[str, tuple[list[str], int | None]] = {}
            for name, opts in CLI_RUNS.items():
                tools[name] = ([*dpcli_command(), "select-features", str(path), "--spec",
                                str(spec), "--out", str(out), *opts, "--epsilon", "0.1",
                                "--seed", "1", "--quiet"], None)
            tools[LIBRARY_ROW] = (
                [sys.executable, "-c", LIBRARY, str(path), str(spec)], meta["pairs_capped"])
            if have_duckdb:
                tools[DUCK_ALL] = (
                    [sys.executable, "-c", DUCKDB, str(path), "0", "0"], meta["pairs"])
                tools[DUCK_ONE] = (
                    [sys.executable, "-c", DUCKDB, str(path), "1", "0"], meta["pairs"])
                tools[DUCK_CAP] = (
                    [sys.executable, "-c", DUCKDB, str(path), "1", "1"], meta["pairs_capped"])
            if n <= args.pandas_max_rows:
                tools[PANDAS_ROW] = (
                    [sys.executable, "-c", PANDAS, str(path)], meta["pairs"])
            measured = measure({name: cmd for name, (cmd, _) in tools.items()}, args.repeat,
                               args.timeout, out)
            for name, (_, expected) in tools.items():
                r = {**measured[name], "tool": name, "rows": n,
                     "parquet_mb": meta["parquet_mb"]}
                if expected is not None and not r.get("timeout"):
                    if r.get("check") != [expected]:
                        raise RuntimeError(f"{name}: counted {r.get('check')} (row, word) "
                                           f"pairs, expected {expected:,}")
                    r["check"] = expected
                results.append(r)
                shown = "timeout" if r.get("timeout") else (
                    f"{r['wall_s']:.2f} s, {r['peak_rss_mb']:.0f} MB")
                print(f"  {name}: {shown}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(runs_dir, ignore_errors=True)
    env["loadavg_1min_end"] = round(os.getloadavg()[0], 2)
    env["total_seconds"] = round(time.perf_counter() - t_start, 1)

    base = {r["rows"]: r for r in results if r["tool"] == DUCK_ALL}
    for r in results:
        b = base.get(r["rows"])
        if not r.get("timeout"):
            r["rows_per_s"] = r["rows"] / r["wall_s"]
        if b and not r.get("timeout") and not b.get("timeout"):
            r["ratio_vs_duckdb_wall"] = r["wall_s"] / b["wall_s"]
            r["ratio_vs_duckdb_rss"] = r["peak_rss_mb"] / b["peak_rss_mb"]
    notes = where_dpcli_loses(results, sizes)

    def f(x, spec=".2f"):
        return "" if x is None else format(x, spec)

    lines = [f"# select-features score pass speed ({', '.join(f'{n:,}' for n in sizes)} rows "
             f"of synthetic Zipf token lists, {VOCAB_SIZE:,}-word vocabulary; median of "
             f"{args.repeat})", "",
             f"{env['date_utc']}; {env['cpus_usable']} usable CPUs (os.cpu_count() = "
             f"{env['cpu_count']}), {env['machine']}, Python {env['python']}, numpy "
             f"{env['numpy']}, pyarrow {env['pyarrow']}, pandas {env['pandas']}, duckdb "
             f"{env['duckdb']}, dpcli {env['dpcli']} (git {env['git_head']}"
             f"{', dpcli/ modified' if env['dpcli_tree_modified'] else ''}); "
             f"{env['total_seconds']} s in all; 1-min load average "
             f"{env['loadavg_1min_start']} at start, {env['loadavg_1min_end']} at end (another "
             "job on the machine may have shared the cores).", "",
             "| rows | Parquet MB | (row, word) pairs | rows over cap 24 | pairs after cap | "
             "mean words/row | positive rate | vocabulary words used |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for n, m in data_meta.items():
        lines.append(f"| {n:,} | {m['parquet_mb']:.1f} | {m['pairs']:,} | "
                     f"{m['rows_over_cap']:,} | {m['pairs_capped']:,} | "
                     f"{m['words_per_row_mean']:.1f} | {m['positive_rate']:.3f} | "
                     f"{m['distinct_words_used']:,} |")
    lines += ["", "Wall = the measured process end to end (interpreter start and imports "
              "included), median and minimum; in-process = after imports (Python workers only), "
              "median. Peak RSS: "
              f"{env['peak_rss_method']}. Ratio = wall / DuckDB's (all threads) at the same "
              "size (time and peak RSS). dpcli runs at ε = 0.1, --seed 1, k = 500, on a "
              "throw-away ledger.", "",
              "| tool | rows | wall s | wall s, min | in-process s | peak RSS MB | "
              "rows/s (wall) | ratio vs DuckDB (wall) | ratio vs DuckDB (RSS) |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        if r.get("timeout"):
            lines.append(f"| {r['tool']} | {r['rows']:,} | > {r['timeout_s']:.0f} (stopped) "
                         "| | | | | | |")
            continue
        lines.append(
            f"| {r['tool']} | {r['rows']:,} | {r['wall_s']:.2f} | {r['wall_s_min']:.2f} | "
            f"{f(r.get('inproc_s'))} | "
            f"{r['peak_rss_mb']:.0f} | {r['rows_per_s']:,.0f} | "
            f"{f(r.get('ratio_vs_duckdb_wall'), '.1f')} | "
            f"{f(r.get('ratio_vs_duckdb_rss'), '.1f')} |")
    lines += ["", "Where dpcli loses (computed from the table above):", "", *notes]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        out_dir = ROOT / "benchmarks" / "results"
        out_dir.mkdir(parents=True, exist_ok=True)
        payload = {"environment": env, "sizes": sizes, "repeat": args.repeat,
                   "data": {str(n): m for n, m in data_meta.items()}, "results": results,
                   "notes": notes}
        (out_dir / "fs_speed.json").write_text(json.dumps(payload, indent=2,
                                                          ensure_ascii=False) + "\n")
        (out_dir / "fs_speed.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
