"""Find a DAG's deltaguard writes and what the plan needs about them: operations, tables, durations.

Runs in the CLI process on a developer machine, not in task code: DAG files are parsed with Airflow's
``DagBag``, as the DAG processor parses them. A write is found the way the priority policy finds it
(:mod:`deltaguard.pools.priority`): deltaguard's operators (their operation as
:func:`~deltaguard.pools.priority.task_operation` builds it), and tasks with a lease declaration
(``with_delta_lease``, ``@task.delta_write``: :meth:`delta_lease_targets`). A mapped task (``.expand``)
over literal lists is one instance per combination of values, each unmapped as Airflow unmaps it; one
mapped over an upstream task's output has a number of instances not known before the run
(``mapped_instances`` assumed) and operations judged as conflicting with every write.

A table's configuration comes from, in this order: the table itself (its Delta log, read with delta-rs,
when the URI is absolute and a table is there), a declared table document (``{"<table>": <the table
object of a deltaguard check document>}``), the lease store's last decision on it, else an assumption
stated in the plan: for a table not there yet that one write of the DAG creates with ``partition_by``
before every other write of the DAG on it, partitioned as that write creates it; otherwise the table exists,
unpartitioned, without table properties (default isolation level), the strictest reading of a plain table.
Durations:
the declared ``expected_duration``, else the median of the task's recorded holds from the decision log
(:mod:`deltaguard.leases.manager`) when a lease store is there and has them, else
:data:`~deltaguard.core.priority.DEFAULT_EXPECTED_S`: the lease hook's order
(:func:`~deltaguard.core.durations.write_duration`).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from deltaguard.core.check_request import RequestError, parse_table
from deltaguard.core.durations import write_duration
from deltaguard.core.operations import Operation
from deltaguard.core.priority import DEFAULT_EXPECTED_S
from deltaguard.core.table_config import TableConfig
from deltaguard.planning.analysis import (
    TEMPLATED_TABLE,
    Plan,
    PlannedTask,
    TableSetting,
    Target,
    build_plan,
    plan_limits,
)
from deltaguard.planning.leased_run import DEFAULT_HANDOFF_S, DEFAULT_SLOT_TIMES, SlotTimes

log = logging.getLogger(__name__)

#: instances assumed for a task mapped over values not known before the run
DEFAULT_MAPPED_INSTANCES = 2
#: seconds assumed for a task that is not a deltaguard write
DEFAULT_OTHER_S = 0.0


#: what every template that reads only the run's context renders to in the plan (one value for all of them)
RUN_VALUE = "__run__"
#: names a template may read that differ between the tasks of one run
_TASK_NAMES = frozenset({"ti", "task_instance", "task", "map_index", "expanded_ti_count", "inlet_events"})
_TEMPLATE = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_NAME = re.compile(r"(?<![.\w])[A-Za-z_]\w*")


class PlanInputError(ValueError):
    """A DAG path, DAG id or table document the plan cannot use (one line)."""


#: a leased task's declared writes: (table key, operation or ``None``, why it is not known)
_Declared = tuple[tuple[str, Operation | None, str], ...]


@dataclasses.dataclass
class _Write:
    """A write task instance before its table's configuration is known."""

    id: str
    task: Any
    map_index: int | None
    declared: _Declared | None  # leased tasks: their declaration
    tables: tuple[str, ...]
    unknown: str = ""  # why its operation is not known before the run, when templates say so


