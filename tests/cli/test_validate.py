"""End-to-end: ``dpcli validate`` (Chaudhuri & Vinterbo's private tuning of logistic
regression's regulariser λ) through the real entry point, its model envelope and ledger,
and ``predict`` on the model it writes.

The toy project (tests/cli/conftest.py): age numeric [17, 90], color categorical
red/green/blue (the data also hold "pink", mapped to `other`), member binary no/yes, words
tokens; label classes [0, 1] positive 1; n = 400 rows; total budget ε = 1, δ = 0, ledger
initialised and empty. validate reads age, color and member by default (not words).

Without --validation, row i goes to the validation set V iff
splitmix64(split_seed·2^32 + i)/2^64 < validation_fraction (default 0.1, seed 0): 40 of
the 400 toy rows. stability spends ε/2 on a `select` step (with the run's δ: 0 for the
ramp score) and ε/2 on a `final` step; each §5 baseline is one step with the whole ε.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcli.algorithms.validate import validation_rows
from dpcli.fingerprint import input_digest
from tests.cli.conftest import Project, toy_frame
from tests.cli.conftest import run_entries as read_entries  # runs only, no genesis

N = 400                      # rows of the toy data
DEFAULT_COLUMNS = ["age", "color", "member"]
PAPER_GRID = [0.001, 0.112, 0.223, 0.334, 0.445, 0.556, 0.667, 0.778, 0.889, 1.0]
COLOR_LEVELS = ["red", "green", "blue", "other"]
MASK64 = 2**64 - 1


def _splitmix_count(n: int, fraction: float = 0.1, seed: int = 0) -> int:
    """How many of rows 0 … n−1 the public rule sends to V, in Python integers."""
    count = 0
    for i in range(n):
        z = (seed * 2**32 + i + 0x9E3779B97F4A7C15) & MASK64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        z ^= z >> 31
        count += (z >> 11) / 2.0**53 < fraction
    return count


M = _splitmix_count(N)       # validation rows of the default split (40)


def _spec(project: Project, section: dict | None = None, *, budget: dict | None = None,
          classes: list | None = None) -> Path:
    def mutate(spec: dict) -> None:
        if section is not None:
            spec["validate"] = section
        if budget is not None:
            spec["budget"].update(budget)
        if classes is not None:
            spec["label"]["classes"] = classes
    return project.write_spec(mutate)


def _validate(cli, project: Project, *extra: object, out: str = "m.json",
              data: Path | None = None, paper: bool = True):
    """Run validate; ``paper`` (the default here) asks for the paper's procedure as such:
    always search the grid, cut at 0.5 (the defaults are tested in their own tests)."""
    fixed = ("--lambda", "search", "--threshold-share", "0") if paper else ()
    return cli("validate", data or project.data, "--spec", project.spec,
               "--out", project.root / out, *fixed, *extra)




def _spent(project: Project, cli) -> dict:
    r = cli("ledger", "show", "--spec", project.spec, "--json")
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)["spent"]


def _summary(r) -> dict:
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1, r.stdout
    return json.loads(lines[0])


def _write(project: Project, frame: pd.DataFrame, name: str) -> Path:
    path = project.root / name
    frame.to_parquet(path, index=False)
    return path


def _proba_from_payload(payload: dict, frame: pd.DataFrame) -> np.ndarray:
    """σ((intercept + Σ weight·feature) / divisor), recomputed from the model file alone."""
    z = np.full(len(frame), payload["intercept"])
    for column, w in payload["weights"].items():
        if column in payload["scaling"]:
            lo, hi = payload["scaling"][column]["lower"], payload["scaling"][column]["upper"]
            z += w * (2 * (frame[column].clip(lo, hi) - lo) / (hi - lo) - 1)
        else:
            z += frame[column].map(lambda v, w=w: w.get(v, w.get("other"))).to_numpy()
    return 1 / (1 + np.exp(-z / payload["divisor"]))


def _check_stability_steps(steps: list[dict], epsilon: float, delta: float = 0.0,
                           trainer: str = "objective") -> None:
    assert [s["step"] for s in steps] == ["select", "final"]
    assert [s["mechanism"] for s in steps] == ["noisy_max_exponential",
                                               f"{trainer}_perturbation"]
    assert [s["epsilon"] for s in steps] == pytest.approx([epsilon / 2, epsilon / 2],
                                                          rel=1e-12)
    assert [s["delta"] for s in steps] == [delta, 0.0]


#: a refusal before any charge: 64 usage, 65 data or 78 spec (docs/exit-codes.md); some
#: option values are checked by the spec's own validators and exit 78
REFUSED = (64, 65, 78)


def _refused(project: Project, r, *needles: str, code: int | None = None,
             out: str = "m.json") -> None:
    assert r.exit_code == code if code is not None else r.exit_code in REFUSED, (
        r.exit_code, r.stderr)
    for needle in needles:
        assert needle in r.stderr, r.stderr
    assert project.no_runs()   # nothing charged
    assert not (project.root / out).exists()    # no partial output


# ----------------------------------------------------------------------------- stability
def test_splitmix_reference_matches_the_public_rule() -> None:
    """The tests' own count agrees with the command's rule (so M is not taken on trust)."""
    assert M == int(validation_rows(N, 0.1, 0).sum()) == 40
    for seed, fraction in ((2, 0.1), (0, 0.25), (7, 0.5)):
        assert _splitmix_count(N, fraction, seed) == int(validation_rows(N, fraction,
                                                                         seed).sum())


def test_stability_writes_the_model_the_ledger_and_predicts(project: Project, cli) -> None:
    r = _validate(cli, project, "--epsilon", 0.5, "--json")
    assert r.exit_code == 0, r.stderr
    summary = _summary(r)
    assert summary["command"] == "validate" and summary["method"] == "stability"
    assert summary["spent"] == {"epsilon": 0.5, "delta": 0.0}
    assert summary["n_train"] == N - M and summary["n_validation"] == M
    assert "chose λ" in r.stderr and "pure ε-DP" in r.stderr

    env = project.envelope()
    assert env["format"] == "dpcli" and env["kind"] == "logistic_regression"
    assert env["epsilon"] == 0.5 and env["delta"] == 0.0 and env["seeded"] is False
    assert env["ledger_run_id"] == summary["run_id"]
    p = env["payload"]
    assert p["learner"] == "logreg" and p["method"] == "stability"
    assert "ramp validation score" in p["selection"]
    assert p["columns"] == DEFAULT_COLUMNS        # words (tokens) is skipped by default
    assert p["grid"] == PAPER_GRID
    i = p["chosen_index"]
    assert isinstance(i, int) and 0 <= i < len(PAPER_GRID)
    assert p["lambda"] == PAPER_GRID[i] and p["lambda"] in p["grid"]
    assert summary["chosen_index"] == i and summary["lambda"] == p["lambda"]
    assert p["epsilon"] == 0.5 and p["delta"] == 0
    assert p["epsilon_model"] == pytest.approx(0.25) and p["epsilon_select"] == pytest.approx(
        0.25)
    assert p["n_train"] == N - M and p["n_validation"] == M
    assert p["beta1"] == pytest.approx(2 / min(PAPER_GRID))     # 2L/λ_min, L = 1
    assert p["beta2"] == 1                                     # ramp ≤ 1 whatever w is
    assert "weight_bound" not in p
    # the paper's β, plus the optimiser's tolerance and the weight grid (≤ β1/n / 1024)
    paper = max(p["beta1"] / (N - M), p["beta2"] / M)
    assert paper < p["beta"] <= paper * (1 + 1 / 1024) + 1e-6
    assert p["selection_noise_mean"] == pytest.approx(2 * p["beta"] / 0.25)
    assert p["divisor"] == pytest.approx(2.0)                  # √(1 + 3 columns)
    assert p["scaling"] == {"age": {"lower": 17.0, "upper": 90.0, "onto": [-1, 1]}}
    assert list(p["weights"]) == DEFAULT_COLUMNS
    assert list(p["weights"]["color"]) == COLOR_LEVELS
    assert list(p["weights"]["member"]) == ["no", "yes"]
    assert all(math.isfinite(v) for v in [p["intercept"], p["weights"]["age"],
                                           *p["weights"]["color"].values(),
                                           *p["weights"]["member"].values()])
    _check_stability_steps(p["breakdown"], 0.5)

    entries = read_entries(project.ledger)
    assert [e["kind"] for e in entries] == ["reserve", "complete"]
    reserve = entries[0]
    assert reserve["command"] == "validate" and reserve["epsilon"] == 0.5
    assert reserve["delta"] == 0.0 and reserve["seeded"] is False
    assert reserve["breakdown"] == p["breakdown"] == summary["breakdown"]
    args = reserve["arguments"]
    assert args["method"] == "stability" and args["score"] == "ramp"
    assert args["trainer"] == "objective" and args["grid"] == PAPER_GRID
    assert args["columns"] == DEFAULT_COLUMNS
    assert args["n_train"] == N - M and args["n_validation"] == M
    assert args["split"] == {"validation_fraction": 0.1, "split_seed": 0}
    assert "validation" not in args and "validation_digest" not in args
    assert entries[1]["run_id"] == reserve["run_id"] == summary["run_id"]
    assert entries[1]["summary"] == {"method": "stability", "chosen_index": i,
                                     "chosen_lambda": p["lambda"], "lambda_rule": "select",
                                     "threshold_logit": 0.0}
    assert [o["path"] for o in entries[1]["outputs"]] == [str((project.root / "m.json")
                                                             .resolve())]
    assert _spent(project, cli) == {"epsilon": 0.5, "delta": 0.0}

    preds_path = project.root / "preds.parquet"
    r = cli("predict", project.root / "m.json", project.data, "--out", preds_path)
    assert r.exit_code == 0, r.stderr
    preds = pd.read_parquet(preds_path)
    assert len(preds) == N
    assert preds["proba_1"].between(0, 1).all() and preds["proba_0"].between(0, 1).all()
    np.testing.assert_allclose(preds["proba_0"] + preds["proba_1"], 1.0, atol=1e-12)
    np.testing.assert_allclose(preds["proba_1"], _proba_from_payload(p, toy_frame()),
                               rtol=1e-9, atol=1e-12)
    assert _spent(project, cli) == {"epsilon": 0.5, "delta": 0.0}   # predict is free


@pytest.mark.parametrize("positive", [1, 0])
def test_a_strong_signal_is_learned_with_the_right_orientation(project: Project, cli,
                                                               positive: int) -> None:
    """label = (member == yes) at a large ε: predictions are right, whichever class is
    declared positive (the weights flip sign, P(label = 1) does not)."""
    def mutate(spec: dict) -> None:
        spec["budget"]["epsilon"] = 1000
        spec["label"]["positive"] = positive
    project.write_spec(mutate)
    frame = toy_frame()
    frame["label"] = (frame["member"] == "yes").astype(int)
    data = _write(project, frame, "signal.parquet")
    r = _validate(cli, project, "--epsilon", 100, "--seed", 1, data=data)
    assert r.exit_code == 0, r.stderr
    w = project.envelope()["payload"]["weights"]["member"]
    assert (w["yes"] > w["no"]) == (positive == 1)
    out = project.root / "preds.parquet"
    assert cli("predict", project.root / "m.json", data, "--out", out).exit_code == 0
    preds = pd.read_parquet(out)
    assert (preds["prediction"].astype(str) == preds["label"].astype(str)).mean() > 0.95
    assert preds.loc[frame["member"] == "yes", "proba_1"].min() > 0.5
    assert preds.loc[frame["member"] == "no", "proba_1"].max() < 0.5


def test_spec_section_and_options(project: Project, cli) -> None:
    """The spec's section supplies the run; --columns, --grid and --trainer override it."""
    _spec(project, {"epsilon": 0.3, "grid": [0.5, 2], "columns": ["age", "member"]})
    r = _validate(cli, project, "--json")
    assert r.exit_code == 0, r.stderr
    p = project.envelope()["payload"]
    assert p["columns"] == ["age", "member"] and p["grid"] == [0.5, 2.0]
    assert p["lambda"] in (0.5, 2.0) and p["beta1"] == pytest.approx(4.0)
    assert p["divisor"] == pytest.approx(math.sqrt(3))
    _check_stability_steps(project.reserves()[0]["breakdown"], 0.3)

    r = _validate(cli, project, "--columns", "color", "--grid", "0.25", "--trainer", "output",
                  "--epsilon", 0.2, out="o.json")
    assert r.exit_code == 0, r.stderr
    p = project.envelope("o.json")["payload"]
    assert p["columns"] == ["color"] and p["grid"] == [0.25]
    assert p["chosen_index"] == 0 and p["lambda"] == 0.25
    assert "Algorithm 1" in p["trainer"]
    reserve = project.reserves()[1]
    assert reserve["arguments"]["trainer"] == "output" and reserve["epsilon"] == 0.2
    _check_stability_steps(reserve["breakdown"], 0.2, trainer="output")
    assert _spent(project, cli)["epsilon"] == pytest.approx(0.5)


