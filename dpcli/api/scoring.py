"""Where an evaluation's per-record scores come from: a released model or a score column."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dpcli.data.encode import EncodedBatch
from dpcli.errors import UsageError
from dpcli.spec import Spec

if TYPE_CHECKING:
    from dpcli.algorithms.predictable import Predictable


@dataclass(frozen=True)
class ScoreInput:
    """The spec to read the test file with, the columns to read and how to score a batch."""

    spec: Spec
    columns: tuple[str, ...]
    lower: float
    upper: float
    model: Any = None  # a dpcli model, or None for a score column
    score_column: str | None = None
    source_note: dict[str, Any] = field(default_factory=dict)  # for the ledger and outputs
    #: what the model's own envelope says against using it (its degeneracy, a verdict that
    #: was not usable), as recorded at its release: carried into the outputs (io.envelope_
    #: cautions), so a degenerate model's evaluation or curve is never silent
    model_cautions: tuple[str, ...] = ()

    @property
    def classes(self) -> tuple[str, ...]:
        return tuple(self.spec.schema.label.classes)

    @property
    def positive(self) -> int:
        """The positive class's code: the declared one, else the second class."""
        index = self.spec.schema.label.positive_index
        return 1 if index is None else index

    def require_binary(self, what: str) -> None:
        if len(self.classes) != 2:
            raise UsageError(f"{what} needs a binary label; {self.spec.path} declares "
                             f"{len(self.classes)} classes")

    def scores(self, batch: EncodedBatch) -> np.ndarray:
        """The positive class's score of every record (private)."""
        if self.model is not None:
            return np.asarray(self.model.predict_proba(batch)[:, self.positive], dtype=np.float64)
        assert self.score_column is not None
        return np.asarray(batch.columns[self.score_column], dtype=np.float64)

    def predictable(self, cutoff: float | None) -> Predictable | None:
        """The classes this model (or score > ``cutoff``) can predict over the declared domain,
        where that is exact (:mod:`dpcli.algorithms.predictable`), else None. Public inputs
        only: the model, the spec's domains, the declared score range."""
        from dpcli.algorithms import predictable

        if self.model is not None:
            return predictable.of_model(self.model)
        assert cutoff is not None
        return predictable.of_cutoff(self.positive, self.upper, cutoff)

    def predictions(self, batch: EncodedBatch, cutoff: float | None) -> np.ndarray:
        """Predicted class codes: the model's (see predict.classify), or score > cutoff."""
        if self.model is not None:
            from dpcli.predict import classify

            return np.asarray(classify(self.model, batch)[1], dtype=np.int64)
        assert cutoff is not None
        return np.where(self.scores(batch) > cutoff, self.positive, 1 - self.positive)


def parse_range(text: str | None) -> tuple[float, float] | None:
    """--score-range LOWER,UPPER, checked by its one declaration (:func:`dpcli.params.
    score_range`): a usage error naming the option."""
    from dpcli import params

    return None if text is None else params.score_range(text, params.Option("--score-range"))


def score_input(spec: Spec, section: Any, model: Path | None, score_column: str | None,
                score_range: str | None) -> ScoreInput:
    """Resolve the scores to evaluate before anything is charged.

    ``--model`` wins over a score column named in the spec's ``section``; on
    the command line, --model and --score-column exclude each other. A score
    column's range comes from --score-range, else the section, else a
    numeric column of that name in the schema.
    """
    if model is None:
        return _resolve(spec, None, section.score_column, section.score_range)
    return _resolve(spec, model, score_column, parse_range(score_range))


def model_run(spec: Spec, si: ScoreInput) -> Any:
    """The model's completed run in this dataset's ledger (a RunView), or None: a score
    column, a model of another dataset or ledger, a run not complete. Reads the ledger."""
    from dpcli.api.spend import recorded_runs

    run_id = si.source_note.get("model_run_id")
    path = si.source_note.get("model")
    if si.model is None or not isinstance(run_id, str) or not isinstance(path, str):
        return None
    if not Path(path).is_file():
        return None
    run = next((r for r in recorded_runs(spec) if r.run_id == run_id), None)
    return None if run is None or run.status != "complete" or not run.outputs else run


def model_caution(si: ScoreInput, run: Any) -> dict[str, str]:
    """``{"model_caution": …}`` when the model file is not the one its ledger ``run``
    released: the ledger records the SHA-256 of every output, and a model whose bytes match
    none of its run's outputs was edited (or replaced) since: the scores it gives are not
    the release's. Reads only the model file."""
    from dpcli.fingerprint import file_digest

    if run is None:
        return {}
    path = si.source_note["model"]
    if file_digest(Path(path)) in {o.get("sha256") for o in run.outputs}:
        return {}
    return {"model_caution": (
        f"{path}: is not the model ledger run {run.run_id[:8]} ({run.command}) released: its "
        "bytes match none of the run's recorded outputs (edited or replaced since?). The "
        "scores evaluated are this file's, not the release's")}


