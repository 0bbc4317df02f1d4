"""End-to-end: ``dpcli publish-grid`` (PrivPfC), and ``synthesize`` / ``predict`` / ``roc`` /
``evaluate`` on its synopsis, through the real entry point.

The toy project (tests/cli/conftest.py): age numeric [17, 90] (no taxonomy unless a test
declares one), color categorical red/green/blue (the data also hold "pink"), member binary,
words tokens, label classes [0, 1] positive 1; ledger initialised and empty.

A seeded run's noise is keyed with the ledger's own (fresh) key, so which grid is chosen
may differ between sessions: assertions hold for any choice, except where ε is so large
that the choice is forced.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.cli.conftest import Project
from tests.cli.conftest import run_entries as read_entries  # runs only, no genesis

CATEGORIES = {"color": ["red", "green", "blue"], "member": ["no", "yes"]}
BOUNDS = {"age": (17, 90)}


def _grid_spec(project: Project, *, budget: float = 1.0, section: dict | None = None,
               taxonomy: object = None, classes: list | None = None) -> Path:
    """The toy spec with a publish-grid section (ε 0.5 by default) and an age taxonomy."""
    def mutate(spec: dict) -> None:
        spec["budget"]["epsilon"] = budget
        spec["publish-grid"] = {"epsilon": 0.5} if section is None else section
        if taxonomy is not None:
            spec["schema"]["columns"]["age"]["taxonomy"] = taxonomy
        if classes is not None:
            spec["label"]["classes"] = classes
    return project.write_spec(mutate)


def _publish(cli, project: Project, *extra: object, out: str = "syn", data: Path | None = None):
    return cli("publish-grid", data or project.data, "--spec", project.spec,
               "--out", project.root / out, *extra)


def _payload(folder: Path) -> dict:
    return json.loads((folder / "grid.json").read_text())["payload"]



@pytest.fixture
def synopsis(project: Project, cli) -> Path:
    """A published synopsis of the toy data (age with {bins: [2, 4, 8]}), ε 0.5 of 1."""
    _grid_spec(project, taxonomy={"bins": [2, 4, 8]})
    r = _publish(cli, project, "--seed", 1, "-q")
    assert r.exit_code == 0, r.stderr
    return project.root / "syn"


def _shares(project: Project) -> Path:
    """3,000 rows whose label rate is 0.7 on red, 0.4 on green and 0 on blue (seed 5)."""
    data = project.root / "shares.parquet"
    rng = np.random.default_rng(5)
    rate = {"red": 0.7, "green": 0.4, "blue": 0.0}
    frame = _signal_frame(3000, 5, lambda f: rng.random(len(f)) < f["color"].map(rate))
    frame.to_parquet(data, index=False)
    return data


def _signal_frame(n: int, seed: int, label) -> pd.DataFrame:
    """Declared values only (no "pink"); label = label(frame)."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "age": rng.integers(17, 91, n),
        "color": rng.choice(CATEGORIES["color"], n),
        "member": rng.choice(CATEGORIES["member"], n),
        "words": [["alpha"]] * n,
    })
    frame["label"] = label(frame).astype(int)
    return frame


