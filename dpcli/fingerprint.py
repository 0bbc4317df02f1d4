"""Fingerprints of files for the audit log: plain SHA-256 of outputs, keyed digests of inputs.

Kept apart from the ledger so that the ledger does not depend on any statistics engine:
a remote input (a URI read by Spark) is fingerprinted by the listing its engine reads,
which only that engine can provide.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
from collections.abc import Iterable
from concurrent.futures import Future
from pathlib import Path

_CHUNK = 1 << 20

#: prefix of an input digest computed from a file listing instead of the bytes
LISTING_DIGEST = "hmac-sha256-of-listing:"


def file_digest(path: Path) -> str:
    """SHA-256 hex of a file's bytes, or of a directory's files.

    For a directory the digest covers every regular file below it (hidden ones
    too; symlinked directories are not followed), in sorted order of their
    relative POSIX paths: it hashes the lines ``"<relative path>\\0<sha256>\\n"``,
    so it changes when any file's name or content changes and does not depend
    on the order in which files were created. Files are read in 1 MiB chunks.
    """
    path = Path(path)
    if not path.is_dir():
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
        return digest.hexdigest()
    files: list[tuple[str, Path]] = []
    for folder, _dirs, names in os.walk(path):
        for name in names:
            full = Path(folder, name)
            if full.is_file():
                files.append((full.relative_to(path).as_posix(), full))
    digest = hashlib.sha256()
    for rel, full in sorted(files):
        digest.update(f"{rel}\0{file_digest(full)}\n".encode())
    return digest.hexdigest()


def listing_digest(files: Iterable[tuple[str, int, int]]) -> str:
    """SHA-256 hex of a file listing: (path, size in bytes, modification time in ms).

    Hashes the lines ``"<path>\\0<size>\\0<mtime>\\n"`` in sorted order, so it
    changes when a file is added, removed, renamed, resized or rewritten
    (as far as its modification time shows) — but not when bytes change in
    place with size and time kept: it is a digest of the listing, not of the
    contents.
    """
    digest = hashlib.sha256()
    for path, size, mtime in sorted((str(p), int(s), int(m)) for p, s, m in files):
        digest.update(f"{path}\0{size}\0{mtime}\n".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


#: keyed digests of local files computed (or being computed) in this process, by
#: (ledger, file, the file's identity and size and modification time): a run asks for its
#: input's digest up to twice (a seeded stream, the ledger entry) and starts it early
_MEMO: dict[tuple[object, ...], Future[str]] = {}
_MEMO_LOCK = threading.Lock()


def _memo_key(ledger_path: Path, data: Path | str) -> tuple[object, ...] | None:
    """The memo's key for a local regular file; None for anything else (not memoised)."""
    from dpcli.data.location import is_remote, local_path
    from dpcli.ledger import key_path

    if is_remote(data):
        return None
    path = local_path(data)
    try:
        st = path.stat()
        key = key_path(Path(ledger_path)).stat()  # a replaced or removed key: digest again
    except OSError:
        return None
    if not path.is_file():
        return None
    return (str(Path(ledger_path).resolve()), str(path.resolve()), st.st_dev, st.st_ino,
            st.st_size, st.st_mtime_ns, key.st_ino, key.st_size, key.st_mtime_ns)


def start_input_digest(ledger_path: Path, data: Path | str) -> None:
    """Start :func:`input_digest` of a local file in a background thread.

    Why: the digest reads every byte of the input once more; hashing releases the
    GIL, so it can run while the pre-charge validation pass reads the same file
    (from the page cache), instead of after it. The run asks :func:`input_digest`
    as before, which waits for this result (or raises its error) — nothing about
    what is recorded, or when, changes. Does nothing for a remote input or a folder.
    """
    key = _memo_key(ledger_path, data)
    if key is None:
        return
    with _MEMO_LOCK:
        if key in _MEMO:
            return
        future: Future[str] = Future()
        _MEMO[key] = future

    # every module the digest needs is imported here, in this thread: an import in the
    # worker while this thread imports too could meet a partly initialised module
    import dpcli.data.location
    import dpcli.ledger  # noqa: F401

    def work() -> None:
        try:
            future.set_result(_input_digest(ledger_path, data))
        except BaseException as exc:  # handed to whoever asks for the digest
            future.set_exception(exc)

    threading.Thread(target=work, name="dpcli-digest", daemon=True).start()


def input_digest(ledger_path: Path, data: Path | str) -> str:
    """Keyed digest of a private input (:func:`_input_digest`), computed once per process
    for an unchanged local file (see :func:`start_input_digest`)."""
    key = _memo_key(ledger_path, data)
    if key is None:
        return _input_digest(ledger_path, data)
    with _MEMO_LOCK:
        future = _MEMO.get(key)
        mine = future is None
        if future is None:
            future = _MEMO[key] = Future()
    if mine:
        try:
            future.set_result(_input_digest(ledger_path, data))
        except BaseException as exc:
            future.set_exception(exc)
    try:
        return future.result()
    except BaseException:
        with _MEMO_LOCK:  # an error (a missing key, say) is not remembered: asked again, retry
            if _MEMO.get(key) is future:
                del _MEMO[key]
        raise


def _input_digest(ledger_path: Path, data: Path | str) -> str:
    """Keyed digest (HMAC-SHA-256) of a private input file, for the audit log.

    A plain hash of private data lets anyone who knows all records but one
    test guesses of that record against the log; the key, kept beside the
    ledger and readable only by the custodian, prevents it.

    A local file or folder is digested by its bytes (``hmac-sha256:<hex>``).
    A remote URI read by the Spark engine (``s3a://…``, ``hdfs://…``) would
    have to be downloaded in full for that, so it is digested by the Hadoop
    file listing that engine reads (:func:`listing_digest` of every file),
    marked ``hmac-sha256-of-listing:<hex>``: that records which files of
    which size and age were read, not their bytes.
    """
    from dpcli.data.location import is_remote, local_path
    from dpcli.ledger import read_key

    key = read_key(ledger_path)
    if is_remote(data):
        from dpcli.stats.spark import input_listing  # only the engine that reads a URI lists it

        listed = listing_digest(input_listing(data))
        mac = hmac.new(key, f"listing:{listed}".encode(), hashlib.sha256).hexdigest()
        return f"{LISTING_DIGEST}{mac}"
    mac = hmac.new(key, file_digest(local_path(data)).encode(), hashlib.sha256).hexdigest()
    return f"hmac-sha256:{mac}"