def test_csv_input_gives_the_same_split(project: Project, cli) -> None:
    r = _validate(cli, project, "--epsilon", 0.1, "--json", data=project.csv)
    assert r.exit_code == 0, r.stderr
    summary = _summary(r)
    assert (summary["n_train"], summary["n_validation"]) == (N - M, M)


# ----------------------------------------------------------------------------- baselines
@pytest.mark.parametrize(("method", "step", "mechanism"), [
    ("alpha-split", "alpha_split", "objective_perturbation+exponential"),
    ("data-split", "data_split", "objective_perturbation+exponential"),
    ("random", "random", "objective_perturbation"),
])
def test_each_baseline_is_one_step_of_the_whole_epsilon(project: Project, cli, method: str,
                                                        step: str, mechanism: str) -> None:
    r = _validate(cli, project, "--method", method, "--epsilon", 0.4, "--json")
    assert r.exit_code == 0, r.stderr
    summary = _summary(r)
    assert summary["method"] == method
    assert summary["lambda"] in PAPER_GRID
    assert summary["lambda"] == PAPER_GRID[summary["chosen_index"]]
    assert summary["spent"] == {"epsilon": 0.4, "delta": 0.0}
    breakdown = [{"step": step, "mechanism": mechanism, "epsilon": 0.4, "delta": 0.0}]
    assert [{k: s[k] for k in ("step", "mechanism", "epsilon", "delta")}
            for s in summary["breakdown"]] == breakdown
    p = project.envelope()["payload"]
    assert p["method"] == method and p["lambda"] == summary["lambda"]
    assert p["epsilon"] == 0.4 and p["delta"] == 0
    assert "beta1" not in p and "selection_noise_mean" not in p   # stability only
    # every training uses T alone: a baseline's model is trained at ε (alpha-split: ε/k)
    expected_model_eps = 0.4 / len(PAPER_GRID) if method == "alpha-split" else 0.4
    assert p["epsilon_model"] == pytest.approx(expected_model_eps)
    (reserve,) = project.reserves()
    assert reserve["command"] == "validate" and reserve["epsilon"] == 0.4
    assert reserve["delta"] == 0.0
    assert reserve["arguments"]["method"] == method
    assert reserve["breakdown"] == summary["breakdown"]
    assert _spent(project, cli) == {"epsilon": 0.4, "delta": 0.0}


