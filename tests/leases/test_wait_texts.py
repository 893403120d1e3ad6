"""The wait texts and their templates (ADR 0010): joining a template's pieces around a holder, the way the
PostgreSQL store does, gives exactly the texts the general decision encodes."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from deltaguard.core.admission import Blocker, Owner, Waiting
from deltaguard.core.decision import DeltaException
from deltaguard.leases import codec
from deltaguard.leases.wait_texts import wait_detail, wait_shape, waiting_from_json, waiting_to_json

# Any text the fields may hold, including quotes, backslashes, control and non-ASCII characters.
_TEXT = st.text(min_size=1, max_size=12)
_OWNERS = st.builds(
    Owner,
    dag_id=_TEXT,
    run_id=st.text(max_size=8),
    task_id=st.text(max_size=8),
    map_index=st.integers(-1, 500),
    try_number=st.integers(0, 9),
    name=st.one_of(st.just(""), _TEXT),
)


def _wait(uri: str, lease_id: str, owner: Owner, reasons: tuple[str, ...] = ("r1",)) -> Waiting:
    return Waiting(
        "req-1",
        1,
        (Blocker(uri, lease_id, owner, "lease", "INSERT (blind append)"),),
        reasons,
        ("run them one after the other",),
        (DeltaException.CONCURRENT_APPEND,),
        123.5,
    )


def _join(pieces: list[str], lease_id: str, owner: Owner) -> tuple[str, str]:
    """What the store's SQL builds (``to_json(text)`` there, ``json.dumps`` here: equal for ASCII text)."""
    quoted_id, name = json.dumps(lease_id), json.dumps(owner.describe())
    last_wait = pieces[0] + quoted_id + "," + owner.key + pieces[1]
    detail = pieces[2] + quoted_id + pieces[3] + name + pieces[4] + name[1:-1] + pieces[5]
    return last_wait, detail


@settings(max_examples=200, deadline=None)
@given(uri=_TEXT, lease_id=_TEXT, owner=_OWNERS, reasons=st.lists(_TEXT, max_size=3).map(tuple))
def test_pieces_joined_around_the_holder_give_the_general_texts(
    uri: str, lease_id: str, owner: Owner, reasons: tuple[str, ...]
) -> None:
    # The template is made from one holder and table, then used for others.
    shape = wait_shape(_wait("s3://first/table", "first-lease", Owner(name="first"), reasons))
    assert shape is not None
    real = _wait(uri, lease_id, owner, reasons)
    last_wait, detail = _join(shape.pieces_for(uri), lease_id, owner)
    assert last_wait == waiting_to_json(real)
    assert detail == codec.dumps(wait_detail(real))
    answer = shape.waiting("req-1", uri, lease_id, owner, 123.5)
    assert answer == real and waiting_from_json("req-1", 123.5, last_wait) == real


def test_waits_behind_several_holders_or_a_queued_request_have_no_template() -> None:
    owner = Owner(name="o")
    two = Waiting(
        "r",
        1,
        (Blocker("t", "a", owner, "lease", "INSERT"), Blocker("t", "b", owner, "lease", "INSERT")),
        (),
        (),
        (),
        1.0,
    )
    queued = Waiting("r", 2, (Blocker("t", "a", owner, "waiting", "MERGE"),), (), (), (), 1.0)
    assert wait_shape(two) is None and wait_shape(queued) is None
