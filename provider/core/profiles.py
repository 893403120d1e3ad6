"""Engine profiles: which engine (and version) commits the writes, since each resolves conflicts differently."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class EngineName(StrEnum):
    DATABRICKS = "databricks"
    DELTA_SPARK = "delta-spark"
    DELTA_RS = "delta-rs"


#: Commits go through the storage's own put-if-absent (a rename that fails on an existing file, or a
#: conditional put): every writer of the table is excluded from every other's commit file.
STORAGE_COORDINATION = "storage"
#: Prefix of coordinators that exclude the commits of one driver only (delta-spark's
#: ``S3SingleDriverLogStore``, the default for ``s3``/``s3a``/``s3n`` paths; ``HDFSLogStore`` on local
#: files): ``single-driver:<driver>``. Two drivers committing at once may both write the same
#: ``_delta_log`` file, and the later one silently replaces the earlier commit.
SINGLE_DRIVER_COORDINATION = "single-driver"
#: The time zone delta-rs reads timestamp text without zone in (DataFusion's default ``+00:00``; measured on
#: deltalake 1.6.6: ``ts = '2024-01-01 01:00:00'`` deletes the row stored as 01:00Z).
DELTA_RS_TIME_ZONE = "UTC"


def parse_version(text: str) -> tuple[int, ...]:
    """Parse ``"14.3"`` / ``"14.3.x-scala2.12"`` / ``"1.6.6"`` into a comparable tuple of ints.

    :param text: a version string; the leading dotted run of integers is used.
    :raises ValueError: if the text does not start with a number.
    """
    parts: list[int] = []
    for piece in text.strip().split("."):
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
        if len(digits) != len(piece):
            break
    if not parts:
        raise ValueError(f"not a version: {text!r}")
    return tuple(parts)


@dataclass(frozen=True)
class EngineProfile:
    """The engine that will commit the writes.

    :param name: ``databricks``, ``delta-spark`` or ``delta-rs``.
    :param version: Databricks Runtime version (``"14.3"``), delta-spark version or delta-rs
        (``deltalake``) version.
    :param photon: Databricks only: the cluster runs Photon.
    :param row_level_preview: Databricks 14.0/14.1 only: the session sets
        ``spark.databricks.delta.rowLevelConcurrencyPreview = true``.
        :param row_level_off: Databricks only: do not count on row-level concurrency. "Isolation levels and write
        conflicts": under heavy load "the writer prioritizes latency over conflict resolution" and conflicts
        may occur that row-level concurrency would otherwise resolve; this judges every pair file by file.
    :param commit_coordination: what makes this engine's commits to the table mutually exclusive with other
        writers' (Delta Lake's "Storage configuration" page: a log store needs mutual exclusion on the commit
        file). :data:`STORAGE_COORDINATION` for stores with a put-if-absent every engine uses;
        ``single-driver:<driver>`` when only one driver's commits are excluded; otherwise the name of
        the shared coordinator (``dynamodb:<region>/<table>``, ``databricks``). Two writes may run at once
        only when both name the same coordinator.
    :param session_time_zone: the time zone the engine reads date and timestamp literals without a zone in
        (Spark's ``spark.sql.session.timeZone``; ``UTC`` for delta-rs); ``None`` when unknown. Two writes
        whose zones are not known to agree are never told apart by such literals (ADR 0001).
    :param session_ansi: Spark's ``spark.sql.ansi.enabled`` for the session that commits (``None``: unknown).
        Off, a numeric column compared with text such as ``'1.5'`` reads it truncated (``k = 1``); unless it
        is known on, such text separates nothing (ADR 0001). Not used for delta-rs.
    :param session_default_parser: Spark's parser settings that change what a string literal is
        (``spark.sql.ansi.doubleQuotedIdentifiers``, ``spark.sql.parser.escapedStringLiterals``) are both off
        in the session that commits (``None``: unknown). Unless they are, a condition with a double-quoted
        literal or a backslash in a literal is judged as the whole table
        (:mod:`deltaguard.core.sql.parser_settings`). Not used for delta-rs, which runs the model's parse.
    :param session_unknown_settings: the session settings (``key=value``) whose effect on a write the model
        does not know (:func:`deltaguard.core.closed_world.unknown_settings`); every pair this engine
        commits is then a conflict.
    """

    name: EngineName
    version: str
    photon: bool = False
    row_level_preview: bool = False
    row_level_off: bool = False
    commit_coordination: str = STORAGE_COORDINATION
    session_time_zone: str | None = None
    session_ansi: bool | None = None
    session_default_parser: bool | None = None
    session_unknown_settings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        parse_version(self.version)  # fail early on nonsense versions
        if not self.commit_coordination.strip():
            raise ValueError("commit_coordination must name a coordinator")

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return parse_version(self.version)

    def at_least(self, *version: int) -> bool:
        return self.version_tuple >= version

    def describe(self) -> str:
        if self.name is EngineName.DATABRICKS:
            return f"Databricks Runtime {self.version}{' with Photon' if self.photon else ''}"
        return f"{self.name.value} {self.version}"