def test_baseline_with_output_perturbation(project: Project, cli) -> None:
    r = _validate(cli, project, "--method", "alpha-split", "--trainer", "output",
                  "--epsilon", 0.2, "--json")
    assert r.exit_code == 0, r.stderr
    assert [s["mechanism"] for s in _summary(r)["breakdown"]] == [
        "output_perturbation+exponential"]


def _tiny(project: Project, rows: int) -> tuple[Path, int]:
    """toy rows 0 … rows−1, and how many of them the default split trains on."""
    data = _write(project, toy_frame().head(rows), f"tiny{rows}.parquet")
    return data, rows - _splitmix_count(rows)


def test_data_split_needs_a_training_row_per_grid_value(project: Project, cli) -> None:
    data, n = _tiny(project, 30)
    assert n == 27
    ok = ",".join(str(v) for v in range(1, n + 1))
    r = _validate(cli, project, "--method", "data-split", "--grid", ok, "--epsilon", 0.1,
                  "--json", data=data)
    assert r.exit_code == 0, r.stderr
    assert _summary(r)["n_train"] == n
    before = project.ledger.read_bytes()
    too_many = ok + f",{n + 1}"
    r = _validate(cli, project, "--method", "data-split", "--grid", too_many,
                  "--epsilon", 0.1, data=data, out="again.json")
    assert r.exit_code == 64 and f"{n} training" in r.stderr and f"at least {n + 1}" in r.stderr
    assert project.ledger.read_bytes() == before
    assert not (project.root / "again.json").exists()


# ---------------------------------------------------------------------------- validation
def test_validation_file_is_used_and_logged(project: Project, cli) -> None:
    vfile = _write(project, toy_frame(n=57, seed=1), "valid.parquet")
    r = _validate(cli, project, "--validation", vfile, "--epsilon", 0.3, "--json")
    assert r.exit_code == 0, r.stderr
    summary = _summary(r)
    assert summary["n_train"] == N and summary["n_validation"] == 57
    p = project.envelope()["payload"]
    assert p["n_train"] == N and p["n_validation"] == 57
    paper = max(p["beta1"] / N, 1 / 57)
    assert paper < p["beta"] <= paper * (1 + 1 / 1024) + 1e-6
    (reserve,) = project.reserves()
    args = reserve["arguments"]
    assert args["validation"] == str(vfile.resolve())
    assert args["validation_digest"] == input_digest(project.ledger, vfile)
    assert args["validation_digest"] != reserve["input_digest"]
    assert args["n_train"] == N and args["n_validation"] == 57
    assert "split" not in args
    assert reserve["input_file"] == str(project.data.resolve())
    assert "(m = 57)" in reserve["breakdown"][0]["note"]


