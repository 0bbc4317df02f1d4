"""Every spending command as an audit case (see :mod:`tests.audit.cases`).

Each ``build`` does what the command does between its charge and its output:
the command's ``plan`` for the charged ε, the statistics of its pass
(:func:`tests.audit.pairs.stats_of`), then the algorithm's release function with a
fresh generator per run. Statistics are exact (private) and computed once per
dataset; only the noisy release is repeated.
"""

from __future__ import annotations

from contextlib import contextmanager
from unittest import mock

import numpy as np

from dpcli.budget import Budget
from dpcli.data.schema import CategoricalColumn, Label, Schema
from tests.audit.cases import CASES, case
from tests.audit.pairs import noiseless, replace_first, scaled_epsilon, sides, stats_of

__all__ = ["CASES", "SETUP"]

SETUP: dict[str, dict[str, object]] = {}
"""What a case's build used (schema, plan, exact statistics, rows), by command: for the
check that the command's own run reaches the release with the same (tests/audit/test_cli_path)."""

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
    SETUP["tabulate"] = {"schema": schema, "plan": plan, "stats": stats, "rows": (d, dp)}

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
    # the paper's split and no threshold: this case audits fit's releases (counts, class
    # sums); the threshold's mechanism has its own tests (tests/algorithms/test_nb_threshold)
    config = nb.NBConfig(method=method, split=dict(nb.EQUAL_SPLIT), threshold="none")
    plan = nb.plan(schema, ["x"], Budget(3.0), config)
    request = nb.request(schema, ["x"], config)
    d = _rows(40, x=[float(v) for v in np.linspace(5, 95, 20)])
    d["x"][0], d["y"][0] = 0.0, "0"
    dp = replace_first(d, {"x": 100.0, "y": "1"})
    SETUP[f"train-nb {method}"] = {"rows": (d, dp)}
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
    SETUP["train-nb global"].update(schema=schema, plan=plan, stats=stats)
    with noiseless(nb, "laplace_mechanism", lambda x, **_: np.asarray(x, float)), \
            noiseless(nb, "discrete_laplace_mechanism", lambda x, **_: np.asarray(x)):
        exact = [_nb_released(nb.fit(s, schema, ["x"], plan, config, np.random.default_rng(0)),
                              50.0, 50.0) for s in stats]

    def release(s):
        return lambda rng: sides(_nb_released(nb.fit(s, schema, ["x"], plan, config, rng),
                                              50.0, 50.0), *exact)
    return release(stats[0]), release(stats[1])


@contextmanager
def _local_sensitivity():
    """Noise scaled to the local sensitivity (β → ∞: S(x) = LS(x), no smoothing)."""
    from dpcli.algorithms import naive_bayes
    with noiseless(naive_bayes, "smooth_beta", lambda *_args, **_kw: 60.0):
        yield


@case(name="train-nb smooth", epsilon=3.0, runs=2000,
      pair="class 0 holds 20 equal values x=50; D' moves one to the bound x=100, n=40",
      statistic="minus the distance of the released mean of class 0 from 50 (D's value)",
      control=_local_sensitivity,
      control_name="noise scaled to the local sensitivity (β→∞, no smoothing)")
def nb_smooth_build():
    from dpcli.algorithms import naive_bayes as nb
    from dpcli.data.schema import NumericColumn

    schema = Schema((NumericColumn("x", 0.0, 100.0),), LABEL)
    # explicit split: no smooth → global fallback at n = 40 (the smooth release is audited)
    config = nb.NBConfig(method="smooth", split=dict(nb.EQUAL_SPLIT), threshold="none")
    plan = nb.plan(schema, ["x"], Budget(3.0), config)
    request = nb.request(schema, ["x"], config)
    d = _rows(40, x=[50.0])
    dp = replace_first(d, {"x": 100.0})
    stats = [stats_of(schema, request, r) for r in (d, dp)]

    def release(s):
        # closeness to D's exact value: the float-safe release puts even tiny noise on a fine
        # grid (no atom at 50 any more), so a one-sided event needs this post-processing
        return lambda rng: -abs(float(nb.fit(s, schema, ["x"], plan, config,
                                              rng).numeric["x"].mean[0]) - 50.0)
    return release(stats[0]), release(stats[1])


