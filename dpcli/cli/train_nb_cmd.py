"""``dpcli train-nb``: differentially private naive Bayes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dpcli.cli.common import (
    EngineOpt,
    EpsilonOpt,
    RunOptions,
    SourceArg,
    SpecOpt,
    spending_command,
)


@spending_command
def train_nb(
    data: SourceArg,
    spec: SpecOpt,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Model JSON to write (required unless --dry-run).")] = None,
    method: Annotated[str | None, typer.Option(
        help="global (per-class sums with global sensitivity; default) or smooth "
        "(smooth sensitivity of trimmed means and variances, Zafarani & Clifton).")] = None,
    columns: Annotated[str | None, typer.Option(
        help="Comma-separated declared columns to use (default: the spec's "
        "'train-nb.columns', else every declared column).")] = None,
    features: Annotated[Path | None, typer.Option(
        "--features", dir_okay=False, help="A select-features output: train on the selected "
        "columns and words only (instead of --columns).")] = None,
    r: Annotated[int | None, typer.Option(
        "--r", min=1, help="Words counted per row of each tokens column (default: the spec's "
        "train-nb.r, else the column's max_per_row). Fewer words, less noise per count.")] = None,
    epsilon: EpsilonOpt = None,
    engine: EngineOpt = "local",
    opts: RunOptions = RunOptions(),
) -> None:
    """Train a differentially private naive Bayes classifier.

    Releases noisy class counts, per-class count tables of categorical,
    binary and token columns (discrete Laplace), and per-class means and
    variances of numeric columns (global sensitivity of per-class sums, or
    smooth sensitivity of the trimmed sample with heavy-tailed noise), and for a
    binary label a decision threshold (exponential mechanism, balanced accuracy).
    The ε split is a rule of public facts (n, ε, declared domains: ε_i ∝
    c_i^(2/3), docs/algorithms/naive-bayes.md; the spec's train-nb.split overrides it); the
    plan shows every share before anything runs. A binary column one of whose
    values cannot be told from zero in the released counts, or a categorical
    column mostly at 'other', is named on stderr and in the model file
    (column_cautions): the file may spell its values otherwise ('Male' for
    'male'; a binary column reads an undeclared value as its first).

    Example:

        dpcli train-nb sample_data/adult_train.parquet --spec configs/adult.yaml \\
            --out models/nb.json --epsilon 1.0

    With a selection made by select-features (its ε was spent there):

        dpcli train-nb sample_data/tweets_train.parquet --spec configs/tweets.yaml \\
            --features features.json --out nb.json --epsilon 1.5
    """
    from dpcli.api.train_nb import train_nb as run
    from dpcli.cli.spend import UIReporter, released, require_out
    from dpcli.spec import load_spec

    ui = opts.ui()
    require_out(out, opts.dry_run)
    result = run(load_spec(spec), data, epsilon=epsilon, method=method, columns=columns,
                 features=features, r=r, out=out, seed=opts.seed, engine=engine,
                 dry_run=opts.dry_run, reporter=UIReporter(ui))
    done = released(ui, result)
    method_used = done.summary["method"]
    ui.say(f"trained naive Bayes ({method_used}) on {done.summary['columns']} columns, wrote "
           f"{out}, spent {done.plan.total} (run {done.run_id[:8]})")
    if opts.json:
        ui.emit_json({"command": "train-nb", "dataset": done.envelope["dataset"],
                      "run_id": done.run_id, "model": str(out), "method": method_used,
                      "spent": done.plan.total.to_json(), "breakdown": done.plan.to_json()})