def test_evaluating_on_the_validation_file_is_named(project: Project, cli) -> None:
    """The validation rows chose the model's λ and cut: evaluate on them says so (the
    ledger's validation_digest), as on the training rows."""
    vfile = _write(project, toy_frame(n=57, seed=1), "valid.parquet")
    r = _validate(cli, project, "--validation", vfile, "--epsilon", 0.3)
    assert r.exit_code == 0, r.stderr
    r = cli("evaluate", vfile, "--spec", project.spec, "--model", project.root / "m.json",
            "--epsilon", 0.1, "--json")
    assert r.exit_code == 0, r.stderr
    assert "(validate) chose its regulariser on (its validation file)" in r.stderr
    assert "is the file ledger run" not in r.stdout   # the custodian's, not a release


def test_validation_file_in_a_dry_run(project: Project, cli) -> None:
    vfile = _write(project, toy_frame(n=57, seed=1), "valid.parquet")
    r = cli("validate", project.data, "--spec", project.spec, "--validation", vfile,
            "--epsilon", 0.3, "--dry-run", "--json", "--lambda", "search")
    assert r.exit_code == 0, r.stderr
    note = json.loads(r.stdout)["breakdown"][0]["note"]
    assert f"(n = {N})" in note and "(m = 57)" in note
    assert project.no_runs()


def test_validation_must_not_be_the_training_file(project: Project, cli) -> None:
    r = _validate(cli, project, "--validation", project.data, "--epsilon", 0.3)
    _refused(project, r, "--validation", "is the training file")
    # the same file under another spelling of its path
    other = project.root / "." / "sub" / ".." / project.data.name
    (project.root / "sub").mkdir()
    r = _validate(cli, project, "--validation", other, "--epsilon", 0.3)
    _refused(project, r, "is the training file")
    # a hard link and a byte-identical copy are the same rows too
    link = project.root / "link.parquet"
    link.hardlink_to(project.data)
    copy = project.root / "copy.parquet"
    copy.write_bytes(project.data.read_bytes())
    for twin in (link, copy):
        r = _validate(cli, project, "--validation", twin, "--epsilon", 0.3)
        _refused(project, r, "is the training file", "copy")


def test_validation_must_not_be_the_output(project: Project, cli) -> None:
    vfile = _write(project, toy_frame(n=57, seed=1), "valid.parquet")
    before = vfile.read_bytes()
    r = _validate(cli, project, "--validation", vfile, "--epsilon", 0.3, out="valid.parquet")
    assert r.exit_code == 64 and "--out" in r.stderr
    assert project.no_runs()
    assert vfile.read_bytes() == before


def test_validation_file_is_checked_against_the_schema(project: Project, cli) -> None:
    vfile = _write(project, toy_frame(n=57, seed=1).drop(columns=["member"]), "bad.parquet")
    r = _validate(cli, project, "--validation", vfile, "--epsilon", 0.3)
    _refused(project, r, "bad.parquet", "'member'")


# --------------------------------------------------------------------------------- split
def test_default_split_is_public_and_repeatable(project: Project, cli) -> None:
    counts = []
    for out in ("a.json", "b.json"):
        r = _validate(cli, project, "--epsilon", 0.1, "--json", out=out)
        assert r.exit_code == 0, r.stderr
        s = _summary(r)
        counts.append((s["n_train"], s["n_validation"]))
        assert s["n_train"] + s["n_validation"] == N
    assert counts == [(N - M, M), (N - M, M)]
    # the split reads no value: other rows of the same length split the same way
    other = _write(project, toy_frame(seed=9), "other.parquet")
    r = _validate(cli, project, "--epsilon", 0.1, "--json", data=other, out="c.json")
    assert r.exit_code == 0, r.stderr
    assert (_summary(r)["n_train"], _summary(r)["n_validation"]) == (N - M, M)


@pytest.mark.parametrize(("split", "fraction", "seed"), [
    ({"split_seed": 2}, 0.1, 2),
    ({"validation_fraction": 0.25}, 0.25, 0),
    ({"validation_fraction": 0.5, "split_seed": 7}, 0.5, 7),
])
def test_split_follows_the_spec(project: Project, cli, split: dict, fraction: float,
                                seed: int) -> None:
    m = _splitmix_count(N, fraction, seed)
    assert m != M   # the spec's keys really change the split here
    _spec(project, {"epsilon": 0.1, **split})
    r = _validate(cli, project, "--json")
    assert r.exit_code == 0, r.stderr
    s = _summary(r)
    assert (s["n_train"], s["n_validation"]) == (N - m, m)
    args = project.reserves()[0]["arguments"]
    assert args["split"] == {"validation_fraction": fraction, "split_seed": seed}
    assert (args["n_train"], args["n_validation"]) == (N - m, m)


def test_too_few_rows_for_a_validation_set(project: Project, cli) -> None:
    data = _write(project, toy_frame().head(3), "three.parquet")
    assert _splitmix_count(3) == 0
    _refused(project, _validate(cli, project, "--epsilon", 0.1, data=data),
             "0 validation rows", "validate.validation_fraction")


