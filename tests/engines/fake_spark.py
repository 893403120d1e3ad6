"""A Spark session stand-in for the Spark engine's conf pinning: no JVM, only its runtime conf and SQL."""

from __future__ import annotations

from typing import Any


class FakeConf:
    """``spark.conf``: get, set and unset over a dict."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = dict(values)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def unset(self, key: str) -> None:
        self.values.pop(key, None)


class FakeSpark:
    """Records each statement with the value the ``watched`` setting had when it ran.

    :param watched: the conf key whose value each statement is recorded with.
    :param conf: the session's conf before anything runs.
    """

    def __init__(self, watched: str, **conf: str) -> None:
        self.conf = FakeConf(conf)
        self.watched = watched
        self.ran: list[tuple[str, str | None]] = []

    def sql(self, statement: str) -> Any:
        self.ran.append((statement, self.conf.values.get(self.watched)))
        return self

    def collect(self) -> list[Any]:
        return []
