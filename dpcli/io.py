"""Outputs: atomic writes and the JSON envelope around every released artefact.

A run that fails leaves no partial output: every file is written to a
temporary name in its destination folder, fsynced, and renamed into place
only when the whole set is ready (:class:`Outputs`).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dpcli import NEIGHBOURING_RELATION, __version__
from dpcli.errors import UsageError

ENVELOPE_FORMAT = "dpcli"
ENVELOPE_SCHEMA_VERSION = 1


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def dumps_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


@dataclass
class Outputs:
    """A set of output files committed together: all renamed into place, or none.

    ``stage(path)`` gives a temporary path to write; ``commit()`` fsyncs and
    renames every staged file; ``discard()`` removes them. Used as a context
    manager it discards on error.
    """

    _staged: dict[Path, Path] = field(default_factory=dict)

    def check_writable(self, *paths: Path) -> None:
        """Fail before any charge if an output cannot be written (folder is a file, etc.)."""
        for path in paths:
            path = Path(path)
            if path.exists() and path.is_dir():
                raise UsageError(f"{path}: is a folder; give a file name for this output")
            parent = path.parent
            while not parent.exists():
                parent = parent.parent
            if not parent.is_dir() or not os.access(parent, os.W_OK):
                raise UsageError(f"{path}: cannot write here ({parent} is not a writable folder)")

    def stage(self, path: Path) -> Path:
        path = Path(path)
        if path in self._staged:
            raise UsageError(f"{path}: two outputs of this run would have the same name")
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        self._staged[path] = Path(tmp)
        return Path(tmp)

    def write_bytes(self, path: Path, data: bytes) -> None:
        self.stage(path).write_bytes(data)

    def write_text(self, path: Path, text: str) -> None:
        self.write_bytes(path, text.encode("utf-8"))

    def commit(self) -> list[Path]:
        mode = 0o666 & ~_umask()  # mkstemp makes 0600 files; outputs follow the user's umask
        for tmp in self._staged.values():
            os.chmod(tmp, mode)
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
        for final, tmp in self._staged.items():
            os.replace(tmp, final)
        for folder in {p.parent for p in self._staged}:
            _fsync_dir(folder)
        done = list(self._staged)
        self._staged.clear()
        return done

    def discard(self) -> None:
        for tmp in self._staged.values():
            tmp.unlink(missing_ok=True)
        self._staged.clear()

    def __enter__(self) -> Outputs:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is not None:
            self.discard()


def envelope(kind: str, payload: dict[str, Any], *, dataset: str, spec_digest: str,
             epsilon: float, delta: float, run_id: str, seeded: bool,
             neighbouring: str = NEIGHBOURING_RELATION) -> dict[str, Any]:
    """Wrap a released artefact with what is needed to trust and trace it.

    The envelope records the schema version, dpcli version, the neighbouring
    relation, the dataset id, spec digest, the (ε, δ) the run spent and the
    ledger run id that charged it.
    """
    return {
        "format": ENVELOPE_FORMAT,
        "schema_version": ENVELOPE_SCHEMA_VERSION,
        "kind": kind,
        "dpcli_version": __version__,
        "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "dataset": dataset,
        "spec_digest": spec_digest,
        "neighbouring": neighbouring,
        "epsilon": epsilon,
        "delta": delta,
        "ledger_run_id": run_id,
        "seeded": seeded,
        "payload": payload,
    }


def read_envelope(path: Path, kind: str | None = None) -> dict[str, Any]:
    """Load a dpcli JSON artefact, checking its format, schema version and kind."""
    from dpcli.errors import DataError

    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a readable dpcli JSON file ({type(exc).__name__})") from None
    if not isinstance(obj, dict) or obj.get("format") != ENVELOPE_FORMAT:
        raise DataError(f"{path}: not a dpcli output (no 'format: dpcli' envelope)")
    version = obj.get("schema_version")
    if version != ENVELOPE_SCHEMA_VERSION:
        raise DataError(f"{path}: schema_version {version!r} is not supported by dpcli "
                        f"{__version__} (expected {ENVELOPE_SCHEMA_VERSION})")
    if kind is not None and obj.get("kind") != kind:
        raise DataError(f"{path}: holds a {obj.get('kind')!r}, expected a {kind!r}")
    return obj
