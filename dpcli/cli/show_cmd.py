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
        "sidecar (.json or its .csv), an evaluation, a publish-grid / roc output folder, or "
        "a Parquet file synthesize or predict wrote.")],
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
    verdict that was not usable), as its file records it. A Parquet file
    synthesize or predict wrote is described from its footer (rows,
    columns, the command that wrote it): it is not a release of its own.

    Example:

        dpcli show models/nb.json
    """
    from dpcli.errors import DataError
    from dpcli.io import read_envelope

    ui = UI(quiet=quiet, json=json)
    path = released_file(file)
    if _is_parquet(path):
        summary = parquet_summary(path)
        if json:
            ui.emit_json({"file": str(path), **summary})
            return
        for line in parquet_lines(path, summary):
            ui.result(line)
        return
    try:
        env = read_envelope(path)
    except DataError as exc:
        if "not a readable dpcli JSON file" not in str(exc):
            raise
        raise DataError(f"{path}: not a dpcli release (not JSON): show describes a JSON "
                        f"release, its output folder, a tabulate CSV beside its .json, and "
                        f"the Parquet files synthesize and predict write") from None
    summary = summarise(env)
    if json:
        ui.emit_json({"file": str(path), **summary})
        return
    for line in summary_lines(path, summary):
        ui.result(line)


def released_file(path: Path) -> Path:
    """The envelope behind ``path``: itself, a folder's grid.json / curve.json, the
    .json sidecar of a tabulate CSV, or the grid.json beside a synopsis's cells file."""
    from dpcli.errors import DataError, NoInput

    # the names dpcli.algorithms.synopsis writes, spelled here: importing it (numpy, pyarrow)
    # would slow every show (docs/scale.md)
    if path.name == "cells.parquet" and (path.parent / "grid.json").is_file():
        path = path.parent   # the cells belong to the synopsis its grid.json describes
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


#: what each command's Parquet output holds, and the release it derives from
PARQUET_OUTPUTS = {
    "synthesize": ("synthetic_records", "synthetic records drawn from a released synopsis"),
    "predict": ("predictions", "a model's predictions for the rows of a data file"),
}


def _is_parquet(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"PAR1"
    except OSError:
        return False   # read_envelope names the problem


def parquet_summary(path: Path) -> dict[str, Any]:
    """What a Parquet file dpcli wrote holds, from its footer only (its mark, row count and
    columns: no value is read). A DataError for a Parquet file without dpcli's mark."""
    import pyarrow.parquet as pq

    from dpcli.errors import DataError
    from dpcli.protect import OUTPUT_MARK, parquet_mark

    mark = parquet_mark(path)
    if mark is None or mark["command"] not in PARQUET_OUTPUTS:
        raise DataError(f"{path}: a Parquet file without dpcli's {OUTPUT_MARK.decode()} mark: "
                        "not a dpcli output. show describes a JSON release, its output "
                        "folder, a tabulate CSV beside its .json, and the Parquet files "
                        "synthesize and predict write")
    meta = pq.read_metadata(path)
    kind, what = PARQUET_OUTPUTS[mark["command"]]
    return {"kind": kind, "format": "parquet", "written_by": mark["command"],
            "dpcli_version": mark.get("dpcli_version"), "rows": meta.num_rows,
            "columns": list(pq.read_schema(path).names), "holds": what}


def parquet_lines(path: Path, s: dict[str, Any]) -> list[str]:
    source = ("the synopsis folder it was drawn from" if s["written_by"] == "synthesize"
              else "the model it applied")
    if s["written_by"] == "predict":
        # a prediction file holds the input's own rows: private, whatever the model
        nature = ("  PRIVATE: the input's rows with a prediction each (the custodian's only; "
                  "do not publish it). No spend of its own")
    else:
        nature = "  post-processing of a release (synthetic rows), with no spend of its own"
    return [f"{path}: {s['kind']} (Parquet, written by `dpcli {s['written_by']}`, dpcli "
            f"{s['dpcli_version']})",
            f"  {s['holds']}: {s['rows']:,} rows; columns: {', '.join(s['columns'])}",
            f"{nature}; `dpcli show` {source} for its dataset, ε, δ, run and cautions"]


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
    if kind == "roc_curve":   # a released figure with its one uncertainty (tester 13)
        return {"points": len(p.get("points") or []), "auc": _rounded(p.get("auc")),
                "auc_interval": _interval(p.get("auc_interval"), p.get("error_bars")),
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
        found = p.get("intervals")
        bars: dict[str, Any] = found if isinstance(found, dict) else {}
        return {"n": p.get("n"), "accuracy": _rounded(p.get("accuracy")),
                "accuracy_interval": _interval(bars.get("accuracy"), bars),
                "classes": p.get("classes")}
    return {"payload_keys": sorted(p)}


def _rounded(value: Any) -> Any:
    return round(value, 4) if isinstance(value, float) else value


def _interval(bounds: Any, bars: Any) -> str | None:
    """'[lo, hi] (90 %, the noise only)' from a release's stored interval, None without."""
    if not (isinstance(bounds, list) and len(bounds) == 2
            and all(isinstance(b, (int, float)) for b in bounds)):
        return None
    level = bars.get("level") if isinstance(bars, dict) else None
    what = f"{level:.0%}, " if isinstance(level, (int, float)) else ""
    return f"[{bounds[0]:.4f}, {bounds[1]:.4f}] ({what}the noise only)"


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
