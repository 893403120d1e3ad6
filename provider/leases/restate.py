"""Move a granted lease to a newer read version, judged again first (ADR 0020, *Deployment*).

A write that pins its snapshot records the version in its request (``TableClaim.read_version``), and an
admission decision uses file statistics only against leases whose read version is known and not newer than
the statistics. A lease granted while its write still pins an older snapshot (it waited, or the trigger
granted it from the stored request) would write from a version behind the commits of the writes it waited
for, which delta-rs then rejects. Before writing, the write reads the table again and asks to move its lease
to that version: the request is judged again against every other granted lease on its tables (with the new
configuration and statistics, the freshness rule included); only when it is still compatible with all of
them is the new read version recorded. Otherwise the lease keeps its old read version, which is what the
write must then read -- the version every earlier decision involving it was made for.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from deltaguard.core.admission import DecideFn, LeaseRequest, TableView, admit
from deltaguard.exceptions import LeaseLostError, LeaseOwnershipError
from deltaguard.leases import codec
from deltaguard.leases.store import StoreTxn
from deltaguard.leases.views import lease_holder


def restate_locked(
    txn: StoreTxn, request: LeaseRequest, now: float, decide: DecideFn
) -> dict[str, int | None]:
    """In ``txn`` (locking the request's tables): record ``request``'s read versions if it is still
    compatible with every other live lease on its tables; return the read version per table its write must
    use (the new ones, or the recorded ones when the new ones were refused).

    :param txn: a store transaction over ``request.uris``.
    :param request: the granted request again, same id and owner, each claim with the configuration (and
        statistics) of the version its write will now read, and that version as ``read_version``.
    :param now: the decision's time.
    :param decide: the conflict model.
    :raises LeaseLostError: the lease is gone or expired.
    :raises LeaseOwnershipError: the lease belongs to another owner.
    """
    mine = txn.lease_rows(request.request_id)
    if not mine or min(r.expires_at for r in mine) <= now:
        raise LeaseLostError(f"lease {request.request_id} is gone or expired; stop writing")
    if mine[0].owner_key != request.owner.key:
        raise LeaseOwnershipError(f"lease {request.request_id} belongs to another owner")
    row = txn.request(request.request_id)
    recorded: Mapping[str, int] = codec.payload_read_versions(row.payload) if row is not None else {}
    kept: dict[str, int | None] = {c.uri: recorded.get(c.uri) for c in request.claims}
    wanted = {c.uri: c.read_version for c in request.claims}
    if row is None or wanted == kept or any(c.config is None for c in request.claims):
        return kept
    leases = [x for x in txn.leases() if x.lease_id != request.request_id and x.expires_at > now]
    pinned = {
        r.request_id: codec.payload_read_versions(r.payload)
        for r in txn.requests(sorted({x.lease_id for x in leases}))
    }
    views = []
    for claim in request.claims:
        assert claim.config is not None  # checked above
        views.append(
            TableView(
                uri=claim.uri,
                operation=claim.operation,
                config=claim.config,
                profile=claim.profile,
                granted=[
                    lease_holder(x, None, pinned.get(x.lease_id, {}).get(claim.uri))
                    for x in leases
                    if x.uri == claim.uri
                ],
                read_version=claim.read_version,
            )
        )
    # Already granted: no queued request is ahead of it, only the leases matter.
    if not admit(request.request_id, -math.inf, views, decide).granted:
        return kept
    stored = codec.request_from_payload(request.request_id, row.payload)
    claims = {c.uri: c for c in request.claims}
    moved = dataclasses.replace(
        stored,
        claims=tuple(
            dataclasses.replace(c, config=claims[c.uri].config, read_version=claims[c.uri].read_version)
            for c in stored.claims
        ),
    )
    txn.put_request(dataclasses.replace(row, payload=codec.request_payload(moved), updated_at=now))
    return dict(wanted)
