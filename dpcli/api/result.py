"""What a library run returns: the released object, its envelope, and what was spent."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpcli.mechanisms import Plan


@dataclass(frozen=True)
class Released:
    """One completed release.

    ``value`` is the released object (a model, a curve, a synopsis, a
    selection, a table); ``envelope`` the JSON document a file of it holds
    (written to ``out`` when one was given); ``plan`` the spend, recorded in
    the ledger as run ``run_id``. ``summary`` holds public facts for a report
    line (method, columns, a threshold …).
    """

    kind: str
    value: Any
    envelope: dict[str, Any]
    plan: Plan
    run_id: str
    out: Path | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    #: what the data layer clamped, mapped or imputed: exact private figures, for the custodian
    #: who asks (``dpcli … --report``); never part of an output
    data_report: tuple[str, ...] = ()
    #: public facts for the caller's report (a chosen λ, the record counts, a fit report)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def payload(self) -> dict[str, Any]:
        return dict(self.envelope["payload"])
