"""The package's modules import each other without cycles, and the layers point one way.

The import graph is built from the source with :mod:`ast` (no module is imported), over the three folders
setup.cfg maps into ``deltaguard``. Every ``import``/``from`` statement counts, including those inside
functions: a lazy import hides a cycle from the interpreter at import time but not from a reader.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: folder -> import package, as setup.cfg's package_dir maps them
FOLDERS = {"provider": "deltaguard", "operators": "deltaguard.operators", "sensors": "deltaguard.sensors"}
#: modules left out of the graph (none: every module takes part)
EXCLUDED_PREFIXES: tuple[str, ...] = ()


def modules() -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    found: dict[str, Path] = {}
    for folder, package in FOLDERS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules ``name`` imports (``from package import module`` counts the module only)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            submodules = {f"{target}.{alias.name}" for alias in node.names} & known
            found |= submodules
            if len(submodules) < len(node.names):  # something defined in ``target`` itself
                found.add(target)
    return {m for m in found if m in known and m != name}


def import_graph() -> dict[str, set[str]]:
    mods = {n: p for n, p in modules().items() if not n.startswith(EXCLUDED_PREFIXES)}
    return {name: imports_of(name, path, set(mods)) for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 50  # the walk found the package
    assert not cycles(graph), f"import cycles: {cycles(graph)}"


#: the layers, lowest first: a module imports only from its own layer or lower ones (every import counts,
#: also those inside functions and under ``TYPE_CHECKING``). Packages of one layer are siblings.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"deltaguard.core"}),
    frozenset({"deltaguard.exceptions"}),
    # below Airflow: the engines, the lease store and manager, what a write task is
    frozenset({"deltaguard.engines", "deltaguard.leases", "deltaguard.writes"}),
    # the Airflow layer begins: Airflow's configuration, its executor, its asset and lineage API
    frozenset(
        {
            "deltaguard.config",
            "deltaguard.executor_guard",
            "deltaguard.get_provider_info",
            "deltaguard.lineage",
        }
    ),
    frozenset({"deltaguard.hooks"}),
    frozenset({"deltaguard.triggers"}),
    frozenset({"deltaguard.operators"}),
    frozenset({"deltaguard.sensors", "deltaguard.decorators", "deltaguard.pools"}),
    # finds a DAG's writes (operators, leased tasks, the priority policy's helpers) and plans them
    frozenset({"deltaguard.planning"}),
    # the UI shows, among the rest, a DAG's plan
    frozenset({"deltaguard.plugins"}),
    frozenset({"deltaguard.commands"}),
    frozenset({"deltaguard.cli"}),
)
#: sibling imports a layer forbids inside itself: (importer, imported)
FORBIDDEN_SIBLINGS = {
    ("deltaguard.leases", "deltaguard.engines"),  # the lease store judges claims, it never opens a table
    ("deltaguard.engines", "deltaguard.leases"),  # an engine writes tables; leases are the caller's business
}


def area(module: str) -> str:
    """The package of the layer table a module belongs to (``deltaguard.leases.sql.base`` -> ``deltaguard.leases``)."""
    for layer in LAYERS:
        for name in layer:
            if module == name or module.startswith(name + "."):
                return name
    return "deltaguard"  # the root package's ``__init__``: below everything


def rank(module: str) -> int:
    name = area(module)
    return next((i for i, layer in enumerate(LAYERS) if name in layer), -1)


def layer_violations(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    found = []
    for name, targets in graph.items():
        for target in targets:
            if rank(target) > rank(name) or (area(name), area(target)) in FORBIDDEN_SIBLINGS:
                found.append((name, target))
    return sorted(found)


def test_the_layer_check_finds_an_upward_import() -> None:
    graph = {"deltaguard.lineage.assets": {"deltaguard.operators.sources"}, "deltaguard.core.model": set()}
    assert layer_violations(graph) == [("deltaguard.lineage.assets", "deltaguard.operators.sources")]
    assert layer_violations({"deltaguard.leases.x": {"deltaguard.engines.y"}}) == [
        ("deltaguard.leases.x", "deltaguard.engines.y")
    ]
    assert layer_violations({"deltaguard.operators.x": {"deltaguard.hooks.y", "deltaguard.core.z"}}) == []


def test_every_package_has_a_layer() -> None:
    unplaced = sorted(m for m in modules() if rank(m) < 0 and m != "deltaguard")
    assert not unplaced, f"add their packages to LAYERS: {unplaced}"


def test_layers_point_one_way() -> None:
    violations = layer_violations(import_graph())
    assert not violations, f"imports against the layers: {violations}"


#: the first layer that may import Airflow
AIRFLOW_LAYER = "deltaguard.config"
#: modules below it that import Airflow, each only inside functions: the Spark engine reads the apache-spark
#: provider's ``spark`` / ``spark_connect`` connections through that provider's hooks when it runs under
#: Airflow; used elsewhere, it never imports them
AIRFLOW_BELOW_ALLOWED = frozenset({"deltaguard.engines.spark.session"})


def airflow_imports(path: Path) -> tuple[set[str], set[str]]:
    """``(at module level, inside functions)``: the Airflow modules a file imports."""
    tree = ast.parse(path.read_text())
    nested: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            nested |= {id(inner) for inner in ast.walk(node) if inner is not node}

    def names(node: ast.AST) -> set[str]:
        if isinstance(node, ast.Import):
            return {a.name for a in node.names}
        if isinstance(node, ast.ImportFrom):
            return {node.module or ""}
        return set()

    top: set[str] = set()
    inner: set[str] = set()
    for node in ast.walk(tree):
        found = {m for m in names(node) if m == "airflow" or m.startswith("airflow.")}
        (inner if id(node) in nested else top).update(found)
    return top, inner


def test_no_airflow_import_below_the_airflow_layer() -> None:
    below = rank(AIRFLOW_LAYER)
    assert below > rank("deltaguard.leases")  # the layer table still puts the Airflow layer above them
    offenders = {}
    for name, path in modules().items():
        if rank(name) >= below:
            continue
        top, inner = airflow_imports(path)
        if top or (inner and name not in AIRFLOW_BELOW_ALLOWED):
            offenders[name] = sorted(top | inner)
    assert not offenders, f"Airflow imported below the Airflow layer: {offenders}"


def test_the_airflow_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import os\ndef f():\n    from airflow.sdk import conf\n")
    assert airflow_imports(module) == (set(), {"airflow.sdk"})
    module.write_text("from airflow.providers.x import y\n")
    assert airflow_imports(module) == ({"airflow.providers.x"}, set())


#: calls that open a lease store or build a lease manager over one, on their own terms
STORE_DOORS = frozenset(
    {
        "LeaseManager",
        "SqliteLeaseStore",
        "PostgresLeaseStore",
        "BoundedStore",
        "open_bounded_store",
        "shared_store",
    }
)
#: the second door: the openers of ``deltaguard.leases.admin``, for commands, the UI and DAG-file parsing
STORE_OPENERS = frozenset({"open_store", "open_existing_store", "open_manager"})
#: the modules outside ``leases/`` that may call :data:`STORE_DOORS`: the lease hook, in its task mode and
#: its shared (triggerer) mode; the triggers ask ``DeltaLeaseHook.pooled`` for the shared store
STORE_DOOR_MODULES = frozenset({"deltaguard.hooks.lease"})
#: the packages whose modules may call :data:`STORE_OPENERS`; task code (operators, sensors, triggers,
#: engines, writes) goes through the lease hook only
OPENER_AREAS = frozenset(
    {"deltaguard.commands", "deltaguard.plugins", "deltaguard.planning", "deltaguard.pools"}
)


def store_doors(path: Path, names: frozenset[str] = STORE_DOORS) -> set[str]:
    """The ``names`` a file calls (by plain name or as an attribute)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            called = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            if called in names:
                found.add(called)
    return found


