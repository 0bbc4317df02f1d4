"""Every spending command states its neighbouring relation in words before any charge."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.cli.conftest import Project

DEFAULT = ("neighbours: two datasets of the same size n that differ in one record (replace-one)",
           "protected: every column and the label of every record",
           "public: the number of records n and the spec's declared domains")

COMMANDS = {
    "tabulate": ("tabulate", "{data}", "--epsilon", 0.2),
    "select-features": ("select-features", "{data}", "--threshold", 3, "--k", 2,
                        "--epsilon", 0.4, "--allow-noise"),  # n = 400: noisy by design
    "publish-grid": ("publish-grid", "{data}", "--columns", "color,member", "--epsilon", 0.2),
    "train-nb": ("train-nb", "{data}", "--epsilon", 0.2),
    "train-brc": ("train-brc", "{data}", "--epsilon", 0.2, "--rounds", 3),
    "validate": ("validate", "{data}", "--epsilon", 0.2),
    "roc": ("roc", "{scored}", "--score-column", "p", "--score-range", "0,10",
            "--epsilon", 0.2),
    "evaluate": ("evaluate", "{scored}", "--score-column", "p", "--score-range", "0,10",
                 "--epsilon", 0.2),
}


@pytest.fixture
def scored(project: Project):
    frame = pd.read_parquet(project.data)
    frame["p"] = np.clip(np.random.default_rng(5).normal(4 + 3 * frame["label"], 2), 0, 10)
    path = project.root / "scored.parquet"
    frame.to_parquet(path, index=False)
    return path


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_dry_run_states_the_relation_in_words(project: Project, cli, scored,
                                              command: str) -> None:
    args = [str(a).format(data=project.data, scored=scored) for a in COMMANDS[command]]
    r = cli(*args, "--spec", project.spec, "--dry-run")
    assert r.exit_code == 0, r.stderr
    for line in DEFAULT:
        assert line in r.stderr, (line, r.stderr)
    r = cli(*args, "--spec", project.spec, "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["neighbouring"] == "replace-one"
    assert out["relation"]["protected"] == "every column and the label of every record"
    assert project.reserves() == []


def test_brc_with_a_declared_public_label_says_what_is_not_protected(project: Project,
                                                                     cli) -> None:
    def mutate(spec: dict) -> None:
        spec["label"]["public"] = True
        spec["train-brc"] = {"epsilon": 0.2, "public": ["member"], "rounds": 3}

    project.write_spec(mutate)
    r = cli("train-brc", project.data, "--spec", project.spec, "--dry-run")
    assert r.exit_code == 0, r.stderr
    assert "neighbours: two datasets of the same size n that differ in the private features " \
           "of one record" in r.stderr
    assert "protected: every column except member, of every record" in r.stderr
    assert "public: the label (declared 'label: public: true') and member" in r.stderr