# ---------------------------------------------------------------------- select-features
def _selector(schema: Schema, columns: list[str], config, epsilon: float,
              rows: tuple[dict[str, list[object]], dict[str, list[object]]],
              statistic):
    """select-features as the command runs it (selection schema, plan, pass, select), each
    run reduced to ``statistic(selected candidate indices)``."""
    from dpcli.algorithms import feature_selection as fs

    schema = fs.selection_schema(schema, columns, config.r)
    plan = fs.plan(schema, columns, Budget(epsilon), config)
    request = fs.request(schema, columns, config)
    names = [c.name for c in fs.candidates(schema, columns)]
    SETUP["select-features"] = {"schema": schema, "plan": plan, "rows": rows,
                                "stats": [stats_of(schema, request, r) for r in rows]}

    def release(rows_one):
        stats = stats_of(schema, request, rows_one)

        def run(rng):
            chosen = fs.select(stats, schema, columns, plan, config, rng).selected
            return statistic([names.index(c.name) for c in chosen])
        return run
    return release(rows[0]), release(rows[1])


def _binary_columns(m: int) -> Schema:
    from dpcli.data.schema import BinaryColumn
    return Schema(tuple(BinaryColumn(f"b{j}", ("0", "1")) for j in range(m)), LABEL)


def _ptt(scores, threshold, *, cap, sensitivity, epsilon, rng, order=None):
    """Stoddard et al.'s Private Threshold Testing: noise on the threshold only, exact scores,
    no cap (the paper's formula; not differentially private)."""
    rho = rng.laplace(0.0, sensitivity / epsilon)
    return np.flatnonzero(np.asarray(scores) >= threshold + rho).astype(np.int64)


def _ptt_control():
    from dpcli.algorithms import feature_selection
    return noiseless(feature_selection, "sparse_vector", _ptt)


def _bitmask(chosen: list[int]) -> float:
    return float(sum(1 << i for i in chosen))


@case(name="select-features threshold (tc)", epsilon=2.0, runs=3000,
      pair="two binary features at the threshold: tc (10, 10) → (11, 9), one record's "
           "(b0, b1) = (0, 1) → (1, 0), τ = 10, cap 1, n=40",
      statistic="the selected set (bitmask)",
      control=_ptt_control,
      control_name="Stoddard et al.'s threshold testing (no score noise, no cap)")
def fs_threshold_build():
    from dpcli.algorithms import feature_selection as fs

    schema = _binary_columns(2)
    d = _rows(40, b0=["0"], b1=["0"])
    for i in range(1, 11):
        d["b0"][i] = "1"                 # b0 active in rows 1..10: tc 10
    for i in range(12, 21):
        d["b1"][i] = "1"                 # b1 active in rows 12..20 and row 0: tc 10
    d["b1"][0] = "1"
    dp = replace_first(d, {"b0": "1", "b1": "0"})
    config = fs.FSConfig(score="tc", method="threshold", threshold=10.0, k=1)
    return _selector(schema, ["b0", "b1"], config, 2.0, (d, dp), _bitmask)


def _topk_control():
    from dpcli.algorithms import feature_selection
    return scaled_epsilon(feature_selection, "exponential_top_k")


@case(name="select-features topk (tc)", epsilon=2.0, runs=4000,
      pair="20 binary features with tc 10; one record's features b1..b19 → b0 alone "
           "(tc of b0 +1, of every other −1), k = 1, n=40",
      statistic="whether b0 is selected",
      control=_topk_control, control_name="exponential top-k at 2ε")
def fs_topk_build():
    from dpcli.algorithms import feature_selection as fs

    m = 20
    schema = _binary_columns(m)
    columns = [f"b{j}" for j in range(m)]
    d = _rows(40, **{c: ["0"] for c in columns})
    for j, c in enumerate(columns):
        for i in range(1, 11 if j == 0 else 10):
            d[c][i] = "1"                  # tc 10 each: rows 1..10 for b0, 1..9 + row 0 else
        d[c][0] = "0" if j == 0 else "1"
    dp = replace_first(d, {c: "1" if j == 0 else "0" for j, c in enumerate(columns)})
    config = fs.FSConfig(score="tc", method="topk", k=1)
    return _selector(schema, columns, config, 2.0, (d, dp),
                     lambda chosen: float(chosen == [0]))


