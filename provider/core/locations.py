"""One spelling per storage location, so identity checks cannot be fooled by how a path is written.

``/chk/a``, ``/chk/a/``, ``/chk//a``, ``file:/chk/a``, ``file:///chk/a`` and ``file://localhost/chk/a`` are
one directory: two streaming queries given these checkpoints share one checkpoint, and two writers given
these table URIs write one table. Pure (stdlib only): the conflict model and the lease keys both use it.
"""

from __future__ import annotations

import posixpath
import re

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):(.*)$", re.DOTALL)


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
