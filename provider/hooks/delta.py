"""The ``delta`` connection: a base URI for tables plus the storage options delta-rs needs."""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from typing import Any

from airflow.sdk import BaseHook

from deltaguard.engines.base import DeltaEngine
from deltaguard.engines.registry import canonical_engine_name, engine_class
from deltaguard.table_uri import resolve_table_uri

#: extras keys that configure deltaguard itself rather than object storage
_RESERVED_EXTRAS = frozenset({"storage_options", "engine"})


class DeltaTableHook(BaseHook):
    """Turns a ``delta`` connection into table URIs, ``deltalake`` storage options and an engine.

    Connection fields: ``host`` = base URI (``s3://bucket/warehouse``, ``file:///data/delta``);
    extras = ``{"storage_options": {...}}`` (or the storage options as top-level keys) and optionally
    ``{"engine": "delta-rs" | "spark"}``. Without a connection id, table names must be absolute URIs.

    :param delta_conn_id: the Airflow connection id, or ``None`` for no connection.
    """

    conn_name_attr = "delta_conn_id"
    default_conn_name = "delta_default"
    conn_type = "delta"
    hook_name = "Delta Lake tables"

    def __init__(self, delta_conn_id: str | None = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delta_conn_id = delta_conn_id
        self._loaded = False
        self._base_uri: str | None = None
        self._extras: dict[str, Any] = {}

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["schema", "port", "login", "password"],
            "relabeling": {"host": "Base URI"},
            "placeholders": {
                "host": "s3://bucket/warehouse or file:///data/delta",
                "extra": '{"storage_options": {"AWS_REGION": "eu-central-1"}}',
            },
        }

    def _load(self) -> None:
        if self._loaded:
            return
        if self.delta_conn_id:
            conn = self.get_connection(self.delta_conn_id)
            self._base_uri = (conn.host or "").strip() or None
            self._extras = _parse_extras(conn.extra)
        self._loaded = True

    @property
    def base_uri(self) -> str | None:
        """The connection's base URI (``None`` without a connection)."""
        self._load()
        return self._base_uri

    @property
    def storage_options(self) -> dict[str, str]:
        """``deltalake`` storage options from the connection extras (values as strings)."""
        self._load()
        nested = self._extras.get("storage_options")
        if nested is not None and not isinstance(nested, Mapping):
            raise ValueError(f"connection {self.delta_conn_id!r}: extra 'storage_options' must be an object")
        flat = {k: v for k, v in self._extras.items() if k not in _RESERVED_EXTRAS}
        merged = {**flat, **dict(nested or {})}
        return {str(k): str(v) for k, v in merged.items()}

    @property
    def engine_name(self) -> str | None:
        """The engine the connection asks for, if any."""
        self._load()
        name = self._extras.get("engine")
        return str(name) if name else None

    def table_uri(self, table: str) -> str:
        """Resolve ``table`` (URI, absolute path, or name relative to the base URI)."""
        return resolve_table_uri(table, self.base_uri)

    def get_engine(self, name: str | None = None) -> DeltaEngine:
        """Build the engine: ``name``, else the connection's ``engine`` extra, else ``[deltaguard] default_engine``.

        delta-rs receives the connection's storage options; any engine whose constructor accepts
        ``storage_options`` does too.
        """
        from deltaguard import config

        chosen = canonical_engine_name(name or self.engine_name or config.default_engine())
        cls = engine_class(chosen)
        kwargs: dict[str, Any] = {}
        if "storage_options" in inspect.signature(cls).parameters:
            kwargs["storage_options"] = self.storage_options or None
        return cls(**kwargs)


def _parse_extras(extra: str | Mapping[str, Any] | None) -> dict[str, Any]:
    if not extra:
        return {}
    if isinstance(extra, Mapping):
        return dict(extra)
    try:
        parsed = json.loads(extra)
    except json.JSONDecodeError as exc:
        raise ValueError(f"delta connection extras are not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ValueError("delta connection extras must be a JSON object")
    return parsed