def load_dags(path: str | Path, dag_id: str | None = None) -> list[Any]:
    """The DAGs of a DAG file or folder, parsed as Airflow parses them (optionally only ``dag_id``).

    :raises PlanInputError: on a missing path, import errors, no DAG, or an unknown ``dag_id``.
    """
    from airflow.dag_processing.dagbag import DagBag

    where = Path(path)
    if not where.exists():
        raise PlanInputError(f"no such DAG file or folder: {where}")
    bag = DagBag(dag_folder=str(where))
    if bag.import_errors:
        first = next(iter(sorted(bag.import_errors.items())))
        raise PlanInputError(f"cannot import {first[0]}: {' '.join(str(first[1]).split())[-300:]}")
    dags = [bag.dags[name] for name in sorted(bag.dags)]
    if dag_id is not None:
        dags = [dag for dag in dags if dag.dag_id == dag_id]
        if not dags:
            raise PlanInputError(
                f"no DAG {dag_id!r} in {where} (found: {', '.join(sorted(bag.dags)) or 'none'})"
            )
    if not dags:
        raise PlanInputError(f"no DAG in {where}")
    return dags


def load_table_documents(path: str | Path | None) -> dict[str, TableConfig]:
    """Declared table configurations: a JSON object mapping table URIs (or ``conn_id/name`` keys) to the
    table object of a ``deltaguard check`` document.

    :raises PlanInputError: on an unreadable file or a document that is not of that shape.
    """
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PlanInputError(
            f"cannot read the table documents {path}: {' '.join(str(exc).split())}"
        ) from None
    if not isinstance(data, dict):
        raise PlanInputError(f"{path}: expected an object mapping table URIs to table documents")
    from deltaguard.pools import task_table_key

    found: dict[str, TableConfig] = {}
    for name, value in data.items():
        try:
            config = parse_table(value, f"tables[{name!r}]")
        except RequestError as exc:
            raise PlanInputError(f"{path}: {exc}") from None
        key = task_table_key(name, None) if "://" in name or name.startswith("/") else name
        found[key or name] = dataclasses.replace(config, uri=config.uri or name)
    return found


def _is_write(task: Any) -> bool:
    from deltaguard.operators.base import DeltaWriteOperator
    from deltaguard.operators.leased_work import DeltaLeaseMixin

    cls = task.operator_class if _is_mapped(task) else type(task)
    return isinstance(cls, type) and issubclass(cls, (DeltaWriteOperator, DeltaLeaseMixin))


def _is_mapped(task: Any) -> bool:
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    return isinstance(task, MappedOperator)


def _instances(task: Any, mapped_instances: int) -> list[tuple[int | None, Any, str]]:
    """``(map_index, operator or None, why unknown)`` of every instance of ``task`` in one run."""
    if not _is_mapped(task):
        return [(None, task, "")]
    expand = task._get_specified_expand_input()
    value = getattr(expand, "value", None)
    literal = isinstance(value, Mapping) and all(isinstance(v, (list, tuple)) for v in value.values())
    if not literal or not value:
        why = "mapped over values known only when the run starts"
        return [(i, None, why) for i in range(mapped_instances)]
    names = list(value)
    combos = list(itertools.product(*(value[name] for name in names)))
    decorated = task._expand_input_attr == "op_kwargs_expand_input"
    found: list[tuple[int | None, Any, str]] = []
    for index, combo in enumerate(combos):
        kwargs = dict(zip(names, combo, strict=True))
        try:
            found.append((index, task.unmap({"op_kwargs": kwargs} if decorated else kwargs), ""))
        except Exception as exc:  # an instance Airflow cannot build before the run
            found.append(
                (index, None, f"instance {index} cannot be built: {' '.join(str(exc).split())[:120]}")
            )
    return found


def _table_keys(task: Any) -> tuple[tuple[str, ...], _Declared | None]:
    """The table keys one operator instance writes, and for a leased task its declared operations."""
    from deltaguard.operators.leased_work import DeltaLeaseMixin
    from deltaguard.pools import task_table_key

    if isinstance(task, DeltaLeaseMixin):
        try:
            targets = task.delta_lease_targets()
        except Exception as exc:  # templated or not declarable before the run
            raw = task.delta_tables
            names = [raw] if isinstance(raw, str) else list(raw or [])
            why = " ".join(str(exc).split())[:160]
            declared: _Declared = tuple(
                (task_table_key(n, task.delta_conn_id) or f"{TEMPLATED_TABLE}{n}", None, why) for n in names
            )
            return tuple(d[0] for d in declared), declared
        declared = tuple(
            (task_table_key(t.table, task.delta_conn_id) or f"{TEMPLATED_TABLE}{t.table}", t.operation, "")
            for t in targets
        )
        return tuple(d[0] for d in declared), declared
    return (task_table_key(task.table, task.delta_conn_id) or f"{TEMPLATED_TABLE}{task.table}",), None


