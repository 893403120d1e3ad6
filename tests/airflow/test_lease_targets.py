"""What a leased task declares: ``deltaguard.leases.targets`` (pure, no Airflow)."""

from __future__ import annotations

import pytest

from deltaguard.core.operations import Operation, OperationKind
from deltaguard.exceptions import InvalidWriteError
from deltaguard.leases.targets import as_operation, databricks_profile, lease_targets, unreadable_config


def test_a_kind_and_predicate_become_the_operation() -> None:
    (target,) = lease_targets("/data/t", operation="delete", predicate="day = '2026-01-01'")
    assert target.operation == Operation(OperationKind.DELETE, predicate="day = '2026-01-01'")


def test_a_merge_predicate_is_its_on_condition_and_its_inserts_are_unknown() -> None:
    op = as_operation("MERGE", "t.day = '2026-01-01'")
    assert op.merge_condition == "t.day = '2026-01-01'" and op.predicate is None
    assert op.inserts is None  # inserted rows may land anywhere: the conservative reading


def test_statements_are_classified_and_paired_with_their_tables() -> None:
    targets = lease_targets(
        ["/a", "/b"], sql=["DELETE FROM x WHERE k = 1", "INSERT INTO y SELECT * FROM staging"]
    )
    assert [(t.table, t.operation.kind) for t in targets] == [
        ("/a", OperationKind.DELETE),
        ("/b", OperationKind.INSERT),
    ]
    (named,) = lease_targets(sql="UPDATE delta.`/data/c` SET v = 0 WHERE k = 2")
    assert named.table == "/data/c" and named.operation.predicate == "k = 2"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tables": "/t"}, "declare the operation"),
        ({"tables": [], "operation": "INSERT"}, "at least one table"),
        ({"tables": ["/t", "/t"], "operation": "INSERT"}, "declared twice"),
        ({"tables": "/t", "operation": "INSERT", "sql": "DELETE FROM t"}, "not both"),
        ({"tables": ["/a", "/b"], "sql": "DELETE FROM t"}, "1 statement"),
        ({"tables": {"/a": "INSERT"}, "operation": "INSERT"}, "no operation beside it"),
        ({"tables": "/t", "operation": Operation(OperationKind.DELETE), "predicate": "a = 1"}, "inside"),
        ({"tables": "/t", "sql": "SELECT 1"}, "cannot classify"),
        ({"tables": " ", "operation": "INSERT"}, "non-empty"),
    ],
)
def test_bad_declarations_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidWriteError, match=message):
        lease_targets(**kwargs)


def test_an_unreadable_table_is_unknown_and_a_bad_runtime_refused() -> None:
    assert unreadable_config("s3://b/t", "no credentials").unknown
    assert databricks_profile("15.4", photon=True).describe() == "Databricks Runtime 15.4 with Photon"
    with pytest.raises(InvalidWriteError, match="databricks_runtime"):
        databricks_profile("latest")