def _perturb_control():
    from dpcli.algorithms import feature_selection
    return scaled_epsilon(feature_selection, "discrete_laplace_mechanism")


@case(name="select-features perturb (tc)", epsilon=2.0, runs=3000,
      pair="a tokens column (4 words, r = 2): one record's words {w0, w1} → {w2, w3}, "
           "tc (10, 10, 9, 9) → (9, 9, 10, 10), τ = 9.5, n=40",
      statistic="#{w0, w1} selected − #{w2, w3} selected",
      control=_perturb_control, control_name="discrete Laplace at 2ε")
def fs_perturb_build():
    from pathlib import Path

    from dpcli.algorithms import feature_selection as fs
    from dpcli.data.schema import TokensColumn

    vocab = ("w0", "w1", "w2", "w3")
    schema = Schema((TokensColumn("t", vocab, Path("vocabulary.txt"), max_per_row=2),), LABEL)
    words: list[list[str]] = [[] for _ in range(40)]
    words[0] = ["w0", "w1"]
    for i in range(1, 10):
        words[i] = ["w0", "w1"]
        words[10 + i] = ["w2", "w3"]
    d = {"y": [str(i % 2) for i in range(40)], "t": words}
    dp = replace_first(d, {"t": ["w2", "w3"]})
    config = fs.FSConfig(score="tc", method="perturb", threshold=9.5)
    return _selector(schema, ["t"], config, 2.0, (d, dp),
                     lambda chosen: float(sum(1 if i < 2 else -1 for i in chosen)))


# --------------------------------------------------------------------------- publish-grid
@contextmanager
def _grid_control():
    from dpcli.algorithms import privpfc
    with scaled_epsilon(privpfc, "discrete_laplace_mechanism"), \
            scaled_epsilon(privpfc, "exponential_mechanism"):
        yield


@case(name="publish-grid", epsilon=3.0 * 4 / 7, runs=2000,
      scope="cell counts step (4/7 of ε = 3), given the grid chosen (leaves of b)",
      pair="a binary column b, cells of 10: one record (y=0, b=0) → (y=1, b=1), n=40",
      statistic="sides of the 2 changed counts of the released grid, runs that chose the "
                "leaves of b only",
      control=_grid_control,
      control_name="grid selection and cell counts at 2ε")
def publish_grid_build():
    from dpcli.algorithms import privpfc as pf
    from dpcli.data.schema import BinaryColumn
    from dpcli.stats import StatsRequest

    schema = Schema((BinaryColumn("b", ("0", "1")),), LABEL)
    hierarchies = pf.candidate_hierarchies(schema, ["b"])
    d = _rows(40, b=["0", "0", "1", "1"])       # (y, b) cycles (0,0) (1,0) (0,1) (1,1)
    dp = replace_first(d, {"y": "1", "b": "1"})
    design = pf.design(hierarchies, 40, Budget(3.0))
    assert design.pool_size == 2, design   # the pool is {root, leaves}: levels 0 and 1
    assert float(design.plan.step(pf.HISTOGRAM).budget.eps) == 3.0 * 4 / 7
    positive = LABEL.classes.index(LABEL.positive)
    tables = [stats_of(schema, StatsRequest(joint=tuple(hierarchies)), r).joint
              for r in (d, dp)]
    with noiseless(pf, "discrete_laplace_mechanism", lambda x, **_: np.asarray(x)), \
            noiseless(pf, "exponential_mechanism", lambda scores, **_: 1):
        exact = [pf.publish(t, hierarchies, design, positive, np.random.default_rng(0)).counts
                 for t in tables]

    def release(table):
        def run(rng):
            syn = pf.publish(table, hierarchies, design, positive, rng)
            return sides(syn.counts, *exact) if syn.levels[0] == 1 else float("nan")
        return run
    return release(tables[0]), release(tables[1])


# --------------------------------------------------------------------------- roc
def _roc_control():
    from dpcli.mechanisms import range_queries
    return scaled_epsilon(range_queries, "discrete_laplace_mechanism", 4.0)


def _roc_released(curve) -> np.ndarray:
    """The first bin's cumulative TP count (TPR × released n1) and the released n1."""
    return np.array([curve.tpr[1] * curve.positives, curve.positives])


