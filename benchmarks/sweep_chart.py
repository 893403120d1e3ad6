"""The README's chart: makespan per seed of the real-scheduler sweep, read from its result file.

``python -m benchmarks.sweep_chart`` reads ``benchmarks/results/orchestration_sweep.json`` (written by
``python -m benchmarks.bench_orchestration --seeds 0-4``) and draws ``docs/images/orchestration_sweep.png``:
per seed, the makespan of one-slot pools, optimistic writes with retries and deltaguard, and the lower
bound. Every number drawn is a number of that file; nothing is typed in here.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SWEEP = REPO / "benchmarks" / "results" / "orchestration_sweep.json"
CHART = REPO / "docs" / "images" / "orchestration_sweep.png"
#: (result key, label, colour) of each bar, in drawing order
SERIES = (
    ("one_slot_pools_s", "one-slot pools", "#9e9e9e"),
    ("optimistic_s", "optimistic + retries", "#e57373"),
    ("deltaguard_s", "deltaguard", "#1976d2"),
)


def bars(sweep: Mapping[str, Any]) -> dict[str, list[float]]:
    """Per series (and ``lower_bound_s``), the makespan of each valid run in seed order."""
    runs: Sequence[Mapping[str, Any]] = sorted(
        (run for run in sweep["runs"] if run["valid"]), key=lambda run: run["seed"]
    )
    keys = [key for key, _, _ in SERIES] + ["lower_bound_s", "seed"]
    values = {key: [float(run[key]) for run in runs] for key in keys}
    values["optimistic_corrupted"] = [float(bool(run["optimistic_corrupted_tables"])) for run in runs]
    return values


def draw(sweep: Mapping[str, Any], path: Path) -> Path:
    """Draw the chart of ``sweep`` into ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    values = bars(sweep)
    seeds = [int(seed) for seed in values["seed"]]
    width = 0.26
    fig, ax = plt.subplots(figsize=(8, 3.4), dpi=110)
    for i, (key, label, colour) in enumerate(SERIES):
        xs = [s + (i - 1) * width for s in range(len(seeds))]
        ax.bar(xs, values[key], width, label=label, color=colour)
    for s, corrupted in enumerate(values["optimistic_corrupted"]):
        if corrupted:
            ax.annotate(
                "table\ncorrupted", (s, values["optimistic_s"][s]), ha="center", va="bottom", fontsize=7
            )
    for s, bound in enumerate(values["lower_bound_s"]):
        ax.hlines(bound, s - 1.5 * width, s + 1.5 * width, colors="black", linestyles="dashed", linewidth=1)
    ax.plot([], [], color="black", linestyle="dashed", linewidth=1, label="lower bound")
    ratio = sweep["deltaguard_vs_pools"]
    ax.set_title(
        "20 writes on 4 Delta tables under the real Airflow scheduler: makespan per seed\n"
        f"deltaguard ÷ one-slot pools: median {ratio['median']:.2f}, worst {ratio['worst']:.2f}; "
        "deltaguard 0 failed attempts",
        fontsize=9,
    )
    ax.set_xticks(range(len(seeds)), [f"seed {seed}" for seed in seeds])
    ax.set_ylabel("seconds")
    ax.legend(fontsize=8, ncols=4, loc="upper center", bbox_to_anchor=(0.5, -0.12), frameon=False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", type=Path, default=SWEEP)
    parser.add_argument("--out", type=Path, default=CHART)
    args = parser.parse_args(argv)
    print(draw(json.loads(args.sweep.read_text()), args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