# ------------------------------------------------------------------------- publish
def test_publish_writes_the_synopsis_the_ledger_and_a_summary(project: Project, cli) -> None:
    _grid_spec(project, taxonomy={"bins": [2, 4, 8]})
    r = _publish(cli, project, "--seed", 1, "--json")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1
    summary = json.loads(lines[0])
    assert summary["command"] == "publish-grid" and summary["dataset"] == "toy"
    assert summary["spent"] == {"epsilon": 0.5, "delta": 0.0}
    # the pool is counted in grids, each of at most T cells (not "N cells from M")
    pool, t = summary["pool_size"], summary["threshold"]
    assert (f"from {pool:,} candidate grid{'s' if pool != 1 else ''} of at most T = {t:,} "
            "cells") in r.stderr

    out = project.root / "syn"
    assert sorted(p.name for p in out.iterdir()) == ["cells.parquet", "grid.json"]
    env = json.loads((out / "grid.json").read_text())
    assert env["format"] == "dpcli" and env["kind"] == "grid_synopsis"
    assert env["epsilon"] == 0.5 and env["delta"] == 0.0 and env["seeded"] is True
    assert env["dataset"] == "toy" and env["ledger_run_id"] == summary["run_id"]
    p = env["payload"]
    assert p["n"] == 400
    # T = ⌊0.2·n / (2/ε_hist)⌋ with ε_hist = 4/7 of ε
    assert p["threshold"] == math.floor(0.2 * 400 * (0.5 * 4 / 7) / 2) == 11
    assert summary["threshold"] == p["threshold"] and summary["pool_size"] == p["pool_size"]
    assert p["pool_size"] >= 1 and p["selected_columns"] is None
    assert [c["column"] for c in p["candidates"]] == ["age", "color", "member"]
    # color without a taxonomy is flat over its categories and `other` (pink)
    assert [c["sizes"] for c in p["candidates"]] == [[1, 2, 4, 8], [1, 4], [1, 2]]

    steps = {s["step"]: s for s in p["breakdown"]}
    assert list(steps) == ["select_grid", "histogram"]
    assert steps["select_grid"]["mechanism"] == "exponential"
    assert steps["histogram"]["mechanism"] == "discrete_laplace"
    assert sum(s["epsilon"] for s in steps.values()) == pytest.approx(0.5, abs=1e-12)
    assert steps["select_grid"]["epsilon"] == pytest.approx(0.5 * 3 / 7)
    assert p["breakdown"] == summary["breakdown"]

    cells_bytes = (out / "cells.parquet").read_bytes()
    assert p["cells_file"] == "cells.parquet"
    assert p["cells_sha256"] == hashlib.sha256(cells_bytes).hexdigest()
    cells = pq.read_table(out / "cells.parquet")
    used = [g["column"] for g in p["grid"]]
    assert summary["columns"] == used
    assert cells.column_names == [*used, "n_negative", "n_positive"]
    sizes = [len(g["nodes"]) for g in p["grid"]]
    assert cells.num_rows == p["n_cells"] == summary["n_cells"] == math.prod(sizes)
    assert cells.num_rows <= p["threshold"]
    for g in p["grid"]:
        candidate = next(c for c in p["candidates"] if c["column"] == g["column"])
        assert len(g["nodes"]) == candidate["sizes"][g["level"]] and g["level"] >= 1
        assert cells.schema.field(g["column"]).type == pa.string()
        assert set(cells.column(g["column"]).to_pylist()) == {n["name"] for n in g["nodes"]}
    for name in ("n_negative", "n_positive"):
        assert pa.types.is_integer(cells.schema.field(name).type)
        assert min(cells.column(name).to_pylist()) >= 0
    totals = p["noisy_totals"]
    assert totals == {"negative": sum(cells.column("n_negative").to_pylist()),
                      "positive": sum(cells.column("n_positive").to_pylist())}
    # the synopsis' schema holds only the used columns and the label
    assert list(p["schema"]["columns"]) == used
    assert p["schema"]["label"]["column"] == "label"

    entries = read_entries(project.ledger)
    assert [e["kind"] for e in entries] == ["reserve", "complete"]
    reserve, complete = entries
    assert reserve["command"] == "publish-grid" and reserve["epsilon"] == 0.5
    assert reserve["run_id"] == summary["run_id"] and reserve["seeded"] is True
    assert reserve["breakdown"] == p["breakdown"]
    assert reserve["arguments"]["columns"] == ["age", "color", "member"]
    digests = {Path(o["path"]).name: o["sha256"] for o in complete["outputs"]}
    assert digests == {"cells.parquet": p["cells_sha256"],
                       "grid.json": hashlib.sha256((out / "grid.json").read_bytes()).hexdigest()}
    assert complete["summary"]["cells"] == p["n_cells"]


def test_age_is_a_default_candidate_only_with_a_taxonomy(project: Project, cli) -> None:
    _grid_spec(project, section={"epsilon": 0.3})
    r = _publish(cli, project, "--seed", 1, out="plain")
    assert r.exit_code == 0, r.stderr
    assert [c["column"] for c in _payload(project.root / "plain")["candidates"]] == [
        "color", "member"]
    # the columns it leaves out are named, not dropped without a word: a warning (kept by
    # --quiet, listed by --json) and the grid file's ignored_columns
    assert "warning: not grid axes, so the synopsis ignores them: age, words" in r.stderr
    assert _payload(project.root / "plain")["ignored_columns"] == ["age", "words"]
    r = _publish(cli, project, "--seed", 1, "--quiet", "--json", out="quiet")
    assert r.exit_code == 0 and "not grid axes" in r.stderr
    assert any("not grid axes" in w for w in json.loads(r.stdout)["warnings"])
    _grid_spec(project, section={"epsilon": 0.3},
               taxonomy={"(0, 100]": {"(0, 50]": {}, "(50, 100]": {}}})
    r = _publish(cli, project, "--seed", 1, out="aged")
    assert r.exit_code == 0, r.stderr
    candidates = _payload(project.root / "aged")["candidates"]
    assert [c["column"] for c in candidates] == ["age", "color", "member"]
    assert candidates[0]["sizes"] == [1, 2]
    assert [e["arguments"]["columns"] for e in project.reserves()] == [
        ["color", "member"], ["color", "member"], ["age", "color", "member"]]


def test_a_tokens_column_is_refused_before_any_charge(project: Project, cli) -> None:
    _grid_spec(project, taxonomy={"bins": [2, 4]})
    r = _publish(cli, project, "--columns", "words")
    assert r.exit_code == 64
    assert "words" in r.stderr and "tokens" in r.stderr
    assert project.no_runs()
    assert not (project.root / "syn").exists()


