"""The one interface every write engine implements."""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from deltaguard.core.profiles import STORAGE_COORDINATION, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.specs import WriteContext, WriteSpec

if TYPE_CHECKING:
    from collections.abc import Collection

    from deltaguard.core.merge_scope import ScopeLimits, SourceKeys
    from deltaguard.core.oracle import PredicateOracle


@dataclass(frozen=True)
class WriteResult:
    """What a write did.

    :param table_uri: the table written.
    :param version: the committed table version (for a duplicate, the version of the original commit
        when the engine can tell, else the current version).
    :param operation: the Delta operation name recorded in the log (``WRITE``, ``MERGE``, ...).
    :param metrics: the engine's operation metrics (rows inserted/updated/deleted, files added/removed).
    :param elapsed_s: wall-clock seconds the write took.
    :param duplicate: ``True`` when ``(app_id, app_version)`` had already been committed and nothing
        was written.
    :param committed: ``False`` when the write changed nothing and the engine made no commit (delta-rs
        does this for a DELETE/UPDATE/MERGE/OPTIMIZE that matches nothing); ``version`` is then the
        version the write read.
    """

    table_uri: str
    version: int | None
    operation: str
    metrics: Mapping[str, Any] = field(default_factory=dict)
    elapsed_s: float = 0.0
    duplicate: bool = False
    committed: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "table_uri": self.table_uri,
            "version": self.version,
            "operation": self.operation,
            "metrics": dict(self.metrics),
            "elapsed_s": round(self.elapsed_s, 3),
            "duplicate": self.duplicate,
            "committed": self.committed,
        }


class DeltaEngine(abc.ABC):
    """Executes writes on Delta tables and reads their configuration.

    Implementations: :class:`deltaguard.engines.deltars.DeltaRsEngine` (embedded default) and
    :class:`deltaguard.engines.spark.SparkEngine`. Conflicts surface as
    :class:`deltaguard.engines.errors.DeltaConflictError` whatever the engine.
    """

    #: ``delta-rs`` or ``spark``
    name: str
    #: whether :meth:`write` checks the spec again when it commits from a version other than the context's
    #: ``validated_version`` (and trusts it at that version): a write prepared before a deferral is then not
    #: validated again when it resumes
    trusts_validated_version: bool = False

    @abc.abstractmethod
    def profile(self) -> EngineProfile:
        """The engine profile the conflict model must use for writes through this engine."""

    def commit_coordination(self, table_uri: str) -> str:
        """What excludes this engine's commits to ``table_uri`` from other writers' commits.

        See :mod:`deltaguard.engines.fencing`; engines that cannot tell keep the storage's own
        put-if-absent only if they use it.

        :param table_uri: the table location.
        """
        return STORAGE_COORDINATION

    def session_time_zone(self) -> str | None:
        """The time zone the engine reads date and timestamp literals without zone in (``None``: unknown).

        Two writes whose zones are not known to agree are never told apart by such literals (ADR 0001).
        """
        return None

    def relation_location(self, name: str) -> str | None:
        """Where the catalog relation ``name`` stores its data, or ``None`` when it is a view, is not known
        or this engine has no catalog (a statement reading it may then read any table).

        :param name: a catalog name as SQL spells it (parts quoted with backticks).
        """
        return None

    def session_ansi(self) -> bool | None:
        """Spark's ``spark.sql.ansi.enabled`` for the engine's writes (``None``: unknown or not Spark).

        Unless it is known on, numeric text that a lenient cast truncates separates nothing (ADR 0001).
        """
        return None

    def table_profile(self, table_uri: str) -> EngineProfile:
        """:meth:`profile` for writes to ``table_uri``, with its commit coordinator and time zone.

        :param table_uri: the table location.
        """
        profile = self.profile()
        return dataclasses.replace(
            profile,
            commit_coordination=self.commit_coordination(table_uri),
            session_time_zone=profile.session_time_zone or self.session_time_zone(),
            session_ansi=profile.session_ansi if profile.session_ansi is not None else self.session_ansi(),
        )

    @abc.abstractmethod
    def table_config(self, table_uri: str) -> TableConfig:
        """Read the table's configuration (a table that does not exist yet gives ``exists=False``).

        Callers that judge writes read it through :func:`deltaguard.engines.sources.engine_table_config`,
        which attaches :meth:`predicate_oracle`'s evaluator.
        """

    def predicate_oracle(self, config: TableConfig) -> PredicateOracle | None:
        """This engine's own evaluator of partition predicates for a table (ADR 0037), or ``None`` when it
        has none for it (:func:`deltaguard.engines.sources.attach_oracle` then attaches delta-rs').

        :param config: the table's configuration (partition columns and their types).
        """
        return None

    @abc.abstractmethod
    def write(self, table_uri: str, spec: WriteSpec, context: WriteContext) -> WriteResult:
        """Execute one write and commit it.

        :raises deltaguard.engines.errors.InvalidWriteError: before writing anything, if the spec is bad.
        :raises deltaguard.engines.errors.DeltaConflictError: if the commit conflicts.
        """

    def read_source_keys(
        self, source: Any, columns: Collection[str], limits: ScopeLimits
    ) -> SourceKeys | None:
        """What a MERGE source holds in its key columns, and the source to write (ADR 0019), or ``None``
        when this engine does not check a source against a computed scope at write time (the MERGE then
        keeps its declared scope).

        :param source: the spec's source.
        :param columns: the source columns to read.
        :param limits: the enumeration bounds.
        """
        return None

    def validate(self, table_uri: str, spec: WriteSpec, config: TableConfig) -> None:
        """Check a spec against the table before any lease is taken; raise ``InvalidWriteError``.

        The default runs the spec's own checks (:func:`deltaguard.engines.validation.validate_spec`), the
        operators' one validation of a write; engines override it with what they add, and run those too.
        """
        from deltaguard.engines.validation import validate_spec

        validate_spec(spec, config)

    def close(self) -> None:  # noqa: B027
        """Release what this engine opened for its writes (sessions, connections); idempotent.

        The operators call it when their task ends, in success and failure. The default holds nothing; an
        engine never stops anything it was handed or merely borrowed (a user's active SparkSession).
        """
