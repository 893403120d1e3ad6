"""Profile one ``DeltaMergeOperator.execute`` on a local delta-rs table: how much of the package one write uses.

Run: ``nice -n 15 .venv/bin/python -m benchmarks.profile_write`` (``--cold`` profiles the first write of the
process, imports included; ``--json`` prints the figures as JSON; ``--list`` prints every function counted).
The MERGE's figures are printed in full; an UPDATE (``DeltaUpdateOperator``) and a DELETE
(``DeltaDeleteOperator``) on a table of their own are profiled the same way after it, and their figures are
under ``by_operation`` (``--operations merge`` profiles only the MERGE). ``merge_resumed`` (listed with
``--operations``) profiles the try a deferred MERGE resumes in: the MERGE first defers, unprofiled, behind a
lease held until it queues, and Airflow's serialisation of the resume kwargs is applied as the task runner
applies it; then ``resume_execution`` is counted.

The operator runs as the Airflow-layer tests run it (``tests/airflow/helpers.task_context``: no scheduler,
no metadata database), with a real SQLite lease store in a temporary directory and
``[deltaguard] file_stats`` on, so the lease request carries the table's file statistics. By default one
upsert MERGE on another table runs first, unprofiled, so that imports and first-use caches do not count: the
figures are those of every later write of a worker process.

Every Python call in every thread is seen through :func:`sys.setprofile` / :func:`threading.setprofile` (the
lease keeper runs in a thread of its own; the store's calls run in worker threads, started anew for the
profiled write so that they are seen). What each figure counts:

- *functions*, *files*: distinct code objects (and their files) of the shipped package (``provider/``,
  ``operators/``, ``sensors/``) that ran; module bodies (``<module>``) are not counted. Comprehensions,
  generator expressions and lambdas are code objects of their own on Python 3.11 and count here;
  *named_functions* leaves them out (functions and methods defined with ``def`` only).
- *Delta log opened*: ``deltalake.DeltaTable`` constructions (each reads the log) plus ``load_as_version``
  calls on an open one. ``update_incremental`` on an open handle (it reads only the commits after the
  handle's version) is not counted.
- *validation calls*: validation passes, i.e. calls of a validation function made while no other validation
  function is running (``validate_spec`` calling ``WriteSpec.validate`` is one pass). A validation function
  is a package function whose name starts with ``validate`` (``validate_spec``, ``validate_context``,
  ``WriteSpec.validate``, ``DeltaEngine.validate``, ...), or ``check_for_delta_rs``,
  ``Runners.check`` (the engine's spec checks). *validation functions called* counts every call of one,
  nested or not; the breakdown names the outermost ones.
- *runner lookups*: calls of ``Runners.runner`` and ``Runners.check``.
- *file statistics reads*: calls of ``engines.discovery.read_file_stats``.
- *configuration reads*: calls of ``engines.discovery.config_from_table`` (the table's configuration read
  from an open log).
- *app version resolutions*: calls of ``writes.prepared.task_app_version``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import threading
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_SHIPPED = tuple(str(ROOT / part) + os.sep for part in ("provider", "operators", "sensors"))
_VALIDATION_NAMES = frozenset({"check_for_delta_rs"})
# Python 3.11 compiles each comprehension, generator expression and lambda to a code object of its own
# (3.12 inlines list, dict and set comprehensions, PEP 709): counted in *functions*, left out of
# *named_functions*
_UNNAMED = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<lambda>"})


class CallCounter:
    """Counts Python calls by code object, in every thread, while it is active."""

    def __init__(self) -> None:
        self.calls: collections.Counter[CodeType] = collections.Counter()
        self.passes: collections.Counter[CodeType] = collections.Counter()  # outermost validation calls
        self._depth = threading.local()  # per thread: how many validation calls are running

    def _hook(self, frame: FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "call":
            self.calls[code] += 1
            if _is_validation(code):
                depth = getattr(self._depth, "n", 0)
                if depth == 0:
                    self.passes[code] += 1
                self._depth.n = depth + 1
        elif event == "return" and _is_validation(code):
            self._depth.n -= 1

    def __enter__(self) -> CallCounter:
        threading.setprofile(self._hook)
        sys.setprofile(self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]

    def figures(self) -> dict[str, Any]:
        shipped = {c: n for c, n in self.calls.items() if c.co_filename.startswith(_SHIPPED)}
        functions = {c: n for c, n in shipped.items() if c.co_name != "<module>"}

        def rel(code: CodeType) -> str:
            return os.path.relpath(code.co_filename, ROOT)

        def count(pred: Any) -> int:
            return sum(n for c, n in functions.items() if pred(c))

        qual = _qual

        delta_opens = sum(
            n
            for c, n in self.calls.items()
            if c.co_filename.endswith(os.path.join("deltalake", "table.py"))
            and qual(c) in ("DeltaTable.__init__", "DeltaTable.load_as_version")
        )
        validation = {f"{rel(c)}:{qual(c)}": n for c, n in self.passes.items()}
        return {
            "functions": len(functions),
            "named_functions": sum(1 for c in functions if c.co_name not in _UNNAMED),
            "files": len({c.co_filename for c in functions}),
            "delta_log_opened": delta_opens,
            "validation_calls": sum(validation.values()),
            "validation_functions_called": count(_is_validation),
            "validation_breakdown": validation,
            "runner_lookups": count(lambda c: qual(c) in ("Runners.runner", "Runners.check")),
            "file_stats_reads": count(
                lambda c: qual(c) == "read_file_stats" and rel(c).endswith("discovery.py")
            ),
            "config_reads": count(lambda c: qual(c) == "config_from_table"),
            "app_version_resolutions": count(lambda c: qual(c) == "task_app_version"),
            "function_list": sorted(f"{rel(c)}:{qual(c)}" for c in functions),
        }


def _qual(code: CodeType) -> str:
    return getattr(code, "co_qualname", code.co_name)


def _is_validation(code: CodeType) -> bool:
    if not code.co_filename.startswith(_SHIPPED):
        return False
    return (
        code.co_name.startswith("validate")
        or code.co_name in _VALIDATION_NAMES
        or _qual(code) == "Runners.check"
    )


def _merge(table: str, task_id: str) -> Any:
    import pyarrow as pa

    from deltaguard.operators.dml import DeltaMergeOperator

    def source() -> pa.Table:
        return pa.table({"id": [2, 4], "country": ["DE", "DE"], "amount": [21, 40]})

    return DeltaMergeOperator(task_id=task_id, table=table, source=source, condition="t.id = s.id")


def _update(table: str, task_id: str) -> Any:
    from deltaguard.operators.dml import DeltaUpdateOperator

    return DeltaUpdateOperator(
        task_id=task_id, table=table, updates={"amount": "amount + 1"}, predicate="id = 2"
    )


def _delete(table: str, task_id: str) -> Any:
    from deltaguard.operators.dml import DeltaDeleteOperator

    return DeltaDeleteOperator(task_id=task_id, table=table, predicate="id = 3")


def _merge_resumed(table: str, task_id: str) -> Any:
    op = _merge(table, task_id)
    op.deferrable = True
    return op


#: The operations profiled, by name: each builds its operator for a table and a task id.
OPERATIONS = {"merge": _merge, "update": _update, "delete": _delete}
#: profiled when named in ``--operations`` only: the resumed try of a deferred MERGE
EXTRA_OPERATIONS = {"merge_resumed": _merge_resumed}


def _deferred_kwargs(op: Any, table: str, context: Any) -> dict[str, Any]:
    """Defer ``op`` behind a held lease (unprofiled); its resume kwargs as Airflow hands them back."""
    from airflow.sdk.exceptions import TaskDeferred
    from airflow.sdk.serde import deserialize, serialize

    from deltaguard import config
    from tests.airflow.helpers import hold_lease_until_waiter, wait_until_unleased

    hold_lease_until_waiter(table, op.task_id, timeout_s=60)
    try:
        op.execute(context)
    except TaskDeferred as deferred:
        wait_until_unleased(config.lease_store_url(), table)
        kwargs: dict[str, Any] = deserialize(json.loads(json.dumps(serialize(deferred.kwargs))))
        return kwargs
    raise AssertionError("the write did not defer behind the held lease")


def _fresh_store_threads() -> None:
    """Give the profiled write new store-call threads: :func:`threading.setprofile` reaches only threads
    started after it, and a worker kept idle from an earlier write would hide every store call it runs."""
    for name in ("deltaguard.leases.open", "deltaguard.leases.bounded"):  # the pool's module, now and before
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "_Workers"):
            module._WORKERS = module._Workers()


def profile(cold: bool, operation: str = "merge") -> dict[str, Any]:
    """Run (and count) one write of ``operation``; with ``cold=False`` one unprofiled MERGE on another table
    first."""
    from tests.airflow.helpers import sales_table, task_context

    with tempfile.TemporaryDirectory(prefix="deltaguard-profile-write-") as tmp:
        os.environ["AIRFLOW__DELTAGUARD__LEASE_STORE_URL"] = f"sqlite:///{tmp}/leases.db"
        if not cold:
            warm = sales_table(f"{tmp}/warm")
            _merge(warm, "warm").execute(task_context("warm"))
        table = sales_table(f"{tmp}/sales")
        op = {**OPERATIONS, **EXTRA_OPERATIONS}[operation](table, operation)
        context = task_context(operation)
        _fresh_store_threads()
        if operation in EXTRA_OPERATIONS:
            kwargs = _deferred_kwargs(op, table, context)
            with CallCounter() as counter:
                result = op.resume_execution("execute_complete", kwargs, context)
        else:
            with CallCounter() as counter:
                result = op.execute(context)
        assert result["version"] == 1, result
    return counter.figures()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", action="store_true", help="profile the first write, imports included")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--list", action="store_true", help="print every package function that ran")
    parser.add_argument(
        "--operations",
        default=",".join(OPERATIONS),
        help="comma-separated operations to profile, the first printed in full (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    operations = [name.strip() for name in args.operations.split(",") if name.strip()]
    unknown = sorted(set(operations) - set(OPERATIONS) - set(EXTRA_OPERATIONS))
    if not operations or unknown:
        known = ", ".join([*OPERATIONS, *EXTRA_OPERATIONS])
        parser.error(f"--operations: unknown {unknown}, known: {known}")
    with tempfile.TemporaryDirectory(prefix="deltaguard-profile-home-") as home:
        # a private Airflow home, as tests/airflow/conftest.py makes one: nothing reads ~/airflow
        os.environ["AIRFLOW_HOME"] = home
        os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
        os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "True"
        os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{home}/airflow.db"
        os.environ["AIRFLOW__DELTAGUARD__FILE_STATS"] = "True"
        by_operation = {name: profile(cold=args.cold, operation=name) for name in operations}
    figures = dict(by_operation[operations[0]])
    listing = figures.pop("function_list")
    if len(operations) > 1:
        figures["by_operation"] = {
            name: {key: value for key, value in each.items() if key != "function_list"}
            for name, each in by_operation.items()
        }
    if args.json:
        print(json.dumps(figures, indent=2, sort_keys=True))
    else:
        for key, value in figures.items():
            if key == "validation_breakdown":
                for name, n in sorted(value.items()):
                    print(f"    {n:3d}  {name}")
            elif key == "by_operation":
                for name, each in value.items():
                    print(
                        f"{name:8s} Delta log opened {each['delta_log_opened']}, validation calls "
                        f"{each['validation_calls']}, {each['functions']} functions in {each['files']} files"
                    )
            else:
                print(f"{key:26s} {value}")
    if args.list:
        print("\n".join(listing))


if __name__ == "__main__":
    main()
