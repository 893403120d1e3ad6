"""A Gantt chart of the planned run: one row per task, one panel per policy.

SVG is written by hand (no dependency); PNG needs matplotlib (the ``charts`` extra) and says so clearly
when it is missing.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from deltaguard.planning.analysis import POLICIES, Plan

_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d")
_TITLES = {
    "one_slot_pools": "one-slot pools",
    "all_at_once": "everything at once (unsafe)",
    "deltaguard": "deltaguard",
}


class ChartUnavailableError(RuntimeError):
    """A PNG was asked for without matplotlib installed."""


def _table_colours(plan: Plan) -> dict[str, str]:
    return {report.table: _COLOURS[i % len(_COLOURS)] for i, report in enumerate(plan.tables)}


def _colour(plan: Plan, task_id: str, colours: dict[str, str]) -> str:
    task = next(t for t in plan.tasks if t.id == task_id)
    return colours.get(task.targets[0].table, "#999999") if task.targets else "#bbbbbb"


def render_svg(plan: Plan) -> str:
    """The chart as an SVG document."""
    rows = [t.id for t in plan.tasks]
    label_w, row_h, width, gap = 220, 18, 620, 40
    longest = max((plan.makespan_s(p) for p in POLICIES), default=0.0) or 1.0
    scale = width / longest
    colours = _table_colours(plan)
    panel_h = row_h * len(rows) + gap
    height = panel_h * len(POLICIES) + 30 + 18 * len(colours)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + width + 80}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        '<rect width="100%" height="100%" fill="white"/>',
    ]
    for p_index, policy in enumerate(POLICIES):
        schedule = plan.schedules[policy]
        top = p_index * panel_h + 20
        title = f"{_TITLES[policy]}: {schedule.makespan_s:g} s"
        out.append(f'<text x="4" y="{top - 6}" font-weight="bold">{escape(title)}</text>')
        critical = {step.job for step in schedule.critical_path}
        for r_index, job in enumerate(rows):
            y = top + r_index * row_h
            x = label_w + schedule.starts[job] * scale
            w = max(1.0, (schedule.ends[job] - schedule.starts[job]) * scale)
            out.append(f'<text x="4" y="{y + 12}">{escape(job)}</text>')
            stroke = ' stroke="black" stroke-width="1.5"' if job in critical else ""
            out.append(
                f'<rect x="{x:.1f}" y="{y + 2}" width="{w:.1f}" height="{row_h - 4}" '
                f'fill="{_colour(plan, job, colours)}"{stroke}><title>{escape(job)}: '
                f"{schedule.starts[job]:g}-{schedule.ends[job]:g} s</title></rect>"
            )
        axis_y = top + len(rows) * row_h + 12
        out.append(f'<text x="{label_w}" y="{axis_y}">0 s</text>')
        out.append(f'<text x="{label_w + width}" y="{axis_y}" text-anchor="end">{longest:g} s</text>')
    legend_y = panel_h * len(POLICIES) + 20
    for i, (table, colour) in enumerate(colours.items()):
        y = legend_y + i * 18
        out.append(f'<rect x="4" y="{y - 10}" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="22" y="{y}">{escape(table)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_chart(plan: Plan, path: str | Path) -> Path:
    """Write the chart to ``path`` (``.svg`` by hand, ``.png`` with matplotlib).

    :raises ChartUnavailableError: for a PNG without matplotlib.
    :raises ValueError: for another file extension.
    """
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix == ".svg":
        target.write_text(render_svg(plan), encoding="utf-8")
        return target
    if suffix != ".png":
        raise ValueError(f"the chart is written as .svg or .png, not {target.name!r}")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ChartUnavailableError(
            "a PNG chart needs matplotlib: pip install 'airflow-provider-deltaguard[charts]', or write .svg"
        ) from None
    rows = [t.id for t in plan.tasks]
    colours = _table_colours(plan)
    figure, axes = plt.subplots(
        len(POLICIES), 1, figsize=(10, 1.2 + 0.3 * len(rows) * len(POLICIES)), sharex=True, squeeze=False
    )
    for axis, policy in zip(axes[:, 0], POLICIES, strict=True):
        schedule = plan.schedules[policy]
        critical = {step.job for step in schedule.critical_path}
        for r_index, job in enumerate(rows):
            axis.barh(
                r_index,
                schedule.ends[job] - schedule.starts[job],
                left=schedule.starts[job],
                color=_colour(plan, job, colours),
                edgecolor="black" if job in critical else "none",
            )
        axis.set_yticks(range(len(rows)), rows, fontsize=7)
        axis.invert_yaxis()
        axis.set_title(f"{_TITLES[policy]}: {schedule.makespan_s:g} s", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("seconds (planned)")
    figure.tight_layout()
    figure.savefig(target, dpi=110)
    plt.close(figure)
    return target
