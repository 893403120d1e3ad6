"""The priority policy judges a table on the configuration the lease manager last used for it.

The shape of the Spark orchestration benchmark (seed 0): on ``t0`` an UPDATE of ``p3`` and a blind INSERT
into ``p3``, on ``t1`` two MERGEs of ``p0``; both tables are ``WriteSerializable``. Only ``t1``'s MERGEs
conflict then (delta-spark's ConflictChecker lets a blind append pass an UPDATE under WriteSerializable),
so ``t1``'s chain must start first. Guessed without the table's properties (Serializable semantics), the
INSERT conflicts with the UPDATE and ``t0`` looked heavier.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from deltaguard.core.admission import LeaseRequest, Owner, TableClaim
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.engines.discovery import read_table_config
from deltaguard.leases.manager import LeaseManager
from deltaguard.leases.open import open_store
from deltaguard.pools.priority import engine_profile
from deltaguard.writes.table_uri import table_key

#: seconds: each table's two writes that conflict whatever the isolation level weigh less than t0's pair
CHAIN_S, OTHER_S = 23, 20
T0_PAIR_S = 24


def _table(path: Path) -> str:
    data = pa.table(
        {"id": pa.array([1, 2], pa.int64()), "v": pa.array([0, 0], pa.int64()), "p": ["p0", "p3"]}
    )
    write_deltalake(
        str(path),
        data,
        partition_by=["p"],
        configuration={"delta.isolationLevel": "WriteSerializable"},
    )
    return str(path)


def _record(store_url: str, uris: list[str]) -> None:
    """A lease decision on each table, as a run of the DAG makes: it records the table's configuration."""
    with open_store(store_url) as store:
        manager = LeaseManager(store)
        for uri in uris:
            owner = Owner(dag_id="earlier_run", task_id="w")
            claim = TableClaim(
                table_key(uri),
                Operation(OperationKind.UPDATE, predicate="p = 'p1'"),
                engine_profile("spark"),
                read_table_config(uri),
            )
            granted = manager.acquire(LeaseRequest(claims=(claim,), owner=owner, ttl_s=60.0))
            assert manager.release(granted.lease_id, owner)


def _dag(t0: str, t1: str) -> Any:
    from airflow.sdk import DAG

    from deltaguard.operators.dml import DeltaInsertOperator, DeltaMergeOperator, DeltaUpdateOperator

    common = {"engine": "spark", "spark_connect_conn_id": "spark_probe"}

    def merge(task_id: str, table: str, partition: str, seconds: int) -> None:
        DeltaMergeOperator(
            task_id=task_id,
            table=table,
            source="/s.parquet",
            condition="t.id = s.id",
            target_partition_values={"p": partition},
            matched_update={"v": "s.v"},
            not_matched_insert_all=True,
            expected_duration=seconds,
            **common,
        )

    def insert(task_id: str, table: str, partition: str, seconds: int) -> None:
        DeltaInsertOperator(
            task_id=task_id,
            table=table,
            source="/s.parquet",
            partition_values={"p": partition},
            expected_duration=seconds,
            **common,
        )

    def update(task_id: str, table: str, partition: str, seconds: int) -> None:
        DeltaUpdateOperator(
            task_id=task_id,
            table=table,
            updates={"v": "v + 1"},
            predicate=f"p = '{partition}'",
            expected_duration=seconds,
            **common,
        )

    with DAG("recorded_config_probe", schedule=None) as dag:
        insert("w001", t0, "p0", OTHER_S)
        update("w002", t0, "p1", OTHER_S)
        merge("w004", t0, "p2", OTHER_S)
        update("w006", t0, "p3", T0_PAIR_S)
        insert("w008", t0, "p3", T0_PAIR_S)
        merge("w000", t1, "p0", CHAIN_S)
        insert("w003", t1, "p1", OTHER_S)
        merge("w005", t1, "p2", OTHER_S)
        insert("w007", t1, "p3", OTHER_S)
        merge("w009", t1, "p0", CHAIN_S)
    return dag


