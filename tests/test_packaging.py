"""The three top-level folders install as one ``deltaguard`` namespace, for a wheel and for ``pip install -e .``."""

from __future__ import annotations

import configparser
import json
import os
import subprocess
import sys
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: import-package prefix -> folder, as setup.cfg's package_dir declares it
FOLDERS = {"deltaguard": "provider", "deltaguard.operators": "operators", "deltaguard.sensors": "sensors"}


def _declared_packages() -> set[str]:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    return {line.strip() for line in cfg["options"]["packages"].splitlines() if line.strip()}


def _packages_on_disk() -> set[str]:
    found: set[str] = set()
    for prefix, folder in FOLDERS.items():
        root = REPO / folder
        for init in root.rglob("__init__.py"):
            relative = init.parent.relative_to(root).parts
            if "__pycache__" in relative:
                continue
            found.add(".".join((prefix, *relative)))
    return found


def test_every_package_folder_is_declared_in_setup_cfg() -> None:
    # A sub-package missing from the list works in an editable install but is silently left out of the wheel.
    missing = _packages_on_disk() - _declared_packages()
    assert not missing, f"add these to setup.cfg [options] packages: {sorted(missing)}"


def test_every_declared_package_exists() -> None:
    stale = _declared_packages() - _packages_on_disk()
    assert not stale, f"setup.cfg declares packages with no folder: {sorted(stale)}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from the checkout, through its sdist as a release is (``make dist``): a wheel built in
    the tree itself would also pick up a stale ``build/lib`` left there by an earlier build."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        # uv builds in an isolated environment, as a release build would.
        [sys.executable, "-m", "uv", "build", "-q", "-o", str(out), str(REPO)],
        check=True,
        capture_output=True,
        cwd=out,
    )
    (built,) = out.glob("airflow_provider_deltaguard-*.whl")
    return built


def test_wheel_installs_only_the_deltaguard_namespace(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == {"deltaguard"}
    assert "deltaguard/operators/__init__.py" in names
    assert "deltaguard/sensors/__init__.py" in names
    assert "deltaguard/core/__init__.py" in names
    # package data: the PostgreSQL store cannot migrate without its function files
    assert "deltaguard/leases/sql/functions/grant_if_idle_6.sql" in names
    # the UI's built React bundle ships; its sources and node_modules do not
    assert "deltaguard/plugins/static/delta-leases.js" in names
    assert not [n for n in names if "/ui_app/" in n]
    # benchmarks and the demo harness stay in the repository
    assert not [n for n in names if n.split("/")[1] in {"demo.py", "workload_tables.py", "airflow_runner.py"}]
    # so does the lab (fuzzing, the simulator and their commands): a worker installs only the product
    assert not [n for n in names if n.startswith(("deltaguard/simulation/", "lab/")) or "/fuzz" in n]
    assert not [
        n for n in names if n.startswith("deltaguard/commands/") and n.endswith(("fuzz.py", "simulate.py"))
    ]
    # so do the conformance cells the rules were measured with (python -m lab.conformance)
    assert not [n for n in names if "conformance" in n]
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "apache_airflow_provider" in text and "deltaguard.cli:main" in text
    assert "[airflow.plugins]\ndeltaguard = deltaguard.plugins.ui:DeltaguardUiPlugin" in text


def test_wheel_ships_the_license(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    license_file = next(n for n in names if n.endswith(".dist-info/licenses/LICENSE"))
    assert "Apache License" in zipfile.ZipFile(wheel).read(license_file).decode()


@pytest.mark.timeout(300)
def test_clean_install_shows_provider_and_plugin_with_default_settings(wheel: Path, tmp_path: Path) -> None:
    """The wheel and Airflow in a fresh virtualenv, an empty Airflow home and no settings at all: Airflow
    lists the provider and loads the UI plugin (Airflow's default is lazy provider discovery)."""
    venv = tmp_path / "venv"
    uv = [sys.executable, "-m", "uv"]
    subprocess.run(
        [*uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True, capture_output=True
    )
    airflow_version = version(
        "apache-airflow-core"
    )  # the one the test suite runs against (uv's cache has it)
    subprocess.run(
        [
            *uv,
            "pip",
            "install",
            "-q",
            "--python",
            str(venv / "bin" / "python"),
            str(wheel),
            f"apache-airflow-core=={airflow_version}",
            f"apache-airflow-task-sdk=={version('apache-airflow-task-sdk')}",
        ],
        check=True,
        capture_output=True,
        timeout=240,
    )
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "AIRFLOW_HOME": str(tmp_path / "airflow")}

    def airflow(*args: str) -> object:
        done = subprocess.run(
            [str(venv / "bin" / "airflow"), *args, "-o", "json"],
            env=env,
            cwd=tmp_path,
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return json.loads(done.stdout[done.stdout.index("[") :])

    providers = airflow("providers", "list")
    assert "airflow-provider-deltaguard" in {p["package_name"] for p in providers}  # type: ignore[attr-defined]
    plugins = [p for p in airflow("plugins") if p["name"] == "deltaguard"]  # type: ignore[attr-defined]
    assert len(plugins) == 1, plugins
    assert "airflow-provider-deltaguard" in plugins[0]["source"]
    assert [app["url_prefix"] for app in plugins[0]["fastapi_apps"]] == ["/deltaguard"]


def test_installed_package_resolves_to_the_mapped_folders() -> None:
    # Run outside the repo so the folders themselves cannot shadow the installed package.
    code = (
        "import importlib.util, deltaguard, deltaguard.operators, deltaguard.sensors;"
        "print(deltaguard.__file__); print(deltaguard.operators.__file__); print(deltaguard.sensors.__file__);"
        "print(importlib.util.find_spec('operators'), importlib.util.find_spec('sensors'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd="/"
    ).stdout
    provider_init, operators_init, sensors_init, bare = out.splitlines()
    assert Path(provider_init).parent.name in {"provider", "deltaguard"}
    assert Path(operators_init).parent.name in {"operators"}
    assert Path(sensors_init).parent.name in {"sensors"}
    assert bare == "None None"


#: A shipped module longer than this holds more than one job; split it along the jobs.
MAX_MODULE_LINES = 800


def _long_modules(folders: dict[str, str], limit: int) -> dict[str, int]:
    long: dict[str, int] = {}
    for folder in folders.values():
        for module in (REPO / folder).rglob("*.py"):
            lines = len(module.read_text(encoding="utf-8").splitlines())
            if lines > limit:
                long[str(module.relative_to(REPO))] = lines
    return long


def test_no_shipped_module_is_longer_than_the_limit() -> None:
    assert _long_modules(FOLDERS, MAX_MODULE_LINES) == {}


def test_the_length_check_finds_a_long_module() -> None:
    # the longest shipped module, measured against a limit one line below its length
    lengths = {
        str(m.relative_to(REPO)): len(m.read_text(encoding="utf-8").splitlines())
        for folder in FOLDERS.values()
        for m in (REPO / folder).rglob("*.py")
    }
    name, lines = max(lengths.items(), key=lambda item: item[1])
    assert _long_modules(FOLDERS, lines - 1) == {name: lines}
