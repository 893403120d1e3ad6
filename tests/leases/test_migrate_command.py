"""``deltaguard db migrate`` and the schema compatibility rule, on real SQLite and PostgreSQL stores."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from deltaguard.cli import main
from deltaguard.exceptions import StoreUnavailableError
from deltaguard.leases.open import open_store
from deltaguard.leases.sql import migrations
from deltaguard.leases.sql.base import SqlLeaseStore


def _store_at(url: str, version: int) -> None:
    """Build the schema of ``version`` (as an older deltaguard left it)."""
    store = open_store(url, migrate=False)
    assert isinstance(store, SqlLeaseStore)
    store.migrate(version)
    store.close()


def _version(url: str) -> tuple[int, int | None]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        version = migrations.current_version(conn)
        rule = migrations.stored_compatible_from(conn, version)
    engine.dispose()
    return version, rule


def test_every_step_since_the_rule_declares_its_compatibility() -> None:
    steps = [step for step, _ in migrations.MIGRATIONS if step >= migrations.FIRST_COMPATIBILITY_VERSION]
    assert steps and all(step in migrations.COMPATIBLE_FROM for step in steps)
    assert all(migrations.COMPATIBLE_FROM[step] <= step for step in steps)


def test_check_reports_a_pending_step_and_migrate_applies_it(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _store_at(store_url, migrations.LATEST - 1)
    assert main(["db", "migrate", "--store-url", store_url, "--check"]) == 1
    assert f"pending step(s): {migrations.LATEST}" in capsys.readouterr().out
    assert _version(store_url)[0] == migrations.LATEST - 1  # --check changed nothing
    assert main(["db", "migrate", "--store-url", store_url]) == 0
    assert _version(store_url) == (migrations.LATEST, migrations.COMPATIBLE_FROM[migrations.LATEST])
    assert main(["db", "migrate", "--store-url", store_url, "--check"]) == 0
    assert "is current" in capsys.readouterr().out


def test_an_older_deltaguard_fails_closed_on_a_newer_breaking_schema(
    store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _store_at(store_url, migrations.LATEST)
    engine = sa.create_engine(store_url)
    newer = migrations.LATEST + 1
    with engine.begin() as conn:
        # what a newer deltaguard's breaking step leaves behind
        conn.execute(sa.text("UPDATE dg_schema_version SET version = :v, compatible_from = :v"), {"v": newer})
    with pytest.raises(StoreUnavailableError, match=rf"schema version {newer} is newer.*upgrade"):
        open_store(store_url)
    assert main(["db", "migrate", "--store-url", store_url, "--check"]) == 3
    assert "upgrade airflow-provider-deltaguard" in capsys.readouterr().err
    # an additive newer step (compatible with this deltaguard) is used as it is
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE dg_schema_version SET compatible_from = :c"), {"c": migrations.LATEST})
    with open_store(store_url) as store:
        assert store.schema_version() == newer
    with engine.connect() as conn:
        assert migrations.current_version(conn) == newer  # nothing migrated it back or forth
    engine.dispose()


def test_opening_never_applies_a_breaking_step(
    store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _store_at(store_url, migrations.LATEST - 1)
    monkeypatch.setitem(migrations.COMPATIBLE_FROM, migrations.LATEST, migrations.LATEST)
    with pytest.raises(StoreUnavailableError, match=r"breaking migration step.*--allow-breaking"):
        open_store(store_url)
    assert _version(store_url)[0] == migrations.LATEST - 1
    assert main(["db", "migrate", "--store-url", store_url]) == 2
    assert "(breaking)" in capsys.readouterr().err
    assert _version(store_url)[0] == migrations.LATEST - 1
    assert main(["db", "migrate", "--store-url", store_url, "--allow-breaking"]) == 0
    assert _version(store_url) == (migrations.LATEST, migrations.LATEST)
    # from now on a deltaguard that knows only the schema before it refuses the store
    monkeypatch.setattr(migrations, "LATEST", migrations.LATEST - 1)
    with pytest.raises(StoreUnavailableError, match="newer than this deltaguard"):
        open_store(store_url)


def test_an_unreachable_store_is_one_line_and_its_own_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    # nothing listens on port 1: the pipeline must not read this as "a step is pending" (exit 1)
    assert (
        main(["db", "migrate", "--store-url", "postgresql+psycopg://dg@127.0.0.1:1/leases", "--check"]) == 4
    )
    err = capsys.readouterr().err
    assert "unreachable" in err and len(err.strip().splitlines()) == 1
