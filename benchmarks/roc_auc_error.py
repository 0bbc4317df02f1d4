"""roc's private AUC when scores concentrate (issue 20, point 3): |AUC error| before and after.

Models, each trained by the real ``dpcli`` command line (a subprocess, fresh ledger in a
temporary folder, ``--seed``):

* UCI Adult: ``dpcli train-nb`` (global, all 14 columns of configs/adult.yaml) on
  ../shared/data/adult_train.parquet at ε = 1; scored on adult_test.parquet (15,060 rows).
  Naive Bayes log-odds spread over about ±80: 1,024 equal bins of [0, 1] hold most
  records in the first and last bins.
* sklearn breast cancer (benchmarks/suite.py's stratified 70/30 split, its spec):
  ``dpcli validate`` at ε = 1 (regularised logistic regression on the unit-ball design:
  scores squeezed around ½), scored on the 171 test rows.
* A constant-score model on Adult's test labels (true AUC ½).

Methods, all ``roc.private_roc`` in process (the release ``dpcli roc`` makes, bit for bit:
tests/algorithms/test_roc.py), default bins (2^k, k = ceil(log2 n) − 3 within 1..10) and
hierarchical counts:

1. before: identity scale [0, 1], AUC = the curve's trapezoid, all of ε on the counts
   (``ROCConfig(auc_share=0)``, ``transform identity``: dpcli before this change);
2. logit bins only: the model's log-odds scale (``roc_scale.resolve``), trapezoid AUC;
3. dpcli's default now: log-odds scale, AUC released directly from the noisy signed pair
   count and its own noisy n1 (``auc_share`` ½ of ε).

Each cell: mean |AUC − true AUC| and mean signed error over the seeds 0..S−1
(``np.random.default_rng(seed)``), and for method 3 the stated expected error
(``auc_error``, public). The true AUC is the exact Mann–Whitney AUC of the model's
log-odds (ties half; ``roc.true_roc``), not private. Nothing is tuned on the test sets:
the ¾ / ¼ split and the ±64 cap are fixed rules (dpcli/algorithms/roc_scale.py).

    PYTHONPATH=$PWD /work/bench-venv/bin/python benchmarks/roc_auc_error.py [--seeds 25]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import DEFAULT_DATA, ROOT, dpcli_command, environment, write_results  # noqa: E402

from dpcli.algorithms import roc, roc_scale  # noqa: E402
from dpcli.budget import Budget  # noqa: E402

NAME = "roc_auc_error"
METHODS = ("before: [0, 1] bins, trapezoid AUC", "logit bins, trapezoid AUC",
           "now: logit bins, direct AUC")


def _run(args: list) -> str:
    out = subprocess.run([*dpcli_command(), *map(str, args)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"dpcli {args[0]} exited {out.returncode}: {out.stderr}")
    return out.stderr


def _spec(src: Path, folder: Path, schema_dir: Path) -> Path:
    spec = yaml.safe_load(src.read_text())
    spec["schema"] = str((schema_dir / spec["schema"]).resolve())
    spec["ledger"] = str(folder / "ledger.jsonl")
    spec["budget"] = {**spec.get("budget", {}), "epsilon": 1e6}
    spec["public_data"] = True
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True))
    _run(["ledger", "init", "--spec", path])
    return path


def _scores(model_path: Path, spec_path: Path, test: Path):
    """The model's log-odds and probabilities of the positive class, and the labels (public)."""
    from dpcli.data.reader import DataSource
    from dpcli.predict import collect, labelled_schema, load_model
    from dpcli.spec import load_spec

    model, _ = load_model(model_path)
    spec = load_spec(spec_path)
    schema = labelled_schema(model, spec.schema, model_path)
    pos = schema.label.positive_index
    pos = 1 if pos is None else pos
    src = DataSource(test, schema)
    rng = np.random.default_rng(0)
    z, y = collect(src, tuple(model.columns),
                   lambda b: roc_scale.model_log_odds(model, b, pos), rng=rng,
                   progress=lambda _k: None)
    p, _ = collect(src, tuple(model.columns), lambda b: model.predict_proba(b)[:, pos],
                   rng=rng, progress=lambda _k: None)
    return model, z, p, y == pos


