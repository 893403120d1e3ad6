"""A spec is checked once: the engine trusts a spec validated against the very version it commits from."""

from __future__ import annotations

from typing import Any

import pytest

import deltaguard.engines.deltars.engine as deltars_engine
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.errors import InvalidWriteError
from deltaguard.engines.specs import AppendSpec, DeleteSpec, WriteContext
from tests.engines.helpers import ids, rows


@pytest.fixture
def spec_checks(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Each call of the delta-rs engine's spec validation, by the spec it checked."""
    calls: list[Any] = []
    checked = deltars_engine.validate_spec

    def counted(spec: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(spec)
        checked(spec, *args, **kwargs)

    monkeypatch.setattr(deltars_engine, "validate_spec", counted)
    return calls


def test_a_spec_validated_at_the_version_written_from_is_not_checked_again(
    engine: DeltaRsEngine, partitioned: str, spec_checks: list[Any]
) -> None:
    config = engine.table_config(partitioned)
    spec = DeleteSpec("id = 1")
    engine.validate(partitioned, spec, config)
    assert spec_checks == [spec]
    result = engine.write(partitioned, spec, WriteContext(validated_version=config.version))
    assert result.committed and spec_checks == [spec]  # trusted: no second check
    assert ids(partitioned) == [2, 3, 4]


def test_a_table_that_moved_on_since_validation_is_checked_again(
    engine: DeltaRsEngine, partitioned: str, spec_checks: list[Any]
) -> None:
    config = engine.table_config(partitioned)
    spec = DeleteSpec("id = 1")
    engine.validate(partitioned, spec, config)
    engine.write(partitioned, AppendSpec(rows([5], "2024-01-01")))  # another commit lands
    spec_checks.clear()
    engine.write(partitioned, spec, WriteContext(validated_version=config.version))
    assert spec_checks == [spec]


def test_without_a_validated_version_the_engine_checks_before_writing(
    engine: DeltaRsEngine, partitioned: str, spec_checks: list[Any]
) -> None:
    with pytest.raises(InvalidWriteError, match="unknown column 'nope'"):
        engine.write(partitioned, DeleteSpec("nope = 1"))
    assert len(spec_checks) == 1


def test_validate_checks_column_names_as_the_write_does(engine: DeltaRsEngine, partitioned: str) -> None:
    # the configuration lists the table's columns: a predicate naming another is refused before any lease
    with pytest.raises(InvalidWriteError, match="unknown column 'nope'"):
        engine.validate(partitioned, DeleteSpec("nope = 1"), engine.table_config(partitioned))
