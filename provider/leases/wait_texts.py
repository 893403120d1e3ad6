"""The stored texts of a wait answer, and their templates for the one-call queue entry (ADR 0010).

A wait is stored twice: as the request row's ``last_wait`` (the answer, read back by ``check``) and as the
decision-log detail (for task logs and the UI). Both paths that queue a request write them from here: the
general decision encodes them whole, and the one-call path sends them as pieces for the store to join
around the holder it finds (its lease id, owner JSON and owner name), so both write the same text.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from deltaguard.core.admission import Blocker, Owner, Waiting, explain
from deltaguard.core.decision import DeltaException
from deltaguard.leases import codec


def waiting_to_json(result: Waiting) -> str:
    """The ``last_wait`` text of a wait answer."""
    return codec.dumps(
        {
            "position": result.position,
            "blockers": [[b.table, b.id, b.owner.to_json(), b.kind, b.operation] for b in result.blockers],
            "reasons": list(result.reasons),
            "advice": list(result.advice),
            "exceptions": [e.value for e in result.exceptions],
        }
    )


def waiting_from_json(request_id: str, expires_at: float, text: str) -> Waiting:
    """The wait answer in a ``last_wait`` text."""
    data = json.loads(text)
    return Waiting(
        request_id,
        int(data["position"]),
        tuple(Blocker(t, i, Owner.from_json(o), k, d) for t, i, o, k, d in data["blockers"]),
        tuple(data["reasons"]),
        tuple(data["advice"]),
        tuple(DeltaException(e) for e in data["exceptions"]),
        expires_at,
    )


def wait_detail(result: Waiting) -> dict[str, Any]:
    """A wait's decision-log detail."""
    return {
        "position": result.position,
        "explain": explain(result),
        "blockers": [
            {
                "table": b.table,
                "id": b.id,
                "owner": b.owner.describe(),
                "kind": b.kind,
                "operation": b.operation,
            }
            for b in result.blockers
        ],
        "reasons": list(result.reasons),
        "advice": list(result.advice),
        "exceptions": [e.value for e in result.exceptions],
    }


@dataclass(frozen=True)
class WaitShape:
    """The model's verdict for one operation behind one sole live lease, with no queued request: everything
    of the wait answer but the holder's identity, which the store fills in (ADR 0010).

    :param position: the queue position (1: nothing was queued).
    :param reasons: the model's reasons.
    :param advice: the model's advice.
    :param exceptions: the exceptions the pair can raise.
    :param operation: the holder operation's description.
    :param pieces: the texts between the holder's fields, with a placeholder for the table (see
        :func:`wait_shape`; :meth:`pieces_for` fills it in).
    """

    position: int
    reasons: tuple[str, ...]
    advice: tuple[str, ...]
    exceptions: tuple[DeltaException, ...]
    operation: str
    pieces: tuple[str, ...]

    def waiting(self, request_id: str, uri: str, lease_id: str, owner: Owner, expires_at: float) -> Waiting:
        """The wait answer behind the lease the store found."""
        blocker = Blocker(uri, lease_id, owner, "lease", self.operation)
        return Waiting(
            request_id, self.position, (blocker,), self.reasons, self.advice, self.exceptions, expires_at
        )

    def pieces_for(self, uri: str) -> list[str]:
        """:attr:`pieces` for the table ``uri``."""
        quoted = json.dumps(uri)
        return [p.replace(_QUOTED_URI, quoted).replace(_URI, quoted[1:-1]) for p in self.pieces]


# Placeholders for the holder's fields and the table: random per process, so no operation, reason or URI
# text can contain them; templates whose texts do not split exactly around them are not made anyway.
_TOKEN = uuid.uuid4().hex
_ID, _NAME, _URI = f"dg-id-{_TOKEN}", f"dg-name-{_TOKEN}", f"dg-uri-{_TOKEN}"
_QUOTED_ID, _QUOTED_NAME, _QUOTED_URI = json.dumps(_ID), json.dumps(_NAME), json.dumps(_URI)
_OWNER_TEXT = codec.dumps(Owner(name=_NAME).to_json())


def wait_shape(result: Waiting) -> WaitShape | None:
    """The template of ``result``, a wait behind exactly one lease; ``None`` when it cannot be made one.

    :attr:`WaitShape.pieces` are six texts, for the store to join as
    ``last_wait = p0 || json(lease id) || ',' || owner JSON || p1`` and
    ``detail = p2 || json(lease id) || p3 || json(owner name) || p4 || owner name, JSON-escaped || p5``.
    """
    if len(result.blockers) != 1 or result.blockers[0].kind != "lease":
        return None
    holder = result.blockers[0]
    stand_in = Waiting(
        result.request_id,
        result.position,
        (Blocker(_URI, _ID, Owner(name=_NAME), "lease", holder.operation),),
        result.reasons,
        result.advice,
        result.exceptions,
        result.expires_at,
    )
    last_wait = waiting_to_json(stand_in)
    detail = codec.dumps(wait_detail(stand_in))
    lw_parts = last_wait.split(f"{_QUOTED_ID},{_OWNER_TEXT}")
    d_parts = detail.split(_QUOTED_ID)
    if len(lw_parts) != 2 or len(d_parts) != 2:
        return None
    d_head, rest = d_parts
    name_parts = rest.split(_QUOTED_NAME)
    if len(name_parts) != 2:
        return None
    d_id_to_name, rest = name_parts
    explain_parts = rest.split(_NAME)
    if len(explain_parts) != 2:
        return None
    pieces = (*lw_parts, d_head, d_id_to_name, *explain_parts)
    # Every placeholder but the table's must have been split out: the holder appears nowhere else.
    if sum(p.count(_TOKEN) for p in pieces) != sum(p.count(_URI) for p in pieces):
        return None
    return WaitShape(
        result.position,
        result.reasons,
        result.advice,
        result.exceptions,
        holder.operation,
        pieces,
    )
