"""End-to-end: ``dpcli predict`` with a model from ``dpcli train-nb``, and both on the
shipped samples (Adult, tweets).

predict spends nothing: the ledger must stay byte-identical.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import yaml

from dpcli.data.encode import BatchEncoder
from dpcli.data.report import DataReport
from dpcli.predict import _uncapped, load_model
from tests.cli.conftest import Project, toy_frame
from tests.cli.conftest import run_entries as read_entries  # runs only, no genesis

REPO = Path(__file__).resolve().parents[2]
PRED = ["prediction", "score", "proba_0", "proba_1"]


@pytest.fixture
def model(project: Project, cli) -> Path:
    """A naive Bayes model of the toy project (ε = 0.5, seeded)."""
    path = project.root / "m.json"
    r = cli("train-nb", project.data, "--spec", project.spec, "--out", path,
            "--epsilon", 0.5, "--seed", 1)
    assert r.exit_code == 0, r.stderr
    return path


def _predict(cli, model: Path, data: Path, out: Path, *extra: object):
    return cli("predict", model, data, "--out", out, *extra)


def _check_probabilities(out: pd.DataFrame, classes: list[str],
                         model: Path | None = None) -> np.ndarray:
    """Valid probabilities, and the prediction is the model's rule: the most probable class,
    or for a naive Bayes model with a released threshold, class 1 above it in log-odds."""
    proba = out[[f"proba_{c}" for c in classes]].to_numpy()
    assert np.isfinite(proba).all() and (proba >= 0).all() and (proba <= 1).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    threshold = None
    if model is not None:
        threshold = json.loads(model.read_text())["payload"].get("threshold")
    predicted = out["prediction"].astype(str).to_numpy()
    if threshold is None:
        assert (predicted == np.asarray(classes)[proba.argmax(axis=1)]).all()
    else:
        log_odds = np.log(proba[:, 1]) - np.log(proba[:, 0])
        clear = np.abs(log_odds - threshold) > 1e-9
        assert (predicted == np.where(log_odds > threshold, classes[1], classes[0]))[clear].all()
    return proba


def _library_proba(model: Path, frame: pd.DataFrame) -> np.ndarray:
    """The model's probabilities computed in-process, tokens read uncapped as predict does."""
    m, _ = load_model(model)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    encoder = BatchEncoder(_uncapped(m.schema), m.columns, report=DataReport(),
                           rng=np.random.default_rng(0), with_label=False)
    return m.predict_proba(encoder.encode(table))


def test_predict_parquet(project: Project, cli, model: Path) -> None:
    ledger = project.ledger.read_bytes()
    out = project.root / "p.parquet"
    r = _predict(cli, model, project.data, out, "--json")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["rows"] == 400 and summary["spent"] == {"epsilon": 0.0, "delta": 0.0}
    assert project.ledger.read_bytes() == ledger  # nothing charged, nothing logged

    source = pd.read_parquet(project.data)
    result = pd.read_parquet(out)
    assert list(result.columns) == [*source.columns, *PRED]
    assert len(result) == len(source)
    pd.testing.assert_frame_equal(result[list(source.columns)], source)
    proba = _check_probabilities(result, ["0", "1"], model)
    np.testing.assert_array_equal(result["score"], result["proba_1"])  # positive class 1
    np.testing.assert_allclose(proba, _library_proba(model, source), rtol=1e-12)
    # not a constant model: the toy labels are pure noise and the noise is keyed by a fresh
    # ledger key per test, so the share predicted positive may be anything; the scores must vary
    assert result["score"].nunique() > 10


def test_predict_csv_matches_parquet(project: Project, cli, model: Path) -> None:
    assert _predict(cli, model, project.data, project.root / "p.parquet").exit_code == 0
    r = _predict(cli, model, project.csv, project.root / "p.csv")
    assert r.exit_code == 0, r.stderr
    a = pd.read_parquet(project.root / "p.parquet")
    b = pd.read_csv(project.root / "p.csv")
    assert list(b.columns) == [*pd.read_csv(project.csv).columns, *PRED]
    _check_probabilities(b, ["0", "1"], model)
    np.testing.assert_allclose(b[PRED[1:]].to_numpy(), a[PRED[1:]].to_numpy(), rtol=1e-12)
    assert (b["prediction"].astype(str) == a["prediction"].astype(str)).all()


def test_predict_parquet_with_token_lists_to_csv(project: Project, cli, model: Path) -> None:
    r = _predict(cli, model, project.data, project.root / "p.csv")
    assert r.exit_code == 0, r.stderr


