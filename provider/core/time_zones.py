"""When two writes read date and timestamp literals the same way: their session time zones.

Spark reads ``TIMESTAMP '2024-01-01 02:00:00'`` (and a date compared with a timestamp column) in the
session's ``spark.sql.session.timeZone``: in a ``Europe/Paris`` session it is the instant that a ``UTC``
session writes ``TIMESTAMP '2024-01-01 01:00:00'`` (measured on delta-spark 4.4.0: the second of two
DELETEs with these predicates fails with a conflict). delta-rs reads a zone-less timestamp string as UTC
(measured on deltalake 1.6.6: ``ts = '2024-01-01 01:00:00'`` deletes the row stored as 01:00Z).

So literals of two writes are compared as written only when both writes read them in one known zone, and
that zone maps each of their local times to exactly one instant: a fixed offset always does; a zone with
daylight saving time does not for times in its spring gap (Spark moves ``02:30`` to ``03:30``, so both
name one instant) or its autumn fold (one wall-clock time, two instants).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

#: Spellings of UTC (Spark accepts region ids, ``Z``, ``UTC`` and offsets).
_UTC_NAMES = frozenset(
    {
        "utc",
        "z",
        "zulu",
        "gmt",
        "etc/utc",
        "etc/gmt",
        "etc/zulu",
        "universal",
        "etc/universal",
        "uct",
        "etc/uct",
        "gmt0",
        "etc/gmt0",
        "greenwich",
        "etc/greenwich",
    }
)
_OFFSET = re.compile(r"^(?:utc|gmt)?([+-])(\d{1,2})(?::?(\d{2}))?$")


def canonical_zone(zone: str | None) -> str | None:
    """``UTC`` for its spellings, ``+hh:mm`` for offsets, other ids as given (``None`` stays unknown).

    :param zone: a session time zone id.
    """
    if zone is None or not zone.strip():
        return None
    text = zone.strip()
    lowered = text.lower()
    if lowered in _UTC_NAMES:
        return "UTC"
    match = _OFFSET.match(lowered.replace(" ", ""))
    if match is not None:
        sign, hours, minutes = match.group(1), int(match.group(2)), int(match.group(3) or 0)
        if hours == 0 and minutes == 0:
            return "UTC"
        return f"{sign}{hours:02d}:{minutes:02d}"
    return text


def _fixed(zone: str) -> bool:
    return zone == "UTC" or zone[0] in "+-"


def _unambiguous(zone: str, local_times: Iterable[dt.datetime]) -> bool:
    """Every local time names exactly one instant in ``zone`` (``False`` when the zone is unknown here)."""
    try:
        info = ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    for local in local_times:
        early, late = local.replace(tzinfo=info, fold=0), local.replace(tzinfo=info, fold=1)
        if early.utcoffset() != late.utcoffset():
            return False  # in a fold (two instants) or a gap (Python gives the two offsets around it)
    return True


def zone_mismatch(first: str | None, second: str | None, local_times: Iterable[dt.datetime]) -> str | None:
    """Why two writes' zone-less literals cannot be compared as written, or ``None`` when they can.

    :param first: the session time zone of one write (``None``: unknown).
    :param second: the other write's.
    :param local_times: the local times their literals name (see
        :class:`deltaguard.core.sql.literal_columns.ZonedLiterals`).
    """
    a, b = canonical_zone(first), canonical_zone(second)
    if a is None or b is None:
        return (
            "the session time zone of "
            + ("both writes" if a is None and b is None else "one write")
            + " is unknown, so a timestamp or date literal without zone may name any instant"
        )
    if a != b:
        return f"the writes read literals without zone in different session time zones ({a}, {b})"
    if _fixed(a) or _unambiguous(a, local_times):
        return None
    return f"a literal names a local time that is skipped or repeated in {a} (daylight saving time)"