@case(name="roc fixed-space", epsilon=1.0, runs=2500, scope="the counts step (½ of ε = 2)",
      pair="a positive record at the top score → a negative at the bottom (score range "
           "[0, 1], default 8 bins, hierarchical counts), n=40",
      statistic="sides of the top bin's cumulative TP count and of n1, read off the curve",
      control=_roc_control,
      control_name="prefix-sum tree's noise at 4ε (a quarter: the curve's consistency step "
                   "hides about half of the counts' loss, so half noise stays below ε)")
def roc_build():
    from dpcli.algorithms import roc
    from dpcli.mechanisms import range_queries

    config = roc.ROCConfig()
    n = 40
    plan = roc.plan(config, n, Budget(2.0))
    scores = np.linspace(0.05, 0.95, n)
    positive = np.arange(n) % 2 == 1
    scores[0], positive[0] = 1.0, True
    scores_dp, positive_dp = scores.copy(), positive.copy()
    scores_dp[0], positive_dp[0] = 0.0, False
    pairs = ((scores, positive), (scores_dp, positive_dp))

    def run(s, p, rng):
        curve, _ = roc.private_roc(s, p, lower=0.0, upper=1.0, config=config, run_plan=plan,
                                   rng=rng)
        return _roc_released(curve)

    with noiseless(range_queries, "discrete_laplace_mechanism", lambda x, **_: np.asarray(x)):
        exact = [run(s, p, np.random.default_rng(0)) for s, p in pairs]

    def release(s, p):
        return lambda rng: sides(run(s, p, rng), *exact)
    return release(*pairs[0]), release(*pairs[1])


def _roc_auc_control():
    from dpcli.algorithms import roc_scale
    return scaled_epsilon(roc_scale, "discrete_laplace_mechanism")


def _roc_auc_pair(move_label: bool):
    """n = 40: one positive at the top score, the others below it (a lone positive, or
    half of them positive); in D' it moves to the bottom, or becomes a negative there."""
    n = 40
    scores = np.linspace(0.05, 0.95, n)
    positive = np.zeros(n, dtype=bool) if not move_label else np.arange(n) % 2 == 1
    scores[0], positive[0] = 1.0, True
    scores_dp, positive_dp = scores.copy(), positive.copy()
    scores_dp[0], positive_dp[0] = 0.0, not move_label
    return n, ((scores, positive), (scores_dp, positive_dp))


def _roc_auc_build(move_label: bool, field: str):
    from dpcli.algorithms import roc, roc_scale

    config = roc.ROCConfig()
    n, pairs = _roc_auc_pair(move_label)
    plan = roc.plan(config, n, Budget(2.0))

    def run(s, p, rng):
        curve, _ = roc.private_roc(s, p, lower=0.0, upper=1.0, config=config, run_plan=plan,
                                   rng=rng)
        return np.array([getattr(curve.auc_release, field)], dtype=float)

    with noiseless(roc_scale, "discrete_laplace_mechanism", lambda x, **_: int(x)):
        exact = [run(s, p, np.random.default_rng(0)) for s, p in pairs]

    def release(s, p):
        return lambda rng: sides(run(s, p, rng), *exact)
    return release(*pairs[0]), release(*pairs[1])


@case(name="roc auc pairs", epsilon=0.75, runs=2500, scope="the auc step (¾ of ½ of ε = 2)",
      pair="a lone positive at the top score → at the bottom, 39 negatives between: the signed "
           "pair count moves by 2(n−1) = 78, its sensitivity, n=40",
      statistic="sides of the released noisy pair count D",
      control=_roc_auc_control, control_name="the AUC's discrete Laplace at 2ε")
def roc_auc_build():
    return _roc_auc_build(False, "pairs")


@case(name="roc auc positives", epsilon=0.25, runs=2500,
      scope="the auc_positives step (¼ of ½ of ε = 2)",
      pair="a positive at the top score → a negative at the bottom (21 of 40 positive): n1 "
           "moves by 1, n=40",
      statistic="sides of the released noisy count of positives",
      control=_roc_auc_control, control_name="the AUC's discrete Laplace at 2ε")
def roc_auc_positives_build():
    return _roc_auc_build(True, "positives")