def test_predict_without_label_column(project: Project, cli, model: Path) -> None:
    frame = pd.read_parquet(project.data)
    unlabelled = project.root / "unlabelled.parquet"
    frame.drop(columns=["label"]).to_parquet(unlabelled, index=False)
    assert _predict(cli, model, project.data, project.root / "a.parquet").exit_code == 0
    r = _predict(cli, model, unlabelled, project.root / "b.parquet")
    assert r.exit_code == 0, r.stderr
    a = pd.read_parquet(project.root / "a.parquet")
    b = pd.read_parquet(project.root / "b.parquet")
    assert list(b.columns) == ["age", "color", "member", "words", *PRED]
    pd.testing.assert_frame_equal(a.drop(columns=["label"]), b)


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_a_rerun_replaces_its_own_predictions(project: Project, cli, model: Path,
                                              suffix: str) -> None:
    out = project.root / f"p{suffix}"
    for data in (project.data, project.csv):  # as a Makefile reruns it
        r = _predict(cli, model, data, out)
        assert r.exit_code == 0, r.stderr
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        assert json.loads(pq.read_schema(out).metadata[b"dpcli.output"])["command"] == "predict"


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_an_existing_file_that_is_not_a_prediction_is_kept(project: Project, cli, model: Path,
                                                           suffix: str) -> None:
    # a copy of the private data (the tester's `cp train.csv copy.csv`), and an unrelated file
    source = project.data if suffix == ".parquet" else project.csv
    for name, make in (("copy", lambda p: shutil.copyfile(source, p)),
                       ("notes", lambda p: p.write_text("prediction,notes\n1,keep me\n"))):
        out = project.root / f"{name}{suffix}"
        make(out)
        before = out.read_bytes()
        r = _predict(cli, model, project.data, out)
        assert r.exit_code == 64, r.stderr
        assert str(out) in r.stderr and "not an earlier output of `dpcli predict`" in r.stderr
        assert out.read_bytes() == before
        assert not [p for p in project.root.iterdir() if ".dpcli-tmp-" in p.name]


def test_the_input_data_or_the_model_is_never_an_output(project: Project, cli,
                                                        model: Path) -> None:
    preds = project.root / "p.parquet"
    assert _predict(cli, model, project.data, preds).exit_code == 0
    link = project.root / "link.parquet"
    link.symlink_to(preds)
    for data, out in ((preds, link), (project.data, model)):
        before = out.read_bytes()
        r = _predict(cli, model, data, out)
        assert r.exit_code == 64, r.stderr
        assert "must not replace" in r.stderr
        assert out.read_bytes() == before


def test_unknown_output_suffix_is_refused(project: Project, cli, model: Path) -> None:
    r = _predict(cli, model, project.data, project.root / "p.txt")
    assert r.exit_code == 64
    assert "unknown output format" in r.stderr
    assert not (project.root / "p.txt").exists()
    assert not list(project.root.glob(".p.txt*"))  # no temporary left behind


@pytest.mark.parametrize("content", [
    "not json at all",
    json.dumps({"model": "naive_bayes"}),
    json.dumps({"format": "dpcli", "schema_version": 1, "kind": "tabulate", "payload": {}}),
    json.dumps({"format": "dpcli", "schema_version": 99, "kind": "naive_bayes",
                "payload": {}}),
    json.dumps({"format": "dpcli", "schema_version": 1, "kind": "naive_bayes",
                "payload": {"model": "naive_bayes"}}),
])
def test_model_that_is_not_a_dpcli_model_is_refused(project: Project, cli, content: str) -> None:
    bad = project.root / "bad.json"
    bad.write_text(content)
    r = _predict(cli, bad, project.data, project.root / "p.parquet")
    assert r.exit_code == 65, r.stderr
    assert str(bad) in r.stderr
    assert not (project.root / "p.parquet").exists()


def test_missing_model_file_is_refused(project: Project, cli) -> None:
    r = _predict(cli, project.root / "nope.json", project.data, project.root / "p.parquet")
    assert r.exit_code == 66 and "not found" in r.stderr


@pytest.mark.parametrize("clash", ["prediction", "proba_1", "score"])
def test_input_with_an_output_column_is_refused(project: Project, cli, model: Path,
                                             clash: str) -> None:
    frame = pd.read_parquet(project.data).assign(**{clash: 1.0})
    data = project.root / "clash.parquet"
    frame.to_parquet(data, index=False)
    r = _predict(cli, model, data, project.root / "p.parquet")
    assert r.exit_code == 64
    assert clash in r.stderr
    assert not (project.root / "p.parquet").exists()


def test_feature_named_like_an_output_column(project: Project, cli) -> None:
    def rename(spec: dict) -> None:
        cols = spec["schema"]["columns"]
        cols["score"] = cols.pop("age")
        del spec["tabulate"]
    project.write_spec(rename)
    frame = pd.read_parquet(project.data).rename(columns={"age": "score"})
    data = project.root / "scored.parquet"
    frame.to_parquet(data, index=False)
    r = cli("train-nb", data, "--spec", project.spec, "--out", project.root / "m.json",
            "--epsilon", 0.3, "--columns", "score,color")
    assert r.exit_code == 0, r.stderr
    out = project.root / "p.parquet"
    r = _predict(cli, project.root / "m.json", data, out)
    assert r.exit_code == 64 and "score" in r.stderr  # refused: outputs would repeat a name
    assert not out.exists()


