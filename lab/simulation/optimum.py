"""The optimal makespan of a small workload, by constraint programming (OR-Tools CP-SAT).

The model: every write is an interval of its true duration, released at its arrival; at most ``slots``
run at once, at most ``table_slots`` per table, and two writes the conflict model says can conflict
(pairwise, :func:`lab.simulation.workload.model_conflicts`) never overlap. The objective is the last
end. A schedule exists for every feasible order, so the optimum is what a clairvoyant scheduler with true
durations could reach; only a proven optimum is reported.
"""

from __future__ import annotations

from collections.abc import Sequence

from lab.simulation.workload import BenchWrite, ConflictFn

#: CP-SAT works on integers: durations in hundredths of a second (the workload rounds to them).
SCALE = 100


def optimal_makespan(
    writes: Sequence[BenchWrite],
    arrivals: Sequence[float],
    conflicts: ConflictFn,
    *,
    slots: int,
    table_slots: int | None = 8,
    time_limit_s: float = 10.0,
) -> float | None:
    """The minimal makespan (from the first arrival), or ``None`` when not proven within the time limit.

    :param writes: the writes (their true durations).
    :param arrivals: ``arrivals[i]`` is when ``writes[i]`` may start.
    :param conflicts: pairwise conflicts.
    :param slots: worker slots shared by all tables.
    :param table_slots: per-table pool size (``None``: no pools).
    :param time_limit_s: the solver's wall-clock limit.
    :raises ImportError: without the ``ortools`` package (extra ``bench``).
    """
    from ortools.sat.python import cp_model

    if not writes:
        return 0.0
    first = min(arrivals)
    release = [round((a - first) * SCALE) for a in arrivals]
    length = [round(w.duration_s * SCALE) for w in writes]
    horizon = max(release) + sum(length)
    model = cp_model.CpModel()
    starts, ends, intervals = [], [], []
    for i, _ in enumerate(writes):
        start = model.new_int_var(release[i], horizon, f"s{i}")
        end = model.new_int_var(release[i], horizon, f"e{i}")
        intervals.append(model.new_interval_var(start, length[i], end, f"i{i}"))
        starts.append(start)
        ends.append(end)
    model.add_cumulative(intervals, [1] * len(writes), slots)
    if table_slots is not None:
        for table in {w.table for w in writes}:
            mine = [intervals[i] for i, w in enumerate(writes) if w.table == table]
            if len(mine) > table_slots:
                model.add_cumulative(mine, [1] * len(mine), table_slots)
    for i, a in enumerate(writes):
        for j in range(i + 1, len(writes)):
            if conflicts(a, writes[j]) or conflicts(writes[j], a):
                model.add_no_overlap([intervals[i], intervals[j]])
    makespan = model.new_int_var(0, horizon, "makespan")
    model.add_max_equality(makespan, ends)
    model.minimize(makespan)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit_s
    solver.parameters.num_workers = 1  # frugal and reproducible
    status = solver.solve(model)
    if status != cp_model.OPTIMAL:
        return None
    return solver.value(makespan) / SCALE
