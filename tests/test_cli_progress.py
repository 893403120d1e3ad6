"""Progress bars of long commands: on stderr, only for a terminal or when asked; ``deltaguard --version``."""

from __future__ import annotations

import io

import pytest

from lab.progress import progress_bar, wanted


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_is_drawn_only_for_a_terminal_unless_asked() -> None:
    assert wanted(None, _Terminal()) is True
    assert wanted(None, io.StringIO()) is False  # a pipe or a log file
    assert wanted(True, io.StringIO()) is True and wanted(False, _Terminal()) is False


def test_the_bar_draws_on_stderr_and_never_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    with progress_bar("judging write pairs", 3, enabled=True) as bar:
        assert bar.shown
        bar.step("simulating deltaguard")
        bar.at(3, "done")
    with progress_bar("silent", 3, enabled=False) as quiet:
        assert not quiet.shown
        quiet.step("nothing")
    assert capsys.readouterr().out == ""


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from deltaguard import __version__
    from deltaguard.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"deltaguard {__version__}"


def test_asked_for_in_a_pipe_progress_is_counted_plain_lines() -> None:
    """``--progress`` with stderr not a terminal: one line per step, readable in a log, no cursor codes."""
    pipe = io.StringIO()
    with progress_bar("judging write pairs", 3, enabled=True, stream=pipe) as bar:
        assert bar.shown
        bar.step("computing the lower bound")
        bar.step("simulating deltaguard")
    assert pipe.getvalue().splitlines() == [
        "[0/3] judging write pairs",
        "[1/3] computing the lower bound",
        "[2/3] simulating deltaguard",
    ]
    seconds = io.StringIO()
    with progress_bar("fuzzing", 100, enabled=True, stream=seconds) as timed:
        for elapsed in range(0, 101, 5):
            timed.at(elapsed, f"case at {elapsed} s")
    assert seconds.getvalue().splitlines()[1:] == [f"[{t}/100] case at {t} s" for t in range(10, 101, 10)]


def test_conformance_lines_are_counted_also_when_quiet_skips_some() -> None:
    from lab.conformance.__main__ import Counter

    count = Counter(156)
    assert count.next() == "[1/156]"
    count.skip()  # --quiet: a sound cell prints nothing but is counted
    assert count.next() == "[3/156]"
