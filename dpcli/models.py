"""scikit-learn style estimators over dpcli's private learners, and released models.

>>> from dpcli.models import NaiveBayes                          # doctest: +SKIP
>>> clf = NaiveBayes(spec="configs/adult.yaml", epsilon=0.5)     # doctest: +SKIP
>>> clf.fit(X_train, y_train).predict(X_test)                    # doctest: +SKIP

Every ``fit`` is one spending run, charged to the spec's ledger exactly as the
CLI command is (the same reservation, the same entry): a 5-fold
``cross_val_score`` spends five times the estimator's ε. Budget for it, or
tune on public data. ``predict`` and ``predict_proba`` are post-processing of
the released model: free.

Estimators follow scikit-learn's conventions (keyword-only parameters stored
as given, ``get_params``/``set_params``, ``fit`` returns self, ``classes_``)
so ``sklearn.base.clone`` and ``Pipeline`` work; scikit-learn itself is
optional (``pip install 'dpcli[sklearn]'``): without it the estimators carry
their own ``get_params``/``set_params``.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import numpy as np

from dpcli.api.tables import check_declared, to_arrow, with_label
from dpcli.errors import UsageError

try:   # scikit-learn's bases when present: is_classifier, tags, HTML repr, scorers
    from sklearn.base import BaseEstimator as _Base
    from sklearn.base import ClassifierMixin as _Mixin
    _BASES: tuple[type, ...] = (_Mixin, _Base)
except ImportError:   # pragma: no cover - exercised where scikit-learn is not installed
    _BASES = ()


class ReleasedModel:
    """A released dpcli model (from a file or a fit): predictions on tables, for free.

    ``envelope`` is the released document (dataset, ε, δ, ledger run id,
    payload); ``classes_`` the label's declared classes in order.
    """

    def __init__(self, model: Any, envelope: dict[str, Any], label_type: Any = None) -> None:
        self.model = model
        self.envelope = envelope
        self._label_type = label_type

    def __repr__(self) -> str:
        return (f"ReleasedModel({self.kind!r}, dataset={self.envelope.get('dataset')!r}, "
                f"epsilon={self.envelope.get('epsilon')}, "
                f"run={str(self.envelope.get('ledger_run_id'))[:8]})")

    @property
    def kind(self) -> str:
        return str(self.envelope["kind"])

    @property
    def classes_(self) -> np.ndarray:
        """The declared classes, in the labels' own type when fit was given them, else in the
        type the spec declared them in (ints for classes [0, 1]: scorers compare like with
        like)."""
        classes = np.asarray(self.model.schema.label.classes)
        label_type = self._label_type
        if label_type is None and getattr(self.model.schema.label, "class_type", "") == "int":
            label_type = np.int64   # declared as integers in the spec ([0, 1])
        if label_type is not None:
            try:
                typed = classes.astype(label_type)
            except (TypeError, ValueError):
                return classes
            if [str(v) for v in typed.tolist()] == classes.tolist():
                return typed
        return classes

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.model.columns)

    def _encode(self, x: Any) -> Any:
        from dpcli.data.encode import BatchEncoder
        from dpcli.data.report import DataReport
        from dpcli.predict import _uncapped

        table = to_arrow(x, "X")
        check_declared(self.model.schema, table.column_names, "X")
        missing = [c for c in self.model.columns if c not in table.column_names]
        if missing:
            raise UsageError(f"X lacks the model's column(s) {', '.join(map(repr, missing))}")
        # tokens are read in full at prediction time (the per-row cap bounds a training
        # record), so the encoder's generator draws nothing that matters
        encoder = BatchEncoder(_uncapped(self.model.schema), self.model.columns,
                               report=DataReport(), rng=np.random.default_rng(0),
                               with_label=False)
        return encoder.encode(table)

    def predict_proba(self, x: Any) -> np.ndarray:
        """Each row's class probabilities, columns in the order of ``classes_``."""
        from dpcli.predict import classify

        proba, _ = classify(self.model, self._encode(x))
        return np.asarray(proba)

    def predict(self, x: Any) -> np.ndarray:
        """Each row's predicted class (the model's own decision rule: its released threshold
        when it has one, else the most probable class)."""
        from dpcli.predict import classify

        _, codes = classify(self.model, self._encode(x))
        return self.classes_[np.asarray(codes)]

    def save(self, path: str | Path) -> Path:
        """Write the released document (JSON) to ``path``; free, it is public."""
        from dpcli.io import Outputs, dumps_json

        out = Path(path)
        outputs = Outputs()
        outputs.check_writable(out)
        with outputs:
            outputs.write_text(out, dumps_json(self.envelope))
            outputs.commit()
        return out


def load_model(path: str | Path) -> ReleasedModel:
    """Any model file dpcli released (naive Bayes, logistic regression, brc, grid), checked
    in full; raises :class:`dpcli.errors.DataError` for a malformed or foreign file."""
    from dpcli.predict import load_model as load

    model, envelope = load(Path(path))
    return ReleasedModel(model, envelope)


