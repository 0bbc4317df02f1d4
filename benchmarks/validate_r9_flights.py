"""Tuning split of nycflights13 for validate's wide-column rule (results/validate_r9.md).

The suite's flights train file (benchmarks/suite.py, its stratified 70/30 split) split again
70/30 (seed 12345) into OUT/fit.parquet and OUT/val.parquet, with a copy of the suite's spec
(absolute schema path, its own ledger). The suite's test rows are never written here.

    cd benchmarks && PYTHONPATH=.. python validate_r9_flights.py /tmp/fl
"""

from __future__ import annotations

import sys
from pathlib import Path

import suite
import yaml


def main(out: Path) -> None:
    got = suite._flights()
    train_idx, _ = suite.stratified_split(got["label"].to_numpy())
    train = got.iloc[train_idx].reset_index(drop=True)
    fit, val = suite.stratified_split(train["label"].to_numpy(), seed=12345,
                                      test_fraction=0.3)
    out.mkdir(parents=True, exist_ok=True)
    train.iloc[fit].reset_index(drop=True).to_parquet(out / "fit.parquet", index=False)
    train.iloc[val].reset_index(drop=True).to_parquet(out / "val.parquet", index=False)
    spec = yaml.safe_load((suite.SPECS / "flights.yaml").read_text())
    spec["schema"] = str((suite.SPECS / spec["schema"]).resolve())
    spec["ledger"] = str(out / "ledger.jsonl")
    (out / "spec.yaml").write_text(yaml.safe_dump(spec))
    print(len(fit), len(val))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
