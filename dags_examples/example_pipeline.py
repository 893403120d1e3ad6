"""Shared pieces of the example daily pipeline: table locations, seed data and the daily source rows.

Both example DAGs (``deltaguard_daily_sales`` with deltaguard operators, ``conventional_daily_sales`` with
one-slot pools) use this module, and so does the end-to-end test for the INPUTS (seed and source rows); the
test computes the expected final tables itself. Nothing here reads Airflow configuration or touches
a table at import time: the DAG files only need the paths.

Tables (under the data directory, see :func:`data_dir`):

- ``sales_fact``: partitioned by ``(date, country)``; one MERGE per country and day upserts the day's rows.
- ``events``: an append-only event log; several tasks append to it at once.
- ``customers``: an unpartitioned dimension; an UPDATE, a DELETE and a schema change (ADD COLUMNS).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

#: Environment variable naming the data directory (the harness sets it for every Airflow component).
DATA_DIR_ENV = "DELTAGUARD_EXAMPLE_DATA_DIR"
#: Seconds each data write spends producing its rows (stands in for the upstream job it waits on).
WRITE_SECONDS_ENV = "DELTAGUARD_EXAMPLE_WRITE_SECONDS"
#: The DAGs' schedule (default ``@daily``); the demo and the tests set ``none`` and trigger runs by hand, so
#: unpausing a DAG does not also start the latest scheduled run.
SCHEDULE_ENV = "DELTAGUARD_EXAMPLE_SCHEDULE"
#: An object-store URI (``s3://bucket/prefix``) to keep the tables under instead of the data directory; the
#: production-shaped stack (``python -m benchmarks.cluster``) sets it. Credentials come from ``AWS_*``.
TABLE_ROOT_ENV = "DELTAGUARD_EXAMPLE_TABLE_ROOT"
#: How many runs of one example DAG may run at once (default 1).
MAX_ACTIVE_RUNS_ENV = "DELTAGUARD_EXAMPLE_MAX_ACTIVE_RUNS"
DEFAULT_WRITE_SECONDS = 8.0

COUNTRIES: tuple[str, ...] = ("DE", "FR", "IT", "ES")
EVENT_SOURCES: tuple[str, ...] = ("orders", "shipments")
SKUS_PER_DAY = 12
#: SKUs already present for the business date before the MERGEs run (they get updated, the rest inserted).
SEEDED_SKUS = 6
SEED_CUSTOMERS = 30
#: The ``customers`` column added by the schema-change task.
NEW_CUSTOMER_COLUMN = ("loyalty_points", "bigint")
#: The business date used when a run names none (the demo and the test pass it in the run conf).
DEFAULT_DATE = "2026-11-21"
PREVIOUS_DATE = "2026-11-20"

SALES_SCHEMA = pa.schema(
    [
        ("date", pa.string()),
        ("country", pa.string()),
        ("sku", pa.int64()),
        ("qty", pa.int64()),
        ("amount", pa.float64()),
    ]
)
EVENTS_SCHEMA = pa.schema(
    [("date", pa.string()), ("source", pa.string()), ("seq", pa.int64()), ("message", pa.string())]
)
CUSTOMERS_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("country", pa.string()),
        ("status", pa.string()),
        ("lifetime_value", pa.float64()),
        ("tier", pa.string()),
    ]
)


def data_dir() -> Path:
    """``$DELTAGUARD_EXAMPLE_DATA_DIR``, else ``$AIRFLOW_HOME/deltaguard_example_data``."""
    configured = os.environ.get(DATA_DIR_ENV)
    if configured:
        return Path(configured)
    return Path(os.environ.get("AIRFLOW_HOME", Path.home() / "airflow")) / "deltaguard_example_data"


def table_uris(variant: str) -> dict[str, str]:
    """The three table locations of one pipeline variant (``deltaguard`` or ``conventional``)."""
    root = os.environ.get(TABLE_ROOT_ENV, "").rstrip("/")
    if root:
        return {name: f"{root}/{variant}/{name}" for name in ("sales_fact", "events", "customers")}
    base = data_dir() / variant
    return {name: str(base / name) for name in ("sales_fact", "events", "customers")}


def max_active_runs() -> int:
    return int(os.environ.get(MAX_ACTIVE_RUNS_ENV, "1"))


def schedule() -> str | None:
    value = os.environ.get(SCHEDULE_ENV, "@daily").strip()
    return None if value.lower() in ("", "none") else value


def write_seconds() -> float:
    return float(os.environ.get(WRITE_SECONDS_ENV, DEFAULT_WRITE_SECONDS))


def business_date(dag_run: Any, logical_date: datetime | None = None) -> str:
    """The day a run processes: ``conf["date"]``, else the logical date, else when the run was due.

    Used as a Jinja macro (``{{ business_date(dag_run, logical_date) }}``) and by the source callables.
    """
    conf = getattr(dag_run, "conf", None) or {}
    if conf.get("date"):
        return str(date.fromisoformat(str(conf["date"])))
    when = logical_date or getattr(dag_run, "logical_date", None) or getattr(dag_run, "run_after", None)
    return when.date().isoformat() if when is not None else DEFAULT_DATE


# -- rows -------------------------------------------------------------------------------------------


def price(sku: int) -> float:
    return round(2.5 + sku * 1.25, 2)


def sales_rows(
    day: str, country: str, skus: range | None = None, qty_offset: int = 0
) -> list[dict[str, Any]]:
    """The day's sales of one country: a deterministic function of (day, country, sku)."""
    ordinal = date.fromisoformat(day).toordinal()
    rows = []
    for sku in skus or range(1, SKUS_PER_DAY + 1):
        qty = (sku * 7 + ord(country[0]) * 3 + ord(country[1]) + ordinal) % 40 + 1 + qty_offset
        rows.append(
            {"date": day, "country": country, "sku": sku, "qty": qty, "amount": round(qty * price(sku), 2)}
        )
    return rows


