"""``dpcli ledger init|show|verify|raise|repair``: the budget, its audit log and its care."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any

import typer

from dpcli.cli.common import (
    JsonOpt,
    QuietOpt,
    SpecOpt,
    VerboseOpt,
    handle_errors,
    number,
)
from dpcli.cli.ui import UI

app = typer.Typer(help="The privacy budget and audit log of a dataset: init, show, verify, "
                  "raise, repair.", no_args_is_help=True)


@app.command("init")
@handle_errors
def init(spec: SpecOpt, json: JsonOpt = False, quiet: QuietOpt = False,
         verbose: VerboseOpt = False) -> None:
    """Record the dataset's genesis (once, before its first release).

    Writes a genesis entry: the dataset id, its total ε and δ from the spec,
    and the fingerprint of the ledger's key. Creates the ledger, its secret
    key (ledger path + '.key', readable only by you) and its keyed checkpoint
    ('.head') if they do not exist; several datasets may share one ledger.
    Spending commands refuse a dataset without a genesis, so a moved spec, a
    renamed dataset id or a deleted log never silently starts a fresh budget.

    Refuses (exit 76): a dataset that already has its genesis; a key or
    checkpoint whose ledger is gone (restore it). A ledger written by an
    earlier dpcli (no genesis entries) is upgraded: its runs are verified and
    kept, and the genesis must declare the total they recorded.

    Example:

        dpcli ledger init --spec configs/adult.yaml
    """
    from dpcli.ledger import init_ledger, key_path, read_entries
    from dpcli.spec import load_spec

    ui = UI(quiet=quiet, json=json)
    s = load_spec(spec, todo_domains=True)
    outcome = init_ledger(s.ledger_path, s.dataset, s.budget)
    others = sorted({e["dataset"] for e in read_entries(s.ledger_path)
                     if e["kind"] == "genesis" and e["dataset"] != s.dataset})
    if others:
        # a renamed id plus init is a fresh budget: right for new data, wrong for the same data
        ui.warn(f"{s.ledger_path} already holds dataset(s) {', '.join(others)}; {s.dataset!r} "
                "now has a budget of its own. If it is data already released under one of "
                "those ids, that is a fresh budget for the same people: keep the old id in the "
                "spec instead")
    if json:
        ui.emit_json({"ledger": str(s.ledger_path), "dataset": s.dataset, "outcome": outcome,
                      "created": outcome == "created", "key": str(key_path(s.ledger_path))})
    what = {"created": "created ledger", "added": "added to ledger",
            "upgraded": "upgraded ledger (earlier runs kept)"}[outcome]
    ui.say(f"{what} {s.ledger_path}: genesis of dataset {s.dataset} (total {s.budget}); "
           f"keep {key_path(s.ledger_path)} private", markup=False)


@app.command("show")
@handle_errors
def show(spec: SpecOpt, json: JsonOpt = False, quiet: QuietOpt = False,
         verbose: VerboseOpt = False) -> None:
    """Show the dataset's budget (total, spent, remaining) and one row per run, on stdout.

    Runs that reserved budget but never finished (killed, crashed) show as
    'interrupted': their charge stays; a run still in progress shows as 'running'.
    'aborted' runs stopped on a bad value before releasing anything: their charge
    was given back.

    Example:

        dpcli ledger show --spec configs/adult.yaml
    """
    from rich.table import Table

    from dpcli.budget import format_amount
    from dpcli.run import open_ledger
    from dpcli.spec import load_spec

    ui = UI(quiet=quiet, json=json)
    s = load_spec(spec, todo_domains=True)
    summary = open_ledger(s).summary()
    if summary.relocated:
        from dpcli.ledger import moved_message

        ui.warn(moved_message(s.ledger_path))
    if json:
        ui.emit_json({
            "dataset": s.dataset, "ledger": str(s.ledger_path),
            "total": summary.total.to_json(), "spent": summary.spent.to_json(),
            "remaining": summary.remaining.to_json(),
            "runs": [{"run_id": r.run_id, "time": r.time, "command": r.command,
                      "epsilon": float(r.epsilon), "delta": float(r.delta), "status": r.status,
                      "seeded": r.seeded, "neighbouring": r.neighbouring,
                      "outputs": r.outputs} for r in summary.runs],
            "repairs": _repairs(summary.repairs, s.dataset),
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
        ui.result(table)
    else:
        ui.result(f"dataset {s.dataset}: no runs recorded yet in {s.ledger_path}")
    _relaxed_runs(ui, summary.runs)
    _say_repairs(ui, _repairs(summary.repairs, s.dataset))
    ui.result(f"total {summary.total}   spent {summary.spent}   "
              f"remaining {summary.remaining}   runs {len(summary.runs)}")


def _repairs(entries: Iterable[dict[str, Any]], dataset: str) -> list[dict[str, Any]]:
    """The dataset's recorded repairs (time, what was done), oldest first, from the repair
    entries the command's one read of the ledger collected (summary or verification)."""
    out = []
    for e in entries:
        moved = e.get("moved")
        # a --moved repair adopts the file for every dataset in it: listed for each
        if e.get("kind") != "repair" or (e.get("dataset") != dataset and not moved):
            continue
        trusted = e.get("trusted_chain")
        if moved:
            out.append({"time": e.get("time"), "seq": e.get("seq"), "what": "moved",
                        "moved": moved})
            continue
        if not trusted and "completed_line" in e:   # nothing dropped: a newline restored
            out.append({"time": e.get("time"), "seq": e.get("seq"),
                        "what": "completed_newline", "completed_line": e["completed_line"]})
            continue
        out.append({"time": e.get("time"), "seq": e.get("seq"),
                    "what": "trusted_chain" if trusted else "dropped_torn_line",
                    **({"trusted_chain": trusted} if trusted else
                       {"dropped_line": e.get("dropped_line")})})
    return out


