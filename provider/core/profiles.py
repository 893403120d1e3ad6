"""Engine profiles: which engine (and version) commits the writes, since each resolves conflicts differently."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class EngineName(StrEnum):
    DATABRICKS = "databricks"
    DELTA_SPARK = "delta-spark"
    DELTA_RS = "delta-rs"


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
    """

    name: EngineName
    version: str
    photon: bool = False
    row_level_preview: bool = False
    row_level_off: bool = False

    def __post_init__(self) -> None:
        parse_version(self.version)  # fail early on nonsense versions

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return parse_version(self.version)

    def at_least(self, *version: int) -> bool:
        return self.version_tuple >= version

    def describe(self) -> str:
        if self.name is EngineName.DATABRICKS:
            return f"Databricks Runtime {self.version}{' with Photon' if self.photon else ''}"
        return f"{self.name.value} {self.version}"
