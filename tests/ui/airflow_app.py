"""A real Airflow api-server app (``create_app``) with the simple auth manager and real users, for the UI tests.

The environment is prepared lazily by :func:`build_app` (not at import), and only where nothing else in the
test session chose an Airflow home already: ``tests/airflow/conftest.py`` sets one at import, and then its
database path is used (migrated here if still missing).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
USERS = {"admin": "admin", "viewer": "viewer"}
PASSWORDS = {"admin": "admin-pw-1", "viewer": "viewer-pw-1"}


def _migrated_template() -> Path:
    cache = Path(tempfile.gettempdir()) / f"deltaguard-airflow-{version('apache-airflow-core')}.db"
    if not cache.exists():
        build = cache.with_suffix(f".{os.getpid()}.tmp")
        env = dict(os.environ, AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{build}")
        airflow_bin = Path(sys.executable).with_name("airflow")
        subprocess.run(
            [str(airflow_bin), "db", "migrate"], env=env, check=True, capture_output=True, timeout=300
        )
        os.replace(build, cache)
    return cache


def prepare_environment(lease_store_url: str) -> Path:
    """Point Airflow at a home with a migrated SQLite DB and two simple-auth users; return the home."""
    if "AIRFLOW_HOME" not in os.environ:
        home = Path(tempfile.mkdtemp(prefix="deltaguard-ui-airflow-"))
        os.environ["AIRFLOW_HOME"] = str(home)
        os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{home / 'airflow.db'}"
        os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
        os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "True"
    home = Path(os.environ["AIRFLOW_HOME"])
    db = Path(os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].removeprefix("sqlite:///"))
    if not db.exists():
        shutil.copyfile(_migrated_template(), db)
    passwords = home / "deltaguard_ui_passwords.json"
    passwords.write_text(json.dumps(PASSWORDS))
    os.environ["AIRFLOW__CORE__AUTH_MANAGER"] = (
        "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
    )
    os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] = ",".join(f"{u}:{r}" for u, r in USERS.items())
    os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"] = str(passwords)
    os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS"] = "False"
    os.environ["AIRFLOW__API_AUTH__JWT_SECRET"] = "deltaguard-ui-tests-" + "x" * 48
    os.environ["AIRFLOW__DELTAGUARD__LEASE_STORE_URL"] = lease_store_url
    return home


def build_app(lease_store_url: str, *, eager_providers: bool = False) -> Any:
    """The api-server app with the plugins Airflow finds.

    :param eager_providers: as with ``[core] lazy_discover_providers = False`` (default: Airflow's default,
        lazy discovery, under which only entry-point plugins load).
    """
    prepare_environment(lease_store_url)
    from airflow import plugins_manager, settings
    from airflow.api_fastapi.app import create_app, purge_cached_app

    purge_cached_app()
    # An earlier in-process DagBag or dag.test() may have loaded (and cached) the plugins under other
    # settings: clear every cached plugin lookup so this app sees what a fresh api-server would.
    for cached in vars(plugins_manager).values():
        if callable(getattr(cached, "cache_clear", None)):
            cached.cache_clear()
    lazy = settings.LAZY_LOAD_PROVIDERS
    settings.LAZY_LOAD_PROVIDERS = not eager_providers  # what `[core] lazy_discover_providers` sets
    try:
        with _installed_distributions_only():
            return create_app(apps="core")
    finally:
        settings.LAZY_LOAD_PROVIDERS = lazy


@contextlib.contextmanager
def _installed_distributions_only() -> Iterator[None]:
    """Hide the source checkout from Airflow's entry-point scan while the app is built.

    Building a wheel leaves ``airflow_provider_deltaguard.egg-info`` in the checkout, and pytest puts the
    checkout on ``sys.path``: ``importlib.metadata`` then finds the provider twice and Airflow registers
    its plugin entry point twice ("already registered"). An installed api-server sees one distribution.
    """
    from airflow._shared.module_loading import _get_grouped_entry_points

    checkout = {str(REPO), ""}
    saved = list(sys.path)
    sys.path[:] = [entry for entry in sys.path if entry not in checkout]
    _get_grouped_entry_points.cache_clear()
    try:
        yield
    finally:
        sys.path[:] = saved
        _get_grouped_entry_points.cache_clear()


def token(client: Any, user: str, root: str = "") -> str:
    """A JWT from Airflow's own ``POST /auth/token`` (what the UI and API clients use).

    :param root: the path Airflow is served under (``[api] base_url``'s path).
    """
    answer = client.post(f"{root}/auth/token", json={"username": user, "password": PASSWORDS[user]})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["access_token"])


def register_dag(path: Path) -> None:
    """Record the DAGs of ``path`` in Airflow's database as the DAG processor would (``dags-folder`` bundle),
    so Airflow's UI opens their pages and ``DagModel.fileloc`` names the file."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db

    DagBundlesManager().sync_bundles_to_db()
    bag = DagBag(dag_folder=str(path))
    assert not bag.import_errors, bag.import_errors
    sync_bag_to_db(bag, "dags-folder", None)