def discover(
    dag: Any,
    documents: Mapping[str, TableConfig] | None = None,
    *,
    read_tables: bool = True,
    store_url: str | None = None,
    mapped_instances: int = DEFAULT_MAPPED_INSTANCES,
    other_s: float = DEFAULT_OTHER_S,
) -> tuple[list[PlannedTask], dict[str, TableSetting], list[str]]:
    """The task instances of one run of ``dag``, its tables' settings and the plan's assumptions.

    :param dag: a parsed DAG.
    :param documents: declared table configurations by table key.
    :param read_tables: read configurations from the tables' Delta logs when reachable.
    :param store_url: the lease store to read recorded configurations and durations from (``None``: none).
    :param mapped_instances: instances assumed for a task mapped over values not known before the run.
    :param other_s: seconds assumed for a task that is not a deltaguard write.
    """
    from deltaguard.pools.priority import task_operation, tasks_profile

    assumptions: list[str] = []
    writes: list[_Write] = []
    instance_ids: dict[str, list[str]] = {}
    templated: set[str] = set()
    others: list[tuple[str, Any]] = []
    for task in dag.tasks:
        if not _is_write(task):
            instance_ids[task.task_id] = [task.task_id]
            others.append((task.task_id, task))
            continue
        ids = []
        unknown_mapping = False
        for map_index, op, why in _instances(task, mapped_instances):
            job_id = task.task_id if map_index is None else f"{task.task_id}[{map_index}]"
            ids.append(job_id)
            if op is None:
                unknown_mapping = unknown_mapping or why.startswith("mapped over")
                keys = _mapped_table_keys(task)
                unknown: _Declared = tuple((key, None, why) for key in keys)
                writes.append(_Write(job_id, task, map_index, unknown, keys))
                continue
            rendered, why = _for_plan(op)
            templated.update([task.task_id] if rendered is not op else [])
            keys, declared = _table_keys(rendered)
            writes.append(_Write(job_id, rendered, map_index, declared, keys, why))
        if unknown_mapping:
            assumptions.append(
                f"{task.task_id}: mapped over values known only when the run starts; "
                f"{mapped_instances} instances assumed, each judged as conflicting with every write on its table"
            )
        instance_ids[task.task_id] = ids
    if templated:
        assumptions.append(
            f"templates that read only the run's context ({', '.join(sorted(templated))}) render one value "
            "for every task of the run: the plan gives them all the same one"
        )
    by_table: dict[str, list[_Write]] = {}
    for write in writes:
        for key in write.tables:
            by_table.setdefault(key, []).append(write)
    settings = _settings(by_table, documents or {}, read_tables, store_url, assumptions, tasks_profile)
    durations = _durations(dag.dag_id, writes, store_url)
    tasks: list[PlannedTask] = []
    upstream_of = {task.task_id: task.upstream_task_ids for task in dag.tasks}

    def upstream(task_id: str) -> tuple[str, ...]:
        return tuple(job for up in sorted(upstream_of[task_id]) for job in instance_ids.get(up, [up]))

    for write in writes:
        targets = []
        for key in write.tables:
            if write.unknown:
                operation, why = None, write.unknown
            elif write.declared is not None:
                operation, why = next((op, w) for k, op, w in write.declared if k == key)
            else:
                operation = task_operation(write.task, settings[key].config)
                why = "" if operation is not None else _why_unknown(write.task)
            if operation is not None:
                operation = dataclasses.replace(operation, label=write.id)
            targets.append(Target(key, operation, why))
        seconds, source = durations[write.id]
        tasks.append(
            PlannedTask(
                write.id,
                write.task.task_id,
                tuple(targets),
                seconds,
                source,
                upstream(write.task.task_id),
                write.map_index,
                int(getattr(write.task, "priority", 0) or 0),
                tuple(getattr(write.task, "asks_after", ()) or ()),
            )
        )
    for task_id, _task in others:
        tasks.append(PlannedTask(task_id, task_id, (), other_s, "other task", upstream(task_id)))
    if others:
        assumptions.append(f"tasks that write no Delta table through deltaguard take {other_s:g} s each")
    defaulted = sorted(t.task_id for t in tasks if t.duration_source == "default")
    if defaulted:
        assumptions.append(
            f"no recorded or declared duration for {', '.join(dict.fromkeys(defaulted))}: "
            f"{DEFAULT_EXPECTED_S:g} s each"
        )
    order = {task.task_id: i for i, task in enumerate(dag.tasks)}
    tasks.sort(key=lambda t: (order[t.task_id], t.map_index or 0))
    return tasks, settings, assumptions


