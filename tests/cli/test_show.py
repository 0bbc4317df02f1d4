"""``dpcli show``: a released file's summary, free (issue 24)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Project


def _train(project: Project, cli) -> Path:
    path = project.root / "m.json"
    r = cli("train-nb", project.data, "--spec", project.spec, "--out", path,
            "--epsilon", 0.5, "--seed", 1)
    assert r.exit_code == 0, r.stderr
    return path


def test_show_a_model_names_kind_dataset_spend_run_and_columns(project: Project, cli) -> None:
    model = _train(project, cli)
    env = json.loads(model.read_text())
    before = project.ledger.read_bytes()
    r = cli("show", model)
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines()[0] == f"{model}: naive_bayes of dataset toy"
    assert "spent ε=0.5 δ=0.0 under replace-one" in r.stdout
    assert env["ledger_run_id"] in r.stdout and "seeded" in r.stdout
    assert "columns: age, color, member, words" in r.stdout
    assert project.ledger.read_bytes() == before  # free: nothing charged or recorded
    r = cli("show", model, "--json")
    s = json.loads(r.stdout)
    assert s["kind"] == "naive_bayes" and s["run_id"] == env["ledger_run_id"]
    assert s["seeded"] is True and s["holds"]["classes"] == ["0", "1"]


def test_show_a_tabulate_csv_reads_its_sidecar(project: Project, cli) -> None:
    out = project.root / "counts.csv"
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", out, "--seed", 1)
    assert r.exit_code == 0, r.stderr
    r = cli("show", out, "--json")
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["kind"] == "tabulate" and s["holds"]["columns"] == ["color", "member", "age"]


def test_show_refuses_what_is_not_a_release(project: Project, cli) -> None:
    r = cli("show", project.root / "nope.json", "--json")
    assert r.exit_code == 66
    assert json.loads(r.stdout) == {"error": "no_input", "message": f"{project.root}/nope.json: "
                                    "file not found", "exit_code": 66, "charged": False}
    r = cli("show", project.spec)
    assert r.exit_code == 65 and "not a" in r.stderr


def test_a_degenerate_release_carries_its_caution_to_show_and_predict(project: Project,
                                                                      cli) -> None:
    """The training run's warning travels with the file: show and predict repeat what the
    envelope records (degeneracy, a verdict that was not usable); a clean model has none."""
    model = _train(project, cli)
    env = json.loads(model.read_text())
    fine = json.loads(json.dumps(env))
    fine["payload"]["degeneracy"] = {"degenerate": False}
    fine["forecast"] = {"verdict": {"usable": True, "text": "usable"}}
    (project.root / "fine.json").write_text(json.dumps(fine))
    assert json.loads(cli("show", project.root / "fine.json", "--json").stdout)["cautions"] == []
    env["payload"]["degeneracy"] = {**env["payload"].get("degeneracy", {}), "degenerate": True,
                                    "never_predicted": ["1"], "constant_score": False}
    env["forecast"] = {**env.get("forecast", {}),
                       "verdict": {"usable": False, "text": "noise dominates: usable from ε ≥ 2"}}
    bad = project.root / "bad.json"
    bad.write_text(json.dumps(env))
    r = cli("show", bad)
    assert r.exit_code == 0, r.stderr
    assert "caution: released as a degenerate model: never predicts '1'" in r.stdout
    assert "caution: released with the verdict: noise dominates: usable from ε ≥ 2" in r.stdout
    r = cli("predict", bad, project.data, "--out", project.root / "p.csv", "--json")
    assert r.exit_code == 0, r.stderr
    assert "degenerate model: never predicts '1'" in r.stderr
    assert len(json.loads(r.stdout.strip().splitlines()[-1])["cautions"]) == 2


def test_show_describes_the_parquet_files_dpcli_writes(project: Project, cli) -> None:
    """synthesize's and predict's Parquet outputs are described from their footer (not a
    decode error); a cells file shows its synopsis; other Parquet files are named as such."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    model = _train(project, cli)
    preds = project.root / "p.parquet"
    assert cli("predict", model, project.data, "--out", preds).exit_code == 0
    r = cli("show", preds)
    assert r.exit_code == 0, r.stderr
    rows = pq.read_metadata(preds).num_rows
    assert r.stdout.startswith(f"{preds}: predictions (Parquet, written by `dpcli predict`")
    assert f"{rows:,} rows" in r.stdout and "PRIVATE: the input's rows" in r.stdout
    s = json.loads(cli("show", preds, "--json").stdout)
    assert s["kind"] == "predictions" and s["rows"] == rows and s["written_by"] == "predict"
    assert s["columns"] == pq.read_schema(preds).names

    grid = project.root / "g"
    r = cli("publish-grid", project.data, "--spec", project.spec, "--out", grid, "--epsilon",
            0.4, "--seed", 1)
    assert r.exit_code == 0, r.stderr
    synth = project.root / "s.parquet"
    assert cli("synthesize", grid, "--rows", 50, "--out", synth).exit_code == 0
    s = json.loads(cli("show", synth, "--json").stdout)
    assert s["kind"] == "synthetic_records" and s["rows"] == 50
    s = json.loads(cli("show", grid / "cells.parquet", "--json").stdout)
    assert s["kind"] == "grid_synopsis" and s["file"] == str(grid / "grid.json")

    r = cli("show", project.data)   # the input: Parquet dpcli did not write
    assert r.exit_code == 65 and "without dpcli's dpcli.output mark" in r.stderr
    assert "UnicodeDecodeError" not in r.stderr
    other = project.root / "x.parquet"
    pq.write_table(pa.table({"a": [1]}), other)
    assert cli("show", other).exit_code == 65
    r = cli("show", project.csv)
    assert r.exit_code == 65 and "not a dpcli release (not JSON)" in r.stderr


def test_show_gives_a_released_figure_with_its_interval(project: Project, cli) -> None:
    """An AUC or an accuracy without its interval reads as exact (tester 13): show prints the
    interval the release stores, marked as the noise's."""
    model = _train(project, cli)
    curve, evaluation = project.root / "roc", project.root / "e.json"
    assert cli("roc", project.data, "--spec", project.spec, "--model", model, "--out", curve,
               "--epsilon", 0.2, "--seed", 2).exit_code == 0
    assert cli("evaluate", project.data, "--spec", project.spec, "--model", model, "--out",
               evaluation, "--epsilon", 0.2, "--seed", 3).exit_code == 0
    lo, hi = json.loads((curve / "curve.json").read_text())["payload"]["auc_interval"]
    shown = cli("show", curve / "curve.json")
    assert shown.exit_code == 0, shown.stderr
    assert f"auc_interval: [{lo:.4f}, {hi:.4f}] (90%, the noise only)" in shown.stdout
    bars = json.loads(evaluation.read_text())["payload"]["intervals"]["accuracy"]
    shown = cli("show", evaluation)
    assert f"accuracy_interval: [{bars[0]:.4f}, {bars[1]:.4f}]" in shown.stdout
