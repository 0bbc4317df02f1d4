"""End-to-end: ``dpcli roc`` and ``dpcli evaluate`` through the real entry point.

The toy project (tests/cli/conftest.py): label classes [0, 1], positive 1,
total budget ε = 1, ledger empty. A model is trained first (ε = 0.3).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcli.ledger import verify_file
from tests.cli.conftest import Project
from tests.cli.conftest import run_entries as read_entries  # runs only, no genesis


@pytest.fixture
def model(project: Project, cli) -> Path:
    path = project.root / "nb.json"
    r = cli("train-nb", project.data, "--spec", project.spec, "--out", path,
            "--epsilon", 0.3, "--seed", 1, "-q")
    assert r.exit_code == 0, r.stderr
    return path


@pytest.fixture
def scored(project: Project) -> Path:
    """The toy data plus a score column p in [0, 10] that tracks the label."""
    frame = pd.read_parquet(project.data)
    rng = np.random.default_rng(5)
    frame["p"] = np.clip(rng.normal(4 + 3 * frame["label"], 2), -1, 12)  # some out of range
    path = project.root / "scored.parquet"
    frame.to_parquet(path, index=False)
    return path


def _spent(project: Project) -> float:
    return sum(e["epsilon"] for e in read_entries(project.ledger) if e["kind"] == "reserve")


def _entries(project: Project) -> int:
    return len(read_entries(project.ledger))


def test_roc_with_a_model_writes_curve_files_and_charges(project: Project, cli, model) -> None:
    out = project.root / "roc"
    r = cli("roc", project.data, "--spec", project.spec, "--model", model, "--out", out,
            "--thresholds", "recursive-medians", "--epsilon", 0.4, "--seed", 2, "--json")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["command"] == "roc" and 0 <= summary["auc"] <= 1
    curve = pd.read_csv(out / "curve.csv")
    assert list(curve.columns) == ["threshold", "fpr", "tpr", "tpr_lower", "tpr_upper",
                                   "fpr_lower", "fpr_upper"]
    assert (curve["tpr_lower"] <= curve["tpr"]).all() and (curve["tpr"] <= curve["tpr_upper"]).all()
    assert (np.diff(curve["fpr"]) >= 0).all() and (np.diff(curve["tpr"]) >= 0).all()
    assert curve.iloc[0].tolist()[1:3] == [0.0, 0.0]
    assert curve.iloc[-1].tolist()[1:3] == [1.0, 1.0]
    assert curve["threshold"].iloc[-1] == -np.inf
    env = json.loads((out / "curve.json").read_text())
    assert env["kind"] == "roc_curve" and env["epsilon"] == 0.4 and env["seeded"] is True
    p = env["payload"]
    assert p["n"] == 400 and p["parameters"]["thresholds"] == "recursive-medians"
    assert p["parameters"]["k"] == 6 and len(p["thresholds"]) == 63  # ceil(log2 400) - 3
    assert p["auc"] == pytest.approx(summary["auc"]) and p["model_kind"] == "naive_bayes"
    assert len(p["points"]) == len(curve) and p["compare_true"] is False
    assert [s["step"] for s in p["breakdown"]] == ["thresholds", "counts", "auc",
                                                  "auc_positives"]
    assert p["scale"]["transform"] == "logit"  # naive Bayes gives log-odds
    lo, hi = p["auc_interval"]
    assert 0 <= lo < hi <= 1 and "auc_error" not in p and p["curve_auc"] is not None
    assert (out / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert _spent(project) == pytest.approx(0.7)
    entry = [e for e in read_entries(project.ledger) if e["kind"] == "reserve"][-1]
    assert entry["command"] == "roc"
    assert verify_file(project.ledger).ok


def test_roc_with_a_score_column_and_fixed_space(project: Project, cli, scored) -> None:
    out = project.root / "roc"
    r = cli("roc", scored, "--spec", project.spec, "--score-column", "p",
            "--score-range", "0,10", "--thresholds", "fixed-space", "--alpha", 0.1,
            "--counts", "privelet", "--out", out, "--epsilon", 0.5, "--report")
    assert r.exit_code == 0, r.stderr
    p = json.loads((out / "curve.json").read_text())["payload"]
    assert p["parameters"] == {"thresholds": "fixed-space", "counts": "privelet", "bins": 40,
                               "alpha": 0.1, "auc_share": 0.5}
    assert p["thresholds"] == pytest.approx(list(np.arange(1, 40) * 10 / 40))
    assert p["score_column"] == "p" and p["score_range"] == [0.0, 10.0]
    assert p["scale"]["transform"] == "identity"  # a score column keeps its own scale
    # fixed space: no ε1
    assert [s["step"] for s in p["breakdown"]] == ["counts", "auc", "auc_positives"]
    assert "clamped" in r.stderr  # the custodian learns that values were clamped
    assert _spent(project) == pytest.approx(0.5)


def test_roc_reads_the_spec_section(project: Project, cli, scored) -> None:
    project.write_spec(lambda s: s.update(roc={"epsilon": 0.25, "score_column": "p",
                                               "score_range": [0, 10], "k": 3,
                                               "counts": "laplace",
                                               "thresholds": "recursive-medians"}))
    r = cli("roc", scored, "--spec", project.spec, "--out", project.root / "r")
    assert r.exit_code == 0, r.stderr
    p = json.loads((project.root / "r" / "curve.json").read_text())["payload"]
    assert p["parameters"]["k"] == 3 and p["parameters"]["counts"] == "laplace"
    assert len(p["thresholds"]) == 7
    assert _spent(project) == pytest.approx(0.25)


@pytest.mark.parametrize(("args", "message"), [
    (("--score-column", "p"), "--score-range"),
    (("--score-column", "p", "--score-range", "5,1"), "LOWER < UPPER"),
    (("--score-column", "p", "--score-range", "a,b"), "LOWER,UPPER"),
    (("--score-column", "p", "--score-range", "0,1,2"), "--score-range must be two numbers"),
    (("--score-column", "nope", "--score-range", "0,1"), "nope"),
    (("--score-column", "label", "--score-range", "0,1"), "label column"),
    ((), "--model"),
    (("--score-column", "p", "--score-range", "0,10", "--compare-true"), "public_data"),
    (("--score-column", "p", "--score-range", "0,10", "--counts", "wavelet"), "one of"),
    (("--score-column", "p", "--score-range", "0,10", "--alpha", "2"), "alpha must be in"),
    (("--score-column", "p", "--score-range", "0,10", "--k", "30"), "--k"),
])
def test_roc_bad_input_is_refused_and_charges_nothing(project: Project, cli, scored,
                                                   args, message) -> None:
    out = project.root / "roc"
    r = cli("roc", scored, "--spec", project.spec, "--out", out, "--epsilon", 0.3, *args)
    assert r.exit_code == (65 if message == "nope" else 64), r.stderr  # nope: not in the file
    assert message in r.stderr + r.stdout
    assert _entries(project) == 0 and not out.exists()


def test_roc_refuses_model_and_score_column_together(project: Project, cli, model,
                                                     scored) -> None:
    r = cli("roc", scored, "--spec", project.spec, "--model", model, "--score-column", "p",
            "--score-range", "0,10", "--out", project.root / "r", "--epsilon", 0.3)
    assert r.exit_code == 64 and "not both" in r.stderr
    assert _spent(project) == pytest.approx(0.3)  # the model's training only


def test_roc_refuses_a_model_of_another_label(project: Project, cli, model) -> None:
    project.write_spec(lambda s: s["label"].update(positive=0))
    r = cli("roc", project.data, "--spec", project.spec, "--model", model,
            "--out", project.root / "r", "--epsilon", 0.3)
    assert r.exit_code == 64 and "label" in r.stderr


def test_roc_compare_true_only_on_declared_public_data(project: Project, cli, scored) -> None:
    project.write_spec(lambda s: s.update(public_data=True))
    out = project.root / "roc"
    r = cli("roc", scored, "--spec", project.spec, "--score-column", "p", "--score-range",
            "0,10", "--out", out, "--epsilon", 0.3, "--compare-true")
    assert r.exit_code == 0, r.stderr
    assert "NOT private" in r.stderr
    assert json.loads((out / "curve.json").read_text())["payload"]["compare_true"] is True
    complete = [e for e in read_entries(project.ledger) if e["kind"] == "complete"][-1]
    assert "non_private_output" in complete["summary"]
    assert "true_auc" not in (out / "curve.json").read_text()


def test_roc_dry_run_and_exhausted_budget(project: Project, cli, scored) -> None:
    base = ("roc", scored, "--spec", project.spec, "--score-column", "p", "--score-range",
            "0,10")
    r = cli(*base, "--epsilon", 0.5, "--dry-run", "--alpha", 1, "-v")
    assert r.exit_code == 0 and "400 bins" in r.stdout + r.stderr  # α = 1: n bins
    assert _entries(project) == 0
    out = project.root / "r"
    r = cli(*base, "--epsilon", 2.0, "--out", out)
    assert r.exit_code == 3 and not out.exists() and _entries(project) == 0


def test_evaluate_with_a_model(project: Project, cli, model) -> None:
    out = project.root / "eval.json"
    r = cli("evaluate", project.data, "--spec", project.spec, "--model", model,
            "--epsilon", 0.2, "--seed", 4, "--out", out)
    assert r.exit_code == 0, r.stderr
    assert "accuracy" in r.stderr and "noise" in r.stderr
    env = json.loads(out.read_text())
    assert env["kind"] == "evaluation" and env["epsilon"] == 0.2
    p = env["payload"]
    matrix = np.array(p["confusion"])
    assert matrix.shape == (2, 2) and matrix.sum() == 400 and (matrix >= 0).all()
    assert p["accuracy"] == pytest.approx(np.trace(matrix) / 400)
    assert p["noise"]["scale"] == pytest.approx(10.0)
    assert _spent(project) == pytest.approx(0.5)


def test_evaluate_without_out_prints_json(project: Project, cli, scored) -> None:
    r = cli("evaluate", scored, "--spec", project.spec, "--score-column", "p",
            "--score-range", "0,10", "--cutoff", 5.5, "--epsilon", 0.2, "--json", "-q")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["cutoff"] == 5.5 and sum(map(sum, summary["confusion"])) == 400
    assert _spent(project) == pytest.approx(0.2)


def test_evaluate_at_a_cutoff_at_the_top_of_the_score_range_never_predicts_positive(
        project: Project, cli, scored) -> None:
    """Scores are clamped into the declared range (p reaches 12 > 10 here), so score > 10
    never holds: the positive column is an exact 0 (no noise), its precision undefined;
    a cutoff inside the range keeps both columns noisy."""
    r = cli("evaluate", scored, "--spec", project.spec, "--score-column", "p",
            "--score-range", "0,10", "--cutoff", 10, "--epsilon", 0.2, "--json", "-q")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert [row[1] for row in summary["confusion"]] == [0, 0]
    assert summary["exact_columns"]["never_predicted"] == ["1"]
    assert "does not exceed the cutoff 10" in summary["exact_columns"]["decided_from"]
    assert summary["per_class"]["1"]["precision"] is None
    r = cli("evaluate", scored, "--spec", project.spec, "--score-column", "p",
            "--score-range", "0,10", "--cutoff", 9.99, "--epsilon", 0.2, "--json", "-q")
    assert r.exit_code == 0, r.stderr
    assert "exact_columns" not in json.loads(r.stdout.strip().splitlines()[-1])
    assert _spent(project) == pytest.approx(0.4)


def test_evaluate_warns_of_no_skill_everywhere_a_reader_looks(project: Project, cli,
                                                              scored) -> None:
    """A score that ranks backwards: the released matrix's balanced accuracy is below
    chance, said on stderr, in the file, in the --json summary (scripts read only stdout)
    and by `show`. At ε = 0.9 on 400 rows the noise (scale 2.2 a cell) can not lift a
    balanced accuracy near 0.2 above ½."""
    frame = pd.read_parquet(scored)
    frame["q"] = 10 - frame["p"].clip(0, 10)
    backwards = project.root / "backwards.parquet"
    frame.to_parquet(backwards, index=False)
    out = project.root / "eval.json"
    r = cli("evaluate", backwards, "--spec", project.spec, "--score-column", "q",
            "--score-range", "0,10", "--cutoff", 5.5, "--epsilon", 0.9, "--seed", 1,
            "--out", out, "--json")
    assert r.exit_code == 0, r.stderr
    assert "shows no skill" in r.stderr
    caution = json.loads(out.read_text())["payload"]["caution"]
    assert "balanced accuracy" in caution
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert any("shows no skill" in w for w in summary["warnings"])
    r = cli("show", out)
    assert r.exit_code == 0 and "shows no skill" in r.stdout + r.stderr


def test_evaluate_of_a_skilled_score_has_no_caution(project: Project, cli, scored) -> None:
    out = project.root / "eval.json"
    r = cli("evaluate", scored, "--spec", project.spec, "--score-column", "p",
            "--score-range", "0,10", "--cutoff", 5.5, "--epsilon", 0.9, "--seed", 1,
            "--out", out, "--json")
    assert r.exit_code == 0, r.stderr
    assert "caution" not in json.loads(out.read_text())["payload"]
    warnings = json.loads(r.stdout.strip().splitlines()[-1]).get("warnings", [])
    assert not any("no skill" in w for w in warnings)
    assert any("seeded" in w for w in warnings)   # every warning reaches the summary


@pytest.mark.parametrize(("args", "message"), [
    (("--score-column", "p", "--score-range", "0,10", "--cutoff", "11"), "outside"),
    (("--score-column", "p"), "--score-range"),
])
def test_evaluate_bad_input_is_refused(project: Project, cli, scored, args, message) -> None:
    r = cli("evaluate", scored, "--spec", project.spec, "--epsilon", 0.2, *args)
    assert r.exit_code == 64 and message in r.stderr
    assert _entries(project) == 0


def test_evaluate_cutoff_does_not_apply_to_a_model(project: Project, cli, model) -> None:
    r = cli("evaluate", project.data, "--spec", project.spec, "--model", model,
            "--cutoff", 0.3, "--epsilon", 0.2)
    assert r.exit_code == 64 and "--cutoff" in r.stderr
    assert _spent(project) == pytest.approx(0.3)


def test_an_empty_test_file_is_refused_before_the_charge(project: Project, cli,
                                                         model) -> None:
    empty = project.root / "empty.parquet"
    pd.read_parquet(project.data).iloc[:0].to_parquet(empty, index=False)
    before = _entries(project)
    for command in ("roc", "evaluate"):
        r = cli(command, empty, "--spec", project.spec, "--model", model,
                "--out", project.root / f"{command}_out", "--epsilon", 0.1)
        assert r.exit_code == 65 and "record" in r.stderr, r.stderr
    assert _entries(project) == before


def test_roc_warns_when_noise_swamps_the_counts(project: Project, cli, scored) -> None:
    r = cli("roc", scored, "--spec", project.spec, "--score-column", "p", "--score-range",
            "0,10", "--out", project.root / "r", "--epsilon", 0.1, "-q")
    assert r.exit_code == 0, r.stderr
    # 400 records, ε = 0.1 of which half on the counts: 64 bins, Δ = 6, scale 120
    assert "mostly noise" in r.stderr
    p = json.loads((project.root / "r" / "curve.json").read_text())["payload"]
    assert p["count_noise_scale"] == pytest.approx(120.0)


def test_roc_default_is_equal_bins_with_the_rest_of_epsilon_on_the_counts(project: Project, cli,
                                                                       scored) -> None:
    r = cli("roc", scored, "--spec", project.spec, "--score-column", "p", "--score-range",
            "0,10", "--out", project.root / "r", "--epsilon", 0.5, "-q")
    assert r.exit_code == 0, r.stderr
    p = json.loads((project.root / "r" / "curve.json").read_text())["payload"]
    assert p["parameters"] == {"thresholds": "fixed-space", "counts": "hierarchical",
                               "bins": 64, "k": 6, "branching": 16, "auc_share": 0.5}
    assert p["thresholds"] == pytest.approx(list(np.arange(1, 64) * 10 / 64))
    assert [s["step"] for s in p["breakdown"]] == ["counts", "auc", "auc_positives"]


def test_a_declared_score_column_keeps_its_missing_policy(project: Project) -> None:
    from dpcli.predict import score_schema
    from dpcli.spec import load_spec

    project.write_spec(lambda s: s["schema"]["columns"].update(
        p={"type": "numeric", "bounds": [0, 10], "missing": "impute", "fill": 5}))
    schema = score_schema(load_spec(project.spec).schema, "p", 0.0, 10.0)
    column = schema.column("p")
    assert column.missing == "impute" and column.fill == 5


@pytest.fixture
def small_batches(monkeypatch):
    """Read every file in batches of 7 rows (the toy file is otherwise one batch)."""
    import functools

    import dpcli.run
    from dpcli.data import DataSource

    batches: list[int] = []
    original = DataSource.batches

    def counted(self, columns, *, rng):
        for batch in original(self, columns, rng=rng):
            batches.append(batch.n)
            yield batch

    monkeypatch.setattr(dpcli.run, "prepare_source",
                        functools.partial(dpcli.run.prepare_source, batch_rows=7))
    monkeypatch.setattr(DataSource, "batches", counted)
    return batches


@pytest.mark.parametrize("args", [
    ("roc", "--score-column", "p", "--score-range", "0,10", "--thresholds", "fixed-space"),
    ("roc", "--score-column", "p", "--score-range", "0,10", "--thresholds", "recursive-medians",
     "--counts", "privelet"),
    ("evaluate", "--score-column", "p", "--score-range", "0,10", "--cutoff", "5"),
])
def test_batches_do_not_change_a_seeded_release(project: Project, cli, scored, args,
                                                request) -> None:
    """The pass folds batch by batch: 58 batches of 7 rows give the one-batch release."""
    project.write_spec(lambda s: s["budget"].update(epsilon=10.0))
    payloads = []
    for run in ("whole", "batched"):
        if run == "batched":
            batches = request.getfixturevalue("small_batches")
        out = project.root / f"{run}_out"
        target = ("--out", out / "e.json") if args[0] == "evaluate" else ("--out", out)
        r = cli(args[0], scored, "--spec", project.spec, *args[1:], *target, "--epsilon", 0.5,
                "--seed", 9, "-q")
        assert r.exit_code == 0, r.stderr
        path = out / "e.json" if args[0] == "evaluate" else out / "curve.json"
        payloads.append(json.loads(path.read_text())["payload"])
    assert len(batches) == 58 and sum(batches) == 400
    assert payloads[0] == payloads[1]


def test_roc_without_scores_says_what_to_give(project: Project, cli, scored) -> None:
    r = cli("roc", scored, "--spec", project.spec, "--out", project.root / "r", "--epsilon", 0.3)
    assert r.exit_code == 64
    assert "--model FILE" in r.stderr and "--score-column" in r.stderr
    assert "not both" not in r.stderr and _entries(project) == 0


def test_roc_transform_and_auc_share_options(project: Project, cli, model) -> None:
    out = project.root / "id"
    r = cli("roc", project.data, "--spec", project.spec, "--model", model, "--out", out,
            "--transform", "identity", "--auc-share", 0.25, "--epsilon", 0.4, "--seed", 3, "-q")
    assert r.exit_code == 0, r.stderr
    p = json.loads((out / "curve.json").read_text())["payload"]
    assert p["scale"] == {"transform": "identity", "range": [0.0, 1.0],
                          "source": "the score on its declared range"}
    assert p["thresholds"] == p["scale_thresholds"]
    steps = {s["step"]: s["epsilon"] for s in p["breakdown"]}
    assert steps == pytest.approx({"counts": 0.3, "auc": 0.075, "auc_positives": 0.025})
    r = cli("roc", project.data, "--spec", project.spec, "--model", model, "--out",
            project.root / "trap", "--auc-share", 0, "--epsilon", 0.2, "--seed", 3, "-q")
    assert r.exit_code == 0, r.stderr
    p = json.loads((project.root / "trap" / "curve.json").read_text())["payload"]
    assert "auc_error" not in p and [s["step"] for s in p["breakdown"]] == ["counts"]
    assert p["scale"]["transform"] == "logit"
    # thresholds on the log-odds scale are given back as probabilities
    assert p["thresholds"] == pytest.approx(1 / (1 + np.exp(-np.array(p["scale_thresholds"]))))
    r = cli("roc", project.data, "--spec", project.spec, "--model", model, "--out",
            project.root / "bad", "--transform", "probit", "--epsilon", 0.1)
    assert r.exit_code == 64 and "transform" in r.stderr


def test_roc_logit_of_a_score_column_outside_zero_one_is_refused(project: Project, cli,
                                                                 scored) -> None:
    before = _entries(project)
    r = cli("roc", scored, "--spec", project.spec, "--score-column", "p", "--score-range",
            "0,10", "--transform", "logit", "--out", project.root / "r", "--epsilon", 0.1)
    assert r.exit_code == 64 and "within [0, 1]" in r.stderr
    assert _entries(project) == before  # refused before the charge


def test_roc_warns_when_noise_dominates_the_auc(project: Project, cli, scored) -> None:
    out = project.root / "r"
    r = cli("roc", scored, "--spec", project.spec, "--score-column", "p", "--score-range",
            "0,10", "--out", out, "--epsilon", 0.05)
    assert r.exit_code == 0, r.stderr
    p = json.loads((out / "curve.json").read_text())["payload"]
    lo, hi = p["auc_interval"]
    assert hi - lo > 0.2  # 400 records at ε = 0.05
    assert "noise dominates the AUC" in r.stderr
    assert "noise dominates the AUC" in p["noise_dominates"]
    r = cli("roc", scored, "--spec", project.spec, "--score-column", "p", "--score-range",
            "0,10", "--out", project.root / "r2", "--epsilon", 0.5, "-q")
    assert r.exit_code == 0 and "noise dominates" not in r.stderr
    p = json.loads((project.root / "r2" / "curve.json").read_text())["payload"]
    lo, hi = p["auc_interval"]
    assert hi - lo < 0.4 and "noise_dominates" not in p


@pytest.mark.parametrize(("section", "message"), [
    ({"epsilon": 0.1, "transform": "probit"}, "roc.transform: must be one of logit, identity"),
    ({"epsilon": 0.1, "auc_share": 1}, "roc.auc_share: must be in [0, 1)"),
    ({"epsilon": 0.1, "auc_share": -0.1}, "roc.auc_share: must be in [0, 1)"),
])
def test_roc_spec_keys_are_checked(project: Project, cli, model, section, message) -> None:
    project.write_spec(lambda spec: spec.__setitem__("roc", section))
    before = _entries(project)
    r = cli("roc", project.data, "--spec", project.spec, "--model", model, "--out",
            project.root / "r")
    assert r.exit_code == 78 and message in r.stderr, r.stderr
    assert _entries(project) == before


def test_roc_spec_keys_set_the_run(project: Project, cli, model) -> None:
    project.write_spec(lambda spec: spec.__setitem__(
        "roc", {"epsilon": 0.2, "transform": "identity", "auc_share": 0.5}))
    r = cli("roc", project.data, "--spec", project.spec, "--model", model, "--out",
            project.root / "r", "--seed", 1, "-q")
    assert r.exit_code == 0, r.stderr
    p = json.loads((project.root / "r" / "curve.json").read_text())["payload"]
    assert p["scale"]["transform"] == "identity" and p["parameters"]["auc_share"] == 0.5


def test_an_edited_model_is_named_by_roc_and_evaluate(project: Project, cli, model) -> None:
    """The ledger holds the model's SHA-256; a model file edited since its release (a
    threshold moved by hand) is named on stderr and in the release's envelope."""
    env = json.loads(model.read_text())
    out = project.root / "e1.json"
    r = cli("evaluate", project.data, "--spec", project.spec, "--model", model,
            "--epsilon", 0.1, "--seed", 1, "--out", out)
    assert r.exit_code == 0 and "is not the model" not in r.stderr, r.stderr
    env["payload"]["edited_by_hand"] = True
    model.write_text(json.dumps(env))
    out = project.root / "e2.json"
    r = cli("evaluate", project.data, "--spec", project.spec, "--model", model,
            "--epsilon", 0.1, "--seed", 1, "--out", out)
    assert r.exit_code == 0, r.stderr
    assert "is not the model ledger run" in r.stderr
    assert "edited" in json.loads(out.read_text())["payload"]["model_caution"]


