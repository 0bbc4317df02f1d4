"""Every spending command as an audit case (see :mod:`tests.audit.cases`).

Each ``build`` does what the command does between its charge and its output:
the command's ``plan`` for the charged ε, the statistics of its pass
(:func:`tests.audit.pairs.stats_of`), then the algorithm's release function with a
fresh generator per run. Statistics are exact (private) and computed once per
dataset; only the noisy release is repeated.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from dpcli.budget import Budget
from dpcli.data.schema import CategoricalColumn, Label, Schema
from tests.audit.cases import CASES, case
from tests.audit.pairs import noiseless, replace_first, scaled_epsilon, sides, stats_of

__all__ = ["CASES"]

LABEL = Label("y", ("0", "1"), positive="1")


def _rows(n: int, **columns: list[object]) -> dict[str, list[object]]:
    """``n`` rows: labels alternate 0/1, each given column cycles through its values."""
    out: dict[str, list[object]] = {"y": [str(i % 2) for i in range(n)]}
    for name, values in columns.items():
        out[name] = [values[i % len(values)] for i in range(n)]
    return out


# --------------------------------------------------------------------------- tabulate
def _tabulate_control():
    from dpcli.algorithms import tabulate
    return scaled_epsilon(tabulate, "discrete_laplace_mechanism")


@case(name="tabulate", epsilon=2.0, runs=3000,
      pair="a rare category moves class: (y=0, colour=blue) → (y=1, colour=red), n=40",
      statistic="sides of the 4 changed cells (class counts, colour table)",
      control=_tabulate_control, control_name="discrete Laplace at 2ε")
def tabulate_build():
    from dpcli.algorithms import tabulate as algo

    schema = Schema((CategoricalColumn("colour", ("red", "green", "blue")),), LABEL)
    columns = ["colour"]
    plan = algo.plan(schema, columns, Budget(2.0))
    request = algo.request(schema, columns, bins=4)
    d = _rows(40, colour=["red", "green"])
    d["colour"][0], d["y"][0] = "blue", "0"
    dp = replace_first(d, {"colour": "red", "y": "1"})
    stats = [stats_of(schema, request, rows) for rows in (d, dp)]

    def counts(rows: list[dict[str, object]]) -> np.ndarray:
        return np.array([r["count"] for r in rows], dtype=float)

    with noiseless(algo, "discrete_laplace_mechanism", lambda x, **_: np.asarray(x)):
        exact = [counts(algo.release(s, plan, schema, columns, 4, np.random.default_rng(0)))
                 for s in stats]

    def release(s):
        return lambda rng: sides(counts(algo.release(s, plan, schema, columns, 4, rng)),
                                 *exact)
    return release(stats[0]), release(stats[1])


# --------------------------------------------------------------------------- evaluate
def _evaluate_control():
    from dpcli.algorithms import evaluate
    return scaled_epsilon(evaluate, "discrete_laplace_mechanism")


@case(name="evaluate", epsilon=2.0, runs=3000,
      pair="a flipped label: a record (true 0, predicted 0) → (true 1, predicted 0), n=100",
      statistic="sides of the 2 changed cells of the released (consistent) confusion matrix",
      control=_evaluate_control, control_name="discrete Laplace at 2ε")
def evaluate_build():
    from dpcli.algorithms import evaluate as ev

    true = np.array([0] * 50 + [1] * 50)
    predicted = np.array([0] * 25 + [1] * 25 + [0] * 25 + [1] * 25)
    d = ev.confusion_counts(true, predicted, 2)
    true_dp = true.copy()
    true_dp[0] = 1                       # row 0 is (true 0, predicted 0) in D
    dp = ev.confusion_counts(true_dp, predicted, 2)
    plan = ev.plan(Budget(2.0), 2)
    eps = plan.step("confusion").budget.eps

    def release(counts):
        return lambda rng: sides(ev.private_confusion(counts, ("0", "1"), epsilon=eps,
                                                      rng=rng, positive=1).matrix, d, dp)
    return release(d), release(dp)


# --------------------------------------------------------------------------- train-nb
def _nb_pair(method: str):
    """Schema x ∈ [0, 100]; D's row 0 is (y=0, x=0) at the lower bound, D''s (y=1, x=100)."""
    from dpcli.algorithms import naive_bayes as nb
    from dpcli.data.schema import NumericColumn

    schema = Schema((NumericColumn("x", 0.0, 100.0),), LABEL)
    config = nb.NBConfig(method=method)
    plan = nb.plan(schema, ["x"], Budget(3.0), config)
    request = nb.request(schema, ["x"], config)
    d = _rows(40, x=[float(v) for v in np.linspace(5, 95, 20)])
    d["x"][0], d["y"][0] = 0.0, "0"
    dp = replace_first(d, {"x": 100.0, "y": "1"})
    return nb, schema, config, plan, [stats_of(schema, request, r) for r in (d, dp)]


def _nb_released(model, mid: float, h: float) -> np.ndarray:
    """(class counts, Σ(x − mid) per class, Σ((x − mid)² − h²/2) per class), read back from a
    released model (mean = mid + Σ/n', var = Σ²/n' + h²/2 − (mean − mid)², n' = max(count, 1))."""
    counts = model.class_counts
    n = np.maximum(counts, 1.0)
    p = model.numeric["x"]
    centred = (p.mean - mid) * n
    squares = (p.variance - h * h / 2 + (p.mean - mid) ** 2) * n
    return np.concatenate([counts, centred, squares])


@contextmanager
def _nb_global_control():
    from dpcli.algorithms import naive_bayes
    with scaled_epsilon(naive_bayes, "laplace_mechanism"), \
            scaled_epsilon(naive_bayes, "discrete_laplace_mechanism"):
        yield


@case(name="train-nb global", epsilon=3.0, runs=6000,
      pair="a record moves class and bound: (y=0, x=0) → (y=1, x=100), x ∈ [0, 100], n=40",
      statistic="sides of the 6 changed values read back from the model (counts, class sums "
                "Σ(x−mid), Σ((x−mid)²−h²/2))",
      control=_nb_global_control, control_name="counts' and class sums' noise at 2ε")
def nb_global_build():
    nb, schema, config, plan, stats = _nb_pair("global")
    with noiseless(nb, "laplace_mechanism", lambda x, **_: np.asarray(x, float)), \
            noiseless(nb, "discrete_laplace_mechanism", lambda x, **_: np.asarray(x)):
        exact = [_nb_released(nb.fit(s, schema, ["x"], plan, config, np.random.default_rng(0)),
                              50.0, 50.0) for s in stats]

    def release(s):
        return lambda rng: sides(_nb_released(nb.fit(s, schema, ["x"], plan, config, rng),
                                              50.0, 50.0), *exact)
    return release(stats[0]), release(stats[1])
