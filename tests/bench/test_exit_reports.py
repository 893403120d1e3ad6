"""The exit-report reader pairs each deferral with the scheduler's receipt of that try's report."""

from __future__ import annotations

from pathlib import Path

from benchmarks.harness.exit_reports import report_delays, summary

LOG = """\
2026-12-06 08:18:05.165270+00:00 [info     ] Pausing task as DEFERRED.      [task] dag_id=d loc=task_runner.py:1466 map_index=-1 run_id=r1 task_id=a ti_id=x try_number=1
2026-12-06 08:18:06.000000+00:00 [info     ] Pausing task as DEFERRED.      [task] dag_id=d loc=task_runner.py:1466 map_index=-1 run_id=r1 task_id=b ti_id=y try_number=1
2026-12-06T08:18:06.500000Z [info     ] Received executor event with state success for task instance TaskInstanceKey(dag_id='d', task_id='b', run_id='r1', try_number=2, map_index=-1)
2026-12-06T08:18:06.600000Z [info     ] Received executor event with state success for task instance TaskInstanceKey(dag_id='d', task_id='b', run_id='r1', try_number=1, map_index=-1)
2026-12-06T08:18:10.448267Z [info     ] Received executor event with state success for task instance TaskInstanceKey(dag_id='d', task_id='a', run_id='r1', try_number=1, map_index=-1)
2026-12-06T08:18:11.000000Z [info     ] Received executor event with state success for task instance TaskInstanceKey(dag_id='d', task_id='a', run_id='r1', try_number=1, map_index=-1)
"""


def test_each_deferral_is_paired_with_its_own_tries_first_report(tmp_path: Path) -> None:
    log = tmp_path / "scheduler.log"
    log.write_text(LOG)
    delays = report_delays(log)
    # b's try 2 report is not b's try 1's; a's second report (its resumed run's) pairs with nothing
    assert [round(d, 3) for d in delays] == [0.6, 5.283]
    assert summary(delays)["over_5_s"] == 1 and summary(delays)["worst_s"] == 5.28
    assert summary([]) == {"deferrals": 0}
