"""A seeded schedule of faults injected into the running stack while DAG runs are in flight.

The schedule does not depend on the machine's speed: every fault kind is planned ``repeats`` times, each at a
point of the run itself, "once the lease store's decision log holds its Nth grant" (N drawn from the seed,
:func:`plan_faults`), never at a wall-clock offset. Past its point a fault waits for the moment it is meant
for (a task running, a task deferred, a PySpark MERGE holding its lease, a writer queued behind a holder)
and tries again, window after window, until it fired or the run stops the injector; the run keeps DAG
runs coming until every planned fault fired (``benchmarks/cluster/run.py``). What was planned, what fired,
when and to which process is recorded for the results file and the audit.
"""

from __future__ import annotations

import json
import random
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from benchmarks.cluster.stack import ClusterStack

#: every fault kind, cheap ones first
KINDS: tuple[str, ...] = (
    "kill_celery_worker",  # SIGKILL a Celery worker (and its task processes) mid-write, then restart it
    "restart_triggerer",  # SIGKILL a triggerer while tasks are deferred, then restart it
    "restart_scheduler",  # SIGTERM the scheduler and start it again
    "restart_lease_store",  # stop the lease store's PostgreSQL (fast shutdown) and start it again
    "kill_spark_connect",  # SIGKILL the Spark Connect server during a Spark MERGE, then restart it
    # SIGSTOP a Celery worker for longer than the lease TTL, then SIGCONT; with Spark in the run, the worker
    # running a PySpark MERGE over Spark Connect (the Connect fence's case, ADR 0033)
    "stop_worker_past_lease",
    # SIGSTOP the lease store's PostgreSQL (every backend) while a writer waits in the queue behind a holder,
    # so the holder's release and the waiter's grant (the hand-off) meet a frozen store; then SIGCONT
    "freeze_lease_store",
)
CHEAP_KINDS: tuple[str, ...] = ("kill_celery_worker", "restart_triggerer")


def _writing(activity: dict[str, str], state: str = "running") -> bool:
    """Whether some write task (not the shared setup) is in ``state``."""
    return any(v == state and not k.startswith("setup_tables") for k, v in activity.items())


@dataclass
class FaultRecord:
    kind: str
    target: str
    at: float  # wall-clock seconds (time.time())
    down_s: float
    note: str = ""


@dataclass(frozen=True)
class PlannedFault:
    """One fault of the schedule: its kind, which of that kind's repeats it is, and its point in the run."""

    kind: str
    occurrence: int  # 0 for a kind's first fault, 1 for its second, ...
    after_grants: int  # injected once the lease store's decision log holds this many grants


def plan_faults(kinds: Sequence[str], seed: int, repeats: int = 2) -> list[PlannedFault]:
    """Every kind ``repeats`` times, in a seeded order, each at a seeded grant count (increasing).

    The first fault waits for 2-5 grants (the first writes have their leases), each next one for 2-6 more:
    points of the run, the same whatever the machine's speed.
    """
    rng = random.Random(seed)
    order = [(kind, i) for i in range(repeats) for kind in kinds]
    rng.shuffle(order)
    # a kind's repeats keep their numbering in the order they come
    seen: dict[str, int] = {}
    planned: list[PlannedFault] = []
    grants = rng.randint(2, 5)
    for kind, _ in order:
        planned.append(PlannedFault(kind, seen.get(kind, 0), grants))
        seen[kind] = seen.get(kind, 0) + 1
        grants += rng.randint(2, 6)
    return planned


