"""``dpcli plan``: the spec's whole workload, its forecasts and the ε targets need (free)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dpcli.cli.common import JsonOpt, QuietOpt, SpecOpt, VerboseOpt, handle_errors
from dpcli.cli.ui import UI


@handle_errors
def plan(
    data_arg: Annotated[Path | None, typer.Argument(
        metavar="DATA", show_default=False,
        help="A data file whose record count is n, as the other commands take it (the same "
        "as --data).")] = None,
    spec: SpecOpt = ...,  # type: ignore[assignment]
    rows: Annotated[int | None, typer.Option(
        "--rows", min=1, help="The number of records n the runs will read (public under "
        "replace-one). Or give --data.")] = None,
    data: Annotated[Path | None, typer.Option(
        "--data", help="A data file whose record count is n: a Parquet file's metadata, or a "
        "CSV's records counted (no value is used).")] = None,
    test_rows: Annotated[int | None, typer.Option(
        "--test-rows", min=1, help="The test set's record count, for roc and evaluate (they "
        "score a released model on held-out rows). Default: the same n.")] = None,
    test_data: Annotated[Path | None, typer.Option(
        "--test-data", help="A test file whose record count is roc's and evaluate's n.")] = None,
    target: Annotated[list[str] | None, typer.Option(
        "--target", help="COMMAND.METRIC=VALUE: solve for the smallest ε whose forecast "
        "median error of METRIC is at most VALUE (repeatable), e.g. roc.auc=0.005.")] = None,
    write: Annotated[bool, typer.Option(
        "--write", help="Put the ε each --target needs into the spec's sections (the diff "
        "is shown first; comments and layout kept).")] = False,
    json: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Plan the spec's workload: each command's ε, sub-steps, forecast and verdict.

    Read-only and free: reads the spec, the ledger's totals and, with DATA,
    the record count — never a value — and charges nothing. For every spending
    command the spec has a section for: its ε, what it releases (its plan's
    steps; -v lists them), the forecast of its error at that ε (median and 90 %
    bound, docs/forecast.md) and the verdict. Each --target is solved for the
    smallest ε that meets it; the total of the workload (targets' ε in place
    of the spec's) is compared with what the ledger has left. roc and evaluate
    score a model on a test set: give its size with --test-rows or --test-data
    (default: the same n). Exit 0 when it fits, 3 when it does not (reported,
    never scaled down); a command that cannot run as the spec stands (a
    publish-grid section over a schema with no grid axis) is named, the others
    still planned, and the exit code is its error's. --json prints a list
    with one object per command (command, epsilon, n, forecast, verdict,
    steps), each with the same
    "workload" object: planned_epsilon (the total, targets' ε in place of the
    spec's), spec_epsilon, remaining, fits, unmet (targets no ε meets) and
    ledger (its path, or null before the first release).

    Example:

        dpcli plan --spec configs/adult.yaml --rows 30162 --test-rows 15060 --target roc.auc=0.005
        dpcli plan sample_data/adult_train.parquet --spec configs/adult.yaml
    """
    from dpcli.api.plan import Target, record_count, workload
    from dpcli.errors import UsageError
    from dpcli.spec import load_spec

    ui = UI(quiet=quiet, json=json)
    if data_arg is not None and data is not None:
        raise UsageError("give the data file once: as DATA or with --data")
    data = data_arg if data_arg is not None else data
    if (rows is None) == (data is None):
        raise UsageError("give the record count with --rows N, or a data file with --data "
                         "FILE (not both)")
    targets = [Target.parse(t) for t in target or []]
    if write and not targets:
        raise UsageError("--write puts the ε of each --target into the spec: give a --target")
    s = load_spec(spec)
    if test_rows is not None and test_data is not None:
        raise UsageError("give the test set's record count with --test-rows N or "
                         "--test-data FILE, not both")
    n = rows if rows is not None else record_count(data)  # type: ignore[arg-type]
    source = "--rows" if rows is not None else f"{data}'s record count"
    test_n = test_rows if test_data is None else record_count(test_data)
    if test_n is not None:
        source += f"; roc and evaluate on {test_n:,}"
    w = workload(s, n, targets=targets, n_source=source, test_n=test_n)
    if json:
        ui.emit_json(w.to_json())
    else:
        for line in _lines(w, verbose):
            ui.result(line)
    if w.problem is not None:   # every other command was planned and shown above
        for item in w.items:
            if item.problem is not None:
                ui.error(item.problem[0])
        raise typer.Exit(w.problem[1])
    if write:
        _write(ui, s.path, w)
    raise typer.Exit(0 if w.fits else 3)


