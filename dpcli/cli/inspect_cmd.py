"""``dpcli inspect``: check a data file against the declared schema, spending nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated, Any

import typer

from dpcli.cli.common import (
    DataArg,
    JsonOpt,
    ProgressOpt,
    QuietOpt,
    ReportOpt,
    SpecOpt,
    VerboseOpt,
    error_object,
    handle_errors,
)
from dpcli.cli.ui import UI


@handle_errors
def inspect(
    data: DataArg,
    spec: SpecOpt,
    structure_only: Annotated[bool, typer.Option(
        "--structure-only", help="Read no values at all: only the header / footer.")] = False,
    json: JsonOpt = False,
    quiet: QuietOpt = False,
    progress: ProgressOpt = False,
    report: ReportOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Check a file against the spec's schema; no budget spent, no value printed.

    Reports which declared columns are present, missing or stored with an
    incompatible type, and which extra columns will be ignored. Unless
    --structure-only, it also runs the pre-charge validation pass every
    spending command runs (every row parses, labels are declared classes,
    no missing values where the schema says 'missing: error'), naming the
    column and row of the first problem but never its value. Exit code 65 if
    anything would stop a run.

    Then it reads every declared column as a run would and says, per column,
    what a run will do with values outside the declared domain: categories
    that differ only in case ('Red' where 'red' is declared) or are
    undeclared (mapped to 'other'), numbers outside the bounds (clamped),
    missing values (imputed), tokens outside the vocabulary (dropped). With
    --report it gives their exact counts (private figures, for the
    custodian's screen only). Nothing is charged or released.

    Example:

        dpcli inspect sample_data/adult_train.parquet --spec configs/adult.yaml
    """
    from rich.table import Table

    from dpcli.cli.remaps import describe
    from dpcli.data import DataSource
    from dpcli.errors import DataError
    from dpcli.spec import describe_column, load_spec

    ui = UI(quiet=quiet, json=json, force_progress=progress)
    s = load_spec(spec)
    source = DataSource(data, s.schema)
    structure = source.check_structure(s.schema.names, raise_errors=False)
    values_problem: str | None = None
    failed_column: str | None = None   # the column the value pass stopped at, when it names one
    values_checked = False
    if structure.ok and not structure_only:
        try:
            with ui.progress("validation pass", source.num_rows_hint()) as advance:
                source.check_values(s.schema.names, progress=advance)
            values_checked = True
        except DataError as exc:
            values_problem = str(exc)
            failed_column = exc.column
    ok = structure.ok and values_problem is None
    remaps = None
    if values_checked:
        from dpcli.cli.remaps import count_remaps
        from dpcli.mechanisms import make_rng

        with ui.progress("reading the declared columns", source.num_rows_hint()) as advance:
            remaps = count_remaps(s.schema, _counted(source.prediction_batches(
                s.schema.names, rng=make_rng(None)), advance), lambda: source.report)

    mismatched = {m.column: m for m in structure.mismatches}
    status = {}
    for name in (*s.schema.names, s.schema.label.column):
        if name in structure.missing:
            status[name] = "missing"
        elif name in mismatched:
            m = mismatched[name]
            status[name] = f"stored as {m.found}, expected {m.expected}"
        elif name == failed_column:
            status[name] = "value check failed"
        elif values_problem is not None:   # the value pass stopped before its last row
            status[name] = "structure ok"
        else:
            status[name] = "ok"
    problems = structure.problems() + ([values_problem] if values_problem else [])
    # a problem from the value pass names the file already; the structure's do not
    failure = None if ok else "; ".join(problems[:1] if not structure.readable else problems)
    if failure is not None and not failure.startswith(f"{data}: "):
        failure = f"{data}: {failure}"
    if json:
        failed = {} if failure is None else error_object("data", failure, DataError.exit_code,
                                                         charged=False)
        # one line: the report and, on a failure, the error object's keys in it (a second
        # line from the error handler would break a JSON Lines reader)
        ui.emit_json({"file": str(data), "format": structure.format, "rows": structure.num_rows,
                      "ok": ok, "columns": status, "extra_columns": list(structure.extra),
                      "problems": problems, "values_checked": values_checked,
                      # which kinds, never how many: --json stdout may leave the custodian
                      **({"remapped": {c: sorted(k) for c, k in remaps.counts.items()}}
                         if remaps is not None else {}), **failed})
        if failure is not None:
            ui.error(failure)
            raise typer.Exit(DataError.exit_code)
    else:
        rows = f", {structure.num_rows:,} rows" if structure.num_rows is not None else ""
        table = Table(title=f"{data} ({structure.format}{rows}) against {s.path}",
                      title_justify="left")
        for col in ("column", "declared", "status"):
            table.add_column(col)
        for c in s.schema.columns:
            table.add_row(c.name, describe_column(c), status[c.name])
        label = s.schema.label
        table.add_row(label.column, f"label, classes {', '.join(label.classes)}",
                      status[label.column])
        ui.result(table)
        if remaps is not None and remaps.counts:
            # one line per column, unwrapped: for grep, and for a terminal of any width
            ui.result("values a run will remap:")
            for c in s.schema.columns:
                if c.name in remaps.counts:
                    ui.result(f"  {c.name}: {describe(remaps, c, exact=report)}")
        if structure.extra:
            ui.say("ignored (not declared): " + ", ".join(structure.extra), markup=False)
        if values_checked:
            parsed = "every row parses, " if structure.format == "csv" else ""
            ui.say(f"validation pass: {parsed}every label is a declared class, "
                   "no missing value where the schema forbids one")
        if remaps is not None and remaps.counts and not report:
            ui.say("rerun with --report for the exact counts of remapped values (private "
                   "figures, for your screen only)")
    if failure is not None:
        raise DataError(failure)
    changed = "" if not remaps or not remaps.counts else (
        f"; a run will remap values in {len(remaps.counts)} column(s) (listed above)")
    ui.say(f"ok: {data} matches the schema of {s.path}{changed} (nothing was charged)")


def _counted(batches: Iterator[tuple[Any, Any]], advance: Callable[[int], None]
             ) -> Iterator[tuple[Any, Any]]:
    """``batches`` as they are, calling ``advance(rows)`` for each (progress)."""
    for raw, encoded in batches:
        yield raw, encoded
        advance(raw.num_rows)
