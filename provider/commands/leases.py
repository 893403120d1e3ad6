"""``deltaguard leases``: look at the leases of a table, and release one by hand.

``deltaguard leases list TABLE`` prints the leases that hold a table, including expired ones kept because
their holder's Spark Connect work is not confirmed stopped (ADR 0033). ``deltaguard leases release --force
LEASE_ID --reason TEXT`` releases a lease whatever its owner or expiry and logs the reason (decision-log
kind ``force_release``): the way out when a fence cannot reach the server and an operator has made sure
the work ended (the Connect server was restarted, the session was killed there). ``deltaguard leases
sweep`` ends the expired leases no request asked a table of since: each is reclaimed, or fenced first when
its holder's Spark Connect work is not confirmed stopped (ADR 0033), and what stays held is printed with
why; run it from a scheduled job so such a lease ends even when nobody asks for its tables.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any

#: exit code when there was no such lease
NOT_FOUND = 1
#: exit code when the store cannot be opened or reached (as ``deltaguard db migrate``)
UNAVAILABLE = 4


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="leases_command", required=True)
    listing = sub.add_parser("list", help="the leases holding a table")
    listing.add_argument("table", help="the table's lease key (its URI)")
    release = sub.add_parser("release", help="release a lease by hand, with a logged reason")
    release.add_argument(
        "lease_id", help="the lease (request) id, as `leases list` or the wait text shows it"
    )
    release.add_argument(
        "--force",
        action="store_true",
        required=True,
        help="release it whatever its owner or expiry (required: the holder's work must be known to have ended)",
    )
    release.add_argument("--reason", required=True, help="why; kept in the decision log")
    sweep = sub.add_parser("sweep", help="end the expired leases nobody asked for (fenced first if needed)")
    for each in (listing, release, sweep):
        each.add_argument(
            "--store-url",
            default=None,
            help="the lease store URL (default: [deltaguard] lease_store_conn_id or lease_store_url)",
        )


def _manager(args: argparse.Namespace) -> Any:
    from deltaguard.commands import UsageError
    from deltaguard.leases.admin import open_manager

    url = args.store_url
    if url is None:
        from deltaguard import config

        url = config.lease_store_url()
    if not url or not url.strip():
        raise UsageError("no lease store: give --store-url or set [deltaguard] lease_store_url")
    fence = None
    if args.leases_command == "sweep":
        from deltaguard.engines.fencing import default_remote_fence

        fence = default_remote_fence()
    try:
        return open_manager(url, remote_fence=fence)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"lease store: {exc}") from None


def run(args: argparse.Namespace) -> int:
    import sqlalchemy as sa

    from deltaguard.commands import UsageError
    from deltaguard.exceptions import StoreError

    try:
        return _run(args)
    except (StoreError, sa.exc.SQLAlchemyError) as exc:
        # A store that cannot be opened or read (a missing directory, a file that is not a database, a
        # server that refuses): one line naming the store, and an exit code apart from "no such lease".
        print(" ".join(f"deltaguard leases: {exc}".split()), file=sys.stderr)
        return UNAVAILABLE
    except UnicodeError as exc:  # a host name the IDNA codec refuses, found only when connecting
        raise UsageError(f"lease store URL: its host name cannot be used ({exc})") from None


def _run(args: argparse.Namespace) -> int:
    from deltaguard.commands import UsageError

    if args.leases_command != "sweep":
        named = args.table if args.leases_command == "list" else args.lease_id
        if not named.strip():
            raise UsageError(
                f"give a {'table' if args.leases_command == 'list' else 'lease id'}, not {named!r}"
            )
    manager = _manager(args)
    try:
        if args.leases_command == "sweep":
            outcome = manager.end_expired()
            for lease_id, what in sorted(outcome.items()):
                print(f"{lease_id}\t{what}")
            return 0
        if args.leases_command == "list":
            for lease in manager.leases(args.table):
                print(f"{lease.lease_id}\t{lease.owner.describe()}\t{lease.operation.describe()}")
            return 0
        if not args.reason.strip():
            raise UsageError("--reason must say why the lease may be released")
        by = getpass.getuser()
        released = manager.force_release(args.lease_id, args.reason.strip(), by=by)
        if not released:
            print(f"deltaguard leases: no lease {args.lease_id!r}", file=sys.stderr)
            return NOT_FOUND
        print(f"released lease {args.lease_id} on {', '.join(released)} ({args.reason.strip()})")
        return 0
    finally:
        manager.store.close()
