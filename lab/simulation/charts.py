"""PNG charts of simulations and benchmarks (matplotlib, Agg backend; nothing is shown on screen).

matplotlib comes with the ``charts`` extra: ``pip install 'airflow-provider-deltaguard[charts]'``.

* :func:`gantt_chart`: per strategy, one lane per table, one bar per write attempt (green committed,
  red failed on a Delta conflict, grey other failure);
* :func:`bar_chart`: makespan and wasted task-seconds per strategy, with the lower bound drawn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

COLORS = {"ok": "#4caf50", "conflict": "#e53935", "error": "#9e9e9e"}


class ChartsUnavailableError(ImportError):
    """matplotlib is not installed."""


CHARTS_HINT = "charts need matplotlib: pip install 'airflow-provider-deltaguard[charts]'"


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise ChartsUnavailableError(CHARTS_HINT) from exc

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def gantt_chart(
    path: Path,
    runs: Mapping[str, Sequence[Mapping[str, Any]]],
    tables: Sequence[str],
    title: str,
    lower_bound_s: float | None = None,
) -> Path:
    """Draw one Gantt panel per strategy.

    :param path: the PNG to write.
    :param runs: strategy -> attempts, each with ``table``, ``start``, ``end`` (seconds from the run's
        start) and ``outcome`` (``ok``, ``conflict`` or ``error``).
    :param tables: lane order.
    :param title: figure title.
    :param lower_bound_s: drawn as a dashed line when given.
    :return: ``path``.
    """
    if not runs:
        raise ValueError("no runs to draw")
    plt = _pyplot()
    lanes = {name: i for i, name in enumerate(tables)}
    horizon = max((a["end"] for attempts in runs.values() for a in attempts), default=1.0)
    fig, axes = plt.subplots(len(runs), 1, figsize=(9, 1.0 + 0.45 * len(tables) * len(runs)), sharex=True)
    axes = axes if len(runs) > 1 else [axes]
    for ax, (strategy, attempts) in zip(axes, runs.items(), strict=True):
        # overlapping attempts on one lane are stacked in thin sub-rows so each stays visible
        rows_end: dict[int, list[float]] = {}
        placed: list[tuple[Mapping[str, Any], int, int]] = []
        for attempt in sorted(attempts, key=lambda a: a["start"]):
            lane = lanes[attempt["table"]]
            ends = rows_end.setdefault(lane, [])
            row = next((r for r, end in enumerate(ends) if end <= attempt["start"]), len(ends))
            if row == len(ends):
                ends.append(attempt["end"])
            else:
                ends[row] = attempt["end"]
            placed.append((attempt, lane, row))
        for attempt, lane, row in placed:
            depth = max(1, len(rows_end[lane]))
            height = 0.8 / depth
            ax.barh(
                lane - 0.4 + row * height + height / 2,
                attempt["end"] - attempt["start"],
                left=attempt["start"],
                height=height * 0.9,
                color=COLORS.get(attempt["outcome"], COLORS["error"]),
                edgecolor="black",
                linewidth=0.3,
            )
            if attempt["outcome"] == "conflict":
                ax.plot(attempt["end"], lane - 0.4 + row * height + height / 2, "x", color="black", ms=4)
        if lower_bound_s:
            ax.axvline(lower_bound_s, color="#1e88e5", linestyle="--", linewidth=1)
        ax.set_yticks(range(len(tables)), list(tables))
        ax.set_ylim(-0.6, len(tables) - 0.4)
        ax.set_xlim(0, horizon * 1.02)
        ax.set_title(strategy, fontsize=9, loc="left")
        ax.tick_params(labelsize=8)
    axes[-1].set_xlabel("seconds since the strategy's first task started (x = failed on a Delta conflict)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def bar_chart(
    path: Path,
    summary: Mapping[str, Mapping[str, Any]],
    lower_bound_s: float,
    title: str,
    unit: str = "s",
) -> Path:
    """Makespan and wasted task-seconds per strategy, the lower bound as a dashed line.

    :param summary: strategy -> ``makespan_s`` and ``wasted_task_s``.
    :param unit: ``s`` or ``h`` (values are divided by 3600).
    :return: ``path``.
    """
    if not summary:
        raise ValueError("nothing to draw")
    plt = _pyplot()
    scale = 3600.0 if unit == "h" else 1.0
    names = list(summary)
    makespan = [summary[n]["makespan_s"] / scale for n in names]
    wasted = [summary[n]["wasted_task_s"] / scale for n in names]
    # the simulation also reports waits before start: at a day's scale that is where strategies differ most
    waits = all("wait_p99_s" in summary[n] for n in names)
    fig, axes = plt.subplots(1, 3 if waits else 2, figsize=(11 if waits else 8, 3.2))
    axes[0].bar(names, makespan, color=["#8d6e63", "#ffb300", "#1e88e5"][: len(names)])
    axes[0].axhline(lower_bound_s / scale, color="black", linestyle="--", linewidth=1, label="lower bound")
    axes[0].set_ylabel(f"makespan ({unit})")
    axes[0].legend(fontsize=8)
    axes[1].bar(names, wasted, color="#e53935")
    axes[1].set_ylabel(f"task time wasted on failed attempts ({unit})")
    panels = [(axes[0], makespan), (axes[1], wasted)]
    if waits:
        p95 = [summary[n]["wait_p95_s"] for n in names]
        p99 = [summary[n]["wait_p99_s"] for n in names]
        xs = range(len(names))
        axes[2].bar([x - 0.2 for x in xs], p95, width=0.4, label="p95", color="#90caf9")
        axes[2].bar([x + 0.2 for x in xs], p99, width=0.4, label="p99", color="#1565c0")
        axes[2].set_xticks(list(xs), names)
        axes[2].set_ylabel("wait before start (s)")
        axes[2].legend(fontsize=8)
        axes[2].tick_params(labelsize=8)
    for ax, values in panels:
        ax.tick_params(labelsize=8)
        for i, value in enumerate(values):
            ax.annotate(
                f"{value:.0f}" if value >= 100 else f"{value:.1f}",
                (i, value),
                ha="center",
                va="bottom",
                fontsize=8,
            )
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def cost_chart(path: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Median microseconds per admission decision against the number of tables, one line per running count.

    :param rows: :func:`lab.simulation.simulator.admission_cost` rows.
    :return: ``path``.
    """
    if not rows:
        raise ValueError("no cost rows to draw")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for running in sorted({r["running_per_table"] for r in rows}):
        points = sorted(
            (r["tables"], r["us_per_decision"]) for r in rows if r["running_per_table"] == running
        )
        ax.plot(
            [p[0] for p in points], [p[1] for p in points], marker="o", label=f"{running} running per table"
        )
    ax.set_xscale("log")
    ax.set_xlabel("tables")
    ax.set_ylabel("us per admission decision (median)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax.set_title("Real admit() + conflict model, unmemoised", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path
