"""A Spark Connect session waits for its server's first answer for a bounded time, then fails naming it.

pyspark's Connect client retries a refused connection for at least 10 minutes (``DefaultPolicy``) and waits
without end on a port where something other than a Connect server listens; in both cases a task used to sit
"running" with no log line. These run pyspark's real client (no JVM) against such ports.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from benchmarks.harness.ports import free_port
from deltaguard.engines.base import EngineSettings, build_engine
from deltaguard.engines.spark import session as connect
from deltaguard.exceptions import SparkSetupError

#: generous bound on a wait that should end after ``timeout_s``: a hang, not slowness, exceeds it
HANG_S = 300.0


def _outcome(call: Callable[[], Any]) -> BaseException | None:
    """What ``call()`` raised (``None``: it returned), failing the test if it is still running after
    :data:`HANG_S` seconds."""
    caught: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            caught.append(None)
        except BaseException as exc:  # handed to the test's thread
            caught.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_S)
    assert caught, f"still waiting for the server after {HANG_S:.0f} s"
    return caught[0]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port whose listener accepts connections and never says a word (not a Connect server)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", free_port()))
        server.listen()
        accepted: list[socket.socket] = []
        stop = threading.Event()

        def accept() -> None:
            server.settimeout(0.2)
            while not stop.is_set():
                try:
                    accepted.append(server.accept()[0])
                except OSError:
                    continue

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        yield server.getsockname()[1]
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()


def _remote(url: str) -> Any:
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    return RemoteSparkSession.builder.remote(url).create()


@pytest.mark.parametrize("listening", [True, False], ids=["silent-listener", "refused"])
def test_a_server_that_does_not_answer_fails_the_session_naming_it(listening: bool, silent_port: int) -> None:
    port = silent_port if listening else free_port()
    url = f"sc://127.0.0.1:{port}/;token=s3cret-token"
    remote = _remote(url)
    error = _outcome(lambda: connect.await_server(remote, url, "spark_connect_prod", 2.0))
    assert isinstance(error, SparkSetupError)
    message = str(error)
    assert f"sc://127.0.0.1:{port}" in message and "'spark_connect_prod'" in message
    assert "spark_connect_timeout" in message
    assert "s3cret" not in message  # the URL's parameters may hold a token
    assert remote.is_stopped  # no later getOrCreate() of the process returns it


def test_the_spark_engine_fails_its_setup_before_any_lease_when_connect_does_not_answer(
    silent_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    from benchmarks.harness.spark_connect import connection_env

    monkeypatch.setenv(*next(iter(connection_env(silent_port, "spark_connect_silent").items())))
    monkeypatch.setattr(RemoteSparkSession, "_default_session", None)
    # pyspark's builder.remote() marks the whole process as Connect-only (SPARK_CONNECT_MODE_ENABLED), which
    # would make a later test's classic session fail: set here so that the test's end removes it again
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "")
    monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED")
    engine = build_engine(
        "spark", EngineSettings(spark_connect_conn_id="spark_connect_silent", spark_connect_timeout_s=2.0)
    )
    error = _outcome(engine.check_setup)
    assert isinstance(error, SparkSetupError) and f"127.0.0.1:{silent_port}" in str(error)
    assert RemoteSparkSession._default_session is None


class _Session:
    """A Connect session whose first call takes ``delay`` seconds, then answers or raises ``error``."""

    def __init__(self, delay: float, error: BaseException | None = None) -> None:
        self.delay, self.error = delay, error
        self.closed = False
        self.release = threading.Event()

    @property
    def version(self) -> str:
        self.release.wait(self.delay)
        if self.error is not None:
            raise self.error
        return "4.2.0"

    def stop(self) -> None:
        self.closed = True


def test_an_answer_in_time_lets_the_session_through() -> None:
    session = _Session(0.2)
    assert _outcome(lambda: connect.await_server(session, "sc://h:1", "c", 60.0)) is None
    assert not session.closed


def test_an_error_answered_is_a_setup_error_carrying_it() -> None:
    cause = RuntimeError("UNAUTHENTICATED: bad token")
    error = _outcome(lambda: connect.await_server(_Session(0.0, cause), "sc://h:1", "c", 60.0))
    assert isinstance(error, SparkSetupError) and error.__cause__ is cause
    assert "UNAUTHENTICATED" in str(error)


def test_the_wait_warns_while_no_answer_has_come_and_closes_the_session_at_its_end(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(connect, "CONNECT_WAIT_WARNING_S", 0.05)
    # the wait's clock advances 0.3 s per reading whatever the machine's load: one warning, then the end
    readings = iter(0.3 * n for n in range(1000))
    monkeypatch.setattr(connect, "time", SimpleNamespace(monotonic=lambda: next(readings)))
    session = _Session(HANG_S)
    with caplog.at_level(logging.WARNING, logger=connect.__name__):
        error = _outcome(lambda: connect.await_server(session, "sc://h:1/;user_id=x", "c", 1.0))
    session.release.set()
    assert isinstance(error, SparkSetupError) and "within 1 s" in str(error)
    assert session.closed
    warnings = [r.getMessage() for r in caplog.records if "no answer yet" in r.getMessage()]
    assert len(warnings) == 1 and all("sc://h:1" in w and "user_id" not in w for w in warnings)


def test_the_configured_wait_reaches_the_spark_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    from deltaguard.hooks.delta import DeltaTableHook

    monkeypatch.setenv("AIRFLOW__DELTAGUARD__SPARK_CONNECT_TIMEOUT", "45")
    settings = DeltaTableHook(None).engine_settings(spark_connect_conn_id="spark_connect_default")
    assert settings.spark_connect_timeout_s == 45.0
    engine = build_engine("spark", settings)
    assert engine._connect_timeout_s == 45.0  # type: ignore[attr-defined]
    assert (
        DeltaTableHook(None).engine_settings().spark_connect_timeout_s is None
    )  # no Connect: nothing to wait for
    assert build_engine("spark", EngineSettings(spark_connect_conn_id="c"))._connect_timeout_s is None  # type: ignore[attr-defined]


def test_an_engine_built_outside_airflow_waits_as_long_as_the_option_defaults_to() -> None:
    # the option's default lives in the Airflow layer, the engine's below it: the two must not drift apart
    from deltaguard import config
    from deltaguard.engines.spark.session import DEFAULT_CONNECT_TIMEOUT_S

    assert float(config.OPTIONS["spark_connect_timeout"][1]) == DEFAULT_CONNECT_TIMEOUT_S
