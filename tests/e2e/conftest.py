"""The shared user's stack (:mod:`tests.e2e.user_stack`): started on first use, its users run one after
another, stopped after the last of them, and checked then for processes it left behind.

Its users run together so that no other module's stack runs beside it: an idle stack still takes CPU from
the timing-sensitive runs of the others. Stopping it right after its last user (rather than at the end of
the whole run) keeps it from taking CPU from the rest of the suite too. A process of it still alive after it
stopped fails the last user's teardown.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.user_stack import UserStack, start_user_stack

FIXTURE = "user_stack"
_running: list[UserStack] = []


def _uses_it(item: pytest.Item | None) -> bool:
    return item is not None and FIXTURE in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the shared stack's users together, where the first of them was (the others keep their order)."""
    users = [item for item in items if _uses_it(item)]
    if not users:
        return
    first = items.index(users[0])
    others = [item for item in items if not _uses_it(item)]
    items[:] = others[:first] + users + others[first:]


@pytest.fixture(scope="session")
def user_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UserStack]:
    shared = start_user_stack(tmp_path_factory.mktemp("user_stack"))
    _running.append(shared)
    try:
        yield shared
    finally:
        shared.stop()  # already stopped after its last user, unless the run was cut short
        _running.remove(shared)


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After the shared stack's last user: stop it, and fail this teardown if a process of it survived."""
    if not _uses_it(item) or _uses_it(nextitem) or not _running:
        return
    leftovers = _running[-1].stop()
    assert leftovers == [], f"processes of the shared stack outlived its stop: {leftovers}"
