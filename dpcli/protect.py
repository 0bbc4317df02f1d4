"""Paths no output may replace: the ledger and its companions, the spec and its files, inputs.

Why: ``--out`` is typed by hand, and one slip (``--out ledger.jsonl``,
``tabulate v.csv --out v.csv``) would replace the budget's record, its secret
key or the private data with a release. Every command checks its outputs
here before it charges anything (exit 64, nothing touched).

An output is refused when it is, or resolves to, a protected file:

* the same resolved path (relative or absolute spelling, symlinks followed);
* the same (device, inode) when both exist (a hard link under another name);
* a path inside a protected path: writing inside an input folder (a Parquet
  folder, a synopsis folder), temporary files included, would change the
  input, and a folder output (roc, publish-grid) must not be created where a
  ledger's lock or key file belongs;
* a dpcli ledger or one of its companion files even when the command has no
  spec (predict, synthesize): a file whose ``<name>.key`` beside it holds a
  ledger key, or that key or lock itself.

A temporary file is written beside its output (same folder, a name of its
own), so it is covered by the folder rule.

A spending command replaces an existing file only when it is one of its own
earlier outputs (:func:`check_replacements`): its bytes (SHA-256) are exactly
those an earlier completed run of the same command recorded for that path in
the dataset's ledger. Anything else — a copy of the data, another tool's file,
another command's release (``tabulate --out keep.csv`` would write its record
to ``keep.json``, the name of a model that cost budget), an edited release, a
file copied over an earlier output — is refused before the charge, so a rerun
of a Makefile still overwrites its own results and an accident loses nothing.

``predict`` and ``synthesize`` spend nothing and so leave no ledger record: they
recognise their own earlier output by a mark in the file (:func:`check_own_output`),
a ``dpcli.output`` entry in a Parquet file's schema metadata (:func:`output_mark`),
or for predict's CSV the prediction columns its header ends with (a copy of the
data has none: predict refuses data that holds them). synthesize cannot mark a
CSV (its header is a subset of the data's columns), so it never replaces an
existing CSV.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from dpcli.errors import UsageError

Protected = tuple[str, Path | str]  # (what it is, for the message; the path)

_KEY_TEXT = re.compile(rb"\s*[0-9a-f]{64}\s*")


def spec_protected(spec: Any) -> list[Protected]:
    """The spec, every public file it names and the ledger's files (see ``companion_paths``)."""
    from dpcli.ledger import companion_paths, key_path

    ledger, *companions = companion_paths(spec.ledger_path)
    names = {key_path(ledger): "the ledger's key"}
    return [("the spec", spec.path), *(("a file the spec names", f) for f in spec.files),
            ("the ledger", ledger),
            *((names.get(c, "a file kept beside the ledger"), c) for c in companions)]


def inputs(what: str, *paths: Path | str | None) -> list[Protected]:
    """Input paths (None and remote URIs skipped) labelled ``what``."""
    from dpcli.data.location import is_remote, local_path

    return [(what, local_path(p)) for p in paths if p is not None and not is_remote(p)]


def model_inputs(path: Path | None, model: Any = None) -> list[Protected]:
    """A model file and, for a grid synopsis, its cells file beside it."""
    if path is None:
        return []
    found = inputs("the model", path)
    payload = getattr(model, "payload", None)
    if isinstance(payload, dict) and isinstance(payload.get("cells_file"), str):
        folder = Path(path) if Path(path).is_dir() else Path(path).parent
        found += inputs("the model's cells file", folder / payload["cells_file"])
    return found


def check_outputs(outputs: Iterable[Path | None], protected: Sequence[Protected]) -> None:
    """UsageError (exit 64) naming the first output that would replace a protected file."""
    guarded = [_Target(what, Path(p)) for what, p in protected]
    for out in outputs:
        if out is None:
            continue
        out = Path(out)
        real = Path(os.path.realpath(out))
        stat = _stat(out)
        for g in guarded:
            if real == g.real or (stat is not None and g.stat is not None
                                  and os.path.samestat(stat, g.stat)):
                raise UsageError(f"{out}: is {g.what} ({g.path}); an output must not replace "
                                 "it. Choose another output path (nothing was charged)")
            if g.real in real.parents:  # an input folder, or a folder output created there
                raise UsageError(f"{out}: is inside {g.what} ({g.path}); write outputs "
                                 "elsewhere (nothing was charged)")
        ledger = ledger_of(real)
        if ledger is not None:
            raise UsageError(f"{out}: is {'a file of ' if ledger != real else ''}the dpcli "
                             f"ledger {ledger}; an output must not replace it. Choose another "
                             "output path (nothing was charged)")


