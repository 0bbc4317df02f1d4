"""Run every benchmark script in this folder (`make bench`); ``_*.py`` are shared helpers.

Scripts in SLOW (hours, gigabytes of data) run only with ``--slow``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SLOW = {"scale.py",   # 10^6-5·10^7 rows, ~8 GB of files: run it on purpose
        "suite.py"}   # every learner × 11 datasets × 4 ε × 5 seeds: hours (it resumes)

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slow", action="store_true", help=f"also {', '.join(sorted(SLOW))}")
    args = parser.parse_args()
    for script in sorted(HERE.glob("*.py")):
        if script.name != Path(__file__).name and not script.name.startswith("_"):
            if script.name in SLOW and not args.slow:
                print(f"== {script.name}: skipped (slow; pass --slow, or run it alone)",
                      flush=True)
                continue
            print(f"== {script.name}", flush=True)
            subprocess.run([sys.executable, str(script)], check=True)
