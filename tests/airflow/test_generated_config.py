"""deltaguard's options read from the ``airflow.cfg`` Airflow generates itself, with environment overrides.

Airflow writes every option it knows into the file it generates on first use, with its default: the whole
``[deltaguard]`` section (from the provider info) and ``[operators] default_deferrable = false``. The file
here is written by Airflow (``airflow config list`` in an empty home, once per module) and read by a fresh
task-SDK configuration parser, the one deltaguard reads through ``airflow.sdk.conf``.
"""

from __future__ import annotations

import configparser
import logging
from pathlib import Path

import pytest

from benchmarks.harness.airflow_runner import generate_airflow_cfg
from deltaguard import config
from deltaguard.leases.keeper import LeaseTimingError


@pytest.fixture(scope="module")
def generated_cfg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_airflow_cfg(tmp_path_factory.mktemp("generated_home"))


def _use(cfg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``airflow.sdk.conf`` a parser of ``cfg`` alone, with no deltaguard or deferral variable set."""
    import os

    import airflow.sdk
    from airflow.sdk.configuration import AirflowSDKConfigParser

    for name in list(os.environ):
        if name.startswith(("AIRFLOW__DELTAGUARD__", "AIRFLOW__OPERATORS__")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AIRFLOW_CONFIG", str(cfg))
    monkeypatch.setattr(airflow.sdk, "conf", AirflowSDKConfigParser(), raising=False)


@pytest.fixture
def generated_home(generated_cfg: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    _use(generated_cfg, monkeypatch)
    return generated_cfg


def _edited(cfg: Path, tmp_path: Path, section: str, values: dict[str, str]) -> Path:
    parser = configparser.RawConfigParser()
    parser.read(cfg)
    for key, value in values.items():
        parser.set(section, key, value)
    edited = tmp_path / "airflow.cfg"
    with edited.open("w") as handle:
        parser.write(handle)
    return edited


def test_the_generated_file_holds_every_default(generated_cfg: Path) -> None:
    # the premise of the two fixes below, as Airflow 3.3 writes it
    parser = configparser.RawConfigParser()
    parser.read(generated_cfg)
    assert parser.get("operators", "default_deferrable") == "false"
    assert parser.get("deltaguard", "lease_ttl") == "120"
    assert parser.get("deltaguard", "deferrable") == "True"
    # the options that follow lease_ttl are written empty, i.e. unset
    for option in ("heartbeat_interval", "store_timeout", "commit_margin"):
        assert parser.get("deltaguard", option) == "", option


def test_a_generated_home_defers(generated_home: Path) -> None:
    assert config.default_deferrable() is True
    assert config.lease_settings().deferrable is True


def test_deferral_is_switched_off_by_what_a_user_sets(
    generated_cfg: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use(generated_cfg, monkeypatch)
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "false")
    assert config.default_deferrable() is False  # Airflow's switch, set in the environment
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__DEFERRABLE", "true")
    assert config.default_deferrable() is True  # deltaguard's own option, in the environment, wins
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__DEFERRABLE", "")
    assert config.default_deferrable() is False  # an empty variable is no choice
    _use(_edited(generated_cfg, tmp_path, "deltaguard", {"deferrable": "False"}), monkeypatch)
    assert config.default_deferrable() is False  # deltaguard's option in airflow.cfg
    assert config.lease_settings(deferrable=True).deferrable is True  # the task's own argument first


def test_setting_only_lease_ttl_derives_the_rest(
    generated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_TTL", "30")
    timing = config.lease_timing()
    assert (timing.ttl_s, timing.heartbeat_s, timing.store_timeout_s, timing.commit_margin_s) == (
        30.0,
        5.0,
        2.5,
        3.75,
    )
    assert config.heartbeat_interval() == 5.0
    settings = config.lease_settings()
    assert settings.heartbeat_s == 5.0 and settings.timing == timing


def test_an_option_set_is_taken_as_given(generated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_TTL", "30")
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__STORE_TIMEOUT", "3")
    assert config.lease_timing().store_timeout_s == 3.0
    # an explicit choice that cannot work is refused, never silently replaced (the environment is explicit)
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__HEARTBEAT_INTERVAL", "20")
    with pytest.raises(LeaseTimingError, match="heartbeat_interval=20"):
        config.lease_timing()


def test_a_file_with_the_earlier_literal_defaults_still_works(
    generated_cfg: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    old = {"heartbeat_interval": "20", "store_timeout": "10", "commit_margin": "15"}
    _use(_edited(generated_cfg, tmp_path, "deltaguard", old), monkeypatch)
    # with the TTL they were made for, they are the derived values anyway
    assert config.lease_timing().heartbeat_s == 20.0
    # a longer TTL: they fit, and are kept as written
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_TTL", "300")
    assert config.lease_timing().heartbeat_s == 20.0
    # a shorter TTL: as written every write would fail; derived instead, with a warning naming them
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_TTL", "30")
    with caplog.at_level(logging.WARNING, logger="deltaguard.config"):
        timing = config.lease_timing()
    assert (timing.heartbeat_s, timing.store_timeout_s, timing.commit_margin_s) == (5.0, 2.5, 3.75)
    assert "commit_margin, heartbeat_interval, store_timeout" in caplog.text
    # a value a user chose (not an earlier default) is never replaced
    _use(_edited(generated_cfg, tmp_path, "deltaguard", {**old, "heartbeat_interval": "19"}), monkeypatch)
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_TTL", "30")
    with pytest.raises(LeaseTimingError, match="heartbeat_interval=19"):
        config.lease_timing()
