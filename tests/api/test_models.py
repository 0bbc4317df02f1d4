"""Estimators with scikit-learn's conventions; released models on tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpcli
from dpcli.errors import UsageError
from dpcli.models import NaiveBayes, ReleasedModel
from tests.cli.conftest import Project, toy_frame

FEATURES = ["age", "color", "member"]


def _xy(n: int = 400, seed: int = 0) -> tuple[pd.DataFrame, pd.Series]:
    frame = toy_frame(n, seed)
    return frame[FEATURES], frame["label"]


def test_fit_predict_proba_and_classes_in_the_labels_type(project: Project) -> None:
    x, y = _xy()
    clf = NaiveBayes(spec=str(project.spec), epsilon=0.5)
    assert clf.fit(x, y) is clf
    assert clf.classes_.tolist() == [0, 1]                     # ints, like y
    proba = clf.predict_proba(x)
    assert proba.shape == (len(x), 2)
    assert np.allclose(proba.sum(axis=1), 1)
    pred = clf.predict(x)
    assert set(pred.tolist()) <= {0, 1} and pred.dtype.kind == "i"
    assert clf.n_features_in_ == 3 and clf.feature_names_in_.tolist() == FEATURES
    assert len(project.reserves()) == 1
    assert project.reserves()[0]["arguments"]["columns"] == FEATURES


def test_save_and_load_model_round_trip(project: Project, tmp_path) -> None:
    x, y = _xy()
    clf = NaiveBayes(spec=str(project.spec), epsilon=0.5).fit(x, y)
    path = clf.save(tmp_path / "nb.json")
    model = dpcli.load_model(path)
    assert isinstance(model, ReleasedModel) and model.kind == "naive_bayes"
    assert np.array_equal(model.predict_proba(x), clf.predict_proba(x))
    assert model.envelope["ledger_run_id"] == project.reserves()[0]["run_id"]


def test_undeclared_columns_are_refused_before_the_charge(project: Project) -> None:
    x, y = _xy()
    with pytest.raises(UsageError, match="'height' is not declared"):
        NaiveBayes(spec=str(project.spec), epsilon=0.5).fit(x.assign(height=1.0), y)
    assert project.no_runs()
    with pytest.raises(UsageError, match="not fitted"):
        NaiveBayes(spec=str(project.spec)).predict(x)


def test_params_follow_scikit_learn(project: Project) -> None:
    clf = NaiveBayes(spec=str(project.spec), epsilon=0.5, method="smooth")
    assert clf.get_params() == {"spec": str(project.spec), "epsilon": 0.5, "method": "smooth",
                                "r": None, "seed": None}
    assert clf.set_params(epsilon=0.2) is clf and clf.epsilon == 0.2
    with pytest.raises(ValueError, match="invalid parameter 'eps'"):
        clf.set_params(eps=1)
    with pytest.raises(TypeError):
        NaiveBayes(str(project.spec))  # type: ignore[misc]  # keyword-only


@pytest.mark.parametrize("name", ["NaiveBayes", "LogisticRegression",
                                  "BoostedRandomClassifiers"])
def test_every_estimator_clones_and_fits(project: Project, name: str) -> None:
    pytest.importorskip("sklearn")
    from sklearn.base import clone

    import dpcli.models

    cls = getattr(dpcli.models, name)
    clf = clone(cls(spec=str(project.spec), epsilon=1.0))
    x, y = _xy(600, seed=2)
    assert clf.fit(x, y) is clf
    assert clf.predict(x).shape == (600,) and set(clf.predict(x).tolist()) <= {0, 1}
    assert clf.predict_proba(x).shape == (600, 2)
    assert project.reserves()[-1]["epsilon"] == 1.0


def test_clone_pipeline_and_cross_validation_spend_once_per_fit(project: Project) -> None:
    sklearn = pytest.importorskip("sklearn")
    from sklearn.base import clone, is_classifier
    from sklearn.model_selection import cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    assert sklearn is not None
    clf = NaiveBayes(spec=str(project.spec), epsilon=0.3)
    twin = clone(clf)
    assert twin is not clf and twin.get_params() == clf.get_params()
    assert is_classifier(clf)
    x, y = _xy(600)
    # a preprocessing step that releases nothing: it picks declared columns by name
    pipe = make_pipeline(FunctionTransformer(lambda t: t[["age", "color"]]), clf)
    pipe.fit(x, y)
    assert pipe.predict(x).shape == (600,)
    assert project.reserves()[-1]["arguments"]["columns"] == ["age", "color"]
    scores = cross_val_score(NaiveBayes(spec=str(project.spec), epsilon=0.3), x, y, cv=3)
    assert scores.shape == (3,) and ((scores >= 0) & (scores <= 1)).all()
    assert len(project.reserves()) == 1 + 3          # each fold's fit is a run


def test_logistic_regression_fits_predicts_and_round_trips(project: Project, tmp_path) -> None:
    from dpcli.models import LogisticRegression

    x, y = _xy(800, seed=1)
    clf = LogisticRegression(spec=str(project.spec), epsilon=1.0).fit(x, y)
    assert clf.classes_.tolist() == [0, 1]
    proba = clf.predict_proba(x)
    assert proba.shape == (800, 2) and np.allclose(proba.sum(axis=1), 1)
    reserve = project.reserves()[-1]
    assert reserve["command"] == "validate" and reserve["arguments"]["columns"] == FEATURES
    model = dpcli.load_model(clf.save(tmp_path / "lr.json"))
    assert model.kind == "logistic_regression"
    assert np.array_equal(model.predict_proba(x), clf.predict_proba(x))
    assert model.predict(x).tolist() == clf.predict(x).tolist()   # ints: declared [0, 1]