def test_scoring_a_model_on_its_own_training_file_is_named(project: Project, cli, model,
                                                           scored: Path) -> None:
    """evaluate and roc on the file the model was trained on (here a copy under another
    name: the ledger's keyed digests compare bytes, not names) say so on stderr before the
    charge, for the custodian only: whether the test rows are the training rows is a fact
    about the private rows (one replaced record changes it), so no output carries it."""
    copy = project.root / "renamed.parquet"
    copy.write_bytes(Path(project.data).read_bytes())
    out = project.root / "e.json"
    r = cli("evaluate", copy, "--spec", project.spec, "--model", model,
            "--epsilon", 0.1, "--seed", 1, "--out", out, "--json")
    assert r.exit_code == 0, r.stderr
    said = "is the file ledger run"
    assert said in r.stderr and "(train-nb) trained on" in r.stderr
    assert said not in out.read_text() and said not in r.stdout
    r = cli("roc", copy, "--spec", project.spec, "--model", model, "--out",
            project.root / "r", "--epsilon", 0.2, "--seed", 1, "--json")
    assert r.exit_code == 0 and said in r.stderr, r.stderr
    assert said not in r.stdout and said not in (project.root / "r" / "curve.json").read_text()
    r = cli("evaluate", scored, "--spec", project.spec, "--model", model,
            "--epsilon", 0.1, "--seed", 1, "--out", project.root / "e2.json")
    assert r.exit_code == 0 and said not in r.stderr, r.stderr


