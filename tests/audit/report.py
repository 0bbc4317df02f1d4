"""``make audit``: every audit of :mod:`tests.audit.commands` at a larger scale, as a table.

    python -m tests.audit.report [--scale 5] [--seed os] [--out benchmarks/results/audit.md]

Runs each case and its positive control with ``scale`` times the CI's runs (OS
entropy by default: a fresh sample, unlike CI's fixed seeds), prints a Markdown
table (command, statistic, event, runs, ε lower bound, charged ε, verdict) and
writes it to ``--out``. Exit status 1 if any bound exceeds its charged ε or any
control is not flagged.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from tests.audit.auditor import ALPHA, Finding, audit
from tests.audit.cases import Case
from tests.audit.commands import CASES


def run_case(c: Case, scale: float, seed: int | None, control: bool) -> Finding:
    run_d, run_dp = c.build()
    runs = max(1, round(c.runs * scale))
    if not control:
        return audit(run_d, run_dp, runs=runs, pilot=max(1, runs // 2), seed=seed)
    with c.control():
        return audit(run_d, run_dp, runs=runs, pilot=max(1, runs // 2),
                     seed=None if seed is None else seed + 1)


def _kept(f: Finding) -> str:
    if f.kept_d < 0 or (f.kept_d == f.runs and f.kept_dp == f.runs):
        return f"{f.runs:,}"
    return f"{f.runs:,} ({f.kept_d:,} / {f.kept_dp:,} kept)"


def table(rows: list[tuple[Case, Finding, Finding]]) -> str:
    head = ("| command | pair | statistic | event (direction) | runs per side | ε lower bound "
            "| charged ε | verdict | control | control's bound | flagged |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for c, f, g in rows:
        charged = f"{c.epsilon:.4g}" + ("" if c.scope == "whole run" else f" ({c.scope})")
        verdict = "pass" if f.eps_lower <= c.epsilon else "**VIOLATION**"
        flagged = "yes" if g.eps_lower > c.epsilon else "**NO (no power)**"
        lines.append(f"| {c.name} | {c.pair} | {c.statistic} | {f.event} ({f.direction}; "
                     f"{f.count_d:,} vs {f.count_dp:,}) | {_kept(f)} | {f.eps_lower:.3f} | "
                     f"{charged} | {verdict} | {c.control_name} | {g.eps_lower:.3f} "
                     f"({g.event}, {g.direction}; {g.count_d:,} vs {g.count_dp:,}) | {flagged} |")
    return head + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float,
                        default=float(os.environ.get("DPCLI_AUDIT_SCALE", "5")))
    parser.add_argument("--seed", default=os.environ.get("DPCLI_AUDIT_SEED", "os"),
                        help="an integer, or 'os' for OS entropy (default)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--only", action="append", default=[], help="a case name (repeatable)")
    args = parser.parse_args(argv)
    seed = None if args.seed == "os" else int(args.seed)
    rows = []
    start = time.perf_counter()
    for c in CASES:
        if args.only and c.name not in args.only:
            continue
        t = time.perf_counter()
        f = run_case(c, args.scale, seed, control=False)
        g = run_case(c, args.scale, seed, control=True)
        rows.append((c, f, g))
        print(f"{c.name}: bound {f.eps_lower:.3f} (charged {c.epsilon:.4g}), control "
              f"{g.eps_lower:.3f} [{time.perf_counter() - t:.0f} s]", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - start
    text = table(rows)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        header = (
            "# Black-box neighbour audit of every spending command\n\n"
            f"`make audit` (`python -m tests.audit.report --scale {args.scale:g} --seed "
            f"{args.seed}`), {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node() or 'host'}"
            f", {elapsed / 60:.1f} min on a shared 2-core machine (under load).\n\n"
            "Each row: runs of the command's release on a neighbouring pair D, D' (fresh "
            "generator per run), an event of the statistic chosen on a separate pilot (half as "
            "many runs), and a Clopper–Pearson lower bound on ln(P[E | D] / P[E | D']) at "
            f"confidence 1 − α, α = {ALPHA:g} per audit (the false-failure rate: a correct "
            "mechanism exceeds its ε with probability ≤ α). *Verdict*: the bound must not "
            "exceed the charged ε. *Control*: the same audit with less noise, which must be "
            "flagged (its bound above the charged ε). Conditional audits (a step given the "
            "released output of an earlier step) keep only the runs meeting the condition; "
            "their charged ε is the step's. *sides*: Σ over the coordinates where D and D' "
            "differ of +1 if the released value lies at or beyond D's exact value (away from "
            "D'), −1 if at or beyond D''s. Code: `tests/audit/`.\n\n")
        args.out.write_text(header + text)
    ok = all(f.eps_lower <= c.epsilon and g.eps_lower > c.epsilon for c, f, g in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
