"""``deltaguard db migrate``: bring the lease store's schema to this deltaguard's version, explicitly.

Opening a store applies the additive migration steps by itself; this command is for deploy pipelines:
``--check`` only reports (exit 1 when a step is pending, 3 when the schema is newer than this deltaguard may
use, 4 when the store cannot be reached), and a *breaking* step (:data:`deltaguard.leases.sql.migrations.COMPATIBLE_FROM`) is applied only with
``--allow-breaking``, after every older worker and triggerer has stopped. The rolling-upgrade rule is in
docs/deployment.md.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

#: exit codes
PENDING = 1
BREAKING_REFUSED = 2
TOO_NEW = 3
UNAVAILABLE = 4


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="db_command", required=True)
    migrate = sub.add_parser("migrate", help="create or upgrade the lease store's schema")
    migrate.add_argument(
        "--store-url",
        default=None,
        help="the lease store URL (default: [deltaguard] lease_store_conn_id or lease_store_url)",
    )
    migrate.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 if a migration step is pending (3 if the schema is too new)",
    )
    migrate.add_argument(
        "--allow-breaking",
        action="store_true",
        help="also apply steps older deltaguard workers cannot run beside (stop them first)",
    )


def run(args: argparse.Namespace) -> int:
    import sqlalchemy as sa

    from deltaguard.exceptions import StoreError

    try:
        store, name = _open(args)
    except (StoreError, sa.exc.SQLAlchemyError) as exc:
        return _unavailable(exc)
    try:
        return _run(args, store, name)
    except (StoreError, sa.exc.SQLAlchemyError) as exc:
        return _unavailable(exc)
    except UnicodeError as exc:
        # A host name the IDNA codec refuses ("postgresql://.", an empty label) fails only when the driver
        # connects, not when the URL is parsed: it is still bad input, not an unreachable store.
        from deltaguard.commands import UsageError

        raise UsageError(f"store URL {name!r}: its host name cannot be used ({exc})") from None


def _unavailable(exc: Exception) -> int:
    # one line, and an exit code no pipeline mistakes for "a step is pending"
    print(" ".join(f"{type(exc).__name__}: {exc}".split()), file=sys.stderr)
    return UNAVAILABLE


def _open(args: argparse.Namespace) -> tuple[Any, str]:
    """The store ``--store-url`` (else the configuration) names, opened without migrating, and its
    redacted URL.

    :raises UsageError: for a URL that names no lease store deltaguard can open (empty, another database,
        malformed).
    """
    import sqlalchemy as sa

    from deltaguard.commands import UsageError
    from deltaguard.leases.admin import open_store
    from deltaguard.leases.sql.base import SqlLeaseStore
    from deltaguard.leases.store import redact_url

    url = args.store_url
    source = "--store-url"
    if url is None:
        from deltaguard import config

        url, source = config.lease_store_url(), "[deltaguard] lease_store_url"
    if not url.strip():
        raise UsageError(f"{source} is empty: give sqlite:///<file> or postgresql+psycopg://...")
    try:
        name = redact_url(url)
    except ValueError:
        name = "(unparseable URL)"
    try:
        store = open_store(url, migrate=False)
    except (ValueError, TypeError, sa.exc.ArgumentError) as exc:  # malformed or unsupported: bad input
        raise UsageError(f"{source} {name!r}: {exc}") from None
    assert isinstance(store, SqlLeaseStore)
    return store, name


def _run(args: argparse.Namespace, store: Any, name: str) -> int:
    from deltaguard.leases.sql import migrations

    try:
        version = store.schema_version()
        if version > migrations.LATEST:
            with store.engine.connect() as conn:
                try:
                    migrations.check_usable(conn)
                except migrations.SchemaTooNewError as exc:
                    print(str(exc), file=sys.stderr)
                    return TOO_NEW
            print(
                f"lease store {name}: schema {version} is newer than this deltaguard ({migrations.LATEST}) "
                "and declared compatible with it; nothing to do"
            )
            return 0
        steps = store.pending_migrations()
        breaking = [step for step in steps if migrations.breaking(step)]
        if not steps:
            print(f"lease store {name}: schema {version} is current")
            return 0
        described = ", ".join(f"{step}{' (breaking)' if step in breaking else ''}" for step in steps)
        if args.check:
            print(f"lease store {name}: schema {version}, pending step(s): {described}")
            return PENDING
        if breaking and not args.allow_breaking:
            print(
                f"lease store {name}: schema {version}, pending step(s): {described}; the breaking step(s) "
                "change what older deltaguard workers' statements mean: stop every worker and triggerer "
                "running an older deltaguard, then rerun with --allow-breaking",
                file=sys.stderr,
            )
            return BREAKING_REFUSED
        reached = store.migrate(allow_breaking=args.allow_breaking)
        print(f"lease store {name}: schema {version} -> {reached} (applied {described})")
        return 0
    finally:
        store.close()