def recorded_location(output: dict[str, Any]) -> str:
    """The absolute path a ledger entry's output was written at: its ``resolved`` path, or for
    an entry written before dpcli recorded one, its ``path`` resolved against today's working
    folder (what such an entry can prove: docs/ledger.md). "" when it names none."""
    resolved = output.get("resolved")
    if isinstance(resolved, str) and os.path.isabs(resolved):
        return resolved
    given = output.get("path")
    return os.path.realpath(given) if isinstance(given, str) and given else ""


#: outputs hashed so far by one run (its ``--reuse`` look): resolved path -> (what the path
#: held when hashing began, :func:`dpcli.io.path_state`; its SHA-256)
Hashed = dict[str, tuple[tuple[int, ...] | None, str]]


def output_digest(path: Path | str, hashed: Hashed | None = None) -> str:
    """The SHA-256 of the file at ``path``, hashed once per run: taken from ``hashed`` when the
    path still holds what it held when that digest was computed, else computed (and kept)."""
    from dpcli.fingerprint import file_digest
    from dpcli.io import path_state

    if hashed is None:
        return file_digest(Path(path))
    real = os.path.realpath(path)
    state = path_state(real)
    known = hashed.get(real)
    if known is not None and state is not None and known[0] == state:
        return known[1]
    digest = file_digest(Path(real))   # the state is taken first: a write meanwhile changes it
    hashed[real] = (state, digest)
    return digest


def check_replacements(outputs: Iterable[Path], command: str,
                       runs: Callable[[], Iterable[Any]], *,
                       hashed: Hashed | None = None) -> None:
    """UsageError (exit 64) for an output that exists and is not an earlier output of ``command``.

    An earlier output is a file whose bytes (SHA-256) are exactly those an earlier completed
    run of ``command`` recorded for that path. The path alone is not enough: whatever is
    there now (a copy of the data, an edited release, another command's release copied over
    it) may be all that is left of it. The refusal says which case it is: another command's
    release (named), this command's release recorded under another path, a recorded output
    whose bytes changed since, or a file no run recorded.

    Paths are compared as absolute, resolved paths (:func:`recorded_location`), so a rerun
    from another folder, or by another spelling of the same file, replaces its own output,
    and a copy at the same relative path from another folder is not taken for it.

    ``runs()`` gives the dataset's runs as the ledger records them (``RunView``: command,
    run_id, status, outputs with their SHA-256); it is called only when an output exists.
    ``hashed``: the outputs this run hashed already (``--reuse``'s look), not read again.
    """

    existing = [Path(p) for p in outputs if Path(p).is_file()]
    if not existing:
        return
    by_digest: dict[str, tuple[str, str, str]] = {}  # sha256 -> (command, run_id, path)
    by_path: dict[str, dict[str, str]] = {}  # real path -> {sha256: command} recorded there
    for run in runs():
        if run.status != "complete":
            continue
        for out in run.outputs:
            digest, where = out.get("sha256", ""), recorded_location(out)
            by_digest[digest] = (run.command, run.run_id, where or out.get("path", ""))
            if where:
                by_path.setdefault(where, {})[digest] = run.command
    for path in existing:
        digest = output_digest(path, hashed)
        here = by_path.get(os.path.realpath(path), {})
        if here.get(digest) == command:
            continue  # this command's own recorded bytes at this path: a rerun replaces them
        _refuse_replacement(path, command, by_digest.get(digest), recorded_here=bool(here))


def _refuse_replacement(path: Path, command: str, hit: tuple[str, str, str] | None, *,
                        recorded_here: bool) -> None:
    tail = "Remove it or choose another output path (nothing was charged)"
    if hit is not None and hit[0] != command:
        raise UsageError(
            f"{path}: holds the release of `dpcli {hit[0]}` (ledger run {hit[1]}); this "
            f"`dpcli {command}` would replace it. Choose another output path, or remove "
            "the file first (nothing was charged)")
    if hit is not None:
        raise UsageError(
            f"{path}: holds the release of ledger run {hit[1]}, recorded at {hit[2]}, not at "
            f"this path (a copy?); dpcli replaces a file only when it holds exactly what the "
            f"ledger recorded for that path. {tail}")
    if recorded_here:
        raise UsageError(
            f"{path}: an earlier run wrote this path, but the file no longer holds what the "
            "ledger recorded for it (edited, or another file copied over it); dpcli replaces "
            f"only its own earlier outputs byte for byte, never another file. {tail}")
    raise UsageError(
        f"{path}: already exists and is not an output this dataset's ledger recorded; dpcli "
        "replaces only its own earlier outputs of the same command, byte for byte as "
        "recorded, never another file (a copy of the data, another tool's file, an edited "
        f"release). {tail}")


