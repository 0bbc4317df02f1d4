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

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dpcli.api.report import Reporter, Silent
from dpcli.api.result import Released
from dpcli.api.spend import DryRun
from dpcli.api.tables import Data, as_file
from dpcli.budget import Budget
from dpcli.spec import Spec


class Session:
    """A dataset under its spec: the budget, the ledger and every spending command."""

    def __init__(self, spec: str | Path | Spec, *, reporter: Reporter | None = None) -> None:
        from dpcli.spec import load_spec

        self.spec = spec if isinstance(spec, Spec) else load_spec(Path(spec))
        self.reporter = reporter or Silent()
        #: every release this session made, oldest first (envelope, plan, ledger run id)
        self.releases: list[Released] = []

    def __repr__(self) -> str:
        return f"Session({str(self.spec.path)!r}, dataset={self.spec.dataset!r})"

    def _ledger(self) -> Any:
        from dpcli.run import open_ledger

        return open_ledger(self.spec).summary(runs=False)

    def remaining(self) -> Budget:
        """What the ledger has left for this dataset (reads the ledger; costs nothing)."""
        return self._ledger().remaining  # type: ignore[no-any-return]

    def spent(self) -> Budget:
        """What the ledger has charged for this dataset so far, every run included."""
        return self._ledger().spent  # type: ignore[no-any-return]

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


def _path(out: str | Path | None) -> Path | None:
    return None if out is None else Path(out)
