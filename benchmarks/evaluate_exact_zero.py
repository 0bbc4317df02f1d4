"""evaluate on a model that never predicts a class: the K×K release against exact zero columns.

A 300-row Adult subsample is published at ε 0.1 (publish-grid; a one-cell grid
that predicts '0' everywhere at these figures), and its evaluation on a
300-row test subsample is released 2,000 times at each ε two ways, from the
same true matrix: the K×K release (``private_confusion`` without exact
columns: the code path before exact zero columns, draw for draw) and the
release with the never-predicted column as exact zeros. Reported: the
released accuracy's error against the true one, how often a precision is
printed for the class the model never predicts, and how often the released
recall of the predicted class differs from its true 1.

    python benchmarks/evaluate_exact_zero.py [--data /work/shared/data] [--out benchmarks/results]

Parameters fixed in advance (300 rows, ε 0.1 for the grid; ε 0.1 and 0.5 for
evaluate; seeds 0, 1 for the subsamples, 20261128 for the draws).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from _common import DEFAULT_DATA, ROOT, data_missing, dpcli_command, environment, write_results

DRAWS = 2000
EPSILONS = (0.1, 0.5)


def _grid(folder: Path, train: Path) -> Path:
    """publish-grid at ε 0.1 on the subsample, under a copy of configs/adult.yaml with its own
    ledger in ``folder``."""
    for name in ("adult.schema.yaml", "adult_taxonomy.json"):
        shutil.copy(ROOT / "configs" / name, folder / name)
    spec = (ROOT / "configs" / "adult.yaml").read_text()
    spec = spec.replace("ledger: ../ledgers/uci-adult.jsonl", "ledger: ledger.jsonl")
    (folder / "adult.yaml").write_text(spec)
    cmd = dpcli_command()
    subprocess.run([*cmd, "ledger", "init", "--spec", str(folder / "adult.yaml")], check=True,
                   capture_output=True)
    subprocess.run([*cmd, "publish-grid", str(train), "--spec", str(folder / "adult.yaml"),
                    "--epsilon", "0.1", "--out", str(folder / "grid"), "--seed", "1", "-q"],
                   check=True, capture_output=True)
    return folder / "grid"


def main() -> None:
    import pyarrow.parquet as pq

    from dpcli.algorithms import evaluate as ev
    from dpcli.algorithms import predictable
    from dpcli.data import DataSource
    from dpcli.predict import classify, load_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    paths = [args.data / "adult_train.parquet", args.data / "adult_test.parquet"]
    if data_missing("evaluate_exact_zero.py", paths):
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        train, test = folder / "train.parquet", folder / "test.parquet"
        for source, target, seed in ((paths[0], train, 0), (paths[1], test, 1)):
            table = pq.read_table(source)
            rows = np.sort(np.random.default_rng(seed).choice(table.num_rows, 300, replace=False))
            pq.write_table(table.take(rows), target)
        model, _ = load_model(_grid(folder, train))
        can = predictable.of_model(model)
        assert can is not None
        never = can.never(2)
        counts = np.zeros((2, 2), dtype=np.int64)
        source = DataSource(test, model.schema)
        for batch in source.batches(model.columns, rng=np.random.default_rng(0)):
            counts += ev.confusion_counts(batch.label, classify(model, batch)[1], 2)
    true_accuracy = float(np.trace(counts) / counts.sum())
    rng = np.random.default_rng(20261128)
    results = []
    for eps in EPSILONS:
        for name, exact in (("K×K (before)", ()), ("exact zeros", never)):
            acc, prec, rec = [], [], []
            for _ in range(DRAWS):
                r = ev.private_confusion(counts, ("0", "1"), epsilon=eps, rng=rng,
                                         exact_zero=exact)
                per = r.per_class()
                acc.append(r.accuracy)
                prec.append(per["1"]["precision"])
                rec.append(per["0"]["recall"])
            err = np.abs(np.array(acc) - true_accuracy)
            defined = np.array([p for p in prec if p is not None])
            results.append({"epsilon": eps, "release": name,
                            "accuracy_error_median": float(np.median(err)),
                            "accuracy_error_q90": float(np.quantile(err, 0.9)),
                            "precision_1_printed": float(defined.size / DRAWS),
                            "precision_1_mean_when_printed":
                                float(defined.mean()) if defined.size else None,
                            "recall_0_not_1": float(np.mean(np.array(rec) != 1.0))})
    lines = ["# evaluate on a never-predicting model: K×K release vs exact zero columns", "",
             f"One-cell grid (publish-grid ε 0.1, 300 Adult training rows): never predicts "
             f"{[str(c) for c in never]} ({can.how}). True test matrix {counts.tolist()}, "
             f"true accuracy {true_accuracy:.4f}. {DRAWS} releases each.", "",
             "| ε | release | median abs. accuracy error | 90 % quantile | precision('1') "
             "printed | its mean | recall('0') released ≠ 1 |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        mean = r["precision_1_mean_when_printed"]
        lines.append(f"| {r['epsilon']} | {r['release']} | {r['accuracy_error_median']:.4f} | "
                     f"{r['accuracy_error_q90']:.4f} | {r['precision_1_printed']:.1%} | "
                     f"{'—' if mean is None else f'{mean:.3f}'} | {r['recall_0_not_1']:.1%} |")
    text = "\n".join(lines)
    print(text)
    write_results(args.out, "evaluate_exact_zero", text,
                  {"environment": environment(), "counts": counts.tolist(),
                   "true_accuracy": true_accuracy, "never": list(never), "results": results})


if __name__ == "__main__":
    main()
