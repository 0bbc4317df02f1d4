"""train-nb's forecast against the real fit (parameters and accuracy), its shape in ε, its plan.

Distribution tests wrongly fail with probability at most α = 1e-4 each, except the
accuracy comparison, whose tolerance is the issue's factor 1.5 on medians (its seeds
are fixed; the forecast is a simulation of a proxy, not a closed form).
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dpcli.algorithms import naive_bayes as nb
from dpcli.api.spend import with_schema
from dpcli.data.encode import EncodedBatch
from dpcli.data.schema import CategoricalColumn, Label, NumericColumn, Schema
from dpcli.forecast import forecast
from dpcli.forecast import train_nb as nbf
from dpcli.spec import TrainNBSection, load_spec
from dpcli.stats import compute_batches
from tests.forecast.adult_project import CONFIGS, adult_project, dry_run_breakdown

SMALL = Schema((NumericColumn("x", 0.0, 12.0), CategoricalColumn("c", ("p", "q", "r"))),
               Label("label", ("0", "1"), "1"))


@pytest.fixture(scope="module")
def spec():
    return load_spec(CONFIGS / "adult.yaml")


def test_parameter_errors_match_the_real_fit(spec) -> None:
    """1,500 real fits on one synthetic dataset (balanced classes, class means at the
    middle of the bounds: known truth). The sample median of |Laplace| over 3,000 draws (two
    classes; more for the cells) has a relative sd of 1/(ln 2·√3000) = 2.6 %; 12 % is beyond
    z = 4.5 (α < 1e-4; the discrete Laplace and the noisy denominators move it by well under
    1 % at these scales)."""
    n, eps = 20_000, 0.2   # every scale well above 1: the discrete noise's median ≈ Laplace's
    s = with_schema(spec, SMALL)
    # the Gaussian release (numeric: gaussian): its mean and variance errors are the closed
    # forms under test (the default histogram's cells are a table's, checked as `counts`)
    section = TrainNBSection(epsilon=eps, method="global", columns=("x", "c"),
                             numeric="gaussian")
    f = forecast("train-nb", s, section, n)
    p = nbf.plan(s, section, n)
    assert nb.has_step(p, "variance:x")
    config = nb.NBConfig(method="global", numeric="gaussian")
    rng = np.random.default_rng(1)
    label = (np.arange(n) % 2).astype(np.int32)
    x = np.clip(6.0 + rng.normal(0, 2.0, n), 0.0, 12.0)
    c = rng.integers(0, 3, n).astype(np.int32)
    stats = compute_batches(SMALL, nb.request(SMALL, ("x", "c"), config),
                            [EncodedBatch(n, label, {"x": x, "c": c})])
    true_counts = np.bincount(label, minlength=2).astype(float)
    true_table = np.asarray(stats.contingency["c"], float)
    true_mean = np.array([x[label == k].mean() for k in (0, 1)])
    true_var = np.array([x[label == k].var() for k in (0, 1)])
    counts, cells, means, variances = [], [], [], []
    for seed in range(1500):
        model = nb.fit(stats, SMALL, ("x", "c"), p, config, np.random.default_rng(seed))
        counts.append(model.class_counts - true_counts)
        cells.append(model.tables["c"] - true_table)
        means.append(model.numeric["x"].mean - true_mean)
        variances.append(model.numeric["x"].variance - true_var)
    n_c, sigma = n / 2, 12.0 / 6
    levels = len(SMALL.column("c").levels)
    # the "other" cell holds no record: the fit's clipping at 0 would halve its errors
    cells = np.asarray(cells)[:, :, :3]
    checks = {"prior": np.abs(counts) / n_c, "counts": np.abs(cells) * levels / n_c,
              "mean": np.abs(means) / sigma, "variance": np.abs(variances) / sigma ** 2}
    for name, measured in checks.items():
        assert np.median(measured) == pytest.approx(f.metrics[name].expected, rel=0.12), name


def _draw(sim: nbf._Simulation, columns: tuple[str, ...], n: int, seed: int) -> EncodedBatch:
    """n training rows (balanced classes) from the forecast's own synthetic model."""
    rng = np.random.default_rng(seed)
    label = (np.arange(n) % sim.k).astype(np.int32)
    cols: dict[str, np.ndarray] = {}
    for c in columns:
        if c in sim.tables:
            cum = np.cumsum(sim.tables[c][label], axis=1)
            cols[c] = np.minimum((rng.random(n)[:, None] > cum).sum(axis=1),
                                 cum.shape[1] - 1).astype(np.int32)
        else:
            lower, upper, mu, sigma = sim.numeric[c]
            cols[c] = np.clip(mu[label] + sigma * rng.normal(size=n), lower, upper)
    return EncodedBatch(n, label, cols)


