"""Fixtures for the whole suite, and Spark without Delta's jars in a process of its own.

One PostgreSQL cluster per test process: ``pg_server`` is offered here, once, so every directory and
module that needs a real PostgreSQL shares it (each test makes its own database in it). Offered from
several conftests, pytest kept one session fixture per place, and a whole run started up to five clusters.

A JVM keeps the classpath it started with, and every Spark session of a test process starts with Delta's
jars (the install step puts them in the environment). Tests marked ``without_delta_jars`` check what a
worker lacking the jars sees; they are run by ``tests/spark/test_without_delta_jars.py`` in a child pytest
with ``DELTAGUARD_DELTA_JARS=none``, and left out of every other process.
"""

from __future__ import annotations

import faulthandler
import os
import signal

import pytest

from tests.pg_fixtures import pg_server  # noqa: F401  (offered to every test directory)

# `make test` sends SIGUSR1 to a test process still running past its bound: every thread's stack is written
# to this file (pytest's own capture holds stderr) before the process is killed, so a hang names itself
# even where no test's timeout covers it (a fixture's teardown, the interpreter's exit).
_STACKS_FILE = os.environ.get("DELTAGUARD_TEST_STACKS")
if _STACKS_FILE:
    faulthandler.register(signal.SIGUSR1, file=open(_STACKS_FILE, "a"), all_threads=True)  # noqa: SIM115


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("DELTAGUARD_DELTA_JARS", "").strip().lower() == "none":
        return
    kept = [item for item in items if item.get_closest_marker("without_delta_jars") is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept
