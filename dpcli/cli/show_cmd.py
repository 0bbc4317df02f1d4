"""``dpcli show``: summarise a released file (free: it reads only a release)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from dpcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, handle_errors
from dpcli.cli.ui import UI

#: a folder a command writes holds its envelope under one of these names
FOLDER_FILES = ("grid.json", "curve.json")


@handle_errors
def show(
    file: Annotated[Path, typer.Argument(
        metavar="FILE", help="A file dpcli released: a model, a selection, a tabulate "
        "sidecar (.json or its .csv), an evaluation, or a publish-grid / roc output folder.")],
    json: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Summarise a released file: kind, dataset, ε, δ, run, seeded, what it holds.

    Free and safe to run anywhere: a release is already differentially
    private, and this reads nothing else (no spec, no data, no ledger). What
    it holds: a model's kind, label and columns; a curve's points and AUC; a
    synopsis's cells; a selection's chosen features; a table's columns.
    The run id is the one `dpcli ledger show` lists. A 'caution' line repeats
    what the release's own run warned of (a degenerate model, a forecast
    verdict that was not usable), as its file records it.

    Example:

        dpcli show models/nb.json
    """
    from dpcli.io import read_envelope

    ui = UI(quiet=quiet, json=json)
    path = released_file(file)
    env = read_envelope(path)
    summary = summarise(env)
    if json:
        ui.emit_json({"file": str(path), **summary})
        return
    for line in summary_lines(path, summary):
        ui.result(line)


def released_file(path: Path) -> Path:
    """The envelope behind ``path``: itself, a folder's grid.json / curve.json, or the
    .json sidecar of a tabulate CSV."""
    from dpcli.errors import DataError, NoInput

    if path.is_dir():
        for name in FOLDER_FILES:
            if (path / name).is_file():
                return path / name
        raise DataError(f"{path}: a folder without {' or '.join(FOLDER_FILES)}: not a "
                        "dpcli output folder")
    if not path.exists():
        raise NoInput(f"{path}: file not found")
    if path.suffix.lower() != ".json" and path.with_suffix(".json").is_file():
        return path.with_suffix(".json")  # tabulate's counts.csv beside counts.json
    return path


def summarise(env: dict[str, Any]) -> dict[str, Any]:
    """The envelope's public header and a short description of its payload."""
    payload = env.get("payload") or {}
    head = {key: env.get(key) for key in ("kind", "dataset", "epsilon", "delta", "neighbouring",
                                          "seeded", "created", "dpcli_version")}
    head["run_id"] = env.get("ledger_run_id")
    from dpcli.io import envelope_cautions

    return {**head, "holds": _holds(str(env.get("kind")), payload),
            "cautions": envelope_cautions(env)}


def _holds(kind: str, p: dict[str, Any]) -> dict[str, Any]:
    schema = p.get("schema") or {}
    label = schema.get("label") or {}
    if kind in ("naive_bayes", "logistic_regression", "brc"):
        columns = p.get("columns") or list((schema.get("columns") or {}).keys())
        return {"model": kind, "label": label.get("column"), "classes": label.get("classes"),
                "columns": list(columns)}
    if kind == "roc_curve":
        return {"points": len(p.get("points") or []), "auc": p.get("auc"),
                "positive_class": p.get("positive_class")}
    if kind == "grid_synopsis":
        return {"cells": p.get("n_cells"), "grid": [g.get("column") for g in p.get("grid", [])],
                "label": label.get("column")}
    if kind == "feature_selection":
        chosen = [(f"{c['column']}:{c['word']}" if c.get("word") else c.get("column"))
                  if isinstance(c, dict) else c for c in p.get("selected", [])]
        return {"score": p.get("score"), "method": p.get("method"),
                "selected": len(chosen), "candidates": p.get("candidates"), "features": chosen}
    if kind == "tabulate":
        return {"columns": p.get("columns"), "bins": p.get("bins")}
    if kind == "evaluation":
        return {"n": p.get("n"), "accuracy": p.get("accuracy"), "classes": p.get("classes")}
    return {"payload_keys": sorted(p)}


def summary_lines(path: Path, s: dict[str, Any]) -> list[str]:
    seeded = " (seeded: reproducible noise, for tests only)" if s.get("seeded") else ""
    run = s.get("run_id") or "-"
    lines = [f"{path}: {s.get('kind')} of dataset {s.get('dataset')}",
             f"  spent ε={s.get('epsilon')} δ={s.get('delta')} under {s.get('neighbouring')} "
             f"neighbours, run {run}{seeded}",
             f"  written {s.get('created')} by dpcli {s.get('dpcli_version')}"]
    lines += [f"  caution: {c}" for c in s.get("cautions", [])]
    for key, value in s["holds"].items():
        if isinstance(value, list):
            shown = ", ".join(str(v) for v in value[:20])
            value = shown + (f" … ({len(value)} in all)" if len(value) > 20 else "")
        lines.append(f"  {key}: {value}")
    return lines