def warn_training_file(reporter: Any, spec: Spec, run: Any, data: Path | str) -> None:
    """Say on stderr when ``data`` is, byte for byte, the file the model's ledger ``run``
    trained on, or validate's validation file: scores on rows the model fitted overstate
    how it does on new rows. Compared by the keyed digests the ledger records (a copy under
    another name is the same data; a reordered or larger file is not detected).

    For the custodian only, never in an output: whether the test file equals the training
    file is a fact about the private rows (replacing one test record changes it), not a
    release. Reads ``data``'s bytes for the digest the run's own ledger entry needs anyway
    (call after :meth:`Spend.prepare`, which starts it beside the record count)."""
    from dpcli.data.location import is_remote
    from dpcli.fingerprint import input_digest

    if run is None or not run.input_digests or is_remote(data):
        return
    digest = input_digest(spec.ledger_path, data)
    if digest not in run.input_digests:
        return
    role = ("trained on" if digest == run.input_digests[0]
            else "chose its regulariser on (its validation file)")
    # say, not warn: a warning is repeated in the --json line, which may leave the custodian
    reporter.say(f"caution: {data}: is the file ledger run {run.run_id[:8]} "
                 f"({run.command}) {role}, byte for byte: measured on rows the model has "
                 "seen, its accuracy and AUC overstate how it does on new rows. Evaluate on "
                 "rows it did not see (a held-out split)")


def ledger_cautions(reporter: Any, spec: Spec, si: ScoreInput) -> tuple[Any, dict[str, str]]:
    """The model's run in this dataset's ledger (for :func:`warn_training_file`) and the
    payload's ``model_caution`` when the model file was edited since (said on stderr)."""
    run = model_run(spec, si)
    found = model_caution(si, run)
    for said in found.values():
        reporter.warn(said)
    return run, found


def warn_model_cautions(reporter: Any, si: ScoreInput) -> dict[str, Any]:
    """Say the model's own cautions before the charge (the user may stop there) and return
    them for the output's payload (``model_cautions``): reads only the model file."""
    for caution in si.model_cautions:
        reporter.warn(f"{si.source_note.get('model')}: {caution}")
    return {"model_cautions": list(si.model_cautions)} if si.model_cautions else {}


def fold_scores(ui: Any, source: Any, si: ScoreInput, fn: Callable[[EncodedBatch], np.ndarray],
                add: Callable[[np.ndarray, np.ndarray], None], rng: np.random.Generator) -> int:
    """The run's one pass: ``add(fn(batch), labels)`` per batch; returns n (call once charged).

    Nothing per record outlives its batch: ``add`` folds it into bounded
    statistics. Raises DataError when the file holds no rows.
    """
    from dpcli.predict import fold

    with ui.progress("scoring", source.num_rows_hint()) as advance:
        return fold(source, si.columns, fn, add, rng=rng, progress=advance)


def _resolve(spec: Spec, model: Path | None, score_column: str | None,
             score_range: tuple[float, float] | None) -> ScoreInput:
    from dpcli.data.schema import NumericColumn
    from dpcli.predict import labelled_schema, load_model, model_file, score_schema

    if model is None and score_column is None:
        raise UsageError("give the scores to evaluate: --model FILE (a model dpcli wrote) or "
                         "--score-column COLUMN with --score-range LOW,HIGH")
    if model is not None and score_column is not None:
        raise UsageError("give --model or --score-column, not both")
    if model is not None:
        if score_range is not None:
            raise UsageError("--score-range applies to --score-column; a model's scores are "
                             "probabilities in [0, 1]")
        model = model_file(model)   # a publish-grid folder: its grid.json, as predict reads
        m, env = load_model(model)
        schema = labelled_schema(m, spec.schema, model)
        from dpcli.io import envelope_cautions

        note = {"model": str(model.resolve()), "model_kind": env["kind"],
                "model_run_id": env.get("ledger_run_id")}
        return ScoreInput(spec=replace(spec, schema=schema), columns=tuple(m.columns),
                          lower=0.0, upper=1.0, model=m, source_note=note,
                          model_cautions=tuple(envelope_cautions(env)))
    assert score_column is not None
    if score_range is None:
        declared = spec.schema.column(score_column) if spec.schema.has(score_column) else None
        if not isinstance(declared, NumericColumn):
            raise UsageError(f"--score-column {score_column!r}: declare its range with "
                             "--score-range LOWER,UPPER (or score_range in the spec's section, "
                             "or a numeric column of that name in the schema)")
        score_range = (declared.lower, declared.upper)
    lower, upper = score_range
    schema = score_schema(spec.schema, score_column, lower, upper)
    return ScoreInput(spec=replace(spec, schema=schema), columns=(score_column,), lower=lower,
                      upper=upper, score_column=score_column,
                      source_note={"score_column": score_column, "score_range": [lower, upper]})