def _say_repairs(ui: UI, repairs: list[dict[str, Any]]) -> None:
    """One line per repair: a rebuilt checkpoint means a rollback before it is not
    detectable from this disk, which a reviewer of the account must see."""
    for r in repairs:
        when = str(r.get("time", ""))[:19].replace("T", " ")
        if r["what"] == "trusted_chain":
            t = r["trusted_chain"]
            ui.warn(f"{when}: `ledger repair --trust-chain` rebuilt the checkpoint, trusting "
                    f"the chain as it then was ({t.get('entries')} entries, head "
                    f"{str(t.get('head'))[:16]}…"
                    f"{', checked against --expect-head' if t.get('expect_head') else ''}): a "
                    "rollback of the ledger before it would not have been detected; compare "
                    "that head with one recorded elsewhere")
        elif r["what"] == "moved":
            m = r["moved"] if isinstance(r["moved"], dict) else {}
            ui.say(f"note: {when}: `ledger repair --moved` adopted this file as the ledger "
                   f"({m.get('path')}, device {m.get('device')}, inode {m.get('inode')}): "
                   "any copy it was made from must not be used", markup=False)
        elif r["what"] == "completed_newline":   # nothing dropped
            ui.say(f"note: {when}: `ledger repair` restored the final newline of line "
                   f"{r.get('completed_line')} (nothing was dropped)", markup=False)
        else:
            ui.say(f"note: {when}: `ledger repair` dropped a torn last line "
                   f"(line {r.get('dropped_line')})", markup=False)


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
def verify(spec: SpecOpt,
           expect_head: Annotated[str | None, typer.Option(
               "--expect-head", help="A head hash recorded elsewhere earlier: it must still be "
               "the hash of an entry (detects a rollback of the ledger and its sidecars).")
           ] = None,
           json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False) -> None:
    """Check the ledger; exit 76 if any entry was edited, removed, cut off or forged.

    Streams every line: canonical bytes, hashes, the prev chain, the budget
    rules, each genesis's key fingerprint, the keyed checkpoint (a ledger cut
    short or emptied no longer contains its checkpointed entries), and that the
    spec's dataset has its genesis with the spec's total. Prints the head
    hash: record it elsewhere (a ticket, a model card) and pass it later as
    --expect-head to detect a rollback of every file together, which nothing
    on this disk can.

    Example:

        dpcli ledger verify --spec configs/adult.yaml && echo intact
    """
    from dpcli.errors import LedgerError
    from dpcli.run import open_ledger
    from dpcli.spec import load_spec

    ui = UI(quiet=quiet, json=json)
    s = load_spec(spec, todo_domains=True)
    report = open_ledger(s).verify(expect_head=expect_head)
    repairs = _repairs(report.repairs, s.dataset) if report.ok else []
    if json:
        ui.emit_json({"ledger": str(s.ledger_path), "ok": report.ok, "entries": report.entries,
                      "head": report.head, "problems": report.problems, "repairs": repairs,
                      "relocated": report.relocated})
    else:
        _say_repairs(ui, repairs)
    if not report.ok:
        for problem in report.problems:
            ui.say(f"  {problem}", markup=False)
        raise LedgerError(f"{s.ledger_path}: verification failed "
                          f"({len(report.problems)} problem(s))")
    ui.say(f"ok: {report.entries} entries, hash chain intact, checkpoint matches, "
           f"head {report.head}", markup=False)
    if report.relocated:   # intact, yet not the file its checkpoint was written for
        from dpcli.ledger import moved_message

        ui.warn(moved_message(s.ledger_path))


