"""Each step of every spending command's plan on configs/adult.yaml carries its sensitivity,
and where a replace-one change of the step's statistic can be measured (the count tables and
class sums the audit cases release, :mod:`tests.audit.pairs`), the plan's number is the
largest change measured: no smaller (the noise would be too small), no larger on the worst
pair (the plan says what the noise is calibrated to).

The plans come from the real CLI (``--dry-run --json``'s breakdown) on synthetic rows drawn
from adult's DECLARED domains (no private data, no ../shared), with the spec copied beside
them and its ledger moved there."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.audit.pairs import replace_first, stats_of
from tests.cli.conftest import cli_runner, sync_ledger

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
N = 1500


def _rows(spec: Any, n: int, seed: int = 0) -> pd.DataFrame:
    from dpcli.data.schema import CategoricalColumn, NumericColumn

    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    for col in spec.schema.columns:
        if isinstance(col, NumericColumn):
            out[col.name] = np.round(rng.uniform(col.lower, col.upper, n))
        elif isinstance(col, CategoricalColumn):
            out[col.name] = rng.choice(list(col.categories), n)
        else:
            out[col.name] = rng.choice(list(col.levels), n)
    label = spec.schema.label
    out[label.column] = [int(c) for c in rng.choice(list(label.classes), n)]
    return pd.DataFrame(out)


@pytest.fixture(scope="module")
def adult(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The adult spec beside synthetic rows, its ledger fresh; plans by command."""
    from dpcli.spec import load_spec

    root = tmp_path_factory.mktemp("adult")
    for name in ("adult.schema.yaml", "adult_taxonomy.json"):
        shutil.copy(CONFIGS / name, root / name)
    raw = yaml.safe_load((CONFIGS / "adult.yaml").read_text())
    raw["ledger"] = "ledger.jsonl"
    spec_path = root / "adult.yaml"
    spec_path.write_text(yaml.safe_dump(raw, sort_keys=False))
    sync_ledger(spec_path)
    spec = load_spec(spec_path)
    data = root / "adult.parquet"
    _rows(spec, N).to_parquet(data, index=False)
    cli = cli_runner()
    model = root / "nb.json"
    r = cli("train-nb", data, "--spec", spec_path, "--out", model)
    assert r.exit_code == 0, r.stderr
    plans: dict[str, list[dict[str, Any]]] = {}
    for command, extra in (("tabulate", ()), ("select-features", ("--allow-noise",)),
                           ("train-nb", ()), ("train-brc", ()), ("validate", ()),
                           ("publish-grid", ()),
                           ("evaluate", ("--model", model)), ("roc", ("--model", model))):
        r = cli(command, data, "--spec", spec_path, *extra, "--dry-run", "--json")
        assert r.exit_code == 0, (command, r.stderr)
        plans[command] = json.loads(r.stdout)["breakdown"]
    return {"spec": spec, "plans": plans}


COMMANDS = ("tabulate", "select-features", "train-nb", "train-brc", "validate",
            "publish-grid", "evaluate", "roc")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_step_has_a_sensitivity(adult: dict[str, Any], command: str) -> None:
    plan = adult["plans"][command]
    assert plan
    for step in plan:
        assert isinstance(step["sensitivity"], int | float) and step["sensitivity"] > 0, step


def _worst_change(schema: Any, request: Any, rows: dict[str, list[Any]],
                  neighbours: list[dict[str, Any]], read: Any) -> float:
    """The largest L1 change of ``read(stats)`` over the replace-one neighbours of ``rows``."""
    base = np.asarray(read(stats_of(schema, request, rows)), dtype=float)
    return max(float(np.abs(np.asarray(read(stats_of(schema, request,
                                                     replace_first(rows, record))),
                                        dtype=float) - base).sum())
               for record in neighbours)


def _worst_pair(schema: Any, request: Any, rows: dict[str, list[Any]],
                records: list[dict[str, Any]], read: Any) -> float:
    """The largest L1 change of ``read(stats)`` between ``rows`` with row 0 set to any two of
    ``records`` (both sides of the pair range over them)."""
    values = [np.asarray(read(stats_of(schema, request, replace_first(rows, r))), dtype=float)
              for r in records]
    return max(float(np.abs(a - b).sum()) for a in values for b in values)


def _small(spec: Any, columns: list[str], n: int = 60) -> dict[str, list[Any]]:
    frame = _rows(spec, n, seed=1)
    return {c: list(frame[c]) for c in [*columns, spec.schema.label.column]}


def _neighbours(spec: Any, rows: dict[str, list[Any]], column: str) -> list[dict[str, Any]]:
    """Replacements of row 0: every declared level (or both bounds and the midpoint) of
    ``column`` under each class."""
    from dpcli.data.schema import NumericColumn

    col = spec.schema.column(column)
    values = ([col.lower, col.upper, (col.lower + col.upper) / 2]
              if isinstance(col, NumericColumn) else list(col.levels))
    label = spec.schema.label
    return [{column: v, label.column: int(c)} for v in values for c in label.classes]


def _by_step(plan: list[dict[str, Any]]) -> dict[str, float]:
    return {s["step"]: float(s["sensitivity"]) for s in plan}


