"""The example DAGs parse however Airflow (or deltaguard) loads them, with only the extras they name.

The dag-processor puts the DAGs folder on ``sys.path``; these loaders do not, which is how the examples'
shared module used to break them: ``airflow dags list --local`` in a home Airflow generated (settings in the
environment only), a DagBag of a copy of the folder elsewhere, and ``deltaguard pools sync --dags-folder``.
The dag-processor itself is exercised by ``tests/e2e/test_generated_home.py``. Each loader runs in a child
process, so nothing here depends on what this process imported; the four children start together (module
fixture :func:`loaders`) and each test judges its own, so the run takes the time of the slowest child on two
cores rather than the sum of all four (each imports Airflow and parses every example).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from benchmarks.harness.airflow_runner import AirflowHome, default_dags_folder, prepare_home

# four child processes that each import Airflow and parse every example: about a minute each when loaded
pytestmark = pytest.mark.slow

EXAMPLE_DAGS = {
    "conventional_daily_sales",
    "deltaguard_daily_sales",
    "deltaguard_orders_load",
    "deltaguard_orders_report",
    "deltaguard_partner_feed_watch",
    "deltaguard_leased_databricks",
    "deltaguard_leased_taskflow",
    "pyspark_daily_sales",
}
#: the loaders' child processes by name, started together by :func:`loaders`
Loaders = dict[str, "Future[subprocess.CompletedProcess[str]]"]
#: modules of the optional providers and extras ``leased_databricks`` / ``pyspark_daily_sales`` run with
OPTIONAL = ("airflow.providers.databricks.", "airflow.providers.apache.spark.", "pyspark", "delta")

DAGBAG = """
import json, sys
blocked = {blocked!r}

class Missing:
    # stands for an uninstalled distribution: its modules cannot be found. A provider ("name.") keeps its
    # package and get_provider_info, which Airflow's discovery loads from the distribution's entry point.
    def find_spec(self, name, path=None, target=None):
        for b in blocked:
            hidden = (
                name.startswith(b) and not name.endswith(".get_provider_info")
                if b.endswith(".")
                else name == b or name.startswith(b + ".")
            )
            if hidden:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Missing())
from airflow.dag_processing.dagbag import DagBag

assert {folder!r} not in sys.path
bag = DagBag(dag_folder={folder!r})
print("RESULT" + json.dumps({{"errors": bag.import_errors, "dags": sorted(bag.dags)}}))
"""


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> AirflowHome:
    root = tmp_path_factory.mktemp("example_loaders")
    return prepare_home(root / "airflow_home", data_dir=root / "data", generated=True)


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the examples in a folder no configuration names."""
    folder = tmp_path_factory.mktemp("elsewhere") / "my_dags"
    shutil.copytree(default_dags_folder(), folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def _run(home: AirflowHome, *argv: str) -> subprocess.CompletedProcess[str]:
    # four children share two cores: each may take up to four times as long as alone
    return subprocess.run(
        list(argv), env=home.env(), capture_output=True, text=True, timeout=600, check=False, cwd=home.home
    )


def _dagbag_child(
    home: AirflowHome, folder: Path, blocked: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    return _run(home, sys.executable, "-c", DAGBAG.format(folder=str(folder), blocked=blocked))


@pytest.fixture(scope="module")
def loaders(home: AirflowHome, elsewhere: Path, airflow_db: Path) -> Iterator[Loaders]:
    """The four loaders' child processes, started together; each test waits for its own."""
    shutil.copyfile(airflow_db, home.home / "airflow.db")  # a migrated metadata DB, for `dags list`
    deltaguard = str(Path(sys.executable).with_name("deltaguard"))
    children = {
        "dags_list": (sys.executable, "-m", "airflow", "dags", "list", "--local", "--output", "json"),
        "pools_sync": (
            deltaguard,
            "pools",
            "sync",
            "--config",
            "",
            "--dags-folder",
            str(elsewhere),
            "--dry-run",
        ),
    }
    with ThreadPoolExecutor(max_workers=4) as pool:
        started = {name: pool.submit(_run, home, *argv) for name, argv in children.items()}
        started["dagbag"] = pool.submit(_dagbag_child, home, elsewhere)
        started["dagbag_without_optional"] = pool.submit(_dagbag_child, home, elsewhere, OPTIONAL)
        yield started


def _dagbag(result: subprocess.CompletedProcess[str]) -> dict:
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith("RESULT"))
    return dict(json.loads(line.removeprefix("RESULT"))) | {"log": result.stdout + result.stderr}


def test_airflow_dags_list_local_in_a_generated_home(home: AirflowHome, loaders: Loaders) -> None:
    assert home.generated and "[deltaguard]" in (home.home / "airflow.cfg").read_text()
    result = loaders["dags_list"].result()
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Failed to load" not in result.stdout + result.stderr
    listed = json.loads(next(x for x in result.stdout.splitlines() if x.startswith("[")))
    assert {dag["dag_id"] for dag in listed} == EXAMPLE_DAGS


def test_a_dagbag_of_the_folder_copied_elsewhere(loaders: Loaders) -> None:
    bag = _dagbag(loaders["dagbag"].result())
    assert bag["errors"] == {}
    assert set(bag["dags"]) == EXAMPLE_DAGS


def test_without_the_optional_providers_the_databricks_example_steps_aside(
    loaders: Loaders,
) -> None:
    bag = _dagbag(loaders["dagbag_without_optional"].result())
    assert bag["errors"] == {}
    assert set(bag["dags"]) == EXAMPLE_DAGS - {"deltaguard_leased_databricks"}
    assert "deltaguard_leased_databricks skipped" in bag["log"]


def test_pools_sync_scans_the_examples(home: AirflowHome, loaders: Loaders) -> None:
    result = loaders["pools_sync"].result()
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    pools = json.loads(result.stdout[result.stdout.index("{") :])
    tables = {entry["description"].removeprefix("deltaguard: writes to ") for entry in pools.values()}
    data = home.data_dir
    assert {str(data / "deltaguard" / name) for name in ("sales_fact", "events", "customers")} <= tables
    assert str(data / "assets" / "orders") in tables