@app.command("raise")
@handle_errors
def raise_(spec: SpecOpt,
           epsilon: Annotated[float | None, typer.Option(
               "--epsilon", "-e", parser=number,
               help="The dataset's new lifetime total ε (not an increment; default: keep the "
               "recorded one).")] = None,
           delta: Annotated[float | None, typer.Option(
               "--delta", parser=number,
               help="The new total δ (default: keep the recorded one).")] = None,
           json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False) -> None:
    """Deliberately raise a dataset's lifetime budget; recorded as a 'raise' entry.

    The total is fixed by the genesis entry, and spending commands refuse a
    spec that declares another one. To raise it, run this with the new total,
    then set the same total under budget: in the spec: until then every
    command on the dataset, ledger show included, refuses the spec (exit 76). A total is never
    lowered and nothing already spent is refunded.

    Give --epsilon, --delta or both (the other stays as recorded).

    Example:

        dpcli ledger raise --spec configs/adult.yaml --epsilon 12
    """
    from dpcli.errors import UsageError
    from dpcli.ledger import raise_total
    from dpcli.spec import load_spec

    if epsilon is None and delta is None:
        raise UsageError("give the new total: --epsilon, --delta or both")
    ui = UI(quiet=quiet, json=json)
    s = load_spec(spec, todo_domains=True)
    old, new = raise_total(s.ledger_path, s.dataset, epsilon, delta)
    if json:
        ui.emit_json({"ledger": str(s.ledger_path), "dataset": s.dataset,
                      "previous": old.to_json(), "total": new.to_json()})
    from dpcli.budget import format_amount

    wanted = f"epsilon: {format_amount(new.epsilon)}" + (
        f", delta: {format_amount(new.delta)}" if new.delta else "")
    ui.say(f"dataset {s.dataset}: total raised from {old} to {new} in {s.ledger_path}; "
           f"now edit budget: in {s.path} to {{{wanted}}}: until the spec declares the new "
           "total, every command on this dataset (ledger show included) refuses it (exit 76)",
           markup=False)


