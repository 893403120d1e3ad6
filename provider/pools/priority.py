"""A cluster policy giving deltaguard write tasks a priority from their table's serial work (ADR 0028).

On by default: the provider registers it through Airflow's ``airflow.policy`` entry point
(:mod:`deltaguard.pools.entry_point`); ``[deltaguard] priority_policy = False`` turns it off.

Each write task whose author set no ``priority_weight`` gets the seconds of the heaviest chain of
pairwise-conflicting writes through it plus its phase bonus (:func:`deltaguard.core.priority.table_priorities`),
and the phase bonus as its lease ``priority`` unless its author set one. Tables are judged on the configuration
the lease manager last recorded (:mod:`deltaguard.pools.recorded`), else on a guess from the tasks' partition
arguments; a task with a templated field conflicts with every other. Priorities only order starts: the lease
manager still decides at run time what may run at once, so a stale or guessed configuration can only delay a
start. The policy reads no Delta log and no Airflow metadata database.
"""

from __future__ import annotations

import logging
from typing import Any

from deltaguard.core.durations import write_duration
from deltaguard.core.operations import Operation
from deltaguard.core.priority import table_priorities
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.spark.jars import installed_version
from deltaguard.pools import task_table_key
from deltaguard.pools.recorded import recorded_configs

log = logging.getLogger(__name__)

#: Airflow's default ``priority_weight``: a task still holding it did not choose one.
DEFAULT_PRIORITY_WEIGHT = 1
#: The operators' default lease ``priority``: a task still holding it did not choose one.
DEFAULT_LEASE_PRIORITY = 0
#: The rules used when the installed engine's version is not known: the oldest versions the rules cover.
_OLDEST = {"delta-rs": "1.0.0", "spark": "3.0.0"}
#: The engine kinds and the distribution whose installed version names their rules.
_ENGINES = {"delta-rs": (EngineName.DELTA_RS, "deltalake"), "spark": (EngineName.DELTA_SPARK, "delta-spark")}
_PARTITION_FIELDS = ("partition_values", "target_partition_values", "partition_filters")


def _templated(task: Any) -> bool:
    return any("{{" in str(getattr(task, field, "")) for field in task.template_fields)


def partition_columns_named(tasks: list[Any]) -> tuple[str, ...]:
    columns: set[str] = set()
    for task in tasks:
        for field in _PARTITION_FIELDS:
            value = getattr(task, field, None)
            if isinstance(value, dict):
                columns.update(str(k) for k in value)
    return tuple(sorted(columns))


def task_operation(task: Any, config: TableConfig) -> Operation | None:
    """What the conflict model is told a deltaguard operator writes on ``config``; ``None`` when it cannot
    be known at parse time (a templated field, an operator that cannot say): it then conflicts with all."""
    if _templated(task):
        return None
    from deltaguard.engines.sources import with_target_reads

    try:
        spec = task.build_spec(config)
        operation: Operation | None = task.conflict_operation(spec)
        if operation is not None:
            # judged as the operator will judge it: a source that may read the table reads all of it
            declared = getattr(task, "source_reads_target", None)
            operation, _ = with_target_reads(operation, spec, str(task.table), None, declared)
        return operation
    except Exception:  # a guess only: an operator that cannot say counts as conflicting with all
        return None


def _engine_name(task: Any) -> str:
    """The task's engine (``delta-rs``, ``spark``), or ``""`` when it is not known at parse time (a
    connection names it)."""
    from deltaguard import config
    from deltaguard.engines.base import canonical_engine_name, engine_class

    try:
        name = canonical_engine_name(getattr(task, "engine", None) or config.default_engine())
        return str(getattr(engine_class(name), "name", "")) if ":" in name else name
    except (ValueError, ImportError):
        return ""


def engine_profile(kind: str) -> EngineProfile:
    """The rules of engine ``kind`` (``delta-rs`` or ``spark``) as installed here, or the oldest covered.

    The installed package is what the workers run when they share this environment; a Spark cluster may
    run another Delta version, and only the order of starts depends on it.
    """
    name, distribution = _ENGINES[kind]
    return EngineProfile(name, installed_version(distribution) or _OLDEST[kind])


def tasks_profile(tasks: list[Any]) -> EngineProfile:
    """The rules that judge a table's writes: delta-rs when every task names it, else Spark's."""
    engines = {_engine_name(task) for task in tasks}
    return engine_profile("delta-rs" if engines == {"delta-rs"} else "spark")


def dag_policy(dag: Any) -> None:
    """Airflow cluster policy hook (called for every DAG when DAG files are parsed).

    Sets ``priority_weight`` of the DAG's deltaguard write tasks that kept Airflow's default, and their
    lease ``priority`` when it kept the operators' default, with the conflicting writes of earlier phases
    the task lets ask first (``asks_after``, ADR 0040). All of it orders work only; the lease manager
    decides what runs at once.

    :param dag: the DAG being parsed.
    """
    from deltaguard.operators.base import DeltaWriteOperator

    by_table: dict[str, list[Any]] = {}
    for task in dag.tasks:
        if isinstance(task, DeltaWriteOperator):
            key = task_table_key(task.table, task.delta_conn_id)
            if key is not None:
                by_table.setdefault(key, []).append(task)
    recorded = recorded_configs(sorted(by_table)) if by_table else {}
    for key, tasks in by_table.items():
        config = recorded.get(key) or TableConfig(partition_columns=partition_columns_named(tasks), uri=key)
        try:
            ranked = table_priorities(
                [task_operation(task, config) for task in tasks],
                # the policy reads no decision log at parse time: declared durations, else the default
                [write_duration(task.expected_duration_s).seconds for task in tasks],
                config,
                tasks_profile(tasks),
            )
        except Exception as exc:
            # A policy that raises keeps the whole DAG from loading (AirflowClusterPolicyError). Priorities
            # only order starts, so a task whose input cannot be judged (an unparsable predicate, ...) keeps
            # Airflow's weight here and fails at run time with its own clear error, before any lease.
            log.warning("deltaguard: no write priorities for %s in DAG %s: %s", key, dag.dag_id, exc)
            continue
        for task, weight, bonus, after in zip(
            tasks, ranked.weights, ranked.phase_bonus, ranked.after, strict=True
        ):
            if task.priority_weight == DEFAULT_PRIORITY_WEIGHT:
                task.priority_weight = weight
            if task.priority == DEFAULT_LEASE_PRIORITY:
                # the phases order the queue only through the bonus: an author's own priority, no wait
                task.priority = bonus
                task.asks_after = tuple(sorted({tasks[j].task_id for j in after} - {task.task_id}))
        log.debug(
            "deltaguard: %s writes on %s (%s configuration), priorities %s, lease priorities %s",
            len(tasks),
            key,
            "recorded" if key in recorded else "guessed",
            ranked.weights,
            ranked.phase_bonus,
        )
