"""String literals a Spark session's parser settings read otherwise (``spark.sql.ansi.doubleQuotedIdentifiers``,
``spark.sql.parser.escapedStringLiterals``): they separate nothing unless the session is known to run with
the defaults the model reads with. Measured on delta-spark in ``tests/spark/jars/test_session_settings_spark.py``.
"""

from __future__ import annotations

import pytest

from deltaguard.core.check_request import parse_engine
from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.sql.parser_settings import parser_dependent_literals
from deltaguard.core.table_config import TableConfig
from deltaguard.leases.codec import profile_from_json, profile_to_json

TABLE = TableConfig(
    partition_columns=("p",), column_types=(("p", "string"), ("x", "string"), ("id", "long")), exists=True
)


def _spark(default_parser: bool | None, ansi: bool | None = None) -> EngineProfile:
    return EngineProfile(
        EngineName.DELTA_SPARK, "4.4.0", session_ansi=ansi, session_default_parser=default_parser
    )


def _delete(predicate: str) -> Operation:
    return Operation(OperationKind.DELETE, predicate=predicate)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('p = "x"', ('"x"',)),
        ("p = 'a\\\\b'", ("'a\\\\b'",)),
        ("p = 'it\\'s'", ("'it\\'s'",)),
        ("p = r'a\\b'", ()),  # a raw string keeps its backslash under either setting
        ("p = 'x'", ()),
        ('`a"b` = 1', ()),  # a double quote inside an identifier
        ("p = 'say \"hi\"'", ()),  # inside a single-quoted literal
        (None, ()),
    ],
)
def test_literals_whose_reading_depends_on_the_parser(text: str | None, expected: tuple[str, ...]) -> None:
    assert parser_dependent_literals(text) == expected


def test_an_unreadable_text_is_listed_whole() -> None:
    assert parser_dependent_literals('p = "open') == ('p = "open',)


@pytest.mark.parametrize("default_parser", [None, False])
def test_a_double_quoted_literal_separates_nothing_unless_the_parser_is_known(
    default_parser: bool | None,
) -> None:
    verdict = pair_verdict(_delete('p = "x"'), _delete("p = 'y'"), TABLE, _spark(default_parser))
    assert verdict.conflict
    assert "doubleQuotedIdentifiers" in verdict.reason and '"x"' in verdict.reason


def test_with_the_default_parser_the_literal_is_text() -> None:
    assert not pair_verdict(_delete('p = "x"'), _delete("p = 'y'"), TABLE, _spark(True)).conflict


def test_with_ansi_known_off_double_quotes_are_text_but_backslashes_still_depend() -> None:
    off = _spark(None, ansi=False)
    assert not pair_verdict(_delete('p = "x"'), _delete("p = 'y'"), TABLE, off).conflict
    assert pair_verdict(_delete("p = 'a\\\\b'"), _delete("p = 'y'"), TABLE, off).conflict


def test_merge_conditions_and_assignments_are_read_too() -> None:
    merge = Operation(
        OperationKind.MERGE, merge_condition="t.p = 'y' AND t.id = s.id", assignments=(("x", '"v"'),)
    )
    delete = _delete("p = 'z'")
    assert pair_verdict(merge, delete, TABLE, _spark(None)).conflict
    assert not pair_verdict(merge, delete, TABLE, _spark(True)).conflict


def test_delta_rs_runs_the_model_s_own_parse() -> None:
    profile = EngineProfile(EngineName.DELTA_RS, "1.6.6")
    assert not pair_verdict(_delete('p = "x"'), _delete("p = 'y'"), TABLE, profile).conflict


def test_a_running_spark_write_is_read_with_its_own_session() -> None:
    running = Operation(OperationKind.DELETE, predicate='p = "x"', engine=_spark(None))
    assert pair_verdict(running, _delete("p = 'y'"), TABLE, _spark(True)).conflict


@pytest.mark.parametrize("value", [True, False, None])
def test_the_setting_survives_the_lease_store(value: bool | None) -> None:
    profile = _spark(value)
    assert profile_from_json(profile_to_json(profile)).session_default_parser is value


def test_a_check_request_may_state_it() -> None:
    profile = parse_engine({"name": "delta-spark", "version": "4.4.0", "default_parser": True})
    assert profile.session_default_parser is True
    assert parse_engine({"name": "delta-spark", "version": "4.4.0"}).session_default_parser is None
