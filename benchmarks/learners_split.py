"""Tuning splits of the suite's train files (round 6, benchmarks/results/learners_r6.md).

A stratified 70/30 split (suite.stratified_split, seed 12345) of each named dataset's cached
train file into /tmp/learners6/tune/<name>/{fit,val}.parquet, with a copy of its suite spec
(absolute schema path, its own ledger) for benchmarks/learners_nb.py. Run from benchmarks/
after the suite has prepared the datasets (its test files are never read here):

    cd benchmarks && PYTHONPATH=.. python learners_split.py digits breast_cancer penguins
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import suite
import yaml

OUT = Path("/tmp/learners6/tune")


def main() -> None:
    for name in sys.argv[1:]:
        info = json.loads((suite.CACHE / "data" / name / "info.json").read_text())
        train = pd.read_parquet(suite.HERE / info["train"])
        fit, val = suite.stratified_split(train["label"].to_numpy(), seed=12345,
                                          test_fraction=0.3)
        folder = OUT / name
        folder.mkdir(parents=True, exist_ok=True)
        train.iloc[fit].reset_index(drop=True).to_parquet(folder / "fit.parquet", index=False)
        train.iloc[val].reset_index(drop=True).to_parquet(folder / "val.parquet", index=False)
        spec = yaml.safe_load((suite.SPECS / f"{name}.yaml").read_text())
        spec["schema"] = str((suite.SPECS / spec["schema"]).resolve())
        spec["ledger"] = str(folder / "ledger.jsonl")
        (folder / "spec.yaml").write_text(yaml.safe_dump(spec))
        print(name, len(fit), len(val))


if __name__ == "__main__":
    main()
