"""The conflict model and ``deltaguard check`` refuse hostile input with a one-line message, never a traceback.

Hypothesis feeds deep and long predicates, odd literals and malformed documents. The sizes the
hypothesis runs use stay below the parser's limits; the inputs ``python -m lab.fuzz`` once found crashing
beyond them are pinned below.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from deltaguard.commands.check import check_documents
from deltaguard.core.sql.classify import classify_sql
from lab.fuzz.run import check_text
from lab.fuzz.strategies import HostileLimits, hostile_documents, hostile_predicates

#: sizes below the first crash measured on the model (nesting 80, NOT chains 40, AND/OR chains 1000)
HANDLED = HostileLimits(depth=60, chain=800, mixed=25, json_depth=900)


@settings(
    max_examples=80, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
@given(hostile_documents(HANDLED))
def test_check_refuses_or_decides_hostile_documents(document: Any) -> None:
    if isinstance(document, str):
        assert check_text(document) in (0, 2)
        return
    try:
        result = check_documents(document)
    except ValueError as error:  # the documented refusal: one line
        assert "\n" not in str(error).strip()
    else:
        assert result["verdict"] in ("conflict", "no_conflict")


@settings(
    max_examples=60, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
@given(hostile_predicates(HANDLED))
def test_the_classifier_refuses_or_classifies_hostile_where_clauses(predicate: str) -> None:
    try:
        classified = classify_sql(f"DELETE FROM t WHERE {predicate}")
    except ValueError as error:  # the documented refusal names the statement
        assert "cannot classify" in str(error)
    else:
        assert classified.operation.kind.value == "DELETE" and classified.table == "t"


def _document(predicate: str) -> str:
    return json.dumps(
        {
            "engine": {"name": "delta-rs", "version": "1.6.6"},
            "table": {"partition_columns": ["p"]},
            "running": [{"operation": "DELETE", "predicate": "p = 'a'"}],
            "candidate": {"operation": "DELETE", "predicate": predicate},
        }
    )


def _not_chain(depth: int) -> str:
    text = "p = 'a'"
    for i in range(depth):
        text = f"NOT ({text} {'AND' if i % 2 else 'OR'} id > {i})"
    return text


#: valid documents whose predicates were once too deep or too long for the parser: each gets a verdict
DEEP_PREDICATES = [
    pytest.param("(" * 80 + "p = 'a'" + ")" * 80, id="nested-parentheses-80"),
    pytest.param(_not_chain(40), id="nested-not-and-or-40"),
    pytest.param(" AND ".join(f"id = {i}" for i in range(1000)), id="and-chain-1000"),
]


@pytest.mark.parametrize("predicate", DEEP_PREDICATES)
def test_once_crashing_predicates_get_a_verdict(predicate: str) -> None:
    assert check_text(_document(predicate)) == 0
    result = check_documents(json.loads(_document(predicate)))
    # Each may read p = 'a', where the running DELETE deletes: a verdict, and a conflict.
    assert result["verdict"] == "conflict", result["reasons"]


def test_json_nested_past_the_parser_is_invalid_input() -> None:
    text = '{"engine": {"name": "delta-rs", "version": "1.6.6"}, "running": ' + "[" * 100_000
    assert check_text(text + "]" * 100_000 + "}") == 2
