"""A hand-off's Airflow part split at the points Airflow logs, from logs written in Airflow 3.3's formats."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.harness.handoff_trace import enqueue_times, summarize_stages, trace

DAG = "bench_deltaguard"
RUN = "run_id=manual__2026-11-27T18:02:16.545488+00:00"
T0 = datetime(2026, 11, 27, 18, 3, 0, tzinfo=UTC).timestamp()


def stamp(offset: float, sep: str = "T", zone: str = "Z") -> str:
    return datetime.fromtimestamp(T0 + offset, UTC).strftime(f"%Y-%m-%d{sep}%H:%M:%S.%f") + zone


def task_log(folder: Path, name: str, events: list[tuple[float, str]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"timestamp": stamp(at), "event": event, "level": "info"}) for at, event in events]
    (folder / name).write_text("\n".join(["not json", *lines]) + "\n")


def write_logs(logs: Path) -> None:
    folder = logs / f"dag_id={DAG}" / RUN / "task_id=w010"
    task_log(
        folder, "attempt=1.log.trigger.2.log", [(-40.0, "trigger ... starting"), (1.0, "Trigger fired event")]
    )
    task_log(
        folder,
        "attempt=1.log",
        [
            (-43.0, "::group::Pre Execute"),  # the first start, before it deferred: not the resume
            (-41.0, "Worker startup parse complete"),
            (27.0, "::group::Pre Execute"),
            (27.5, "Worker startup parse complete"),
        ],
    )
    other = f"<TaskInstance: {DAG}.w005 manual__x [scheduled] ti_id=1>"
    mine = f"<TaskInstance: {DAG}.w010 manual__x [scheduled] ti_id=2>"
    (logs / "scheduler.log").write_text(
        f"{stamp(-50)} [info     ] Trying to enqueue tasks: [{mine}] for executor: LocalExecutor(parallelism=8)\n"
        f"{stamp(0.5, ' ', '+00:00')} [info     ] ::endgroup:: [task] task_id=w010\n"
        f"{stamp(2.5)} [info     ] Trying to enqueue tasks: [{other}, {mine}] for executor: LocalExecutor(parallelism=8)\n"
    )


def test_each_stage_ends_at_the_first_logged_event_after_the_previous_one(tmp_path: Path) -> None:
    write_logs(tmp_path)
    enqueued = enqueue_times(tmp_path / "scheduler.log", DAG)
    assert sorted(enqueued) == ["w005", "w010"] and len(enqueued["w010"]) == 2
    pair = {"task_id": "w010", "granted_at": T0 + 0.8, "first_byte_at": T0 + 28.0}
    [traced] = trace(tmp_path, DAG, [pair], enqueued)
    assert traced == {
        "task_id": "w010",
        "grant_to_first_byte_s": 27.2,
        "grant_to_trigger_fired": 0.2,
        "trigger_fired_to_enqueued": 1.5,
        "enqueued_to_started": 24.5,
        "started_to_parsed": 0.5,
        "parsed_to_first_byte": 0.5,
    }
    assert summarize_stages([traced])["enqueued_to_started"]["max_s"] == 24.5


def test_a_missing_log_line_leaves_its_stage_and_the_later_ones_unknown(tmp_path: Path) -> None:
    write_logs(tmp_path)
    (tmp_path / "scheduler.log").write_text("")
    pair = {"task_id": "w010", "granted_at": T0 + 0.8, "first_byte_at": T0 + 28.0}
    [traced] = trace(tmp_path, DAG, [pair], enqueue_times(tmp_path / "scheduler.log", DAG))
    assert traced["grant_to_trigger_fired"] == 0.2
    assert traced["trigger_fired_to_enqueued"] is None and traced["enqueued_to_started"] is None
    assert summarize_stages([traced])["enqueued_to_started"]["count"] == 0
