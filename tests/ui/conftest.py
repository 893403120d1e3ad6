"""Fixtures of the UI tests: a real SQLite lease store filled through the real lease manager."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from deltaguard.plugins.reads import UiReader
from tests.ui.scenario import Scenario, build


@pytest.fixture
def scenario(tmp_path: Path) -> Iterator[Scenario]:
    built = build(tmp_path)
    yield built
    built.manager.store.close()


@pytest.fixture
def reader(scenario: Scenario) -> UiReader:
    return UiReader(scenario.manager.store, clock=scenario.clock)