@pytest.mark.parametrize("how", ["option", "section"])
def test_a_numeric_column_without_taxonomy_is_refused(project: Project, cli, how: str) -> None:
    if how == "option":
        _grid_spec(project)
        r = _publish(cli, project, "--columns", "color,age")
    else:
        _grid_spec(project, section={"epsilon": 0.5, "columns": ["color", "age"]})
        r = _publish(cli, project)
    assert r.exit_code == 78
    assert "taxonomy" in r.stderr and "'age'" in r.stderr
    assert project.no_runs()
    assert not (project.root / "syn").exists()


@pytest.mark.parametrize(("taxonomy", "message"), [
    ({"(20, 90]": {"(20, 50]": {}, "(50, 90]": {}}}, "[17, 90]"),  # does not cover the bounds
    ({"(0, 100]": {"(0, 40]": {}, "(50, 100]": {}}}, "without gaps"),
    ({"bins": [2, 3]}, "bins[1]"),
])
def test_a_broken_taxonomy_is_refused_before_any_charge(project: Project, cli, taxonomy,
                                                        message: str) -> None:
    _grid_spec(project, taxonomy=taxonomy)
    r = _publish(cli, project)
    assert r.exit_code == 78
    assert message in r.stderr
    assert "columns.age.taxonomy" in r.stderr and str(project.spec) in r.stderr
    assert project.no_runs()
    assert not (project.root / "syn").exists()


def test_a_label_with_three_classes_is_refused(project: Project, cli) -> None:
    _grid_spec(project, classes=[0, 1, 2])
    r = _publish(cli, project)
    assert r.exit_code == 64
    assert "binary label" in r.stderr and "3" in r.stderr
    assert project.no_runs()
    assert not (project.root / "syn").exists()