def test_a_degenerate_models_cautions_travel_into_roc_and_evaluate(project: Project, cli,
                                                                   model) -> None:
    """A model released as degenerate (its envelope's ``degeneracy``) used to be evaluated and
    drawn without a word (tester 11: a one-class grid's confusion matrix, precision 1.0, no
    warning). Its cautions are said before the charge and kept in the output's payload, so
    ``show`` repeats them; a model released without one adds nothing."""
    env = json.loads(model.read_text())
    env["payload"].pop("degeneracy", None)   # as a model released without a caution
    env.pop("forecast", None)
    model.write_text(json.dumps(env))
    r = cli("evaluate", project.data, "--spec", project.spec, "--model", model,
            "--epsilon", 0.1, "--seed", 1, "--out", project.root / "clean.json")
    assert r.exit_code == 0, r.stderr
    clean = json.loads((project.root / "clean.json").read_text())["payload"]
    assert "model_cautions" not in clean and "released as a degenerate model" not in r.stderr
    env["payload"]["degeneracy"] = {"degenerate": True, "never_predicted": ["1"]}
    model.write_text(json.dumps(env))
    out = project.root / "e.json"
    r = cli("evaluate", project.data, "--spec", project.spec, "--model", model,
            "--epsilon", 0.1, "--seed", 1, "--out", out)
    assert r.exit_code == 0, r.stderr
    assert "released as a degenerate model: never predicts '1'" in r.stderr
    cautions = json.loads(out.read_text())["payload"]["model_cautions"]
    assert any("never predicts '1'" in c for c in cautions)
    r = cli("roc", project.data, "--spec", project.spec, "--model", model, "--out",
            project.root / "r", "--epsilon", 0.2, "--seed", 1, "--json")
    assert r.exit_code == 0, r.stderr
    assert "released as a degenerate model" in r.stderr
    curve = json.loads((project.root / "r" / "curve.json").read_text())["payload"]
    assert any("never predicts '1'" in c for c in curve["model_cautions"])
    # the --json line names them by key too, as evaluate's does
    assert json.loads(r.stdout)["model_cautions"] == curve["model_cautions"]
    shown = cli("show", out)
    assert shown.exit_code == 0 and "never predicts '1'" in shown.stdout + shown.stderr


