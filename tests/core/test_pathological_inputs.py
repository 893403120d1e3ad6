"""Valid but pathological input always gets a verdict; invalid input gets exit 2 and one line on stderr.

Deep parentheses, long AND/OR chains and huge integers are valid SQL; the model may judge them
conservatively (as the whole table, with a reason) but must never crash. The same parser serves the
``check`` command, the operators (through :func:`~deltaguard.core.sql.classify.classify_sql`) and the lease
manager (through :func:`~deltaguard.core.model.decide`), so both entry points are exercised.
"""

from __future__ import annotations

import io
import json
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deltaguard.cli import main
from deltaguard.commands import USAGE_EXIT as EXIT_INVALID
from deltaguard.core.model import decide
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.sql.classify import classify_sql
from deltaguard.core.table_config import TableConfig

ENGINES = [
    {"name": "databricks", "runtime": "14.3"},
    {"name": "delta-spark", "version": "3.2.0"},
    {"name": "delta-rs", "version": "1.6.6"},
]


def _check(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    code = main(["check", "-"])
    return code, out.getvalue(), err.getvalue()


def _nested(depth: int) -> str:
    return "(" * depth + "date = '2024-01-01'" + ")" * depth


def _chain(length: int, connective: str) -> str:
    return f" {connective} ".join(f"id = {i}" for i in range(length))


predicates = st.one_of(
    st.integers(1, 400).map(_nested),
    st.tuples(st.integers(1, 1500), st.sampled_from(["AND", "OR"])).map(lambda a: _chain(*a)),
    st.integers(1, 6000).map(lambda digits: "id = " + "9" * digits),
    st.integers(1, 6000).map(lambda digits: f"id = CAST({'9' * digits} AS DECIMAL(38, 2))"),
    st.integers(1, 300).map(lambda depth: "NOT " * depth + "date = '2024-01-01'"),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(predicate=predicates, engine=st.sampled_from(ENGINES), as_sql=st.booleans())
def test_every_valid_predicate_gets_a_verdict(
    predicate: str, engine: dict[str, str], as_sql: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = (
        {"sql": f"DELETE FROM t WHERE {predicate}"}
        if as_sql
        else {"operation": "DELETE", "predicate": predicate}
    )
    document = {
        "engine": engine,
        "table": {"partition_columns": ["date"]},
        "running": [running],
        "candidate": {"operation": "DELETE", "predicate": "date = '2024-01-02'"},
    }
    code, out, err = _check(json.dumps(document), monkeypatch)
    assert code == 0, err
    verdict = json.loads(out)
    assert verdict["verdict"] in ("conflict", "no_conflict")
    if verdict["verdict"] == "conflict":
        assert verdict["reasons"]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(200, 3000), opener=st.sampled_from(["[", '{"a":']))
def test_deeply_nested_json_is_invalid_input_with_one_line(
    depth: int, opener: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    closer = "]" if opener == "[" else "}"
    code, out, err = _check(opener * depth + "1" + closer * depth, monkeypatch)
    assert code == EXIT_INVALID
    assert out == ""
    assert len(err.strip().splitlines()) == 1


def test_a_huge_json_number_is_invalid_input_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = _check('{"engine": ' + "9" * 5000 + "}", monkeypatch)
    assert (code, out) == (EXIT_INVALID, "")
    assert len(err.strip().splitlines()) == 1


def test_a_too_deep_predicate_conflicts_with_a_reason_in_the_lease_managers_entry_point() -> None:
    deep = Operation(OperationKind.DELETE, predicate=_nested(80))
    other = Operation(OperationKind.DELETE, predicate="date = '2024-01-02'")
    decision = decide(
        other, [deep], TableConfig(partition_columns=("date",)), EngineProfile(EngineName.DELTA_RS, "1.6.6")
    )
    assert decision.conflict
    assert any("too deeply" in reason for reason in decision.reasons)


@pytest.mark.parametrize("keyword", ["DELETE FROM t WHERE", "UPDATE t SET v = 1 WHERE"])
def test_a_too_deep_statement_is_classified_as_the_whole_table(keyword: str) -> None:
    operation = classify_sql(f"{keyword} {_nested(120)}").operation
    assert operation.reads_target and operation.predicate is None
    assert operation.label is not None and "too deeply" in operation.label