class _Params:
    """get_params/set_params from the constructor's signature (what ``clone`` needs)."""

    @classmethod
    def _param_names(cls) -> list[str]:
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> Any:
        valid = self._param_names()
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"invalid parameter {name!r} for {type(self).__name__} "
                                 f"(valid: {', '.join(valid)})")
            setattr(self, name, value)
        return self


class _PrivateClassifier(_Params, *_BASES):  # type: ignore[misc]
    """Shared fit/predict: ``fit`` is one ledger run of the command in ``_command``."""

    _command = ""
    released_: ReleasedModel

    def _release(self, session: Any, table: Any, columns: list[str]) -> Any:
        raise NotImplementedError

    def fit(self, X: Any, y: Any = None) -> Any:
        """Train on ``X`` (a DataFrame or Arrow table of declared columns) and ``y``; charges
        this estimator's ε to the spec's ledger (one run, like the CLI command)."""
        from dpcli.session import Session

        session = Session(self.spec)
        table = with_label(session.spec.schema, X, y)
        label = session.spec.schema.label.column
        columns = [c for c in table.column_names if c != label]
        self._release(session, table, columns)
        done = session.releases[-1]
        label_type = table.column(label).to_numpy(zero_copy_only=False).dtype
        self.released_ = ReleasedModel(done.value, done.envelope, label_type)
        self.classes_ = self.released_.classes_
        self.n_features_in_ = len(columns)
        self.feature_names_in_ = np.asarray(columns, dtype=object)
        return self

    def _fitted(self) -> ReleasedModel:
        released = getattr(self, "released_", None)
        if released is None:
            raise UsageError(f"this {type(self).__name__} is not fitted yet: call fit first")
        return released

    def predict(self, X: Any) -> np.ndarray:
        return self._fitted().predict(X)

    def predict_proba(self, X: Any) -> np.ndarray:
        return self._fitted().predict_proba(X)

    def save(self, path: str | Path) -> Path:
        """Write the released model file (the same JSON the CLI writes)."""
        return self._fitted().save(path)


class NaiveBayes(_PrivateClassifier):
    """``dpcli train-nb`` as an estimator: the spec's ``train-nb`` section, these overrides.

    ``epsilon`` None takes the spec's section (which must then exist);
    ``method`` "global" or "smooth"; ``seed`` for tests only (a seeded run is
    marked in the ledger and its noise is reproducible by whoever holds the
    ledger key).
    """

    def __init__(self, *, spec: str | Path, epsilon: float | None = None,
                 method: str | None = None, r: int | None = None,
                 seed: int | None = None) -> None:
        self.spec = spec
        self.epsilon = epsilon
        self.method = method
        self.r = r
        self.seed = seed

    def _release(self, session: Any, table: Any, columns: list[str]) -> Any:
        return session.train_nb(table, epsilon=self.epsilon, method=self.method,
                                columns=columns, r=self.r, seed=self.seed)


class LogisticRegression(_PrivateClassifier):
    """``dpcli validate`` as an estimator: private L2 logistic regression whose regulariser
    (``lam``: "auto", "search" or a number) and class cut are chosen privately, within ε.

    Part of the rows the fit is given is held out for the λ search and the
    cut (``validate.validation_fraction`` of the spec), as the CLI does.
    """

    def __init__(self, *, spec: str | Path, epsilon: float | None = None,
                 lam: float | str | None = None, method: str | None = None,
                 score: str | None = None, trainer: str | None = None,
                 threshold_share: float | str | None = None, seed: int | None = None) -> None:
        self.spec = spec
        self.epsilon = epsilon
        self.lam = lam
        self.method = method
        self.score = score
        self.trainer = trainer
        self.threshold_share = threshold_share
        self.seed = seed

    def _release(self, session: Any, table: Any, columns: list[str]) -> Any:
        return session.validate(table, epsilon=self.epsilon, lam=self.lam, method=self.method,
                                score=self.score, trainer=self.trainer, columns=columns,
                                threshold_share=self.threshold_share, seed=self.seed)


class BoostedRandomClassifiers(_PrivateClassifier):
    """``dpcli train-brc`` as an estimator: boosted random hyperplanes (Shen et al.), the
    ensemble's weights released with noise; ``rounds`` a number or "auto"."""

    def __init__(self, *, spec: str | Path, epsilon: float | None = None,
                 rounds: int | str | None = None, c1: float | None = None,
                 c2: float | None = None, seed: int | None = None) -> None:
        self.spec = spec
        self.epsilon = epsilon
        self.rounds = rounds
        self.c1 = c1
        self.c2 = c2
        self.seed = seed

    def _release(self, session: Any, table: Any, columns: list[str]) -> Any:
        return session.train_brc(table, epsilon=self.epsilon, rounds=self.rounds, c1=self.c1,
                                 c2=self.c2, columns=columns, seed=self.seed)