# ------------------------------------------------------------------------------------- δ
@pytest.mark.parametrize(("score", "extra", "delta"), [
    ("hinge", ["--delta", "1e-5"], 1e-5),
    ("logistic", ["--delta", "1e-5"], 1e-5),
    ("hinge", [], 1e-6),                      # the default δ of the unbounded scores
])
def test_unbounded_score_spends_delta(project: Project, cli, score: str, extra: list,
                                      delta: float) -> None:
    _spec(project, budget={"delta": 0.001})
    r = _validate(cli, project, "--score", score, "--epsilon", 0.2, "--json", *extra)
    assert r.exit_code == 0, r.stderr
    summary = _summary(r)
    assert summary["spent"] == {"epsilon": 0.2, "delta": delta}
    env = project.envelope()
    assert env["delta"] == delta
    p = env["payload"]
    assert p["delta"] == delta and f"{score} validation score" in p["selection"]
    w = p["weight_bound"]
    assert w > 0 and math.isfinite(w)
    # β2: the loss's range on the unit ball for ‖w‖ ≤ W (hinge min(2W, 1 + W), logistic W)
    assert p["beta2"] == pytest.approx(min(2 * w, 1 + w) if score == "hinge" else w)
    (reserve,) = project.reserves()
    assert reserve["delta"] == delta and reserve["arguments"]["delta"] == delta
    _check_stability_steps(reserve["breakdown"], 0.2, delta)
    assert f"δ = {delta:g}" in r.stderr
    assert _spent(project, cli) == {"epsilon": 0.2, "delta": delta}


@pytest.mark.parametrize("score", ["hinge", "logistic"])
def test_unbounded_score_with_a_pure_budget_exits_3(project: Project, cli, score: str) -> None:
    r = _validate(cli, project, "--score", score, "--delta", "1e-5", "--epsilon", 0.2)
    _refused(project, r, "--score ramp", "budget.delta", code=3)
    r = _validate(cli, project, "--score", score, "--epsilon", 0.2)     # default δ 1e-6
    _refused(project, r, "--score ramp", "1e-06", code=3)
    r = _validate(cli, project, "--score", score, "--epsilon", 0.2, "--dry-run")
    _refused(project, r, "--score ramp", code=3)


def test_delta_larger_than_the_budget_exits_3(project: Project, cli) -> None:
    _spec(project, budget={"delta": 1e-5})
    r = _validate(cli, project, "--score", "hinge", "--delta", "1e-4", "--epsilon", 0.2)
    _refused(project, r, "--score ramp", code=3)


def test_delta_is_used_up_like_epsilon(project: Project, cli) -> None:
    _spec(project, budget={"delta": 1.5e-5})
    r = _validate(cli, project, "--score", "hinge", "--delta", "1e-5", "--epsilon", 0.1)
    assert r.exit_code == 0, r.stderr
    before = project.ledger.read_bytes()
    r = _validate(cli, project, "--score", "hinge", "--delta", "1e-5", "--epsilon", 0.1,
                  out="second.json")
    assert r.exit_code == 3 and "budget exhausted" in r.stderr
    assert project.ledger.read_bytes() == before
    assert not (project.root / "second.json").exists()
    # the ramp score needs no δ: it still runs
    r = _validate(cli, project, "--epsilon", 0.1, out="ramp.json")
    assert r.exit_code == 0, r.stderr
    assert _spent(project, cli)["delta"] == pytest.approx(1e-5)


def test_delta_with_ramp_is_noted_and_not_spent(project: Project, cli) -> None:
    r = _validate(cli, project, "--delta", "1e-5", "--epsilon", 0.2, "--json")
    assert r.exit_code == 0, r.stderr
    assert "note: --delta is not used" in r.stderr and "δ = 0" in r.stderr
    assert _summary(r)["spent"] == {"epsilon": 0.2, "delta": 0.0}
    (reserve,) = project.reserves()
    assert reserve["delta"] == 0.0 and reserve["arguments"]["delta"] == 0.0
    assert [s["delta"] for s in reserve["breakdown"]] == [0.0, 0.0]
    assert project.envelope()["delta"] == 0.0


def test_a_baseline_spends_no_delta_whatever_the_score(project: Project, cli) -> None:
    """The baselines select by 0/1 errors (sensitivity 1): no δ, even with --score hinge,
    and so they run on a pure-ε budget."""
    r = _validate(cli, project, "--method", "random", "--score", "hinge", "--delta", "1e-5",
                  "--epsilon", 0.2, "--json")
    assert r.exit_code == 0, r.stderr
    assert _summary(r)["spent"] == {"epsilon": 0.2, "delta": 0.0}
    assert project.reserves()[0]["delta"] == 0.0
    assert "--delta is not used" in r.stderr


def test_the_unused_delta_note_does_not_call_hinge_bounded(project: Project, cli) -> None:
    r = _validate(cli, project, "--method", "random", "--score", "hinge", "--delta", "1e-5",
                  "--epsilon", 0.2)
    assert r.exit_code == 0, r.stderr
    assert "hinge score is bounded" not in r.stderr


@pytest.mark.parametrize("score", ["hinge", "logistic"])
def test_spec_delta_zero_with_an_unbounded_score_is_refused(project: Project, cli,
                                                            score: str) -> None:
    _spec(project, {"epsilon": 0.2, "score": score, "delta": 0})
    r = _validate(cli, project)
    _refused(project, r, "validate.delta")


# ------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(("args", "needles"), [
    (["--grid", "0,1"], ["--grid", "> 0"]),
    (["--grid", "1,-2"], ["--grid", "> 0"]),
    (["--grid", "0.1,inf"], ["--grid", "finite"]),
    (["--grid", "a,b"], ["--grid", "'a' is not a number"]),
    (["--grid", "0.1,0.1"], ["--grid", "listed twice"]),
    (["--grid", ",".join(["1"] + [str(i) for i in range(2, 1002)])], ["--grid", "1000"]),
    (["--method", "foo"], ["--method", "'foo'"]),
    (["--score", "foo"], ["--score", "'foo'"]),
    (["--trainer", "foo"], ["--trainer", "'foo'"]),
    (["--learner", "histogram"], ["--learner histogram", "supplementary material"]),
    (["--learner", "svm"], ["--learner", "'svm'"]),
    (["--columns", "words"], ["'words'", "tokens"]),
    (["--columns", "age,words"], ["'words'", "tokens"]),
    (["--columns", "age,height"], ["--columns", "'height'"]),
    (["--columns", "age,age"], ["--columns", "twice"]),
    (["--delta", "0"], ["--delta", "[1e-100, 1)"]),
    (["--delta", "1"], ["--delta", "[1e-100, 1)"]),
    (["--epsilon", "0"], ["--epsilon"]),
])
def test_bad_options_are_refused_and_charge_nothing(project: Project, cli, args: list[str],
                                               needles: list[str]) -> None:
    if "--epsilon" not in args:
        args = [*args, "--epsilon", "0.2"]
    _refused(project, _validate(cli, project, *args), *needles)