def _cells(model, z, p, positive, epsilons, seeds) -> dict:
    true_curve = roc.true_roc(z, positive)
    true = true_curve.auc
    logit = roc_scale.resolve(None, model=model, lower=0.0, upper=1.0)
    identity = roc_scale.resolve("identity", model=model, lower=0.0, upper=1.0)
    setups = [(identity, p, roc.ROCConfig(auc_share=0)), (logit, z, roc.ROCConfig(auc_share=0)),
              (logit, z, roc.ROCConfig())]
    out: dict = {"true_auc": true, "n": int(z.size), "positives": int(positive.sum()),
                 "scale": logit.to_json(), "cells": []}
    bins = roc.ROCConfig().bins(z.size)
    edges = roc.fixed_space_thresholds(0.0, 1.0, bins)
    occupied = np.bincount(np.searchsorted(edges, p, side="left"), minlength=bins)
    out["largest_bin_share_on_0_1"] = float(occupied.max() / z.size)
    out["score_range"] = [float(p.min()), float(p.max())]
    for eps in epsilons:
        for method, (scale, s, config) in zip(METHODS, setups, strict=True):
            plan = roc.plan(config, z.size, Budget(eps))
            errs, stated, areas = [], [], []
            for seed in range(seeds):
                curve, _ = roc.private_roc(s, positive, lower=scale.lower, upper=scale.upper,
                                           config=config, run_plan=plan,
                                           rng=np.random.default_rng(seed))
                errs.append(curve.auc - true)
                areas.append(roc.area_between(curve, true_curve))
                if curve.auc_error is not None:
                    stated.append(curve.auc_error)
            e = np.array(errs)
            out["cells"].append({"epsilon": eps, "method": method,
                                 "mean_abs_error": float(np.abs(e).mean()),
                                 "mean_error": float(e.mean()),
                                 "max_abs_error": float(np.abs(e).max()),
                                 "mean_curve_area": float(np.mean(areas)),
                                 "stated_error": float(np.mean(stated)) if stated else None})
    return out


def _constant(positive: np.ndarray, epsilons, seeds) -> list[dict]:
    rows = []
    s = np.full(positive.size, 0.02)  # a probability piled into the first of [0, 1]'s bins
    for eps in epsilons:
        for name, config, lo, hi, scores in (
                ("before: [0, 1] bins, trapezoid AUC", roc.ROCConfig(auc_share=0), 0.0, 1.0, s),
                ("now: logit bins, direct AUC", roc.ROCConfig(), -1.0, 1.0,
                 np.zeros(positive.size))):  # a constant model's log-odds scale (_log_odds_scale)
            plan = roc.plan(config, positive.size, Budget(eps))
            a = np.array([roc.private_roc(scores, positive, lower=lo, upper=hi, config=config,
                                          run_plan=plan, rng=np.random.default_rng(k))[0].auc
                          for k in range(seeds)])
            rows.append({"epsilon": eps, "method": name, "mean_auc": float(a.mean()),
                         "sd": float(a.std(ddof=1)),
                         "mean_abs_error": float(np.abs(a - .5).mean())})
    return rows


def _area_table(res: dict, epsilons) -> list[str]:
    lines = ["| method | " + " | ".join(f"ε = {e:g}" for e in epsilons) + " |",
             "| --- | " + " | ".join("---:" for _ in epsilons) + " |"]
    for method in METHODS:
        cells = [next(c for c in res["cells"] if c["epsilon"] == e and c["method"] == method)
                 for e in epsilons]
        lines.append(f"| {method} | " + " | ".join(f"{c['mean_curve_area']:.4f}" for c in cells)
                     + " |")
    return lines


def _table(res: dict, epsilons) -> list[str]:
    lines = ["| method | " + " | ".join(f"ε = {e:g}" for e in epsilons) + " |",
             "| --- | " + " | ".join("---:" for _ in epsilons) + " |"]
    for method in METHODS:
        cells = []
        for e in epsilons:
            c = next(c for c in res["cells"] if c["epsilon"] == e and c["method"] == method)
            text = f"{c['mean_abs_error']:.4f} ({c['mean_error']:+.4f})"
            if c["stated_error"] is not None:
                text += f", stated {c['stated_error']:.4f}"
            cells.append(text)
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--seeds", type=int, default=25)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    start = time.time()
    epsilons = (0.1, 0.5, 1.0, 2.0)
    payload: dict = {"seeds": args.seeds, "epsilons": epsilons}
    text = [f"# roc: private AUC error when scores concentrate ({args.seeds} noise seeds per "
            "cell)", ""]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        # ---------------------------------------------------------------- Adult, naive Bayes
        train, test = args.data / "adult_train.parquet", args.data / "adult_test.parquet"
        if train.exists() and test.exists():
            (folder / "adult").mkdir()
            for f in ("adult.schema.yaml", "adult_taxonomy.json"):
                shutil.copy(ROOT / "configs" / f, folder / "adult" / f)
            spec = _spec(ROOT / "configs" / "adult.yaml", folder / "adult", folder / "adult")
            model_path = folder / "adult" / "nb.json"
            _run(["train-nb", train, "--spec", spec, "--epsilon", 1, "--method", "global",
                  "--seed", 1, "--out", model_path])
            model, z, p, positive = _scores(model_path, spec, test)
            res = _cells(model, z, p, positive, epsilons, args.seeds)
            res["constant_model"] = _constant(positive, (0.1, 1.0), args.seeds)
            stderr = _run(["roc", test, "--spec", spec, "--model", model_path, "--epsilon", 1,
                           "--seed", 0, "--out", folder / "adult" / "roc", "-q"])
            env = json.loads((folder / "adult" / "roc" / "curve.json").read_text())["payload"]
            res["cli_run"] = {"auc": env["auc"], "auc_error": env["auc_error"],
                              "curve_auc": env["curve_auc"], "scale": env["scale"],
                              "stderr": stderr.strip().splitlines()[-1:] if stderr else []}
            payload["adult"] = res
        # ---------------------------------------------------------- breast cancer, validate
        import suite

        info = suite.prepare("breast_cancer", args.data)
        (folder / "bc").mkdir()
        spec = _spec(suite.SPECS / "breast_cancer.yaml", folder / "bc", suite.SPECS)
        model_path = folder / "bc" / "lr.json"
        _run(["validate", suite.HERE / info["train"], "--spec", spec, "--epsilon", 1,
              "--seed", 1, "--out", model_path])
        bc_test = suite.HERE / info["test"]
        model, z, p, positive = _scores(model_path, spec, bc_test)
        res = _cells(model, z, p, positive, (0.5, 1.0, 2.0), args.seeds)
        stderr = _run(["roc", bc_test, "--spec", spec, "--model", model_path, "--epsilon", 0.5,
                       "--seed", 0, "--out", folder / "bc" / "roc"])
        env = json.loads((folder / "bc" / "roc" / "curve.json").read_text())["payload"]
        res["cli_run"] = {"epsilon": 0.5, "auc": env["auc"], "auc_error": env["auc_error"],
                          "noise_dominates": env.get("noise_dominates"),
                          "warned": "noise dominates" in stderr}
        payload["breast_cancer"] = res
    payload["environment"] = environment("numpy", "scipy")
    payload["wall_seconds"] = time.time() - start
    text += _report(payload, epsilons)
    write_results(args.out, NAME, "\n".join(text), payload)
    print("\n".join(text))


