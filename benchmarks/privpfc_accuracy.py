"""PrivPfC (publish-grid) on UCI Adult: test misclassification of CART, SVM and the synopsis.

The setting of Su et al., "PrivPfC" (Figures 2/3, Adult), re-run with dpcli
on the GIVEN split of ../shared/data: the synopsis is published from
adult_train.parquet (30,162 rows) and every classifier is scored on
adult_test.parquet (15,060 rows). No cross-validation, and nothing is chosen
on the test file.

For each ε in {0.05, 0.1, 0.2, 0.5, 1} and --runs runs (seeds 0 .. runs-1),
in process as ``dpcli publish-grid`` does it: the candidates are every
column of configs/adult.yaml with its declared taxonomy
(``privpfc.candidate_hierarchies``, 14 columns); ONE data pass computes the
sparse joint histogram of their leaves (shared by every run: the pass draws
no noise); ``privpfc.design(H, n, Budget(ε))`` gives T, the pool size and
the ε split (3/7 grid selection, 4/7 noisy counts; with the default max_pool
of 200,000 no run here pre-selects columns); ``privpfc.publish(...,
rng=make_rng(seed))`` is the private synopsis. Then, as post-processing:

* histogram classifier: the synopsis itself (``GridModel``: each cell
  predicts its noisy majority), scored on the test file with
  ``dpcli.predict.collect``;
* CART: ``DecisionTreeClassifier(min_samples_leaf=5, random_state=0)``
  (fixed a priori, not tuned) trained on n = 30,162 synthetic rows
  (``synthesize(model, n, make_rng(10_000 + seed))``);
* CART with rpart's default controls (a second CART row, added after the
  first results: they showed the tree above overfitting the uniform
  within-cell numeric values of the synthetic data): the paper trained its
  trees with R's rpart at its defaults, minsplit = 20, minbucket =
  round(20/3) = 7, cp = 0.01, mapped a priori to
  ``DecisionTreeClassifier(min_samples_split=20, min_samples_leaf=7,
  min_impurity_decrease=0.01 * G0, random_state=0)`` with G0 the Gini
  impurity of the labels the tree is fit on (the synthetic labels; never
  the test file). Approximate: rpart measures cp on the misclassification
  risk, scikit-learn's decrease is in the weighted Gini impurity. Same
  synthetic rows as the first CART;
* RBF SVM: ``SVC(kernel="rbf", C=1, gamma="scale")`` trained on the first
  5,000 of those synthetic rows (``synthesize`` shuffles them, so a random
  subset): SVC on 30k rows takes minutes per fit, too slow for 50 fits.

The synthetic table has only the grid's used columns (they differ from run
to run); the test file's same columns are encoded the same way: categorical
columns one-hot over the schema's declared ``categories`` (an undeclared
value, the implicit ``other`` level, is all zeros), numeric columns scaled
by their declared bounds to [0, 1] (the reader clamps into the bounds);
never by statistics of the test file. A grid with no used column (the
root) gives no features: the models then predict the synthetic majority.

Baselines (not private, one run each): Majority (the training file's
majority class for every test row) and NoiseFree: the same two CARTs on the
real training file (G0 from the real training labels), all 14 columns
encoded as above, and the same SVM on a 5,000-row random subsample of it
(``np.random.default_rng(0)``).

dpcli's neighbouring relation is replace-one: counts get discrete Laplace
noise of scale 2/ε_hist and T = ⌊0.2·n/scale⌋ = ⌊n·ε_hist/10⌋, about half
of the paper's T at the same ε (add/remove: scale 1/ε_hist); see
dpcli/algorithms/privpfc.py.

    python benchmarks/privpfc_accuracy.py              # about 5-6 minutes on 2 cores
    python benchmarks/privpfc_accuracy.py --quick      # 2 runs per ε

Prints Markdown tables and a reading of them; writes
benchmarks/results/privpfc_accuracy.{md,json}.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
from _common import DEFAULT_DATA, data_missing, environment, write_results

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SPEC = ROOT / "configs" / "adult.yaml"
FILES = ("adult_train.parquet", "adult_test.parquet")
EPSILONS = (0.05, 0.1, 0.2, 0.5, 1.0)
SVM_ROWS = 5_000
SYNTH_SEED_OFFSET = 10_000
SUBSAMPLE_SEED = 0
CART_PARAMS = {"min_samples_leaf": 5, "random_state": 0}
# Added after the first results: R rpart's defaults (minsplit 20, minbucket round(20/3) = 7,
# cp 0.01), as the paper used; cp becomes min_impurity_decrease = RPART_CP · (root Gini).
RPART_PARAMS = {"min_samples_split": 20, "min_samples_leaf": 7, "random_state": 0}
RPART_CP = 0.01
SVM_PARAMS = {"kernel": "rbf", "C": 1.0, "gamma": "scale"}

HIST = "PrivPfC histogram classifier (the synopsis)"
CART = "PrivPfC → CART on synthetic data"
CART_RPART = ("PrivPfC → CART with rpart's default controls on synthetic data "
              "(added after the first results)")
SVM = "PrivPfC → RBF SVM on synthetic data"
MAJORITY = "Majority (train majority class)"
NF_CART = "NoiseFree CART (real train, 14 columns)"
NF_CART_RPART = ("NoiseFree CART with rpart's default controls (real train, 14 columns; "
                 "added after the first results)")
NF_SVM = f"NoiseFree RBF SVM (real train, {SVM_ROWS:,}-row subsample)"

# Su et al. (PrivPfC), Figures 2/3 on Adult, read off the plots (their own split and
# neighbouring relation): orders of magnitude for orientation only.
PAPER = {"PrivPfC": "≈ 0.17–0.19 across ε ∈ [0.05, 1]", "Majority": "0.246 (their data)",
         "NoiseFree": "≈ 0.15–0.16"}


# -------------------------------------------------------------------- features


def load_file(schema, path: Path) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Every declared column of ``path`` as encoded arrays (codes / clamped numbers), labels."""
    from dpcli.data import DataSource
    from dpcli.mechanisms import make_rng

    cols = schema.names
    batches = list(DataSource(path, schema).batches(cols, rng=make_rng(0)))
    values = {c: np.concatenate([np.asarray(b.columns[c]) for b in batches]) for c in cols}
    return values, np.concatenate([b.label for b in batches]).astype(np.int64)