@pytest.mark.parametrize(("section", "key"), [
    ({"epsilon": 0.2, "grid": [-1]}, "validate.grid"),
    ({"epsilon": 0.2, "grid": [0.1, 0.1]}, "validate.grid"),
    ({"epsilon": 0.2, "grid": []}, "validate.grid"),
    ({"epsilon": 0.2, "grid": "many"}, "validate.grid"),
    ({"epsilon": 0.2, "bogus": 1}, "validate.bogus"),
    ({"epsilon": 0.2, "validation_fraction": 1.5}, "validate.validation_fraction"),
    ({"epsilon": 0.2, "validation_fraction": 0}, "validate.validation_fraction"),
    ({"epsilon": 0.2, "split_seed": -1}, "validate.split_seed"),
    ({"epsilon": 0.2, "method": "foo"}, "validate.method"),
    ({"epsilon": 0.2, "score": "foo"}, "validate.score"),
    ({"epsilon": 0.2, "trainer": "foo"}, "validate.trainer"),
    ({"epsilon": 0.2, "learner": "histogram"}, "validate.learner"),
    ({"epsilon": 0.2, "delta": 1.5}, "validate.delta"),
    ({"epsilon": 0.2, "columns": ["age", "height"]}, "validate.columns"),
    ({"epsilon": 0}, "validate.epsilon"),
    ({"grid": [1]}, "validate.epsilon"),
])
def test_malformed_section_is_refused_naming_the_key(project: Project, cli, section: dict,
                                                  key: str) -> None:
    _spec(project, section)
    _refused(project, _validate(cli, project, "--epsilon", 0.2), key, str(project.spec))


def test_a_tokens_column_in_the_section_is_refused(project: Project, cli) -> None:
    _spec(project, {"epsilon": 0.2, "columns": ["age", "words"]})
    _refused(project, _validate(cli, project), "'words'", "tokens")


def test_a_label_with_three_classes_is_refused(project: Project, cli) -> None:
    _spec(project, classes=[0, 1, 2])
    _refused(project, _validate(cli, project, "--epsilon", 0.2), "binary label", "3")


def test_without_epsilon_or_section_is_refused(project: Project, cli) -> None:
    _refused(project, _validate(cli, project), "validate:", "missing", str(project.spec))


def test_out_is_required_without_dry_run(project: Project, cli) -> None:
    r = cli("validate", project.data, "--spec", project.spec, "--epsilon", 0.2)
    assert r.exit_code == 64 and "--out" in r.stderr
    assert project.no_runs()


# ------------------------------------------------------------------------ dry run, seeds
def test_dry_run_charges_nothing(project: Project, cli) -> None:
    r = _validate(cli, project, "--epsilon", 0.4, "--dry-run", "-v")   # -v: every step
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    for needle in ("select", "final", "noisy_max_exponential", "objective_perturbation",
                   "Nothing was charged"):
        assert needle in r.stderr
    assert project.no_runs()
    assert not (project.root / "m.json").exists()

    r = cli("validate", project.data, "--spec", project.spec, "--epsilon", 0.4,
            "--dry-run", "--json", "--lambda", "search", "--threshold-share", "0")  # no --out
    assert r.exit_code == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["dry_run"] is True and plan["fits"] is True
    assert plan["planned"] == {"epsilon": 0.4, "delta": 0.0}
    assert plan["remaining"] == {"epsilon": 1.0, "delta": 0.0}
    _check_stability_steps(plan["breakdown"], 0.4)
    assert f"(n = {N - M})" in plan["breakdown"][0]["note"]
    assert f"(m = {M})" in plan["breakdown"][0]["note"]

    r = cli("validate", project.data, "--spec", project.spec, "--epsilon", 0.4,
            "--method", "data-split", "--dry-run", "--json", "--threshold-share", "0")
    assert r.exit_code == 0, r.stderr
    assert [s["step"] for s in json.loads(r.stdout)["breakdown"]] == ["data_split"]
    # a plan too big for the budget exits 3, still charging nothing
    r = _validate(cli, project, "--epsilon", 5, "--dry-run")
    assert r.exit_code == 3 and "does NOT fit" in r.stderr
    assert project.no_runs()
    assert not (project.root / "m.json").exists()


def test_seed_reproduces_the_choice_and_the_weights(project: Project, cli) -> None:
    for out, seed in (("a.json", 3), ("b.json", 3), ("c.json", 4)):
        r = _validate(cli, project, "--epsilon", 0.2, "--seed", seed, out=out)
        assert r.exit_code == 0, r.stderr
        assert "--seed" in r.stderr   # the seeded-run warning
    a, b, c = (project.envelope(name) for name in ("a.json", "b.json", "c.json"))
    keys = ("chosen_index", "lambda", "intercept", "weights")
    assert {k: a["payload"][k] for k in keys} == {k: b["payload"][k] for k in keys}
    assert a["payload"]["weights"] != c["payload"]["weights"]   # continuous noise
    assert a["seeded"] is b["seeded"] is c["seeded"] is True
    assert a["ledger_run_id"] != b["ledger_run_id"]
    assert [e["seeded"] for e in project.reserves()] == [True, True, True]
    assert "seed" not in project.reserves()[0]["arguments"]   # the seed is never recorded


