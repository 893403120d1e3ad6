"""Map delta-spark's commit-conflict exceptions to deltaguard's typed :class:`DeltaConflictError`.

delta-spark reports a conflict in three shapes, depending on how Spark is reached:

* classic PySpark with ``delta`` imported: Python classes from :mod:`delta.exceptions`
  (``ConcurrentAppendException`` ...), installed by delta-spark's patch of PySpark's exception conversion;
* classic PySpark without that patch (or a non-Delta wrapper): ``py4j.protocol.Py4JJavaError`` whose text
  carries the Java class name (``io.delta.exceptions.ConcurrentAppendException: ...``);
* Spark Connect: ``delta.connect.exceptions`` classes or a plain ``SparkConnectGrpcException`` whose text
  carries the Java class name and/or the Delta error class (``[DELTA_CONCURRENT_APPEND.WITHOUT_HINT]``).

This module never imports PySpark or Py4J: it reads class names, error classes and message text only, so
the mapping is a pure, table-driven function that can be tested without a JVM.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

from deltaguard.engines.errors import ConflictKind, DeltaConflictError

#: (Java/Python simple class name, Delta error-class prefix, conflict kind), most specific first.
#: ``ConcurrentWriteException`` ("a concurrent transaction has written new data since the current
#: transaction read the table") is the older, hint-less form of a concurrent append.
_TABLE: tuple[tuple[str, str, ConflictKind], ...] = (
    ("ConcurrentAppendException", "DELTA_CONCURRENT_APPEND", ConflictKind.CONCURRENT_APPEND),
    ("ConcurrentDeleteReadException", "DELTA_CONCURRENT_DELETE_READ", ConflictKind.CONCURRENT_DELETE_READ),
    (
        "ConcurrentDeleteDeleteException",
        "DELTA_CONCURRENT_DELETE_DELETE",
        ConflictKind.CONCURRENT_DELETE_DELETE,
    ),
    ("MetadataChangedException", "DELTA_METADATA_CHANGED", ConflictKind.METADATA_CHANGED),
    ("ProtocolChangedException", "DELTA_PROTOCOL_CHANGED", ConflictKind.PROTOCOL_CHANGED),
    ("ConcurrentTransactionException", "DELTA_CONCURRENT_TRANSACTION", ConflictKind.CONCURRENT_TRANSACTION),
    ("ConcurrentWriteException", "DELTA_CONCURRENT_WRITE", ConflictKind.CONCURRENT_APPEND),
    # The common base class: a conflict, but not one we can name.
    ("DeltaConcurrentModificationException", "DELTA_CONCURRENT_MODIFICATION", ConflictKind.UNKNOWN),
)

_BY_CLASS = {name: kind for name, _, kind in _TABLE}

# Class names as they appear in Java/Scala text: an exception's toString ("io.delta.exceptions.X: msg",
# also org.apache.spark.sql.delta.X and com.databricks.sql.transaction.tahoe.X) or Spark Connect's
# "(io.delta.exceptions.X) msg". The name must be followed by ':' or ')', so a mere mention
# ("ClassNotFoundException: io.delta.exceptions.X") is not taken for a conflict.
_CLASS_RE = re.compile(r"(?<![\w$.])(?:[\w$]+\.)*(" + "|".join(name for name, _, _ in _TABLE) + r")(?=[:)])")
# Delta error classes, optionally with a sub-class (DELTA_CONCURRENT_APPEND.WITH_PARTITION_HINT).
_ERROR_CLASS_RE = re.compile(r"(?<![A-Z_])(" + "|".join(prefix for _, prefix, _ in _TABLE) + r")(?![A-Z_])")
_BY_ERROR_CLASS = {prefix: kind for _, prefix, kind in _TABLE}
# Position in _TABLE, so the most specific name wins when a text mentions several.
_TABLE_ORDER = {key: index for index, (name, prefix, _) in enumerate(_TABLE) for key in (name, prefix)}


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, then its causes/contexts (bounded, cycle-safe)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 16:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _error_class(exc: BaseException) -> str | None:
    """The Spark error class/condition of a ``PySparkException`` (``getCondition`` on Spark 4)."""
    # Spark 4 deprecates getErrorClass in favour of getCondition: use the older one only when alone.
    getter = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
    if callable(getter):
        try:
            value = getter()
        except Exception:  # a half-built captured exception must not hide the conflict
            return None
        if isinstance(value, str) and value:
            return value
    return None


def _text(exc: BaseException) -> str:
    """Everything an exception says about itself, including a Py4J error's Java side."""
    parts = [str(exc)]
    java = getattr(exc, "java_exception", None)  # Py4JJavaError
    if java is not None:
        # The JVM may be gone; the Python text is still there.
        with contextlib.suppress(Exception):
            parts.append(str(java.toString()))
    return "\n".join(parts)


