"""The audits' Python path is the command's path: a real CLI run on the audit's dataset D
reaches the same release function with the same plan and the same exact statistics as the
audit case builds (tests/audit/commands.py). The release is spied on (recorded, then run
as usual); the command's outputs and ledger are checked to show the run completed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from dpcli.budget import Budget
from dpcli.cli.app import app
from dpcli.ledger import init_ledger, read_entries
from tests.audit import commands


def _project(tmp_path: Path, rows: dict[str, list[Any]], columns: dict[str, Any]) -> Path:
    pd.DataFrame(rows).to_parquet(tmp_path / "d.parquet", index=False)
    spec = {"dataset": "audit", "budget": {"epsilon": 10.0}, "ledger": "ledger.jsonl",
            "label": {"column": "y", "classes": ["0", "1"], "positive": "1"},
            "schema": {"columns": columns}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    init_ledger(tmp_path / "ledger.jsonl", "audit", Budget(10.0))
    return path


def _spy(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[tuple]:
    calls: list[tuple] = []
    original = getattr(module, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return original(*args, **kwargs)
    monkeypatch.setattr(module, name, spy)
    return calls


def _run(*args: object) -> None:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output


def _spent(tmp_path: Path) -> float:
    reserves = [e for e in read_entries(tmp_path / "ledger.jsonl") if e["kind"] == "reserve"]
    assert len(reserves) == 1
    return float(reserves[0]["epsilon"])


def test_tabulate_cli_reaches_the_audited_release(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from dpcli.algorithms import tabulate

    commands.tabulate_build()
    setup = commands.SETUP["tabulate"]
    spec = _project(tmp_path, setup["rows"][0],
                    {"colour": {"type": "categorical", "categories": ["red", "green", "blue"]}})
    calls = _spy(monkeypatch, tabulate, "release")
    _run("tabulate", tmp_path / "d.parquet", "--spec", spec, "--out", tmp_path / "t.csv",
         "--columns", "colour", "--bins", 4, "--epsilon", 2)
    (stats, plan, *_), = calls
    assert plan.to_json() == setup["plan"].to_json()
    assert np.array_equal(stats.class_counts, setup["stats"][0].class_counts)
    assert np.array_equal(stats.contingency["colour"], setup["stats"][0].contingency["colour"])
    assert len(pd.read_csv(tmp_path / "t.csv")) == 2 + 2 * 4   # class counts + colour × class
    assert _spent(tmp_path) == pytest.approx(2.0)


def test_train_nb_cli_reaches_the_audited_release(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from dpcli.algorithms import naive_bayes

    commands.nb_global_build()
    setup = commands.SETUP["train-nb global"]
    spec = _project(tmp_path, setup["rows"][0], {"x": {"type": "numeric", "bounds": [0, 100]}})
    raw = yaml.safe_load(spec.read_text())   # the audit case's split, no threshold
    raw["train-nb"] = {"epsilon": 3.0, "threshold": False,
                       "split": {"prior": 1, "categorical": 1, "mean": 1, "variance": 1}}
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    calls = _spy(monkeypatch, naive_bayes, "fit")
    _run("train-nb", tmp_path / "d.parquet", "--spec", spec, "--out", tmp_path / "m.json",
         "--method", "global", "--columns", "x", "--epsilon", 3)
    (stats, _schema, columns, plan, config, _rng), = calls
    assert list(columns) == ["x"] and config.method == "global"
    assert plan.to_json() == setup["plan"].to_json()
    mine, theirs = setup["stats"][0].moments["x"], stats.moments["x"]
    for field in ("count", "sum", "m2"):
        assert np.allclose(getattr(theirs, field), getattr(mine, field), rtol=1e-12), field
    assert json.loads((tmp_path / "m.json").read_text())["payload"]
    assert _spent(tmp_path) == pytest.approx(3.0)


def test_select_features_cli_reaches_the_audited_release(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dpcli.algorithms import feature_selection

    commands.fs_threshold_build()
    setup = commands.SETUP["select-features"]
    binary = {"type": "binary", "values": ["0", "1"]}
    spec = _project(tmp_path, setup["rows"][0], {"b0": binary, "b1": binary})
    calls = _spy(monkeypatch, feature_selection, "select")
    _run("select-features", tmp_path / "d.parquet", "--spec", spec, "--out",
         tmp_path / "f.json", "--score", "tc", "--method", "threshold", "--threshold", 10,
         "--k", 1, "--columns", "b0,b1", "--epsilon", 2,
         "--allow-noise")  # the audit's D is a few rows: the noise check would refuse it
    (stats, _schema, columns, plan, config, _rng), = calls
    assert list(columns) == ["b0", "b1"] and (config.method, config.k) == ("threshold", 1)
    assert plan.to_json() == setup["plan"].to_json()
    for name in columns:
        assert np.array_equal(stats.contingency[name], setup["stats"][0].contingency[name])
    assert "selected" in json.loads((tmp_path / "f.json").read_text())["payload"]
    assert _spent(tmp_path) == pytest.approx(2.0)