def imports_open(path: Path) -> bool:
    """Whether a file imports ``deltaguard.leases.open`` (the openers behind the two doors)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (
            node.module == "deltaguard.leases.open"
            or (node.module == "deltaguard.leases" and any(a.name == "open" for a in node.names))
        ):
            return True
        if isinstance(node, ast.Import) and any(a.name == "deltaguard.leases.open" for a in node.names):
            return True
    return False


def door_violations(paths: dict[str, Path]) -> list[str]:
    """Modules outside ``leases/`` that open the store or build a lease manager other than through the two
    doors: the lease hook (:data:`STORE_DOOR_MODULES`) and ``deltaguard.leases.admin`` (from
    :data:`OPENER_AREAS`)."""
    found = []
    for name, path in paths.items():
        if name.startswith("deltaguard.leases.") or name in STORE_DOOR_MODULES:
            continue
        if (
            store_doors(path)
            or imports_open(path)
            or (store_doors(path, STORE_OPENERS) and area(name) not in OPENER_AREAS)
        ):
            found.append(name)
    return sorted(found)


def test_only_the_two_doors_open_the_store() -> None:
    violations = door_violations(modules())
    assert not violations, (
        "open the store through the lease hook (DeltaLeaseHook, DeltaLeaseHook.pooled) from task code, or "
        f"through deltaguard.leases.admin from commands, the UI and DAG-file parsing: {violations}"
    )
    # at most two modules outside leases/ open a store themselves: today only the lease hook does
    opening = {n for n, p in modules().items() if not n.startswith("deltaguard.leases.") and store_doors(p)}
    assert opening == STORE_DOOR_MODULES and len(opening) <= 2


def test_the_door_check_finds_a_third_door(tmp_path: Path) -> None:
    manager = tmp_path / "manager.py"
    manager.write_text(
        "def f(url):\n    from deltaguard.leases.manager import LeaseManager\n    return LeaseManager(url)\n"
    )
    opener = tmp_path / "opener.py"
    opener.write_text("from deltaguard.leases.admin import open_store\nstore = open_store('sqlite:///x')\n")
    hook = tmp_path / "hook.py"
    hook.write_text(
        "from deltaguard.leases import open\nstore = open.open_bounded_store('sqlite:///x', 1.0)\n"
    )
    behind = tmp_path / "behind.py"
    behind.write_text(
        "def f(url):\n    from deltaguard.leases.open import open_store\n    return open_store(url)\n"
    )
    paths = {
        "deltaguard.operators.manager": manager,  # task code building a manager
        "deltaguard.triggers.opener": opener,  # task code using the commands' door
        "deltaguard.commands.opener": opener,  # a command using its door: allowed
        "deltaguard.plugins.behind": behind,  # the UI going round its door
        "deltaguard.hooks.lease": hook,  # the hook: allowed
        "deltaguard.hooks.other": hook,  # a second hook opening the store
        "deltaguard.leases.x": manager,  # inside leases/: allowed
    }
    assert door_violations(paths) == [
        "deltaguard.hooks.other",
        "deltaguard.operators.manager",
        "deltaguard.plugins.behind",
        "deltaguard.triggers.opener",
    ]


def test_the_door_check_sees_a_manager_built_in_a_function(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "def f(url):\n    from deltaguard.leases.manager import LeaseManager\n    return LeaseManager(url)\n"
    )
    assert store_doors(module) == {"LeaseManager"}
    module.write_text("from deltaguard.leases.admin import open_store\nopen_store('sqlite:///x')\n")
    assert store_doors(module) == set()
    assert store_doors(module, STORE_OPENERS) == {"open_store"}
