"""``dpcli evaluate``: a private confusion matrix, accuracy, precision and recall."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dpcli.cli.common import (
    DataArg,
    EpsilonOpt,
    RunOptions,
    SpecOpt,
    number,
    spending_command,
)
from dpcli.cli.roc_cmd import ModelOpt, ScoreColumnOpt, ScoreRangeOpt
from dpcli.cli.ui import UI

if TYPE_CHECKING:
    from dpcli.algorithms.evaluate import Evaluation


@spending_command
def evaluate(
    data: DataArg,
    spec: SpecOpt,
    model: ModelOpt = None,
    score_column: ScoreColumnOpt = None,
    score_range: ScoreRangeOpt = None,
    cutoff: Annotated[float | None, typer.Option(
        parser=number,
        help="With --score-column: predict the positive class when score > cutoff (default: "
        "the middle of the score range; a spec's cutoff is ignored with --model).")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", dir_okay=False, help="Also write the released evaluation as JSON.")] = None,
    epsilon: EpsilonOpt = None,
    opts: RunOptions = RunOptions(),
) -> None:
    """Evaluate a classifier privately: noisy confusion matrix, accuracy, precision, recall.

    Releases the confusion matrix (true × predicted class) with discrete
    Laplace noise (Δ = 2 under replace-one), made non-negative and summing to
    the test set's size; accuracy, precision, recall and F1 are computed from
    it. The noise's scale and standard deviation are reported with it. The
    column of a class the model can never predict (a grid whose every cell
    gives one class; a model on a small categorical domain, checked input by
    input; a cutoff at the score range's top) is released as exact zeros, and
    that class's precision as undefined. A test file that is, byte for byte,
    the one the model was trained on (or validate's validation file), as this
    dataset's ledger recorded it, is named on stderr before the charge (never
    in the output: it is a fact about the private rows): its accuracy
    overstates the model.

    Example:

        dpcli evaluate sample_data/adult_test.parquet --spec configs/adult.yaml \\
            --model models/nb.json --epsilon 0.2
    """
    from dpcli.api.evaluate import evaluate as run
    from dpcli.cli.spend import UIReporter, released
    from dpcli.spec import load_spec

    ui = opts.ui()
    result = run(load_spec(spec), data, model=model, score_column=score_column,
                 score_range=score_range, cutoff=cutoff, out=out, epsilon=epsilon, seed=opts.seed,
                 dry_run=opts.dry_run, reporter=UIReporter(ui))
    done = released(ui, result)
    if not opts.json:   # the release itself goes to stdout (`> result.txt`), even with -q
        _show(ui, done.value, done.payload.get("intervals"))
    ui.say(f"spent {done.plan.total} (run {done.run_id[:8]})"
           + (f"; wrote {out}" if out is not None else ""))
    if opts.json:
        ui.emit_json({"command": "evaluate", "dataset": done.envelope["dataset"],
                      "run_id": done.run_id, **done.payload,
                      "spent": done.plan.total.to_json()})


def _show(ui: UI, result: Evaluation, bars: dict[str, Any] | None) -> None:
    """The released matrix, then each metric with its interval (90 %, the noise only): one
    uncertainty per number, the same as the JSON's `intervals`."""
    from rich.table import Table

    table = Table(title="private confusion matrix (rows: true class, columns: predicted)",
                  title_justify="left")
    table.add_column("true \\ predicted")
    for c in result.classes:
        table.add_column(str(c), justify="right")
    for c, row in zip(result.classes, result.matrix, strict=True):
        table.add_row(str(c), *(f"{int(v):,}" for v in row))
    ui.result(table)
    if result.exact_zero:
        names = [repr(c) for c in result.never_predicted()]
        never, either = " and ".join(names), " or ".join(names)
        many = len(names) > 1
        ui.result(f"exact: the column{'s' if many else ''} of {never} {'are' if many else 'is'} "
                  f"0 without noise: the model predicts no input of the declared domain as "
                  f"{either} ({result.exact_why}); the other cells "
                  "carry the noise")
    bars = bars or {}
    level = f"{bars.get('level', 0.9):.0%}"

    def with_bar(value: float, bar: Any, digits: int) -> str:
        return (f"{value:.{digits}f}" if not bar else
                f"{value:.{digits}f} [{bar[0]:.{digits}f}, {bar[1]:.{digits}f}]")

    ui.result(f"accuracy {with_bar(result.accuracy, bars.get('accuracy'), 4)}; in brackets the "
              f"{level} interval from the noise (the test set's own sampling error is not "
              "included)")
    per_class = bars.get("per_class", {})
    unpredicted = set(result.never_predicted())
    for c, m in result.per_class().items():
        cb = per_class.get(str(c), {})
        parts = [f"{k} {with_bar(v, cb.get(k), 3)}" if v is not None else
                 f"{k} undefined (never predicted)" for k, v in m.items()
                 if k != "support" and (v is not None or (k == "precision" and c in unpredicted))]
        ui.result(f"  class {c}: " + ", ".join(parts))
