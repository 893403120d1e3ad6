"""A private Airflow home with a migrated SQLite metadata DB for ``dag.test()`` tests.

The environment is set when this conftest is imported, before any test imports Airflow, so Airflow's
configuration and ORM point at the temporary home, never at ``~/airflow``. The migrated database is built
once per Airflow version and copied for each session (``airflow db migrate`` takes ~20 s here).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

_HOME = Path(tempfile.mkdtemp(prefix="deltaguard-airflow-home-"))
_DB = _HOME / "airflow.db"
os.environ["AIRFLOW_HOME"] = str(_HOME)
os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{_DB}"
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "True"
# each test points the lease store at its own file; this default keeps stray lookups inside the temp home
os.environ["AIRFLOW__DELTAGUARD__LEASE_STORE_URL"] = f"sqlite:///{_HOME}/leases.db"


def _migrated_template() -> Path:
    from importlib.metadata import version

    cache = Path(tempfile.gettempdir()) / f"deltaguard-airflow-{version('apache-airflow-core')}.db"
    if not cache.exists():
        build = cache.with_suffix(f".{os.getpid()}.tmp")
        env = dict(os.environ, AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{build}")
        airflow_bin = Path(sys.executable).with_name("airflow")
        subprocess.run(
            [str(airflow_bin), "db", "migrate"], env=env, check=True, capture_output=True, timeout=300
        )
        os.replace(build, cache)  # atomic: a concurrent session sees a complete file or none
    return cache


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """A migrated metadata DB in the private Airflow home."""
    if not _DB.exists():
        shutil.copyfile(_migrated_template(), _DB)
    return _DB


@pytest.fixture
def lease_store_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh SQLite lease store for one test, made the ``[deltaguard] lease_store_url``."""
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_URL", url)
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__POLL_INTERVAL", "0.2")
    return url


@pytest.fixture(autouse=True)
def triggers_fire_without_a_supervisor(monkeypatch: pytest.MonkeyPatch) -> None:
    """Triggers run in-process here, with no task supervisor whose exit report an event could overtake:
    their first event may come at once (``tests/airflow/test_first_event.py`` checks the rule itself)."""
    from deltaguard.leases import waiting

    monkeypatch.setenv("AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL", "0")
    monkeypatch.setattr(waiting, "STALE_EXIT_MARGIN_S", 0.0)
