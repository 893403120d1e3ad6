"""The cluster stack's cached starting points (benchmarks/cluster/templates.py), without a PostgreSQL server."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.cluster import templates


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(templates.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def _data_dir(root: Path, version: str) -> Path:
    data = root / "data"
    data.mkdir()
    (data / "PG_VERSION").write_text(version)
    (data / "base").mkdir(mode=0o700)
    (data / "base" / "1").write_text("x")
    data.chmod(0o700)
    return data


def test_an_initialised_data_directory_is_kept_once_and_copied_with_its_modes(tmp_path: Path) -> None:
    pg_bin = tmp_path / "15" / "bin"
    data = _data_dir(tmp_path, "15")
    assert not templates.initdb_template(pg_bin).exists()
    templates.keep_initdb(data, pg_bin)
    kept = templates.initdb_template(pg_bin)
    assert (kept / "PG_VERSION").read_text() == "15"
    (data / "PG_VERSION").write_text("changed")
    templates.keep_initdb(data, pg_bin)  # an existing template is not replaced
    assert (kept / "PG_VERSION").read_text() == "15"
    copy = tmp_path / "copy"
    copy.mkdir()
    templates.copy_data_dir(kept, copy)
    # PostgreSQL refuses a data directory other users may read
    assert (copy / "base" / "1").read_text() == "x" and (copy / "base").stat().st_mode & 0o777 == 0o700
    assert (copy / "PG_VERSION").read_text() == "15"


def test_the_metadata_dump_is_per_postgresql_version(tmp_path: Path) -> None:
    a, b = templates.metadata_dump(tmp_path / "15" / "bin"), templates.metadata_dump(tmp_path / "16" / "bin")
    assert a != b and a.parent == b.parent
    assert templates.metadata_dump(tmp_path / "15" / "bin") == a
    # no dump yet: nothing is restored (the stack migrates)
    assert templates.restore_metadata(tmp_path / "15" / "bin", 1, "airflow") is False
