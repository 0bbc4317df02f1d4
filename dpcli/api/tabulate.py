"""``tabulate`` as a function: noisy per-class counts of declared columns."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dpcli.api.report import Reporter, Silent
from dpcli.api.result import Released
from dpcli.api.spend import DryRun, Spend, resolve_section
from dpcli.errors import UsageError
from dpcli.spec import Spec


def tabulate(spec: Spec, data: Path | str, *, out: Path | None = None,
             columns: Sequence[str] | str | None = None, bins: int | None = None,
             epsilon: float | None = None, seed: int | None = None, engine: str = "local",
             dry_run: bool = False, reporter: Reporter | None = None) -> Released | DryRun:
    """Release one noisy count table per column by class, and the class counts.

    Costs the section's ε, split equally between the tables; each has L1
    sensitivity 2 under replace-one (2r for a tokens column capped at r per
    row), discrete Laplace noise. ``out`` (a .csv) gets the counts and a JSON
    record of the release beside it. The value is the list of count rows.
    """
    from dpcli.algorithms import tabulate as algo
    from dpcli.api.spend import forecast_of
    from dpcli.data.location import location_text, parse_location
    from dpcli.forecast import tabulate as fc
    from dpcli.io import dumps_json
    from dpcli.spec import TabulateSection

    reporter = reporter or Silent()
    location = parse_location(str(data))
    s = spec
    section = resolve_section(s, "tabulate", TabulateSection, epsilon, columns, bins=bins)
    chosen = section.columns or algo.default_columns(s.schema)
    if not chosen:
        raise UsageError("no columns to tabulate: pass --columns")
    plan = fc.plan(s, section, 0)   # the plan `dpcli plan` shows (n does not change it)
    request = algo.request(s.schema, chosen, section.bins)
    request.validate(s.schema)  # before the charge: a bad request must cost nothing
    if out is not None and out.suffix.lower() == ".json":
        raise UsageError(f"--out {out}: give the table a .csv name; the JSON record of the "
                         "release is written beside it with the same stem")
    meta = out.with_suffix(".json") if out is not None else None
    spend = Spend.prepare(s, plan, location, chosen, command="tabulate", reporter=reporter,
                          outputs=[out, meta], engine=engine, dry_run=dry_run,
                          forecast=forecast_of("tabulate", s, section))
    if dry_run:
        return spend.dry_run()
    arguments: dict[str, Any] = {
        "data": location_text(location), "engine": engine,
        "out": None if out is None else str(out.resolve()), "columns": list(chosen),
        "bins": section.bins, "epsilon": section.epsilon}
    with spend.charged(arguments, seed=seed) as run:
        stats = run.statistics(request, "counting")
        rows = algo.release(stats, run.plan, s.schema, chosen, section.bins, run.rng)
        payload = {"columns": list(chosen), "bins": section.bins,
                   "error_bars": {"columns": ["lower", "upper"], "level": 0.9,
                                  "of": "the noise alone (post-processing, free)"},
                   "breakdown": plan.to_json(), "table_file": None if out is None else out.name}
        envelope = run.envelope("tabulate", payload)
        if out is not None and meta is not None:
            run.write_bytes(out, rows_csv(rows).encode())
            run.write(meta, dumps_json(envelope))
        halves = sorted({int(r["upper"]) - int(r["count"]) for r in rows})  # type: ignore[call-overload]
        run.summary = {"tables": len(chosen) + 1, "rows_out": len(rows),
                       "error_bar": halves[-1] if halves else 0}
    return Released("tabulate", rows, envelope, plan, run.run_id, out, dict(run.summary),
                    tuple(stats.report.lines()), {"meta": meta})


def rows_csv(rows: list[dict[str, object]]) -> str:
    """The released rows as CSV text: a header of the keys, one line per row (the text
    pandas' ``DataFrame(rows).to_csv(index=False)`` writes, without importing pandas: about
    0.3 s of every tabulate's start-up)."""
    import csv
    import io

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else [], lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()
