"""``dpcli select-features``: private feature selection."""

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
    number,
    spending_command,
)


@spending_command
def select_features(
    data: SourceArg,
    spec: SpecOpt,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Selection JSON to write (required unless --dry-run); "
        "trainers take it with --features.")] = None,
    score: Annotated[str | None, typer.Option(
        help="tc (total count), dc (difference count), pi (purity index), ig (information "
        "gain) — for words and binary columns — or chi2 (PrivPfC's Σ|o−e|, any column). "
        "Default: the spec's, else tc.")] = None,
    method: Annotated[str | None, typer.Option(
        help="threshold (sparse vector: scores above --threshold, at most --k), topk "
        "(exponential mechanism, --k rounds), perturb (noisy scores above --threshold "
        "and/or top --k) or cluster (k-means of noisy count vectors, clusters whose centre "
        "scores at least --threshold). Default: the spec's, else threshold.")] = None,
    threshold: Annotated[float | None, typer.Option(
        parser=number, help="τ, on the score's own scale (a row count for tc and dc).")] = None,
    k: Annotated[int | None, typer.Option(
        "--k", min=1, help="How many to select (topk, perturb), or the cap on how many "
        "(threshold).")] = None,
    r: Annotated[int | None, typer.Option(
        "--r", min=1, help="Words counted per row of a tokens column (the paper's sampling; "
        "default: the spec's select-features.r, else the column's max_per_row).")] = None,
    columns: Annotated[str | None, typer.Option(
        help="Comma-separated declared columns to score (default: the spec's, else every "
        "column the score applies to).")] = None,
    epsilon: EpsilonOpt = None,
    total_epsilon: Annotated[float | None, typer.Option(
        "--total-epsilon", parser=number,
        help="The ε for selection AND the training after it: the command "
        "spends the split rule's share (what the selection needs to resolve --min-effect, "
        "within 10-50 % of it) and prints the training share to pass to the trainer's "
        "--epsilon. Instead of --epsilon.")] = None,
    min_effect: Annotated[float | None, typer.Option(
        "--min-effect", parser=number,
        help="The smallest score gap that matters, per record: a share of n "
        "for tc, dc, pi and chi2 (default 0.05), nats for ig (default 0.01). A selection "
        "whose noise cannot resolve it is refused before any charge.")] = None,
    allow_noise: Annotated[bool, typer.Option(
        "--allow-noise", help="Select even when the noise exceeds --min-effect (a warning "
        "on stderr and in the output). Spec: allow_noise: true.")] = False,
    engine: EngineOpt = "local",
    opts: RunOptions = RunOptions(),
) -> None:
    """Select features privately: score each one against the label, then pick.

    Releases only WHICH features were selected (never a score). Candidates
    are the words of a tokens column's public vocabulary and binary columns
    (scores tc, dc, pi, ig), or whole columns (chi2; numeric columns in the
    spec's select-features.bins equal-width bins). The plan shows each
    score's sensitivity under replace-one and the noise before anything runs.
    Spend a small share of the budget here and train on the selection.

    Before any charge the selection's noise is compared with a meaningful score
    gap (--min-effect), from public facts only (n, ε, candidates, k, method):
    when the noise is larger it would select by noise, and the run is refused
    (exit 64, nothing charged) with the ε or n that would suffice; --allow-noise
    runs it anyway, with a warning. After the release, a selection whose noisy
    scores are indistinguishable from noise alone is flagged (stderr and the
    file's 'degeneracy'). With --total-epsilon the command takes the split
    rule's share of one total and prints the training share.

    Example:

        dpcli select-features sample_data/tweets_train.parquet --spec configs/tweets.yaml \\
            --out features.json --score tc --method perturb --threshold 50 --r 10 --epsilon 0.5
        dpcli train-nb sample_data/tweets_train.parquet --spec configs/tweets.yaml \\
            --features features.json --out nb.json --epsilon 1.5
        dpcli select-features sample_data/tweets_train.parquet --spec configs/tweets.yaml \\
            --total-epsilon 1 --dry-run      # prints both shares, charges nothing
    """
    from dpcli.api.select_features import select_features as run
    from dpcli.cli.spend import UIReporter, released, require_out
    from dpcli.spec import load_spec

    ui = opts.ui()
    require_out(out, opts.dry_run)
    result = run(load_spec(spec), data, out=out, score=score, method=method, threshold=threshold,
                 k=k, r=r, columns=columns, epsilon=epsilon, total_epsilon=total_epsilon,
                 min_effect=min_effect, allow_noise=allow_noise, seed=opts.seed, engine=engine,
                 dry_run=opts.dry_run, reporter=UIReporter(ui))
    done = released(ui, result)
    selection, d = done.value, done.details
    ui.say(f"selected {len(selection.selected):,} of {selection.candidates:,} candidates "
           f"({d['score']}, {d['method']}), wrote {out}, spent {done.plan.total} "
           f"(run {done.run_id[:8]})")
    if "split" in d:
        ui.say(f"train on it with --epsilon {d['split']['training']:g} (the rest of the "
               f"total {total_epsilon:g})")
    if opts.json:
        ui.emit_json({"command": "select-features", "dataset": done.envelope["dataset"],
                      "run_id": done.run_id, "selection": str(out), "score": d["score"],
                      "method": d["method"], "candidates": selection.candidates,
                      "selected": len(selection.selected), "spent": done.plan.total.to_json(),
                      **{k: v for k, v in d.items() if k not in ("score", "method")},
                      "breakdown": done.plan.to_json()})
