"""Oversized SQL is refused with one line before sqlglot's parser sees it, in the CLI and in the operators' checks.

A 10 MB predicate of 300,000 ORs used to keep ``deltaguard check`` parsing for minutes. No wall-clock bound
here: the proof that the answer is quick is that the parser is never handed the oversized text.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator

import pytest
import sqlglot.parser

from deltaguard.cli import main
from deltaguard.commands import USAGE_EXIT as EXIT_INVALID
from deltaguard.core.sql.limits import MAX_SQL_CHARS, MAX_SQL_TOKENS, sql_size_problem
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.base import validate_spec
from deltaguard.engines.errors import InvalidWriteError
from deltaguard.engines.specs import DeleteSpec, MergeSpec, UpdateSpec

#: 300,000 ORs (about 4 MB): over the character bound
LONG = " OR ".join(f"id = {i}" for i in range(300_000))
#: 3,000 ANDs (12,000 tokens, 40 KB): within the character bound, over the token bound
MANY_TOKENS = " AND ".join(f"id = {i}" for i in range(3_000))


@pytest.fixture
def parsed_lengths(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The length of every SQL text sqlglot's parser is asked to parse while the test runs."""
    seen: list[int] = []
    original = sqlglot.parser.Parser.parse

    def recording(self: sqlglot.parser.Parser, raw_tokens: list[object], sql: str) -> object:
        seen.append(len(sql or ""))
        return original(self, raw_tokens, sql)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlglot.parser.Parser, "parse", recording)
    yield seen


def _check(document: object, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(document)))
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    return main(["check", "-"]), out.getvalue(), err.getvalue()


def test_the_bounds_themselves() -> None:
    assert sql_size_problem("id = 1") is None
    assert "characters" in (sql_size_problem(LONG) or "")
    assert len(MANY_TOKENS) < MAX_SQL_CHARS
    assert f"{MAX_SQL_TOKENS:,}" in (sql_size_problem(MANY_TOKENS) or "")


@pytest.mark.parametrize("text", [LONG, MANY_TOKENS], ids=["long", "many-tokens"])
@pytest.mark.parametrize(
    "candidate",
    [
        lambda text: {"operation": "DELETE", "predicate": text},
        lambda text: {"operation": "MERGE", "merge_condition": text},
        lambda text: {"sql": f"DELETE FROM t WHERE {text}"},
        lambda text: {"sql": f"UPDATE t SET v = 1 WHERE {text}"},
    ],
    ids=["predicate", "merge-condition", "sql-delete", "sql-update"],
)
def test_check_refuses_oversized_sql_with_one_line_and_never_parses_it(
    text: str, candidate: object, monkeypatch: pytest.MonkeyPatch, parsed_lengths: list[int]
) -> None:
    document = {
        "engine": {"name": "delta-rs", "version": "1.6.6"},
        "table": {"partition_columns": ["date"]},
        "running": [{"operation": "DELETE", "predicate": "date = '2024-01-01'"}],
        "candidate": candidate(text),  # type: ignore[operator]
    }
    code, out, err = _check(document, monkeypatch)
    assert (code, out) == (EXIT_INVALID, "")
    assert err.startswith("deltaguard check: ") and err.count("\n") == 1, err[:500]
    assert "too large to parse" in err and len(err) < 1_000
    assert all(length < len(text) for length in parsed_lengths), "the oversized text reached the parser"


@pytest.mark.parametrize("text", [LONG, MANY_TOKENS], ids=["long", "many-tokens"])
@pytest.mark.parametrize(
    "spec",
    [
        lambda text: DeleteSpec(predicate=text),
        lambda text: UpdateSpec(updates={"v": "1"}, predicate=text),
        lambda text: UpdateSpec(updates={"v": text}),
        lambda text: MergeSpec(source="/tmp/s", condition=text, matched_update_all=True),
    ],
    ids=["delete", "update-predicate", "update-expression", "merge"],
)
def test_an_operators_spec_check_refuses_oversized_sql_before_parsing(
    text: str, spec: object, parsed_lengths: list[int]
) -> None:
    with pytest.raises(InvalidWriteError, match="too large to parse") as raised:
        validate_spec(spec(text), TableConfig(uri="/data/t"), columns=("id", "v"))  # type: ignore[operator]
    assert len(str(raised.value)) < 1_000
    assert all(length < len(text) for length in parsed_lengths), "the oversized text reached the parser"


def test_text_at_the_bound_still_parses() -> None:
    within = " OR ".join(f"id = {i}" for i in range(MAX_SQL_TOKENS // 4 - 1))
    assert sql_size_problem(within) is None
    validate_spec(DeleteSpec(predicate=within), TableConfig(uri="/data/t"), columns=("id",))