@app.command("repair")
@handle_errors
def repair(spec: SpecOpt,
           yes: Annotated[bool, typer.Option(
               "--yes", "-y", help="Do not ask for confirmation.")] = False,
           trust_chain: Annotated[bool, typer.Option(
               "--trust-chain", help="Rebuild a deleted or damaged checkpoint (.head) from the "
               "chain as it is now, trusting that it was not cut or rolled back meanwhile; "
               "recorded in the ledger.")] = False,
           expect_head: Annotated[str | None, typer.Option(
               "--expect-head", help="With --trust-chain: a head hash anchored elsewhere "
               "earlier, which must be in the chain (refused otherwise).")] = None,
           moved: Annotated[bool, typer.Option(
               "--moved", help="Say that this ledger file, copied or moved from another "
               "(its checkpoint names another file), is now the dataset's only ledger: "
               "spending from it is refused until then; recorded in the ledger.")] = False,
           json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False) -> None:
    """Drop a torn last line (a write cut by a crash), and only that; record the repair.

    A torn line is a last line without its final newline, or a last line that
    is not JSON. It is shown first; without --yes you are asked to confirm
    (and without a terminal, nothing is done). Any other damage is refused
    (exit 76): restore the ledger from a backup. The repair is an entry of the
    spec's dataset. A torn reserve belonged to a run that never read data; a
    torn complete leaves its run 'interrupted', its charge kept.

    With --trust-chain: a checkpoint (.head) that was deleted or fails its MAC
    blocks every spend, since without it a cut or rolled-back ledger cannot be
    told from an intact one. If you know the ledger was not (best: its head is
    an anchored one, --expect-head), this rebuilds the checkpoint from the
    chain as it is now and records a 'repair' entry saying so. Refused over an
    intact checkpoint, a chain that does not verify, or a missing key.

    With --moved: a ledger copied or moved with its checkpoint (`cp -r` of a
    project, a restored backup, another disk) is refused for spending (exit
    76), since a copy spends the same budget a second time. If this file is
    now the only ledger of the dataset, this records so (after a confirmation,
    or with --yes) and spending resumes; never run it on a copy while the
    original is still used.

    Example:

        dpcli ledger repair --spec configs/adult.yaml
        dpcli ledger repair --spec configs/adult.yaml --trust-chain --expect-head <hash>
        dpcli ledger repair --spec configs/adult.yaml --moved
    """
    import sys

    from dpcli.errors import UsageError
    from dpcli.ledger import Repair, repair_ledger
    from dpcli.spec import load_spec

    ui = UI(quiet=quiet, json=json)
    s = load_spec(spec, todo_domains=True)
    if expect_head is not None and not trust_chain:
        raise UsageError("--expect-head goes with --trust-chain (to check a ledger against an "
                         "anchored head, run `dpcli ledger verify --expect-head`)")
    if moved and trust_chain:
        raise UsageError("--moved and --trust-chain are two repairs: run them one at a time")
    if trust_chain:
        _trust_chain(ui, s, yes=yes, expect_head=expect_head, json=json)
        return
    if moved:
        from dpcli.ledger import adopt_moved, relocated

        if relocated(s.ledger_path, s.dataset) and not yes:
            ui.say(f"{s.ledger_path} is not the file its checkpoint was written for. Recording "
                   "that it is now the dataset's ledger makes it spend; if the file it came "
                   "from (the original, or a copy) is still used anywhere, the same budget is "
                   "spent twice. A backup restored this way forgets what was spent after it "
                   "was taken (compare `ledger verify`'s head with one recorded elsewhere).",
                   markup=False)
            if not sys.stdin.isatty():
                raise UsageError("no terminal to confirm on: pass --yes to record the move")
            answer = input("record that this file is now the dataset's only ledger? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                raise UsageError("not confirmed: nothing changed")
        adopted = adopt_moved(s.ledger_path, s.dataset)
        if json:
            ui.emit_json({"ledger": str(s.ledger_path), "repaired": adopted, "moved": adopted})
        ui.say(f"{s.ledger_path}: " + (
            "recorded that this file is now the dataset's ledger; spending resumes (the "
            "copy it came from must not be used again)" if adopted else
            "not copied or moved (its checkpoint was written for this file): nothing to "
            "record"), markup=False)
        return
    refused: list[str] = []

    def confirm(torn: Repair) -> bool:
        shown = torn.dropped.decode("utf-8", "backslashreplace")
        if torn.newline_only:
            ui.say(f"line {torn.line} is a whole, valid entry that lost only its final newline; "
                   "the newline would be restored (nothing dropped):", markup=False)
        else:
            ui.say(f"torn line {torn.line} ({len(torn.dropped)} bytes) would be dropped:",
                   markup=False)
        ui.say(f"  {shown[:2000]}", markup=False)
        if yes:
            return True
        if not sys.stdin.isatty():
            refused.append("no terminal to confirm on: pass --yes to drop it")
            return False
        answer = input("repair it and record the repair? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            refused.append("not confirmed: nothing changed")
            return False
        return True

    done = repair_ledger(s.ledger_path, s.dataset, confirm)
    if refused:
        raise UsageError(refused[0])
    if done is None:
        from dpcli.errors import LedgerError
        from dpcli.ledger import verify_file

        report = verify_file(s.ledger_path)
        if not report.ok:  # e.g. a deleted checkpoint: not a torn line (see --trust-chain)
            lost = any("checkpoint" in p and ("missing" in p or "fails its MAC" in p)
                       for p in report.problems)
            raise LedgerError(f"{s.ledger_path}: no torn last line to repair, but the ledger "
                              f"fails verification: {report.problems[0]}"
                              + ("" if lost else "; restore the damaged file from a backup"))
        said = "nothing to repair (it verifies)"
    elif done.newline_only:
        said = f"restored the final newline of line {done.line} and recorded the repair"
    else:
        said = f"dropped torn line {done.line} and recorded the repair"
    if json:
        ui.emit_json({"ledger": str(s.ledger_path), "repaired": done is not None,
                      "dropped_line": done.line if done and not done.newline_only else None,
                      "completed_line": done.line if done and done.newline_only else None})
    ui.say(f"{s.ledger_path}: {said}", markup=False)


def _trust_chain(ui: UI, s: Any, *, yes: bool, expect_head: str | None, json: bool) -> None:
    """``ledger repair --trust-chain``: show what would be trusted, confirm, rebuild."""
    import sys

    from dpcli.errors import UsageError
    from dpcli.ledger import TrustedChain, trust_chain

    refused: list[str] = []

    def confirm(chain: TrustedChain) -> bool:
        ui.say(f"the checkpoint is {chain.checkpoint}; the chain verifies: {chain.entries} "
               f"entries, head {chain.head}", markup=False)
        if chain.relocated:
            ui.say("the chain names another file than this one (it was copied or moved): the "
                   "rebuilt checkpoint keeps that file's identity, so spending stays refused "
                   "until `dpcli ledger repair --moved`", markup=False)
        for name, (total, spent) in sorted(chain.datasets.items()):
            ui.say(f"  dataset {name}: total {total}, spent {spent} (as the chain says)",
                   markup=False)
        ui.say("rebuilding the checkpoint trusts that the ledger was not cut short or rolled "
               "back before its checkpoint was lost: a lost tail would be spent budget "
               "forgotten" + ("" if expect_head else " (compare the head above with your "
                              "anchored copy, or pass --expect-head)")
               + ("" if chain.identified else "; and that this file is not a copy of a ledger "
                  "still in use elsewhere (this chain does not record its file, so a copy made "
                  "without its checkpoint cannot be told from the original: rebuilding would "
                  "make it a second account of the same budget)"), markup=False)
        if yes:
            return True
        if not sys.stdin.isatty():
            refused.append("no terminal to confirm on: pass --yes to rebuild it")
            return False
        answer = input("rebuild the checkpoint and record it? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            refused.append("not confirmed: nothing changed")
            return False
        return True

    done = trust_chain(s.ledger_path, s.dataset, confirm, expect_head=expect_head)
    if refused:
        raise UsageError(refused[0])
    if json:
        ui.emit_json({"ledger": str(s.ledger_path), "repaired": done is not None,
                      "trusted_chain": None if done is None else {
                          "entries": done.entries, "head": done.head,
                          "checkpoint": done.checkpoint}})
    if done is None:
        ui.say(f"{s.ledger_path}: the checkpoint is intact and matches the ledger: nothing to "
               "rebuild", markup=False)
        return
    ui.say(f"{s.ledger_path}: rebuilt the checkpoint from the chain ({done.entries} entries, "
           f"head {done.head}) and recorded the repair", markup=False)
    if done.relocated:   # the chain was started (or last adopted) in another file
        from dpcli.ledger import moved_message

        ui.warn(moved_message(s.ledger_path))
