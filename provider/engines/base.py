"""What a write engine is: the one interface every engine implements, what it accepts, and how one is chosen.

:class:`DeltaEngine` is the interface. :class:`Runners`: spec types are declared once, in :mod:`deltaguard.engines.specs`; an engine registers
only a runner per spec class. A spec class it has no runner for is refused with
:class:`~deltaguard.engines.errors.UnsupportedWriteError` before anything is written, with the reason the
engine gave (:class:`Unsupported`) or, for a spec type declared after the engine, "no runner".

:func:`validate_spec` checks what every engine needs (the table exists unless the write creates it) and
runs the spec's own checks (:meth:`deltaguard.engines.specs.WriteSpec.validate`). The operators call it
once, through the engine's ``validate``, before a lease is taken; each shipped engine calls it again before
it writes (a caller may use an engine without an operator), except the delta-rs engine when the write's
context names the version the spec was validated at and the write commits from that version. Everything
here raises :class:`~deltaguard.engines.errors.InvalidWriteError` with a message that says what to fix.

Choosing an engine (:func:`build_engine`, the one place that turns a task's resolved settings into engine
constructor arguments): engines are imported only when chosen, so a DAG that writes with delta-rs never
imports PySpark.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import importlib
import inspect
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from deltaguard.core.closed_world import unknown_settings
from deltaguard.core.profiles import STORAGE_COORDINATION, EngineProfile
from deltaguard.core.sql.literals import SPARK
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.errors import InvalidWriteError, UnsupportedWriteError
from deltaguard.engines.specs import SpecCheck, WriteContext, WriteSpec, write_name

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

    def session_default_parser(self) -> bool | None:
        """Whether the engine's writes run with Spark's default parser settings for string literals
        (:mod:`deltaguard.core.sql.parser_settings`); ``None``: unknown or not Spark.

        Unless they are known to, a condition with a double-quoted literal or a backslash in a literal
        separates nothing.
        """
        return None

    def session_settings(self) -> Mapping[str, str] | None:
        """The settings the engine's writes run with, as Spark lists them (``spark.conf.getAll``); ``None``
        when the engine has no such settings (delta-rs). Those whose effect the conflict model does not
        know (:func:`deltaguard.core.closed_world.unknown_settings`) make every pair a conflict.
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
            session_default_parser=(
                profile.session_default_parser
                if profile.session_default_parser is not None
                else self.session_default_parser()
            ),
            session_unknown_settings=(
                profile.session_unknown_settings or unknown_settings(self.session_settings() or {})
            ),
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

        The default runs the spec's own checks (:func:`deltaguard.engines.base.validate_spec`), the
        operators' one validation of a write; engines override it with what they add, and run those too.
        """

        validate_spec(spec, config)

    def close(self) -> None:  # noqa: B027
        """Release what this engine opened for its writes (sessions, connections); idempotent.

        The operators call it when their task ends, in success and failure. The default holds nothing; an
        engine never stops anything it was handed or merely borrowed (a user's active SparkSession).
        """


# ---------------------------------------------------------------------------------------------------- runners


R = TypeVar("R")


@dataclass(frozen=True)
class Unsupported:
    """An engine's explicit "I do not run this spec type", with the reason the DAG author reads.

    :param reason: why, and what to do instead.
    """

    reason: str


class Runners(Generic[R]):
    """An engine's runners by spec class (exact class: a subclass of a spec is not silently run as it).

    :param engine: the engine's name, for messages.
    :param runners: spec class -> the engine's runner, or :class:`Unsupported` with a reason.
    """

    def __init__(self, engine: str, runners: Mapping[type[WriteSpec], R | Unsupported]) -> None:
        self.engine = engine
        self._runners = dict(runners)

    def runner(self, spec: object) -> R:
        """The runner for ``spec``.

        :raises UnsupportedWriteError: when this engine has no runner for its class.
        """
        entry = self._runners.get(type(spec))  # type: ignore[arg-type]
        if entry is None or isinstance(entry, Unsupported):
            reason = entry.reason if isinstance(entry, Unsupported) else "it has no runner for it"
            raise UnsupportedWriteError(
                f"{write_name(spec, capital=True)} is not supported by {self.engine}: {reason}",
                engine=self.engine,
                spec_type=type(spec),
            )
        return entry

    def check(self, spec: object) -> None:
        """Raise :class:`UnsupportedWriteError` unless this engine runs ``spec`` (:meth:`runner`)."""
        self.runner(spec)

    def entry(self, spec_type: type[WriteSpec]) -> R | Unsupported | None:
        """What this engine registered for ``spec_type`` (``None``: nothing)."""
        return self._runners.get(spec_type)


# --------------------------------------------------------------------------------------- the validation point


#: commitInfo keys the engine sets itself; caller metadata must not use them.
RESERVED_COMMIT_KEYS: frozenset[str] = frozenset(
    {
        "timestamp",
        "operation",
        "operationParameters",
        "operationMetrics",
        "readVersion",
        "isolationLevel",
        "isBlindAppend",
        "engineInfo",
        "clientVersion",
        "version",
        "userId",
        "userName",
    }
)

#: Prefix of the commit metadata keys deltaguard itself records.
DELTAGUARD_KEY_PREFIX = "deltaguard."


def validate_context(context: WriteContext) -> None:
    """Check the idempotency pair and the commit metadata.

    :raises InvalidWriteError: for half an idempotency pair, a negative version, or reserved/non-string
        metadata.
    """
    if (context.app_id is None) != (context.app_version is None):
        raise InvalidWriteError("app_id and app_version go together: give both or neither")
    if context.app_id is not None and not context.app_id.strip():
        raise InvalidWriteError("app_id must not be empty")
    if context.app_version is not None and (
        isinstance(context.app_version, bool)
        or not isinstance(context.app_version, int)
        or context.app_version < 0
    ):
        raise InvalidWriteError(f"app_version must be an integer >= 0, got {context.app_version!r}")
    if context.max_commit_retries is not None and context.max_commit_retries < 0:
        raise InvalidWriteError("max_commit_retries must be >= 0")
    for key, value in context.commit_metadata.items():
        if not isinstance(key, str) or not key:
            raise InvalidWriteError(f"commit metadata keys must be non-empty strings, got {key!r}")
        if key in RESERVED_COMMIT_KEYS or key.startswith(DELTAGUARD_KEY_PREFIX):
            raise InvalidWriteError(f"commit metadata key {key!r} is reserved")
        if not isinstance(value, str):
            raise InvalidWriteError(
                f"commit metadata value for {key!r} must be a string, got {type(value).__name__}"
            )


def validate_spec(
    spec: WriteSpec, config: TableConfig | None, columns: Collection[str] | None = None, dialect: str = SPARK
) -> None:
    """Check a spec against the table it will write.

    :param spec: the write.
    :param config: the table's configuration (``exists=False`` for a table that does not exist yet);
        ``None`` when unknown: only the checks that need no table run.
    :param columns: the table's column names when known (enables column-name checks).
    :param dialect: sqlglot dialect the spec's SQL is written in (Spark SQL, as the conflict model reads it).
    :raises InvalidWriteError: describing the first problem found.
    """
    if not isinstance(spec, WriteSpec):
        raise InvalidWriteError(f"not a write spec: {type(spec).__name__}")
    if config is not None and not config.exists and not spec.may_create():
        raise InvalidWriteError(
            f"{write_name(spec, capital=True)} needs an existing table, but {config.uri or 'the table'} does "
            "not exist"
        )
    spec.validate(spec_check(spec, config, columns, dialect))


def spec_check(
    spec: WriteSpec, config: TableConfig | None, columns: Collection[str] | None = None, dialect: str = SPARK
) -> SpecCheck:
    """What ``spec`` is checked against: the table, and the partition columns its rows go under (the
    table's, or those ``spec`` creates it with)."""
    partitions: tuple[str, ...] | None = None
    if config is not None:
        partitions = tuple(config.partition_columns if config.exists else getattr(spec, "partition_by", ()))
    return SpecCheck(config=config, partitions=partitions, columns=columns, dialect=dialect)


# ----------------------------------------------------------------------------------------- choosing an engine


#: engine name -> ``module:Class``; a name not listed here may itself be a ``module:Class`` path.
ENGINES: dict[str, str] = {
    "delta-rs": "deltaguard.engines.deltars.engine:DeltaRsEngine",
    "spark": "deltaguard.engines.spark.engine:SparkEngine",
}

_ALIASES = {"deltars": "delta-rs", "delta_rs": "delta-rs", "deltalake": "delta-rs", "delta-spark": "spark"}


def canonical_engine_name(name: str) -> str:
    """``delta-rs`` or ``spark`` for any accepted spelling (an import path is returned unchanged).

    :param name: an engine name, alias or ``module:Class`` path.
    :raises ValueError: for an unknown name.
    """
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key in ENGINES:
        return key
    if ":" in name:
        return name.strip()
    raise ValueError(
        f"unknown engine {name!r}; choose one of {sorted(ENGINES)} or give a 'module:Class' path"
    )


def engine_class(name: str) -> type[DeltaEngine]:
    """Import the engine class for ``name``.

    :param name: an engine name, alias or ``module:Class`` path.
    :raises ValueError: if the name is unknown or the path does not name a :class:`DeltaEngine`.
    :raises ImportError: if the engine's module (or its dependencies, such as PySpark) cannot be imported.
    """
    canonical = canonical_engine_name(name)
    path = ENGINES.get(canonical, canonical)
    module_name, _, class_name = path.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, DeltaEngine)):
        raise ValueError(f"{path!r} does not name a DeltaEngine subclass")
    return cls


