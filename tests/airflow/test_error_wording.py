"""Errors a DAG author sees name the write as a statement (``an UPDATE``), never an internal class."""

from __future__ import annotations

import re

import pytest

from tests.airflow.helpers import task_context

#: internal names a message must not show: write-spec classes, sqlglot's error classes
INTERNAL = re.compile(r"\b\w+Spec\b|ParseError|TokenError|OptimizeError|UnsupportedError|SqlglotError")


def test_a_write_to_a_missing_table_names_the_statement(tmp_path, lease_store_url) -> None:
    from deltaguard.operators.base import InvalidTaskInputError
    from deltaguard.operators.dml import DeltaUpdateOperator

    op = DeltaUpdateOperator(
        task_id="update", table=str(tmp_path / "missing"), updates={"amount": "0"}, predicate="id = 1"
    )
    with pytest.raises(InvalidTaskInputError) as raised:
        op.execute(task_context("update"))
    message = str(raised.value)
    assert "An UPDATE needs an existing table" in message
    assert not INTERNAL.search(message), message


@pytest.mark.parametrize("spec_name", ["UpdateSpec", "MergeSpec", "OptimizeSpec", "AddColumnsSpec"])
def test_every_write_has_a_name_in_the_users_terms(spec_name: str) -> None:
    from deltaguard.engines import specs
    from deltaguard.engines.specs import write_name

    spec = object.__new__(getattr(specs, spec_name))
    assert write_name(spec) != "this write" and not INTERNAL.search(write_name(spec))


def test_sql_that_cannot_be_rendered_says_why_without_sqlglot_names() -> None:
    from deltaguard.core.sql.literals import RenderError, render_sql

    with pytest.raises(RenderError) as raised:
        render_sql("((((" * 3000 + "1" + "))))" * 3000, "postgres")
    assert not INTERNAL.search(str(raised.value)) and "RecursionError" not in str(raised.value)
