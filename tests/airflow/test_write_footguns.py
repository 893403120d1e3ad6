"""Input that would write far more than meant, or fail inside delta-rs, is refused before any lease.

Each case fails with :class:`InvalidTaskInputError` (an ``AirflowFailException``: no retry is spent), the
table keeps its version and the lease store never sees a request: an UPDATE whose predicate rendered
empty, a DELETE whose predicate holds for every row, a table at a system directory or in a pseudo
filesystem, a function DataFusion does not know, a literal that cannot take its column's type, and a
predicate too large to parse.
"""

from __future__ import annotations

from typing import Any

import pytest
from deltalake import DeltaTable

from tests.airflow.helpers import decision_rows, sales_table, task_context


def _refused(op: Any, lease_store_url: str) -> str:
    from deltaguard.operators.base import InvalidTaskInputError

    with pytest.raises(InvalidTaskInputError) as raised:
        op.execute(task_context(op.task_id))
    assert decision_rows(lease_store_url) == 0  # no lease was asked for
    return " ".join(str(raised.value).split())


@pytest.mark.parametrize("predicate", ["", " ", "\n"])
def test_an_update_whose_predicate_rendered_empty_is_refused(tmp_path, lease_store_url, predicate) -> None:
    from deltaguard.operators.dml import DeltaUpdateOperator

    table = sales_table(str(tmp_path / "sales"))
    op = DeltaUpdateOperator(task_id="update", table=table, updates={"amount": "0"}, predicate=predicate)
    assert "UPDATE predicate is empty" in _refused(op, lease_store_url)
    assert DeltaTable(table).version() == 0


@pytest.mark.parametrize(
    "predicate",
    ["1 = 1", "true", "TRUE", "NOT FALSE", "(1=1)", "id = 5 OR 1 = 1", "id IS NULL OR id IS NOT NULL"],
)
def test_a_delete_whose_predicate_holds_for_every_row_needs_consent(
    tmp_path, lease_store_url, predicate
) -> None:
    from deltaguard.operators.dml import DeltaDeleteOperator

    table = sales_table(str(tmp_path / "sales"))
    op = DeltaDeleteOperator(task_id="delete", table=table, predicate=predicate)
    assert "holds for every row" in _refused(op, lease_store_url)
    assert DeltaTable(table).version() == 0


def test_a_delete_that_is_not_provably_every_row_still_runs(tmp_path, lease_store_url) -> None:
    from deltaguard.core.sql.tautology import always_true
    from deltaguard.operators.dml import DeltaDeleteOperator

    assert not always_true("id = id")  # NULL on a NULL id: not claimed
    assert not always_true("coalesce(true, false)")
    table = sales_table(str(tmp_path / "sales"))
    DeltaDeleteOperator(task_id="delete", table=table, predicate="id = 1 AND 1 = 1").execute(
        task_context("delete")
    )
    assert DeltaTable(table).version() == 1


def test_allow_delete_all_is_the_consent(tmp_path, lease_store_url) -> None:
    from deltaguard.operators.dml import DeltaDeleteOperator

    table = sales_table(str(tmp_path / "sales"))
    op = DeltaDeleteOperator(task_id="delete", table=table, predicate="1 = 1", allow_delete_all=True)
    op.execute(task_context("delete"))
    assert DeltaTable(table).to_pyarrow_table().num_rows == 0


@pytest.mark.parametrize(
    "location", ["file:///", "/", "/proc/self", "/proc", "/sys/kernel/t", "/dev/shm/t", "/etc", "/tmp"]
)
def test_a_table_at_a_system_directory_or_in_a_pseudo_filesystem_is_refused(
    lease_store_url, location
) -> None:
    from deltaguard.operators.dml import DeltaDeleteOperator

    op = DeltaDeleteOperator(task_id="delete", table=location, predicate="id = 1")
    message = _refused(op, lease_store_url)
    assert "system directory" in message or "pseudo filesystem" in message, message


