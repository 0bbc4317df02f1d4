"""Where DATA lives: a local file or folder, or a URI that only Spark reads.

Why here: the CLI, the run's life cycle, the ledger's input digest and the
Spark engine must all agree on which DATA is remote; ``Path`` would fold
``s3a://bucket/dir`` into ``s3a:/bucket/dir``, so a remote location stays a
string from the command line on.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlparse

_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/")


def scheme(data: Path | str) -> str | None:
    """The URI scheme of ``data``, lower case, or None for a plain path."""
    m = _URI.match(str(data))
    return m.group(1).lower() if m else None


def is_remote(data: Path | str) -> bool:
    """Is ``data`` a URI of a non-local file system (``s3a://…``, ``hdfs://…``)?

    A ``file:`` URI is local. A scheme needs two letters, so ``C:/x`` is a path.
    """
    s = scheme(data)
    return s is not None and s != "file"


def local_path(data: Path | str) -> Path:
    """A local path, or a ``file:`` URI, as a :class:`Path`."""
    if scheme(data) == "file":
        return Path(unquote(urlparse(str(data)).path))
    return Path(data)


def parse_location(data: str) -> Path | str:
    """DATA as given on the command line: a remote URI kept verbatim, else a local Path.

    A URI with a user name, password or query string is refused (UsageError):
    it would be written into the ledger and messages, and a signed query
    string or a password there is a credential.
    """
    if is_remote(data):
        parts = urlparse(data)
        if parts.username or parts.password or parts.query:
            from dpcli.errors import UsageError

            raise UsageError(f"{parts.scheme}://{parts.hostname or ''}{parts.path}: the URI "
                             "carries credentials or a query string, which would be written "
                             "to the ledger; give credentials to Spark through its "
                             "configuration or environment instead")
        return data
    return local_path(data)


def location_text(data: Path | str) -> str:
    """How the ledger and outputs name DATA: the URI as given, or an absolute path."""
    return str(data) if is_remote(data) else str(local_path(data).resolve())
