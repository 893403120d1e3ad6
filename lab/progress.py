"""Progress of long commands on stderr: a rich progress bar when stderr is a terminal or when asked.

``rich`` comes with Airflow. A command's ``--progress`` / ``--no-progress`` decides; without either, the
bar is shown only when stderr is a terminal, so logs and pipes get plain lines (or nothing) instead of
cursor movements. stdout stays the command's result alone.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO


def add_progress_argument(parser: argparse.ArgumentParser) -> None:
    """``--progress`` / ``--no-progress`` (default: a bar only when stderr is a terminal)."""
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show a progress bar on stderr (default: only when stderr is a terminal)",
    )


def wanted(flag: bool | None, stream: TextIO | None = None) -> bool:
    """Whether to draw a bar: the flag when given, else whether ``stream`` (stderr) is a terminal."""
    if flag is not None:
        return flag
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())


class Bar:
    """One task's progress; without a terminal (``progress=None``) it prints nothing."""

    def __init__(self, progress: Any = None, task: Any = None) -> None:
        self._progress = progress
        self._task = task

    @property
    def shown(self) -> bool:
        """Whether a bar is drawn."""
        return self._progress is not None

    def step(self, description: str, advance: float = 1) -> None:
        """Mark a step done and name the next one."""
        if self._progress is not None:
            self._progress.update(self._task, advance=advance, description=description)

    def at(self, completed: float, description: str | None = None) -> None:
        """Set the progress to ``completed`` (of the total), optionally renaming the current step."""
        if self._progress is not None:
            fields: dict[str, Any] = {"completed": completed}
            if description is not None:
                fields["description"] = description
            self._progress.update(self._task, **fields)


@contextmanager
def progress_bar(description: str, total: float, enabled: bool) -> Iterator[Bar]:
    """A progress bar on stderr for ``total`` units of work (steps or seconds).

    :param description: the first step's name.
    :param total: the work to do.
    :param enabled: draw it (:func:`wanted`); otherwise the bar is silent.
    """
    if not enabled:
        yield Bar()
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=Console(file=sys.stderr), transient=True) as progress:
        yield Bar(progress, progress.add_task(description, total=total))
