"""Child process for the ledger's multi-process tests (run by tests/test_ledger.py).

Usage: python ledger_worker.py MODE LEDGER DATASET TOTAL_EPS EPS

* race: print "ready", wait for a line on stdin, then reserve EPS; exit 0 on
  success, or the error's exit code (3 for BudgetExhausted).
* hold: reserve EPS, print "reserved <run_id>", then block reading stdin
  (the parent kills it with SIGKILL).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from dpcli.budget import Budget
from dpcli.errors import DpcliError
from dpcli.ledger import Ledger


class OneStepPlan:
    """The smallest PlanLike: a single step spending the whole budget."""

    def __init__(self, epsilon: str) -> None:
        self.total = Budget(epsilon)

    def to_json(self) -> list[dict[str, Any]]:
        return [{"name": "all", "mechanism": "laplace", "epsilon": self.total.eps, "delta": 0.0}]


def main(mode: str, path: str, dataset: str, total: str, epsilon: str) -> int:
    ledger = Ledger(Path(path), dataset, Budget(total))
    if mode == "race":
        print("ready", flush=True)
        sys.stdin.readline()
    try:
        reservation = ledger.reserve(
            OneStepPlan(epsilon), command="test", arguments={"mode": mode}, spec_digest="0" * 64,
            input_file=None, input_digest=None, seeded=False)
    except DpcliError as exc:
        print(f"refused {exc}", flush=True)
        return exc.exit_code
    print(f"reserved {reservation.run_id}", flush=True)
    if mode == "hold":
        sys.stdin.read()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