def synthetic_arrays(schema, table) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """A synthetic pyarrow table as the reader's encoding: category codes, numbers, label codes."""
    from dpcli.data import NumericColumn

    values = {}
    for name in table.column_names:
        if name == schema.label.column:
            continue
        col = schema.column(name)
        raw = table.column(name).to_pylist()
        if isinstance(col, NumericColumn):
            values[name] = np.clip(np.asarray(raw, dtype=float), col.lower, col.upper)
        else:
            code = {v: i for i, v in enumerate(col.levels)}
            values[name] = np.array([code[str(v)] for v in raw], dtype=np.int64)
    classes = {c: i for i, c in enumerate(schema.label.classes)}
    labels = np.array([classes[str(v)] for v in table.column(schema.label.column).to_pylist()],
                      dtype=np.int64)
    return values, labels


def encode(schema, values: dict[str, np.ndarray], columns) -> np.ndarray:
    """Categorical one-hot over the declared categories, numeric (x − lower)/(upper − lower)."""
    from dpcli.data import NumericColumn

    parts = []
    n = len(next(iter(values.values())))
    for name in columns:
        col = schema.column(name)
        v = values[name]
        if isinstance(col, NumericColumn):
            parts.append(((np.asarray(v, float) - col.lower) / (col.upper - col.lower))[:, None])
        else:
            k = len(col.categories) if hasattr(col, "categories") else len(col.levels)
            onehot = np.zeros((len(v), k))
            inside = v < k                       # the implicit `other` level: all zeros
            onehot[np.nonzero(inside)[0], v[inside].astype(np.int64)] = 1.0
            parts.append(onehot)
    return np.hstack(parts) if parts else np.zeros((n, 0))


def fit_predict(make, x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray) -> np.ndarray:
    """Predicted test labels of ``make(y_train)`` fit on the training rows; a constant (the
    training majority) without features or classes."""
    classes = np.unique(y_train)
    if x_train.shape[1] == 0 or len(classes) < 2:
        majority = int(np.bincount(y_train, minlength=2).argmax())
        return np.full(len(x_test), majority)
    return make(y_train).fit(x_train, y_train).predict(x_test)


