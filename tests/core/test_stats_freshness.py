"""The freshness rule of file statistics in admission (pure: no store, no engine; ADR 0020)."""

from __future__ import annotations

from deltaguard.core.admission import Holder, Owner, TableView, admit
from deltaguard.core.file_stats import ColumnStats, FileStats, FileStatsSummary
from deltaguard.core.model import decide
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig

PROFILE = EngineProfile(EngineName.DELTA_RS, "1.6.6")


def day_file(path: str, day: str) -> FileStats:
    return FileStats(path, (("day", ColumnStats(day, day, 0)),), num_records=10)


def config(version: int) -> TableConfig:
    stats = FileStatsSummary(
        version=version,
        column_types=(("day", "date"), ("v", "long")),
        files=(day_file("a", "2024-01-01"), day_file("b", "2024-01-02")),
        indexed=frozenset({"day", "v"}),
    )
    return TableConfig(version=version, file_stats=stats)


def update(day: str) -> Operation:
    return Operation(OperationKind.UPDATE, predicate=f"day = '{day}'", assignments=(("v", "v + 1"),))


def holder(read_version: int | None, operation: Operation | None = None) -> Holder:
    return Holder("h", Owner(name="h"), operation or update("2024-01-01"), True, read_version=read_version)


def view(version: int, read_version: int | None, *granted: Holder) -> TableView:
    return TableView(
        "t", update("2024-01-02"), config(version), PROFILE, granted=granted, read_version=read_version
    )


def test_statistics_decide_when_no_holder_read_a_newer_snapshot() -> None:
    assert admit("r", 0.0, [view(5, 5, holder(5))], decide).granted
    assert admit("r", 0.0, [view(5, 5, holder(3))], decide).granted


def test_a_newer_or_unknown_holder_snapshot_keeps_the_predicate_rules_with_a_reason() -> None:
    for read, why in ((6, "read version 6, newer than the statistics"), (None, "recorded no read version")):
        verdict = admit("r", 0.0, [view(5, 5, holder(read))], decide)
        assert not verdict.granted
        assert any(why in r for r in verdict.reasons), verdict.reasons


def test_a_candidate_writing_from_another_snapshot_keeps_the_predicate_rules() -> None:
    for read in (None, 4, 6):
        verdict = admit("r", 0.0, [view(5, read, holder(5))], decide)
        assert not verdict.granted
        assert any("does not read that snapshot" in r for r in verdict.reasons), verdict.reasons


def test_holders_the_statistics_rule_never_judges_do_not_need_a_read_version() -> None:
    insert = holder(None, Operation(OperationKind.INSERT))
    verdict = admit("r", 0.0, [view(5, 5, insert)], decide)
    # the INSERT conflicts by the predicate rules, but the statistics were not refused because of it
    assert not any("were not used" in r for r in verdict.reasons), verdict.reasons