def test_evaluate_prints_its_release_on_stdout_and_refuses_reuse_without_out(
        project: Project, cli, model) -> None:
    """Without --out the confusion matrix was only on stderr (`> result.txt` kept nothing;
    -q showed nothing), and --reuse without an output spent again on every rerun (tester 12:
    three runs, three charges). The release is now on stdout, even with -q; --reuse without
    --out is refused before anything is charged."""
    r = cli("evaluate", project.data, "--spec", project.spec, "--model", model,
            "--epsilon", 0.1, "-q")
    assert r.exit_code == 0, r.stderr
    assert "private confusion matrix" in r.stdout and "accuracy" in r.stdout
    before = _entries(project)
    r = cli("evaluate", project.data, "--spec", project.spec, "--model", model,
            "--epsilon", 0.1, "--reuse")
    assert r.exit_code == 64 and "give --out FILE" in r.stderr, r.stderr
    assert _entries(project) == before


def test_an_auc_interval_that_reaches_chance_is_said() -> None:
    """From the released interval only (tester 13: AUC 0.510 [0.491, 0.528], no word): one
    that includes 0.5, one below it, one clear of it; `show` repeats it from the file."""
    from dpcli.api.roc import _chance_caution
    from dpcli.io import envelope_cautions

    near = _chance_caution(0.491, 0.528, 0.9)
    assert near is not None and "[0.491, 0.528] includes 0.5" in near
    below = _chance_caution(0.30, 0.45, 0.9)
    assert below is not None and "wrong way round" in below
    assert _chance_caution(0.501, 0.60, 0.9) is None
    assert envelope_cautions({"payload": {"auc_caution": near}}) == [near]
