"""train-brc's forecast against the real boosting rounds, its shape in ε, its plan.

Distribution tests wrongly fail with probability at most α = 1e-4 each.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dpcli.algorithms import brc
from dpcli.data.encode import EncodedBatch
from dpcli.data.schema import CategoricalColumn, Label, NumericColumn, Schema
from dpcli.forecast import forecast
from dpcli.forecast import train_brc as bf
from dpcli.spec import TrainBRCSection, load_spec
from tests.forecast.adult_project import CONFIGS, adult_project, dry_run_breakdown


@pytest.fixture(scope="module")
def spec():
    return load_spec(CONFIGS / "adult.yaml")


def _rounds_noise(monkeypatch: pytest.MonkeyPatch, n: int, config: brc.BRCConfig,
                  epsilon: float, seeds: int) -> np.ndarray:
    """Released minus exact weighted error of every round of the real ``brc.train`` on
    balanced synthetic records (class weights 1: ρ = 1, as the forecast assumes)."""
    recorded: list[float] = []
    real = brc.grid_laplace_mechanism

    def record(value, **kwargs):
        out = real(value, **kwargs)
        recorded.append(float(out) - float(value))
        return out

    monkeypatch.setattr(brc, "grid_laplace_mechanism", record)
    schema = Schema((NumericColumn("x", 0.0, 1.0), CategoricalColumn("c", ("a", "b"))),
                    Label("label", ("0", "1"), "1"))
    rng = np.random.default_rng(5)
    x = rng.random(n)
    label = (np.arange(n) % 2).astype(np.int32)
    batch = EncodedBatch(n, label, {"x": x, "c": rng.integers(0, 3, n).astype(np.int32)})
    data = brc.training_set([batch], schema, ("x", "c"), (), positive=1)
    for seed in range(seeds):
        brc.train(data, config, brc.rounds_epsilon(epsilon, config.counted),
                  np.random.default_rng(seed))
    return np.asarray(recorded)


def test_round_noise_matches_the_real_rounds(spec, monkeypatch: pytest.MonkeyPatch) -> None:
    """median |noise| and the 90 % bound of 2,000 released round errors within 12 % of the
    closed form: the sample median of |Laplace| has a relative sd of 1/(ln 2·√N) = 3.2 %
    at N = 2,000 (the 0.9 quantile 2.1 %), so 12 % is beyond z = 3.7 (α ≈ 1e-4 both)."""
    n, eps = 400, 0.5
    section = TrainBRCSection(epsilon=eps, rounds=200, c1=math.sqrt(2), c2=math.sqrt(2),
                              candidates=1)
    f = forecast("train-brc", spec, section, n)
    config = replace(bf_base(spec, section), rounds=200)
    noise = _rounds_noise(monkeypatch, n, config, eps, seeds=10)
    assert noise.size == 2000
    metric = f.metrics["round_error"]
    assert np.median(np.abs(noise)) == pytest.approx(metric.expected, rel=0.12)
    assert np.quantile(np.abs(noise), 0.9) == pytest.approx(metric.bound, rel=0.12)


def bf_base(spec, section) -> brc.BRCConfig:
    from dpcli.api.train_brc import base_config

    return base_config(spec, section)


def test_calibration_metric_is_the_commands_warning_quantity(spec) -> None:
    """The calibration metric's sd is what the command warns on (calibration_noise of a
    histogram of CALIBRATION_BINS bins at a balanced count)."""
    n = 3000
    f = forecast("train-brc", spec, spec.sections["train-brc"], n)
    cal = brc.Calibration(counts=((0, 0),) * brc.CALIBRATION_BINS, positives=n // 2)
    eps_cal = float(spec.sections["train-brc"].epsilon * brc.CALIBRATION_SHARE)
    sd = brc.calibration_noise(cal, n, eps_cal)
    assert f.metrics["calibration"].bound == pytest.approx(1.6449 * sd, rel=1e-4)
    assert f.metrics["calibration"].expected == pytest.approx(0.6745 * sd, rel=1e-4)


def test_monotone_where_the_rounds_are_fixed(spec) -> None:
    """Fixed rounds: the noise falls with ε and n. Auto rounds: T grows with ε to hold the
    noise under the edge and the class weights' cap takes the rest, so inside [10, 200] the
    forecast (at the cap) is 0.1/√2·ln 2, and it falls with ε where T sits at its floor."""
    fixed = TrainBRCSection(epsilon=1.0, rounds=25, c1=math.sqrt(2), c2=math.sqrt(2))
    for k in (1, 64):   # the paper's round, and a selecting one
        errs = [forecast("train-brc", spec, replace(fixed, epsilon=e, candidates=k), 5000)
                .metrics["round_error"].expected for e in (0.01, 0.1, 1.0, 10.0)]
        assert all(a > b for a, b in itertools.pairwise(errs))
    # selecting by default: inside [5, 200] the rounds hold the selection's noise scale at
    # most EDGE/3 (brc.select_rounds), whose median |·| is that times ln 2
    for e in np.geomspace(0.05, 0.5, 6):
        f = forecast("train-brc", spec, replace(spec.sections["train-brc"], epsilon=e), 30_000)
        assert brc.SELECT_MIN_ROUNDS < f.extra["rounds"] < brc.AUTO_MAX_ROUNDS
        assert f.metrics["round_error"].expected <= brc.EDGE / 3 * math.log(2) + 1e-12
    auto = replace(spec.sections["train-brc"], candidates=1)
    floor = [forecast("train-brc", spec, replace(auto, epsilon=e), 1000)
             for e in (0.01, 0.05, 0.1)]
    assert all(f.extra["rounds"] == brc.AUTO_MIN_ROUNDS for f in floor)
    assert all(a.metrics["round_error"].expected > b.metrics["round_error"].expected
               for a, b in itertools.pairwise(floor))
    inside = [forecast("train-brc", spec, replace(auto, epsilon=e), 30_000)
              for e in np.geomspace(0.01, 0.09, 12)]   # c = 1 (brc.auto_constant): T inside
    for f in inside:
        assert brc.AUTO_MIN_ROUNDS < f.extra["rounds"] < brc.AUTO_MAX_ROUNDS
        assert f.metrics["round_error"].expected == pytest.approx(
            brc.EDGE / math.sqrt(2) * math.log(2), rel=1e-9)
        # the rounds are fine here; the verdict may still fire on the class cut's noise
        assert f.metrics["round_error"].expected <= bf.TARGET
        assert f.verdict.usable or f.verdict.metric == "calibration"
    # the other metrics fall with ε
    for name in ("calibration", "class_count"):
        vals = [f.metrics[name].expected for f in inside]
        assert all(a > b for a, b in itertools.pairwise(vals))


def test_verdict_on_small_data_names_the_epsilon_that_helps(spec) -> None:
    section = spec.sections["train-brc"]
    f = forecast("train-brc", spec, section, 300)
    assert not f.verdict.usable and "near-chance" in f.verdict.line()
    needed = f.verdict.epsilon_usable
    assert needed is not None and needed > section.epsilon
    assert forecast("train-brc", spec, replace(section, epsilon=needed), 300).verdict.usable


def test_plan_equals_the_dry_run(tmp_path: Path) -> None:
    spec_path, data, spec = adult_project(tmp_path)
    section = spec.sections["train-brc"]
    assert bf.plan(spec, section, 2000).to_json() == dry_run_breakdown("train-brc", spec_path,
                                                                       data)
    f = forecast("train-brc", spec, section, 2000)     # no context: the spec's columns
    assert f.extra["rounds"] >= brc.SELECT_MIN_ROUNDS
    names = [s.name for s in bf.plan(spec, section, 2000)]
    # selecting (the default): one step for the rounds, T (at most f.extra's) after the count
    assert brc.SELECTION in names and not any(s.startswith(brc.STEP) for s in names)
    one = replace(section, candidates=1)
    assert forecast("train-brc", spec, one, 2000).extra["rounds"] == sum(
        1 for s in bf.plan(spec, one, 2000) if s.name.startswith(brc.STEP))


def test_the_verdict_fires_on_the_class_cuts_noise_too(spec) -> None:
    """The command warns after the spend when the calibration's noise exceeds
    CALIBRATION_NOISE_LIMIT of the smaller class; the verdict says it before (at the balanced
    proxy n/2), and names an ε at which both the rounds and the cut are usable (a new user
    saw 'usable' and then that warning: n = 543, ε = 1)."""
    section = replace(spec.sections["train-brc"], epsilon=1.0)
    f = forecast("train-brc", spec, section, 543)
    assert f.metrics["round_error"].expected <= bf.TARGET
    assert not f.verdict.usable and f.verdict.metric == "calibration"
    needed = f.verdict.epsilon_usable
    assert needed is not None and needed > 1.0
    assert forecast("train-brc", spec, replace(section, epsilon=needed * 1.01), 543).verdict.usable
