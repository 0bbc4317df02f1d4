"""The audited commands: for each, a neighbouring pair, the release as the command runs it,
a statistic, the charged ε and a positive control (the same release with half the noise).

Each case's ``build()`` returns the two releases (D, D') as callables of a generator;
``control()`` is a context manager under which the same releases carry half the noise
(the mechanism run at 2ε while the plan claims ε, or the paper's uncorrected formula).
The cases themselves are in :mod:`tests.audit.commands`, which fills ``CASES``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from tests.audit.auditor import Release

Build = Callable[[], tuple[Release, Release]]
Control = Callable[[], AbstractContextManager[None]]


@dataclass(frozen=True)
class Case:
    """One audit: what runs, on which pair, read through which statistic, at what cost."""

    name: str          # command and variant
    pair: str          # the neighbouring pair, in words
    statistic: str     # what s reads off the released output
    epsilon: float     # the ε the bound is checked against (the run's, or a step's: scope)
    runs: int          # audit runs per side in CI (the pilot is ``runs // 2``)
    build: Build
    control: Control
    control_name: str  # what the positive control changes
    scope: str = "whole run"  # what ``epsilon`` is charged for (a step: conditional audit)


CASES: list[Case] = []


def case(**kwargs: object) -> Callable[[Build], Build]:
    """Register the decorated ``build`` as a :class:`Case`."""
    def register(build: Build) -> Build:
        CASES.append(Case(build=build, **kwargs))  # type: ignore[arg-type]
        return build
    return register


def by_name(name: str) -> Case:
    return next(c for c in CASES if c.name == name)
