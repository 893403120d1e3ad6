"""The snapshot a delta-rs write reads when its lease request carried file statistics (ADR 0020).

Such a request records the version its statistics are of (``TableClaim.read_version``), and the admission
decision is sound only for a write that reads exactly the version its lease records. When the write starts,
the table may have moved on (the write waited for others, or its trigger granted the lease from an earlier
request): the lease is then moved to the newest version if it is still compatible with every other lease
(:meth:`~deltaguard.leases.manager.LeaseManager.restate`), else the write reads the version recorded. What
the model judged is what the engine runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from deltaguard.core.admission import LeaseRequest, Owner, TableClaim

if TYPE_CHECKING:
    from deltaguard.core.operations import Operation
    from deltaguard.core.profiles import EngineProfile
    from deltaguard.core.table_config import TableConfig


class Restates(Protocol):
    """What this module needs of the lease manager (:class:`~deltaguard.leases.manager.LeaseManager`)."""

    def restate(self, request: LeaseRequest) -> Mapping[str, int | None]: ...


def pinned_snapshot(
    manager: Restates,
    engine: Any,
    *,
    uri: str,
    table_key: str,
    operation: Operation,
    profile: EngineProfile,
    owner: Owner,
    lease_id: str,
    prepared: Any = None,
    prepared_config: TableConfig | None = None,
) -> Any:
    """Open the snapshot the write must commit from (a deltalake handle), or ``None`` when its lease
    records no read version (the write then reads the newest version, as without statistics).

    :param manager: the lease manager holding the lease.
    :param engine: the delta-rs engine (``open_table``, ``storage_options``).
    :param uri: the table URI.
    :param table_key: the table's lease key.
    :param operation: the write's operation, as in its lease request.
    :param profile: its engine profile.
    :param owner: the lease's owner.
    :param lease_id: the granted lease.
    :param prepared: the handle the write's lease request was read from, if still open: it is brought to
        the newest version (reading only the commits after it) instead of opening the log again.
    :param prepared_config: the configuration, with statistics, read from ``prepared`` at its version: used
        again when no commit landed since, instead of reading the statistics again.
    :raises LeaseLostError: the lease is gone or expired.
    """
    from deltaguard.engines.judged import judged_config_from_table

    if prepared is None:
        latest = engine.open_table(uri)
    else:
        latest = prepared
        latest.update_incremental()
    if prepared_config is not None and prepared_config.version == latest.version():
        config = prepared_config
    else:
        # Judged like the prepared configuration: delta-rs' evaluator confirms what the model keeps apart.
        config = judged_config_from_table(latest, uri, engine.storage_options, engine=engine, file_stats=True)
    claim = TableClaim(
        uri=table_key, operation=operation, profile=profile, config=config, read_version=latest.version()
    )
    # ttl and priority are not read: the stored request keeps its own, only its claims move.
    request = LeaseRequest(claims=(claim,), owner=owner, request_id=lease_id)
    version = manager.restate(request).get(table_key)
    if version is None:
        return None
    if version == latest.version():
        return latest
    return engine.open_table(uri, version=version)


def judged_by_file_stats(operation: Operation) -> bool:
    """Whether the model judges ``operation`` by file statistics (only rewrites are): others neither send
    statistics nor pin their snapshot."""
    from deltaguard.core.rules.deltars_stats import STATS_KINDS

    return operation.kind in STATS_KINDS


def writes_from_snapshot(engine: Any) -> bool:
    """Whether the engine's ``write`` takes the snapshot to commit from (a subclass may not pass it on)."""
    import inspect

    try:
        return "snapshot" in inspect.signature(engine.write).parameters
    except (TypeError, ValueError):
        return False


def checks_on_snapshot(engine: Any) -> bool:
    """Whether the engine's ``validate`` takes the open handle the write's configuration was read from (so
    that checking the write does not open the Delta log again)."""
    import inspect

    try:
        return "snapshot" in inspect.signature(engine.validate).parameters
    except (TypeError, ValueError):
        return False