def test_missing_feature_column_is_refused(project: Project, cli, model: Path) -> None:
    data = project.root / "nocolor.parquet"
    pd.read_parquet(project.data).drop(columns=["color"]).to_parquet(data, index=False)
    r = _predict(cli, model, data, project.root / "p.parquet")
    assert r.exit_code == 65
    assert "color" in r.stderr
    assert not (project.root / "p.parquet").exists()


def test_multi_class_outputs_one_probability_per_class(project: Project, cli) -> None:
    def three(spec: dict) -> None:
        spec["label"] = {"column": "label", "classes": ["a", "b", "c"]}
    project.write_spec(three)
    frame = toy_frame(600, seed=4)
    frame["label"] = np.asarray(["a", "b", "c"])[np.random.default_rng(1).integers(0, 3, 600)]
    data = project.root / "abc.parquet"
    frame.to_parquet(data, index=False)
    r = cli("train-nb", data, "--spec", project.spec, "--out", project.root / "m.json",
            "--epsilon", 0.5, "--seed", 1)
    assert r.exit_code == 0, r.stderr
    payload = json.loads((project.root / "m.json").read_text())["payload"]
    assert len(payload["class_counts"]) == 3
    assert payload["schema"]["label"]["positive"] is None
    out = project.root / "p.parquet"
    r = _predict(cli, project.root / "m.json", data, out)
    assert r.exit_code == 0, r.stderr
    result = pd.read_parquet(out)
    assert list(result.columns) == [*frame.columns, "prediction", "proba_a", "proba_b",
                                    "proba_c"]
    assert "score" not in result.columns
    _check_probabilities(result, ["a", "b", "c"])
    assert set(result["prediction"]) <= {"a", "b", "c"}


# ------------------------------------------------------------------ shipped samples


@pytest.fixture
def samples(tmp_path: Path, cli) -> Path:
    """configs/ and the samples copied into tmp_path, ledgers initialised there."""
    if not (REPO / "sample_data" / "adult_train.parquet").exists():
        pytest.skip("sample_data is not available")
    shutil.copytree(REPO / "configs", tmp_path / "configs")
    (tmp_path / "sample_data").mkdir()
    for name in ("adult_train", "adult_test", "tweets_train", "tweets_test"):
        shutil.copy(REPO / "sample_data" / f"{name}.parquet", tmp_path / "sample_data")
    for spec in ("adult", "tweets"):
        r = cli("ledger", "init", "--spec", tmp_path / "configs" / f"{spec}.yaml")
        assert r.exit_code == 0, r.stderr
    return tmp_path


def _accuracy(cli, root: Path, name: str, epsilon: float) -> tuple[float, pd.DataFrame]:
    spec = root / "configs" / f"{name}.yaml"
    model = root / f"{name}.json"
    r = cli("train-nb", root / "sample_data" / f"{name}_train.parquet", "--spec", spec,
            "--out", model, "--epsilon", epsilon, "--seed", 1, "--json")
    assert r.exit_code == 0, r.stderr
    ledger = yaml.safe_load(spec.read_text())["ledger"]
    ledger_path = (spec.parent / ledger).resolve()
    before = ledger_path.read_bytes()
    out = root / f"{name}_pred.parquet"
    r = cli("predict", model, root / "sample_data" / f"{name}_test.parquet", "--out", out)
    assert r.exit_code == 0, r.stderr
    assert ledger_path.read_bytes() == before
    result = pd.read_parquet(out)
    _check_probabilities(result, ["0", "1"], model)
    return float((result["prediction"].astype(str) == result["label"].astype(str)).mean()), result


def test_adult_sample_accuracy(samples: Path, cli) -> None:
    """ε = 10, global method (the default), all 14 attributes. With the argmax (before the
    decision threshold) 200 noise seeds gave accuracy mean 0.819, sd 0.005. With the default
    balanced-accuracy threshold this seeded run gives accuracy 0.761, balanced accuracy 0.812
    (one run measured, not 200); a majority-class model has balanced accuracy 0.5, so
    0.72 still needs a model that learned something."""
    accuracy, result = _accuracy(cli, samples, "adult", 10.0)
    # the default decision threshold maximises balanced accuracy (nb_threshold), which trades
    # some accuracy on Adult's 25% positives for the rare class
    truth, predicted = result["label"].astype(str), result["prediction"].astype(str)
    balanced = np.mean([(predicted[truth == c] == c).mean() for c in ("0", "1")])
    print(f"accuracy {accuracy:.3f}, balanced accuracy {balanced:.3f}")
    assert balanced > 0.72 and accuracy > 0.70
    assert len(result) == 1500
    entries = read_entries(samples / "ledgers" / "uci-adult.jsonl")
    # the rule's steps: prior, 8 tables, 6 numeric histograms (the default), threshold
    # and its check of the rows predicted positive
    assert entries[0]["epsilon"] == 10.0 and len(entries[0]["breakdown"]) == 1 + 6 + 8 + 2
    r = cli("ledger", "show", "--spec", samples / "configs" / "adult.yaml", "--json")
    assert json.loads(r.stdout)["remaining"]["epsilon"] == 0.0