def seed_sales_rows(day: str) -> list[dict[str, Any]]:
    """What ``sales_fact`` holds before the run: all of the previous day, and stale rows for some SKUs."""
    rows: list[dict[str, Any]] = []
    for country in COUNTRIES:
        rows += sales_rows(PREVIOUS_DATE, country)
        # stale figures (quantity 0) that the day's MERGE must overwrite
        rows += [dict(r, qty=0, amount=0.0) for r in sales_rows(day, country, range(1, SEEDED_SKUS + 1))]
    return rows


def event_rows(day: str, source: str) -> list[dict[str, Any]]:
    return [
        {"date": day, "source": source, "seq": i, "message": f"{source} batch {i} for {day}"}
        for i in range(5)
    ]


def seed_customer_rows() -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "name": f"customer {i:02d}",
            "country": COUNTRIES[i % len(COUNTRIES)],
            "status": "closed" if i % 5 == 0 else "active",
            "lifetime_value": float(i * 100),
            "tier": "standard",
        }
        for i in range(1, SEED_CUSTOMERS + 1)
    ]


def customer_change_rows(day: str) -> list[dict[str, Any]]:
    """The day's export from the CRM, upserted into ``customers``: renamed and new customers.

    New customers arrive active and already carry the tier the UPDATE would give them, so the result
    does not depend on whether the upsert commits before or after the UPDATE and the DELETE.
    """
    renamed = [dict(row, name=f"{row['name']} (renamed {day})") for row in seed_customer_rows()[:2]]
    new = []
    for i in range(SEED_CUSTOMERS + 1, SEED_CUSTOMERS + 5):
        value = float((i - SEED_CUSTOMERS) * 450)
        new.append(
            {
                "id": i,
                "name": f"customer {i:02d}",
                "country": COUNTRIES[i % len(COUNTRIES)],
                "status": "active",
                "lifetime_value": value,
                "tier": "gold" if value > 1000 else "standard",
            }
        )
    return renamed + new


#: The customers upsert: rename matched customers, insert new ones with the source's columns (so it also
#: works after the schema change added a column the source lacks).
CUSTOMER_MERGE_CONDITION = "t.id = s.id"
CUSTOMER_MERGE_UPDATE = {"name": "s.name"}
CUSTOMER_MERGE_INSERT = {
    column: f"s.{column}" for column in ("id", "name", "country", "status", "lifetime_value", "tier")
}

#: The customers UPDATE and DELETE. They commute (the UPDATE never touches what the DELETE removes
#: differently), so the final table does not depend on which of them the lease manager runs first.
CUSTOMER_UPDATE = {"tier": "'gold'"}
CUSTOMER_UPDATE_PREDICATE = "lifetime_value > 1000"
CUSTOMER_DELETE_PREDICATE = "status = 'closed'"


def to_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema)


# -- task callables ----------------------------------------------------------------------------------


def _current_day() -> str:
    from airflow.sdk import get_current_context

    context = get_current_context()
    return business_date(context["dag_run"], context.get("logical_date"))