def test_quiet_keeps_only_the_seed_warning(project: Project, cli) -> None:
    r = _validate(cli, project, "--epsilon", 0.2, "--seed", 1, "--quiet", "--json")
    assert r.exit_code == 0, r.stderr
    assert _summary(r)["method"] == "stability"
    assert "privacy plan" not in r.stderr and "chose λ" not in r.stderr
    assert "--seed" in r.stderr
    assert len(project.reserves()) == 1


def test_unseeded_runs_differ(project: Project, cli) -> None:
    for out in ("a.json", "b.json"):
        assert _validate(cli, project, "--epsilon", 0.2, out=out).exit_code == 0
    a, b = (project.envelope(name) for name in ("a.json", "b.json"))
    assert a["seeded"] is False and b["seeded"] is False
    assert a["payload"]["weights"] != b["payload"]["weights"]


def test_budget_exhaustion_exits_3_and_writes_nothing(project: Project, cli) -> None:
    r = _validate(cli, project, "--epsilon", 5)
    _refused(project, r, "budget exhausted", code=3)
    assert _validate(cli, project, "--epsilon", 0.6, out="first.json").exit_code == 0
    before = project.ledger.read_bytes()
    r = _validate(cli, project, "--epsilon", 0.6, out="second.json")
    assert r.exit_code == 3 and "budget exhausted" in r.stderr
    assert project.ledger.read_bytes() == before
    assert not (project.root / "second.json").exists()
    assert _spent(project, cli)["epsilon"] == 0.6


def test_a_grid_whose_smallest_lambda_drowns_the_choice_is_warned_about(project: Project,
                                                                         cli) -> None:
    # 8/(λ_min·n·ε) = 8/(0.001·360·0.5) ≈ 44: far above the ramp scores' span of 1
    r = _validate(cli, project, "--grid", "0.001,1", "--epsilon", 0.5, "--dry-run")
    assert r.exit_code == 0 and "may be close to random" in r.stderr and "0.001" in r.stderr
    r = _validate(cli, project, "--grid", "5,10", "--epsilon", 1, "--dry-run")
    assert r.exit_code == 0 and "close to random" not in r.stderr


def test_a_choice_at_the_grid_edge_is_warned_about_and_recorded(project: Project,
                                                                  cli) -> None:
    """Of two values every choice is an edge: the run warns on stderr, the --json summary
    carries the warning and the model file records which edge."""
    r = _validate(cli, project, "--grid", "0.5,1", "--epsilon", 0.5, "--seed", 3, "--json")
    assert r.exit_code == 0, r.stderr
    p = project.envelope()["payload"]
    edge = "smallest" if p["chosen_index"] == 0 else "largest"
    assert p["lambda_at_grid_edge"] == edge and p["lambda"] == (0.5 if edge == "smallest"
                                                                 else 1.0)
    assert f"is the {edge} value of the grid" in r.stderr
    assert any(f"{edge} value of the grid" in w for w in _summary(r)["warnings"])
    # the random baseline's choice reads no data: nothing to say about an edge
    r = _validate(cli, project, "--grid", "0.5,1", "--epsilon", 0.2, "--method", "random",
                  out="random.json")
    assert r.exit_code == 0, r.stderr
    assert "value of the grid" not in r.stderr
    assert project.envelope("random.json")["payload"].get("lambda_at_grid_edge") is None


def test_a_searched_grid_wholly_above_lambda0_is_noted_before_the_charge(project: Project,
                                                                         cli) -> None:
    # λ0 = 4√8/(0.5·400) ≈ 0.057 (ε_model 0.5 at threshold share 0): 50 is ~900 λ0
    r = _validate(cli, project, "--grid", "50,100", "--epsilon", 0.5, "--dry-run")
    assert r.exit_code == 0, r.stderr
    assert "the grid's smallest λ 50 is" in r.stderr and "over-regularised" in r.stderr
    assert project.no_runs()
    r = _validate(cli, project, "--grid", "0.05,0.1", "--epsilon", 0.5, "--dry-run")
    assert r.exit_code == 0 and "over-regularised" not in r.stderr


# ------------------------------------------------------------------------ defaults (issue 20)
def _imbalanced(project: Project) -> Path:
    """label 1 for 45 % of the members, never otherwise (22 % positives): below ½ for every
    input, so the 0.5 cut never predicts it; the weighted cut does (members positive)."""
    frame = toy_frame(n=2000, seed=5)
    rng = np.random.default_rng(6)
    frame["label"] = ((frame["member"] == "yes")
                      & (rng.random(len(frame)) < 0.45)).astype(int)
    return _write(project, frame, "rare.parquet")


