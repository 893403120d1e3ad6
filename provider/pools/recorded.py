"""The table configurations the lease manager last used, read from the lease store for the priority policy.

Every lease decision keeps the newest configuration it saw in the table's store row (``dg_tables.config_json``).
The priority policy (:mod:`deltaguard.pools.priority`) runs while DAG files are parsed, where no connection can
be resolved and no Delta log should be read, so it reads these rows: one read-only query per DAG parse, with
short timeouts. Anything that goes wrong reads as "nothing recorded" and the policy guesses; the answer only
orders starts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from deltaguard.core.table_config import TableConfig

log = logging.getLogger(__name__)

#: Seconds the policy waits for the store (connect, statement, SQLite lock): a DAG parse must not stall.
STORE_TIMEOUT_S = 2.0


def recorded_configs(keys: Sequence[str], url: str | None = None) -> dict[str, TableConfig]:
    """The configuration the lease store holds for each of ``keys`` that has one.

    :param keys: table keys as the lease manager names tables (:func:`deltaguard.writes.table_uri.table_key`;
        a key that is not one, such as a connection-qualified relative name, is simply not found).
    :param url: the lease store (default: ``[deltaguard] lease_store_url``).
    :return: ``{key: configuration}``; empty when the store cannot be read (logged at debug).
    """
    if not keys:
        return {}
    try:
        from deltaguard import config

        rows = _read_rows(url or config.lease_store_url(), keys)
    except Exception as exc:  # a guess remains: priorities only order starts
        log.debug("deltaguard: no recorded table configurations (%s): %s", type(exc).__name__, exc)
        return {}
    configs: dict[str, TableConfig] = {}
    for uri, text in rows:
        try:
            from deltaguard.leases import codec

            configs[uri] = codec.config_from_json(json.loads(text))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            log.debug("deltaguard: the recorded configuration of %s does not decode: %s", uri, exc)
    return configs


def _read_rows(url: str, keys: Sequence[str]) -> list[tuple[str, str]]:
    """``(uri, config_json)`` of the recorded tables among ``keys``; ``[]`` when no store exists yet."""
    from deltaguard.leases.admin import open_existing_store

    store = open_existing_store(url, STORE_TIMEOUT_S)
    if store is None:
        return []
    try:
        return [(row.uri, row.config_json) for row in store.read_tables(keys) if row.config_json]
    finally:
        store.close()