def create_engine(name: str, **kwargs: Any) -> DeltaEngine:
    """Build the engine called ``name``.

    :param name: an engine name, alias or ``module:Class`` path.
    :param kwargs: constructor arguments (``storage_options`` for delta-rs; Spark session settings for spark).
    """
    return engine_class(name)(**kwargs)


@dataclass(frozen=True)
class EngineSettings:
    """A task's resolved engine settings (operator arguments, ``delta`` connection, ``[deltaguard]``).

    :param storage_options: ``deltalake`` storage options (any engine whose constructor takes them).
    :param spark_conn_id: ``spark`` connection for Spark engines (their ``conn_id``).
    :param spark_connect_conn_id: ``spark_connect`` connection for Spark engines (their ``connect_conn_id``).
    :param spark_connect_timeout_s: seconds a Spark engine waits for its Connect server's first answer (their
        ``connect_timeout_s``).
    """

    storage_options: Mapping[str, str] | None = None
    spark_conn_id: str | None = None
    spark_connect_conn_id: str | None = None
    spark_connect_timeout_s: float | None = None


def build_engine(name: str, settings: EngineSettings | None = None) -> DeltaEngine:
    """Build the engine called ``name`` from a task's settings.

    Each setting goes to the constructor parameter of the same meaning when the constructor has it and the
    setting is given: ``storage_options`` to any engine; the Spark connections (``conn_id``,
    ``connect_conn_id``, ``connect_timeout_s``) only to engines named ``spark`` (:class:`~deltaguard.engines.spark.SparkEngine` and
    engines of users built on it), since another engine's ``conn_id`` would mean something else.

    :param name: an engine name, alias or ``module:Class`` path.
    :param settings: the resolved settings; ``None`` builds the engine with its defaults.
    """
    cls = engine_class(name)
    settings = settings or EngineSettings()
    offered: dict[str, Any] = {"storage_options": dict(settings.storage_options or {}) or None}
    if getattr(cls, "name", None) == "spark":
        offered["conn_id"] = settings.spark_conn_id
        offered["connect_conn_id"] = settings.spark_connect_conn_id
        offered["connect_timeout_s"] = settings.spark_connect_timeout_s
    accepted = _accepted_parameters(cls)
    return cls(**{key: value for key, value in offered.items() if key in accepted and value is not None})


@functools.cache  # a class's signature does not change; read once per process, not once per write
def _accepted_parameters(cls: type) -> frozenset[str]:
    """The named parameters ``cls(...)`` takes. A subclass whose ``__init__`` passes ``**kwargs`` on (a timed
    or instrumented engine) also takes what the classes up its MRO name, up to the first whose ``__init__``
    takes no ``**kwargs``; reading only its own signature would silently drop the Spark Connect connection
    and build a local Spark session instead. ``**kwargs`` that go elsewhere (to a hook, say) gain nothing:
    only named parameters count."""
    named: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass is object:
            continue
        parameters = list(inspect.signature(init).parameters.values())[1:]  # without self
        named |= {
            p.name
            for p in parameters
            if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        }
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
            break
    return frozenset(named)
