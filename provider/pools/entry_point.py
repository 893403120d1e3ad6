"""The cluster policy every install gets, registered through Airflow's ``airflow.policy`` entry point.

Only the priority ``dag_policy`` (:mod:`deltaguard.pools.priority`, ADR 0028) is registered: it needs no
pools and no metadata database, so it is safe everywhere; ``[deltaguard] priority_policy = False`` turns it
off (read at every call). The pool-routing ``task_policy`` stays opt-in (:mod:`deltaguard.pools.policy`),
since a task routed to a pool that does not exist is never scheduled.
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
