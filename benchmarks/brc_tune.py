"""train-brc on the suite's tuning splits (round 8, benchmarks/results/brc_r8.md).

In process as ``dpcli train-brc`` runs it (``brc.training_set`` → ``brc.fit`` → ``BRCModel``)
on a stratified 70/30 split of each suite dataset's cached train file
(``suite.stratified_split(seed=12345, test_fraction=0.3)``, as ``learners_split.py``): fit on
the 70 %, measured on the 30 %. The suite's test files are never read. Beside it, the suite's
diffprivlib references (RandomForest, the suite's nearest model for brc, and LogisticRegression)
at the same ε on the same split, features encoded as the suite encodes them.

    cd benchmarks && PYTHONPATH=.. python brc_tune.py --datasets anes96,digits \\
        --eps 0.5,1,2 --seeds 6 --variants base,k16s50 [--refs]

A variant is ``new`` (the code's rules), ``old`` (round 7's rules: one random classifier a
round) and overrides (:func:`variant_config`).
Prints one Markdown row per (dataset, ε, variant): mean AUC / balanced accuracy (one-class runs).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import suite  # noqa: E402
from _common import auc  # noqa: E402

SEED0 = 1000


def load_adult_balanced() -> dict:
    """adult_train balanced (every positive, as many negatives, ``default_rng(0)``, as
    brc_imbalance.py), then a 70/30 split of it (``default_rng(12345)``): round 5's tuning
    split for the balanced-Adult goal. adult_test is never read."""
    from brc_imbalance import balanced, read

    from dpcli.algorithms import inputs
    from dpcli.data.encode import EncodedBatch
    from dpcli.spec import load_spec

    schema = load_spec(suite.ROOT / "configs" / "adult.yaml").schema
    cols = [c for c in schema.names if inputs.usable(schema.column(c))]
    bal = balanced(read(Path(os.environ.get("DPCLI_DATA", "/work/shared/data"))
                        / "adult_train.parquet", schema, cols), 0)
    perm = np.random.default_rng(12345).permutation(bal.n)
    cut = round(0.7 * bal.n)

    def take(idx):
        idx = np.sort(idx)
        return EncodedBatch(len(idx), bal.label[idx], {c: v[idx] for c, v in bal.columns.items()})

    return {"schema": schema, "cols": cols, "fit": take(perm[:cut]), "val": take(perm[cut:]),
            "public": ("workclass", "fnlwgt", "race", "sex", "native_country")}


def load(name: str):
    import pandas as pd

    if name == "adult_balanced":
        return load_adult_balanced()

    from dpcli.algorithms import inputs
    from dpcli.data import DataSource
    from dpcli.data.encode import EncodedBatch
    from dpcli.mechanisms import make_rng
    from dpcli.spec import load_spec

    info = json.loads((suite.CACHE / "data" / name / "info.json").read_text())
    train = pd.read_parquet(suite.HERE / info["train"])
    fit, val = suite.stratified_split(train["label"].to_numpy(), seed=12345, test_fraction=0.3)
    folder = Path(os.environ.get("BRC_TUNE_DIR", "/tmp/brc8/tune")) / name
    folder.mkdir(parents=True, exist_ok=True)
    train.iloc[fit].reset_index(drop=True).to_parquet(folder / "fit.parquet", index=False)
    train.iloc[val].reset_index(drop=True).to_parquet(folder / "val.parquet", index=False)
    spec = load_spec(suite.SPECS / f"{name}.yaml")
    schema = spec.schema
    cols = [c for c in schema.names if inputs.usable(schema.column(c))]

    def read(path):
        bs = list(DataSource(path, schema).batches(cols, rng=make_rng(0)))
        y = np.concatenate([b.label for b in bs]).astype(np.int64)
        return EncodedBatch(len(y), y, {c: np.concatenate([b.columns[c] for b in bs])
                                        for c in cols})

    x_fit, _ = suite.encode(name, train.iloc[fit])
    x_val, _ = suite.encode(name, train.iloc[val])
    return {"schema": schema, "cols": cols, "fit": read(folder / "fit.parquet"),
            "val": read(folder / "val.parquet"), "x_fit": x_fit, "x_val": x_val,
            "y_fit": train["label"].to_numpy()[fit], "y_val": train["label"].to_numpy()[val],
            "public": suite.DATASETS[name].brc_public}


def variant_config(brc, variant: str, eps: float, n: int, counted: bool, partial: bool = False):
    """``new``: dpcli's rules (brc.auto_config: K from n, T after the class count); ``old``:
    round 7's (one random classifier per round, T = brc.auto_rounds); then overrides
    ``k<K>`` candidates, ``T<N>`` fixed rounds, ``c<C>`` c1 = c2."""
    if variant.startswith("old"):
        c = brc.auto_constant(eps, n, counted)
        cfg = brc.BRCConfig(brc.auto_rounds(eps, n, c, c, counted), c, c, counted)
    else:
        # Algorithm 2's free public rounds and released vote (round 10); older code has no
        # ``partial`` and runs its own Algorithm 2 (--old-code: the same script on main)
        extra = ({"partial": partial}
                 if "partial" in inspect.signature(brc.auto_config).parameters else {})
        cfg = brc.auto_config(eps, n, counted, **extra)
    for key, val in re.findall(r"([kTc])([0-9.]+)", variant[3:]):
        if key == "k":
            cfg = replace(cfg, candidates=int(val))
        elif key == "T":
            cfg = replace(cfg, rounds=int(val), rounds_after_count=False)
        elif key == "c":
            cfg = replace(cfg, c1=float(val), c2=float(val))
    return cfg


def run(d: dict, mode: str, variant: str, eps: float, seed: int) -> dict:
    from dpcli.algorithms import brc, inputs
    from dpcli.mechanisms import make_rng

    public = tuple(d["public"]) if mode == "partial" else ()
    data = brc.training_set([d["fit"]], d["schema"], d["cols"], public, positive=1)
    cfg = variant_config(brc, variant, eps, data.n, counted=mode == "private",
                         partial=mode == "partial")
    ens, cal, _ = brc.fit(data, cfg, eps, make_rng(seed))
    cfg = brc.config_ran(cfg, ens)
    model = brc.BRCModel(inputs.model_schema(d["schema"], d["cols"]), tuple(d["cols"]), mode,
                         public, ens, cfg, data.n, eps, cal)
    proba, codes = model.classify(d["val"])
    y = d["val"].label == 1
    pred = codes == 1
    return {"auc": auc(proba[:, 1], y), "acc": float(np.mean(pred == y)),
            "bacc": float((np.mean(pred[y]) + np.mean(~pred[~y])) / 2),
            "one": bool(min(pred.mean(), 1 - pred.mean()) < 1e-3), "T": model.config.rounds,
            "K": cfg.candidates}


def brc_file() -> str:
    from dpcli.algorithms import brc

    return str(Path(brc.__file__).parent)


def refs(d: dict, eps: float, seeds: int) -> dict:
    out = {}
    for ref in ("dp-forest", "dp-lr"):
        aucs = []
        for s in range(seeds):
            score, _ = suite.reference(ref, d["x_fit"], d["y_fit"], d["x_val"], eps, SEED0 + s)
            aucs.append(auc(score, d["y_val"] == 1))
        out[ref] = float(np.mean(aucs))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default="digits,breast_cancer,penguins,anes96")
    ap.add_argument("--eps", default="0.5,1,2")
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--variants", default="old,new")
    ap.add_argument("--modes", default="private")
    ap.add_argument("--refs", action="store_true")
    ap.add_argument("--jsonl", type=Path, help="append every run's measures here")
    ap.add_argument("--first-seed", type=int, default=0, help="seeds SEED0 + this, ...")
    args = ap.parse_args()
    for name in args.datasets.split(","):
        d = load(name)
        for eps in map(float, args.eps.split(",")):
            if args.refs:
                r = refs(d, eps, args.seeds)
                print(f"| {name} | {eps:g} | refs | dp-forest {r['dp-forest']:.3f} | "
                      f"dp-lr {r['dp-lr']:.3f} |", flush=True)
            for mode in args.modes.split(","):
                if mode == "partial" and not d["public"]:
                    continue
                for v in args.variants.split(","):
                    rows = []
                    for s in range(args.first_seed, args.first_seed + args.seeds):
                        rows.append(run(d, mode, v, eps, SEED0 + s))
                        if args.jsonl is not None:
                            with args.jsonl.open("a") as f:
                                f.write(json.dumps({"dataset": name, "eps": eps, "mode": mode,
                                                    "variant": v, "seed": SEED0 + s,
                                                    "code": str(Path(brc_file()).parent.parent),
                                                    **rows[-1]}) + "\n")
                    print(f"| {name} ({d['fit'].n}) | {eps:g} | {mode} | {v} | "
                          f"K {rows[0]['K']} T {np.mean([r['T'] for r in rows]):.0f} | "
                          f"{np.mean([r['auc'] for r in rows]):.3f} / "
                          f"{np.mean([r['bacc'] for r in rows]):.3f} / acc "
                          f"{np.mean([r['acc'] for r in rows]):.3f} "
                          f"({sum(r['one'] for r in rows)}) |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
