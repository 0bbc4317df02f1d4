"""The suite's forecast-vs-measured table (benchmarks/suite.py): errors, ratio, coverage."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def suite():
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("suite_under_test", BENCH / "suite.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["suite_under_test"] = module   # its dataclasses look themselves up
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("suite_under_test", None)
        sys.path.remove(str(BENCH))


def _fc(metric: str, expected: float, lo: float, hi: float, n: int = 100) -> dict:
    return {"n": n, "forecast": {metric: {"expected": expected, "interval": [lo, hi],
                                          "level": 0.9}}}


def _cell(suite, rep: int, released: float, truth: float, accuracy: float,
          eps: float = 1.0) -> dict:
    return {"kind": "dpcli", "status": "ok", "dataset": "d", "learner": "nb-global",
            "epsilon": eps, "rep": rep, "accuracy": accuracy,
            "forecasts": {"model": _fc("accuracy", 0.02, -0.05, 0.0),
                          "roc": {"forecast": _fc("auc", 0.01, -0.02, 0.02),
                                  "released": {"auc": released}, "truth": {"auc": truth}}}}


def test_forecast_errors_and_table(suite) -> None:
    noise_free = {"kind": "dpcli", "status": "ok", "dataset": "d", "learner": "nb-global",
                  "epsilon": suite.NOISE_FREE, "rep": 0, "accuracy": 0.8}
    cells = [noise_free, _cell(suite, 0, 0.81, 0.80, 0.79), _cell(suite, 1, 0.75, 0.80, 0.70),
             _cell(suite, 2, 0.805, 0.80, 0.80)]
    groups = suite.forecast_errors(cells)
    roc = groups[("roc", "auc", "d", 1.0, "nb-global")]
    assert roc["errors"] == pytest.approx([0.01, -0.05, 0.005])
    acc = groups[("train-nb", "accuracy", "d", 1.0, "nb-global")]
    assert acc["errors"] == pytest.approx([-0.01, -0.1, 0.0])
    # no edge_lost forecast in these models: no row for it
    assert ("train-nb", "edge_lost", "d", 1.0, "nb-global") not in groups
    md = "\n".join(suite.forecast_table(cells))
    # roc: measured median |error| 0.01 = the forecast's: ratio 1.00; 2 of 3 inside [-0.02, 0.02]
    assert "| roc | auc | d | 1 | 100 | nb-global | 0.01 | [-0.02, 0.02] (90%) | 0.01 | 1.00 | " \
           "2/3 ✗ |" in md
    # train-nb accuracy: median |error| 0.01 against 0.02: ratio 0.50, a miss
    assert "| train-nb | accuracy | d | 1 | 100 | nb-global | 0.02 |" in md and "0.50 ✗" in md
    assert suite.forecast_table([noise_free]) == []
