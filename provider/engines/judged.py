"""The one door to a table configuration that writes will be judged on: read, with the engines' evaluators.

The conflict rules may let an engine's own evaluator confirm what they read by hand (ADR 0037): the delta-rs
rules ask ``TableConfig.meaning`` before two writes stay apart by partition. A configuration read without it
is judged by the hand reading alone, which let cast literals through (``p = 1.5`` rewrites ``p = 1`` on an
INT partition). So every caller that reads a table's configuration to judge writes on it goes through this
module, never through :mod:`deltaguard.engines.discovery` or an engine's ``table_config`` directly
(``tests/engines/test_judged_door.py`` fails otherwise):

* :func:`read_judged_config`, :func:`read_judged_table`, :func:`judged_config_from_table`: the Delta log
  through deltalake, as :mod:`~deltaguard.engines.discovery` reads it;
* :func:`engine_table_config`: an engine's own read (a catalog table through Spark, ...);
* :func:`attach_oracle`: a configuration read back from elsewhere (a lease store, a trigger's arguments).

Which evaluator: the one the engine supplies through
:meth:`DeltaEngine.predicate_oracle <deltaguard.engines.base.DeltaEngine.predicate_oracle>`; without an
engine, or when it supplies none, delta-rs' (:class:`~deltaguard.engines.deltars.meaning.DataFusionOracle`).
delta-rs' needs only the table's partition columns and their types, and the delta-rs rules judge every pair a
delta-rs write takes part in, whichever engine read the table (ADR 0012, mixed engines).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from deltaguard.core.table_config import TableConfig
from deltaguard.engines.deltars.meaning import DataFusionOracle
from deltaguard.engines.discovery import config_from_table, read_table

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from deltaguard.engines.base import DeltaEngine


def attach_oracle(config: TableConfig, engine: DeltaEngine | None = None) -> TableConfig:
    """``config`` with an engine's evaluator of partition predicates as its ``meaning`` (ADR 0037).

    A configuration that already carries one keeps it. Otherwise the engine's
    (:meth:`~deltaguard.engines.base.DeltaEngine.predicate_oracle`), else delta-rs'; unchanged when
    neither can judge the table (unpartitioned, partition types not read, no table).

    :param config: the configuration as read.
    :param engine: the engine that read it or will write, if one is at hand.
    """
    if config.meaning is not None:
        return config
    oracle = engine.predicate_oracle(config) if engine is not None else None
    if oracle is None:
        oracle = DataFusionOracle.for_table(config)
    return config if oracle is None else dataclasses.replace(config, meaning=oracle)


def engine_table_config(engine: DeltaEngine, table_uri: str) -> TableConfig:
    """The engine's read of ``table_uri`` (:meth:`~deltaguard.engines.base.DeltaEngine.table_config`), with
    an evaluator attached (an engine given as ``module:Class`` need not attach one itself).

    :raises TableAccessError: as the engine's read.
    """
    return attach_oracle(engine.table_config(table_uri), engine)


def read_judged_config(
    table_uri: str,
    storage_options: dict[str, str] | None = None,
    *,
    engine: DeltaEngine | None = None,
    file_stats: bool = False,
) -> TableConfig:
    """:func:`deltaguard.engines.discovery.read_table_config`, with an evaluator attached.

    :param engine: the engine at hand, if any (its evaluator is preferred).
    :raises TableAccessError: when the log exists but cannot be read.
    """
    return read_judged_table(table_uri, storage_options, engine=engine, file_stats=file_stats)[0]


def read_judged_table(
    table_uri: str,
    storage_options: dict[str, str] | None = None,
    *,
    engine: DeltaEngine | None = None,
    file_stats: bool = False,
) -> tuple[TableConfig, DeltaTable | None]:
    """:func:`deltaguard.engines.discovery.read_table` (the configuration and the handle it was read from),
    with an evaluator attached.

    :raises TableAccessError: when the log exists but cannot be read.
    """
    config, table = read_table(table_uri, storage_options, file_stats)
    return attach_oracle(config, engine), table


def judged_config_from_table(
    table: Any,
    table_uri: str | None = None,
    storage_options: dict[str, str] | None = None,
    *,
    engine: DeltaEngine | None = None,
    file_stats: bool = False,
) -> TableConfig:
    """:func:`deltaguard.engines.discovery.config_from_table` of an open deltalake table, with an evaluator
    attached.

    :raises TableAccessError: when the snapshot cannot be read.
    """
    config = config_from_table(table, table_uri, storage_options, file_stats=file_stats)
    return attach_oracle(config, engine)
