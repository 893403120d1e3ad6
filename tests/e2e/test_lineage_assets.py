"""End to end under the real Airflow scheduler: a deltaguard write's OpenLineage event, its asset event
scheduling a downstream DAG, and the table-commit asset watcher in the real triggerer.

The shared user's stack (:mod:`tests.e2e.user_stack`: scheduler, dag-processor, triggerer, api-server;
LocalExecutor) serves ``dags_examples/deltaguard_table_assets.py`` among the other examples. OpenLineage is
configured with its file transport, so every event the provider emits lands as a JSON line the test reads.
Evidence comes from outside the tasks: the Delta log of each table, the REST API (runs, XComs of the
downstream tasks) and the OpenLineage file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from benchmarks.harness.airflow_runner import AirflowHome, AirflowStack
from tests.e2e.user_stack import OL_NAMESPACE, UserStack

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

LOAD, REPORT, WATCH = "deltaguard_orders_load", "deltaguard_orders_report", "deltaguard_partner_feed_watch"


@dataclass(frozen=True)
class Outcome:
    home: AirflowHome
    orders: str
    partner_feed: str
    load_state: str
    report_runs: list[dict[str, Any]]
    report_extras: list[Any]
    watch_runs: list[dict[str, Any]]
    watch_extras: list[Any]
    events: list[dict[str, Any]]


def _runs(stack: AirflowStack, dag_id: str) -> list[dict[str, Any]]:
    return list(stack.api.get(f"/api/v2/dags/{dag_id}/dagRuns?limit=20")["dag_runs"])


def _finished_run(stack: AirflowStack, dag_id: str, timeout: float = 180.0) -> list[dict[str, Any]]:
    def done() -> list[dict[str, Any]] | None:
        runs = _runs(stack, dag_id)
        return runs if runs and all(r["state"] in ("success", "failed") for r in runs) else None

    return list(stack.api.wait(f"a finished run of {dag_id}", done, timeout, 2.0))


@pytest.fixture(scope="module")
def outcome(user_stack: UserStack) -> Iterator[Outcome]:
    from deltaguard.pools import PoolsConfig, desired_pools
    from deltaguard.writes.table_uri import table_key

    home, stack, data = user_stack.home, user_stack.stack, user_stack.data
    orders, partner_feed = str(data / "assets" / "orders"), str(data / "assets" / "partner_feed")
    # version 0, before this module commits to it; the watcher reports commits after version 0
    write_deltalake(partner_feed, pa.table({"feed_id": [0]}))
    ol_file = user_stack.openlineage_file
    for spec in desired_pools(PoolsConfig(), [table_key(orders), table_key(orders + "_audit")]):
        stack.api.set_pool(spec.name, spec.slots, spec.description, include_deferred=False)
    for dag_id in (LOAD, REPORT, WATCH):
        stack.wait_for_dag(dag_id)
    stack.api.set_paused(REPORT, False)
    stack.api.set_paused(WATCH, False)
    run_id = stack.trigger(LOAD)
    load_state = stack.wait_for_run(LOAD, run_id, timeout=240)
    report_runs = _finished_run(stack, REPORT)
    report_extras = [stack.api.xcom(REPORT, r["dag_run_id"], "report") for r in report_runs]
    # another system commits to the watched table with plain delta-rs: version 1
    write_deltalake(partner_feed, pa.table({"feed_id": [1]}), mode="append")
    watch_runs = _finished_run(stack, WATCH, timeout=240)
    watch_extras = [stack.api.xcom(WATCH, r["dag_run_id"], "on_commit") for r in watch_runs]
    time.sleep(2)  # the OpenLineage listener emits from a forked child after the task finished
    # no file at all means the provider emitted nothing (the OpenLineage test then fails, the others run)
    lines = ol_file.read_text().splitlines() if ol_file.exists() else []
    events = [json.loads(line) for line in lines if line.strip()]
    yield Outcome(
        home, orders, partner_feed, load_state, report_runs, report_extras, watch_runs, watch_extras, events
    )


def test_the_write_succeeded_and_committed_once(outcome: Outcome) -> None:
    assert outcome.load_state == "success"
    assert DeltaTable(outcome.orders).version() == 0  # the append created the table
    assert len(DeltaTable(outcome.orders).to_pyarrow_table()) == 2


def test_the_write_scheduled_the_downstream_dag_with_version_and_operation(outcome: Outcome) -> None:
    assert [r["state"] for r in outcome.report_runs] == ["success"]
    assert outcome.report_runs[0]["run_type"] == "asset_triggered"
    (extras,) = outcome.report_extras
    (extra,) = extras
    assert extra["version"] == DeltaTable(outcome.orders).version()
    assert extra["operation"] == "WRITE" and extra["committed"] is True
    assert extra["table_uri"] == f"file://{outcome.orders}"


def test_openlineage_complete_event_names_the_table_and_its_version(outcome: Outcome) -> None:
    complete = [
        e
        for e in outcome.events
        if e.get("eventType") == "COMPLETE" and e.get("job", {}).get("name") == f"{LOAD}.append_orders"
    ]
    assert len(complete) == 1, [(e.get("eventType"), e.get("job", {}).get("name")) for e in outcome.events]
    event = complete[0]
    assert event["job"]["namespace"] == OL_NAMESPACE
    (output,) = event["outputs"]
    assert (output["namespace"], output["name"]) == ("file", outcome.orders)
    version = str(DeltaTable(outcome.orders).version())
    assert output["facets"]["version"]["datasetVersion"] == version
    assert output["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "CREATE"
    assert output["facets"]["storage"]["storageLayer"] == "delta"
    write = event["run"]["facets"]["deltaguardWrite"]
    assert (write["operation"], str(write["version"]), write["committed"]) == ("WRITE", version, True)
    assert [f["name"] for f in output["facets"]["schema"]["fields"]] == ["order_id", "amount"]
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == 2
    assert write["_schemaURL"].startswith("https://")


def test_a_wrapped_write_has_the_same_lineage_read_from_its_table(outcome: Outcome) -> None:
    audit = outcome.orders.replace("/orders", "/orders_audit")
    complete = [
        e
        for e in outcome.events
        if e.get("eventType") == "COMPLETE" and e.get("job", {}).get("name") == f"{LOAD}.append_audit"
    ]
    assert len(complete) == 1, [(e.get("eventType"), e.get("job", {}).get("name")) for e in outcome.events]
    (output,) = complete[0]["outputs"]
    assert (output["namespace"], output["name"]) == ("file", audit)
    assert output["facets"]["version"]["datasetVersion"] == str(DeltaTable(audit).version())
    assert output["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "CREATE"
    assert [f["name"] for f in output["facets"]["schema"]["fields"]] == ["order_id", "checked"]
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == 2


def test_the_watcher_started_a_run_for_the_commit_made_outside_airflow(outcome: Outcome) -> None:
    assert [r["state"] for r in outcome.watch_runs] == ["success"]
    (extras,) = outcome.watch_extras
    text = json.dumps(extras)
    # the trigger's payload travels in the asset event's extra
    assert '"version": 1' in text and '"operation": "WRITE"' in text, text
    assert DeltaTable(outcome.partner_feed).version() == 1