# --------------------------------------------------------------------------- validate
def _quarter_noise_trainers():
    from dpcli.algorithms import validate
    from dpcli.mechanisms import objective_perturbation, output_perturbation

    def at(trainer):
        return lambda x, y, lam, epsilon, rng: trainer(x, y, lam, 4.0 * epsilon, rng)
    return mock.patch.dict(validate.TRAIN, {"objective": at(objective_perturbation),
                                            "output": at(output_perturbation)})


def _logistic_gradient(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """∇ (1/n) Σ log(1 + exp(−y wᵀx))."""
    from scipy.special import expit
    return -(x.T @ (y * expit(-(y * (x @ w))))) / x.shape[0]


def _validate_build(trainer: str):
    """validate (stability, ramp score, grid (1, 2)) on x ∈ [−1, 1]; D's training row 0 is
    (x=1, y=0), D''s (x=1, y=1). Runs that chose λ = 1 only; the statistic is the privacy-loss
    variable of the final fit at λ = 1 (the noise density's log-ratio at the released w)."""
    from dpcli.algorithms import validate as va
    from dpcli.data.schema import NumericColumn
    from dpcli.mechanisms import objective_constants
    from dpcli.mechanisms.erm import minimise
    from tests.audit.pairs import encode

    schema = Schema((NumericColumn("x", -1.0, 1.0),), LABEL)
    positive = LABEL.classes.index(LABEL.positive)
    values = [float(v) for v in np.linspace(-1, 1, 20)]
    d = {"y": ["1" if v > 0 else "0" for v in values], "x": values}
    d["x"][0], d["y"][0] = 1.0, "0"
    dp = replace_first(d, {"y": "1"})
    valid = {"y": ["1" if v > 0 else "0" for v in values[::-1]], "x": values[::-1]}
    sets = [va.design_rows([encode(schema, r, ["x"])], schema, ["x"], positive)
            for r in (d, dp, valid)]
    config = va.ValidateConfig(grid=(1.0, 2.0), trainer=trainer)
    n, dim = sets[0][0].shape
    epsilon = 4.0
    plan = va.plan(config, epsilon, n, sets[2][0].shape[0], dim)
    eps_final = float(plan.step("final").budget.epsilon)
    lam = config.grid[0]
    if trainer == "output":
        theta = 2.0 / (n * lam * eps_final)
        centres = [minimise(x, y, lam) for x, y in sets[:2]]

        def loss(w: np.ndarray) -> float:
            return float(np.linalg.norm(w - centres[1]) - np.linalg.norm(w - centres[0])) / theta
    else:
        eps_prime, extra = objective_constants(eps_final, n, lam)

        def noise(x, y, w):           # the b that makes w the optimum on (x, y)
            return -n * (_logistic_gradient(x, y, w) + (lam + extra) * w)

        def loss(w: np.ndarray) -> float:
            b = [noise(x, y, w) for x, y in sets[:2]]
            return float(np.linalg.norm(b[1]) - np.linalg.norm(b[0])) * eps_prime / 2

    def release(train_set):
        def run(rng):
            outcome = va.tune(config, train_set, sets[2], epsilon, rng)
            return loss(outcome.fit.weights) if outcome.index == 0 else float("nan")
        return run
    return release(sets[0]), release(sets[1])


for _trainer in ("objective", "output"):
    case(name=f"validate stability ({_trainer})", epsilon=2.0, runs=2000,
         scope="final training step (ε/2 of ε = 4), given the chosen λ = 1",
         pair="a flipped label at the bound: training row (x=1, y=0) → (x=1, y=1), x ∈ [−1, 1], "
              "n=20 (+ 20 validation rows), grid λ ∈ {1, 2}, ramp score",
         statistic="the final fit's privacy-loss variable (log noise-density ratio at the "
                   "released w), runs that chose λ = 1",
         control=_quarter_noise_trainers,
         control_name="every fit's noise at 4ε (a quarter: one record moves w* by at most "
                      "≈ Δ/2 here, so half noise stays below ε)")(
        lambda _trainer=_trainer: _validate_build(_trainer))


# --------------------------------------------------------------------------- train-brc
def _brc_control():
    from dpcli.algorithms import brc
    return scaled_epsilon(brc, "grid_laplace_mechanism")


def _brc_build(mode: str):
    """train-brc with T = 1 and c1 = c2 = 1 (weights stay 1, so one record moves the round's
    error by exactly Δ = 1/n when its miss bit flips: the sensitivity is met with equality).

    private: D's row 0 is (x = −1, y = 0), D''s (x = −1, y = 1): the label flips, and so
    does the miss bit of every random classifier. partial (label and a balanced public
    binary column p declared public; the neighbours may differ in private features only):
    row 0's x = −1 → x = 1, same label; the miss bit flips for the classifiers that
    separate −1 from 1. Statistic: the round's released error err = 1/2 − α_1, as sides
    relative to the exact errors of the released classifier on D and D' (0 when they are
    equal); 9 if the public stump won the round."""
    from dpcli.algorithms import brc
    from dpcli.data.schema import BinaryColumn, NumericColumn
    from tests.audit.pairs import encode

    schema = Schema((NumericColumn("x", -1.0, 1.0), BinaryColumn("p", ("0", "1"))), LABEL)
    positive = LABEL.classes.index(LABEL.positive)
    n = 40
    d = _rows(n, x=[float(v) for v in np.linspace(-1, 1, 20)], p=["0", "0", "1", "1"])
    d["x"][0], d["y"][0] = -1.0, "0"
    dp = replace_first(d, {"y": "1"} if mode == "private" else {"x": 1.0})
    columns, public = (["x"], []) if mode == "private" else (["x", "p"], ["p"])
    sets = [brc.training_set([encode(schema, r, columns)], schema, columns, public, positive)
            for r in (d, dp)]
    config = brc.BRCConfig(rounds=1, c1=1.0, c2=1.0)
    epsilon = 2.0
    plan = brc.plan(Budget(epsilon), config, n)
    assert abs(float(plan.step(f"{brc.STEP}1").budget.epsilon) - 0.9 * epsilon) < 1e-12

    def release(data):
        def run(rng):
            # fit's first part, drawn first: the statistic reads the rounds only, whose law does
            # not depend on the calibration drawn after them (its Platt fit is the slow part)
            rounds, _ = brc.train(data, config, brc.rounds_epsilon(epsilon), rng)
            r = rounds[0]
            if r.hyperplane is None:
                return 9.0
            exact = [brc.weighted_error((r.hyperplane.predict(s.private) != s.y).astype(float),
                                        np.ones(s.n)) for s in sets]
            return sides(np.array([0.5 - r.alpha]), *([e] for e in exact))
        return run
    return release(sets[0]), release(sets[1])


for _mode, _pair in (("private", "a flipped label: (x=−1, y=0) → (x=−1, y=1), all private"),
                     ("partial", "a private feature at its bounds: x = −1 → 1, same label "
                                 "(label and p public)")):
    case(name=f"train-brc {_mode}", epsilon=2.0, runs=3000,
         pair=f"{_pair}, x ∈ [−1, 1], T = 1, c1 = c2 = 1, n=40",
         statistic="sides of the round's released error (err = 1/2 − α) about the released "
                   "classifier's exact errors on D and D'",
         control=_brc_control, control_name="the rounds' grid Laplace at 2ε")(
        lambda _mode=_mode: _brc_build(_mode))


# ----------------------------------------------------------------------- schema suggest
def _suggest_control():
    from dpcli.algorithms import suggest
    return scaled_epsilon(suggest, "exponential_mechanism")


@case(name="schema suggest (a bound's quantile)", epsilon=2.0, runs=3000,
      pair="n = 2,000 values, 990 at or below the candidate 2, 1,010 at or below 5 (median "
           "target 1,000: the two tie); one value above 5 → 1.5 (#≤2 and #≤5 both +1)",
      statistic="whether the candidate 2 is released",
      control=_suggest_control, control_name="exponential mechanism at 2ε")
def suggest_build():
    from dpcli.algorithms import suggest as algo

    grid = algo.candidates()[algo.grid_mask(2000, 2.0)]   # the 67 round numbers at this n·ε
    d = np.concatenate([np.full(990, 1.5), np.full(20, 3.0), np.full(990, 7.0)])
    dp = d.copy()
    dp[-1] = 1.5
    two = int(np.searchsorted(grid, 2.0))
    below = [algo.count_at_or_below(x, grid) for x in (d, dp)]

    def release(b):
        return lambda rng: float(algo.private_quantile(b, 2000, 0.5, 2.0, rng) == two)
    return release(below[0]), release(below[1])