@dataclass
class FaultInjector:
    """Run the planned faults (:func:`plan_faults`), one at a time, in a background thread.

    :param stack: the running stack.
    :param kinds: the fault kinds to inject (each ``repeats`` times).
    :param seed: random seed: order, points, targets and pauses.
    :param activity: returns the live task-instance states (``{task_id@run: state}``) of the runs.
    :param window_s: longest wait for a fault's moment before it looks again (it is never skipped: only
        :meth:`stop` ends the wait, and the fault then counts as planned but not fired).
    :param repeats: faults of each kind.
    """

    stack: ClusterStack
    kinds: Sequence[str]
    seed: int
    activity: Callable[[], dict[str, str]]
    window_s: float = 240.0
    records: list[FaultRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    #: runs the faults trigger (``(dag_id, run_id, business date)``), appended to; the run passes its own list
    triggered: list[tuple[str, str, str]] = field(default_factory=list)
    #: ``(run_id, task_id)`` of the PySpark MERGE the freeze froze while it held its lease, if it found one
    #: (the last one)
    frozen_holder: tuple[str, str] | None = None
    #: every PySpark MERGE a freeze froze holding its lease, in order: the audit checks the fence of each
    frozen_holders: list[tuple[str, str]] = field(default_factory=list)
    #: the lease store's engine for :meth:`_holds_lease`, opened on first use and disposed by :meth:`stop`
    _engine: Any = None
    repeats: int = 2
    #: the schedule (set at construction from ``kinds``, ``seed`` and ``repeats``)
    planned: list[PlannedFault] = field(default_factory=list)
    #: which of its kind's repeats the fault being injected is
    _occurrence: int = 0

    def __post_init__(self) -> None:
        self.planned = plan_faults(self.kinds, self.seed, self.repeats)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="faults", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 300.0) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout)
        if self._engine is not None and self.done():
            self._engine.dispose()
            self._engine = None

    def done(self) -> bool:
        return self._thread is None or not self._thread.is_alive()

    def finished(self, kind: str) -> bool:
        """Whether the fault ``kind`` was injected, skipped or failed (or the injector ended)."""
        return (
            any(r.kind == kind for r in self.records)
            or kind in self.skipped
            or any(e.startswith(f"{kind}:") for e in self.errors)
            or (self._thread is not None and not self._thread.is_alive())
        )

    def all_fired(self) -> bool:
        """Whether every planned fault was injected (a figure is valid only then)."""
        return len(self.records) >= len(self.planned) and self.done()

    def _grants(self) -> int:
        """Grants in the lease store's decision log so far."""
        import sqlalchemy as sa

        with self._store_engine().connect() as connection:
            return int(
                connection.execute(
                    sa.text("SELECT count(*) FROM dg_decisions WHERE kind = 'grant'")
                ).scalar_one()
            )

    def _run(self) -> None:
        rng = random.Random(self.seed + 1)
        for i, fault in enumerate(self.planned):
            # the fault's point: its Nth grant (a store being restarted answers later)
            while not self._stop.is_set():
                try:
                    if self._grants() >= fault.after_grants:
                        break
                except Exception:
                    pass
                self._stop.wait(2.0)
            self._occurrence = fault.occurrence
            fired = False
            while not fired and not self._stop.is_set():
                try:
                    fired = bool(getattr(self, f"_{fault.kind}")(rng))
                except Exception as exc:
                    self.errors.append(f"{fault.kind}: {type(exc).__name__}: {exc}")
                    self._stop.wait(5.0)
            if not fired:
                self.skipped += [f.kind for f in self.planned[i:]]
                return

    def _wait_for(self, wanted: Callable[[dict[str, str]], bool], window_s: float | None = None) -> bool:
        deadline = time.monotonic() + (self.window_s if window_s is None else window_s)
        while time.monotonic() < deadline and not self._stop.is_set():
            try:
                if wanted(self.activity()):
                    return True
            except Exception:
                pass
            self._stop.wait(1.0)
        return False

    def _record(self, kind: str, target: str, at: float, down: float, note: str = "") -> None:
        self.records.append(FaultRecord(kind, target, at, down, note))

    # -- the faults -------------------------------------------------------------------------------

    def _kill_celery_worker(self, rng: random.Random) -> bool:
        """SIGKILL a Celery worker mid-write; with Spark, the first of them the worker whose task runs a
        PySpark MERGE holding its lease (the Connect session's work outlives its client)."""
        note = ""
        if self._occurrence == 0 and "spark-connect" in self.stack.services:
            found: list[tuple[str, str, str]] = []
            if not self._wait_for(lambda a: self._spark_merge_on_a_worker(a, found)):
                return False
            target, note = found[-1][0], f"during PySpark MERGE {found[-1][1]} (lease {found[-1][2]}); "
        else:
            if not self._wait_for(_writing):
                return False
            time.sleep(rng.uniform(1.0, 4.0))  # into the write
            target = self._busiest_worker(rng)
        at = time.time()
        # the machine is lost: the worker and every task process it started (they have groups of their own)
        service = self.stack.services[target]
        _tree_signal(service.pid, signal.SIGKILL)
        service.kill()
        time.sleep(3.0)
        self.stack.services[target].start()
        self._record("kill_celery_worker", target, at, time.time() - at, note + self._running_note())
        return True

    def _restart_triggerer(self, rng: random.Random) -> bool:
        if not self._wait_for(lambda a: "deferred" in a.values()):
            return False
        target = f"triggerer-{rng.randint(1, self.stack.triggerers)}"
        at = time.time()
        self.stack.services[target].kill()
        time.sleep(rng.uniform(2.0, 6.0))
        self.stack.services[target].start()
        self._record("restart_triggerer", target, at, time.time() - at, self._running_note("deferred"))
        return True

    def _restart_scheduler(self, rng: random.Random) -> bool:
        if not self._wait_for(lambda a: _writing(a) or _writing(a, "deferred")):
            return False
        at = time.time()
        down = self.stack.restart("scheduler")
        self._record("restart_scheduler", "scheduler", at, down)
        return True

    def _restart_lease_store(self, rng: random.Random) -> bool:
        if not self._wait_for(lambda a: _writing(a) or _writing(a, "deferred")):
            return False
        at = time.time()
        service = self.stack.services["pg-leases"]
        service.stop()
        time.sleep(rng.uniform(2.0, 6.0))
        service.start()
        service.wait_ready(120)
        self._record("restart_lease_store", "pg-leases", at, time.time() - at)
        return True

    def _kill_spark_connect(self, rng: random.Random) -> bool:
        if "spark-connect" not in self.stack.services:
            return False
        if not self._wait_for(
            lambda a: any(
                k.startswith("merge_sales") and "pyspark" in k and v == "running" for k, v in a.items()
            )
        ):
            return False
        time.sleep(rng.uniform(1.0, 3.0))
        at = time.time()
        down = self.stack.restart("spark-connect", kill=True)
        self._record("kill_spark_connect", "spark-connect", at, down, self._running_note())
        return True

    def _stop_worker_past_lease(self, rng: random.Random) -> bool:
        """Freeze a Celery worker and its task processes past its lease; with Spark, bring a conflicting writer.

        The rule, decided before the run: with Spark in the stack the fault waits (up to ``window_s``) for a
        running PySpark ``merge_sales_*`` task that holds its lease, and freezes the Celery worker whose
        process tree runs it, so the frozen holder loses its lease while its write is under way: its
        remaining Connect operations must not commit, and its expired lease can be handed over only through
        the Connect fence. (Freezing a task before its grant only delays it: measured, the first run with
        "running" alone froze one before its lease was granted.) Once it found that MERGE it triggers the
        conflicting writer (``benchmarks/cluster/dags/pyspark_optimize_sales.py``: a whole-table OPTIMIZE of
        that table, routed to the other worker) and freezes the holder's worker only when the writer's
        request is queued in the store while the holder still holds its lease; the freeze then lasts until
        the store logged a fence decision on the frozen lease (:func:`freeze_over`), so the hand-over
        happens while the holder is still frozen, as it would for a machine that is gone. A MERGE that
        ends before a writer waits behind it is not frozen: the next running one is tried (three in all), and
        only then the busiest worker is frozen (the audit checks the fence of every holder frozen).
        Without Spark, or when no such MERGE is found in the window, it freezes the busiest worker during any
        write for ``lease_ttl + 10`` s (the note says which case it was).
        """
        target, note = None, "any write"
        found: list[tuple[str, str, str]] = []
        writer = ""
        if "spark-connect" in self.stack.services:

            def spark_merge_on_a_worker(activity: dict[str, str]) -> bool:
                return self._spark_merge_on_a_worker(activity, found)

            # a longer window than other faults': measured (2026-11-28, load 20-25), the PySpark run's first
            # MERGE was granted 5 minutes after the faults started, after the 240 s window had ended
            writers: list[str] = []
            ended: list[str] = []
            # A MERGE may end before the writer waits behind it (measured 2026-12-06: the second freeze of a
            # run fell back to "any write" so); then the next running MERGE is tried, up to three
            for _ in range(3):
                if not self._wait_for(spark_merge_on_a_worker, window_s=3 * self.window_s):
                    break
                # the conflicting writer first, on the other worker; the freeze only once it waits behind
                # the holder: measured (2026-11-28, load 20), the writer triggered at the freeze took 7
                # minutes to reach a free slot of its worker, and the capped freeze had ended long before
                # it asked. A writer brought for an earlier MERGE that still waits is kept.
                # (only one on another worker than the holder's: that worker is the one to freeze)
                worker = found[-1][0].rsplit("-", 1)[-1]
                usable = [
                    w
                    for w in writers
                    if not w.split("@", 1)[0].endswith(worker) and self._writer_queued(w.split("@", 1)[1])
                ]
                if not usable:
                    writers.append(self._bring_conflicting_writer(found[-1][0]))
                    usable = [writers[-1]]
                holder_task, _, holder_run = found[-1][1].split("@", 2)
                lease_id = found[-1][2]
                if (
                    self._wait_for(
                        lambda _, lease_id=lease_id, task=holder_task, run=holder_run, usable=usable: (
                            any(self._writer_blocked_by(w.split("@", 1)[1], lease_id) for w in usable)
                            or self._held_lease(task, run) != lease_id
                        ),
                        # the holder's end also ends this wait: the writer may need minutes to reach a slot
                        window_s=3 * self.window_s,
                    )
                    and self._held_lease(holder_task, holder_run) == lease_id
                ):
                    target, note = found[-1][0], f"PySpark MERGE {found[-1][1]}"
                    writer = next(
                        (w for w in usable if self._writer_blocked_by(w.split("@", 1)[1], lease_id)),
                        usable[-1],
                    )
                    break
                ended.append(found[-1][1])
            if target is None:
                note = (
                    f"any write (the PySpark MERGEs {', '.join(ended)} ended before a writer waited behind them)"
                    if ended
                    else "any write (no PySpark MERGE found on a worker in the window)"
                )
        if target is None:
            found.clear()
            if not self._wait_for(_writing):
                return False
            target = self._busiest_worker(rng)
        service = self.stack.services[target]
        at = time.time()
        service.signal(signal.SIGSTOP)
        # task processes live in their own groups: stop every process of that worker's tree
        stopped = _tree_signal(service.pid, signal.SIGSTOP)
        # only now the note (an API call): taken before the stop, it let the holder run on for 0.5-2.6 s and
        # release its lease before it was frozen (measured 2026-12-06, both freezes of a run at load 6)
        running = self._running_note()
        lease_id = None
        if found:
            task_id, _, run_id = found[-1][1].split("@", 2)
            lease_id = found[-1][2]
            self.frozen_holder = (run_id, task_id)
            self.frozen_holders.append((run_id, task_id))
        began = time.monotonic()
        fenced = False
        while not freeze_over(time.monotonic() - began, self.stack.lease_ttl, lease_id is not None, fenced):
            time.sleep(2.0)
            if lease_id is not None and not fenced:
                try:
                    fenced = self._fence_decided(lease_id)
                except Exception:  # the store may be restarting (another fault): ask again
                    fenced = False
        _tree_signal(service.pid, signal.SIGCONT, stopped)
        service.signal(signal.SIGCONT)
        self._record(
            "stop_worker_past_lease",
            target,
            at,
            time.time() - at,
            f"froze {note}; {len(stopped)} processes; running then: {running}"
            + (f"; conflicting writer {writer}" if writer else "")
            + (f"; fence decided during the freeze: {fenced}" if lease_id else ""),
        )
        return True

    def _freeze_lease_store(self, rng: random.Random) -> bool:
        """SIGSTOP the lease store's PostgreSQL while a writer waits behind a live holder of its table, so
        the hand-off (the holder's release, the waiter's grant) meets a frozen store; SIGCONT after 3-8 s
        (seeded), well inside the lease TTL: store calls time out and fail closed, no lease may expire."""
        waiting: list[str] = []
        if not self._wait_for(lambda _: self._handoff_pending(waiting)):
            return False
        service = self.stack.services["pg-leases"]
        at = time.time()
        service.signal(signal.SIGSTOP)
        stopped = _tree_signal(service.pid, signal.SIGSTOP)
        time.sleep(rng.uniform(3.0, 8.0))
        _tree_signal(service.pid, signal.SIGCONT, stopped)
        service.signal(signal.SIGCONT)
        self._record(
            "freeze_lease_store",
            "pg-leases",
            at,
            time.time() - at,
            f"{len(stopped)} processes; queued behind a holder: {', '.join(waiting)}",
        )
        return True

    def _handoff_pending(self, waiting: list[str]) -> bool:
        """Whether a live request waits in ``dg_queue`` on a table a live lease holds (its tables listed)."""
        import sqlalchemy as sa

        with self._store_engine().connect() as connection:
            rows = connection.execute(
                sa.text(
                    "SELECT DISTINCT q.uri FROM dg_queue q JOIN dg_leases l ON l.uri = q.uri "
                    "WHERE q.expires_at > :now AND l.expires_at > :now"
                ),
                {"now": time.time()},
            ).all()
        waiting[:] = [str(r[0]) for r in rows]
        return bool(rows)

    def _spark_merge_on_a_worker(self, activity: dict[str, str], found: list[tuple[str, str, str]]) -> bool:
        """Whether a PySpark ``merge_sales_*`` task runs holding its lease on a Celery worker; appends
        ``(worker, task key, lease id)`` to ``found`` when one does."""
        for key, state in activity.items():
            task_id, variant, run_id = key.split("@", 2)
            if state != "running" or variant != "pyspark" or not task_id.startswith("merge_sales_"):
                continue
            lease_id = self._held_lease(task_id, run_id)
            if lease_id is not None:
                worker = self._worker_running(task_id, run_id)
                if worker is not None:
                    found.append((worker, key, lease_id))
                    return True
        return False

    def _bring_conflicting_writer(self, frozen: str) -> str:
        """Trigger the whole-table OPTIMIZE on a Celery worker other than ``frozen``; return ``dag@run``."""
        from benchmarks.cluster.run import CONFLICTING_WRITER_PREFIX, FIRST_DAY

        others = [i for i in range(1, self.stack.celery_workers + 1) if f"celery-worker-{i}" != frozen]
        assert self.stack.airflow is not None and others
        dag_id = f"{CONFLICTING_WRITER_PREFIX}{others[0]}"
        run_id = self.stack.airflow.api().trigger(dag_id, {"date": FIRST_DAY})
        self.triggered.append((dag_id, run_id, FIRST_DAY))
        return f"{dag_id}@{run_id}"

    def _writer_queued(self, run_id: str = "") -> bool:
        """Whether the conflicting writer's request waits in the lease store's queue (``dg_queue``).

        :param run_id: that writer's run: a writer brought for an earlier freeze, whose task died with a
            killed worker, may still have a live queue entry, and it is not the one this freeze waits for.
        """
        import sqlalchemy as sa

        from benchmarks.cluster.run import CONFLICTING_WRITER_PREFIX

        with self._store_engine().connect() as connection:
            return (
                connection.execute(
                    sa.text(
                        "SELECT count(*) FROM dg_queue WHERE owner_key LIKE :p AND owner_key LIKE :r "
                        "AND expires_at > :now"
                    ),
                    {"p": f"%{CONFLICTING_WRITER_PREFIX}%", "r": f"%{run_id}%", "now": time.time()},
                ).scalar_one()
                > 0
            )

    def _writer_blocked_by(self, run_id: str, lease_id: str) -> bool:
        """Whether the conflicting writer of ``run_id`` waits in the store with ``lease_id`` among the blockers
        of its last wait answer (``dg_requests.last_wait``): only then does its next decision meet the frozen
        lease and fence it. Being queued is not enough: measured, a writer queued behind another holder of the
        table (an earlier freeze's writer, a lease awaiting its fence) never asked for the frozen lease."""
        import sqlalchemy as sa

        from benchmarks.cluster.run import CONFLICTING_WRITER_PREFIX

        with self._store_engine().connect() as connection:
            rows = connection.execute(
                sa.text(
                    "SELECT last_wait FROM dg_requests WHERE status = 'waiting' AND owner_key LIKE :p "
                    "AND owner_key LIKE :r AND expires_at > :now"
                ),
                {"p": f"%{CONFLICTING_WRITER_PREFIX}%", "r": f"%{run_id}%", "now": time.time()},
            ).all()
        for (last_wait,) in rows:
            try:
                blockers = json.loads(last_wait or "{}").get("blockers") or []
            except (ValueError, AttributeError):
                continue
            # a blocker is ``[table, id, owner, kind, operation]`` (``deltaguard.leases.wait_texts``)
            if any(isinstance(b, list) and len(b) > 1 and b[1] == lease_id for b in blockers):
                return True
        return False

    def _fence_decided(self, lease_id: str) -> bool:
        """Whether the decision log holds a fence decision (``remote_fenced``/``remote_unfenced``) on ``lease_id``."""
        import sqlalchemy as sa

        with self._store_engine().connect() as connection:
            return (
                connection.execute(
                    sa.text(
                        "SELECT count(*) FROM dg_decisions WHERE request_id = :l "
                        "AND kind IN ('remote_fenced', 'remote_unfenced', 'remote_interrupted')"
                    ),
                    {"l": lease_id},
                ).scalar_one()
                > 0
            )

    def _store_engine(self) -> Any:
        import sqlalchemy as sa

        # one engine for the whole fault, not one per one-second poll; pre-ping: the lease store's server
        # may have been restarted by another fault since the last poll
        if self._engine is None:
            self._engine = sa.create_engine(self.stack.lease_store_url, pool_pre_ping=True)
        return self._engine

    def _holds_lease(self, task_id: str, run_id: str) -> bool:
        """Whether ``task_id`` of ``run_id`` holds a live lease (read from the lease store's ``dg_leases``)."""
        return self._held_lease(task_id, run_id) is not None

    def _held_lease(self, task_id: str, run_id: str) -> str | None:
        """The live lease ``task_id`` of ``run_id`` holds (from the lease store's ``dg_leases``), or ``None``."""
        import json

        import sqlalchemy as sa

        with self._store_engine().connect() as connection:
            rows = connection.execute(
                sa.text("SELECT lease_id, owner_key FROM dg_leases WHERE expires_at > :now"),
                {"now": time.time()},
            )
            for lease_id, owner in rows:
                key = json.loads(owner)
                if key.get("task_id") == task_id and key.get("run_id") == run_id:
                    return str(lease_id)
        return None

    def _worker_running(self, task_id: str, run_id: str) -> str | None:
        """The Celery worker whose process tree runs ``task_id`` of ``run_id`` (of the PySpark DAG).

        Airflow's task runner titles its process ``airflow worker -- <task instance id>`` (the Task SDK's
        ``task_runner.py``); the id comes from the task instance in Airflow's API. Both Celery workers run
        on this machine, so the task instance's ``hostname`` cannot tell them apart.
        """
        from benchmarks.cluster.run import SPARK_DAG
        from benchmarks.harness.airflow_runner import descendants

        assert self.stack.airflow is not None
        ti = self.stack.airflow.api().get(
            f"/api/v2/dags/{SPARK_DAG}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}"
        )
        ti_id = str(ti.get("id") or "")
        if not ti_id:
            return None
        for i in range(1, self.stack.celery_workers + 1):
            name = f"celery-worker-{i}"
            for pid in descendants([self.stack.services[name].pid or 0]):
                if f"airflow worker -- {ti_id}".encode() in _cmdline(pid):
                    return name
        return None

    def _busiest_worker(self, rng: random.Random) -> str:
        """The Celery worker with the most processes (task processes beside its pool); ties by the seed."""
        from benchmarks.harness.airflow_runner import descendants

        names = [f"celery-worker-{i}" for i in range(1, self.stack.celery_workers + 1)]
        rng.shuffle(names)
        return max(names, key=lambda n: len(descendants([self.stack.services[n].pid or 0])))

    def _running_note(self, state: str = "running") -> str:
        try:
            return ",".join(sorted(k for k, v in self.activity().items() if v == state))
        except Exception:
            return ""

    def summary(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for record in self.records:
            counts[record.kind] = counts.get(record.kind, 0) + 1
        return counts


def freeze_over(elapsed: float, lease_ttl: float, awaiting_fence: bool, fenced: bool) -> bool:
    """Whether a frozen worker may be thawed after ``elapsed`` seconds.

    Never before ``lease_ttl + 10`` s (its lease must expire). A holder for which a conflicting writer was
    brought stays frozen until the store logged a fence decision on its lease (a waiting writer re-checks an
    expired holder only every 30 s when woken by LISTEN/NOTIFY, ADR 0025; thawed earlier, the holder's own
    keeper would stop its work and drop the fence handle, and the fence would never run), but not past
    ``lease_ttl + 60`` s: the stack's heartbeat timeout (``lease_ttl + 90``) must stay above every freeze.

    :param awaiting_fence: a conflicting writer was brought for a holder whose lease was found.
    :param fenced: the decision log holds ``remote_fenced`` or ``remote_unfenced`` for that lease.
    """
    if elapsed < lease_ttl + 10.0:
        return False
    return not awaiting_fence or fenced or elapsed >= lease_ttl + 60.0


def _cmdline(pid: int) -> bytes:
    """A process's command line (its title once ``setproctitle`` changed it), spaces between the words."""
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return b""


def _tree_signal(root: int | None, sig: int, pids: Sequence[int] | None = None) -> list[int]:
    """Send ``sig`` to ``root`` and all its descendants (or to ``pids``); return the PIDs signalled."""
    import contextlib
    import os

    from benchmarks.harness.airflow_runner import descendants

    targets = list(pids) if pids is not None else (list(descendants([root])) if root else [])
    for pid in targets:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    return targets
