"""Jar-gated tests: real delta-spark, run only when ``DELTAGUARD_DELTA_JARS`` names a folder of Delta's jars.

Run them in their own pytest process (a JVM keeps the classpath it started with)::

    DELTAGUARD_DELTA_JARS=/opt/delta-jars .venv/bin/python -m pytest tests/spark/jars -m delta_jars

The folder holds ``delta-spark_<spark>_<scala>-<version>.jar`` (or ``delta-spark_<scala>-<version>.jar``) and
``delta-storage-<version>.jar`` matching the installed pyspark, e.g. fetched once with
``spark-submit --packages io.delta:delta-spark_4.2_2.13:4.4.1`` into ``~/.ivy2/jars``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.spark.conftest import SMALL_CONF

JARS = os.environ.get("DELTAGUARD_DELTA_JARS", "")
REASON = (
    "needs Delta Lake's Spark jars: set DELTAGUARD_DELTA_JARS to a folder holding delta-spark_*.jar and "
    "delta-storage-*.jar (Maven is unreachable here, so these tests are skipped)"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        # Only tests that need a Delta-enabled session are gated; the harness's pure pieces always run.
        if Path(str(item.fspath)).is_relative_to(here) and "delta_spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.delta_jars)
            item.add_marker(pytest.mark.spark)
            if not JARS:
                item.add_marker(pytest.mark.skip(reason=REASON))


@pytest.fixture(scope="module")
def delta_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A local[2] session with Delta's jars, extension and catalog (one per test module)."""
    from pyspark import SparkContext

    from deltaguard.engines.spark_session import worker_session
    from deltaguard.engines.spark_setup import check_delta_available

    gateway = getattr(SparkContext, "_gateway", None)
    warehouse = tmp_path_factory.mktemp("warehouse")
    conf = {**SMALL_CONF, "spark.sql.warehouse.dir": str(warehouse)}
    session = worker_session(master="local[2]", conf=conf, app_name="deltaguard-delta-jars")
    try:
        check_delta_available(session)
    except Exception as exc:
        session.stop()
        if gateway is not None:
            pytest.skip(
                f"this process's JVM started without Delta's jars; run tests/spark/jars alone ({exc})"
            )
        raise
    yield session
    session.stop()