def test_tweets_sample_tokens_model(samples: Path, cli) -> None:
    """A tokens-only (Bernoulli) model over the public vocabulary, cap 24, at ε = 10
    (non-private accuracy 0.722; majority class 0.602). Its decision threshold aims at balanced
    accuracy, so plain accuracy may fall below the majority's."""
    accuracy, result = _accuracy(cli, samples, "tweets", 10.0)
    truth, predicted = result["label"].astype(str), result["prediction"].astype(str)
    balanced = np.mean([(predicted[truth == c] == c).mean() for c in ("0", "1")])
    print(f"accuracy {accuracy:.3f}, balanced accuracy {balanced:.3f}")
    # the default threshold maximises balanced accuracy, not accuracy (nb_threshold): 0.61-0.69
    # in 10 runs; a one-class model scores exactly 0.5
    assert balanced > 0.5
    assert list(result.columns) == ["tokens", "label", *PRED]
    payload = json.loads((samples / "tweets.json").read_text())["payload"]
    # the words move the prediction; or, when the noise makes its probabilities uncalibrated
    # (a cut far out in log-odds: about half the runs at this ε, the ledger key's draw), the
    # model file and stderr say so (issue 20: never silently)
    uncalibrated = payload["degeneracy"].get("uncalibrated_score") is True
    assert result["score"].std() > 0.01 or (uncalibrated and payload["degeneracy"]["degenerate"])
    assert set(payload["tables"]) == {"tokens"}
    steps = {s["step"]: s["note"] for s in payload["breakdown"]}
    assert steps["counts:tokens"].startswith("Δ=48,")  # 2 · max_per_row


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_predictions_keep_declared_integer_classes(project: Project, cli, model: Path,
                                                   fmt: str) -> None:
    """classes: [0, 1] come back as integers in `prediction` and in the label column, from a
    CSV (whose label is read as text) and from Parquet; `p.label.mean()` works."""
    out = project.root / f"p.{fmt}"
    data = project.csv if fmt == "csv" else project.data
    r = _predict(cli, model, data, out)
    assert r.exit_code == 0, r.stderr
    p = pd.read_csv(out) if fmt == "csv" else pd.read_parquet(out)
    assert p["prediction"].dtype.kind == "i" and p["label"].dtype.kind == "i"
    assert set(p["prediction"]) <= {0, 1}
    assert p["label"].mean() == pytest.approx(toy_frame()["label"].astype(int).mean())


def test_predictions_keep_declared_text_classes(project: Project, cli, tmp_path: Path) -> None:
    """classes declared as text ("no", "yes") stay text."""
    frame = toy_frame()
    frame["label"] = np.where(frame["label"].astype(int) == 1, "yes", "no")
    data = tmp_path / "text.parquet"
    frame.to_parquet(data, index=False)

    def relabel(spec: dict) -> None:
        spec["label"] = {"column": "label", "classes": ["no", "yes"], "positive": "yes"}

    project.write_spec(relabel)
    m = tmp_path / "m.json"
    r = cli("train-nb", data, "--spec", project.spec, "--out", m, "--epsilon", 0.5, "--seed", 1)
    assert r.exit_code == 0, r.stderr
    r = _predict(cli, m, data, tmp_path / "p.parquet")
    assert r.exit_code == 0, r.stderr
    p = pd.read_parquet(tmp_path / "p.parquet")
    assert set(p["prediction"]) <= {"no", "yes"}


def test_text_label_that_is_not_an_integer_is_refused(project: Project, cli, model: Path,
                                                       tmp_path: Path) -> None:
    csv = tmp_path / "odd.csv"
    text = project.csv.read_text().splitlines()
    header = text[0].split(",")
    at = header.index("label")
    row = text[1].split(",")
    row[at] = "maybe"
    csv.write_text("\n".join([text[0], ",".join(row), *text[2:]]) + "\n")
    r = _predict(cli, model, csv, tmp_path / "p.parquet")
    assert r.exit_code == 65, r.stderr
    assert "not an integer" in r.stderr and "maybe" not in r.stderr