def gini(labels: np.ndarray) -> float:
    """Gini impurity 1 − Σ p_k² of integer class labels."""
    p = np.bincount(labels, minlength=2) / len(labels)
    return float(1.0 - (p ** 2).sum())


def rpart_default_cart(y_train: np.ndarray):
    """CART with rpart's default controls; cp as a Gini decrease relative to ``y_train``'s root.

    ``y_train``: the labels the tree is then fit on (never the test file's).
    """
    from sklearn.tree import DecisionTreeClassifier

    return DecisionTreeClassifier(**RPART_PARAMS,
                                  min_impurity_decrease=RPART_CP * gini(y_train))


def numeric_modes(schema, values: dict[str, np.ndarray]) -> dict[str, tuple[float, float]]:
    """Per numeric column: its most frequent (clamped) training value and that value's share."""
    from dpcli.data import NumericColumn

    out = {}
    for name in schema.names:
        if isinstance(schema.column(name), NumericColumn):
            uniq, counts = np.unique(values[name], return_counts=True)
            out[name] = (float(uniq[counts.argmax()]), float(counts.max() / counts.sum()))
    return out


def error(pred: np.ndarray, labels: np.ndarray) -> float:
    return float((np.asarray(pred) != labels).mean())


# ------------------------------------------------------------------------ runs


def run_epsilon(eps: float, runs: int, svm_runs: int, ctx: dict) -> dict:
    from sklearn.svm import SVC
    from sklearn.tree import DecisionTreeClassifier

    from dpcli.algorithms import privpfc
    from dpcli.algorithms.synopsis import GridModel, payload, synthesize
    from dpcli.budget import Budget
    from dpcli.data import DataSource
    from dpcli.mechanisms import make_rng
    from dpcli.predict import collect

    schema, hier, table, n = ctx["schema"], ctx["H"], ctx["table"], ctx["n"]
    test_values, test_labels, test_path = ctx["test_values"], ctx["test_labels"], ctx["test"]
    d = privpfc.design(hier, n, Budget(eps))
    errors: dict[str, list[float]] = {HIST: [], CART: [], CART_RPART: [], SVM: []}
    per_run = []
    seconds = {"publish": 0.0, "histogram": 0.0, "synthesize": 0.0, "cart": 0.0,
               "cart_rpart": 0.0, "svm": 0.0}
    for seed in range(runs):
        t = time.perf_counter()
        syn = privpfc.publish(table, hier, d, positive=1, rng=make_rng(seed))
        seconds["publish"] += time.perf_counter() - t
        t = time.perf_counter()
        model = GridModel(payload(syn, schema, "-"), syn.counts, Path("grid.json"))
        proba, labels = collect(DataSource(test_path, model.schema), model.columns,
                                model.predict_proba, rng=make_rng(0), progress=lambda k: None)
        if not np.array_equal(labels, test_labels):
            raise SystemExit("privpfc_accuracy: test labels differ between readers")
        hist_err = error(proba.argmax(axis=1), labels)
        seconds["histogram"] += time.perf_counter() - t
        t = time.perf_counter()
        synth = synthesize(model, n, make_rng(SYNTH_SEED_OFFSET + seed))
        s_values, s_labels = synthetic_arrays(schema, synth)
        cols = list(model.columns)
        x_syn = encode(schema, s_values, cols)
        x_test = encode(schema, test_values, cols)
        seconds["synthesize"] += time.perf_counter() - t
        t = time.perf_counter()
        cart_err = error(fit_predict(lambda y: DecisionTreeClassifier(**CART_PARAMS),
                                     x_syn, s_labels, x_test), test_labels)
        seconds["cart"] += time.perf_counter() - t
        t = time.perf_counter()
        rpart_err = error(fit_predict(rpart_default_cart, x_syn, s_labels, x_test),
                          test_labels)
        seconds["cart_rpart"] += time.perf_counter() - t
        svm_err = None
        if seed < svm_runs:
            t = time.perf_counter()
            svm_err = error(fit_predict(lambda y: SVC(**SVM_PARAMS), x_syn[:SVM_ROWS],
                                        s_labels[:SVM_ROWS], x_test), test_labels)
            seconds["svm"] += time.perf_counter() - t
            errors[SVM].append(svm_err)
        errors[HIST].append(hist_err)
        errors[CART].append(cart_err)
        errors[CART_RPART].append(rpart_err)
        point_mass = {c: float((s_values[c] == ctx["modes"][c][0]).mean())
                      for c in cols if c in ctx["modes"]}
        per_run.append({"seed": seed, "levels": list(syn.levels), "columns": cols,
                        "synthetic_share_at_train_mode": point_mass,
                        "shape": list(syn.shape), "cells": int(syn.counts.shape[0]),
                        "synthetic_positive_share": float(s_labels.mean()),
                        "rpart_min_impurity_decrease": RPART_CP * gini(s_labels),
                        "error": {HIST: hist_err, CART: cart_err, CART_RPART: rpart_err,
                                  SVM: svm_err}})
        print(f"  ε={eps:g} seed {seed}: {len(cols)} columns {cols} cells "
              f"{syn.counts.shape[0]:,}; hist {hist_err:.4f} CART {cart_err:.4f} "
              f"CART rpart {rpart_err:.4f}"
              + (f" SVM {svm_err:.4f}" if svm_err is not None else ""), file=sys.stderr)
    used = Counter(c for r in per_run for c in r["columns"])
    at_mode: dict[str, list[float]] = {}
    for r in per_run:
        for c, v in r["synthetic_share_at_train_mode"].items():
            at_mode.setdefault(c, []).append(v)
    return {"epsilon": eps, "design": d.to_json(), "plan": d.plan.to_json(),
            "runs": runs, "svm_runs": svm_runs,
            "summary": {m: summarise(v) for m, v in errors.items()},
            "mean_cells": float(np.mean([r["cells"] for r in per_run])),
            "mean_used_columns": float(np.mean([len(r["columns"]) for r in per_run])),
            "column_use": dict(used.most_common()),
            "synthetic_share_at_train_mode": {c: float(np.mean(v)) for c, v in at_mode.items()},
            "per_run": per_run, "seconds": {k: round(v, 2) for k, v in seconds.items()}}


