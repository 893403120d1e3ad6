"""One PostgreSQL cluster per test process: ``pg_server`` is offered by the root conftest only.

A session fixture offered from several conftests or modules is a separate fixture in each place, so each
started a cluster of its own (3.5-7 s apiece, up to five in a whole run).
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT_CONFTEST = TESTS / "conftest.py"


def _offers_pg_server(path: Path) -> bool:
    """Whether the module imports ``pg_server`` or defines a fixture of that name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(alias.name == "pg_server" for alias in node.names):
            return True
        if isinstance(node, ast.FunctionDef) and node.name == "pg_server" and path.name != "pg_fixtures.py":
            return True
    return False


def test_only_the_root_conftest_offers_pg_server() -> None:
    offering = sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("*.py") if _offers_pg_server(p))
    assert offering == ["conftest.py"]
