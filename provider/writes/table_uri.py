"""Table URIs: which schemes deltaguard accepts and how a relative table name joins a base URI.

No Airflow, no engine, so the operators can reject a bad URI before any lease is taken; only
:func:`local_realpath` reads the filesystem (symlinks of local tables, also when a local table location is
checked against the system directories).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from deltaguard.exceptions import TableUriError

#: schemes delta-rs (object_store) and delta-spark can open.
KNOWN_SCHEMES: frozenset[str] = frozenset(
    {"file", "s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "azure", "memory", "hdfs", "lakefs"}
)

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")

#: Pseudo filesystems of the kernel: no table lives inside them (writing there reaches devices and processes).
PSEUDO_FILESYSTEMS: tuple[str, ...] = ("/proc", "/sys", "/dev")
#: Directories of the operating system itself, refused as a table's location (a table may live below them).
SYSTEM_DIRECTORIES: frozenset[str] = frozenset(
    {
        "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/media", "/mnt",
        "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var",
    }
)  # fmt: skip


def uri_scheme(uri: str) -> str | None:
    """The lower-cased scheme of ``uri`` or ``None`` for a plain path."""
    match = _SCHEME.match(uri)
    return match.group(1).lower() if match else None


def check_table_uri(uri: str, *, table_location: bool = True) -> str:
    """Return ``uri`` stripped, or raise :class:`TableUriError` if no engine could open it.

    :param uri: an absolute local path or a ``scheme://`` URI.
    :param table_location: ``uri`` is where a table lives (not a base URI tables are named under): it may
        not be a system directory or lie inside a pseudo filesystem (:func:`_check_local_location`).
    """
    text = uri.strip()
    if not text:
        raise TableUriError("the table URI is empty")
    if "\x00" in text:
        raise TableUriError(f"table URI {text!r} holds a NUL character")
    scheme = uri_scheme(text)
    if scheme is None:
        if not text.startswith("/"):
            raise TableUriError(f"table {text!r} is a relative path and no base URI was configured")
        if table_location:
            _check_local_location(text)
        return text
    if scheme not in KNOWN_SCHEMES:
        raise TableUriError(
            f"unknown table URI scheme {scheme!r} in {text!r}; known: {', '.join(sorted(KNOWN_SCHEMES))}"
        )
    if scheme == "file" and table_location:
        _check_local_location(text)
    return text


def _check_local_location(uri: str) -> None:
    """Refuse a local table location that is a system directory or inside a pseudo filesystem.

    Both the location as written and with its symlinks resolved are checked (``/proc/self`` is a link, and
    so may be a directory that points at ``/``).

    :raises TableUriError: naming the location.
    """
    from deltaguard.core.locations import normalise_location

    written = normalise_location(uri)
    if not written.startswith("/"):
        return  # file://host/...: a remote file system, not this machine's
    for path in dict.fromkeys((written, local_realpath(uri))):
        if path in SYSTEM_DIRECTORIES:
            raise TableUriError(
                f"table location {uri!r} is the system directory {path!r}: give the table its own directory"
            )
        inside = next((root for root in PSEUDO_FILESYSTEMS if path.startswith(root + "/")), None)
        if inside is not None:
            raise TableUriError(
                f"table location {uri!r} is inside the pseudo filesystem {inside}: no table lives there"
            )


def resolve_table_uri(table: str, base_uri: str | None) -> str:
    """Resolve a table name against a connection's base URI.

    An absolute path or a URI with a scheme is used as given; anything else (``sales/daily``) is joined to
    ``base_uri``. The result is checked with :func:`check_table_uri`.

    :param table: a table URI, absolute path or name relative to ``base_uri``.
    :param base_uri: the connection's base URI (``s3://bucket/warehouse``) or ``None``.
    """
    text = table.strip()
    if not text:
        raise TableUriError("the table name is empty")
    if uri_scheme(text) is not None or text.startswith("/") or not base_uri:
        return check_table_uri(text)
    base = check_table_uri(base_uri, table_location=False).rstrip("/")
    relative = PurePosixPath(text)
    if ".." in relative.parts:
        raise TableUriError(f"table name {text!r} may not climb out of the base URI with '..'")
    joined = f"{base}/{relative.as_posix().lstrip('/')}"
    if uri_scheme(base) in (None, "file"):
        _check_local_location(joined)
    return joined


def table_key(uri: str) -> str:
    """The one identity of a table (lease scope, pool name, commit coordination, UI page).

    Every spelling of one table gives one key, or two writes of one table would be granted at once:
    ``file:///data/t``, ``file:/data/t`` and ``/data/t/`` (:func:`deltaguard.core.locations.normalise_location`);
    ``s3a://b/t`` and ``s3://b/t``, ``gcs://`` and ``gs://``, percent-encoded paths
    (:func:`deltaguard.core.locations.table_identity`); a symlinked local directory and its target
    (:func:`local_realpath`, here at the edge because it reads the filesystem).

    :param uri: a table URI, absolute path or catalog name.
    """
    from deltaguard.core.locations import table_identity

    return table_identity(local_realpath(uri))


def local_realpath(uri: str) -> str:
    """A local table location with its symlinks resolved (``os.path.realpath``); other URIs unchanged.

    A ``file:`` URI becomes a plain path (percent-decoded, as the engines open it). Components that do not
    exist yet (a table about to be created) are kept as given after the deepest existing one is resolved.

    :param uri: a table URI or absolute path.
    """
    import os
    from urllib.parse import unquote

    from deltaguard.core.locations import normalise_location

    text = normalise_location(uri)
    if not text.startswith("/"):
        return text  # an object store, a remote file:// host or a catalog name: nothing local to resolve
    if uri.strip().lower().startswith("file:"):
        text = unquote(text)
    return os.path.realpath(text)