def test_accuracy_forecast_against_the_real_fit(spec) -> None:
    """The real fit on rows drawn from the forecast's synthetic model, scored on its test
    rows against the same fit without noise (ε = 1e6): the median |accuracy error| of 16
    seeded fits is within the issue's factor 1.5 of the forecast's (where the loss is
    clear, and where it is small)."""
    section = spec.sections["train-nb"]
    columns = spec.schema.names
    for n, eps in ((3000, 1.0), (30_000, 0.5)):
        # the Gaussian release, whose synthetic rows are the model's own numeric values
        sec = replace(section, epsilon=eps, numeric="gaussian")
        f = forecast("train-nb", spec, sec, n)
        sim = nbf._Simulation.build(spec.schema, columns, 1.0, "truncated", n)
        config = nb.NBConfig(**sec.config_values())
        batch = _draw(sim, columns, n, seed=2)
        stats = compute_batches(spec.schema, nb.request(spec.schema, columns, config), [batch])
        test = EncodedBatch(len(sim.labels), sim.labels.astype(np.int32), dict(sim.rows))

        def accuracy(e: float, seed: int, sec=sec, n=n, config=config, stats=stats,
                     test=test, sim=sim) -> float:
            p = nbf.plan(spec, replace(sec, epsilon=e), n)
            model = nb.fit(stats, spec.schema, columns, p, config, np.random.default_rng(seed))
            return float((model.classify(test)[1] == sim.labels).mean())

        exact = accuracy(1e6, 0)
        errors = np.array([accuracy(eps, seed) - exact for seed in range(16)])
        measured, forecast_median = np.median(np.abs(errors)), f.metrics["accuracy"].expected
        assert forecast_median / 1.5 <= max(measured, 1e-3) <= forecast_median * 1.5, (
            n, eps, measured, forecast_median)


def test_monotone_in_epsilon(spec) -> None:
    section = spec.sections["train-nb"]
    fs = [forecast("train-nb", spec, replace(section, epsilon=e), 30_162)
          for e in (0.02, 0.05, 0.2, 1.0, 5.0)]
    for name in ("edge_lost", "accuracy", "prior", "counts"):
        values = [f.metrics[name].expected for f in fs]
        assert all(a >= b for a, b in itertools.pairwise(values)), (name, values)
        assert values[0] > values[-1]


def test_verdict_and_speed(spec) -> None:
    import time

    section = spec.sections["train-nb"]
    nbf._simulation.cache_clear()
    start = time.perf_counter()
    small = forecast("train-nb", spec, section, 1000)       # no context: the spec's columns
    took = time.perf_counter() - start
    assert took < 1.5   # ~0.25 s on one core; the bound leaves room for a loaded machine
    assert not small.verdict.usable and "edge over chance" in small.verdict.line()
    needed = small.verdict.epsilon_usable
    assert needed is not None and needed > section.epsilon
    assert forecast("train-nb", spec, replace(section, epsilon=needed * 1.05), 1000
                    ).verdict.usable
    big = forecast("train-nb", spec, section, 30_162)
    assert big.verdict.usable and big.verdict.metric == "edge_lost"
    # the same facts give the same forecast (fixed public seed)
    assert forecast("train-nb", spec, section, 30_162).to_json() == big.to_json()


def test_plan_equals_the_dry_run(tmp_path: Path) -> None:
    spec_path, data, spec = adult_project(tmp_path)
    section = spec.sections["train-nb"]
    assert nbf.plan(spec, section, 2000).to_json() == dry_run_breakdown("train-nb", spec_path,
                                                                        data)
    columns = ("age", "sex", "education")
    assert nbf.plan(spec, section, 2000, columns=columns).to_json() == dry_run_breakdown(
        "train-nb", spec_path, data, "--columns", ",".join(columns))