def _report(payload: dict, epsilons) -> list[str]:
    e = payload["environment"]
    out = [f"{e['date_utc']} (git {e['git_head']}; {payload['wall_seconds']:.0f} s in all). "
           "Script: benchmarks/roc_auc_error.py (its docstring has the method). Each cell: mean "
           "|AUC error| (mean signed error) over the seeds; for the new default also the "
           "stated expected error `auc_error` (mean over the runs; public, from the noise "
           "scales, with |AUC − ½| at its bound ½, so an upper estimate). True AUC: exact, "
           "on the model's log-odds.", ""]
    a = payload.get("adult")
    if a:
        out += [f"## UCI Adult test ({a['n']:,} rows, {a['positives']:,} positive), naive Bayes "
                f"trained by `dpcli train-nb` at ε = 1: true AUC {a['true_auc']:.4f}", "",
                f"Probabilities in [{a['score_range'][0]:.3g}, {a['score_range'][1]:.3g}]; the "
                f"largest of the 1,024 equal bins of [0, 1] holds "
                f"{100 * a['largest_bin_share_on_0_1']:.0f}% of the records. Log-odds scale: "
                f"{a['scale']['range'][0]:g} to {a['scale']['range'][1]:g} "
                f"({a['scale']['source']}).", ""]
        out += _table(a, epsilons)
        out += ["", "The curve itself: mean area between the private and the true curve (the "
                "curve gets half of ε in the new default, all of it in the other two rows):",
                ""]
        out += _area_table(a, epsilons)
        c = a["cli_run"]
        out += ["", f"One `dpcli roc` run at ε = 1 (defaults, `--seed 0`): AUC {c['auc']:.4f}, "
                f"stated error {c['auc_error']:.4f}, the curve's own trapezoid AUC "
                f"{c['curve_auc']:.4f}.", "",
                "### A constant-score model (true AUC ½), Adult's test labels", "",
                "| method | ε | mean AUC | sd | mean abs error |",
                "| --- | ---: | ---: | ---: | ---: |"]
        for r in a["constant_model"]:
            out.append(f"| {r['method']} | {r['epsilon']:g} | {r['mean_auc']:.4f} | "
                       f"{r['sd']:.4f} | {r['mean_abs_error']:.4f} |")
        out.append("")
    b = payload["breast_cancer"]
    out += [f"## sklearn breast cancer test ({b['n']} rows, {b['positives']} positive), "
            f"logistic regression by `dpcli validate` at ε = 1: true AUC {b['true_auc']:.4f}",
            "", f"Probabilities in [{b['score_range'][0]:.3f}, {b['score_range'][1]:.3f}]; the "
            f"largest of the {roc.ROCConfig().bins(b['n'])} equal bins of [0, 1] holds "
            f"{100 * b['largest_bin_share_on_0_1']:.0f}% of the records. Log-odds scale: "
            f"{b['scale']['range'][0]:.3g} to {b['scale']['range'][1]:.3g}.", ""]
    out += _table(b, (0.5, 1.0, 2.0))
    out += ["", "The curve itself: mean area between the private and the true curve:", ""]
    out += _area_table(b, (0.5, 1.0, 2.0))
    c = b["cli_run"]
    out += ["", f"One `dpcli roc` run at ε = 0.5: AUC {c['auc']:.4f}, stated error "
            f"{c['auc_error']:.4f}; 'noise dominates' warning: "
            f"{'yes' if c['warned'] else 'no'} (threshold {roc_scale.NOISE_DOMINATES})."]
    return out


if __name__ == "__main__":
    main()
