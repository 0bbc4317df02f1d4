"""A seed reproduces a run on the same input and never repeats its noise on other data."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy import stats

from dpcli.seeding import seeded_stream
from tests.cli.conftest import Project, toy_frame

EPSILON = 1.0  # per run: noise scale at most a few units per count, so counts stay positive


def _roomy(project: Project) -> None:
    """The toy spec with room for many runs (the fixture keeps its ledger's genesis in step)."""
    project.write_spec(lambda s: s.update(budget={"epsilon": 100.0}))


def _tabulate(cli, project: Project, data, seed: int, out: str) -> pd.DataFrame:
    r = cli("tabulate", data, "--spec", project.spec, "--out", project.root / out,
            "--seed", seed, "--epsilon", EPSILON, "--quiet")
    assert r.exit_code == 0, r.stderr
    return pd.read_csv(project.root / out)


def test_the_same_seed_on_neighbouring_inputs_draws_independent_noise(
        project: Project, cli) -> None:
    """Two files differing in one record's colour, the same seed on each, for 20 seeds.

    With shared noise (the old derivation) the difference of the two releases is the
    true difference: 0 in every cell the record does not touch. With independent noise
    the difference of two discrete Laplace draws is 0 with probability at most the
    largest pmf value, tanh(ε'/4) ≤ tanh(ε/4) = 0.245 for any table's share ε' ≤ ε.
    Over the untouched, unclamped cells the test fails if the count of zero differences
    exceeds the binomial quantile at that bound with α = 1e-6 (false-failure rate ≤ 1e-6);
    shared noise would make every one of them zero.
    """
    _roomy(project)
    frame = toy_frame()
    neighbour = frame.copy()
    neighbour.loc[0, "color"] = "blue" if frame.loc[0, "color"] != "blue" else "red"
    other = project.root / "neighbour.parquet"
    neighbour.to_parquet(other, index=False)

    zeros = cells = 0
    for seed in range(20):
        a = _tabulate(cli, project, project.data, seed, f"a{seed}.csv")
        b = _tabulate(cli, project, other, seed, f"b{seed}.csv")
        assert a[["table", "level", "class"]].equals(b[["table", "level", "class"]])
        keep = (a["table"] != "color") & (a["count"] > 0) & (b["count"] > 0)
        diff = (a["count"] - b["count"])[keep]
        zeros += int((diff == 0).sum())
        cells += int(keep.sum())
    assert cells >= 200  # the statistic has enough cells to mean something
    limit = stats.binom.isf(1e-6, cells, math.tanh(EPSILON / 4))
    assert zeros <= limit, (zeros, cells, limit)


def test_the_same_seed_on_the_same_input_reproduces_bit_for_bit(project: Project, cli) -> None:
    _roomy(project)
    a = _tabulate(cli, project, project.data, 11, "a.csv")
    b = _tabulate(cli, project, project.data, 11, "b.csv")
    pd.testing.assert_frame_equal(a, b)
    assert [e["seeded"] for e in project.reserves()] == [True, True]


BASE = {"command": "tabulate", "arguments": {"data": "/x/a.csv", "out": "/y/o.csv",
                                             "columns": ["a"], "epsilon": 0.1},
        "spec_digest": "s" * 64, "input_fingerprint": "hmac-sha256:" + "0" * 64}


@pytest.mark.parametrize("change", [
    {"command": "train-nb"},
    {"arguments": {**BASE["arguments"], "epsilon": 0.2}},
    {"arguments": {**BASE["arguments"], "columns": ["b"]}},
    {"spec_digest": "t" * 64},
    {"input_fingerprint": "hmac-sha256:" + "1" * 64},
])
def test_every_part_of_a_run_changes_the_stream(change: dict) -> None:
    key = b"k" * 64
    assert seeded_stream(key, 1, **BASE) != seeded_stream(key, 1, **{**BASE, **change})


def test_where_files_live_and_the_key_and_seed_matter_as_documented() -> None:
    key = b"k" * 64
    moved = {**BASE, "arguments": {**BASE["arguments"], "data": "/z/a.csv", "out": "/w/o.csv",
                                   "engine": "spark"}}
    assert seeded_stream(key, 1, **BASE) == seeded_stream(key, 1, **moved)
    assert seeded_stream(key, 1, **BASE) != seeded_stream(key, 2, **BASE)
    assert seeded_stream(key, 1, **BASE) != seeded_stream(b"j" * 64, 1, **BASE)