@pytest.mark.parametrize("command", ["tabulate", "train-nb"])
def test_count_tables_sensitivity_is_the_measured_worst_change(adult: dict[str, Any],
                                                               command: str) -> None:
    from dpcli.algorithms import tabulate
    from dpcli.data.schema import NumericColumn
    from dpcli.stats import StatsRequest

    spec = adult["spec"]
    steps = _by_step(adult["plans"][command])
    prior = "class_counts" if command == "tabulate" else "prior"
    tables = [s[7:] for s in steps if s.startswith("counts:")]
    assert tables
    for column in tables:
        assert not isinstance(spec.schema.column(column), NumericColumn)
        rows = _small(spec, [column])
        request = StatsRequest(contingency=(column,))
        neighbours = _neighbours(spec, rows, column)
        assert _worst_change(spec.schema, request, rows, neighbours,
                             lambda s, c=column: s.contingency[c]) == steps[f"counts:{column}"]
        assert _worst_change(spec.schema, request, rows, neighbours,
                             lambda s: s.class_counts) == steps[prior]
    assert tabulate.CLASS_STEP == "class_counts"


def test_naive_bayes_class_sums_sensitivity_is_the_measured_worst_change(
        adult: dict[str, Any]) -> None:
    """train-nb's global method releases per-class Σ(x − mid) and Σ((x − mid)² − h²/2)
    (naive_bayes._global_numeric): their worst replace-one L1 change is the plan's 2h, h²."""
    from dpcli.algorithms import naive_bayes as nb
    from dpcli.budget import Budget
    from dpcli.stats import StatsRequest

    spec = adult["spec"]
    # the spec's numeric: gaussian (the default models numeric columns as histograms)
    steps = _by_step(nb.plan(spec.schema, spec.schema.names, Budget(1),
                             nb.NBConfig(numeric="gaussian"), 30_000).to_json())
    numeric = [s[5:] for s in steps if s.startswith("mean:")]
    assert numeric
    for column in numeric:
        col = spec.schema.column(column)
        mid, h = (col.lower + col.upper) / 2, col.width / 2
        rows = _small(spec, [column])
        request = StatsRequest(moments=(column,))

        def centred(s: Any, c: str = column, mid: float = mid) -> np.ndarray:
            m = s.moments[c]
            return m.sum - m.count * mid

        def squares(s: Any, c: str = column, mid: float = mid, h: float = h) -> np.ndarray:
            m = s.moments[c]
            return m.m2 + m.count * (m.mean - mid) ** 2 - m.count * h * h / 2

        records = _neighbours(spec, rows, column)
        # float sums: equal up to rounding
        assert _worst_pair(spec.schema, request, rows, records, centred) == pytest.approx(
            steps[f"mean:{column}"], rel=1e-9)
        if f"variance:{column}" in steps:
            assert _worst_pair(spec.schema, request, rows, records,
                               squares) == pytest.approx(steps[f"variance:{column}"], rel=1e-6)


def test_naive_bayes_histogram_sensitivity_is_the_measured_worst_change(
        adult: dict[str, Any]) -> None:
    """train-nb's default numeric release: per-class counts over equal-width bins; a replaced
    record leaves one (class, bin) cell and joins one: the plan's Δ = 2."""
    from dpcli.stats import StatsRequest

    spec = adult["spec"]
    steps = _by_step(adult["plans"]["train-nb"])
    binned = [s[5:] for s in steps if s.startswith("bins:")]
    assert binned
    for column in binned[:2]:
        col = spec.schema.column(column)
        rows = _small(spec, [column])
        request = StatsRequest(histograms=((column, 8),))
        assert _worst_change(spec.schema, request, rows, _neighbours(spec, rows, column),
                             lambda s, c=column: s.histograms[c]) == steps[f"bins:{column}"]
        assert col.width > 0


def test_evaluate_confusion_sensitivity_is_the_measured_worst_change(
        adult: dict[str, Any]) -> None:
    """A replaced record leaves one confusion cell and enters another."""
    from dpcli.algorithms.evaluate import confusion_counts

    (step,) = adult["plans"]["evaluate"]
    rng = np.random.default_rng(2)
    true, pred = rng.integers(0, 2, 50), rng.integers(0, 2, 50)
    base = confusion_counts(true, pred, 2)
    worst = 0.0
    for t in (0, 1):
        for p in (0, 1):
            t2, p2 = true.copy(), pred.copy()
            t2[0], p2[0] = t, p
            worst = max(worst, float(np.abs(confusion_counts(t2, p2, 2) - base).sum()))
    assert worst == step["sensitivity"]


def test_roc_counts_and_auc_sensitivities_are_the_mechanisms(adult: dict[str, Any]) -> None:
    """roc's steps record what its mechanisms are calibrated to (the range-query strategy's
    L1, the pair count's 2(n − 1), the positives' 1), at the run's public n."""
    from dpcli.algorithms import roc_scale
    from dpcli.algorithms.roc import CHANGES, ROCConfig
    from dpcli.mechanisms.range_queries import sensitivity

    steps = _by_step(adult["plans"]["roc"])
    section = yaml.safe_load((CONFIGS / "adult.yaml").read_text())["roc"]
    config = ROCConfig(counts=section["counts"])
    assert steps["counts"] == sensitivity(config.counts, config.bins(N), changes=CHANGES,
                                          branching=config.branching)
    assert steps["auc"] == roc_scale.pair_sensitivity(N)
    assert steps["auc_positives"] == 1