def slow_source(kind: str, key: str) -> Callable[[], pa.Table]:
    """A zero-argument source callable that spends :func:`write_seconds` producing the day's rows.

    The sleep stands in for the upstream job a real write waits on; it makes writes long enough that the
    scheduler visibly runs compatible ones at the same time.

    :param kind: ``sales`` (``key`` = country), ``events`` (``key`` = event source) or ``customers``.
    :param key: see ``kind``.
    """
    if kind not in ("sales", "events", "customers"):
        raise ValueError(f"unknown source kind {kind!r}")

    def produce() -> pa.Table:
        day = _current_day()
        time.sleep(write_seconds())
        if kind == "customers":
            return to_table(customer_change_rows(day), CUSTOMERS_SCHEMA)
        if kind == "sales":
            return to_table(sales_rows(day, key), SALES_SCHEMA)
        return to_table(event_rows(day, key), EVENTS_SCHEMA)

    produce.__name__ = f"{kind}_{key}_rows"
    return produce


def create_tables(variant: str, day: str) -> dict[str, str]:
    """Create the variant's three tables with their seed rows, unless they already exist."""
    from deltalake import DeltaTable, write_deltalake

    uris = table_uris(variant)
    seeds = {
        "sales_fact": (to_table(seed_sales_rows(day), SALES_SCHEMA), ["date", "country"]),
        "events": (to_table([], EVENTS_SCHEMA), None),
        "customers": (to_table(seed_customer_rows(), CUSTOMERS_SCHEMA), None),
    }
    for name, (rows, partition_by) in seeds.items():
        if DeltaTable.is_deltatable(uris[name]):
            continue
        if "://" not in uris[name]:
            Path(uris[name]).mkdir(parents=True, exist_ok=True)
        # Two commits, so each partition holds two small files and the nightly OPTIMIZE has work to do.
        evens = pa.array(range(0, rows.num_rows, 2), type=pa.int64())
        odds = pa.array(range(1, rows.num_rows, 2), type=pa.int64())
        write_deltalake(uris[name], rows.take(evens), partition_by=partition_by, mode="error")
        write_deltalake(uris[name], rows.take(odds), partition_by=partition_by, mode="append")
    return uris


#: The conventional pipeline's hand-made pools: one slot per table, so its writes never overlap.
CONVENTIONAL_POOLS: dict[str, str] = {
    name: f"conventional_{name}" for name in ("sales_fact", "events", "customers")
}


def conventional_write(table: str, write: str, key: str = "") -> dict[str, object]:
    """One write of the conventional pipeline, straight through ``deltalake``, as such DAGs usually do it.

    It opens the table (its read snapshot) first, then waits for its rows, then commits: a real long
    transaction. Only the one-slot pool keeps two of them on one table from colliding.

    :param table: ``sales_fact``, ``events`` or ``customers``.
    :param write: ``merge``, ``upsert`` (customers), ``append``, ``update``, ``delete``, ``add_column`` or ``optimize``.
    :param key: the country (merge) or the event source (append).
    """
    from deltalake import DeltaTable, Field, write_deltalake

    uri = table_uris("conventional")[table]
    day = _current_day()
    started = time.monotonic()
    target = DeltaTable(uri)
    before = target.version()
    if write == "merge":
        time.sleep(write_seconds())
        source = to_table(sales_rows(day, key), SALES_SCHEMA)
        metrics = (
            target.merge(source, "t.date = s.date AND t.country = s.country AND t.sku = s.sku", "s", "t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
    elif write == "upsert":
        time.sleep(write_seconds())
        metrics = (
            target.merge(
                to_table(customer_change_rows(day), CUSTOMERS_SCHEMA), CUSTOMER_MERGE_CONDITION, "s", "t"
            )
            .when_matched_update(CUSTOMER_MERGE_UPDATE)
            .when_not_matched_insert(CUSTOMER_MERGE_INSERT)
            .execute()
        )
    elif write == "append":
        time.sleep(write_seconds())
        write_deltalake(target, to_table(event_rows(day, key), EVENTS_SCHEMA), mode="append")
        metrics = {}
    elif write == "update":
        metrics = target.update(updates=CUSTOMER_UPDATE, predicate=CUSTOMER_UPDATE_PREDICATE)
    elif write == "delete":
        metrics = target.delete(CUSTOMER_DELETE_PREDICATE)
    elif write == "add_column":
        target.alter.add_columns(Field(NEW_CUSTOMER_COLUMN[0], "long", nullable=True))
        metrics = {}
    elif write == "optimize":
        metrics = target.optimize.compact()
    else:
        raise ValueError(f"unknown write {write!r}")
    after = DeltaTable(uri).version()
    return {
        "table_uri": uri,
        # None when nothing was committed (e.g. OPTIMIZE with nothing to compact); the pool serializes the
        # table's writes, so a new version is this task's own commit
        "version": after if after != before else None,
        "elapsed_s": round(time.monotonic() - started, 3),
        "metrics": {k: str(v) for k, v in metrics.items()},
    }
