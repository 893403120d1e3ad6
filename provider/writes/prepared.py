r"""A write task's write, prepared once: who writes (its app transaction), what is prepared, what it reports.

No Airflow import, so the rules are tested without a scheduler.

A write operator resolves its table, reads the table's configuration (and, with file statistics, the
snapshot they are of), builds the write's scope and validates it once. The result is a
:class:`PreparedWrite`: a frozen value that serialises into the resume arguments of a deferral
(:meth:`PreparedWrite.to_kwargs`), so a try resumed by the triggerer asks for the same lease and writes the
same scope without reading the table or validating the write again. The engine is handed the version the
write was validated at (``WriteContext.validated_version``) and checks the spec again only when it commits
from a table that has moved on since. Two parts of a configuration do not travel
(:func:`deltaguard.leases.codec.config_to_json` keeps neither): the per-file statistics and the engine's
evaluator of partition predicates; the caller attaches an evaluator again
(:func:`deltaguard.engines.sources.attach_oracle`) before the value is judged.

The app transaction (ADR 0018, "App transactions per task instance and run"): Delta skips a write whose
``(appId, version)`` is not newer than the version the table records for that app id. deltaguard writes with
``appId = dag_id/task_id[/map_index]@run_id``, each part escaped so that it names exactly one task
instance (:func:`app_id`; longer than :data:`MAX_APP_ID` characters it ends in ``#`` and the SHA-256 of the
whole), and ``version = max_tries - retries`` of the task instance: the try number at which this task
instance was last cleared. Retries of one task instance share ``(appId, version)``, so a retry after a write
that committed is a no-op; clearing the task instance raises the version, so an explicit re-run writes
again; clearing a sibling changes nothing.

What the task reports: :func:`decision_line` (the one line the task log shows about admission) and
:func:`task_result` (the XCom return value).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from deltaguard.core.merge_scope import MergeScope
from deltaguard.core.operations import Operation
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.base import WriteResult
from deltaguard.leases import codec
from deltaguard.writes.table_uri import table_key

__all__ = ["PreparedWrite"]


#: The longest app id written as is; longer ones are shortened (prefix, ``#``, SHA-256 of the whole).
#: Neither engine showed a length limit (measured: delta-rs 1.6.6 records and reads back a 100,004-character
#: app id holding ``é%/@#``; delta-spark 4.4.0 records a 10,004-character one through ``txnAppId`` and skips
#: the repeated pair); the limit keeps the ``txn`` actions that every checkpoint repeats small.
MAX_APP_ID = 200

#: the characters an app id part escapes: the escape itself, the two separators and the hash marker
_ESCAPES = {"%": "%25", "/": "%2F", "@": "%40", "#": "%23"}
_ESCAPE_TABLE = str.maketrans(_ESCAPES)


def app_id(dag_id: str, task_id: str, map_index: int | None = None, run_id: str | None = None) -> str:
    """``dag_id/task_id[/map_index][@run_id]``, parts escaped; beyond :data:`MAX_APP_ID`, prefix + hash.

    :param map_index: a mapped task instance's index (``>= 0``); ``None`` or ``-1`` for an unmapped task.
    :param run_id: the DAG run; without it (a write outside a run) the app id is per task only.
    """
    base = f"{dag_id.translate(_ESCAPE_TABLE)}/{task_id.translate(_ESCAPE_TABLE)}"
    if map_index is not None and map_index >= 0:
        base = f"{base}/{int(map_index)}"
    if run_id is not None:
        base = f"{base}@{run_id.translate(_ESCAPE_TABLE)}"
    if len(base) <= MAX_APP_ID:
        return base
    digest = hashlib.sha256(base.encode()).hexdigest()
    return f"{base[: MAX_APP_ID - len(digest) - 1]}#{digest}"


def task_app_id(dag_id: str, task_id: str, context: Mapping[str, Any]) -> str:
    """:func:`app_id` of the task instance a task context describes.

    A mapped task instance writes under its own app id, so its siblings are not "duplicates".

    :param context: the task context (``ti``, ``dag_run`` or ``run_id``).
    """
    ti = context.get("ti")
    dag_run = context.get("dag_run")
    map_index = getattr(ti, "map_index", None)
    run_id = getattr(dag_run, "run_id", None) or getattr(ti, "run_id", None) or context.get("run_id")
    return app_id(
        dag_id, task_id, map_index if isinstance(map_index, int) else None, str(run_id) if run_id else None
    )


def app_version(max_tries: int | None, retries: int | None) -> int:
    """The app-transaction version of a task instance: the try number at its last clear (``0``: never).

    ``max_tries - retries``, ``0`` when either is unknown (a task run outside a scheduler). A negative
    difference (``retries`` raised in the DAG file after the task instance was created) counts as never
    cleared.

    :param max_tries: the task instance's ``max_tries`` (``ti.max_tries`` in the task context).
    :param retries: the task's ``retries``.
    :raises ValueError: for a value that is not an integer.
    """
    if max_tries is None or retries is None:
        return 0
    for name, value in (("max_tries", max_tries), ("retries", retries)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"a task instance's {name} must be an integer, got {value!r}")
    return max(0, max_tries - retries)


def task_app_version(context: Mapping[str, Any], retries: int | None) -> int:
    """:func:`app_version` of the task instance a task context describes (its ``ti.max_tries``).

    :param context: the task context.
    :param retries: the task's ``retries`` (the operator's own attribute).
    """
    max_tries = getattr(context.get("ti"), "max_tries", None)
    return app_version(max_tries if isinstance(max_tries, int) else None, retries)


def commit_metadata(
    *,
    dag_id: str,
    run_id: str,
    task_id: str,
    try_number: int | None,
    map_index: int | None = None,
    lease_id: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The key/values recorded in the Delta commit (``commitInfo``), all strings.

    Keys are prefixed ``airflow.`` (the ``deltaguard.`` prefix is reserved for the engines' own keys, such
    as ``deltaguard.app_id``); the lease id is recorded as ``lease_id``.
    """
    meta = {
        "airflow.dag_id": dag_id,
        "airflow.run_id": run_id,
        "airflow.task_id": task_id,
        "airflow.try_number": "" if try_number is None else str(try_number),
    }
    if map_index is not None and map_index >= 0:
        meta["airflow.map_index"] = str(map_index)
    if lease_id:
        meta["lease_id"] = lease_id
    for key, value in (extra or {}).items():
        meta[str(key)] = str(value)
    return meta


