"""Jar-gated tests: real delta-spark with Delta's jars from the install step (``make delta-jars``).

The jars are never optional here: without them these tests fail, naming the missing step. A JVM keeps the
classpath it started with, so every Spark session of the test process starts with the jars (sessions
deltaguard creates add them to ``spark.jars``); tests of a Spark *without* Delta run in their own process
(``tests/spark/test_without_delta_jars.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.spark.conftest import SMALL_CONF


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here) and "delta_spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.delta_jars)
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def delta_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One local[4] session with Delta's jars, extension and catalog for the whole test process."""
    from deltaguard.engines.spark.setup import check_delta_available, delta_jars_from_env

    if not delta_jars_from_env():
        pytest.fail(
            "Delta Lake's Spark jars are not installed: run `make delta-jars` (or set DELTAGUARD_DELTA_JARS "
            "to a folder holding them)"
        )
    session = shared_delta_session(tmp_path_factory)
    check_delta_available(session)
    yield session


def shared_delta_session(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The process's Delta-enabled session (created once; later callers get the same one)."""
    from deltaguard.engines.spark.session import worker_session

    warehouse = tmp_path_factory.getbasetemp() / "warehouse"
    conf = {**SMALL_CONF, "spark.sql.warehouse.dir": str(warehouse)}
    # Four task slots: a test paused inside one write leaves room for the competing one.
    return worker_session(master="local[4]", conf=conf, app_name="deltaguard-delta-jars")
