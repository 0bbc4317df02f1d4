"""Seeded noise streams: the same run reproduces, any other run gets independent noise.

A ``--seed`` exists for tests and benchmarks (design notes, rule 6). Two
dangers shape how its stream is derived:

* A guessable seed must not let an outsider regenerate the noise and subtract
  it: the stream is keyed with the ledger's secret key (HMAC-SHA-256).
* One seed must never add the same noise to two different inputs: otherwise the
  difference of two seeded releases on neighbouring files is the exact
  difference of their true statistics, at any ε. So the key also covers the
  command, its parameters, the spec's digest and the input's keyed fingerprint.

The same seed therefore reproduces a run bit for bit only on the same input,
with the same command, parameters and spec; any change gives an independent
stream. The seed itself is never written anywhere; the run is marked ``seeded``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

#: arguments left out of the derivation: where the input is read from is covered by its
#: fingerprint (moving a file keeps its noise), where the output goes does not change the
#: release, and both engines compute the same statistics (a seeded run releases the same
#: output with either)
NOT_DERIVED = frozenset({"data", "out", "engine"})


def seeded_stream(key: bytes, seed: int, *, command: str, arguments: Mapping[str, Any],
                  spec_digest: str, input_fingerprint: str) -> int:
    """The integer that seeds a seeded run's generator (256 bits).

    ``arguments`` is the dict the run records in the ledger (its ``data``,
    ``out`` and ``engine`` entries are ignored); ``input_fingerprint`` the keyed digest the
    ledger records for the input (``input_digest``).
    """
    material = json.dumps(
        {"seed": int(seed), "command": command, "spec": spec_digest,
         "input": input_fingerprint,
         "arguments": {k: v for k, v in arguments.items() if k not in NOT_DERIVED}},
        sort_keys=True, separators=(",", ":"), default=str)
    digest = hmac.new(key, b"dpcli-seeded-stream\0" + material.encode(), hashlib.sha256)
    return int.from_bytes(digest.digest(), "big")