def test_dry_run_shows_the_plan_and_charges_nothing(project: Project, cli,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")   # the table's notes unwrapped, to be read whole
    _grid_spec(project, taxonomy={"bins": [2, 4, 8]})
    r = _publish(cli, project, "--dry-run", "-v")   # -v: every step, by name
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert "select_grid" in r.stderr and "histogram" in r.stderr
    assert "≤ 11 cells" in r.stderr  # T from n = 400 and ε
    assert "place no 'other' leaf" not in r.stderr    # the flat default places it
    assert "Nothing was charged" in r.stderr
    assert project.no_runs()
    assert not (project.root / "syn").exists()
    # --json: the plan as one JSON line
    r = _publish(cli, project, "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["dry_run"] is True and plan["fits"] is True
    assert plan["planned"]["epsilon"] == 0.5
    assert [s["step"] for s in plan["breakdown"]] == ["select_grid", "histogram"]
    assert project.no_runs()


def test_a_small_max_pool_selects_columns_first(project: Project, cli) -> None:
    _grid_spec(project, taxonomy={"bins": [2, 4, 8]})
    r = _publish(cli, project, "--max-pool", 2, "--seed", 2, "--json")
    assert r.exit_code == 0, r.stderr
    p = _payload(project.root / "syn")
    steps = [(s["step"], s["mechanism"], s["epsilon"]) for s in p["breakdown"]]
    assert [s[:2] for s in steps] == [("select_columns", "exponential_top_k"),
                                      ("select_grid", "exponential"),
                                      ("histogram", "discrete_laplace")]
    assert [s[2] for s in steps] == pytest.approx([0.15, 0.15, 0.2])  # 0.3 / 0.3 / 0.4 of 0.5
    assert p["max_pool"] == 2
    selected = p["selected_columns"]
    assert isinstance(selected, list) and 1 <= len(selected) <= 3
    assert set(selected) <= {"age", "color", "member"} and len(set(selected)) == len(selected)
    assert {g["column"] for g in p["grid"]} <= set(selected)
    # T with ε_hist = 0.4 of ε
    assert p["threshold"] == math.floor(0.2 * 400 * 0.2 / 2)
    assert project.reserves()[0]["epsilon"] == 0.5
    assert project.reserves()[0]["arguments"]["max_pool"] == 2


def test_budget_exhaustion_exits_3_and_charges_nothing(project: Project, cli) -> None:
    _grid_spec(project, taxonomy={"bins": [2, 4]})
    assert _publish(cli, project, "--epsilon", 0.6, out="first").exit_code == 0
    before = project.ledger.read_bytes()
    r = _publish(cli, project, "--epsilon", 0.6, out="second")
    assert r.exit_code == 3
    assert "budget exhausted" in r.stderr
    assert project.ledger.read_bytes() == before
    assert not (project.root / "second").exists()


# ---------------------------------------------------------------------- synthesize
def _check_synthetic(frame: pd.DataFrame, payload: dict) -> None:
    used = [g["column"] for g in payload["grid"]]
    assert list(frame.columns) == [*used, "label"]
    assert set(frame["label"].unique()) <= {0, 1}
    for column in used:
        if column in CATEGORIES:   # `other` stands for the undeclared values (pink)
            assert set(frame[column].unique()) <= {*CATEGORIES[column], "other"}, column
        else:
            low, high = BOUNDS[column]
            assert frame[column].between(low, high).all(), column


def test_synthesize_draws_rows_in_the_declared_domain(project: Project, cli,
                                                      synopsis: Path) -> None:
    before = project.ledger.read_bytes()
    out = project.root / "synth.parquet"
    r = cli("synthesize", synopsis, "--out", out, "--rows", 500, "--seed", 3, "--json")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["rows"] == 500 and summary["spent"] == {"epsilon": 0.0, "delta": 0.0}
    frame = pd.read_parquet(out)
    assert len(frame) == 500
    assert frame["label"].dtype == np.int64  # integer classes stay integers
    _check_synthetic(frame, _payload(synopsis))
    assert project.ledger.read_bytes() == before  # post-processing: nothing spent


def test_synthesize_is_reproducible_under_a_seed(project: Project, cli, synopsis: Path) -> None:
    paths = [project.root / name for name in ("a.parquet", "b.parquet", "c.parquet")]
    for path, seed in zip(paths, (3, 3, 4), strict=True):
        r = cli("synthesize", synopsis, "--out", path, "--rows", 500, "--seed", seed)
        assert r.exit_code == 0, r.stderr
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert not pd.read_parquet(paths[0]).equals(pd.read_parquet(paths[2]))


def test_synthesize_to_csv_with_n_rows_by_default(project: Project, cli,
                                                  synopsis: Path) -> None:
    before = project.ledger.read_bytes()
    out = project.root / "synth.csv"
    r = cli("synthesize", synopsis / "grid.json", "--out", out, "--seed", 3)
    assert r.exit_code == 0, r.stderr
    frame = pd.read_csv(out)
    payload = _payload(synopsis)
    assert len(frame) == payload["n"] == 400
    _check_synthetic(frame, payload)
    assert project.ledger.read_bytes() == before


def test_synthesize_replaces_only_its_own_marked_parquet(project: Project, cli,
                                                         synopsis: Path) -> None:
    out = project.root / "synth.parquet"
    for seed in (3, 4):  # a rerun (a Makefile's) replaces its own earlier output
        r = cli("synthesize", synopsis, "--out", out, "--rows", 50, "--seed", seed)
        assert r.exit_code == 0, r.stderr
    mark = json.loads(pq.read_schema(out).metadata[b"dpcli.output"])
    assert mark["command"] == "synthesize"
    # a copy of the data, and predict's marked output, are not synthesize's
    copy = project.root / "copy.parquet"
    shutil.copyfile(project.data, copy)
    preds = project.root / "preds.parquet"
    assert cli("predict", synopsis / "grid.json", project.data, "--out", preds).exit_code == 0
    for path, why in ((copy, "no dpcli.output mark"), (preds, "output of `dpcli predict`")):
        before = path.read_bytes()
        r = cli("synthesize", synopsis, "--out", path, "--rows", 50, "--seed", 3)
        assert r.exit_code == 64, r.stderr
        assert str(path) in r.stderr and why in r.stderr
        assert path.read_bytes() == before
        assert not [p for p in path.parent.iterdir() if ".dpcli-tmp-" in p.name]


def test_synthesize_never_replaces_an_existing_csv(project: Project, cli,
                                                   synopsis: Path) -> None:
    out = project.root / "synth.csv"
    r = cli("synthesize", synopsis, "--out", out, "--rows", 50, "--seed", 3)
    assert r.exit_code == 0, r.stderr
    before = out.read_bytes()  # even its own: a CSV header cannot tell it from the data
    r = cli("synthesize", synopsis, "--out", out, "--rows", 50, "--seed", 4)
    assert r.exit_code == 64
    assert "never replaces an existing CSV" in r.stderr and str(out) in r.stderr
    assert out.read_bytes() == before


def test_synthesize_names_the_columns_its_records_lack(project: Project, cli,
                                                       synopsis: Path) -> None:
    payload = _payload(synopsis)
    assert payload["spec_columns"] == ["age", "color", "member", "words"]
    used = [g["column"] for g in payload["grid"]]
    r = cli("synthesize", synopsis, "--out", project.root / "s.parquet", "--rows", 20,
            "--seed", 1, "--json")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    lacks = [c for c in payload["spec_columns"] if c not in used]
    assert summary["lacks"] == lacks and "words" in lacks
    assert f"not in the synopsis, so not in the records: {', '.join(lacks)}" in r.stderr


def test_synthesize_repeats_the_synopsis_cautions(project: Project, cli,
                                                  synopsis: Path) -> None:
    grid = synopsis / "grid.json"
    env = json.loads(grid.read_text())
    env["payload"]["degeneracy"] = {"degenerate": True, "never_predicted": ["0"]}
    env["forecast"] = {"verdict": {"usable": False, "text": "verdict: noise dominates"}}
    grid.write_text(json.dumps(env))
    r = cli("synthesize", synopsis, "--out", project.root / "s.parquet", "--rows", 20,
            "--json")
    assert r.exit_code == 0, r.stderr
    assert "warning:" in r.stderr and "never predicts '0'" in r.stderr
    assert "noise dominates" in r.stderr
    assert len(json.loads(r.stdout)["cautions"]) == 2


def test_synthesize_refuses_an_unknown_suffix(project: Project, cli, synopsis: Path) -> None:
    out = project.root / "synth.txt"
    r = cli("synthesize", synopsis, "--out", out, "--rows", 10)
    assert r.exit_code == 64
    assert ".parquet" in r.stderr and ".csv" in r.stderr
    assert not out.exists()


def test_synthesize_numeric_values_stay_in_the_declared_bounds(project: Project,
                                                               cli) -> None:
    # age taxonomy (0, 100] is wider than the bounds [17, 90]; label = age > 50, so at a
    # large ε every grid worth choosing uses age
    _grid_spec(project, budget=1000, section={"epsilon": 1000}, taxonomy={
        "(0, 100]": {"(0, 50]": {"(0, 25]": {}, "(25, 50]": {}}, "(50, 100]": {}}})
    data = project.root / "signal.parquet"
    _signal_frame(1000, 7, lambda f: f["age"] > 50).to_parquet(data, index=False)
    r = _publish(cli, project, "--seed", 1, "--columns", "age,member", data=data)
    assert r.exit_code == 0, r.stderr
    payload = _payload(project.root / "syn")
    assert "age" in [g["column"] for g in payload["grid"]]
    out = project.root / "synth.parquet"
    r = cli("synthesize", project.root / "syn", "--out", out, "--rows", 2000, "--seed", 3)
    assert r.exit_code == 0, r.stderr
    frame = pd.read_parquet(out)
    _check_synthetic(frame, payload)
    assert frame["age"].min() < 25 and frame["age"].max() > 80  # both ends are drawn
    # the noisy counts are nearly exact: the synthetic label still follows age
    assert ((frame["age"] > 50) == (frame["label"] == 1)).mean() > 0.95


# ------------------------------------------------------------------------- predict
def test_predict_with_the_grid_model(project: Project, cli, synopsis: Path) -> None:
    before = project.ledger.read_bytes()
    out = project.root / "preds.parquet"
    r = cli("predict", synopsis / "grid.json", project.data, "--out", out)
    assert r.exit_code == 0, r.stderr
    preds = pd.read_parquet(out)
    assert len(preds) == 400
    assert set(preds["prediction"].astype(str).unique()) <= {"0", "1"}
    assert preds["score"].between(0, 1).all()
    np.testing.assert_allclose(preds["proba_0"] + preds["proba_1"], 1.0)
    np.testing.assert_allclose(preds["score"], preds["proba_1"])
    assert project.ledger.read_bytes() == before
    folder = project.root / "preds_folder.parquet"          # the synopsis folder works too
    assert cli("predict", synopsis, project.data, "--out", folder).exit_code == 0
    pd.testing.assert_frame_equal(pd.read_parquet(folder), preds)


def test_predict_refuses_edited_cells(project: Project, cli, synopsis: Path) -> None:
    cells = pq.read_table(synopsis / "cells.parquet")
    edited = cells.set_column(cells.schema.get_field_index("n_positive"), "n_positive",
                              pa.array([v + 5 for v in cells.column("n_positive").to_pylist()],
                                       pa.int64()))
    pq.write_table(edited, synopsis / "cells.parquet")
    out = project.root / "preds.parquet"
    r = cli("predict", synopsis / "grid.json", project.data, "--out", out)
    assert r.exit_code == 65
    assert "SHA-256" in r.stderr
    assert not out.exists()


def test_predict_refuses_missing_cells(project: Project, cli, synopsis: Path) -> None:
    (synopsis / "cells.parquet").unlink()
    out = project.root / "preds.parquet"
    r = cli("predict", synopsis / "grid.json", project.data, "--out", out)
    assert r.exit_code == 65
    assert "cells.parquet" in r.stderr and "missing" in r.stderr
    assert not out.exists()


@pytest.mark.parametrize("positive", [1, 0])
def test_the_histogram_classifier_learns_a_function_of_color(project: Project, cli,
                                                             positive: int) -> None:
    def mutate(spec: dict) -> None:
        spec["budget"]["epsilon"] = 1000
        spec["label"]["positive"] = positive
        spec["schema"]["columns"]["age"]["taxonomy"] = {"bins": [2, 4, 8]}
    project.write_spec(mutate)
    data = project.root / "signal.parquet"
    frame = _signal_frame(1000, 11, lambda f: f["color"].isin(["red", "blue"]))
    frame.to_parquet(data, index=False)
    r = _publish(cli, project, "--seed", 1, "--epsilon", 1000, data=data)
    assert r.exit_code == 0, r.stderr
    payload = _payload(project.root / "syn")
    assert "color" in [g["column"] for g in payload["grid"]]
    # n_positive counts the declared positive class (noise scale 2/571: nearly exact)
    cells = pd.read_parquet(project.root / "syn" / "cells.parquet")
    assert abs(cells["n_positive"].sum() - (frame["label"] == positive).sum()) <= 5
    assert abs(cells["n_negative"].sum() - (frame["label"] != positive).sum()) <= 5
    out = project.root / "preds.parquet"
    r = cli("predict", project.root / "syn" / "grid.json", data, "--out", out)
    assert r.exit_code == 0, r.stderr
    preds = pd.read_parquet(out)
    accuracy = (preds["prediction"].astype(str) == preds["label"].astype(str)).mean()
    assert accuracy >= 0.95
    np.testing.assert_allclose(preds["score"], preds[f"proba_{positive}"])


def test_an_other_leaf_gives_undeclared_values_a_cell(project: Project, cli) -> None:
    def mutate(spec: dict) -> None:
        spec["budget"]["epsilon"] = 1000
        spec["schema"]["columns"]["color"]["taxonomy"] = {
            "Any": {"warm": ["red", "other"], "cool": ["green", "blue"]}}
    project.write_spec(mutate)
    rng = np.random.default_rng(3)
    frame = _signal_frame(800, 3, lambda f: f["color"] == "red")
    frame["color"] = rng.choice(["red", "green", "blue", "pink"], len(frame))
    frame["label"] = frame["color"].isin(["red", "pink"]).astype(int)  # pink is undeclared
    data = project.root / "pink.parquet"
    frame.to_parquet(data, index=False)
    r = _publish(cli, project, "--seed", 1, "--epsilon", 1000, "--columns", "color", data=data)
    assert r.exit_code == 0, r.stderr
    assert "place no 'other' leaf" not in r.stderr
    payload = _payload(project.root / "syn")
    assert [g["column"] for g in payload["grid"]] == ["color"]
    out = project.root / "preds.parquet"
    r = cli("predict", project.root / "syn" / "grid.json", data, "--out", out)
    assert r.exit_code == 0, r.stderr
    preds = pd.read_parquet(out)
    pink = preds["color"] == "pink"
    assert pink.sum() > 100
    assert (preds.loc[pink, "prediction"].astype(str) == "1").all()
    assert (preds["prediction"].astype(str) == preds["label"].astype(str)).mean() >= 0.95


def test_a_tiny_epsilon_publishes_the_root_grid(project: Project, cli) -> None:
    # T = ⌊n·ε_hist/10⌋ = 0 → 1: only the grid that uses no column fits
    _grid_spec(project, taxonomy={"bins": [2, 4]})
    r = _publish(cli, project, "--epsilon", 0.01, "--seed", 1)
    assert r.exit_code == 0, r.stderr
    assert "no column" in r.stderr
    payload = _payload(project.root / "syn")
    assert payload["grid"] == [] and payload["n_cells"] == 1 and payload["threshold"] == 1
    assert payload["pool_size"] == 1
    cells = pq.read_table(project.root / "syn" / "cells.parquet")
    assert cells.column_names == ["n_negative", "n_positive"] and cells.num_rows == 1
    r = cli("synthesize", project.root / "syn", "--out", project.root / "s.parquet",
            "--rows", 50, "--seed", 1)
    # noise of scale 350 on ~200 per class: both counts clamp to 0 a few % of the time
    if sum(cells.column("n_negative").to_pylist() + cells.column("n_positive").to_pylist()):
        assert r.exit_code == 0, r.stderr
        synth = pd.read_parquet(project.root / "s.parquet")
        assert list(synth.columns) == ["label"] and len(synth) == 50
        # label-only records are not silent: the synopsis' cautions and what they lack
        assert "warning:" in r.stderr and "kept no column" in r.stderr
        assert "lack every column of the spec's schema: age, color, member, words" in r.stderr
        assert "degenerate" in r.stderr or "verdict" in r.stderr
    else:
        assert r.exit_code == 65 and "no positive counts" in r.stderr
    r = cli("predict", project.root / "syn" / "grid.json", project.data,
            "--out", project.root / "p.parquet")
    assert r.exit_code == 0, r.stderr
    preds = pd.read_parquet(project.root / "p.parquet")
    assert preds["prediction"].nunique() == 1 and preds["score"].nunique() == 1


# -------------------------------------------------------------------- roc, evaluate
def test_roc_and_evaluate_accept_the_grid_model(project: Project, cli) -> None:
    def mutate_spec() -> None:
        _grid_spec(project, budget=2.0, taxonomy={"bins": [2, 4]})
        spec = project.spec.read_text()
        project.spec.write_text(spec + "roc: {epsilon: 0.2}\nevaluate: {epsilon: 0.2}\n")
    mutate_spec()
    r = _publish(cli, project, "--seed", 1)
    assert r.exit_code == 0, r.stderr
    folder = project.root / "syn"   # the folder, as predict takes it, or its grid.json
    model = folder / "grid.json"
    empty = project.root / "empty"
    empty.mkdir()
    r = cli("roc", project.data, "--spec", project.spec, "--model", empty,
            "--out", project.root / "roc", "--seed", 2)
    assert r.exit_code == 65 and "a folder without grid.json" in r.stderr

    r = cli("roc", project.data, "--spec", project.spec, "--model", folder,
            "--out", project.root / "roc", "--seed", 2, "--json")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["command"] == "roc" and 0 <= summary["auc"] <= 1
    curve = json.loads((project.root / "roc" / "curve.json").read_text())["payload"]
    assert curve["model_kind"] == "grid_synopsis"

    r = cli("evaluate", project.data, "--spec", project.spec, "--model", folder,
            "--seed", 3, "--json")
    assert r.exit_code == 0, r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["command"] == "evaluate" and 0 <= result["accuracy"] <= 1
    r = cli("evaluate", project.data, "--spec", project.spec, "--model", model,
            "--seed", 4, "--json")
    assert r.exit_code == 0, r.stderr

    assert [(e["command"], e["epsilon"]) for e in project.reserves()] == [
        ("publish-grid", 0.5), ("roc", 0.2), ("evaluate", 0.2), ("evaluate", 0.2)]
    assert sum(Fraction(str(e["epsilon"])) for e in project.reserves()) == Fraction("1.1")
    # the folder stands for its grid.json everywhere: an edited synopsis is noticed
    env = json.loads(model.read_text())
    env["payload"]["n"] = env["payload"]["n"] + 0   # same content, other bytes
    model.write_text(json.dumps(env, indent=1))
    r = cli("evaluate", project.data, "--spec", project.spec, "--model", folder,
            "--seed", 5, "--dry-run")
    assert r.exit_code == 0, r.stderr
    assert "is not the model ledger run" in r.stderr


@pytest.mark.parametrize("epsilon", [0.05, 5.0])
def test_the_synopsis_records_its_degeneracy_as_a_classifier(project: Project, cli,
                                                             epsilon: float) -> None:
    """Every cell of the grid is some input of the declared domain, so the check is exact: a
    synopsis whose cells all favour one class never predicts the other (said on stderr and in
    grid.json), and predictions on data agree."""
    _grid_spec(project, budget=30.0)
    for seed in range(3):
        r = _publish(cli, project, "--epsilon", epsilon, "--seed", seed, out=f"syn{seed}")
        assert r.exit_code == 0, r.stderr
        verdict = _payload(project.root / f"syn{seed}")["degeneracy"]
        assert verdict["degenerate"] == ("degenerate model" in r.stderr), r.stderr
        out = project.root / f"p{seed}.parquet"
        r = cli("predict", project.root / f"syn{seed}" / "grid.json", project.data, "--out", out,
                "-q")
        assert r.exit_code == 0, r.stderr
        predicted = set(pd.read_parquet(out)["prediction"].astype(str))
        assert not predicted & set(verdict["never_predicted"])


@pytest.mark.parametrize("decision", ["balanced", "majority"])
def test_the_decision_rule_weighs_a_cell_against_the_overall_share(project: Project, cli,
                                                                  decision: str) -> None:
    """Positives: 70 % of red rows, 40 % of green, none of blue (about 37 % overall). The
    colour grid beats the root (red flips the majority), so at ε = 1000 it is chosen and the
    noise is negligible. 'majority' predicts 1 on red only; 'balanced' on red and green,
    whose share is above the overall one."""
    def mutate(spec: dict) -> None:
        spec["budget"]["epsilon"] = 1000
        spec["publish-grid"] = {"epsilon": 1000, "decision": decision, "columns": ["color"]}
    project.write_spec(mutate)
    data = _shares(project)
    r = _publish(cli, project, data=data)
    assert r.exit_code == 0, r.stderr
    payload = _payload(project.root / "syn")
    assert payload["decision"] == decision
    assert [g["column"] for g in payload["grid"]] == ["color"]
    assert payload["degeneracy"]["degenerate"] is False, payload["degeneracy"]
    out = project.root / "p.parquet"
    assert cli("predict", project.root / "syn", data, "--out", out, "-q").exit_code == 0
    preds = pd.read_parquet(out)
    positive = {"majority": ["red"], "balanced": ["red", "green"]}[decision]
    expected = pd.read_parquet(data)["color"].isin(positive).to_numpy()
    assert ((preds["prediction"].astype(str) == "1").to_numpy() == expected).all()


def test_an_unknown_decision_is_refused_before_any_charge(project: Project, cli) -> None:
    _grid_spec(project, section={"epsilon": 0.5, "decision": "median"})
    before = project.ledger.read_bytes()
    r = _publish(cli, project)
    assert r.exit_code == 78
    assert "decision" in r.stderr and "balanced" in r.stderr
    assert project.ledger.read_bytes() == before


def test_a_grid_without_signal_is_reported(project: Project, cli) -> None:
    """The label is a coin flip whatever the row: at ε = 1000 the signal test sees the exact
    counts of 4 cells × 3000 rows; with p-values uniform under no signal, it reports the grid
    as noise unless p ≤ 0.05. Which p-value comes out depends only on the data (fixed here)
    and the negligible noise, so the payload and stderr must agree, and the grid released
    must record the test."""
    def mutate(spec: dict) -> None:
        spec["budget"]["epsilon"] = 1000
        spec["publish-grid"] = {"epsilon": 1000, "columns": ["color", "member"]}
    project.write_spec(mutate)
    data = project.root / "coin.parquet"
    rng = np.random.default_rng(3)
    _signal_frame(3000, 3, lambda f: pd.Series(rng.random(len(f)) < 0.5)).to_parquet(
        data, index=False)
    r = _publish(cli, project, data=data)
    assert r.exit_code == 0, r.stderr
    verdict = _payload(project.root / "syn")["degeneracy"]
    assert 0 < verdict["signal_p_value"] <= 1
    assert verdict["no_signal"] == (verdict["signal_p_value"] > 0.05)
    assert verdict["no_signal"] == ("indistinguishable from noise" in r.stderr)


def test_all_numeric_schema_shows_the_taxonomy_syntax(project: Project, cli) -> None:
    """Issue 24: the refusal on all-numeric data shows how to declare a taxonomy."""
    def numeric_only(spec: dict) -> None:
        spec["schema"]["columns"] = {"age": spec["schema"]["columns"]["age"]}
        spec.pop("tabulate", None)

    project.write_spec(numeric_only)
    r = cli("publish-grid", project.data, "--spec", project.spec, "--epsilon", 0.5,
            "--out", project.root / "g")
    assert r.exit_code == 78, r.stderr   # the schema's domains allow no grid: a spec error
    assert "age:\n    type: numeric" in r.stderr and "taxonomy: {bins: [2, 4, 8]}" in r.stderr
    assert project.no_runs()


def test_evaluate_of_a_one_cell_grid_releases_the_never_predicted_column_exactly(
        project: Project, cli) -> None:
    """A tiny ε publishes the root grid: one cell, one class predicted everywhere. Its other
    class's column is 0 for every dataset (public), released without noise, and its
    precision is undefined, everywhere a reader looks (stdout, --json, the output file);
    the ε is charged as declared."""
    _grid_spec(project, budget=2.0, taxonomy={"bins": [2, 4]})
    project.spec.write_text(project.spec.read_text() + "evaluate: {epsilon: 0.05}\n")
    r = _publish(cli, project, "--epsilon", 0.01, "--seed", 1, "-q")
    assert r.exit_code == 0, r.stderr
    payload = _payload(project.root / "syn")
    assert payload["n_cells"] == 1
    never = payload["degeneracy"]["never_predicted"]
    assert len(never) == 1
    column = ["0", "1"].index(never[0])
    out = project.root / "e.json"
    r = cli("evaluate", project.data, "--spec", project.spec, "--model", project.root / "syn",
            "--seed", 2, "--json", "--out", out)
    assert r.exit_code == 0, r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    for released in (result, json.loads(out.read_text())["payload"]):
        matrix = np.array(released["confusion"])
        assert (matrix[:, column] == 0).all() and matrix.sum() == 400
        assert released["exact_columns"]["never_predicted"] == never
        assert "1 released cell" in released["exact_columns"]["decided_from"]
        assert released["per_class"][never[0]]["precision"] is None
        assert released["intervals"]["per_class"][never[0]]["precision"] is None
    assert [(e["command"], e["epsilon"]) for e in project.reserves()][-1] == ("evaluate", 0.05)
    r = cli("evaluate", project.data, "--spec", project.spec, "--model", project.root / "syn",
            "--seed", 3)
    assert r.exit_code == 0, r.stderr
    assert f"exact: the column of {never[0]!r} is 0 without noise" in r.stdout
    assert f"class {never[0]}: precision undefined (never predicted)" in r.stdout


def test_evaluate_of_a_grid_predicting_both_classes_is_the_k_by_k_release(
        project: Project, cli) -> None:
    """Nothing changes for a normal model: no exact column, and the released matrix is the
    K×K mechanism's on the true counts with the run's seeded generator, draw for draw."""
    from dpcli.algorithms import evaluate as ev

    def mutate(spec: dict) -> None:
        spec["budget"]["epsilon"] = 1001
        spec["publish-grid"] = {"epsilon": 1000, "columns": ["color"]}
        spec["evaluate"] = {"epsilon": 0.5}
    project.write_spec(mutate)
    data = _shares(project)
    assert _publish(cli, project, "--seed", 1, data=data).exit_code == 0
    r = cli("evaluate", data, "--spec", project.spec, "--model", project.root / "syn",
            "--seed", 4, "--json")
    assert r.exit_code == 0, r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert "exact_columns" not in result and "exact:" not in r.stdout
    out = project.root / "p.parquet"
    assert cli("predict", project.root / "syn", data, "--out", out, "-q").exit_code == 0
    preds = pd.read_parquet(out)
    truth = ev.confusion_counts(preds["label"].astype(int).to_numpy(),
                                preds["prediction"].astype(int).to_numpy(), 2)
    assert (truth.sum(axis=0) > 0).all()
    expected = ev.private_confusion(truth, ("0", "1"), epsilon=0.5, rng=project.seeded_rng(4))
    np.testing.assert_array_equal(np.array(result["confusion"]), expected.matrix)