def summarise(values: list[float]) -> dict:
    a = np.array(values, dtype=float)
    return {"runs": len(a), "mean": float(a.mean()) if len(a) else None,
            "std": float(a.std(ddof=1)) if len(a) > 1 else 0.0,
            "values": [round(float(v), 6) for v in a]}


def baselines(ctx: dict) -> dict:
    from sklearn.svm import SVC
    from sklearn.tree import DecisionTreeClassifier

    schema = ctx["schema"]
    cols = list(schema.names)
    x_tr = encode(schema, ctx["train_values"], cols)
    x_te = encode(schema, ctx["test_values"], cols)
    y_tr, y_te = ctx["train_labels"], ctx["test_labels"]
    out = {}
    majority = int(np.bincount(y_tr, minlength=2).argmax())
    out[MAJORITY] = error(np.full(len(y_te), majority), y_te)
    t = time.perf_counter()
    out[NF_CART] = error(DecisionTreeClassifier(**CART_PARAMS).fit(x_tr, y_tr).predict(x_te),
                         y_te)
    out["cart_seconds"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    out[NF_CART_RPART] = error(rpart_default_cart(y_tr).fit(x_tr, y_tr).predict(x_te), y_te)
    out["cart_rpart_seconds"] = round(time.perf_counter() - t, 2)
    out["cart_rpart_min_impurity_decrease"] = RPART_CP * gini(y_tr)
    sub = np.sort(np.random.default_rng(SUBSAMPLE_SEED).choice(len(y_tr), SVM_ROWS,
                                                               replace=False))
    t = time.perf_counter()
    out[NF_SVM] = error(SVC(**SVM_PARAMS).fit(x_tr[sub], y_tr[sub]).predict(x_te), y_te)
    out["svm_seconds"] = round(time.perf_counter() - t, 2)
    out["features"] = int(x_tr.shape[1])
    return out


# ---------------------------------------------------------------------- report


def fmt(s: dict) -> str:
    if not s["runs"]:
        return "—"
    return f"{s['mean']:.3f} ± {s['std']:.3f}" if s["runs"] > 1 else f"{s['mean']:.3f}"


def table(results: list[dict], base: dict) -> list[str]:
    heads = [f"ε={r['epsilon']:g}" for r in results]
    lines = ["| method | " + " | ".join(heads) + " |", "| --- |" + " ---: |" * len(heads)]
    for m in (HIST, CART, CART_RPART, SVM):
        lines.append(f"| {m} | " + " | ".join(fmt(r["summary"][m]) for r in results) + " |")
    for m in (MAJORITY, NF_CART, NF_CART_RPART, NF_SVM):
        lines.append(f"| {m} | " + " | ".join(f"{base[m]:.3f}" for _ in results) + " |")
    return lines


def design_table(results: list[dict], n_columns: int) -> list[str]:
    lines = ["| ε | ε grid / ε counts | T | pool | mean cells | mean used columns | "
             "columns used (runs out of " + str(results[0]["runs"]) + ") |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in results:
        plan = {p["step"]: p["epsilon"] for p in r["plan"]}
        use = ", ".join(f"{c} {k}" for c, k in r["column_use"].items())
        lines.append(f"| {r['epsilon']:g} | {plan['select_grid']:.4g} / {plan['histogram']:.4g} "
                     f"| {r['design']['threshold']:,} | {r['design']['pool_size']:,} | "
                     f"{r['mean_cells']:.0f} | {r['mean_used_columns']:.1f} of {n_columns} | "
                     f"{use} |")
    return lines


def points(diff: float) -> str:
    return f"{abs(100 * diff):.1f} points {'above' if diff >= 0 else 'below'}"


def reading(results: list[dict], base: dict, modes: dict[str, tuple[float, float]]) -> str:
    """Generated from the numbers, so that it always matches the tables."""
    def mean(r, m):
        return r["summary"][m]["mean"]

    paper_hi = 0.19
    nf_name, nf = min(((short, base[m]) for m, short in
                       ((NF_CART, "CART, min_samples_leaf = 5"),
                        (NF_CART_RPART, "CART, rpart's defaults"), (NF_SVM, "SVM"))),
                      key=lambda x: x[1])
    parts = []
    for m, short in ((CART, "CART (min_samples_leaf = 5)"),
                     (CART_RPART, "CART with rpart's default controls"), (SVM, "SVM"),
                     (HIST, "The histogram classifier")):
        vals = {r["epsilon"]: mean(r, m) for r in results if mean(r, m) is not None}
        if not vals:
            continue
        worse = [e for e, v in vals.items() if v > paper_hi]
        lo, hi = min(vals.values()), max(vals.values())
        parts.append(
            f"{short} on dpcli's synopsis: mean test error {lo:.3f}–{hi:.3f} across ε "
            + (f"(ε = {min(vals):g}: {vals[min(vals)]:.3f}; ε = {max(vals):g}: "
               f"{vals[max(vals)]:.3f}); " if len(vals) > 1 else "; ")
            + ("above the paper's PrivPfC range (≈ 0.17–0.19) at ε ∈ {"
               + ", ".join(f"{e:g}" for e in worse) + "}" if worse
               else "within or below the paper's PrivPfC range (≈ 0.17–0.19) at every ε")
            + f"; against the best NoiseFree baseline ({nf_name}: {nf:.3f}): "
            f"{points(hi - nf)} at "
            f"worst, {points(lo - nf)} at best.")

    def versus_majority(v: float) -> str:
        d = base[MAJORITY] - v
        return f"{abs(100 * d):.1f} points {'better' if d >= 0 else 'worse'} than Majority"

    small = results[0]
    parts.append(
        f"Majority is {base[MAJORITY]:.3f} on this test file (the paper: 0.246 on theirs); "
        f"at ε = {small['epsilon']:g} the synopsis' CART (min_samples_leaf = 5) is "
        f"{versus_majority(mean(small, CART))}, with rpart's default controls "
        f"{versus_majority(mean(small, CART_RPART))}.")
    lumps = {}
    for r in results:
        for c, v in r["synthetic_share_at_train_mode"].items():
            lumps.setdefault(c, []).append((r["column_use"][c], v))
    lumps = {c: v for c, v in lumps.items() if modes[c][1] >= 0.5}
    if lumps:
        parts.append(
            "A likely reason why CART (min_samples_leaf = 5) on synthetic data is worse and "
            "more variable than the "
            "SVM and the synopsis itself: `synthesize` draws a numeric value uniformly within "
            "its cell's interval, but the real data put a lump on one value ("
            + "; ".join(f"{c}: {100 * modes[c][1]:.0f}% of the training rows at {modes[c][0]:g},"
                        f" {100 * max(x for _, x in v):.2f}% of the synthetic rows at most"
                        for c, v in lumps.items())
            + "). Inside a cell the synthetic label does not depend on the value, so the "
            "fully grown tree (min_samples_leaf = 5) cuts the uniform spread at random, and "
            "nearly all test rows, sitting on the lump at the interval's edge, fall into the "
            "one small leaf at that edge. The min_samples_leaf = 5 row is kept as it was "
            "first run, with its parameters fixed a priori.")
    rp = {r["epsilon"]: r["summary"][CART_RPART] for r in results}
    c5 = {r["epsilon"]: r["summary"][CART] for r in results}
    lower = [e for e in rp if rp[e]["mean"] < c5[e]["mean"]]
    parts.append(
        "The CART row with rpart's default controls was added after the first run (its "
        "controls are the paper's stated rpart defaults, not chosen on the test file); on the "
        "same synthetic rows its mean error is "
        + f"{min(v['mean'] for v in rp.values()):.3f}–{max(v['mean'] for v in rp.values()):.3f}"
        + f" across ε against {min(v['mean'] for v in c5.values()):.3f}–"
        + f"{max(v['mean'] for v in c5.values()):.3f} for min_samples_leaf = 5, lower at "
        + ("every ε" if len(lower) == len(rp) else
           f"{len(lower)} of {len(rp)} ε" + (" (" + ", ".join(f"{e:g}" for e in lower) + ")"
                                              if lower else ""))
        + f", with a mean run-to-run std of {np.mean([v['std'] for v in rp.values()]):.3f} "
        + f"against {np.mean([v['std'] for v in c5.values()]):.3f}; on the real training file "
        + f"(NoiseFree) {base[NF_CART_RPART]:.3f} against {base[NF_CART]:.3f}.")
    parts.append(
        "Where dpcli is worse than the paper, part of the gap is by construction: dpcli's "
        "replace-one neighbours double the count noise (scale 2/ε_hist) and halve T "
        "(⌊n·ε_hist/10⌋), so its grids are coarser at the same ε; the paper's figures are "
        "also on its own split, read off plots.")
    return " ".join(parts)


# ------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", "--data-dir", dest="data", type=Path, default=DEFAULT_DATA,
                        help="folder with adult_train/adult_test.parquet (default: %(default)s)")
    parser.add_argument("--runs", type=int, default=10, help="noise seeds 0..runs-1 per ε")
    parser.add_argument("--svm-runs", type=int, default=None,
                        help="SVM on the first this many runs of each ε (default: all)")
    parser.add_argument("--quick", action="store_true", help="2 runs per ε (a smoke run)")
    parser.add_argument("--epsilon", type=float, nargs="+", default=list(EPSILONS))
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results",
                        help="folder for privpfc_accuracy.{md,json} (default: %(default)s)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()

    if data_missing("privpfc_accuracy", [args.data / f for f in FILES]):
        return
    try:
        import sklearn  # noqa: F401
    except ImportError as exc:
        print(f"privpfc_accuracy: skipped, scikit-learn not importable ({exc}); install "
              "benchmarks/requirements.txt", file=sys.stderr)
        return
    from dpcli.algorithms import privpfc
    from dpcli.data import DataSource
    from dpcli.mechanisms import make_rng
    from dpcli.spec import load_spec
    from dpcli.stats import StatsRequest, get_engine

    runs = 2 if args.quick else args.runs
    svm_runs = runs if args.svm_runs is None else min(args.svm_runs, runs)
    epsilons = sorted(args.epsilon)
    t0 = time.perf_counter()
    env = environment("sklearn", load_average_start=[round(x, 2) for x in os.getloadavg()])
    spec = load_spec(SPEC)
    schema = spec.schema
    train, test = (args.data / f for f in FILES)
    hier = privpfc.candidate_hierarchies(schema)
    t = time.perf_counter()
    stats = get_engine().compute(DataSource(train, schema), StatsRequest(joint=tuple(hier)),
                                 rng=make_rng(0))
    pass_seconds = time.perf_counter() - t
    train_values, train_labels = load_file(schema, train)
    test_values, test_labels = load_file(schema, test)
    ctx = {"schema": schema, "H": hier, "table": stats.joint, "n": stats.n, "test": test,
           "train_values": train_values, "train_labels": train_labels,
           "test_values": test_values, "test_labels": test_labels}
    ctx["modes"] = numeric_modes(schema, train_values)
    base = baselines(ctx)
    results = []
    for eps in epsilons:
        t = time.perf_counter()
        results.append(run_epsilon(eps, runs, svm_runs, ctx))
        results[-1]["seconds"]["total"] = round(time.perf_counter() - t, 1)
    env["total_seconds"] = round(time.perf_counter() - t0, 1)
    env["load_average_end"] = [round(x, 2) for x in os.getloadavg()]

    n_test = len(test_labels)
    pos_rate = float((test_labels == schema.label.positive_index).mean())
    lines = [f"# PrivPfC (publish-grid) on UCI Adult: test misclassification "
             f"({runs} runs per ε)", "",
             f"{env['date_utc']}; {env['cpus_usable']} usable CPUs (os.cpu_count() = "
             f"{env['cpu_count']}), {env['machine']}, Python {env['python']}, numpy "
             f"{env['numpy']}, pyarrow {env['pyarrow']}, scikit-learn {env['scikit-learn']}, "
             f"dpcli {env['dpcli']} (git {env['git_head']}"
             f"{', dpcli/ modified' if env['dpcli_tree_modified'] else ''}); "
             f"{env['total_seconds']} s in all.", "",
             f"Su et al., PrivPfC, Figures 2/3 setting on Adult, with the GIVEN split: the "
             f"synopsis is published from adult_train.parquet ({stats.n:,} rows) and every "
             f"classifier is scored on adult_test.parquet ({n_test:,} rows, positive rate "
             f"{pos_rate:.3f}); nothing is tuned or chosen on the test file. Candidates: all "
             f"{len(hier)} columns of configs/adult.yaml with their declared taxonomies; one data "
             f"pass ({pass_seconds:.2f} s) gives the sparse joint histogram shared by all runs; "
             f"each run is `privpfc.publish(..., rng=make_rng(seed))`, seeds 0..{runs - 1}, at "
             f"the default split (3/7 of ε selects the grid, 4/7 noises the counts; max_pool "
             f"200,000, never reached here, so no column pre-selection). Cells: mean ± sample "
             f"std of the test misclassification rate over the runs.", "",
             "- **Histogram classifier**: the synopsis itself (`GridModel`, each cell "
             "predicts its noisy majority) on the test file.",
             f"- **CART**: `DecisionTreeClassifier(min_samples_leaf=5, random_state=0)`, fixed "
             f"a priori, trained on n = {stats.n:,} synthetic rows drawn from the synopsis "
             f"(`synthesize`, seed {SYNTH_SEED_OFFSET:,} + run).",
             f"- **CART with rpart's default controls** (a second CART row, added after the "
             f"first results): `DecisionTreeClassifier(min_samples_split=20, "
             f"min_samples_leaf=7, min_impurity_decrease={RPART_CP:g}·G0, random_state=0)` on "
             f"the same synthetic rows, G0 = the Gini impurity of the labels the tree is fit on "
             f"(the synthetic labels; the real training labels for NoiseFree): R rpart's "
             f"defaults minsplit = 20, minbucket = round(20/3) = 7, cp = {RPART_CP:g}, with cp "
             f"read as a decrease of the weighted Gini impurity (rpart measures it on the "
             f"misclassification risk, so the mapping is approximate). This row was added "
             f"after the first run showed the fully grown tree overfitting the uniform "
             f"within-cell numeric values; its parameters come from the paper's stated use of "
             f"rpart defaults, not from the test file.",
             f"- **RBF SVM**: `SVC(kernel=\"rbf\", C=1, gamma=\"scale\")` on the first "
             f"{SVM_ROWS:,} of those synthetic rows (a random subset: `synthesize` shuffles), "
             f"because SVC on 30k rows is too slow for {len(epsilons) * runs} fits"
             + (f"; SVM on the first {svm_runs} runs of each ε only, to keep the script "
                f"under ~15 minutes" if svm_runs < runs else "") + ".",
             "- Features: only the grid's used columns exist in the synthetic data (they "
             "change from run to run); the test file's same columns are encoded the same "
             "way: categorical one-hot over the schema's declared categories (the implicit "
             "`other` level: all zeros), numeric scaled to [0, 1] by the declared bounds "
             "(never by test statistics).",
             f"- **Baselines** (not private, one run): Majority = the training file's majority "
             f"class for every test row; NoiseFree = the same two CARTs on the real training "
             f"file (all 14 columns, {base['features']} encoded features) and the same SVM on a "
             f"{SVM_ROWS:,}-row random subsample of it (numpy default_rng({SUBSAMPLE_SEED})).",
             "", "## Test misclassification rate (lower is better)", ""]
    lines += table(results, base)
    lines += ["", "## The grids", "",
              "T = the cell threshold, pool = grids with at most T cells (all scored), cells = "
              "the chosen grid's cells; last column: how many runs used each column.", ""]
    lines += design_table(results, len(hier))
    lines += ["", "## For orientation: the paper's figures (Adult)", "",
              "Read off Su et al.'s Figures 2/3 (their split, add/remove neighbours); not a "
              "like-for-like comparison.", "",
              "| method | paper |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in PAPER.items()]
    lines += ["", "dpcli uses replace-one neighbours (docs/design.md rule 1): the cell counts get "
              "discrete Laplace noise of scale 2/ε_hist (sensitivity 2) and T = ⌊0.2·n/scale⌋ "
              "= ⌊n·ε_hist/10⌋, roughly half the paper's T at the same ε, so dpcli's grids are "
              "coarser. The quality's sensitivity is re-derived for replace-one and sits in "
              "the exponent (the paper's pseudo-code omits it).", ""]
    text_reading = reading(results, base, ctx["modes"])
    lines += ["## What this shows", "", text_reading, "",
              "Time per ε (s, all runs): " + "; ".join(
                  f"ε = {r['epsilon']:g}: {r['seconds']['total']} (publish "
                  f"{r['seconds']['publish']:.1f}, CART {r['seconds']['cart']:.1f}, CART "
                  f"rpart defaults {r['seconds']['cart_rpart']:.1f}, SVM "
                  f"{r['seconds']['svm']:.1f})" for r in results)
              + f". NoiseFree CART {base['cart_seconds']} s, CART rpart defaults "
              f"{base['cart_rpart_seconds']} s, SVM {base['svm_seconds']} s."]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        payload = {"environment": env, "epsilons": epsilons, "runs": runs, "svm_runs": svm_runs,
                   "seeds": list(range(runs)), "n_train": stats.n, "n_test": n_test,
                   "test_positive_rate": pos_rate, "data_pass_seconds": round(pass_seconds, 3),
                   "cart": CART_PARAMS,
                   "cart_rpart_defaults": {
                       **RPART_PARAMS, "min_impurity_decrease": f"{RPART_CP} * Gini impurity of "
                       "the labels the tree is fit on (synthetic labels; real train for NoiseFree)",
                       "rpart": {"minsplit": 20, "minbucket": 7, "cp": RPART_CP},
                       "added_after_first_results": True,
                       "why": "the first run showed the min_samples_leaf=5 tree overfitting the "
                              "uniform within-cell numeric values; parameters from the paper's "
                              "stated use of rpart defaults, not from the test file"},
                   "svm": {**SVM_PARAMS, "rows": SVM_ROWS},
                   "synthetic_seed": f"{SYNTH_SEED_OFFSET} + seed",
                   "baselines": base, "results": results, "paper": PAPER,
                   "reading": text_reading}
        write_results(args.out, "privpfc_accuracy", text, payload)


if __name__ == "__main__":
    main()
