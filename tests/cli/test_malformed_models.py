"""A malformed model file is refused before any charge (issue 19, failure 8):
predict, roc and evaluate exit 65 with ``malformed model FILE: …``, the ledger unchanged."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.conftest import Project


@pytest.fixture
def models(project: Project, cli) -> dict[str, Path]:
    """A naive Bayes model (ε 0.3) and a logistic regression (ε 0.3) of the toy data."""
    out = {"nb": project.root / "nb.json", "lr": project.root / "lr.json"}
    r = cli("train-nb", project.data, "--spec", project.spec, "--out", out["nb"],
            "--epsilon", 0.3, "--seed", 1, "-q")
    assert r.exit_code == 0, r.stderr
    r = cli("validate", project.data, "--spec", project.spec, "--out", out["lr"],
            "--columns", "age,color,member", "--epsilon", 0.3, "--seed", 1, "-q")
    assert r.exit_code == 0, r.stderr
    return out


def _edit(path: Path, target: Path, change: Callable[[dict], None]) -> Path:
    env = json.loads(path.read_text())
    change(env["payload"])
    target.write_text(json.dumps(env))  # allow_nan: NaN is written as the JSON token NaN
    return target


def _set_nb(key: str, value: object) -> Callable[[dict], None]:
    def change(p: dict) -> None:
        if key == "table":
            p["tables"]["color"] = p["tables"]["color"][:1]
        elif key == "mean":
            p["numeric"]["age"]["mean"][0] = value
        elif key == "variance":
            p["numeric"]["age"]["variance"][1] = value
        elif key == "bounds":
            p["schema"]["columns"]["age"]["bounds"] = [90, 17]
        elif key == "class":
            p["schema"]["label"]["positive"] = "7"
        elif key == "counts":
            p["class_counts"] = p["class_counts"] + [5.0]
    return change


NB_CASES = {
    "wrong table shape": ("table", None, "count table of 'color' has shape"),
    "NaN mean": ("mean", float("nan"), "mean of 'age'"),
    "negative variance": ("variance", -1.0, "variance of 'age'"),
    "zero variance": ("variance", 0.0, "variance of 'age'"),
    "unordered bounds": ("bounds", None, "bounds"),
    "unknown positive class": ("class", None, "positive class"),
    "class counts of another label": ("counts", None, "class_counts has shape"),
}


@pytest.mark.parametrize("case", list(NB_CASES))
def test_malformed_naive_bayes_is_refused_before_the_charge(project: Project, cli, models,
                                                            case: str) -> None:
    key, value, needle = NB_CASES[case]
    bad = _edit(models["nb"], project.root / "bad.json", _set_nb(key, value))
    ledger = project.ledger.read_bytes()
    runs = {
        "predict": ("predict", bad, project.data, "--out", project.root / "p.csv"),
        "roc": ("roc", project.data, "--spec", project.spec, "--model", bad, "--out",
                project.root / "roc", "--epsilon", 0.1),
        "evaluate": ("evaluate", project.data, "--spec", project.spec, "--model", bad,
                     "--epsilon", 0.1),
    }
    for name, args in runs.items():
        r = cli(*args)
        assert r.exit_code == 65, (name, r.stderr)
        assert f"malformed model {bad}" in r.stderr and needle in r.stderr, (name, r.stderr)
    assert project.ledger.read_bytes() == ledger  # nothing charged
    assert not (project.root / "p.csv").exists() and not (project.root / "roc").exists()


def test_malformed_logistic_regression_is_refused(project: Project, cli, models) -> None:
    def short(p: dict) -> None:
        del p["weights"]["color"]["blue"]

    def nan(p: dict) -> None:
        p["intercept"] = float("nan")

    for change, needle in ((short, "KeyError"), (nan, "weights")):
        bad = _edit(models["lr"], project.root / "bad.json", change)
        ledger = project.ledger.read_bytes()
        r = cli("evaluate", project.data, "--spec", project.spec, "--model", bad,
                "--epsilon", 0.1)
        assert r.exit_code == 65 and f"malformed model {bad}" in r.stderr, r.stderr
        assert needle in r.stderr
        assert project.ledger.read_bytes() == ledger


def test_malformed_brc_is_refused(project: Project, cli) -> None:
    model = project.root / "brc.json"
    r = cli("train-brc", project.data, "--spec", project.spec, "--out", model,
            "--columns", "age,color,member", "--rounds", 3, "--epsilon", 0.3, "--seed", 1,
            "-q")
    assert r.exit_code == 0, r.stderr

    def alpha(p: dict) -> None:
        p["ensemble"][0]["alpha"] = float("inf")

    def rounds(p: dict) -> None:
        p["ensemble"] = p["ensemble"][:2]

    for change, needle in ((alpha, "round 1: alpha"), (rounds, "2 rounds listed")):
        bad = _edit(model, project.root / "bad.json", change)
        ledger = project.ledger.read_bytes()
        r = cli("roc", project.data, "--spec", project.spec, "--model", bad, "--out",
                project.root / "roc", "--epsilon", 0.1)
        assert r.exit_code == 65 and f"malformed model {bad}" in r.stderr, r.stderr
        assert needle in r.stderr
        assert project.ledger.read_bytes() == ledger


def test_malformed_grid_is_refused(project: Project, cli) -> None:
    def mutate(spec: dict) -> None:
        spec["schema"]["columns"]["age"]["taxonomy"] = {"bins": [2, 4]}
    project.write_spec(mutate)
    syn = project.root / "syn"
    r = cli("publish-grid", project.data, "--spec", project.spec, "--out", syn,
            "--columns", "age", "--epsilon", 0.3, "--seed", 1, "-q")
    assert r.exit_code == 0, r.stderr
    grid = syn / "grid.json"
    env = json.loads(grid.read_text())
    if env["payload"]["grid"] and env["payload"]["grid"][0]["column"] == "age":
        nodes = env["payload"]["grid"][0]["nodes"]
        nodes[0]["interval"] = [nodes[0]["interval"][1], nodes[0]["interval"][0]]
        needle = "not ordered"
    else:  # the exponential mechanism chose no column: break the label instead
        env["payload"]["schema"]["label"]["classes"] = ["0", "1", "2"]
        needle = "binary label"
    grid.write_text(json.dumps(env))
    for args in (("predict", syn, project.data, "--out", project.root / "p.csv"),
                 ("synthesize", syn, "--out", project.root / "s.csv", "--rows", 5)):
        r = cli(*args)
        assert r.exit_code == 65 and "malformed model" in r.stderr and needle in r.stderr, \
            r.stderr
