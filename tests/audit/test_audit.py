"""Black-box neighbour audits of every spending command (issue 23; docs/design.md rules 1 and 4).

For each case of :mod:`tests.audit.commands`: a Clopper–Pearson lower bound on ε
from runs of the command's release on an adversarial neighbouring pair must not
exceed the charged ε (false-failure rate ALPHA = 1e-4 per audit, see
:mod:`tests.audit.auditor`), and the same audit of the positive control (half
the noise) must exceed it, which shows the audit has the power to see a
violation of that size. Seeds are fixed (reproducible); ``make audit`` runs a
larger version with OS entropy and writes the table in
``benchmarks/results/audit.md``.
"""

from __future__ import annotations

import pytest

from tests.audit.auditor import audit, audit_seed, scale
from tests.audit.cases import Case
from tests.audit.commands import CASES

pytestmark = pytest.mark.slow


def _run(c: Case, seed: int | None):
    run_d, run_dp = c.build()
    runs = max(1, round(c.runs * scale()))
    return audit(run_d, run_dp, runs=runs, pilot=max(1, runs // 2), seed=seed)


@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_audit_bound_stays_below_charged_epsilon(c: Case) -> None:
    finding = _run(c, audit_seed())
    assert finding.eps_lower <= c.epsilon, (c.name, finding)


@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_audit_flags_half_noise(c: Case) -> None:
    seed = audit_seed()
    with c.control():
        finding = _run(c, None if seed is None else seed + 1)
    assert finding.eps_lower > c.epsilon, (c.name, c.control_name, finding)
