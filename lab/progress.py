"""Progress of long commands on stderr: a rich progress bar on a terminal, counted plain lines elsewhere.

``rich`` comes with Airflow. A command's ``--progress`` / ``--no-progress`` decides; without either,
progress is shown only when stderr is a terminal. Shown on a terminal it is a bar; shown in a pipe or a log
file (``--progress``) it is one plain line per step, ``[3/6] simulating deltaguard``, since a bar's cursor
movements print nothing there until it ends. stdout stays the command's result alone.
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
    """One task's progress; without a bar (``progress=None``) it prints nothing."""

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


class Lines(Bar):
    """Progress as counted plain lines on ``stream``: each step, and each tenth of the total otherwise.

    :param total: the work to do (steps or seconds).
    :param description: the first step's name.
    :param stream: where the lines go (stderr).
    """

    def __init__(self, total: float, description: str, stream: TextIO) -> None:
        super().__init__()
        self._total = total
        self._done = 0.0
        self._stream = stream
        self._tenth = -1
        self._say(description)

    @property
    def shown(self) -> bool:
        return True

    def _say(self, description: str) -> None:
        self._tenth = int(10 * self._done / self._total) if self._total else 10
        print(f"[{self._done:.0f}/{self._total:.0f}] {description}", file=self._stream, flush=True)

    def step(self, description: str, advance: float = 1) -> None:
        self._done += advance
        self._say(description)

    def at(self, completed: float, description: str | None = None) -> None:
        self._done = completed
        if self._total and int(10 * completed / self._total) > self._tenth:
            self._say(description or "")


@contextmanager
def progress_bar(
    description: str, total: float, enabled: bool, stream: TextIO | None = None
) -> Iterator[Bar]:
    """Progress on stderr for ``total`` units of work (steps or seconds).

    :param description: the first step's name.
    :param total: the work to do.
    :param enabled: show it (:func:`wanted`); otherwise nothing is printed.
    :param stream: stderr unless given: a bar on a terminal, counted lines (:class:`Lines`) elsewhere.
    """
    stream = stream or sys.stderr
    if not enabled:
        yield Bar()
        return
    if not getattr(stream, "isatty", lambda: False)():
        yield Lines(total, description, stream)
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
    with Progress(*columns, console=Console(file=stream), transient=True) as progress:
        yield Bar(progress, progress.add_task(description, total=total))
