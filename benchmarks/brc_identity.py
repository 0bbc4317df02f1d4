"""Old vs new ``dpcli train-brc``: do both codes write the same model file?

For each dataset:learner, ε and seed, runs ``dpcli train-brc TRAIN --spec S --out M
--epsilon E --seed SEED --quiet`` once with ``PYTHONPATH`` = the old code (``--old``, e.g.
a checkout of main) and once with this repository, on one ledger (its key seeds the noise,
so both draw the same noise), and compares the model files field by field except
``created`` and ``ledger_run_id`` (they name the run). Datasets: ``adult`` (Adult train,
../shared/data; ``brc-private``: every column and the label private, ``brc-partial``: the
label public and configs/adult.yaml's public columns) or any suite dataset
(``suite.run_spec`` / ``suite.prepare``: its cached train file). Prints one line per pair;
exits 1 if any pair differs.

    cd benchmarks && PYTHONPATH=.. python brc_identity.py --old <main checkout> \\
        --cases anes96:brc-private,default:brc-partial,adult:brc-private --eps 0.5,1,2 \\
        --seeds 1,2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from brc_speed_r9 import THREADS, digest, make_specs  # noqa: E402

ROOT = HERE.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, required=True)
    parser.add_argument("--cases", required=True, help="name:learner,...")
    parser.add_argument("--eps", default="0.5,1,2")
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    args = parser.parse_args()
    import suite

    codes = {"old": args.old.resolve(), "new": ROOT}
    differ = 0
    with tempfile.TemporaryDirectory(prefix="brc_identity_") as tmp:
        root = Path(tmp)
        adult = None
        for case in args.cases.split(","):
            name, learner = case.split(":")
            folder = root / f"{name}-{learner}"
            folder.mkdir()
            if name == "adult":
                adult = adult or make_specs(root, ROOT)
                spec = adult[learner.split("-")[1]]
                train = args.data / "adult_train.parquet"
            else:
                spec = suite.run_spec(name, learner, folder)
                train = suite.HERE / suite.prepare(name, args.data)["train"]
                subprocess.run([sys.executable, "-m", "dpcli", "ledger", "init", "--spec",
                                str(spec)], check=True, capture_output=True,
                               env={**os.environ, **THREADS, "PYTHONPATH": str(ROOT)})
            for eps in args.eps.split(","):
                for seed in args.seeds.split(","):
                    got = {}
                    for tag, code in codes.items():
                        model = folder / f"{tag}-{eps}-{seed}.json"
                        done = subprocess.run(
                            [sys.executable, "-m", "dpcli", "train-brc", str(train), "--spec",
                             str(spec), "--out", str(model), "--epsilon", eps, "--seed", seed,
                             "--quiet"], capture_output=True, text=True,
                            env={**os.environ, **THREADS, "PYTHONPATH": str(code)})
                        if done.returncode != 0:
                            raise SystemExit(f"{case} {tag}: exit {done.returncode}\n"
                                             f"{done.stderr[-1500:]}")
                        got[tag] = digest(model)
                    same = got["old"] == got["new"]
                    differ += not same
                    print(f"{name} {learner} ε {eps} seed {seed}: old {got['old']} new "
                          f"{got['new']} {'identical' if same else 'DIFFERENT'}", flush=True)
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