def test_default_plan_is_lambda0_and_a_threshold(project: Project, cli) -> None:
    """No search at n = 400 (the grid's selection noise is far above 1 % of the ramp range):
    one fit at λ0 = 4√d/(ε_model·n) with ε·(1 − share), then the threshold's three steps
    with share = clip(1207/(N·ε), 0.05, 0.25) = 0.25 here: ⅛ of it for the positive count,
    ¾ for the cut, ⅛ for the count of rows above it."""
    r = cli("validate", project.data, "--spec", project.spec, "--epsilon", 0.4,
            "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    steps = json.loads(r.stdout)["breakdown"]
    assert [s["step"] for s in steps] == ["train", "threshold_prior", "threshold",
                                          "threshold_check"]
    assert [s["mechanism"] for s in steps] == ["objective_perturbation", "discrete_laplace",
                                               "exponential", "discrete_laplace"]
    assert [s["epsilon"] for s in steps] == pytest.approx([0.3, 0.0125, 0.075, 0.0125],
                                                          rel=1e-12)
    d = 1 + 1 + len(COLOR_LEVELS) + 2
    assert f"λ = {4 * math.sqrt(d) / (0.3 * N):.4g}" in steps[0]["note"]
    assert "λ chosen without the data" in r.stderr
    assert project.no_runs()


def test_default_run_releases_a_threshold_that_predict_uses(project: Project, cli) -> None:
    data = _imbalanced(project)

    def mutate(spec: dict) -> None:
        spec["budget"]["epsilon"] = 100
    project.write_spec(mutate)
    r = _validate(cli, project, "--epsilon", 4, "--seed", 2, "--json", data=data, paper=False)
    assert r.exit_code == 0, r.stderr
    summary = _summary(r)
    assert summary["lambda_rule"] == "auto" and summary["chosen_index"] is None
    p = project.envelope()["payload"]
    cut = p["threshold_logit"]
    assert cut == summary["threshold_logit"] == p["threshold"]["logit"] != 0.0
    assert p["threshold"]["epsilon"] == pytest.approx(4 * p["threshold_share"])
    assert p["degeneracy"]["degenerate"] is False
    out = project.root / "preds.parquet"
    assert cli("predict", project.root / "m.json", data, "--out", out).exit_code == 0
    preds = pd.read_parquet(out)
    z = np.log(preds["proba_1"]) - np.log(preds["proba_0"])
    # the released cut decides the class, not the 0.5 probability
    decided = np.abs(z.to_numpy() - cut) > 1e-9      # away from float ties at the cut
    np.testing.assert_array_equal((preds["prediction"].astype(str) == "1").to_numpy()[decided],
                                  z.to_numpy()[decided] > cut)
    truth = preds["label"].astype(str)
    predicted = preds["prediction"].astype(str)
    recall = ((predicted == "1") & (truth == "1")).sum() / (truth == "1").sum()
    assert recall > 0.8          # the minority class is predicted (the 0.5 cut gives none)


def test_threshold_share_zero_restores_the_half_cut(project: Project, cli) -> None:
    section = {"epsilon": 0.3, "threshold_share": 0, "lambda": 0.05}
    _spec(project, section)
    r = _validate(cli, project, "--json", "--seed", 1, paper=False)
    assert r.exit_code == 0, r.stderr
    p = project.envelope()["payload"]
    assert p["threshold_logit"] == 0.0 and p["lambda"] == 0.05
    assert p["lambda_rule"] == "given"
    assert [s["step"] for s in p["breakdown"]] == ["train"]
    assert p["breakdown"][0]["epsilon"] == pytest.approx(0.3)


def test_command_line_auto_overrides_the_spec(project: Project, cli) -> None:
    _spec(project, {"epsilon": 0.3, "lambda": 0.05, "threshold_share": 0})
    r = _validate(cli, project, "--lambda", "auto", "--threshold-share", "auto", "--dry-run",
                  "--json", paper=False)
    assert r.exit_code == 0, r.stderr
    steps = json.loads(r.stdout)["breakdown"]
    assert [s["step"] for s in steps] == ["train", "threshold_prior", "threshold",
                                          "threshold_check"]
    assert "λ0" in steps[0]["note"]


@pytest.mark.parametrize(("key", "value", "needle"), [
    ("lambda", 0, "lambda"), ("lambda", -1, "lambda"), ("lambda", "often", "lambda"),
    ("lambda", ".nan", "lambda"), ("threshold_share", 0.3, "threshold_share"),
    ("threshold_share", -0.1, "threshold_share"), ("threshold_share", "most", "threshold_share"),
])
def test_bad_lambda_or_threshold_share_is_refused(project: Project, cli, key: str, value: object,
                                               needle: str) -> None:
    _spec(project, {"epsilon": 0.3, key: value})
    _refused(project, _validate(cli, project, paper=False), needle, str(project.spec))


def test_bad_command_line_lambda_is_refused(project: Project, cli) -> None:
    _refused(project, _validate(cli, project, "--epsilon", 0.2, "--lambda", "0", paper=False),
             "--lambda")
    _refused(project, _validate(cli, project, "--epsilon", 0.2, "--threshold-share", "0.9",
                                paper=False), "--threshold-share")


def test_the_class_cuts_forecast_is_said_before_the_charge(project: Project, cli) -> None:
    """The cut's error is the forecast's headline: at N·ε = 20 (N = 400) its verdict says
    noise dominates and names the ε that helps, before any charge; at ε = 4 it is usable. No
    second, worst-case warning beside it (it said 30 % where runs lost about 1 %)."""
    def mutate(spec: dict) -> None:
        spec["budget"]["epsilon"] = 100
    project.write_spec(mutate)
    r = _validate(cli, project, "--epsilon", 0.05, "--dry-run", paper=False)
    assert r.exit_code == 0, r.stderr
    assert "verdict: noise dominates: the class cut's noise" in r.stderr
    assert "usable from ε ≥" in r.stderr and "forecast error is" not in r.stderr
    assert project.no_runs()
    r = _validate(cli, project, "--epsilon", 4, "--dry-run", paper=False)
    assert r.exit_code == 0 and "verdict: usable" in r.stderr


def test_a_wide_categorical_is_left_out_with_a_warning_unless_named(project: Project,
                                                                    cli) -> None:
    """color declared with 60 levels (61 with 'other') at n = 400, ε = 1: wider than the rest
    (age 1 + member 2) and than √(n·ε) = 20, so the default design leaves it out and says so
    on stderr and in the model file; naming the columns keeps it, with no warning."""
    def mutate(spec: dict) -> None:
        spec["schema"]["columns"]["color"]["categories"] = (
            ["red", "green", "blue"] + [f"c{i}" for i in range(57)])
    project.write_spec(mutate)
    r = _validate(cli, project, "--epsilon", 0.5)
    assert r.exit_code == 0, r.stderr
    assert "leaves out 'color' (61 levels)" in r.stderr
    payload = project.envelope()["payload"]
    assert payload["columns"] == ["age", "member"] and "color" not in payload["weights"]
    assert payload["left_out"]["columns"] == {"color": 61}
    assert read_entries(project.ledger)[0]["arguments"]["left_out"] == ["color"]
    r = _validate(cli, project, "--epsilon", 0.5, "--columns", "age,color,member",
                  out="named.json")
    assert r.exit_code == 0, r.stderr
    assert "leaves out" not in r.stderr
    named = project.envelope("named.json")["payload"]
    assert named["columns"] == DEFAULT_COLUMNS and "left_out" not in named