#: Airflow's defaults the worker-slot limit falls back to: ``[core] parallelism`` and a DAG's
#: ``max_active_tasks`` (``[core] max_active_tasks_per_dag``)
AIRFLOW_PARALLELISM = 32
AIRFLOW_MAX_ACTIVE_TASKS = 16


def deployment_workers(dag: Any) -> tuple[int, str]:
    """How many of ``dag``'s tasks run at once at most in one run, and where that comes from: the smaller
    of ``[core] parallelism`` (the executor's slots) and the DAG's ``max_active_tasks``, as the Airflow
    configuration of this process gives them (Airflow's defaults: 32 and 16). A pool smaller than both
    (``default_pool``'s size is kept in the metadata database, not read here) is given with ``--workers``.
    """
    try:
        from airflow.configuration import conf

        parallelism = conf.getint("core", "parallelism", fallback=AIRFLOW_PARALLELISM)
    except Exception:  # no Airflow configuration here: Airflow's default
        parallelism = AIRFLOW_PARALLELISM
    per_dag = int(getattr(dag, "max_active_tasks", None) or AIRFLOW_MAX_ACTIVE_TASKS)
    if parallelism <= 0:  # 0: unlimited executor slots
        return per_dag, f"the DAG's max_active_tasks ({per_dag})"
    workers = min(parallelism, per_dag)
    return (
        workers,
        f"the smaller of [core] parallelism ({parallelism}) and the DAG's max_active_tasks ({per_dag})",
    )


def deployment_worker_slots() -> tuple[int | None, str]:
    """The lease manager's slot gate (ADR 0028) as the Airflow configuration of this process sets it, and
    where that comes from: ``[deltaguard] worker_slots``, else ``[core] parallelism`` (``None``: ``0``, no
    gate); without an Airflow configuration, Airflow's default parallelism."""
    try:
        from deltaguard import config

        return config.worker_slots(), "[deltaguard] worker_slots, else [core] parallelism"
    except ImportError:  # no Airflow here: the gate at Airflow's default parallelism
        return AIRFLOW_PARALLELISM, f"Airflow's default [core] parallelism ({AIRFLOW_PARALLELISM})"


def deployment_phase_wait_s() -> float:
    """Seconds a write lets the earlier phases of its table ask first as the Airflow configuration of this
    process sets them (``[deltaguard] phase_wait``); without Airflow, the option's default.

    :raises ValueError: the option is set to something else than seconds of at least 0.
    """
    from deltaguard import config

    try:
        return config.phase_wait_s()
    except ImportError:  # no Airflow here: the option's default (a bad value is the user's to fix)
        return float(config.OPTIONS["phase_wait"][1])


