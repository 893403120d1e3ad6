"""One spelling per storage location, so identity checks cannot be fooled by how a path is written.

``/chk/a``, ``/chk/a/``, ``/chk//a``, ``file:/chk/a``, ``file:///chk/a`` and ``file://localhost/chk/a`` are
one directory: two streaming queries given these checkpoints share one checkpoint, and two writers given
these table URIs write one table. Pure (stdlib only): the conflict model and the lease keys both use it.

:func:`table_identity` goes further for tables: scheme spellings that open the same object (``s3a://b/t``
and ``s3://b/t``; ``gcs://`` and ``gs://``) and percent-encoded paths are one table. What needs the
filesystem (a symlinked local directory and its target) is resolved at the edge, by
:func:`deltaguard.writes.table_uri.table_key`, before this runs.
"""

from __future__ import annotations

import posixpath
import re
from urllib.parse import unquote

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):(.*)$", re.DOTALL)

#: Scheme spellings that open the same object, mapped to one of them. Only schemes whose paths name the
#: same bucket/container and key are aliased:
#:
#: - ``s3a``/``s3n`` are Hadoop's connectors to S3; delta-rs (object_store) accepts ``s3``/``s3a`` for the
#:   same bucket and key (Delta Lake's "Storage configuration" page: the S3 section uses ``s3a://`` paths
#:   for what other tools call ``s3://``);
#: - ``gcs`` is object_store's synonym of ``gs``;
#: - ``abfss`` is ``abfs`` over TLS (ADLS Gen2, same file system and path); ``wasbs`` is ``wasb`` over TLS;
#: - ``azure``/``adl`` are object_store's synonyms of ``az`` (``<container>/<path>``). Hadoop's ``adl://``
#:   is ADLS Gen1, a different store: merging it into ``az`` can only make two tables share leases (a
#:   spurious wait), never let one table's writes pass each other.
SCHEME_ALIASES: dict[str, str] = {
    "s3a": "s3",
    "s3n": "s3",
    "gcs": "gs",
    "abfss": "abfs",
    "wasbs": "wasb",
    "azure": "az",
    "adl": "az",
}


def normalise_location(location: str) -> str:
    """The canonical spelling of a path or URI.

    Local files lose their ``file:`` scheme and ``localhost`` authority; repeated slashes, ``.`` segments
    and a trailing slash are removed; a scheme and an object-store bucket are lower-cased (they are
    case-insensitive), the rest of the path keeps its case.

    :param location: an absolute path or a ``scheme:`` URI.
    """
    text = location.strip()
    match = _SCHEME.match(text)
    if match is None or len(match.group(1)) == 1:  # no scheme (or a Windows drive letter)
        return _clean_path(text)
    scheme, rest = match.group(1).lower(), match.group(2)
    if scheme == "file":
        if rest.startswith("//"):
            authority, _, path = rest[2:].partition("/")
            if authority.lower() not in ("", "localhost"):
                return f"file://{authority}{_clean_path('/' + path)}"
            rest = "/" + path
        return _clean_path(rest)
    if rest.startswith("//"):
        authority, _, path = rest[2:].partition("/")
        cleaned = _clean_path("/" + path) if path else ""
        return f"{scheme}://{authority.lower()}{'' if cleaned == '/' else cleaned}"
    return f"{scheme}:{rest.rstrip('/')}"


def _clean_path(path: str) -> str:
    if not path:
        return path
    cleaned = posixpath.normpath(path)
    if cleaned.startswith("//"):  # POSIX keeps a leading double slash; no object store or Linux path needs it
        cleaned = "/" + cleaned.lstrip("/")
    return cleaned


def table_identity(location: str) -> str:
    """One identity per Delta table, for lease keys, commit coordination and the UI.

    :func:`normalise_location`, then the scheme mapped through :data:`SCHEME_ALIASES` and the path
    percent-decoded (``s3://b/my%20t`` and ``s3://b/my t`` are one object: object_store and Hadoop decode
    the URI path to the key). Conflating two spellings that are different tables only makes their writes
    wait for each other; telling apart two spellings of one table lets conflicting writes run at once, so
    every doubtful alias is conflated. Symlinks need the filesystem: the edge resolves them first
    (:func:`deltaguard.writes.table_uri.table_key`).

    :param location: an absolute path or a ``scheme:`` URI (a catalog name has no ``/`` or ``:`` and is
        only lower-cased).
    """
    text = location.strip()
    if "/" not in text and ":" not in text:
        return text.replace("`", "").lower()  # a catalog table name: case-insensitive in Spark's catalog
    text = normalise_location(text)
    match = _SCHEME.match(text)
    if match is None or len(match.group(1)) == 1:
        return _clean_path(unquote(text))
    scheme, rest = match.group(1).lower(), match.group(2)
    scheme = SCHEME_ALIASES.get(scheme, scheme)
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        path = _clean_path("/" + unquote(path)) if slash else ""
        return f"{scheme}://{authority}{'' if path == '/' else path}"
    return f"{scheme}:{unquote(rest)}"
