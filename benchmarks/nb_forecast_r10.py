"""train-nb's forecast against measured runs on a rare label (round 10, tester 11's case).

    PYTHONPATH=$PWD /work/bench-venv/bin/python benchmarks/nb_forecast_r10.py \\
        SPEC TRAIN.csv TEST.csv N [SEEDS] [--class-bins]

Per ε in (0.5, 1, 2): the forecast's edge_lost (median and 90 % bound, from public facts
and the spec's positive_share) and, over SEEDS seeded fits of the command's own algorithm
(plan, histogram bins, threshold on a second pass), the share of the balanced-accuracy
edge lost on TEST against the same learner at ε = 1e4 with the same bins (seed 0).
--class-bins switches on the rare class's coarser bins in the fit (nb_allocation.RARE_CLASS_BINS,
off since this measurement; the table in nb_forecast_r10.md was taken with them on).
Nothing is chosen on the test split.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from dpcli.algorithms import naive_bayes as nb
from dpcli.algorithms import nb_allocation
from dpcli.budget import Budget
from dpcli.data import DataSource
from dpcli.forecast import forecast
from dpcli.forecast import train_nb as nbf
from dpcli.spec import TrainNBSection, load_spec
from dpcli.stats import LocalEngine


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    spec = load_spec(args[0])
    train, test, n = Path(args[1]), Path(args[2]), int(args[3])
    seeds = int(args[4]) if len(args) > 4 else 10
    nb_allocation.RARE_CLASS_BINS = "--class-bins" in sys.argv
    cols = tuple(spec.schema.names)

    def batches(p: Path) -> list:
        return list(DataSource(p, spec.schema).batches(cols, rng=np.random.default_rng(0)))

    source, trb, teb = DataSource(train, spec.schema), batches(train), batches(test)
    labels = np.concatenate([b.label for b in teb])
    cache: dict = {}

    def balanced(section: TrainNBSection, seed: int) -> float:
        p = nbf.plan(spec, section, n)
        cfg = nb.NBConfig(**section.config_values())
        alloc = nb.allocation(spec.schema, cols, Budget(section.epsilon), cfg, n)
        key = tuple(sorted(alloc.bins.items()))
        if key not in cache:
            cache[key] = LocalEngine().compute(
                source, nb.request(spec.schema, cols, cfg, p=p, bins=dict(alloc.bins)),
                rng=np.random.default_rng(0))
        model = nb.fit(cache[key], spec.schema, cols, p, cfg, np.random.default_rng(seed))
        if nb.has_step(p, nb.THRESHOLD):
            nb.fit_threshold(model, p, trb, np.random.default_rng(seed))
        pred = np.concatenate([model.classify(b)[1] for b in teb])
        return float(np.mean([(pred[labels == c] == c).mean() for c in range(2)]))

    print("| ε | forecast median; 90 % bound | verdict | measured median (q10–q90) | runs |")
    print("| --- | --- | --- | --- | --- |")
    for eps in (0.5, 1.0, 2.0):
        f = forecast("train-nb", spec, TrainNBSection(epsilon=eps), n).metrics["edge_lost"]
        verdict = forecast("train-nb", spec, TrainNBSection(epsilon=eps), n).verdict
        bins = sorted(set(nb.allocation(spec.schema, cols, Budget(eps), nb.NBConfig(),
                                        n).bins.values()))
        ref = balanced(TrainNBSection(epsilon=1e4, bins=bins[0] if bins else None), 0)
        got = np.array([balanced(TrainNBSection(epsilon=eps), s) for s in range(seeds)])
        lost = (ref - got) / (ref - 0.5)
        q = np.quantile(lost, [0.1, 0.9])
        print(f"| {eps:g} | {f.expected:.3f}; ≤ {f.interval[1]:.3f} | "
              f"{'usable' if verdict.usable else 'noise dominates'} | "
              f"{np.median(lost):.3f} ({q[0]:.3f}–{q[1]:.3f}) | "
              f"{', '.join(f'{x:.2f}' for x in lost)} |", flush=True)


if __name__ == "__main__":
    main()