def _lines(w: object, verbose: bool) -> list[str]:
    from dpcli.api.plan import Workload
    from dpcli.budget import format_amount
    from dpcli.cli.spend import numbered_runs

    assert isinstance(w, Workload)
    out = [f"workload for dataset {w.dataset} on n = {w.n:,} records (from {w.n_source}):"]
    width = max(len(i.command) for i in w.items)
    for item in w.items:
        count = 0 if item.plan is None else len(item.plan)
        steps = f"{count} step{'s' if count != 1 else ''}"
        head = f"  {item.command:<{width}}  ε {format_amount(item.epsilon):<6} {steps:>9}"
        fc = item.forecast
        if item.problem is not None:
            out.append(f"{head}  cannot run as the spec stands (below)")
        elif fc is None:
            out.append(f"{head}  (no forecast)")
        else:
            metric = fc.metrics[fc.verdict.metric]
            verdict = fc.verdict.line().removeprefix("verdict: ")
            out.append(f"{head}  {metric.line()} — {verdict}")
            if verbose:
                out += [f"      {name}: {m.line()}" for name, m in fc.metrics.items()
                        if name != fc.verdict.metric]
                out.append(f"      forecast by {fc.method}")
        if verbose and item.plan is not None:
            out += [f"      step {name}: {step.mechanism}, ε {format_amount(step.budget.epsilon)}"
                    for name, step in numbered_runs(item.plan)]
        for solved in item.solved:
            t = solved.target
            answer = ("no ε up to 1000 meets it at this n" if solved.epsilon is None
                      else f"needs ε ≥ {format_amount(solved.epsilon)}")
            what = (item.forecast.metrics[t.metric].what if item.forecast is not None
                    else t.metric)
            out.append(f"      target {t.metric} ({what}) median ≤ {t.value:g}: {answer} "
                       f"(the spec gives {format_amount(item.epsilon)})")
    spent = w.total_budget - w.remaining
    out.append(f"total: spec ε {format_amount(w.spec_total)}"
               + (f", with the targets' ε {format_amount(w.planned_total)}"
                  if any(i.solved for i in w.items) else "")
               + (f"; the ledger has {format_amount(w.remaining.epsilon)} left of "
                  f"{format_amount(w.total_budget.epsilon)} (spent {format_amount(spent.epsilon)})"
                  if w.ledger else f"; no ledger yet: the spec's budget of "
                  f"{format_amount(w.total_budget.epsilon)} is all there is"))
    if w.problem is not None:
        out.append("cannot run as the spec stands: " + ", ".join(
            i.command for i in w.items if i.problem is not None) + " (the errors below)")
    elif w.unsolved:
        out.append("does NOT fit: " + ", ".join(str(s.target) for s in w.unsolved)
                   + " cannot be met at this n")
    elif w.fits:
        out.append("fits")
    else:
        out.append(f"does NOT fit: short by ε "
                   f"{format_amount(w.planned_total - w.remaining.epsilon)}")
    return out


def _write(ui: UI, path: Path, w: object) -> None:
    import difflib

    from dpcli.api.plan import Workload, with_epsilons
    from dpcli.io import Outputs

    assert isinstance(w, Workload)
    if w.unsolved:
        ui.warn("the spec is left unchanged: a target cannot be met at this n")
        return
    if not w.fits:   # a spec that asks for more than the ledger has left is not written
        ui.warn("the spec is left unchanged: the planned workload does not fit in what the "
                "ledger has left")
        return
    import os
    import stat

    mode = stat.S_IMODE(path.stat().st_mode)
    if not mode & stat.S_IWUSR:
        from dpcli.errors import UsageError

        raise UsageError(f"--write: {path} is read-only (mode {mode:o}); make it writable to "
                         "let dpcli plan edit it")
    epsilons = {i.command: i.planned for i in w.items if i.solved}
    text = path.read_text(encoding="utf-8")
    new = with_epsilons(text, epsilons)
    if new == text:
        ui.say(f"{path}: already holds these ε values; unchanged")
        return
    for line in difflib.unified_diff(text.splitlines(), new.splitlines(), str(path),
                                     f"{path} (planned)", lineterm=""):
        ui.say(line, markup=False)
    from dpcli import signals
    from dpcli.spec import load_spec

    with Outputs() as outputs:
        staged = outputs.stage(path)
        staged.write_text(new, encoding="utf-8")
        load_spec(staged)   # the edited spec must still be valid before it replaces the old
        outputs.commit()
    os.chmod(path, mode)   # the spec keeps its permissions
    signals.deliver()
    ui.say(f"wrote the planned ε into {path}")