# ---------------------------------------------------------------------------------------- what a task reports


def decision_line(waited_s: float, behind: Sequence[str], explanation: str | None = None) -> str:
    """The admission decision in one line for the task log.

    :param waited_s: seconds spent waiting for the lease.
    :param behind: the tasks it waited for (owner descriptions), in the order first seen.
    :param explanation: the conflict model's explanation from the first wait (reason and advice).
    """
    if not behind and waited_s < 1:
        return "deltaguard: lease granted at once (no conflicting write was running or queued)"
    who = ", ".join(dict.fromkeys(behind)) or "other writers"
    line = f"deltaguard: waited {waited_s:.0f} s behind {who}"
    if explanation:
        line += f" ({explanation})"
    return line


def task_result(
    result: WriteResult,
    *,
    waited_s: float,
    behind: Sequence[str],
    lease_id: str | None,
    app_id: str | None,
    app_version: int | None,
    decision: str,
) -> dict[str, Any]:
    """The operator's XCom return value (JSON-serialisable)."""
    out: dict[str, Any] = dict(result.to_json())
    out.update(
        {
            "waited_s": round(waited_s, 3),
            "waited_behind": list(dict.fromkeys(behind)),
            "lease_id": lease_id,
            "app_id": app_id,
            "app_version": app_version,
            "decision": decision,
        }
    )
    return out


# ----------------------------------------------------------------------------------------- the prepared write


#: the layout of :meth:`PreparedWrite.to_kwargs`; a resumed try given another prepares anew
_FORMAT = 1


@dataclasses.dataclass(frozen=True)
class PreparedWrite:
    """One write as resolved and validated before its lease is asked for.

    :param uri: the table URI.
    :param operation: what the conflict model is told the write does (its scope), labelled with the task's
        app id.
    :param profile: the committing engine's profile.
    :param table_config: the table's configuration the write was validated against; its ``version`` is the
        one the engine may trust the write at.
    :param read_version: the version the write pins with file statistics (ADR 0020); ``None``: not pinned.
    :param source_scope: the scope the spec carries (a MERGE or REPLACE WHERE narrowed by its source),
        turned into JSON only when the value is carried through a deferral (:meth:`to_kwargs`); ``None``:
        none.
    """

    uri: str
    operation: Operation
    profile: EngineProfile
    table_config: TableConfig
    read_version: int | None = None
    source_scope: MergeScope | None = None

    @functools.cached_property
    def key(self) -> str:
        """The table's lease key, resolved once: the lease is asked for and the snapshot pinned under one key
        (:func:`~deltaguard.writes.table_uri.table_key` reads the filesystem for a local table)."""
        return table_key(self.uri)

    def to_kwargs(self) -> dict[str, Any]:
        """The value as JSON-serialisable resume arguments (statistics and evaluator left out)."""
        return {
            "format": _FORMAT,
            "uri": self.uri,
            "operation": codec.operation_to_json(self.operation),
            "profile": codec.profile_to_json(self.profile),
            "table_config": codec.config_to_json(self.table_config),
            "read_version": self.read_version,
            "source_scope": None if self.source_scope is None else self.source_scope.to_json(),
        }

    @classmethod
    def from_kwargs(cls, data: Mapping[str, Any]) -> PreparedWrite:
        """The value :meth:`to_kwargs` wrote.

        :raises ValueError: ``data`` is not such a value (another layout, a missing or malformed field).
        """
        if not isinstance(data, Mapping) or data.get("format") != _FORMAT:
            raise ValueError(f"not a prepared write of format {_FORMAT}")
        try:
            read_version = data.get("read_version")
            scope = data.get("source_scope")
            return cls(
                uri=str(data["uri"]),
                operation=codec.operation_from_json(dict(data["operation"])),
                profile=codec.profile_from_json(dict(data["profile"])),
                table_config=codec.config_from_json(dict(data["table_config"])),
                read_version=None if read_version is None else int(read_version),
                source_scope=None if scope is None else MergeScope.from_json(scope),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed prepared write: {exc!r}") from exc
