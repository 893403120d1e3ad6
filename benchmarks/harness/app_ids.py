"""The inverse of :func:`deltaguard.writes.prepared.app_id`: which task instance an app id names.

The package only writes app ids; the benchmarks read them back to attribute a commit to its planned write,
and the tests to show that two different task instances never share one.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from deltaguard.writes.prepared import _ESCAPES


class AppIdParts(NamedTuple):
    """What an unshortened app id names (:func:`parse_app_id`)."""

    dag_id: str
    task_id: str
    map_index: int | None
    run_id: str | None


def _unescape(part: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(part):
        if part[i] == "%":
            code = part[i : i + 3]
            if code not in _ESCAPES.values():
                raise ValueError(f"not an escape written by app_id: {code!r}")
            out.append(bytes.fromhex(code[1:]).decode())
            i += 3
        else:
            out.append(part[i])
            i += 1
    return "".join(out)


def parse_app_id(value: str) -> AppIdParts:
    """The ``(dag_id, task_id, map_index, run_id)`` an unshortened :func:`~deltaguard.writes.prepared.app_id`
    was made of.

    :raises ValueError: for a shortened app id (it ends in a hash) or a text ``app_id`` never writes.
    """
    if "#" in value:
        raise ValueError(f"a shortened app id names its task only by hash: {value!r}")
    names, at, run = value.partition("@")
    parts = names.split("/")
    if len(parts) not in (2, 3) or (len(parts) == 3 and not re.fullmatch(r"[0-9]+", parts[2])):
        raise ValueError(f"not an app id written by app_id: {value!r}")
    map_index = int(parts[2]) if len(parts) == 3 else None
    return AppIdParts(_unescape(parts[0]), _unescape(parts[1]), map_index, _unescape(run) if at else None)