def test_a_table_behind_a_symlink_to_the_root_is_refused(tmp_path, lease_store_url) -> None:
    from deltaguard.operators.dml import DeltaDeleteOperator

    (tmp_path / "root").symlink_to("/")
    op = DeltaDeleteOperator(task_id="delete", table=str(tmp_path / "root"), predicate="id = 1")
    assert "system directory '/'" in _refused(op, lease_store_url)


@pytest.mark.parametrize(
    ("predicate", "reason"),
    [
        ("pg_sleep(5) = 1", "Invalid function 'pg_sleep'"),
        ("load_file('/etc/passwd') = 'x'", "Invalid function 'load_file'"),
        ("id = 'abc'", "Cannot cast string 'abc'"),
        ("no_such_column = 1", "no_such_column"),
    ],
)
@pytest.mark.parametrize("kind", ["delete", "update"])
def test_what_delta_rs_cannot_plan_is_refused_before_any_lease(
    tmp_path, lease_store_url, predicate, reason, kind
) -> None:
    from deltaguard.operators.dml import DeltaDeleteOperator, DeltaUpdateOperator

    table = sales_table(str(tmp_path / "sales"))
    op = (
        DeltaDeleteOperator(task_id=kind, table=table, predicate=predicate)
        if kind == "delete"
        else DeltaUpdateOperator(task_id=kind, table=table, updates={"amount": "0"}, predicate=predicate)
    )
    message = _refused(op, lease_store_url)
    assert reason in message, message
    assert DeltaTable(table).version() == 0


@pytest.mark.parametrize("kind", ["delete", "update"])
def test_what_delta_rs_cannot_plan_is_refused_on_the_handle_the_write_read(
    tmp_path, lease_store_url, kind
) -> None:
    """With file statistics the write keeps the handle its configuration was read from, and DataFusion plans
    its texts on that handle: the same refusal."""
    from deltaguard.operators.dml import DeltaDeleteOperator, DeltaUpdateOperator

    table = sales_table(str(tmp_path / "sales"))
    predicate = "pg_sleep(5) = 1"
    op = (
        DeltaDeleteOperator(task_id=kind, table=table, predicate=predicate, file_stats=True)
        if kind == "delete"
        else DeltaUpdateOperator(
            task_id=kind, table=table, updates={"amount": "0"}, predicate=predicate, file_stats=True
        )
    )
    message = _refused(op, lease_store_url)
    assert "Invalid function 'pg_sleep'" in message, message
    assert DeltaTable(table).version() == 0


def test_an_update_expression_with_an_unknown_function_is_refused(tmp_path, lease_store_url) -> None:
    from deltaguard.operators.dml import DeltaUpdateOperator

    table = sales_table(str(tmp_path / "sales"))
    op = DeltaUpdateOperator(task_id="update", table=table, updates={"amount": "pg_sleep(5)"})
    assert "Invalid function 'pg_sleep'" in _refused(op, lease_store_url)


def test_a_predicate_too_large_to_parse_is_refused_before_any_lease(tmp_path, lease_store_url) -> None:
    from deltaguard.operators.dml import DeltaDeleteOperator

    table = sales_table(str(tmp_path / "sales"))
    predicate = " OR ".join(f"id = {i}" for i in range(20_000))
    op = DeltaDeleteOperator(task_id="delete", table=table, predicate=predicate)
    assert "too large to parse" in _refused(op, lease_store_url)


def test_a_base_uri_may_be_a_system_directory_but_the_table_under_it_is_checked() -> None:
    from deltaguard.exceptions import TableUriError
    from deltaguard.writes.table_uri import resolve_table_uri

    assert resolve_table_uri("sales", "/mnt") == "/mnt/sales"  # tables live under a mount point
    assert resolve_table_uri("sales", "/tmp") == "/tmp/sales"
    with pytest.raises(TableUriError, match="pseudo filesystem /proc"):
        resolve_table_uri("self", "/proc")
    with pytest.raises(TableUriError, match="system directory '/etc'"):
        resolve_table_uri("etc", "/")
