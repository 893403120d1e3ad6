"""The three top-level folders install as one ``deltaguard`` namespace, for a wheel and for ``pip install -e .``."""

from __future__ import annotations

import configparser
import subprocess
import sys
import zipfile
from pathlib import Path

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


def test_wheel_installs_only_the_deltaguard_namespace(tmp_path: Path) -> None:
    subprocess.run(
        # uv builds in an isolated environment, as a release build would.
        [sys.executable, "-m", "uv", "build", "--wheel", "-q", "-o", str(tmp_path), str(REPO)],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("airflow_provider_deltaguard-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == {"deltaguard"}
    assert "deltaguard/operators/__init__.py" in names
    assert "deltaguard/sensors/__init__.py" in names
    assert "deltaguard/core/__init__.py" in names
    # package data: the PostgreSQL store cannot migrate without its function files
    assert "deltaguard/leases/sql/functions/grant_if_idle_6.sql" in names
    # benchmarks and the demo harness stay in the repository
    assert not [n for n in names if n.split("/")[1] in {"demo.py", "workload_tables.py", "airflow_runner.py"}]
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "apache_airflow_provider" in text and "deltaguard.cli:main" in text


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