def _kind_from_text(text: str) -> ConflictKind | None:
    """The most specific kind named anywhere in ``text`` (class names first, then error classes)."""
    found = [(_TABLE_ORDER[m.group(1)], _BY_CLASS[m.group(1)]) for m in _CLASS_RE.finditer(text)]
    found += [(_TABLE_ORDER[m.group(1)], _BY_ERROR_CLASS[m.group(1)]) for m in _ERROR_CLASS_RE.finditer(text)]
    return min(found)[1] if found else None


def conflict_kind(exc: BaseException) -> ConflictKind | None:
    """The conflict kind of a delta-spark exception, or ``None`` when it is not a commit conflict.

    Looks, in order, at the Python class hierarchy (``delta.exceptions`` / ``delta.connect.exceptions``),
    the Spark error class, then the message text (Java class names, then Delta error classes), for the
    exception and each of its causes.

    :param exc: any exception raised while running a Spark write.
    """
    for link in _chain(exc):
        for klass in type(link).__mro__:
            kind = _BY_CLASS.get(klass.__name__)
            if kind is not None and kind is not ConflictKind.UNKNOWN:
                return kind
        error_class = _error_class(link)
        if error_class:
            kind = _kind_from_text(error_class)
            if kind is not None:
                return kind
        kind = _kind_from_text(_text(link))
        if kind is not None:
            return kind
    # Only the base class matched (or nothing did).
    if any(klass.__name__ == "DeltaConcurrentModificationException" for klass in type(exc).__mro__):
        return ConflictKind.UNKNOWN
    return None


def to_conflict_error(
    exc: BaseException, table_uri: str | None, engine: str = "spark"
) -> DeltaConflictError | None:
    """A :class:`DeltaConflictError` for a conflict exception, else ``None`` (re-raise the original).

    The message kept is the engine's first line (Py4J traces are long); the full exception stays
    attached as ``__cause__`` by the caller's ``raise ... from exc``.

    :param exc: the exception Spark raised.
    :param table_uri: the table being written, for the message.
    :param engine: the engine name recorded in the error.
    """
    kind = conflict_kind(exc)
    if kind is None:
        return None
    first_line = next((line.strip() for line in _text(exc).splitlines() if line.strip()), type(exc).__name__)
    return DeltaConflictError(kind, first_line, table_uri=table_uri, engine=engine)


#: Starts the message of the ``raise_error`` that guards a MERGE source (``spark/source_scope.py``).
SOURCE_CHECK_MARKER = "deltaguard source check"
_SOURCE_CHECK_RE = re.compile(re.escape(SOURCE_CHECK_MARKER) + r": (.*?)(?:\s+SQLSTATE: \w+)?\s*$", re.M)


def source_check_message(exc: BaseException) -> str | None:
    """What the guard of a MERGE source reported (a source value outside the lease's claim), else ``None``.

    :param exc: the exception Spark raised while running the MERGE.
    """
    for link in _chain(exc):
        found = _SOURCE_CHECK_RE.search(_text(link))
        if found is not None:
            return found.group(1)
    return None
