"""delta-spark conflict exceptions -> DeltaConflictError kinds, in every shape Spark raises them."""

from __future__ import annotations

import pytest

from deltaguard.engines.errors import ConflictKind, DeltaConflictError
from deltaguard.engines.spark import errors as spark_errors

K = ConflictKind

# (Java class simple name, Delta error class, expected kind): the table Delta's exceptions.scala defines.
CASES = [
    ("ConcurrentAppendException", "DELTA_CONCURRENT_APPEND", K.CONCURRENT_APPEND),
    ("ConcurrentDeleteReadException", "DELTA_CONCURRENT_DELETE_READ", K.CONCURRENT_DELETE_READ),
    ("ConcurrentDeleteDeleteException", "DELTA_CONCURRENT_DELETE_DELETE", K.CONCURRENT_DELETE_DELETE),
    ("MetadataChangedException", "DELTA_METADATA_CHANGED", K.METADATA_CHANGED),
    ("ProtocolChangedException", "DELTA_PROTOCOL_CHANGED", K.PROTOCOL_CHANGED),
    ("ConcurrentTransactionException", "DELTA_CONCURRENT_TRANSACTION", K.CONCURRENT_TRANSACTION),
    ("ConcurrentWriteException", "DELTA_CONCURRENT_WRITE", K.CONCURRENT_APPEND),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize(("name", "error_class", "kind"), CASES, ids=IDS)
def test_python_classes_from_delta_exceptions(name: str, error_class: str, kind: ConflictKind) -> None:
    import delta.exceptions

    exc = getattr(delta.exceptions, name)("a concurrent transaction got there first")
    assert spark_errors.conflict_kind(exc) is kind


@pytest.mark.parametrize(("name", "error_class", "kind"), CASES, ids=IDS)
def test_spark_connect_classes(name: str, error_class: str, kind: ConflictKind) -> None:
    import delta.connect.exceptions

    exc = getattr(delta.connect.exceptions, name)(
        message="conflict", errorClass=f"{error_class}.WITHOUT_HINT"
    )
    assert spark_errors.conflict_kind(exc) is kind


@pytest.mark.parametrize(("name", "error_class", "kind"), CASES, ids=IDS)
def test_plain_grpc_exception_with_java_class_in_the_message(
    name: str, error_class: str, kind: ConflictKind
) -> None:
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    exc = SparkConnectGrpcException(
        message=f"(io.delta.exceptions.{name}) Files were added to partition [day=1]"
    )
    assert spark_errors.conflict_kind(exc) is kind


@pytest.mark.parametrize(("name", "error_class", "kind"), CASES, ids=IDS)
def test_error_class_only(name: str, error_class: str, kind: ConflictKind) -> None:
    # Serverless/Connect messages may carry only the error class: "[DELTA_X.SUBCLASS] text".
    exc = RuntimeError(f"[{error_class}.WITH_PARTITION_HINT] Transaction conflict detected. SQLSTATE: 2D521")
    assert spark_errors.conflict_kind(exc) is kind


@pytest.mark.parametrize(
    "package", ["io.delta.exceptions", "org.apache.spark.sql.delta", "com.databricks.sql.transaction.tahoe"]
)
@pytest.mark.parametrize(("name", "error_class", "kind"), CASES, ids=IDS)
def test_py4j_shaped_error_with_java_to_string(
    name: str, error_class: str, kind: ConflictKind, package: str
) -> None:
    class JavaThrowable:  # the JVM side of a Py4JJavaError (the real JVM path is in test_spark_local)
        def toString(self) -> str:
            return f"{package}.{name}: Files were added by a concurrent update"

    class Py4JJavaError(Exception):
        java_exception = JavaThrowable()

    assert spark_errors.conflict_kind(Py4JJavaError("An error occurred while calling o123.execute.")) is kind


def test_the_cause_chain_is_searched() -> None:
    import delta.exceptions

    try:
        try:
            raise delta.exceptions.ConcurrentDeleteReadException("deleted")
        except Exception as inner:
            raise RuntimeError("MERGE failed") from inner
    except RuntimeError as outer:
        assert spark_errors.conflict_kind(outer) is K.CONCURRENT_DELETE_READ


def test_base_class_alone_is_unknown_conflict() -> None:
    import delta.exceptions

    exc = delta.exceptions.DeltaConcurrentModificationException("something concurrent")
    assert spark_errors.conflict_kind(exc) is K.UNKNOWN


@pytest.mark.parametrize(
    "message",
    [
        "java.lang.ClassNotFoundException: io.delta.exceptions.ConcurrentAppendException",
        "[TABLE_OR_VIEW_NOT_FOUND] The table cannot be found",
        "'JavaPackage' object is not callable",
        "column ConcurrentAppendExceptionCount not found",
        "[DELTA_CONCURRENT_APPENDIX] not a real class",
    ],
)
def test_non_conflicts_are_not_conflicts(message: str) -> None:
    assert spark_errors.conflict_kind(RuntimeError(message)) is None
    assert spark_errors.to_conflict_error(RuntimeError(message), "/t") is None


def test_most_specific_name_wins_when_several_appear() -> None:
    text = "io.delta.exceptions.DeltaConcurrentModificationException: io.delta.exceptions.ProtocolChangedException: x"
    assert spark_errors.conflict_kind(RuntimeError(text)) is K.PROTOCOL_CHANGED


def test_to_conflict_error_keeps_table_engine_and_first_line() -> None:
    import delta.exceptions

    exc = delta.exceptions.MetadataChangedException(
        "The metadata of the Delta table has been changed\nat ..."
    )
    error = spark_errors.to_conflict_error(exc, "/data/orders")
    assert isinstance(error, DeltaConflictError)
    assert (error.kind, error.table_uri, error.engine) == (K.METADATA_CHANGED, "/data/orders", "spark")
    assert error.original_message == "The metadata of the Delta table has been changed"