#: the Parquet schema-metadata key that marks a file as an output of predict or synthesize
OUTPUT_MARK = b"dpcli.output"


def output_mark(command: str) -> dict[bytes, bytes]:
    """Schema metadata naming ``command`` as the file's writer (see :func:`check_own_output`)."""
    from dpcli import __version__

    return {OUTPUT_MARK: json.dumps({"command": command, "dpcli_version": __version__},
                                    sort_keys=True).encode()}


def check_own_output(path: Path, command: str, fmt: str,
                     csv_header: Callable[[list[str]], bool] | None = None) -> None:
    """UsageError (exit 64) when ``path`` exists and is not an earlier output of ``command``.

    For commands without a ledger record (predict, synthesize): a Parquet file is
    theirs when its schema metadata holds :data:`OUTPUT_MARK` naming ``command``; a CSV
    when ``csv_header`` accepts its header (None: no CSV is recognised). Called
    before anything is written, so a refusal leaves every file as it was.
    """
    path = Path(path)
    if not path.exists() or path.is_dir():  # a folder is refused by check_writable
        return
    if fmt == "parquet":
        writer = _parquet_mark(path)
        if writer == command:
            return
        why = (f"it holds the output of `dpcli {writer}`" if writer is not None else
               f"its Parquet metadata has no {OUTPUT_MARK.decode()} mark of `dpcli {command}`")
    elif csv_header is None:
        why = (f"`dpcli {command}` cannot mark a CSV as its own, so it never replaces an "
               "existing CSV (write .parquet to let a rerun replace its output)")
    else:
        header = _csv_header(path)
        if header is not None and csv_header(header):
            return
        why = f"its header does not end with the columns `dpcli {command}` adds"
    raise UsageError(
        f"{path}: already exists and is not an earlier output of `dpcli {command}` ({why}); "
        "dpcli replaces only its own earlier outputs, never another file (a copy of the "
        "data, another tool's file). Remove it or choose another output path (nothing was "
        "written)")


def parquet_mark(path: Path) -> dict[str, Any] | None:
    """A Parquet file's output mark (``command``, ``dpcli_version``), read from its footer;
    None without one (or not Parquet, or a broken mark: not recognisably dpcli's)."""
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(path).metadata or {}
        found = json.loads(meta[OUTPUT_MARK])
    except Exception:  # not Parquet, no mark, a broken mark: not recognisably ours
        return None
    if not isinstance(found, dict) or not isinstance(found.get("command"), str):
        return None
    return found


def _parquet_mark(path: Path) -> str | None:
    """The command named by a Parquet file's output mark; None without one (or not Parquet)."""
    found = parquet_mark(path)
    return None if found is None else str(found["command"])


def _csv_header(path: Path) -> list[str] | None:
    """The first record of a CSV file (read from its first MiB), None when unreadable."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 20)
        return next(csv.reader(io.StringIO(head.decode("utf-8-sig", errors="replace"))))
    except (OSError, StopIteration, csv.Error):
        return None


def ledger_of(path: Path) -> Path | None:
    """The ledger whose file (or companion file) ``path`` is, judged by a key beside it."""
    from dpcli.ledger import companion_paths, key_path

    name = path.name
    cuts = [len(name)] + [i for i in range(len(name) - 1, 0, -1) if name[i] == "."]
    for cut in cuts:
        ledger = path.with_name(name[:cut])
        if path in companion_paths(ledger) and _holds_key(key_path(ledger)):
            return ledger
    return None


def _holds_key(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return _KEY_TEXT.fullmatch(fh.read(200)) is not None
    except OSError:
        return False


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


class _Target:
    def __init__(self, what: str, path: Path) -> None:
        self.what = what
        self.path = path
        self.real = Path(os.path.realpath(path))
        self.stat = _stat(path)
