"""Outputs: atomic writes and the JSON envelope around every released artefact.

A run that fails leaves no partial output: every file is written to a
temporary name in its destination folder, fsynced, and renamed into place
only when the whole set is ready (:class:`Outputs`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import socket
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dpcli import NEIGHBOURING_RELATION, __version__
from dpcli.errors import (
    CannotCreate,
    DpcliError,
    IOFailure,
    UsageError,
    describe_environment,
    environment_errno,
)

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


#: dpcli's temporary files: ``.<name>.dpcli-tmp-<pid>-<host>-<random>`` beside their output
TEMP_MARK = ".dpcli-tmp-"
_TEMP_NAME = re.compile(r"^\..*" + re.escape(TEMP_MARK) + r"(\d+)-([0-9a-f]{8})-[^/]*$")
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, another user's
        return True
    return True


def remove_stale_temps(folder: Path) -> list[Path]:
    """Remove dpcli's temporary files in ``folder`` left by dead runs of this host.

    A run killed with SIGKILL (or a crash) cannot remove its own; the next run
    writing into the folder does. A temporary file of a live process, or of
    another host sharing the folder, is kept. Returns what was removed.
    """
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        m = _TEMP_NAME.match(entry.name)
        if m is None or m.group(2) != _HOST:
            continue
        pid = int(m.group(1))
        if pid == os.getpid() or _alive(pid):
            continue
        with contextlib.suppress(OSError):
            os.unlink(entry.path)
            removed.append(Path(entry.path))
    return removed


#: the bytes an output's file system (and the file size limit) must offer before a charge
MIN_ROOM = 1 << 20
#: the free inodes it must offer (each output is written beside itself, then renamed; a
#: claim file beside it; a folder for a grid or a curve)
MIN_FILES = 16


def writable_bytes(folder: Path) -> int | None:
    """How many bytes a file under ``folder`` may take: the file system's space available
    to this user (0 when it has fewer than MIN_FILES free inodes), capped by the process's
    file size limit (``ulimit -f``); None where the system cannot say."""
    room: int | None = None
    with contextlib.suppress(OSError, AttributeError):
        st = os.statvfs(folder)
        room = st.f_bavail * st.f_frsize
        if st.f_files and st.f_favail < MIN_FILES:
            # no inode left for a new file (its temporary twin, a claim): no room either
            # (tester 14: nr_inodes=3 charged, then failed on ENOSPC)
            room = 0
    with contextlib.suppress(ImportError, OSError, ValueError):
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
        if soft != resource.RLIM_INFINITY:
            room = soft if room is None else min(room, soft)
    return room


def require_ledger_room(ledger: Path) -> None:
    """IOFailure (exit 74) before a charge when the ledger file cannot grow by MIN_ROOM: its
    file system's space or inodes (each append rewrites the checkpoint beside it), or the
    process's file size limit less the ledger's size. A run charged there would release its
    outputs and then fail to record its end (testers 16, 17: the run shown interrupted, its
    outputs refused as unknown on the retry)."""
    real = Path(os.path.realpath(ledger))
    room = writable_bytes(real.parent)
    with contextlib.suppress(ImportError, OSError, ValueError):
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
        if soft != resource.RLIM_INFINITY:
            left = soft - real.stat().st_size
            room = left if room is None else min(room, left)
    if room is not None and room < MIN_ROOM:
        raise IOFailure(f"{real}: the ledger cannot grow: {max(room, 0):,} bytes can be "
                        f"written to it (free space and inodes under {real.parent}, or the "
                        f"process's file size limit, `ulimit -f`, less its size), less than "
                        f"the {MIN_ROOM:,} a run needs to record itself; nothing was charged")


def refuse_special(path: Path) -> None:
    """UsageError (exit 64) if ``path`` is, or links to, something other than a regular file or
    folder: a device (``/dev/null``, ``/dev/stdout``), a FIFO or a socket.

    Why: an output is written beside its path and renamed over it, which would replace the
    device node itself with a regular file holding the release (run as root, ``--out
    /dev/null`` breaks the system's /dev/null for every process) and leave it readable by
    anyone.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # absent (or a dangling link): a new file takes the name
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        kind = ("a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket")
        link = " (through a symbolic link)" if path.is_symlink() else ""
        raise UsageError(f"{path}: is {kind}{link}, not a regular file; dpcli writes its "
                         "outputs to files it can replace whole. Give a file path (nothing "
                         "was charged)")


def refuse_symlink(path: Path) -> None:
    """UsageError (exit 64) if the output ``path`` is a symbolic link (to a file, or dangling).

    Why: an output is written beside its path and renamed over it, and a rename replaces the
    link itself, not its target: the link would then name the new release while its target
    kept the older one, and whoever reads the target (another project's path, a shared
    results folder) would see stale results without a word. Writing through the link
    (a rename in the target's folder) would instead make ``--out`` write wherever the link
    points, which the user may not know either. So, like a device, it is refused before the
    charge, naming both; give the target's path to replace it (docs/ledger.md).
    """
    if not os.path.islink(path):
        return
    target = os.path.realpath(path)
    try:
        shown = os.readlink(path)
    except OSError:  # pragma: no cover - removed meanwhile
        shown = target
    dangling = "" if os.path.exists(path) else ", which does not exist"
    raise UsageError(f"{path}: is a symbolic link to {shown} ({target}{dangling}); dpcli "
                     "replaces an output by renaming a new file over its path, which would "
                     "replace the link and leave its target with the older release. Write to "
                     f"the target's path ({target}) instead, or remove the link (nothing was "
                     "charged)")


def path_state(path: Path | str) -> tuple[int, ...] | None:
    """What is at ``path`` now, cheaply (device, inode, size, modification time; None when
    absent): compared before an output replaces it, to see a write since a check. The path
    itself, not a link's target: a link put there since the check is a change."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass
class Outputs:
    """A set of output files committed together: all renamed into place, or none.

    ``stage(path)`` gives a temporary path to write; ``commit()`` fsyncs and
    renames every staged file; ``discard()`` removes them. Used as a context
    manager it discards on error, and turns an environment failure (disk
    full, permission, read-only file system) into an :class:`IOFailure` that
    names the output (exit 74).

    Files are created 0600 and stay so when staged ``private=True`` (rows of
    private data); other outputs get the usual mode, 0666 minus the umask.
    """

    #: hash each output before its rename (a spending run's, for its ledger record)
    digest: bool = False
    #: what each output path held when the pre-charge checks passed (:func:`path_state`,
    #: keyed by absolute path; filled by the caller's check): a path that changed since is
    #: not replaced (a file written there while the run ran is kept)
    expected: dict[str, tuple[int, ...] | None] = field(default_factory=dict)
    _staged: dict[Path, Path] = field(default_factory=dict)
    #: SHA-256 of each committed output as written (with ``digest``)
    digests: dict[Path, str] = field(default_factory=dict)
    _private: set[Path] = field(default_factory=set)
    _cleaned: set[Path] = field(default_factory=set)
    _last: Path | None = None

    def check_writable(self, *paths: Path | None,
                       protected: Sequence[tuple[str, Path | str]] = ()) -> None:
        """Fail before any charge if an output cannot or must not be written.

        Refused: a folder where a file is due, a path through a file, a symbolic
        link (:func:`refuse_symlink`), two outputs that are one file, and any
        output that would replace a ``protected`` file (see :mod:`dpcli.protect`;
        a ledger is protected even when not listed), exit 64; a folder the
        system will not let us write (permission, read-only), exit 74.
        """
        from dpcli.protect import check_outputs

        real = [Path(p) for p in paths if p is not None]
        check_outputs(real, protected)
        named: dict[str, Path] = {}
        for path in real:
            same = named.setdefault(os.path.realpath(path), path)
            if same is not path:
                # the second rename would replace the first output: one release lost
                raise UsageError(f"{path}: is also this run's output {same} (one file by two "
                                 "names); give each output its own file (nothing was charged)")
        for path in real:
            if path.exists() and path.is_dir():
                raise UsageError(f"{path}: is a folder; give a file name for this output")
            refuse_special(path)   # a link to a device says so: the graver mistake
            refuse_symlink(path)
            parent = path.parent
            while not parent.exists():
                parent = parent.parent
            if not parent.is_dir():  # a path through a file: the command line's mistake
                raise UsageError(f"{path}: cannot write here ({parent} is not a folder)")
            if not os.access(parent, os.W_OK):
                # the system would refuse the write (permission, read-only file system): the
                # environment's refusal, exit 74 as docs/exit-codes.md defines it, found first
                raise IOFailure(f"{path}: cannot write here ({parent} is not writable: "
                                "permission or a read-only file system); nothing was charged")
            room = writable_bytes(parent)
            if room is not None and room < MIN_ROOM:
                # a full disk met after the charge keeps the charge, and every retry pays
                # again (tester 13): a disk that cannot hold even a small output is refused
                # before it (what fits between MIN_ROOM and the output's size is still met
                # after, exit 74)
                raise IOFailure(f"{path}: cannot write here: {room:,} bytes can be written "
                                f"under {parent} (free space and inodes on its file system, or the "
                                f"process's file size limit, `ulimit -f`), less than the "
                                f"{MIN_ROOM:,} a run needs; nothing was charged")

    def stage(self, path: Path, *, private: bool = False) -> Path:
        path = Path(path)
        if path in self._staged:
            raise UsageError(f"{path}: two outputs of this run would have the same name")
        self._last = path
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.parent not in self._cleaned:
            self._cleaned.add(path.parent)
            remove_stale_temps(path.parent)
        from dpcli import signals

        # a signal between the file's creation and its record would leave it behind: the
        # clean-up removes only what _staged names (held, then raised once recorded)
        with signals.held():
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}{TEMP_MARK}{os.getpid()}-{_HOST}-",
                                       dir=path.parent)
            os.close(fd)
            self._staged[path] = Path(tmp)
        if private:
            self._private.add(path)
        return Path(tmp)

    def write_bytes(self, path: Path, data: bytes, *, private: bool = False) -> None:
        self.stage(path, private=private).write_bytes(data)

    def write_text(self, path: Path, text: str) -> None:
        self.write_bytes(path, text.encode("utf-8"))

    def commit(self) -> list[Path]:
        """Rename every staged file into place; a signal meanwhile is held (see
        :func:`dpcli.signals.held`): the set is renamed whole, then the caller
        records it (``charged``) or calls ``signals.deliver()``."""
        from dpcli import signals

        with signals.held(keep=True):
            return self._commit()

    def _commit(self) -> list[Path]:
        from dpcli.fingerprint import file_digest

        mode = 0o666 & ~_umask()  # mkstemp makes 0600 files; outputs follow the user's umask
        for final, tmp in self._staged.items():
            self._last = final
            os.chmod(tmp, 0o600 if final in self._private else mode)
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            if self.digest:  # the ledger records what this run wrote, not what the path holds
                self.digests[final] = file_digest(tmp)
        for final in self._staged:
            key = os.path.abspath(final)
            if key in self.expected and path_state(final) != self.expected[key]:
                self._last = final
                # after the charge: not a usage error (64 charges nothing), EX_CANTCREAT
                raise CannotCreate(
                    f"{final}: changed while this run ran (written or replaced by another "
                    "process after the checks before the charge); it is kept, and nothing "
                    "of this run was written. Rerun with a free output path")
        done = []
        for final in list(self._staged):
            self._last = final
            os.replace(self._staged[final], final)
            del self._staged[final]  # a later failure must not unlink what is now the output
            done.append(final)
        for folder in {p.parent for p in done}:
            _fsync_dir(folder)
        return done

    def discard(self) -> None:
        for tmp in self._staged.values():
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        self._staged.clear()

    def __enter__(self) -> Outputs:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, _tb: object) -> None:
        if exc_type is None:
            return
        self.discard()
        if exc is not None and not isinstance(exc, DpcliError) \
                and environment_errno(exc) is not None:
            where = self._last if self._last is not None else getattr(exc, "filename", None)
            raise IOFailure(f"cannot write {describe_environment(exc, where)} (nothing "
                            "partial is left at that path)") from exc


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
    from dpcli.errors import DataError, NoInput

    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NoInput(f"{path}: file not found") from None
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


def envelope_cautions(env: dict[str, Any]) -> list[str]:
    """What a release's envelope says against using it: the degeneracy check's finding and a
    forecast verdict that was not usable, as recorded when it was released (for ``show`` and
    ``predict``, so the warning travels with the file)."""
    out: list[str] = []
    payload = env.get("payload") if isinstance(env.get("payload"), dict) else {}
    found = payload.get("degeneracy") if isinstance(payload, dict) else None
    if isinstance(found, dict) and found.get("degenerate"):
        what = []
        if found.get("constant_score") or found.get("near_constant_score"):
            what.append("(near-)constant score")
        if found.get("never_predicted"):
            what.append("never predicts " + ", ".join(map(repr, found["never_predicted"])))
        if found.get("one_class_on_rows"):
            what.append(f"puts (almost) every training row in one class "
                        f"({found['one_class_on_rows']})")
        if found.get("no_signal"):
            what.append("no signal beyond the noise")
        if found.get("uncalibrated_score"):
            what.append(f"uncalibrated probabilities (it decides at log-odds "
                        f"{found.get('decision_log_odds', 0):.3g}: rank and decide by its "
                        "class, not by its score)")
        out.append("released as a degenerate model: " + ("; ".join(what) or "see 'degeneracy'")
                   + " — its predictions may be (near) constant or one-class")
    # evaluate's no-skill, roc's AUC noise, an edited model file (roc, evaluate)
    for key in ("caution", "noise_dominates", "auc_caution", "model_caution"):
        if isinstance(payload, dict) and isinstance(payload.get(key), str):
            out.append(payload[key])
    # a released model's tables against its declared domains (train-nb)
    columns = payload.get("column_cautions") if isinstance(payload, dict) else None
    if isinstance(columns, list):
        out.extend(c for c in columns if isinstance(c, str))
    # an evaluation's or a curve's model was released with cautions of its own
    listed = payload.get("model_cautions") if isinstance(payload, dict) else None
    if isinstance(listed, list):
        out.extend(f"its model: {c}" for c in listed if isinstance(c, str))
    forecast = env.get("forecast")
    verdict = forecast.get("verdict") if isinstance(forecast, dict) else None
    if isinstance(verdict, dict) and verdict.get("usable") is False and verdict.get("text"):
        text = str(verdict["text"]).removeprefix("verdict: ")
        out.append(f"released with the verdict: {text}")
    return out