def deployment_first_check_s() -> float:
    """Seconds from a write's deferral to its trigger's first check as the Airflow configuration of this
    process sets them (``[deltaguard] poll_interval``, no sooner than
    :func:`~deltaguard.config.first_event_after_s`); without one, the defaults'."""
    from deltaguard.planning.leased_run import DEFAULT_FIRST_CHECK_S

    try:
        from deltaguard import config

        return max(config.poll_interval(), config.first_event_after_s())
    except ImportError:  # no Airflow here: the option's default (a bad value is the user's to fix)
        return DEFAULT_FIRST_CHECK_S


def _run_rendered(value: Any) -> Any:
    """``value`` with every template that reads only the run's context replaced by :data:`RUN_VALUE`.

    Such a template (``{{ ds }}``, ``{{ params.day }}``, a user macro of ``dag_run``) renders one value for
    every task of a run; the plan does not know it, so it gives all of them the same one: writes it
    separates in a real run may look overlapping in the plan, never the other way round.

    :raises LookupError: for a template that may differ between tasks (XCom, ``ti``, a block tag).
    """
    if isinstance(value, str):
        if "{%" in value:
            raise LookupError("a template block ({% ... %}) is rendered only when the task runs")

        def one(match: re.Match[str]) -> str:
            body = match.group(1)
            names = set(_NAME.findall(re.sub(r"'[^']*'|\"[^\"]*\"", "", body)))
            if "xcom" in body or names & _TASK_NAMES:
                raise LookupError(
                    f"the template {match.group(0)!r} reads what only the task knows when it runs"
                )
            return RUN_VALUE

        return _TEMPLATE.sub(one, value)
    if isinstance(value, Mapping):
        return {_run_rendered(k): _run_rendered(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_run_rendered(v) for v in value)
    return value


def _for_plan(task: Any) -> tuple[Any, str]:
    """A copy of ``task`` whose run-level templates are rendered for the plan, and why not (``""``: done)."""
    fields = [name for name in task.template_fields if name not in ("table", "delta_tables", "delta_conn_id")]
    if not any(
        "{{" in str(getattr(task, name, "")) or "{%" in str(getattr(task, name, "")) for name in fields
    ):
        return task, ""
    rendered = copy.copy(task)
    try:
        for name in fields:
            setattr(rendered, name, _run_rendered(getattr(task, name, None)))
    except LookupError as exc:
        return task, str(exc)
    return rendered, ""


def _mapped_table_keys(task: Any) -> tuple[str, ...]:
    from deltaguard.pools import task_table_key

    kwargs = getattr(task, "partial_kwargs", {})
    conn_id = kwargs.get("delta_conn_id")
    raw = kwargs.get("table", kwargs.get("tables"))
    names = [raw] if isinstance(raw, str) else list(raw or [])
    if not names:
        return (f"{TEMPLATED_TABLE}{task.task_id}",)
    return tuple(task_table_key(str(n), conn_id) or f"{TEMPLATED_TABLE}{n}" for n in names)


def _why_unknown(task: Any) -> str:
    if any("{{" in str(getattr(task, field, "")) for field in task.template_fields):
        return "a templated field is rendered only when the task runs"
    return "the operator cannot state its operation before the run"


#: why a reachable table was not read: nothing is there yet, so a write of the DAG may create it
NOT_THERE_YET = "no Delta table there yet"


def _settings(
    by_table: Mapping[str, Sequence[_Write]],
    documents: Mapping[str, TableConfig],
    read_tables: bool,
    store_url: str | None,
    assumptions: list[str],
    tasks_profile: Any,
) -> dict[str, TableSetting]:
    recorded: dict[str, TableConfig] = {}
    if store_url:
        from deltaguard.pools.recorded import recorded_configs

        recorded = recorded_configs(sorted(by_table), store_url)
    settings: dict[str, TableSetting] = {}
    for key, writes in by_table.items():
        profile = tasks_profile([w.task for w in writes])
        config, source, note = _read(key, read_tables)
        if config is None and key in documents:
            config, source, note = documents[key], "document", "from the declared table document"
        if config is None and key in recorded:
            config, source, note = (
                recorded[key],
                "recorded",
                "as the lease manager last read it (lease store)",
            )
        if config is None and note == NOT_THERE_YET:
            created = _created_layout(writes)
            if created is not None:
                creator, columns = created
                config, source = TableConfig(uri=key, partition_columns=columns), "created"
                note = (
                    f"no Delta table there yet; as {creator} creates it, before every other write of the "
                    f"DAG on it: partitioned by {', '.join(columns)}, no table properties (default isolation "
                    "level)"
                )
                assumptions.append(f"{key}: {note}")
        if config is None:
            config = TableConfig(uri=key)
            source = "assumed"
            note = (
                f"{note}; assumed: the table exists, unpartitioned, no table properties (default isolation "
                "level), the strictest reading of a plain table"
            ).lstrip("; ")
            assumptions.append(f"{key}: {note}")
        # a table read from its log has the evaluator already; a declared or recorded one gets it here
        from deltaguard.engines.sources import attach_delta_rs_oracle

        config = attach_delta_rs_oracle(config, (profile.name,))
        settings[key] = TableSetting(config, source, note, profile)
    return settings


def _created_layout(writes: Sequence[_Write]) -> tuple[str, tuple[str, ...]] | None:
    """The write that creates a table not there yet and the partition columns it creates it with.

    Only a write that names its partition columns (``partition_by``) and runs before every other write of
    the DAG on the table (each of them downstream of it) is known to create it; any other shape keeps the
    plan's assumption of a plain table. ``None`` when no write is known to.
    """
    named = [w for w in writes if w.map_index is None and tuple(getattr(w.task, "partition_by", ()) or ())]
    if len(named) != 1:
        return None
    creator = named[0]
    after = creator.task.get_flat_relative_ids(upstream=False)
    if any(w.task.task_id not in after for w in writes if w is not creator):
        return None
    return creator.task.task_id, tuple(str(column) for column in creator.task.partition_by)


def _read(key: str, read_tables: bool) -> tuple[TableConfig | None, str, str]:
    if key.startswith(TEMPLATED_TABLE):
        return (
            None,
            "",
            "named by a template rendered only when the task runs: planned as conflicting with every write",
        )
    if not ("://" in key or key.startswith("/")):
        return None, "", "named relative to a connection, not resolved by the plan"
    if not read_tables:
        return None, "", "not read (--no-read)"
    from deltaguard.engines.errors import TableAccessError
    from deltaguard.engines.sources import read_judged_config

    try:
        config = read_judged_config(key)
    except (TableAccessError, OSError, ValueError) as exc:
        return None, "", f"not reachable ({' '.join(str(exc).split())[:160]})"
    if not config.exists:
        return None, "", NOT_THERE_YET
    return config, "table", f"read from its Delta log at version {config.version}"


def _durations(dag_id: str, writes: Sequence[_Write], store_url: str | None) -> dict[str, tuple[float, str]]:
    """Each write's expected seconds and their source, chosen as the lease hook chooses them
    (:func:`~deltaguard.core.durations.write_duration`: declared, else recorded, else the default)."""
    undeclared = [w for w in writes if getattr(w.task, "expected_duration_s", None) is None]
    recorded: dict[tuple[str, str], float | None] = {}
    if store_url and undeclared:
        pairs = {(w.task.task_id, key) for w in undeclared for key in w.tables}
        recorded = _recorded(dag_id, pairs, store_url)
    found: dict[str, tuple[float, str]] = {}
    for write in writes:
        learned = [recorded.get((write.task.task_id, key)) for key in write.tables]
        known = max((value for value in learned if value is not None), default=None)
        chosen = write_duration(getattr(write.task, "expected_duration_s", None), lambda: known)  # noqa: B023 - called at once
        found[write.id] = (chosen.planning_s, chosen.source)
    return found


def _recorded(
    dag_id: str, pairs: set[tuple[str, str]], store_url: str
) -> dict[tuple[str, str], float | None]:
    """The median recorded hold of each (task, table) pair, from the decision log; empty when unreadable."""
    from deltaguard.core.admission import Owner
    from deltaguard.leases.admin import open_existing_store
    from deltaguard.leases.manager import learned_duration
    from deltaguard.pools.recorded import STORE_TIMEOUT_S

    try:
        store = open_existing_store(store_url, STORE_TIMEOUT_S)
    except Exception as exc:  # durations fall back to declared or default ones, stated in the plan
        log.debug("deltaguard plan: no lease store: %s", exc)
        return {}
    if store is None:
        return {}
    try:
        return {
            (task_id, key): learned_duration(store, Owner(dag_id=dag_id, task_id=task_id), key)
            for task_id, key in sorted(pairs)
        }
    except Exception as exc:
        log.debug("deltaguard plan: cannot read the decision log: %s", exc)
        return {}
    finally:
        store.close()


def plan_dag(
    dag: Any,
    documents: Mapping[str, TableConfig] | None = None,
    *,
    read_tables: bool = True,
    store_url: str | None = None,
    mapped_instances: int = DEFAULT_MAPPED_INSTANCES,
    other_s: float = DEFAULT_OTHER_S,
    workers: int | None = None,
    worker_slots: int | None = None,
    first_check_s: float | None = None,
    handoff_s: float = DEFAULT_HANDOFF_S,
    slot_times: SlotTimes = DEFAULT_SLOT_TIMES,
    phase_wait_s: float | None = None,
) -> Plan:
    """The plan of one run of ``dag``: its writes discovered, the limits it assumes stated, the run played.

    The ``deltaguard plan`` command and the UI's Plan view both plan through this function; a limit not
    given is read from this process's Airflow configuration, and the plan says which.

    :param dag: a parsed DAG.
    :param documents: declared table configurations (``deltaguard plan --tables``).
    :param read_tables: read reachable tables' configurations from their Delta logs.
    :param store_url: the lease store whose recorded durations and configurations to use, or ``None``.
    :param mapped_instances: task instances assumed per mapped task.
    :param other_s: seconds assumed for a task that writes nothing.
    :param workers: worker slots (``--workers``); default ``[core] parallelism`` and the DAG's limits.
    :param worker_slots: the lease manager's slot gate (``--worker-slots``, 0 for none); default
        ``[deltaguard] worker_slots``.
    :param first_check_s: seconds before a deferred write's first check; default: the deployment's
        (:func:`deployment_first_check_s`).
    :param handoff_s: seconds from a release to the next holder's start.
    :param slot_times: a task's start and end overheads.
    :param phase_wait_s: the longest a write lets the earlier phases of its table ask first; default: the
        deployment's (:func:`deployment_phase_wait_s`).
    """
    tasks, settings, assumptions = discover(
        dag,
        documents,
        read_tables=read_tables,
        store_url=store_url,
        mapped_instances=mapped_instances,
        other_s=other_s,
    )
    if store_url is None:
        assumptions.append("no lease store read: no recorded durations")
    slots, where = (workers, "--workers") if workers is not None else deployment_workers(dag)
    gate = (worker_slots or None, "--worker-slots") if worker_slots is not None else deployment_worker_slots()
    first_check = deployment_first_check_s() if first_check_s is None else first_check_s
    phase_wait = deployment_phase_wait_s() if phase_wait_s is None else phase_wait_s
    assumptions.append(plan_limits(slots, where, handoff_s, slot_times, gate, first_check, phase_wait))
    return build_plan(
        dag.dag_id,
        tasks,
        settings,
        assumptions,
        slots,
        handoff_s,
        slot_times,
        gate[0],
        first_check,
        phase_wait,
    )
