"""What an engine accepts: the runners it registers per spec type, and the one validation point of a write.

:class:`Runners`: spec types are declared once, in :mod:`deltaguard.engines.specs`; an engine registers
only a runner per spec class. A spec class it has no runner for is refused with
:class:`~deltaguard.engines.errors.UnsupportedWriteError` before anything is written, with the reason the
engine gave (:class:`Unsupported`) or, for a spec type declared after the engine, "no runner".

:func:`validate_spec` checks what every engine needs (the table exists unless the write creates it) and
runs the spec's own checks (:meth:`deltaguard.engines.specs.WriteSpec.validate`). The operators call it
once, through the engine's ``validate``, before a lease is taken; each shipped engine calls it again before
it writes (a caller may use an engine without an operator), except the delta-rs engine when the write's
context names the version the spec was validated at and the write commits from that version. Everything
here raises :class:`~deltaguard.engines.errors.InvalidWriteError` with a message that says what to fix.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from deltaguard.core.sql.literals import SPARK
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.errors import InvalidWriteError, UnsupportedWriteError
from deltaguard.engines.specs import SPEC_TYPES, SpecCheck, WriteContext, WriteSpec, write_name

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

    def unregistered(self) -> list[str]:
        """The JSON names of declared spec types this engine registered nothing for (neither a runner nor
        :class:`Unsupported`)."""
        return sorted(name for name, cls in SPEC_TYPES.items() if cls not in self._runners)

    @contextlib.contextmanager
    def overridden(self, spec_type: type[WriteSpec], entry: R | Unsupported) -> Iterator[None]:
        """Register ``entry`` for ``spec_type`` for the ``with`` block (a benchmark timing a runner)."""
        previous = self._runners.get(spec_type)
        self._runners[spec_type] = entry
        try:
            yield
        finally:
            if previous is None:
                del self._runners[spec_type]
            else:
                self._runners[spec_type] = previous


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
