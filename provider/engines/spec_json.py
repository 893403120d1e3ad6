"""Write specs and contexts as JSON, for processes that cannot share Python objects (spark-submit jobs).

A spec becomes ``{"kind": "merge", ...its fields...}``; the kind is the name its class carries
(``json_name``) and is looked up in the registry the classes fill themselves
(:data:`deltaguard.engines.specs.SPEC_TYPES`). Sources must be URI strings (Parquet/CSV/Delta
locations the job can read); in-memory data cannot cross a process boundary. Dates, datetimes and
decimals in partition values are tagged (``{"$date": "2024-01-01"}``) so they come back with their type,
which matters for the SQL literals rendered from them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from deltaguard.core.operations import Operation, OperationKind
from deltaguard.engines.errors import InvalidWriteError
from deltaguard.engines.specs import SPEC_TYPES, WriteContext, WriteSpec


def _encode(value: Any) -> Any:
    if isinstance(value, Operation):
        # A classified SQL statement: its conflict-model view travels with it.
        return {"$operation": {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, dt.datetime):
        return {"$datetime": value.isoformat()}
    if isinstance(value, dt.date):
        return {"$date": value.isoformat()}
    if isinstance(value, Decimal):
        return {"$decimal": str(value)}
    if isinstance(value, Mapping):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_encode(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise InvalidWriteError(f"cannot pass a {type(value).__name__} value to a separate process as JSON")


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1:
            ((tag, text),) = value.items()
            if tag == "$datetime":
                return dt.datetime.fromisoformat(text)
            if tag == "$date":
                return dt.date.fromisoformat(text)
            if tag == "$decimal":
                return Decimal(text)
            if tag == "$operation" and isinstance(text, dict):
                fields = {k: _decode(v) for k, v in text.items()}
                fields["kind"] = OperationKind(fields["kind"])
                fields["zorder_by"] = tuple(fields.get("zorder_by") or ())
                # JSON has no tuples: the write scope's (column, expression) pairs come back as lists
                fields["assignments"] = tuple(tuple(pair) for pair in fields.get("assignments") or ())
                return Operation(**fields)
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def spec_to_json(spec: WriteSpec) -> dict[str, Any]:
    """``{"kind": ..., fields...}`` for a spec whose source (if any) is a URI string.

    :raises InvalidWriteError: for an in-memory source or a value JSON cannot carry.
    """
    kind = getattr(type(spec), "json_name", None)
    if kind is None or SPEC_TYPES.get(kind) is not type(spec):
        # a subclass inherits its parent's name: it would come back as the parent
        raise InvalidWriteError(f"unknown spec type {type(spec).__name__}")
    source = getattr(spec, "source", None)
    if source is not None and not isinstance(source, str):
        raise InvalidWriteError(
            f"a {kind} run in a separate Spark job needs its source as a URI string, not {type(source).__name__}"
        )
    payload: dict[str, Any] = {"kind": kind}
    for f in dataclasses.fields(spec):
        payload[f.name] = _encode(getattr(spec, f.name))
    return payload


def spec_from_json(payload: Mapping[str, Any] | str) -> WriteSpec:
    """The spec :func:`spec_to_json` produced (also accepts the JSON text).

    :raises InvalidWriteError: for unknown kinds or fields, or malformed JSON.
    """
    data = _loads(payload, "spec")
    kind = data.get("kind")
    cls = SPEC_TYPES.get(str(kind))
    if cls is None:
        raise InvalidWriteError(f"unknown spec kind {kind!r}; expected one of {sorted(SPEC_TYPES)}")
    names = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(names) - {"kind"})
    if unknown:
        raise InvalidWriteError(f"unknown fields for {kind}: {unknown}")
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        if name == "kind":
            continue
        decoded = _decode(value)
        # Tuples in the dataclasses come back as lists from JSON.
        if isinstance(decoded, list):
            decoded = tuple(decoded)
        kwargs[name] = decoded
    try:
        spec: WriteSpec = cls(**kwargs)
    except TypeError as exc:
        raise InvalidWriteError(f"bad {kind} spec: {exc}") from exc
    return spec


def context_to_json(context: WriteContext) -> dict[str, Any]:
    return {
        "app_id": context.app_id,
        "app_version": context.app_version,
        "commit_metadata": dict(context.commit_metadata),
        "max_commit_retries": context.max_commit_retries,
    }


def context_from_json(payload: Mapping[str, Any] | str | None) -> WriteContext:
    """A :class:`WriteContext` from JSON (``None`` or ``{}`` gives the default context)."""
    if payload is None:
        return WriteContext()
    data = _loads(payload, "context")
    unknown = sorted(set(data) - {"app_id", "app_version", "commit_metadata", "max_commit_retries"})
    if unknown:
        raise InvalidWriteError(f"unknown context fields: {unknown}")
    version = data.get("app_version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise InvalidWriteError(f"app_version must be an integer, got {version!r}")
    metadata = data.get("commit_metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidWriteError("commit_metadata must be a JSON object")
    return WriteContext(
        app_id=data.get("app_id"),
        app_version=version,
        commit_metadata={str(k): str(v) for k, v in metadata.items()},
        max_commit_retries=data.get("max_commit_retries"),
    )


def _loads(payload: Mapping[str, Any] | str, what: str) -> dict[str, Any]:
    if isinstance(payload, str):
        try:
            payload = json.loads(payload)
        except json.JSONDecodeError as exc:
            raise InvalidWriteError(f"the {what} is not valid JSON: {exc}") from exc
    if not isinstance(payload, Mapping):
        raise InvalidWriteError(f"the {what} must be a JSON object")
    return dict(payload)
