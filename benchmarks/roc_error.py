"""Private ROC curves (PriROC): how far is the private curve from the true one?

The comparison of Stoddard, Chen & Machanavajjhala (2014) §5.2 (their
Figure 7 / Table 1), re-run with dpcli. Error measures, per run:

* area: ∫ |TPR_private(f) − TPR_true(f)| df over FPR f ∈ [0, 1] (the
  paper's "L1 error" of the curve), computed exactly over the two polylines
  by ``roc.area_between`` (vertical runs reached at their foot, crossings
  handled);
* |ΔAUC|: |AUC_private − AUC_true| (≤ the area in every run).

Cells: the median over --reps runs (noise seeds 0 .. reps-1,
``np.random.default_rng(seed)`` passed to ``roc.private_roc``), for
ε ∈ {0.1, 0.25, 0.5, 1}; plus one run at ε = 1e9 ("no noise": the error of
the method's bins alone).

Scores: ONE model, dpcli naive Bayes (``global``, all 14 columns of
configs/adult.yaml) trained once on ../shared/data/adult_train.parquet at
ε = 1, in process as ``dpcli train-nb`` does it (statistics pass, ``nb.fit``,
model envelope) with noise from ``make_rng(0)``: the CLI's ``--seed`` keys its
stream with the ledger's secret key, which each benchmark run creates afresh,
so a CLI-trained model would differ from run to run. ``dpcli predict`` then
gives P(label = 1) on UCI Adult's test file (all 15,060 rows) and on a fixed
2,000-row random sample of it (``np.random.default_rng(0).choice`` without
replacement). The score range [0, 1] is public. The true curve is the exact
ROC over every distinct score (``roc.true_roc``, not private). Specs are
copies of configs/adult.yaml in a temporary folder (own dataset id, huge
budget, ledger in that folder, never the repository's).

Methods (``roc.ROCConfig``; the rows of every table, with the bins they use;
every row's ``cfg.parameters(n)`` is checked against its label and written to
the JSON):

1. Laplace, 10 fixed bins: fixed-space with α = 10/n, each cumulative count
   noised directly (the paper's Laplace baseline: few thresholds);
2. Laplace, RecursiveMedians k = 3: 8 data-chosen bins, Laplace counts
   (``thresholds="recursive-medians", k=3``);
3. FixedSpace α = 1, Privelet (the paper's FixedSpace: n equal bins);
4. FixedSpace α = 1, hierarchical (b = 16 tree, constrained inference);
5. RecursiveMedians k = 10, Privelet (the paper's RecursiveMedians,
   ``thresholds="recursive-medians", k=10, counts="privelet"``);
6. RecursiveMedians, k rule, hierarchical
   (``ROCConfig(thresholds="recursive-medians")``: 2^k bins at noisy medians,
   k = clamp(ceil(log2 n) − 3, 1, 10), 20% of ε for the medians, hierarchical
   counts, b = 16);
7. dpcli's default (``ROCConfig()``): 2^k EQUAL bins over [0, 1] with the same
   k rule (fixed-space, data-independent), hierarchical counts (b = 16), all
   of ε on the counts. Rows 6 and 7 differ only in whether 20% of ε buys noisy
   medians as thresholds.

For every recursive-medians run the script also counts the fallbacks: the
thresholds that are their part's grid midpoint G_ceil((a+b)/2) on dpcli's
2^20-cell grid of [0, 1] because the part (G_a, G_b] had fewer than two cells
(no median drawn) or its noisy median fell outside (G_a, G_b) or rounded onto
a or b. They are read off the released thresholds (the in-order walk of the
tree of parts) and matched, part by part, against a wrapper of
``roc.FineHistogram.noisy_median`` (restored afterwards) that logs each call's
part and raw median; ``MedianFallbacks`` has the details. Reported for row 6 on
the full test file, all in the JSON.

Parameters: methods 1-5 are fixed a priori (the paper's settings, or the
plainest variant); the k rule and the default thresholds (equal bins rather
than recursive medians) were chosen in dpcli on a validation split of
Adult's *training* data (``ROCConfig.levels``); nothing is chosen on the test
file. The last section re-runs that check: the training file split 80/20
(``default_rng(0)`` permutation), NB trained the same way on the 80%, and for
k = 3..11 2^k equal bins against 2^k recursive-median bins (both
hierarchical) on the 20% (6,032 rows) and on a 2,000-row sample of it
(--no-validation skips it).

Timing: the median wall time of one ``private_roc`` call per method on the
full test file (all its runs, every ε). Last, one run of the real CLI,
``dpcli roc`` at ε = 1 with the defaults, ``--seed 0`` and ``--compare-true``
(a spec copy that declares ``public_data: true`` and drops configs/adult.yaml's
``roc`` section, so the built-in defaults apply; checked), draws the PNG
shown in the results (ledger-keyed seed: one more draw, not reproducible
across runs).

    python benchmarks/roc_error.py              # about 2 minutes on 2 cores
    python benchmarks/roc_error.py --quick      # 3 seeds

Prints Markdown tables and a reading of them; writes
benchmarks/results/roc_error.{md,json} and roc_error_adult_eps1.png
(folder: --out).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import DEFAULT_DATA, auc, data_missing, dpcli_command, environment

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SPEC = ROOT / "configs" / "adult.yaml"
FILES = ("adult_train.parquet", "adult_test.parquet")
EPSILONS = (0.1, 0.25, 0.5, 1.0)
MODEL_EPS = 1.0
MODEL_SEED = 0
SAMPLE = 2_000
SAMPLE_SEED = 0
PNG_NAME = "roc_error_adult_eps1.png"
PERFECT = 1 - 1e-9                  # a released AUC this high: the perfect-classifier curve
NO_NOISE_EPS = 1e9                  # "no noise": the binning error alone
VAL_FRACTION = 0.2
VAL_SEED = 0
VAL_KS = tuple(range(3, 12))
VAL_STRATEGIES = ("equal_bins", "recursive_medians")  # both with hierarchical counts

LAPLACE10 = "Laplace, 10 fixed bins"
LAPLACE_RM = "Laplace, RecursiveMedians k=3"
FS_PRIVELET = "FixedSpace α=1, Privelet"
FS_HIER = "FixedSpace α=1, hierarchical"
RM_PRIVELET = "RecursiveMedians k=10, Privelet (paper)"
RM_RULE = "RecursiveMedians, k rule, hierarchical"
DEFAULT = "dpcli default: 2^k equal bins, hierarchical"

# Stoddard et al. (2014) Table 1: median area (L1) error, SMS / Twitter
PAPER = {1.0: {"Laplace": (0.218, 0.073), "FixedSpace": (0.034, 0.065),
               "RecursiveMedians": (0.023, 0.055)},
         0.5: {"Laplace": (0.343, 0.108), "FixedSpace": (0.042, 0.094),
               "RecursiveMedians": (0.029, 0.063)},
         0.25: {"Laplace": (0.372, 0.211), "FixedSpace": (0.079, 0.151),
                "RecursiveMedians": (0.054, 0.102)},
         0.1: {"Laplace": (0.442, 0.340), "FixedSpace": (0.146, 0.229),
               "RecursiveMedians": (0.092, 0.203)}}


# ------------------------------------------------------------------ the model


def make_spec(folder: Path, name: str, *, public: bool = False) -> Path:
    """configs/adult.yaml minus its roc section: own dataset id, ε = 1e9, ledger in ``folder``."""
    import yaml

    raw = yaml.safe_load(SPEC.read_text())
    raw["dataset"] = f"roc-error-benchmark-{name}-{os.getpid()}"
    raw["budget"] = {"epsilon": 1e9, "delta": 0.0}
    raw["ledger"] = str(folder / f"{name}.jsonl")
    if isinstance(raw["schema"], str):
        raw["schema"] = str((SPEC.parent / raw["schema"]).resolve())
    if public:
        raw["public_data"] = True
    # without a roc section `dpcli roc --epsilon` runs with dpcli's built-in defaults, whatever
    # configs/adult.yaml sets there (cli_png checks the parameters it reports)
    raw.pop("roc", None)
    spec = folder / f"{name}.yaml"
    spec.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
    dpcli("ledger", "init", "--spec", spec)
    return spec


def dpcli(*args: object) -> str:
    out = subprocess.run([*dpcli_command(), *map(str, args)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"dpcli {' '.join(map(str, args))} exited {out.returncode}:\n"
                           f"{out.stderr}")
    return out.stdout


def train_model(train: Path, spec_path: Path, out: Path) -> None:
    """``dpcli train-nb`` in process, noise from ``make_rng(MODEL_SEED)``; a model envelope.

    Not the CLI: its ``--seed`` keys the stream with the ledger's secret key,
    which every benchmark run creates afresh, so the model would change from
    one run to the next.
    """
    from dpcli.algorithms import naive_bayes as nb
    from dpcli.budget import Budget
    from dpcli.data import DataSource
    from dpcli.io import dumps_json, envelope
    from dpcli.mechanisms import make_rng
    from dpcli.spec import load_spec
    from dpcli.stats import get_engine

    spec = load_spec(spec_path)
    schema, cols, cfg = spec.schema, spec.schema.names, nb.NBConfig()
    rng = make_rng(MODEL_SEED)
    stats = get_engine().compute(DataSource(train, schema), nb.request(schema, cols, cfg),
                                 rng=rng)
    plan = nb.plan(schema, cols, Budget(MODEL_EPS), cfg)
    model = nb.fit(stats, schema, cols, plan, cfg, rng)
    out.write_text(dumps_json(envelope(
        "naive_bayes", {**model.to_payload(), "breakdown": plan.to_json()},
        dataset=spec.dataset, spec_digest=spec.digest, epsilon=MODEL_EPS, delta=0.0,
        run_id="benchmark", seeded=True)))


def predictions(train: Path, test: Path, spec: Path, folder: Path,
                name: str) -> tuple[Path, Path]:
    """Train NB once (ε = 1, seeded) and score ``test`` with ``dpcli predict``."""
    model, pred = folder / f"{name}_nb.json", folder / f"{name}_pred.parquet"
    train_model(train, spec, model)
    dpcli("predict", model, test, "--out", pred, "-q")
    return model, pred


def load_scores(pred: Path) -> tuple[np.ndarray, np.ndarray]:
    import pyarrow.parquet as pq

    t = pq.read_table(pred, columns=["label", "score"])
    scores = np.clip(t["score"].to_numpy().astype(np.float64), 0.0, 1.0)
    positive = np.array([str(v) == "1" for v in t["label"].to_pylist()])
    return scores, positive


# ----------------------------------------------------------------- the runs


def k_rule(n: int) -> int:
    """clamp(ceil(log2 n) − 3, 1, 10), written out here to check ``ROCConfig.levels``."""
    return max(1, min(10, math.ceil(math.log2(n)) - 3))


def methods(n: int) -> list[tuple[str, object]]:
    """The rows, each checked against what its label says (``cfg.parameters(n)``).

    The curve's methods compared with all of ε on the curve (``auc_share=0``), as in
    the paper; the AUC released directly is benchmarks/roc_auc_error.py's subject.
    """
    from dpcli.algorithms.roc import ROCConfig as Full

    def ROCConfig(**kwargs: object) -> Full:
        return Full(**kwargs, auc_share=0)  # type: ignore[arg-type]

    alpha10 = 10 / n
    if ROCConfig(thresholds="fixed-space", alpha=alpha10).bins(n) != 10:  # floor(10/n·n) = 9
        alpha10 = 10.5 / n
    rm, k = "recursive-medians", k_rule(n)
    rows = [
        (LAPLACE10, ROCConfig(thresholds="fixed-space", alpha=alpha10, counts="laplace")),
        (LAPLACE_RM, ROCConfig(thresholds=rm, k=3, counts="laplace")),
        (FS_PRIVELET, ROCConfig(thresholds="fixed-space", alpha=1.0, counts="privelet")),
        (FS_HIER, ROCConfig(thresholds="fixed-space", alpha=1.0, counts="hierarchical")),
        (RM_PRIVELET, ROCConfig(thresholds=rm, k=10, counts="privelet")),
        (RM_RULE, ROCConfig(thresholds=rm)),
        (DEFAULT, ROCConfig()),
    ]
    share, tree = {"threshold_share": 0.2}, {"branching": 16}
    expected: dict[str, dict] = {
        LAPLACE10: {"thresholds": "fixed-space", "counts": "laplace", "bins": 10,
                    "alpha": alpha10},
        LAPLACE_RM: {"thresholds": rm, "counts": "laplace", "bins": 8, "k": 3, **share},
        FS_PRIVELET: {"thresholds": "fixed-space", "counts": "privelet", "bins": n,
                      "alpha": 1.0},
        FS_HIER: {"thresholds": "fixed-space", "counts": "hierarchical", "bins": n,
                  "alpha": 1.0, **tree},
        RM_PRIVELET: {"thresholds": rm, "counts": "privelet", "bins": 1024, "k": 10, **share},
        RM_RULE: {"thresholds": rm, "counts": "hierarchical", "bins": 2 ** k, "k": k,
                  **share, **tree},
        DEFAULT: {"thresholds": "fixed-space", "counts": "hierarchical", "bins": 2 ** k,
                  "k": k, **tree},
    }
    for name, cfg in rows:
        expected[name]["auc_share"] = 0
        if cfg.parameters(n) != expected[name]:
            raise AssertionError(f"{name}: {cfg.parameters(n)} != {expected[name]}")
    return rows


class MedianFallbacks:
    """How many recursive-median thresholds fell back to their part's grid midpoint.

    ``roc.recursive_median_cells`` works on the cells of the fine grid
    G_j = lower + (upper − lower)·j/2^20 (``roc.FINE_BINS``): a part is a run
    of cells a..b−1, i.e. the scores in (G_a, G_b]. A part of at least two
    cells releases ``FineHistogram.noisy_median``; a release strictly inside
    (G_a, G_b) is rounded to the nearest grid index and kept if it is
    strictly between a and b. The threshold is the fallback, the grid
    midpoint G_ceil((a+b)/2), when the raw median fell outside (G_a, G_b),
    when it rounded onto a or b, or when the part has fewer than two cells
    (no interior grid point: no median, no noise draw).

    Two independent records per run. ``record`` reads the released
    thresholds: sorted, they are the in-order walk of the complete binary
    tree of parts (non-decreasing even where a part of < 2 cells repeats a
    threshold), so the node at level l (1 = the root) has sorted index
    j·2^(k−l+1) + 2^(k−l) − 1, and its part runs from the threshold 2^(k−l)
    places to its left (or the range's lower end) to the one 2^(k−l) places
    to its right (or the upper end); thresholds are mapped back to grid
    indices. Inside the ``with`` block ``roc.FineHistogram.noisy_median`` is
    wrapped (restored on exit) to log each call's part (a, b) and its raw
    median's fate: outside (G_a, G_b), rounded onto a or b, or kept at
    index r. ``record`` then walks the nodes in draw order (level by level,
    left to right): each part of >= 2 cells must match the next call's
    (a, b), each part of < 2 cells must have had no call, and each released
    index must be what the logged median implies (r if kept, else the grid
    midpoint); a run where anything differs is counted in
    ``runs_disagreeing``. The fallbacks are counted per node from this
    match, so a kept median that happens to land on the midpoint is not a
    fallback (``kept_at_midpoint``: the released values alone can not tell
    it from one; ``thresholds_at_midpoint`` counts both).
    """

    def __init__(self, lower: float = 0.0, upper: float = 1.0, cells: int | None = None) -> None:
        from dpcli.algorithms import roc

        self.lower, self.upper = lower, upper
        self.cells = roc.FINE_BINS if cells is None else cells
        self.levels: dict[int, list[bool]] = {}  # level -> one bool per threshold and run
        self.runs: list[dict[str, int]] = []  # per run, the counts of ``summary``
        self._log: list[tuple[int, int, str, int | None]] = []  # (a, b, fate, kept index)

    def __enter__(self) -> MedianFallbacks:
        from dpcli.algorithms import roc

        self._original = original = roc.FineHistogram.__dict__["noisy_median"]

        def counted(hist, a, b, *args, **kwargs):
            m = original(hist, a, b, *args, **kwargs)
            lo, hi = (float(v) for v in hist.points(np.array([a, b])))
            if not lo < m < hi:
                self._log.append((int(a), int(b), "outside", None))
            else:  # the rounding of roc.recursive_median_cells
                r = round((m - hist.lower) / (hist.upper - hist.lower) * hist.cells)
                kept = a < r < b
                self._log.append((int(a), int(b), "kept" if kept else "onto_end",
                                  r if kept else None))
            return m

        roc.FineHistogram.noisy_median = counted
        return self

    def __exit__(self, *exc) -> None:
        from dpcli.algorithms import roc

        roc.FineHistogram.noisy_median = self._original

    def record(self, cuts: np.ndarray, k: int) -> None:
        """One run's released thresholds (2^k − 1 of them), after its ``private_roc`` call."""
        from dpcli.algorithms import roc

        t = np.sort(np.asarray(cuts, dtype=np.float64))
        assert t.size == 2 ** k - 1
        cell = np.rint((t - self.lower) / (self.upper - self.lower) * self.cells).astype(np.int64)
        points = roc.grid_points(cell, lower=self.lower, upper=self.upper, cells=self.cells)
        assert np.array_equal(points, t), "a released threshold is not a grid point"
        log, calls = iter(self._log), len(self._log)
        counts = dict.fromkeys(("fallbacks", "thresholds_at_midpoint", "kept_at_midpoint",
                                "parts_without_median", "outside_part", "rounded_onto_end"), 0)
        consistent = True
        for level in range(1, k + 1):
            half = 2 ** (k - level)
            for i in range(half - 1, t.size, 2 * half):
                a = int(cell[i - half]) if i - half >= 0 else 0
                b = int(cell[i + half]) if i + half < t.size else self.cells
                j, mid = int(cell[i]), (a + b + 1) // 2
                ga, gb = roc.grid_points(np.array([a, b]), lower=self.lower, upper=self.upper,
                                         cells=self.cells)
                counts["thresholds_at_midpoint"] += j == mid
                if b - a < 2 or not ga < gb:  # no interior grid point: no call, the fallback
                    counts["parts_without_median"] += 1
                    fallback, expected = True, mid
                else:
                    call = next(log, None)
                    if call is None or call[:2] != (a, b):
                        consistent, fallback, expected = False, j == mid, j
                    else:
                        fate, kept = call[2], call[3]
                        fallback = fate != "kept"
                        counts["outside_part"] += fate == "outside"
                        counts["rounded_onto_end"] += fate == "onto_end"
                        counts["kept_at_midpoint"] += fate == "kept" and kept == mid
                        expected = mid if fallback else kept
                consistent &= j == expected
                self.levels.setdefault(level, []).append(fallback)
                counts["fallbacks"] += fallback
        consistent &= next(log, None) is None  # every call matched a part of >= 2 cells
        self.runs.append({**counts, "noisy_median_calls": calls,
                          "disagreeing": int(not consistent)})
        self._log = []

    def summary(self) -> dict:
        flat = [f for level in self.levels.values() for f in level]
        total = {key: sum(r[key] for r in self.runs) for key in self.runs[0]}
        return {"medians": len(flat), "fallbacks": int(sum(flat)),
                "fraction": float(np.mean(flat)),
                "fraction_by_level": [round(float(np.mean(self.levels[lv])), 6)
                                      for lv in sorted(self.levels)],
                # why: parts of < 2 cells (no call), raw medians outside their part (G_a, G_b),
                # raw medians rounded onto a or b; they add up to "fallbacks"
                "parts_without_median": total["parts_without_median"],
                "noisy_median_calls": total["noisy_median_calls"],
                "noisy_median_outside_part": total["outside_part"],
                "noisy_median_rounded_onto_end": total["rounded_onto_end"],
                # released thresholds at their part's grid midpoint = fallbacks + these
                "thresholds_at_midpoint": total["thresholds_at_midpoint"],
                "kept_at_midpoint": total["kept_at_midpoint"],
                # cross-check: runs whose released thresholds differ from what the wrapped
                # calls imply (the class docstring)
                "runs_disagreeing": total["disagreeing"]}


def private_runs(scores, positive, cfg, eps: float, reps: int, true) -> dict:
    """``reps`` private curves (seeds 0..reps-1): errors, private AUCs and the call times."""
    from dpcli.algorithms import roc
    from dpcli.budget import Budget

    n = int(scores.size)
    plan = roc.plan(cfg, n, Budget(eps))
    medians = cfg.thresholds == "recursive-medians"
    # equal bins: all of ε on the counts; recursive medians: 80% (20% buys the medians)
    counts_eps = float(plan.step("counts").budget.epsilon)
    assert math.isclose(counts_eps, eps * (1 - cfg.threshold_share if medians else 1.0))
    out: dict = {"area": [], "abs_auc_error": [], "auc": [], "seconds": []}
    equal = roc.fixed_space_thresholds(0.0, 1.0, cfg.bins(n))
    same_as_equal_bins = 0  # runs whose thresholds are exactly the 2^k equal bins
    with MedianFallbacks() as fallbacks:
        for seed in range(reps):
            t0 = time.perf_counter()
            curve, cuts = roc.private_roc(scores, positive, lower=0.0, upper=1.0, config=cfg,
                                          run_plan=plan, rng=np.random.default_rng(seed))
            out["seconds"].append(time.perf_counter() - t0)
            assert cuts.size == cfg.bins(n) - 1
            if medians:
                fallbacks.record(cuts, cfg.levels(n))
            same_as_equal_bins += bool(np.array_equal(cuts, equal))
            out["area"].append(roc.area_between(curve, true))
            out["abs_auc_error"].append(abs(curve.auc - true.auc))
            out["auc"].append(curve.auc)
    assert all(d <= a + 1e-9 for a, d in zip(out["area"], out["abs_auc_error"], strict=True))
    out["median_fallbacks"] = (
        {**fallbacks.summary(), "runs": reps, "runs_thresholds_equal_bins": same_as_equal_bins}
        if medians else None)
    return out


def cell(runs: dict, eps: float) -> dict:
    def q(v):
        return [round(float(x), 6) for x in np.quantile(v, [0.25, 0.75])]

    return {"epsilon": eps, "area_median": float(np.median(runs["area"])),
            "area_q25_q75": q(runs["area"]),
            "abs_auc_error_median": float(np.median(runs["abs_auc_error"])),
            "abs_auc_error_q25_q75": q(runs["abs_auc_error"]),
            "private_auc_median": float(np.median(runs["auc"])),
            "perfect_curve_runs": sum(a >= PERFECT for a in runs["auc"]),
            "area": [round(a, 6) for a in runs["area"]],
            "private_auc": [round(a, 6) for a in runs["auc"]],
            "abs_auc_error": [round(a, 6) for a in runs["abs_auc_error"]],
            "median_fallbacks": runs["median_fallbacks"]}


def run_size(label: str, scores: np.ndarray, positive: np.ndarray, epsilons, reps: int) -> dict:
    from dpcli.algorithms import roc

    n = int(scores.size)
    true = roc.true_roc(scores, positive)
    rows = []
    for name, cfg in methods(n):
        cells, seconds = {}, []
        for eps in epsilons:
            runs = private_runs(scores, positive, cfg, eps, reps, true)
            seconds += runs["seconds"]
            cells[f"{eps:g}"] = cell(runs, eps)
        # the same bins with noise of no consequence: what the binning alone costs
        flat = private_runs(scores, positive, cfg, NO_NOISE_EPS, 1, true)
        rows.append({"method": name, "bins": cfg.bins(n), "parameters": cfg.parameters(n),
                     "seconds_per_call_median": float(np.median(seconds)),
                     "calls_timed": len(seconds), "cells": cells,
                     "no_noise_area": flat["area"][0],
                     "no_noise_abs_auc_error": flat["abs_auc_error"][0]})
    return {"label": label, "n": n, "positives": int(positive.sum()),
            "distinct_scores": int(np.unique(scores).size), "true_auc": true.auc,
            "true_auc_rank_formula": auc(scores, positive), "rows": rows}


# ------------------------------------------------------------- validation


def validation(data_dir: Path, spec: Path, folder: Path, epsilons, reps: int) -> list[dict]:
    """The default k and thresholds, checked on a split of Adult's TRAINING file only."""
    import pyarrow.parquet as pq

    from dpcli.algorithms import roc

    table = pq.read_table(data_dir / FILES[0])
    perm = np.random.default_rng(VAL_SEED).permutation(table.num_rows)
    n_val = round(VAL_FRACTION * table.num_rows)
    fit, val = folder / "val_fit.parquet", folder / "val.parquet"
    pq.write_table(table.take(np.sort(perm[n_val:])), fit)
    pq.write_table(table.take(np.sort(perm[:n_val])), val)
    _, pred = predictions(fit, val, spec, folder, "validation")
    scores, positive = load_scores(pred)
    sample = np.sort(np.random.default_rng(SAMPLE_SEED).choice(scores.size, SAMPLE,
                                                               replace=False))
    out = []
    for label, s, p in ((f"Validation split, all {scores.size:,} rows", scores, positive),
                        (f"Validation split, {SAMPLE:,}-row sample", scores[sample],
                         positive[sample])):
        n = int(s.size)
        true = roc.true_roc(s, p)
        rows = []
        for k in VAL_KS:
            configs = {"equal_bins": roc.ROCConfig(k=k, auc_share=0),
                       "recursive_medians": roc.ROCConfig(thresholds="recursive-medians", k=k,
                                                          auc_share=0)}
            assert configs["equal_bins"].parameters(n) == {
                "thresholds": "fixed-space", "counts": "hierarchical", "bins": 2 ** k, "k": k,
                "branching": 16, "auc_share": 0}
            r = {"k": k, "bins": 2 ** k, "cells": {}, "median_fallbacks": {},
                 "parameters": {name: c.parameters(n) for name, c in configs.items()}}
            for eps in epsilons:
                runs = {name: private_runs(s, p, c, eps, reps, true)
                        for name, c in configs.items()}
                r["cells"][f"{eps:g}"] = {name: float(np.median(runs[name]["area"]))
                                          for name in VAL_STRATEGIES}
                r["median_fallbacks"][f"{eps:g}"] = runs["recursive_medians"]["median_fallbacks"]
            rows.append(r)
        out.append({"label": label, "n": n, "fit_rows": table.num_rows - n_val,
                    "positives": int(p.sum()), "true_auc": true.auc,
                    "default_k": roc.ROCConfig().levels(n), "rows": rows})
    return out


def validation_table(res: dict, epsilons) -> list[str]:
    eps = [f"{e:g}" for e in epsilons]
    best = {e: min(res["rows"], key=lambda r, e=e: r["cells"][e]["equal_bins"])["k"]
            for e in eps}
    lines = ["| k | bins | " + " | ".join(f"ε = {e}" for e in eps) + " |",
             "| ---: | ---: | " + " | ".join("---:" for _ in eps) + " |"]
    for r in res["rows"]:
        mark = " (rule)" if r["k"] == res["default_k"] else ""
        cells = []
        for e in eps:
            q, m = r["cells"][e]["equal_bins"], r["cells"][e]["recursive_medians"]
            cells.append((f"**{q:.4f}**" if r["k"] == best[e] else f"{q:.4f}") + f" / {m:.4f}")
        lines.append(f"| {r['k']}{mark} | {r['bins']:,} | " + " | ".join(cells) + " |")
    return lines


def validation_reading(val: list[dict], epsilons) -> str:
    parts = []
    for res in val:
        eps = [f"{e:g}" for e in epsilons]
        d = next(r for r in res["rows"] if r["k"] == res["default_k"])
        notes = []
        for e in eps:
            b = min(res["rows"], key=lambda r, e=e: r["cells"][e]["equal_bins"])
            ratio = d["cells"][e]["equal_bins"] / b["cells"][e]["equal_bins"]
            notes.append(f"ε = {e}: best k = {b['k']}"
                         + (" (the rule's)" if b["k"] == d["k"] else
                            f", the rule's k has {ratio:.{2 if round(ratio, 2) != 1 else 3}f}× "
                            "its area"))
        total = len(res["rows"]) * len(eps)
        wins = sum(r["cells"][e]["equal_bins"] < r["cells"][e]["recursive_medians"]
                   for r in res["rows"] for e in eps)
        at_rule = [(e, d["cells"][e]["equal_bins"], d["cells"][e]["recursive_medians"])
                   for e in eps]
        rule_wins = sum(q < m for _, q, m in at_rule)
        fb = [d["median_fallbacks"][e]["fraction"] for e in eps]
        same = [d["median_fallbacks"][e]["runs_thresholds_equal_bins"] for e in eps]
        runs = d["median_fallbacks"][eps[0]]["runs"]
        parts.append(
            f"**{res['label']} (n = {res['n']:,}).** The rule gives k = {res['default_k']}. "
            f"For equal bins (the default's thresholds): " + "; ".join(notes) + ". Equal bins "
            f"have the smaller median area in {wins} of {total} (k, ε) cells, and in "
            f"{rule_wins} of {len(eps)} at the rule's k ("
            + "; ".join(f"ε = {e}: {pair(q, m)}" for e, q, m in at_rule)
            + f", equal bins / medians). At the rule's k, {pct(min(fb))}–{pct(max(fb))} of "
            f"the median thresholds (by ε) fell back to their part's grid midpoint (no "
            "median drawn, or one outside its part or rounded onto its end); all of them did, "
            "so that the median thresholds were exactly the equal bins, in "
            + ", ".join(f"{x} of {runs} runs at ε = {e}"
                        for x, e in zip(same, eps, strict=True)) + ".")
    return "\n\n".join(parts)


# ------------------------------------------------------------------ the CLI


def cli_png(pred: Path, model: Path, folder: Path, scores, positive) -> dict:
    """One real ``dpcli roc --compare-true`` run (defaults, ε = 1, seed 0); its curve.png.

    The spec copy has no roc section, so the run uses ``ROCConfig()`` (checked).
    """
    from dpcli.algorithms import roc

    spec = make_spec(folder, "public", public=True)
    out = folder / "roc-cli"
    t0 = time.perf_counter()
    dpcli("roc", pred, "--spec", spec, "--model", model, "--out", out, "--epsilon", 1,
          "--seed", 0, "--compare-true", "-q")
    wall = time.perf_counter() - t0
    body = json.loads((out / "curve.json").read_text())["payload"]
    pts = body["points"]
    curve = roc.Curve(thresholds=np.array([np.inf if p["threshold"] is None else p["threshold"]
                                           for p in pts]),
                      fpr=np.array([p["fpr"] for p in pts]),
                      tpr=np.array([p["tpr"] for p in pts]), auc=body["auc"],
                      positives=body["positives"], negatives=body["negatives"])
    true = roc.true_roc(scores, positive)
    if body["parameters"] != roc.ROCConfig().parameters(body["n"]):
        raise AssertionError(f"dpcli roc ran {body['parameters']}, not the defaults")
    return {"png": out / "curve.png", "wall_s": wall, "auc": body["auc"], "n": body["n"],
            "bins": body["parameters"]["bins"], "parameters": body["parameters"],
            "area": roc.area_between(curve, true), "abs_auc_error": abs(body["auc"] - true.auc)}


# ------------------------------------------------------------------- report


def row_of(res: dict, method: str) -> dict:
    return next(r for r in res["rows"] if r["method"] == method)


def area(res: dict, method: str, eps: float) -> float:
    return row_of(res, method)["cells"][f"{eps:g}"]["area_median"]


def table(res: dict, epsilons) -> list[str]:
    eps = [f"{e:g}" for e in epsilons]
    lines = ["| method | bins | " + " | ".join(f"ε = {e}" for e in eps)
             + " | no noise (bins only) |",
             "| --- | ---: | " + " | ".join("---:" for _ in eps) + " | ---: |"]
    for r in res["rows"]:
        cells = [f"{r['cells'][e]['area_median']:.4f} / "
                 f"{r['cells'][e]['abs_auc_error_median']:.4f}" for e in eps]
        lines.append(f"| {r['method']} | {r['bins']:,} | " + " | ".join(cells)
                     + f" | {r['no_noise_area']:.4f} / {r['no_noise_abs_auc_error']:.4f} |")
    return lines


def paper_table() -> list[str]:
    eps = sorted(PAPER)
    lines = ["| method (paper) | " + " | ".join(f"ε = {e:g}" for e in eps) + " |",
             "| --- | " + " | ".join("---:" for _ in eps) + " |"]
    for m in ("Laplace", "FixedSpace", "RecursiveMedians"):
        lines.append(f"| {m} | " + " | ".join(f"{PAPER[e][m][0]:.3f} / {PAPER[e][m][1]:.3f}"
                                             for e in eps) + " |")
    return lines


def times(a: float, b: float) -> str:
    return f"{a / b:.1f}×" if a >= b else f"{a / b:.2f}×"


def pair(a: float, b: float, sep: str = " / ") -> str:
    """Two areas with 4 decimals, or more if 4 would print them equal."""
    d = next((d for d in (4, 5, 6) if f"{a:.{d}f}" != f"{b:.{d}f}"), 6)
    return f"{a:.{d}f}{sep}{b:.{d}f}"


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def fallback_range(res: dict, method: str, epsilons) -> tuple[float, float]:
    f = [row_of(res, method)["cells"][f"{e:g}"]["median_fallbacks"]["fraction"]
         for e in epsilons]
    return min(f), max(f)


def reading(results: list[dict], epsilons) -> str:
    """What the tables show, computed from them (generated: it matches the numbers)."""
    hi, lo = max(epsilons), min(epsilons)
    parts = []
    for res in results:
        n = res["n"]
        lap, d, rm = row_of(res, LAPLACE10), row_of(res, DEFAULT), row_of(res, RM_RULE)
        reps = len(d["cells"][f"{hi:g}"]["area"])
        assert d["bins"] == rm["bins"]

        def span(a: str, b: str, res: dict = res) -> str:
            r = [area(res, a, e) / area(res, b, e) for e in epsilons]
            return f"{min(r):.2f}–{max(r):.2f}×"

        def ratios(a: str, b: str, res: dict = res) -> list[float]:
            return [area(res, a, e) / area(res, b, e) for e in epsilons]

        s = (f"**{res['label']} (n = {n:,}).** dpcli's default here is {d['bins']:,} equal "
             f"bins (k = {d['parameters']['k']}), hierarchical counts, all of ε on the counts. "
             f"At ε = {hi:g} the Laplace baseline with 10 fixed bins has "
             f"{times(area(res, LAPLACE10, hi), area(res, DEFAULT, hi))} the default's median "
             f"area ({pair(area(res, LAPLACE10, hi), area(res, DEFAULT, hi), ' against ')}); "
             f"at ε = {lo:g}, {times(area(res, LAPLACE10, lo), area(res, DEFAULT, lo))} "
             f"({pair(area(res, LAPLACE10, lo), area(res, DEFAULT, lo), ' against ')}). "
             f"Ten equal bins cost {lap['no_noise_area']:.4f} even without noise, so the "
             f"baseline's error has a floor that no ε removes. ")
        smaller = [f"ε = {e:g}" for e, x in zip(epsilons, ratios(RM_PRIVELET, DEFAULT),
                                                  strict=True) if x < 1]
        s += (f"The paper's RecursiveMedians (k = 10, Privelet) has {span(RM_PRIVELET, DEFAULT)} "
              f"the default's area over the ε above ("
              + ("never smaller" if not smaller else "smaller at every ε"
                 if len(smaller) == len(epsilons) else "smaller only at " + ", ".join(smaller))
              + "). ")
        lo_fb, hi_fb = fallback_range(res, RM_RULE, epsilons)
        cmp = [(e, area(res, RM_RULE, e), area(res, DEFAULT, e)) for e in epsilons]
        better = [(e, m / q) for e, m, q in cmp if m < q]
        s += (f"The key comparison, same number of bins ({d['bins']:,}), same counts: "
              f"RecursiveMedians with the k rule, which spends 20% of ε on noisy medians "
              f"({pct(lo_fb)}–{pct(hi_fb)} of the thresholds, by ε, fell back to their part's "
              f"grid midpoint) and so leaves 80% of ε for the counts (1.25× the "
              f"default's count noise scale), against the default's equal bins: "
              + "; ".join(f"ε = {e:g}: {pair(m, q, ' against ')}" for e, m, q in cmp) + ". ")
        if not better:
            s += ("The medians never pay for their 20% of ε here: the default's median area "
                  "is smaller at every ε. ")
        elif len(better) == len(epsilons):
            s += "Here the medians pay for their 20% of ε: smaller median area at every ε. "
        else:
            s += ("The medians pay for their 20% of ε only at "
                  + ", ".join(f"ε = {e:g} ({x:.2f}× the default's area)" for e, x in better)
                  + "; at the other ε the default is smaller. ")
        losses = {e: [o for o in res["rows"] if o["method"] != DEFAULT
                      and o["cells"][f"{e:g}"]["area_median"] < area(res, DEFAULT, e)]
                  for e in epsilons}
        if any(losses.values()):
            s += ("Where the default loses (another row has a smaller median area): "
                  + "; ".join(f"at ε = {e:g} (default {area(res, DEFAULT, e):.4f}) to "
                              + " and ".join(f"\"{o['method']}\" "
                                             + pair(o["cells"][f"{e:g}"]["area_median"],
                                                    area(res, DEFAULT, e)).split(" / ")[0]
                                             for o in losses[e])
                              for e in epsilons if losses[e])
                  + "; it has the smallest median area at "
                  + (", ".join(f"ε = {e:g}" for e in epsilons if not losses[e]) or "no ε")
                  + ". For the size of such margins: over its runs the default's area has the "
                  "interquartile range "
                  + "; ".join("{:.4f}–{:.4f} at ε = {:g}".format(
                      *d["cells"][f"{e:g}"]["area_q25_q75"], e) for e in epsilons if losses[e])
                  + ". ")
        else:
            s += "No other row has a smaller median area than the default in any ε column. "
        e_min = min(epsilons, key=lambda e: area(res, DEFAULT, e))
        floor = d["no_noise_area"] / area(res, DEFAULT, e_min)
        bins_only = pair(d["no_noise_area"], rm["no_noise_area"],
                         " and noise-free grid medians (the RecursiveMedians row at ε = 1e9) ")
        same = [rm["cells"][f"{e:g}"]["median_fallbacks"]["runs_thresholds_equal_bins"]
                for e in epsilons]
        s += (f"Without noise (last column) the default's {d['bins']:,} equal bins cost "
              f"{bins_only}; the default's bins alone thus give {pct(floor)} of its median "
              f"area at ε = {e_min:g}, its smallest"
              + (", so at these ε the noise, not the bins, sets the error. " if floor < 0.25
                 else ". ")
              + ("But the medians' advantage without noise is not what the RecursiveMedians "
                 "row gets at these ε: its" if 2 * min(same) >= reps else "The RecursiveMedians "
                 "row's")
              + " thresholds were exactly the default's equal bins (every median fell back) in "
              + ", ".join(f"{x} of {reps} runs at ε = {e:g}"
                          for x, e in zip(same, epsilons, strict=True))
              + "; in those runs its only difference from the default is 20% less ε on the "
              "counts and another noise draw (a median that does land inside its part moves "
              "every threshold below it, so one such median is enough to change the bins). "
              + f"Over the same n equal bins (α = 1), Privelet counts give "
              f"{span(FS_PRIVELET, FS_HIER)} the area of hierarchical ones; with Laplace "
              f"counts, 8 median-chosen bins give {span(LAPLACE_RM, LAPLACE10)} the area of 10 "
              f"equal ones.")
        parts.append(s)
    paper_rm = PAPER[1.0]["RecursiveMedians"]
    full = max(results, key=lambda r: r["n"])
    small = min(results, key=lambda r: r["n"])
    parts.append(f"For scale: the paper reports a median area of {paper_rm[0]:.3f} (SMS) and "
                 f"{paper_rm[1]:.3f} (Twitter) for RecursiveMedians at ε = 1, against "
                 f"{area(full, DEFAULT, 1.0):.4f} for dpcli's default on the full Adult test "
                 f"file and {area(small, DEFAULT, 1.0):.4f} on the {small['n']:,}-row sample "
                 "(different data, models and test sizes: orders of magnitude, not a "
                 "like-for-like comparison). In every run |ΔAUC| ≤ the area (the AUC is the "
                 "area under the same polyline; errors above and below the true curve cancel "
                 "in it), so a small |ΔAUC| alone does not show a faithful curve.")
    perfect = [(res, r, c) for res in results for r in res["rows"] for c in r["cells"].values()
               if c["perfect_curve_runs"]]
    if perfect:
        parts[-1] += (" Noise can also fake a perfect classifier: with the noisy counts clipped "
                      "and made monotone, the released curve was the step through (0, 1), "
                      "AUC 1, in " + "; ".join(
                          f"{c['perfect_curve_runs']} of {len(c['area'])} runs of "
                          f"\"{r['method']}\" at ε = {c['epsilon']:g} on n = {res['n']:,}"
                          for res, r, c in perfect) + ".")
    return "\n\n".join(parts)


def fallback_text(res: dict, epsilons, reps: int) -> str:
    """Header note: how often row 6's thresholds fell back to their part's grid midpoint."""
    r = row_of(res, RM_RULE)
    fb = {e: r["cells"][f"{e:g}"]["median_fallbacks"] for e in epsilons}
    k, lo, hi = r["parameters"]["k"], min(epsilons), max(epsilons)
    per_run = 2 ** k - 1
    bad = sum(fb[e]["runs_disagreeing"] for e in epsilons)
    landed = sum(fb[e]["kept_at_midpoint"] for e in epsilons)

    def why(f: dict) -> str:
        return (f"{f['parts_without_median']:,} parts of < 2 cells, "
                f"{f['noisy_median_outside_part']:,} outside, "
                f"{f['noisy_median_rounded_onto_end']:,} rounded onto an end")

    return (f"Recursive-median thresholds that fell back to their part's grid midpoint, "
            f"\"{RM_RULE}\" on all {res['n']:,} test rows (k = {k}: {per_run:,} thresholds "
            f"per run, {reps * per_run:,} per ε). The medians are searched on a grid of "
            f"2^20 equal cells of [0, 1]; a part (G_a, G_b] takes its grid midpoint "
            f"G_ceil((a+b)/2) when it has fewer than two cells (no median drawn), or when its "
            f"noisy median falls outside (G_a, G_b) or rounds onto G_a or G_b. Read off the "
            f"released thresholds and matched, part by part, against a wrapper of "
            f"`roc.FineHistogram.noisy_median` that logs each call's part and raw median: "
            + ("they agree in every run" if bad == 0 else f"they disagree in {bad} runs")
            + (f"; {landed:,} noisy medians landed on their part's midpoint themselves and are "
               f"not counted" if landed else "") + ". "
            + "; ".join(f"ε = {e:g}: {pct(fb[e]['fraction'])} ({fb[e]['fallbacks']:,}: "
                        f"{why(fb[e])})" for e in epsilons)
            + f". By level (1 = the median of all {res['n']:,} scores, {k} = parts of about "
            f"{res['n'] / 2 ** (k - 1):.0f}): at ε = {lo:g} "
            + ", ".join(pct(x) for x in fb[lo]["fraction_by_level"])
            + f"; at ε = {hi:g} " + ", ".join(pct(x) for x in fb[hi]["fraction_by_level"])
            + ". Runs in which every threshold fell back, so that the thresholds were exactly "
            "the default's 2^k equal bins: "
            + "; ".join(f"{fb[e]['runs_thresholds_equal_bins']} of {fb[e]['runs']} at "
                        f"ε = {e:g}" for e in epsilons) + ".")


def deep_text(res: dict) -> str:
    """Which recursive-medians rows share the same number of noisy medians (timing note)."""
    by_k: dict[int, list[str]] = {}
    for r in res["rows"]:
        if r["parameters"]["thresholds"] == "recursive-medians":
            by_k.setdefault(r["parameters"]["k"], []).append(r["method"])
    k = max(by_k)
    names = by_k[k]
    count = {2: "two", 3: "three"}.get(len(names), str(len(names)))
    who = (f"the {count} RecursiveMedians rows with k = {k} ("
           + "; ".join(f"\"{m}\"" for m in names) + ") spend"
           if len(names) > 1 else f"{names[0]} spends")
    return (f"{who[0].upper()}{who[1:]} nearly all of it in {2 ** k - 1:,} noisy medians "
            f"(the time includes the counting wrapper of the fallback note above)")


# ---------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", "--data-dir", dest="data", type=Path, default=DEFAULT_DATA,
                        help="folder with adult_train/adult_test.parquet (default: %(default)s)")
    parser.add_argument("--reps", type=int, default=20, help="noise seeds 0..reps-1")
    parser.add_argument("--quick", action="store_true", help="3 seeds (a smoke run)")
    parser.add_argument("--epsilon", type=float, nargs="+", default=list(EPSILONS))
    parser.add_argument("--no-validation", action="store_true",
                        help="skip the check of the defaults on the training split")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results",
                        help="folder for roc_error.{md,json} and the PNG (default: %(default)s)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()

    if data_missing("roc_error", [args.data / f for f in FILES]):
        return
    reps = 3 if args.quick else args.reps
    epsilons = sorted(args.epsilon)
    t0 = time.perf_counter()
    env = environment("scipy", load_average_start=[round(x, 2) for x in os.getloadavg()])
    with tempfile.TemporaryDirectory(prefix="dpcli-roc-error-") as tmp:
        folder = Path(tmp)
        spec = make_spec(folder, "private")
        model, pred = predictions(*(args.data / f for f in FILES), spec, folder, "test")
        scores, positive = load_scores(pred)
        sample = np.sort(np.random.default_rng(SAMPLE_SEED).choice(scores.size, SAMPLE,
                                                                   replace=False))
        results = [run_size("UCI Adult test, all rows", scores, positive, epsilons, reps),
                   run_size(f"UCI Adult test, {SAMPLE:,}-row sample", scores[sample],
                            positive[sample], epsilons, reps)]
        env["main_seconds"] = round(time.perf_counter() - t0, 1)
        val = [] if args.no_validation else validation(args.data, spec, folder, epsilons, reps)
        cli = cli_png(pred, model, folder, scores, positive)
        if not args.no_write:
            args.out.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(cli["png"], args.out / PNG_NAME)
        cli["png"] = PNG_NAME
    env["total_seconds"] = round(time.perf_counter() - t0, 1)
    env["load_average_end"] = [round(x, 2) for x in os.getloadavg()]

    full = results[0]
    rule_k = "; ".join(f"{row_of(r, DEFAULT)['parameters']['k']} on n = {r['n']:,}"
                       for r in results)
    lines = [f"# Private ROC curves (PriROC): area between private and true curve, and |ΔAUC| "
             f"({reps} noise seeds per cell)", "",
             f"{env['date_utc']}; {env['cpus_usable']} usable CPUs (os.cpu_count() = "
             f"{env['cpu_count']}), {env['machine']}, Python {env['python']}, numpy "
             f"{env['numpy']}, scipy {env['scipy']}, pyarrow {env['pyarrow']}, dpcli "
             f"{env['dpcli']} (git {env['git_head']}"
             f"{', dpcli/ modified' if env['dpcli_tree_modified'] else ''}); "
             f"{env['total_seconds']} s in all ({env['main_seconds']} s for the two tables).",
             "",
             f"Stoddard, Chen & Machanavajjhala (2014) §5.2 (Figure 7 / Table 1) on UCI Adult. "
             f"Scores: P(income > 50K) from ONE dpcli naive Bayes model (global, all 14 columns "
             f"of configs/adult.yaml) trained once on adult_train.parquet at ε = "
             f"{MODEL_EPS:g} (in process as `dpcli train-nb` does it, noise "
             f"`make_rng({MODEL_SEED})`; then `dpcli predict`), on "
             f"the test file adult_test.parquet: all {full['n']:,} rows "
             f"({full['positives']:,} positive, {full['distinct_scores']:,} distinct scores), "
             f"and a fixed {SAMPLE:,}-row random sample of them (numpy default_rng({SAMPLE_SEED})"
             f".choice without replacement). Score range [0, 1] (public). The true curve "
             f"uses every distinct score (`roc.true_roc`, exact, not private). Each cell: "
             f"**median area between the private and the true curve / median |AUC error|** "
             f"over {reps} runs, seeds 0..{reps - 1} (`np.random.default_rng(seed)` given to "
             f"`roc.private_roc`); \"bins\" = thresholds + 1; \"no noise\": the same method at "
             f"ε = {NO_NOISE_EPS:g} (one run), the error of its bins alone. The last two rows "
             f"share k = clamp(ceil(log2 n) − 3, 1, 10) ({rule_k}) and hierarchical counts "
             f"(b = 16): \"RecursiveMedians, k rule\" puts its 2^k − 1 thresholds at noisy "
             f"medians bought with 20% of ε (each median at ε1/(2k)), dpcli's default "
             f"(`ROCConfig()`) uses 2^k equal bins over [0, 1] and all of ε on the counts. "
             f"Parameters: methods 1-5 are fixed a priori (the paper's settings, or the "
             f"plainest variant); the k rule and the default's equal bins were chosen on a "
             f"validation split of Adult's *training* data (see `ROCConfig.levels`; re-checked "
             f"in the last section below); nothing was chosen on the test file. The script's "
             f"docstring describes every method; the JSON has each row's "
             f"`ROCConfig.parameters(n)`.", "", fallback_text(full, epsilons, reps)]
    for res in results:
        lines += ["", f"## {res['label']}: n = {res['n']:,}, {res['positives']:,} positive, "
                  f"true AUC {res['true_auc']:.4f}", ""]
        lines += table(res, epsilons)
    lines += ["", "Time of one `private_roc` call on all "
              f"{full['n']:,} rows (median over its {full['rows'][0]['calls_timed']} runs, "
              "every ε; in process, no I/O). " + deep_text(full)
              + "; the load average (1, 5, 15 min) was "
              f"{', '.join(map(str, env['load_average_start']))} at the start and "
              f"{', '.join(map(str, env['load_average_end']))} at the end, so differences "
              "of a few tens of percent between rows are not meaningful:", "",
              "| method | bins | seconds per call |", "| --- | ---: | ---: |"]
    lines += [f"| {r['method']} | {r['bins']:,} | {r['seconds_per_call_median']:.4f} |"
              for r in full["rows"]]
    lines += ["", "## For reference: the paper's Table 1 (median area error, SMS / Twitter)", "",
              "Different data, models and test sizes: orders of magnitude only.", ""]
    lines += paper_table()
    text_reading = reading(results, epsilons)
    lines += ["", "## What this shows", "", text_reading]
    lines += ["", "## The CLI's picture: `dpcli roc --compare-true` at ε = 1", "",
              f"![private and true ROC curve, Adult test, ε = 1]({PNG_NAME})", "",
              f"`{PNG_NAME}`: one run of `dpcli roc pred.parquet --spec SPEC --model nb.json "
              f"--epsilon 1 --seed 0 --compare-true` on the same model and all "
              f"{cli['n']:,} test rows with dpcli's defaults: {cli['bins']:,} equal bins over "
              f"[0, 1] ({cli['parameters']['thresholds']} thresholds, k = "
              f"{cli['parameters']['k']}, no ε spent on them), {cli['parameters']['counts']} "
              f"counts (b = {cli['parameters']['branching']}) with all of ε, the same method as "
              f"the tables' last row (the parameters in its curve.json are checked against "
              f"`ROCConfig()`). The spec is a copy of configs/adult.yaml without its `roc` "
              f"section, so the built-in defaults apply, and declaring `public_data: true` "
              f"(`--compare-true` is refused otherwise: the true curve is not private). "
              f"Its private AUC is {cli['auc']:.4f} (true {full['true_auc']:.4f}); area "
              f"between the curves {cli['area']:.4f}. The CLI keys a seeded noise stream "
              f"with the ledger's secret key, which each benchmark run creates afresh: this is "
              f"not the library's seed-0 run above, just one more draw, and it changes from "
              f"one benchmark run to the next; {cli['wall_s']:.1f} s end to end."]
    val_text = ""
    if val:
        v = val[0]
        lines += ["", "## Check of the defaults on Adult's training data (no test rows)", "",
                  f"adult_train.parquet split {1 - VAL_FRACTION:g}/{VAL_FRACTION:g} "
                  f"(numpy default_rng({VAL_SEED}) permutation): NB trained as above on the "
                  f"{v['fit_rows']:,}-row part, scored on the other {v['n']:,} rows and on a "
                  f"{SAMPLE:,}-row sample of them. For k = {VAL_KS[0]}..{VAL_KS[-1]}, cells: "
                  f"median area over {reps} seeds of **2^k equal bins** (the default's "
                  f"thresholds, all of ε on the counts) / **2^k recursive-median bins** "
                  f"(20% of ε for the medians), both with hierarchical counts (b = 16); "
                  f"bold: the smallest equal-bins area in its column; (rule): the k that "
                  f"`ROCConfig.levels` gives for this n."]
        for res in val:
            lines += ["", f"### {res['label']}: n = {res['n']:,}, true AUC "
                      f"{res['true_auc']:.4f}; the k rule gives k = {res['default_k']}",
                      ""]
            lines += validation_table(res, epsilons)
        val_text = validation_reading(val, epsilons)
        lines += ["", val_text]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        payload = {"environment": env, "epsilons": epsilons, "reps": reps,
                   "seeds": list(range(reps)), "model": {"epsilon": MODEL_EPS,
                                                         "seed": MODEL_SEED, "method": "global"},
                   "sample": {"rows": SAMPLE, "seed": SAMPLE_SEED},
                   "no_noise_epsilon": NO_NOISE_EPS,
                   "error_measure": "exact area between the polylines (roc.area_between)",
                   "paper_table1": {f"{e:g}": {m: {"sms": v[0], "twitter": v[1]}
                                               for m, v in d.items()}
                                    for e, d in PAPER.items()},
                   "results": results, "validation": val, "cli_png": cli,
                   "reading": text_reading, "validation_reading": val_text}
        (args.out / "roc_error.json").write_text(json.dumps(payload, indent=2,
                                                            ensure_ascii=False) + "\n")
        (args.out / "roc_error.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
