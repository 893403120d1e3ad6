"""Every table configuration read to judge writes comes through one door (``deltaguard.engines.sources``),
which attaches the engine's evaluator of partition predicates (ADR 0037).

Read from the source with :mod:`ast`, over the three folders setup.cfg maps into ``deltaguard``:

* the raw readers of :mod:`deltaguard.engines.discovery` are called only by the door;
* an engine's ``table_config`` is called only by the door (or by an engine asking itself for a version);
* every engine's ``table_config`` returns through the door.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from deltaguard.engines.base import DeltaEngine
from deltaguard.engines.sources import attach_oracle

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("provider", "operators", "sensors")
DOOR = Path("provider/engines/sources.py")
#: discovery's readers that return a configuration without an evaluator
RAW_READERS = frozenset({"read_table_config", "read_table", "config_from_table"})
#: the door's functions
DOOR_FUNCTIONS = frozenset(
    {
        "attach_oracle",
        "engine_table_config",
        "read_judged_config",
        "read_judged_table",
        "judged_config_from_table",
    }
)


def _sources() -> dict[Path, ast.Module]:
    found = {}
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            found[path.relative_to(REPO)] = ast.parse(path.read_text(), str(path))
    return found


def _called_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def raw_reads(path: Path, tree: ast.Module) -> list[str]:
    """Where ``tree`` reads a configuration past the door: discovery's readers imported or called, or an
    engine's ``table_config`` called on anything but ``self`` inside the engines' own package."""
    if path in (DOOR, Path("provider/engines/discovery.py")):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("engines.discovery"):
            found += [f"{path}:{node.lineno} imports {a.name}" for a in node.names if a.name in RAW_READERS]
        elif isinstance(node, ast.Call):
            name = _called_name(node)
            if name in RAW_READERS and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                if isinstance(owner, ast.Name) and owner.id == "discovery":
                    found.append(f"{path}:{node.lineno} calls discovery.{name}")
            if name == "table_config" and isinstance(node.func, ast.Attribute):
                asks_itself = isinstance(node.func.value, ast.Name) and node.func.value.id == "self"
                if not (asks_itself and path.parts[:2] == ("provider", "engines")):
                    found.append(f"{path}:{node.lineno} calls .table_config() past the door")
    return found


def engines_past_the_door(path: Path, tree: ast.Module) -> list[str]:
    """Engine ``table_config`` methods that return without going through the door."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if not (isinstance(item, ast.FunctionDef) and item.name == "table_config"):
                    continue
                abstract = any(
                    isinstance(d, ast.Attribute) and d.attr == "abstractmethod" for d in item.decorator_list
                )
                calls = {_called_name(c) for c in ast.walk(item) if isinstance(c, ast.Call)}
                if not abstract and not calls & DOOR_FUNCTIONS:
                    found.append(f"{path}:{item.lineno} {node.name}.table_config")
    return found


def test_the_checks_find_a_read_past_the_door() -> None:
    planted = ast.parse(
        "from deltaguard.engines.discovery import read_table_config\n"
        "def f(engine, uri):\n    return engine.table_config(uri)\n"
        "class E:\n    def table_config(self, uri):\n        return read_table_config(uri)\n"
    )
    assert len(raw_reads(Path("provider/planning/x.py"), planted)) == 2
    assert engines_past_the_door(Path("provider/engines/x.py"), planted) == [
        "provider/engines/x.py:5 E.table_config"
    ]


def test_no_caller_reads_a_configuration_past_the_door() -> None:
    sources = _sources()
    assert len(sources) > 50 and DOOR in sources
    found = [line for path, tree in sources.items() for line in raw_reads(path, tree)]
    assert not found, "read table configurations through deltaguard.engines.sources:\n" + "\n".join(found)


def test_every_engine_reads_its_configuration_through_the_door() -> None:
    found = [line for path, tree in _sources().items() for line in engines_past_the_door(path, tree)]
    assert not found, "engines whose table_config bypasses deltaguard.engines.sources:\n" + "\n".join(found)


class _Custom(DeltaEngine):
    """An engine given as ``module:Class``: no evaluator of its own, and a read that attaches none."""

    name = "custom"

    def profile(self):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def table_config(self, table_uri: str):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def write(self, table_uri, spec, context):  # type: ignore[no-untyped-def]
        raise NotImplementedError


class _Own:
    engine = "custom"

    def evaluate(self, predicates, candidates):  # type: ignore[no-untyped-def]
        return []


def test_the_door_prefers_the_engines_own_evaluator(monkeypatch: pytest.MonkeyPatch) -> None:
    from deltaguard.core.table_config import TableConfig
    from deltaguard.engines.deltars.meaning import DataFusionOracle

    config = TableConfig(partition_columns=("k",), column_types=(("k", "integer"), ("v", "long")))
    assert isinstance(attach_oracle(config).meaning, DataFusionOracle)  # no engine at hand: delta-rs'
    assert isinstance(attach_oracle(config, _Custom()).meaning, DataFusionOracle)  # it supplies none
    own = _Own()
    monkeypatch.setattr(_Custom, "predicate_oracle", lambda self, c: own)
    assert attach_oracle(config, _Custom()).meaning is own
    assert attach_oracle(TableConfig()).meaning is None  # nothing to judge by partition


def managers_without_evaluator(path: Path, tree: ast.Module) -> list[str]:
    """``LeaseManager(...)`` calls without an ``oracle_loader``."""
    return [
        f"{path}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and _called_name(node) == "LeaseManager"
        and not any(k.arg == "oracle_loader" for k in node.keywords)
    ]


def test_the_airflow_hooks_open_lease_managers_with_the_evaluator() -> None:
    """A waiting request the task or the triggerer decides again from the store is judged with the engine's
    evaluator (ADR 0037): every lease manager the hooks open is given one."""
    hooks = {p: t for p, t in _sources().items() if p.parts[:2] == ("provider", "hooks")}
    opened = [p for p, t in hooks.items() if "LeaseManager(" in ast.unparse(t)]
    # one constructor in the lease hook serves the task's mode and the triggerer's shared store
    assert [p.name for p in opened] == ["lease.py"]
    assert ast.unparse(hooks[opened[0]]).count("LeaseManager(") == 1
    found = [line for path in opened for line in managers_without_evaluator(path, hooks[path])]
    assert not found, "lease managers opened without oracle_loader:\n" + "\n".join(found)
