"""``dpcli ledger show|verify``: read the budget and check the audit log's hash chain."""

from __future__ import annotations

import typer

from dpcli.cli.common import JsonOpt, QuietOpt, SpecOpt, VerboseOpt, handle_errors
from dpcli.cli.ui import UI

app = typer.Typer(help="Read the privacy budget and audit log of a dataset.", no_args_is_help=True)


@app.command("init")
@handle_errors
def init(spec: SpecOpt, json: JsonOpt = False, quiet: QuietOpt = False,
         verbose: VerboseOpt = False) -> None:
    """Create the dataset's ledger (once, before its first release).

    Spending commands refuse to run without a ledger, so that a moved spec
    or a deleted log can never silently reset a budget. Also creates the
    secret key (ledger path + '.key', readable only by you) used to digest
    input files in the log. Running it again changes nothing.

    Example:

        dpcli ledger init --spec configs/adult.yaml
    """
    from dpcli.ledger import init_ledger, key_path
    from dpcli.spec import load_spec

    ui = UI(quiet=quiet, json=json)
    s = load_spec(spec)
    created = init_ledger(s.ledger_path)
    if json:
        ui.emit_json({"ledger": str(s.ledger_path), "created": created,
                      "key": str(key_path(s.ledger_path))})
    if created:
        ui.say(f"created ledger {s.ledger_path} for dataset {s.dataset} "
               f"(total {s.budget}); keep {key_path(s.ledger_path)} private")
    else:
        ui.say(f"ledger {s.ledger_path} already exists; nothing changed")


@app.command("show")
@handle_errors
def show(spec: SpecOpt, json: JsonOpt = False, quiet: QuietOpt = False,
         verbose: VerboseOpt = False) -> None:
    """Show the dataset's budget (total, spent, remaining) and one row per run.

    Runs that reserved budget but never finished (killed, crashed) show as
    'interrupted': their charge stays.

    Example:

        dpcli ledger show --spec configs/adult.yaml
    """
    from rich.table import Table

    from dpcli.budget import format_amount
    from dpcli.run import open_ledger
    from dpcli.spec import load_spec

    ui = UI(quiet=quiet, json=json)
    s = load_spec(spec)
    summary = open_ledger(s).summary()
    if json:
        ui.emit_json({
            "dataset": s.dataset, "ledger": str(s.ledger_path),
            "total": summary.total.to_json(), "spent": summary.spent.to_json(),
            "remaining": summary.remaining.to_json(),
            "runs": [{"run_id": r.run_id, "time": r.time, "command": r.command,
                      "epsilon": float(r.epsilon), "delta": float(r.delta), "status": r.status,
                      "seeded": r.seeded, "neighbouring": r.neighbouring,
                      "outputs": r.outputs} for r in summary.runs],
        })
        return
    use_delta = bool(summary.total.delta)
    table = Table(title=f"dataset {s.dataset} — ledger {s.ledger_path}", title_justify="left")
    for col in ("time (UTC)", "run", "command", "ε", *(["δ"] if use_delta else []),
                "status", "seeded"):
        table.add_column(col, justify="right" if col in ("ε", "δ") else "left")
    for r in summary.runs:
        when = r.time[:19].replace("T", " ")
        table.add_row(when, r.run_id[:8], r.command, format_amount(r.epsilon),
                      *([format_amount(r.delta)] if use_delta else []), r.status,
                      "yes" if r.seeded else "")
    if summary.runs:
        ui.show(table)
    else:
        ui.say(f"dataset {s.dataset}: no runs recorded yet in {s.ledger_path}", markup=False)
    _relaxed_runs(ui, summary.runs)
    ui.show(f"total {summary.total}   spent {summary.spent}   "
            f"remaining {summary.remaining}   runs {len(summary.runs)}")


def _relaxed_runs(ui: UI, runs: list) -> None:
    """Name the runs whose ε holds under a weaker relation than replace-one (train-brc with
    public columns): the total above adds their ε to the others'."""
    from dpcli import NEIGHBOURING_RELATION

    for r in runs:
        if r.neighbouring != NEIGHBOURING_RELATION:
            ui.say(f"note: run {r.run_id[:8]} ({r.command}) holds under '{r.neighbouring}': its "
                   "ε does not protect those public values, which it may release exactly",
                   markup=False)


@app.command("verify")
@handle_errors
def verify(spec: SpecOpt, json: JsonOpt = False, quiet: QuietOpt = False,
           verbose: VerboseOpt = False) -> None:
    """Check the ledger's hash chain; exit 2 if any entry was edited or removed.

    Prints the head hash: record it elsewhere (a ticket, a model card) to
    detect a later truncation of the log's tail, which a chain alone cannot.

    Example:

        dpcli ledger verify --spec configs/adult.yaml && echo intact
    """
    from dpcli.errors import LedgerError
    from dpcli.run import open_ledger
    from dpcli.spec import load_spec

    ui = UI(quiet=quiet, json=json)
    s = load_spec(spec)
    report = open_ledger(s).verify()
    if json:
        ui.emit_json({"ledger": str(s.ledger_path), "ok": report.ok, "entries": report.entries,
                      "head": report.head, "problems": report.problems})
    if not report.ok:
        for problem in report.problems:
            ui.say(f"  {problem}", markup=False)
        raise LedgerError(f"{s.ledger_path}: verification failed "
                          f"({len(report.problems)} problem(s))")
    ui.say(f"ok: {report.entries} entries, hash chain intact, head {report.head}")
