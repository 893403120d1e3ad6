"""``make cluster-jars`` passes Maven a folder that still means the same place in Maven's temporary working
directory."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from benchmarks.cluster import jars


def test_a_relative_jar_folder_is_filled_where_the_caller_meant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fake_maven(args: list[str], cwd: str, **_: object) -> subprocess.CompletedProcess[str]:
        # what copy-dependencies does: a relative -DoutputDirectory is taken from Maven's own cwd
        out = next(a.split("=", 1)[1] for a in args if a.startswith("-DoutputDirectory="))
        target = Path(cwd) / out
        target.mkdir(parents=True, exist_ok=True)
        (target / "hadoop-aws-3.5.0.jar").write_bytes(b"jar")
        return subprocess.CompletedProcess(args, 0)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(jars.subprocess, "run", fake_maven)
    found = jars.fetch(Path(".venv/s3-jars"))
    assert [j.name for j in found] == ["hadoop-aws-3.5.0.jar"]
    assert (tmp_path / ".venv" / "s3-jars" / "hadoop-aws-3.5.0.jar").exists()