#: t1's two MERGEs of p0: a chain whatever the isolation level
T1_CHAIN = ("w000", "w009")
#: t0's UPDATE of p3 and blind INSERT into p3: a chain only under Serializable semantics (the guess)
T0_PAIR = ("w006", "w008")


def _weights(t0: str, t1: str) -> dict[str, int]:
    """Each task's ``priority_weight`` after the policy."""
    from deltaguard.pools.priority import dag_policy

    dag = _dag(t0, t1)
    dag_policy(dag)
    return {task.task_id: task.priority_weight for task in dag.tasks}


def _rest(weights: dict[str, int], *chains: tuple[str, ...]) -> list[int]:
    return [w for task_id, w in weights.items() if not any(task_id in chain for chain in chains)]


def _assert_guessed(weights: dict[str, int]) -> None:
    """Guessed (no table properties): t0's pair of p3 is the heaviest chain, then t1's MERGEs of p0, then
    the writes that conflict with nothing, each weighing its own estimate."""
    pair, chain = [weights[t] for t in T0_PAIR], [weights[t] for t in T1_CHAIN]
    assert min(pair) >= 2 * T0_PAIR_S > max(chain) >= min(chain) >= 2 * CHAIN_S
    assert max(_rest(weights, T0_PAIR, T1_CHAIN)) <= OTHER_S + 1 < min(chain)


def test_the_recorded_write_serializable_configuration_puts_the_real_chain_first(
    tmp_path: Path, lease_store_url: str
) -> None:
    t0, t1 = _table(tmp_path / "t0"), _table(tmp_path / "t1")
    _record(lease_store_url, [t0, t1])
    weights = _weights(t0, t1)
    # t1: its two MERGEs of p0 are the chain (46 s); t0's writes are pairwise compatible (the longest, 24 s)
    chain = [weights[t] for t in T1_CHAIN]
    assert min(chain) >= 2 * CHAIN_S > T0_PAIR_S + 1 >= max(_rest(weights, T1_CHAIN))


def test_a_table_the_store_does_not_know_keeps_the_guess(tmp_path: Path, lease_store_url: str) -> None:
    t0, t1 = _table(tmp_path / "t0"), _table(tmp_path / "t1")
    _record(lease_store_url, [t1])  # t0 never leased: guessed, its UPDATE and INSERT of p3 conflict
    _assert_guessed(_weights(t0, t1))


@pytest.mark.parametrize(
    "url",
    [
        # nothing listens on port 1: refused at once
        "postgresql+psycopg://deltaguard@127.0.0.1:1/leases",
        "sqlite:///{tmp}/no-such-dir/leases.db",
        "mysql://somewhere/leases",
    ],
    ids=["unreachable-postgres", "missing-sqlite", "unsupported"],
)
def test_a_store_that_cannot_be_read_leaves_the_guess(
    tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    t0, t1 = _table(tmp_path / "t0"), _table(tmp_path / "t1")
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_URL", url.format(tmp=tmp_path))
    started = time.monotonic()
    weights = _weights(t0, t1)
    assert time.monotonic() - started < 10  # the store's short timeouts, not a stalled parse
    _assert_guessed(weights)
    assert not (tmp_path / "no-such-dir").exists()


def test_a_broken_store_row_leaves_the_guess(tmp_path: Path, lease_store_url: str) -> None:
    import sqlalchemy as sa

    t0, t1 = _table(tmp_path / "t0"), _table(tmp_path / "t1")
    _record(lease_store_url, [t0, t1])
    with open_store(lease_store_url) as store, store.engine.begin() as conn:
        conn.execute(sa.text("UPDATE dg_tables SET config_json = '{\"partition_columns\": 7'"))
    _assert_guessed(_weights(t0, t1))
