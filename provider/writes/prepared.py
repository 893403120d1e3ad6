"""A write, prepared once: what its lease is asked for and what the engine is told it may trust.

A write operator resolves its table, reads the table's configuration (and, with file statistics, the
snapshot they are of), builds the write's scope and validates it once. The result is a
:class:`PreparedWrite`: a frozen value that serialises into the resume arguments of a deferral
(:meth:`PreparedWrite.to_kwargs`), so a try resumed by the triggerer asks for the same lease and writes the
same scope without reading the table or validating the write again. The engine is handed the version the
write was validated at (``WriteContext.validated_version``) and checks the spec again only when it commits
from a table that has moved on since.

Two parts of a configuration do not travel (:func:`deltaguard.leases.codec.config_to_json` keeps neither):
the per-file statistics (a table's worth of them does not belong in a task's resume arguments) and the
engine's evaluator of partition predicates. A resumed write's lease request is judged without the
statistics, as the triggerer judges the stored request, and the caller attaches an evaluator again
(:func:`deltaguard.engines.sources.attach_oracle`) before the value is judged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from deltaguard.core.operations import Operation
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.leases import codec
from deltaguard.writes.table_uri import table_key

__all__ = ["PreparedWrite"]

#: the layout of :meth:`PreparedWrite.to_kwargs`; a resumed try given another prepares anew
_FORMAT = 1


@dataclasses.dataclass(frozen=True)
class PreparedWrite:
    """One write as resolved and validated before its lease is asked for.

    :param uri: the table URI.
    :param operation: what the conflict model is told the write does (its scope), labelled with the task's
        app id.
    :param profile: the committing engine's profile.
    :param table_config: the table's configuration the write was validated against; its ``version`` is the
        one the engine may trust the write at.
    :param read_version: the version the write pins with file statistics (ADR 0020); ``None``: not pinned.
    :param source_scope: the scope the spec carries (``MergeScope.to_json()`` of a MERGE or REPLACE WHERE
        narrowed by its source); ``None``: none.
    """

    uri: str
    operation: Operation
    profile: EngineProfile
    table_config: TableConfig
    read_version: int | None = None
    source_scope: Mapping[str, object] | None = None

    @property
    def key(self) -> str:
        """The table's lease key."""
        return table_key(self.uri)

    def to_kwargs(self) -> dict[str, Any]:
        """The value as JSON-serialisable resume arguments (statistics and evaluator left out)."""
        return {
            "format": _FORMAT,
            "uri": self.uri,
            "operation": codec.operation_to_json(self.operation),
            "profile": codec.profile_to_json(self.profile),
            "table_config": codec.config_to_json(self.table_config),
            "read_version": self.read_version,
            "source_scope": None if self.source_scope is None else dict(self.source_scope),
        }

    @classmethod
    def from_kwargs(cls, data: Mapping[str, Any]) -> PreparedWrite:
        """The value :meth:`to_kwargs` wrote.

        :raises ValueError: ``data`` is not such a value (another layout, a missing or malformed field).
        """
        if not isinstance(data, Mapping) or data.get("format") != _FORMAT:
            raise ValueError(f"not a prepared write of format {_FORMAT}")
        try:
            read_version = data.get("read_version")
            scope = data.get("source_scope")
            return cls(
                uri=str(data["uri"]),
                operation=codec.operation_from_json(dict(data["operation"])),
                profile=codec.profile_from_json(dict(data["profile"])),
                table_config=codec.config_from_json(dict(data["table_config"])),
                read_version=None if read_version is None else int(read_version),
                source_scope=None if scope is None else dict(scope),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed prepared write: {exc!r}") from exc
