"""The closed world (ADR 0036): the model separates two writes only through facts it positively established."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from deltaguard.core import decide, pair_verdict
from deltaguard.core.decision import PairVerdict
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig

K = OperationKind
RS = EngineProfile(EngineName.DELTA_RS, "1.6.6")
SPARK = EngineProfile(EngineName.DELTA_SPARK, "4.4.0")
DATABRICKS = EngineProfile(EngineName.DATABRICKS, "14.3")
DV = {"delta.enableDeletionVectors": "true"}
TYPES = (("id", "long"), ("city", "string"), ("meta", "complex"), ("tags", "complex"))
ROW_LEVEL = TableConfig(properties=DV, column_types=TYPES)


def verdict(a: Operation, b: Operation, table: TableConfig, profile: EngineProfile) -> PairVerdict:
    found = pair_verdict(a, b, table, profile)
    assert found == pair_verdict(b, a, table, profile), "a verdict must not depend on argument order"
    return found


def reading_insert() -> Operation:
    return Operation(K.INSERT, reads_target=True)


class TestPropertyKeysAreExact:
    """deltalake 1.6.6 and delta-spark 4.4.0 read a property by its exact key (measured on delta-rs in
    tests/engines/test_deltars_property_keys.py): another spelling is not honoured, so the model may not
    honour it either."""

    def test_a_relaxing_level_under_another_spelling_is_not_honoured(self) -> None:
        # delta-rs honours snapshotIsolation under the exact key: an INSERT reading the table commits beside
        # a blind append. Under delta.IsolationLevel delta-rs runs Serializable and the reading insert fails.
        exact = TableConfig(properties={"delta.isolationLevel": "snapshotIsolation"})
        assert not verdict(reading_insert(), Operation(K.INSERT), exact, RS).conflict
        spelled = TableConfig(properties={"delta.IsolationLevel": "snapshotIsolation"})
        found = verdict(reading_insert(), Operation(K.INSERT), spelled, RS)
        assert found.conflict
        assert "delta.IsolationLevel" in found.reason and "delta.isolationLevel" in found.reason

    @pytest.mark.parametrize("profile", [RS, SPARK, DATABRICKS])
    def test_two_spellings_never_make_the_verdict_depend_on_their_order(self, profile: EngineProfile) -> None:
        first = {"delta.isolationLevel": "WriteSerializable", "delta.IsolationLevel": "Serializable"}
        second = dict(reversed(list(first.items())))
        a = Operation(K.INSERT, predicate="date = '2024-01-01'")
        b = Operation(K.UPDATE, predicate="date = '2024-01-01'")
        verdicts = [
            verdict(a, b, TableConfig(partition_columns=("date",), properties=p), profile)
            for p in (first, second)
        ]
        assert verdicts[0] == verdicts[1]
        assert verdicts[0].conflict

    def test_a_delta_key_without_known_meaning_conflicts(self) -> None:
        # A configuration given in a check document, not read by the engine layer: the core itself refuses it.
        table = TableConfig(partition_columns=("date",), properties={"delta.someFutureSetting": "true"})
        found = verdict(
            Operation(K.DELETE, predicate="date = '2024-01-01'"),
            Operation(K.DELETE, predicate="date = '2024-01-02'"),
            table,
            RS,
        )
        assert found.conflict
        assert "delta.someFutureSetting" in found.reason

    def test_a_boolean_neither_true_nor_false_conflicts(self) -> None:
        table = TableConfig(properties={"delta.enableDeletionVectors": "yes"}, column_types=TYPES)
        found = verdict(Operation(K.DELETE, "id = 1"), Operation(K.DELETE, "id = 2"), table, DATABRICKS)
        assert found.conflict
        assert "'yes'" in found.reason

    def test_user_properties_stay_known(self) -> None:
        table = TableConfig(
            partition_columns=("date",), properties={"owner": "team-a", "delta.constraints.positive": "v > 0"}
        )
        assert not verdict(
            Operation(K.DELETE, predicate="date = '2024-01-01'"),
            Operation(K.DELETE, predicate="date = '2024-01-02'"),
            table,
            RS,
        ).conflict


class TestUnmeasuredEngineVersions:
    """A version the profiles were never measured on is judged by the strictest profile of its family."""

    def test_delta_rs_version_never_measured_honours_no_relaxation(self) -> None:
        table = TableConfig(properties={"delta.isolationLevel": "snapshotIsolation"})
        old = EngineProfile(EngineName.DELTA_RS, "0.1.0")
        found = verdict(reading_insert(), Operation(K.INSERT), table, old)
        assert found.conflict
        assert "never measured" in found.reason

    def test_delta_spark_version_never_measured_keeps_the_serializable_checks(self) -> None:
        table = TableConfig(
            partition_columns=("date",), properties={"delta.isolationLevel": "WriteSerializable"}
        )
        append = Operation(K.INSERT, predicate="date = '2024-01-01'")
        update = Operation(K.UPDATE, predicate="date = '2024-01-01'")
        assert not verdict(append, update, table, SPARK).conflict  # measured on 4.4.0
        found = verdict(append, update, table, EngineProfile(EngineName.DELTA_SPARK, "5.0"))
        assert found.conflict
        assert "never measured" in found.reason

    def test_every_verdict_of_an_unmeasured_version_says_so(self) -> None:
        table = TableConfig(partition_columns=("date",))
        a = Operation(K.DELETE, predicate="date = '2024-01-01'")
        b = Operation(K.DELETE, predicate="date = '2024-01-02'")
        found = verdict(a, b, table, EngineProfile(EngineName.DELTA_SPARK, "5.0"))
        assert not found.conflict  # disjoint partitions: the strictest delta-spark profile keeps them apart
        assert "delta-spark 5.0 was never measured" in found.reason
        assert "never measured" not in verdict(a, b, table, SPARK).reason

    @pytest.mark.parametrize(
        ("name", "version"),
        [
            (EngineName.DELTA_RS, "1.6.6rc1"),
            (EngineName.DELTA_RS, "1.6.6-1"),
            (EngineName.DELTA_RS, "1.6.6+local"),
            (EngineName.DELTA_SPARK, "4.4.0-SNAPSHOT"),
            (EngineName.DELTA_SPARK, "4.4.0rc1"),
            (EngineName.DATABRICKS, "14.3.x-snapshot-scala2.12"),
        ],
    )
    def test_a_build_of_the_measured_version_is_not_the_measured_release(
        self, name: EngineName, version: str
    ) -> None:
        """A release candidate, post-release, local or snapshot build starts with the measured numbers but
        is another build (found by the meaning fuzzer's version generator)."""
        table = TableConfig(properties={"delta.isolationLevel": "snapshotIsolation"})
        a, b = Operation(K.DELETE, "id = 1"), Operation(K.DELETE, "id = 2")
        found = verdict(reading_insert(), Operation(K.INSERT), table, EngineProfile(name, version))
        assert found.conflict
        assert "never" in found.reason
        allowed = verdict(a, b, TableConfig(partition_columns=("id",)), EngineProfile(name, version))
        assert allowed.conflict or "never" in allowed.reason

    @pytest.mark.parametrize(
        ("name", "version"),
        [
            (EngineName.DELTA_RS, "1.6.6"),
            (EngineName.DELTA_RS, " 1.6.6 "),
            (EngineName.DELTA_SPARK, "4.4.0"),
            (EngineName.DATABRICKS, "14.3.x-scala2.12"),
            (EngineName.DATABRICKS, "15.4.x-photon-scala2.12"),
            (EngineName.DATABRICKS, "13.3 LTS"),
        ],
    )
    def test_the_measured_releases_as_engines_report_them_stay_measured(
        self, name: EngineName, version: str
    ) -> None:
        from deltaguard.core.closed_world import version_caveat

        assert version_caveat(EngineProfile(name, version)) is None

    def test_databricks_runtime_the_page_does_not_cover_gets_no_row_level_concurrency(self) -> None:
        old = EngineProfile(EngineName.DATABRICKS, "12.2")
        found = verdict(Operation(K.DELETE, "id = 1"), Operation(K.DELETE, "id = 2"), ROW_LEVEL, old)
        assert found.conflict
        assert "Runtime 12.2 was never documented by the page" in found.reason


class TestDatabricksDeterminism:
    """A function not known to be deterministic is non-deterministic: row-level concurrency does not apply."""

    @pytest.mark.parametrize(
        "condition",
        [
            "id = 1 AND reflect('java.util.UUID', 'randomUUID') = 'x'",
            "id = 1 AND java_method('java.lang.Math', 'random') < 0.5",
            "id = 1 AND try_reflect('java.util.UUID', 'randomUUID') = 'x'",
            "id = 1 AND my_udf(city) = 'x'",
        ],
    )
    def test_unknown_functions_fall_back_to_file_level(self, condition: str) -> None:
        found = verdict(Operation(K.DELETE, condition), Operation(K.DELETE, "id = 2"), ROW_LEVEL, DATABRICKS)
        assert found.conflict
        assert "non-deterministic" in found.reason

    def test_known_deterministic_functions_keep_row_level_concurrency(self) -> None:
        found = verdict(
            Operation(K.DELETE, "id = 1 AND lower(city) = 'berlin'"),
            Operation(K.DELETE, "id = 2"),
            ROW_LEVEL,
            DATABRICKS,
        )
        assert not found.conflict


class TestDatabricksComplexColumns:
    """The page: conditions on complex data types follow normal concurrency, whole columns included."""

    @pytest.mark.parametrize(
        "first",
        [
            Operation(K.DELETE, "id = 1 AND meta IS NOT NULL"),
            Operation(K.DELETE, "id = 1 AND to_json(meta) = '{}'"),
            Operation(K.MERGE, merge_condition="t.id = 1 AND t.meta = s.meta"),
            Operation(K.MERGE, merge_condition="t.id = s.id AND t.id = 1 AND s.meta IS NOT NULL"),
        ],
    )
    def test_conditions_on_a_whole_complex_column_fall_back(self, first: Operation) -> None:
        found = verdict(first, Operation(K.DELETE, "id = 2"), ROW_LEVEL, DATABRICKS)
        assert found.conflict
        assert "meta" in found.reason

    def test_a_column_of_unknown_type_gets_no_row_level_concurrency(self) -> None:
        declared = TableConfig(properties=DV, column_types=(("id", "long"),))
        a, b = Operation(K.DELETE, "id = 1 AND extra = 'x'"), Operation(K.DELETE, "id = 2")
        assert verdict(a, b, declared, DATABRICKS).conflict
        assert not verdict(Operation(K.DELETE, "id = 1"), b, declared, DATABRICKS).conflict
        assert verdict(Operation(K.DELETE, "id = 1"), b, TableConfig(properties=DV), DATABRICKS).conflict


class TestDatabricksRowLevelIsBestEffort:
    """The conflict error classes' fallbacks of row-level conflict detection that the shape decides."""

    def test_a_change_type_column_defeats_row_level_concurrency(self) -> None:
        table = TableConfig(properties=DV, column_types=(*TYPES, ("_change_type", "string")))
        found = verdict(Operation(K.DELETE, "id = 1"), Operation(K.DELETE, "id = 2"), table, DATABRICKS)
        assert found.conflict
        assert "_change_type" in found.reason

    def test_no_read_predicate_falls_back(self) -> None:
        decision = decide(Operation(K.DELETE), [Operation(K.UPDATE, "id = 2")], ROW_LEVEL, DATABRICKS)
        assert decision.conflict
        assert any("EMPTY_READ_PREDICATES" in reason for reason in decision.reasons)

    def test_a_row_level_no_conflict_says_it_is_best_effort(self) -> None:
        found = verdict(Operation(K.DELETE, "id = 1"), Operation(K.UPDATE, "id = 2"), ROW_LEVEL, DATABRICKS)
        assert not found.conflict
        assert "ALLOTTED_TIME_EXCEEDED" in found.reason
        partitioned = TableConfig(partition_columns=("city",), column_types=TYPES)
        file_level = verdict(
            Operation(K.DELETE, "city = 'a'"), Operation(K.DELETE, "city = 'b'"), partitioned, DATABRICKS
        )
        assert not file_level.conflict
        assert "ALLOTTED_TIME_EXCEEDED" not in file_level.reason


class TestPrecisionStaysSound:
    """Pairs the engines run safely that the model kept apart, now told apart where the rules say so."""

    def test_delta_spark_write_serializable_blind_insert_beside_a_delete_of_its_partition(self) -> None:
        # ConflictChecker: under WriteSerializable a transaction that changes no metadata checks only the
        # winner's non-blind added files; a DELETE changes none. The Databricks page says the same.
        table = TableConfig(
            partition_columns=("date",), properties={"delta.isolationLevel": "WriteSerializable"}
        )
        append = Operation(K.INSERT, predicate="date = '2024-01-01'")
        delete = Operation(K.DELETE, predicate="date = '2024-01-01'")
        found = verdict(append, delete, table, SPARK)
        assert not found.conflict
        assert "ConflictChecker" in found.reason
        # Serializable (the default) still checks the blind append's files.
        assert verdict(append, delete, TableConfig(partition_columns=("date",)), SPARK).conflict
        # A DELETE that also rewrites a partition the append does not touch: still only WriteSerializable.
        other = Operation(K.DELETE, predicate="date = '2024-01-01' AND id = 3")
        assert not verdict(append, other, table, SPARK).conflict


class TestIntegerTextOnDeltaRs:
    """delta-rs reads ``k = '01'`` on an INT partition as ``k = 1`` (tests/engines/test_deltars_integer_text.py)."""

    def test_integer_text_is_a_number_on_an_integer_partition(self) -> None:
        table = TableConfig(partition_columns=("k",), column_types=(("k", "integer"),))
        text = Operation(K.DELETE, "k = '01'")
        assert not verdict(text, Operation(K.DELETE, "k = 2"), table, RS).conflict
        assert verdict(text, Operation(K.DELETE, "k = 1"), table, RS).conflict
        assert verdict(text, Operation(K.DELETE, "k = '1'"), table, RS).conflict

    @pytest.mark.parametrize("types", [(("k", "string"),), None])
    def test_not_on_a_string_or_untyped_partition(self, types: tuple[tuple[str, str], ...] | None) -> None:
        # The rewrite needs the integer type: on a STRING column, or one of unknown type, it is not made.
        table = TableConfig(partition_columns=("k",), column_types=types)
        assert verdict(Operation(K.DELETE, "k = '01'"), Operation(K.DELETE, "k = 1"), table, RS).conflict


RULES = Path(__file__).resolve().parents[2] / "provider" / "core" / "rules"


class TestOneReadingPlace:
    """Rule modules read table properties only through deltaguard.core.closed_world."""

    @pytest.mark.parametrize("module", sorted(RULES.glob("*.py")), ids=lambda p: p.name)
    def test_no_rule_module_reads_properties_itself(self, module: Path) -> None:
        forbidden = {"get_property", "flag", "properties", "deletion_vectors_enabled"}
        tree = ast.parse(module.read_text(encoding="utf-8"))
        used = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)} & forbidden
        assert not used, f"{module.name} reads {sorted(used)} without deltaguard.core.closed_world"
