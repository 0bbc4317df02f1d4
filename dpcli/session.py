"""``dpcli.Session``: one dataset's spec, schema and ledger, and its commands as methods.

Every spending method is the CLI command of the same name, with the same
parameters and defaults (the spec's section, overridden by the keywords), the
same pre-checks and the same ledger entry. It returns the released object and
writes a file only when given ``out``. Talk goes nowhere; warnings (a
degenerate model, a seeded run) are Python warnings of
:class:`dpcli.api.report.DpcliWarning`.

>>> import dpcli
>>> session = dpcli.Session("configs/adult.yaml")       # doctest: +SKIP
>>> model = session.train_nb("sample_data/adult_train.parquet", epsilon=0.5)  # doctest: +SKIP
>>> session.spent()                                      # doctest: +SKIP
Budget(epsilon=0.5, delta=0)
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpcli.api.report import Reporter, Silent
from dpcli.api.result import Released
from dpcli.api.spend import DryRun
from dpcli.api.tables import Data, as_file
from dpcli.budget import Budget
from dpcli.errors import UsageError
from dpcli.spec import Spec

if TYPE_CHECKING:
    from dpcli.ledger import LedgerSummary


class Session:
    """A dataset under its spec: the budget, the ledger and every spending command."""

    def __init__(self, spec: str | Path | Spec, *, reporter: Reporter | None = None) -> None:
        from dpcli.spec import load_spec

        # a spec whose domains are still TODO opens (for schema_suggest and the ledger);
        # every other command refuses it, as the CLI does
        self._spec = spec if isinstance(spec, Spec) else load_spec(Path(spec), todo_domains=True)
        self.reporter = reporter or Silent()
        #: every release this session made, oldest first (envelope, plan, ledger run id)
        self.releases: list[Released] = []

    @property
    def spec(self) -> Spec:
        """The spec, every domain declared (a TODO left is refused here, naming it)."""
        if self._spec.todo:
            from dpcli.spec import load_spec

            return load_spec(self._spec.path)   # raises: names the TODO domains
        return self._spec

    def __repr__(self) -> str:
        return f"Session({str(self._spec.path)!r}, dataset={self._spec.dataset!r})"

    def _ledger(self) -> LedgerSummary:
        from dpcli.run import open_ledger

        return open_ledger(self._spec).summary(runs=False)

    def remaining(self) -> Budget:
        """What the ledger has left for this dataset (reads the ledger; costs nothing)."""
        return self._ledger().remaining

    def spent(self) -> Budget:
        """What the ledger has charged for this dataset so far, every run included."""
        return self._ledger().spent

    def plan(self, *, rows: int | None = None, data: str | Path | None = None,
             targets: Sequence[str] = (), test_rows: int | None = None) -> Any:
        """The spec's workload on ``rows`` records (or ``data``'s record count): each command's
        ε, steps, forecast and verdict, each target (``"roc.auc=0.005"``) solved for its ε
        (roc and evaluate on ``test_rows`` if given) —
        a :class:`dpcli.api.plan.Workload` (``.fits``, ``.to_json()``). Free: reads no value."""
        from dpcli.api.plan import Target, record_count, workload

        if (rows is None) == (data is None):
            raise UsageError("give rows= or data=, not both")
        n = rows if rows is not None else record_count(Path(data))  # type: ignore[arg-type]
        if isinstance(targets, str):
            targets = [targets]
        return workload(self.spec, n, targets=[Target.parse(t) for t in targets],
                        test_n=test_rows)

    def _keep(self, done: Released | DryRun) -> Any:
        if isinstance(done, DryRun):
            return done
        self.releases.append(done)
        return done.value

    def train_nb(self, data: Data, *, epsilon: float | None = None, method: str | None = None,
                 columns: Sequence[str] | None = None, features: Path | None = None,
                 r: int | None = None, out: Path | None = None, seed: int | None = None,
                 engine: str = "local", dry_run: bool = False) -> Any:
        """``dpcli train-nb``: release a naive Bayes model (:mod:`dpcli.api.train_nb`).

        Returns the model (or the :class:`~dpcli.api.spend.DryRun` with ``dry_run``).
        """
        from dpcli.api.train_nb import train_nb

        with as_file(data) as path:
            return self._keep(train_nb(self.spec, path, epsilon=epsilon, method=method,
                                       columns=columns, features=features, r=r,
                                       out=_path(out), seed=seed, engine=engine,
                                       dry_run=dry_run, reporter=self.reporter))

    def validate(self, data: Data, *, validation: Data | None = None, out: Path | None = None,
                 learner: str = "logreg", grid: Sequence[float] | None = None,
                 method: str | None = None, score: str | None = None,
                 trainer: str | None = None, delta: float | None = None,
                 columns: Sequence[str] | None = None, lam: float | str | None = None,
                 threshold_share: float | str | None = None, epsilon: float | None = None,
                 seed: int | None = None, dry_run: bool = False) -> Any:
        """``dpcli validate``: release a logistic regression model, λ and its class cut chosen
        privately (:mod:`dpcli.api.validate`). ``lam`` is the CLI's ``--lambda``."""
        from contextlib import nullcontext

        from dpcli.api.validate import validate

        with as_file(data) as path, (as_file(validation) if validation is not None
                                     else nullcontext(None)) as vpath:
            return self._keep(validate(
                self.spec, Path(path), validation=None if vpath is None else Path(vpath),
                out=_path(out), learner=learner, grid=grid, method=method, score=score,
                trainer=trainer, delta=delta, columns=columns, lam=lam,
                threshold_share=threshold_share, epsilon=epsilon, seed=seed, dry_run=dry_run,
                reporter=self.reporter))

    def train_brc(self, data: Data, *, out: Path | None = None, rounds: int | str | None = None,
                  c1: float | None = None, c2: float | None = None,
                  columns: Sequence[str] | None = None, epsilon: float | None = None,
                  seed: int | None = None, dry_run: bool = False) -> Any:
        """``dpcli train-brc``: release a boosted random-hyperplane ensemble
        (:mod:`dpcli.api.train_brc`)."""
        from dpcli.api.train_brc import train_brc

        with as_file(data) as path:
            return self._keep(train_brc(self.spec, Path(path), out=_path(out), rounds=rounds,
                                        c1=c1, c2=c2, columns=columns, epsilon=epsilon,
                                        seed=seed, dry_run=dry_run, reporter=self.reporter))

    def roc(self, data: Data, *, model: Any = None, out: Path | None = None,
            score_column: str | None = None, score_range: str | None = None,
            thresholds: str | None = None, k: int | None = None, alpha: float | None = None,
            counts: str | None = None, transform: str | None = None,
            auc_share: float | None = None, compare_true: bool = False,
            epsilon: float | None = None, seed: int | None = None,
            dry_run: bool = False) -> Any:
        """``dpcli roc``: release a private ROC curve and AUC (:mod:`dpcli.api.roc`).

        ``model`` is a model this session released, a
        :class:`~dpcli.models.ReleasedModel` or fitted estimator, or a model
        file. ``out`` (a folder) gets curve.csv, curve.json and curve.png.
        """
        from dpcli.api.roc import roc

        with as_file(data) as path, self._model_file(model) as model_path:
            return self._keep(roc(self.spec, Path(path), model=model_path, out=_path(out),
                                  score_column=score_column, score_range=score_range,
                                  thresholds=thresholds, k=k, alpha=alpha, counts=counts,
                                  transform=transform, auc_share=auc_share,
                                  compare_true=compare_true, epsilon=epsilon, seed=seed,
                                  dry_run=dry_run, reporter=self.reporter))

    def evaluate(self, data: Data, *, model: Any = None, score_column: str | None = None,
                 score_range: str | None = None, cutoff: float | None = None,
                 out: Path | None = None, epsilon: float | None = None,
                 seed: int | None = None, dry_run: bool = False) -> Any:
        """``dpcli evaluate``: release a noisy confusion matrix and its metrics
        (:mod:`dpcli.api.evaluate`); ``model`` as for :meth:`roc`."""
        from dpcli.api.evaluate import evaluate

        with as_file(data) as path, self._model_file(model) as model_path:
            return self._keep(evaluate(self.spec, Path(path), model=model_path,
                                       score_column=score_column, score_range=score_range,
                                       cutoff=cutoff, out=_path(out), epsilon=epsilon,
                                       seed=seed, dry_run=dry_run, reporter=self.reporter))

    def tabulate(self, data: Data, *, out: Path | None = None,
                 columns: Sequence[str] | None = None, bins: int | None = None,
                 epsilon: float | None = None, seed: int | None = None, engine: str = "local",
                 dry_run: bool = False) -> Any:
        """``dpcli tabulate``: release noisy per-class counts (:mod:`dpcli.api.tabulate`);
        returns the count rows."""
        from dpcli.api.tabulate import tabulate

        with as_file(data) as path:
            return self._keep(tabulate(self.spec, path, out=_path(out), columns=columns,
                                       bins=bins, epsilon=epsilon, seed=seed, engine=engine,
                                       dry_run=dry_run, reporter=self.reporter))

    def publish_grid(self, data: Data, *, out: Path | None = None,
                     columns: Sequence[str] | None = None, max_pool: int | None = None,
                     epsilon: float | None = None, seed: int | None = None,
                     engine: str = "local", dry_run: bool = False) -> Any:
        """``dpcli publish-grid``: release a grid synopsis (:mod:`dpcli.api.publish_grid`);
        returns the grid model (it predicts, and ``dpcli synthesize`` samples it)."""
        from dpcli.api.publish_grid import publish_grid

        with as_file(data) as path:
            return self._keep(publish_grid(self.spec, path, out=_path(out), columns=columns,
                                           max_pool=max_pool, epsilon=epsilon, seed=seed,
                                           engine=engine, dry_run=dry_run,
                                           reporter=self.reporter))

    def select_features(self, data: Data, *, out: Path | None = None,
                        score: str | None = None, method: str | None = None,
                        threshold: float | None = None, k: int | None = None,
                        r: int | None = None, columns: Sequence[str] | None = None,
                        epsilon: float | None = None, total_epsilon: float | None = None,
                        min_effect: float | None = None, allow_noise: bool = False,
                        seed: int | None = None, engine: str = "local",
                        dry_run: bool = False) -> Any:
        """``dpcli select-features``: release which features to train on
        (:mod:`dpcli.api.select_features`); returns the selection."""
        from dpcli.api.select_features import select_features

        with as_file(data) as path:
            return self._keep(select_features(
                self.spec, path, out=_path(out), score=score, method=method,
                threshold=threshold, k=k, r=r, columns=columns, epsilon=epsilon,
                total_epsilon=total_epsilon, min_effect=min_effect, allow_noise=allow_noise,
                seed=seed, engine=engine, dry_run=dry_run, reporter=self.reporter))

    def schema_suggest(self, data: Data, *, epsilon: float, out: Path | None = None,
                       columns: Sequence[str] | None = None, delta: float | None = None,
                       seed: int | None = None, dry_run: bool = False) -> Any:
        """``dpcli schema suggest``: private bounds and categories for the spec's TODO
        domains (:mod:`dpcli.api.schema_suggest`); returns column → suggestion."""
        from dpcli.api.schema_suggest import DEFAULT_DELTA, schema_suggest

        with as_file(data) as path:
            return self._keep(schema_suggest(
                self._spec, path, epsilon=epsilon, out=_path(out), columns=columns,
                delta=DEFAULT_DELTA if delta is None else delta, seed=seed, dry_run=dry_run,
                reporter=self.reporter))

    @contextmanager
    def _model_file(self, model: Any) -> Iterator[Path | None]:
        """A file for ``model``: a released model is public, so a temporary copy of its
        document is harmless (the commands read models from files, with their checks)."""
        if model is None or isinstance(model, (str, Path)):
            yield None if model is None else Path(model)
            return
        envelope = getattr(model, "envelope", None)   # ReleasedModel
        if envelope is None and hasattr(model, "released_"):   # a fitted estimator
            envelope = model.released_.envelope
        if envelope is None:
            envelope = next((r.envelope for r in reversed(self.releases) if r.value is model),
                            None)
        if envelope is None:
            raise UsageError("model: give a model this session released, a ReleasedModel, a "
                             "fitted dpcli estimator or a model file")
        from dpcli.io import dumps_json

        with tempfile.TemporaryDirectory(prefix="dpcli-model-") as folder:
            path = Path(folder) / "model.json"
            path.write_text(dumps_json(envelope), encoding="utf-8")
            yield path


def _path(out: str | Path | None) -> Path | None:
    return None if out is None else Path(out)
