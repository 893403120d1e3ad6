"""Each write task's story while a DAG run goes on, read from the lease store's decision log.

The demo polls the decision log of the lease store its Airflow uses and prints one plain line per new
entry of the run's tasks (no cursor movement, so a pipe or a log file gets the same lines):

* ``grant``: granted at once, or after waiting N s;
* ``wait``: waiting at queue position N behind the writes it conflicts with, and the model's first reason;
* ``release``: the version the task committed to the table (found by the ``airflow.task_id`` and
  ``airflow.run_id`` its commit recorded in ``commitInfo``, or in its ``userMetadata`` on delta-spark), or
  that it committed nothing;
* anything else (``expiry``, ``abandon``, ``refuse``): the entry's kind.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deltaguard.writes.table_uri import table_key


@dataclass
class StoryReader:
    """Turns new decision-log entries of one DAG's runs into lines, one poll at a time.

    :param store_url: the lease store's SQLAlchemy URL.
    :param dag_id: only this DAG's tasks are told.
    :param tables: table name -> URI, to name tables by their short name.
    :param origin: times are printed in seconds since this wall-clock time.
    """

    store_url: str
    dag_id: str
    tables: Mapping[str, str]
    origin: float = field(default_factory=time.time)
    _seen: set[tuple[float, str, str, str]] = field(default_factory=set)
    _store: Any = None

    def _open(self) -> Any:
        if self._store is None:
            if self.store_url.startswith("sqlite:///") and not Path(self.store_url[10:]).exists():
                return None  # no task has asked yet; the first one creates the store
            from deltaguard.leases.open import open_store

            self._store = open_store(self.store_url)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def table_name(self, uri: str) -> str:
        key = table_key(uri)
        return next((name for name, known in self.tables.items() if table_key(known) == key), uri)

    def poll(self) -> list[str]:
        """Lines for the entries logged since the last poll, oldest first."""
        store = self._open()
        if store is None:
            return []
        rows = store.decisions(since=self.origin - 1.0, limit=1000)
        lines = []
        for row in sorted(rows, key=lambda r: r.at):
            ident = (row.at, row.kind, row.request_id, row.uri)
            if ident in self._seen:
                continue
            owner = json.loads(row.owner_key) if row.owner_key.startswith("{") else {}
            if owner.get("dag_id") != self.dag_id:
                continue
            self._seen.add(ident)
            lines.append(self.line(row.at, row.kind, owner, row.uri, json.loads(row.detail or "{}")))
        return lines

    def line(
        self, at: float, kind: str, owner: Mapping[str, Any], uri: str, detail: Mapping[str, Any]
    ) -> str:
        """One entry as a line: ``[  12.3 s] task        table        what happened``."""
        task = str(owner.get("task_id", "?"))
        head = f"[{at - self.origin:6.1f} s] {task:<24} {self.table_name(uri):<11}"
        if kind == "grant":
            waited = float(detail.get("waited_s") or 0.0)
            return f"{head} granted {'at once' if waited <= 0 else f'after waiting {waited:.1f} s'}"
        if kind == "wait":
            blockers = ", ".join(
                f"{str(b.get('owner', '?')).split('.', 1)[-1]} ({_STATE.get(str(b.get('kind')), b.get('kind'))})"
                for b in detail.get("blockers", [])
            )
            reasons = detail.get("reasons") or []
            because = f" because {short_reason(str(reasons[0]))}" if reasons else ""
            return (
                f"{head} waiting at position {detail.get('position', '?')} behind {blockers or '?'}{because}"
            )
        if kind == "release":
            version = committed_version(uri, str(owner.get("run_id", "")), task)
            return f"{head} " + (
                f"committed version {version}, lease released"
                if version is not None
                else "lease released, nothing committed"
            )
        return f"{head} {kind}"


#: how a blocker's kind reads in a story line
_STATE = {"lease": "running", "waiting": "queued"}


def short_reason(reason: str, limit: int = 160) -> str:
    """The model's reason without the blockers' full descriptions (the line names them), cut to ``limit``."""
    rule = reason.rsplit("): ", 1)[-1]
    return rule if len(rule) <= limit else rule[: limit - 1].rstrip() + "…"


def committed_version(uri: str, run_id: str, task_id: str) -> int | None:
    """The newest table version whose commit names this task of this run, else ``None``."""
    from deltalake import DeltaTable

    try:
        history = DeltaTable(uri).history(limit=50)
    except Exception:  # the table may not exist (a failed create) or be mid-write; the story goes on
        return None
    for entry in history:  # newest first
        names = dict(entry)
        if "airflow.task_id" not in names and isinstance(entry.get("userMetadata"), str):
            # delta-spark records the task's commit metadata as one JSON document in userMetadata
            with contextlib.suppress(ValueError):
                names.update(json.loads(entry["userMetadata"]))
        if names.get("airflow.task_id") == task_id and names.get("airflow.run_id") == run_id:
            version = entry.get("version")
            return int(version) if version is not None else None
    return None


class StoryPrinter:
    """Polls a :class:`StoryReader` in a background thread and prints its lines as they come.

    :param reader: what to read.
    :param emit: where a line goes (``print`` with flush by default).
    :param interval: seconds between polls.
    """

    def __init__(
        self, reader: StoryReader, emit: Callable[[str], None] | None = None, interval: float = 0.5
    ) -> None:
        self.reader = reader
        self.emit = emit or (lambda line: print(line, flush=True))
        self.interval = interval
        self._stop = threading.Event()
        self._unreadable_told = False
        self._thread = threading.Thread(target=self._run, name="deltaguard-story", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._drain()
            self._stop.wait(self.interval)

    def _drain(self) -> None:
        try:
            lines = self.reader.poll()
        except Exception as exc:  # a store busy or mid-migration: say so once, try again next poll
            lines = [] if self._unreadable_told else [f"(decision log not readable yet: {exc})"]
            self._unreadable_told = True
        for line in lines:
            self.emit(line)

    def __enter__(self) -> StoryPrinter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._drain()  # what was logged after the last poll
        self.reader.close()
