"""JSON encoding of operations, table configurations, engine profiles, owners and requests for the lease
stores: the texts the stores keep, and their decoding (cached: stored values are immutable)."""

from __future__ import annotations

import functools
import json
from typing import Any

from deltaguard.core.admission import LeaseRequest, Owner, TableClaim
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import STORAGE_COORDINATION, EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig


def dumps(data: Any) -> str:
    """Compact, key-sorted JSON (stable text for equal values)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def operation_to_json(op: Operation) -> dict[str, Any]:
    data: dict[str, Any] = {
        "kind": op.kind.value,
        "predicate": op.predicate,
        "merge_condition": op.merge_condition,
        "target_alias": op.target_alias,
        "zorder_by": list(op.zorder_by),
        "reads_target": op.reads_target,
        "checkpoint_location": op.checkpoint_location,
        "sql": op.sql,
        "label": op.label,
    }
    # The write scope and committing engine (ADR 0012), only when set: older stored texts stay valid.
    if op.assignments:
        data["assignments"] = [list(pair) for pair in op.assignments]
    if op.inserts != "":
        data["inserts"] = op.inserts
    if op.evolves_schema:  # a metadata change (ADR 0035); absent in older stored texts
        data["evolves_schema"] = True
    if op.engine is not None:
        data["engine"] = profile_to_json(op.engine)
    return data


def operation_from_json(data: dict[str, Any]) -> Operation:
    return Operation(
        kind=OperationKind(data["kind"]),
        predicate=data.get("predicate"),
        merge_condition=data.get("merge_condition"),
        target_alias=data.get("target_alias") or "t",
        zorder_by=tuple(data.get("zorder_by") or ()),
        reads_target=bool(data.get("reads_target", False)),
        checkpoint_location=data.get("checkpoint_location"),
        assignments=tuple((str(column), str(value)) for column, value in data.get("assignments") or ()),
        inserts=data.get("inserts", ""),
        evolves_schema=bool(data.get("evolves_schema", False)),
        engine=profile_from_json(data["engine"]) if data.get("engine") else None,
        sql=data.get("sql"),
        label=data.get("label"),
    )


def config_to_json(config: TableConfig) -> dict[str, Any]:
    return {
        "partition_columns": list(config.partition_columns),
        "properties": dict(config.properties),
        "clustering_columns": list(config.clustering_columns),
        "identity_columns": list(config.identity_columns),
        "exists": config.exists,
        "version": config.version,
        "min_reader_version": config.min_reader_version,
        "min_writer_version": config.min_writer_version,
        "reader_features": list(config.reader_features),
        "writer_features": list(config.writer_features),
        "unknown": list(config.unknown),
        "uri": config.uri,
        # Only when set: older stored texts stay valid (and read as none).
        **(
            {"generated_columns": [list(pair) for pair in config.generated_columns]}
            if config.generated_columns
            else {}
        ),
        **({"timestamp_columns": list(config.timestamp_columns)} if config.timestamp_columns else {}),
        # absent = types not read (older texts): every column may be a STRING
        **(
            {"column_types": [list(pair) for pair in config.column_types]}
            if config.column_types is not None
            else {}
        ),
    }


def config_from_json(data: dict[str, Any]) -> TableConfig:
    return TableConfig(
        partition_columns=tuple(data.get("partition_columns") or ()),
        properties=dict(data.get("properties") or {}),
        clustering_columns=tuple(data.get("clustering_columns") or ()),
        identity_columns=tuple(data.get("identity_columns") or ()),
        exists=bool(data.get("exists", True)),
        version=data.get("version"),
        min_reader_version=data.get("min_reader_version"),
        min_writer_version=data.get("min_writer_version"),
        reader_features=tuple(data.get("reader_features") or ()),
        writer_features=tuple(data.get("writer_features") or ()),
        unknown=tuple(data.get("unknown") or ()),
        uri=data.get("uri"),
        generated_columns=tuple((str(c), str(e)) for c, e in data.get("generated_columns") or ()),
        timestamp_columns=tuple(data.get("timestamp_columns") or ()),
        column_types=(
            tuple((str(c), str(t)) for c, t in data["column_types"])
            if data.get("column_types") is not None
            else None
        ),
    )


def profile_to_json(profile: EngineProfile) -> dict[str, Any]:
    return {
        "name": profile.name.value,
        "version": profile.version,
        "photon": profile.photon,
        "row_level_preview": profile.row_level_preview,
        **({"row_level_off": True} if profile.row_level_off else {}),
        **(
            {"commit_coordination": profile.commit_coordination}
            if profile.commit_coordination != STORAGE_COORDINATION
            else {}
        ),
        **({"session_time_zone": profile.session_time_zone} if profile.session_time_zone is not None else {}),
        **({"session_ansi": profile.session_ansi} if profile.session_ansi is not None else {}),
        **(
            {"session_default_parser": profile.session_default_parser}
            if profile.session_default_parser is not None
            else {}
        ),
        **(
            {"session_unknown_settings": list(profile.session_unknown_settings)}
            if profile.session_unknown_settings
            else {}
        ),
    }


def profile_from_json(data: dict[str, Any]) -> EngineProfile:
    return EngineProfile(
        name=EngineName(data["name"]),
        version=str(data["version"]),
        photon=bool(data.get("photon", False)),
        row_level_preview=bool(data.get("row_level_preview", False)),
        row_level_off=bool(data.get("row_level_off", False)),
        commit_coordination=str(data.get("commit_coordination", STORAGE_COORDINATION)),
        # absent in texts written before it: unknown, so zone-dependent literals separate nothing
        session_time_zone=data.get("session_time_zone"),
        # absent: unknown, so numeric text a lenient cast truncates separates nothing
        session_ansi=data.get("session_ansi") if isinstance(data.get("session_ansi"), bool) else None,
        # absent: unknown, so double-quoted literals and backslashes in literals separate nothing
        session_default_parser=(
            data.get("session_default_parser")
            if isinstance(data.get("session_default_parser"), bool)
            else None
        ),
        session_unknown_settings=tuple(str(x) for x in data.get("session_unknown_settings") or ()),
    )


# --- stored texts ---------------------------------------------------------------------------------------


def op_text(operation: Operation) -> str:
    """An operation's stored JSON text.

    Not cached by operation: operations that compare equal may still differ in fields the text keeps (the
    label and SQL are not compared).
    """
    return dumps(operation_to_json(operation))


def config_text(config: TableConfig | None) -> str | None:
    """A configuration's stored JSON text (not cached by value either: the URI is not compared)."""
    return dumps(config_to_json(config)) if config is not None else None


