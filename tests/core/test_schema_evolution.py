"""A write that evolves the schema as it commits is a metadata change (ADR 0035).

Measured: a schema-evolving MERGE or append commits a ``metaData`` action, and a compatible write of another
partition that started before it fails (delta-spark 4.4.0: MetadataChangedException; delta-rs 1.6.6:
"Metadata changed since last commit"; ``tests/engines/test_schema_evolution_deltars.py``). So such a pair
must never be ``no_conflict``, whichever engine commits it.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from deltaguard.core import decide, pair_verdict
from deltaguard.core.check_request import RequestError, parse_operation
from deltaguard.core.decision import DeltaException
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.sql.classify import classify_sql
from deltaguard.core.table_config import TableConfig
from deltaguard.leases.codec import operation_from_json, operation_to_json

TABLE = TableConfig(partition_columns=("p",))
PROFILES = [
    EngineProfile(EngineName.DELTA_SPARK, "4.4.0"),
    EngineProfile(EngineName.DELTA_RS, "1.6.6"),
    EngineProfile(EngineName.DATABRICKS, "15.4", photon=True),
]
EVOLVING_MERGE = (
    "MERGE WITH SCHEMA EVOLUTION INTO sales t USING updates s ON t.id = s.id AND t.p = 'a' "
    "WHEN MATCHED THEN UPDATE SET t.v = s.v, t.extra = s.extra "
    "WHEN NOT MATCHED THEN INSERT (id, p, v, extra) VALUES (s.id, 'a', s.v, s.extra)"
)
#: compatible writes of another partition
OTHERS = {
    "insert": "INSERT INTO sales PARTITION (p = 'b') SELECT id FROM staging",
    "merge": "MERGE INTO sales t USING updates s ON t.id = s.id AND t.p = 'b' "
    "WHEN MATCHED THEN UPDATE SET t.v = s.v",
}


def test_the_clause_is_classified_and_the_rest_of_the_merge_kept() -> None:
    classified = classify_sql(EVOLVING_MERGE)
    assert classified.table == "sales"
    operation = classified.operation
    assert operation.kind is OperationKind.MERGE and operation.evolves_schema
    assert operation.merge_condition == "t.id = s.id AND t.p = 'a'"
    assert operation.sql == EVOLVING_MERGE
    assert operation.changes_metadata
    assert not classify_sql(EVOLVING_MERGE.replace("WITH SCHEMA EVOLUTION ", "")).operation.evolves_schema


def test_case_spacing_and_comments_do_not_hide_the_clause() -> None:
    sql = "/* nightly */ merge  with schema\n evolution into delta.`/d/t` AS t USING s ON t.id = s.id WHEN MATCHED THEN DELETE"
    classified = classify_sql(sql)
    assert classified.operation.evolves_schema and classified.table == "/d/t"
    insert = classify_sql("INSERT WITH SCHEMA EVOLUTION INTO sales SELECT * FROM staging").operation
    assert insert.kind is OperationKind.INSERT and insert.evolves_schema


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name.value)
@pytest.mark.parametrize("other", sorted(OTHERS))
def test_a_schema_evolving_merge_conflicts_with_a_write_of_another_partition(
    profile: EngineProfile, other: str
) -> None:
    evolving = classify_sql(EVOLVING_MERGE).operation
    compatible = classify_sql(OTHERS[other]).operation
    # without the clause the pair is compatible: the test is about the evolution, not the partitions
    plain = classify_sql(EVOLVING_MERGE.replace("WITH SCHEMA EVOLUTION ", "")).operation
    if profile.name is not EngineName.DELTA_RS:  # delta-rs 1.6.6 has no partition-level isolation
        assert not pair_verdict(plain, compatible, TABLE, profile).conflict
    verdict = pair_verdict(evolving, compatible, TABLE, profile)
    assert verdict.conflict
    assert verdict == pair_verdict(compatible, evolving, TABLE, profile)
    assert DeltaException.METADATA_CHANGED in verdict.exceptions
    assert "schema evolution" in verdict.reason
    decision = decide(compatible, [evolving], TABLE, profile)
    assert decision.conflict and any("schema evolution" in reason for reason in decision.reasons)


def test_a_declared_schema_evolving_append_conflicts_with_another_append() -> None:
    evolving = Operation(OperationKind.INSERT, predicate="p = 'a'", evolves_schema=True)
    other = Operation(OperationKind.INSERT, predicate="p = 'b'")
    for profile in PROFILES:  # blind appends never conflict with each other
        assert not pair_verdict(
            Operation(OperationKind.INSERT, predicate="p = 'a'"), other, TABLE, profile
        ).conflict
        assert pair_verdict(evolving, other, TABLE, profile).conflict


def test_the_lease_store_keeps_the_evolution() -> None:
    evolving = classify_sql(EVOLVING_MERGE).operation
    assert operation_from_json(operation_to_json(evolving)).evolves_schema
    plain = Operation(OperationKind.MERGE, merge_condition="t.id = s.id")
    assert "evolves_schema" not in operation_to_json(plain)  # older stored texts read the same
    assert not operation_from_json(operation_to_json(plain)).evolves_schema


def test_a_check_request_declares_it() -> None:
    declared = parse_operation({"operation": "INSERT", "predicate": "p = 'a'", "evolves_schema": True})
    assert declared.evolves_schema and declared.changes_metadata
    with pytest.raises(RequestError, match="evolves_schema"):
        parse_operation({"operation": "DELETE", "evolves_schema": True})


def test_the_lease_guard_holds_a_running_schema_evolving_write_exclusive() -> None:
    """Defence in depth: a metadata change is exclusive even when the model (here a permissive stand-in)
    says otherwise, and a running schema-evolving write counts as one."""
    from deltaguard.core.admission import Holder, Owner, TableView, admit
    from deltaguard.core.decision import Decision, Verdict

    def permissive(*_: object) -> Decision:
        return Decision(Verdict.NO_CONFLICT)

    evolving = Operation(OperationKind.INSERT, predicate="p = 'a'", evolves_schema=True)
    running = Holder("L", Owner(dag_id="d", task_id="evolve"), evolving, granted=True)
    profile = PROFILES[0]
    candidate = Operation(OperationKind.INSERT, predicate="p = 'b'")
    result = admit("r", 0.0, [TableView("t1", candidate, TABLE, profile, granted=[running])], permissive)
    assert not result.granted
    plain = Holder(
        "L", Owner(dag_id="d", task_id="plain"), replace(evolving, evolves_schema=False), granted=True
    )
    assert admit("r", 0.0, [TableView("t1", candidate, TABLE, profile, granted=[plain])], permissive).granted


@pytest.mark.parametrize("kind", list(OperationKind))
def test_auto_merge_misjudges_only_data_writes_not_judged_as_evolving(kind: OperationKind) -> None:
    """The one question the wrapped operators and the Spark engine ask before trusting a judgement under
    schema auto-merge: UPDATE, DELETE and metadata changes never add columns through it."""
    evolvable = kind in {
        OperationKind.INSERT,
        OperationKind.MERGE,
        OperationKind.REPLACE_WHERE,
        OperationKind.OVERWRITE,
        OperationKind.STREAMING_WRITE,
    }
    assert Operation(kind).misjudged_under_auto_merge is evolvable
    assert not Operation(kind, evolves_schema=True).misjudged_under_auto_merge
