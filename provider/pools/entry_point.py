"""The cluster policy every install gets: registered through Airflow's ``airflow.policy`` entry point.

Airflow's policy plugin manager (``airflow.settings.get_policy_plugin_manager``) loads every
``airflow.policy`` setuptools entry point and calls its ``@hookimpl``-marked functions next to those of
``airflow_local_settings.py``. This module registers only the priority ``dag_policy``
(:mod:`deltaguard.pools.priority`, ADR 0028): it needs no pools and no metadata database, so it is safe to
run everywhere, and it is the slot order the orchestration benchmark measures. ``[deltaguard]
priority_policy = False`` turns it off; the option is read at every call, not at import.

The pool-routing ``task_policy`` stays opt-in (``airflow_local_settings.py``): a task routed to a pool that
does not exist is never scheduled, so it needs ``deltaguard pools sync`` first. Importing ``dag_policy`` from
:mod:`deltaguard.pools.policy` there as well is harmless: the priority policy leaves a task alone once its
``priority_weight`` is no longer Airflow's default.
"""

from __future__ import annotations

from typing import Any

from airflow.policies import hookimpl


@hookimpl
def dag_policy(dag: Any) -> None:
    """Give deltaguard write tasks their table's chain priority, unless ``priority_policy`` is off.

    :param dag: the DAG being parsed.
    """
    from deltaguard import config
    from deltaguard.pools.priority import dag_policy as set_priorities

    if config.priority_policy():
        set_priorities(dag)