# Stored owners and operations are immutable values, decoded once per distinct text: a decision reads every
# holder on its tables, and the same few texts come back again and again.
@functools.lru_cache(maxsize=4096)
def owner_from_text(text: str) -> Owner:
    return Owner.from_json(json.loads(text))


@functools.lru_cache(maxsize=4096)
def op_from_text(text: str) -> Operation:
    return operation_from_json(json.loads(text))


def request_payload(request: LeaseRequest) -> str:
    """The request as its status row keeps it, so a waiting request can be decided again from the store."""
    data: dict[str, Any] = {
        "uris": list(request.uris),
        "claims": [
            {
                "uri": c.uri,
                "operation": operation_to_json(c.operation),
                "profile": profile_to_json(c.profile),
                "config": config_to_json(c.config) if c.config is not None else None,
                # only when pinned: older payload texts stay the same (ADR 0020)
                **({"read_version": c.read_version} if c.read_version is not None else {}),
            }
            for c in request.claims
        ],
        "owner": request.owner.to_json(),
        "ttl_s": request.ttl_s,
        "wait_ttl_s": request.wait_ttl_s,
        "priority": request.priority,
    }
    if request.expected_duration_s is not None:  # absent otherwise: older payload texts stay the same
        data["expected_duration_s"] = request.expected_duration_s
    return dumps(data)


@functools.lru_cache(maxsize=4096)
def payload_duration(text: str) -> float | None:
    """The duration estimate a stored request payload carries (``None``: none, or unreadable).

    A stored payload never changes, and a decision with an estimate reads those of every holder on its
    tables, so each text is decoded once.
    """
    try:
        value = json.loads(text).get("expected_duration_s")
        return float(value) if value is not None else None
    except (ValueError, TypeError, AttributeError):
        return None  # unknown is infinite: no backfilling past it, as without estimates


@functools.lru_cache(maxsize=4096)
def payload_read_versions(text: str) -> dict[str, int]:
    """The read version of each table a stored request payload pins (tables without one are absent).

    A decision that may use file statistics reads those of every lease on its tables (ADR 0020); an
    unreadable payload pins nothing, which only keeps the statistics out of the decision.
    """
    try:
        claims = json.loads(text).get("claims") or ()
        return {str(c["uri"]): int(c["read_version"]) for c in claims if c.get("read_version") is not None}
    except (ValueError, TypeError, AttributeError, KeyError):
        return {}


def request_from_payload(request_id: str, text: str) -> LeaseRequest:
    """The request :func:`request_payload` stored."""
    data = json.loads(text)
    claims = tuple(
        TableClaim(
            uri=c["uri"],
            operation=operation_from_json(c["operation"]),
            profile=profile_from_json(c["profile"]),
            config=config_from_json(c["config"]) if c.get("config") else None,
            read_version=int(c["read_version"]) if c.get("read_version") is not None else None,
        )
        for c in data["claims"]
    )
    return LeaseRequest(
        claims=claims,
        owner=Owner.from_json(data["owner"]),
        ttl_s=float(data["ttl_s"]),
        priority=int(data["priority"]),
        request_id=request_id,
        wait_ttl_s=float(data["wait_ttl_s"]),
        expected_duration_s=(
            float(data["expected_duration_s"]) if data.get("expected_duration_s") is not None else None
        ),
    )
