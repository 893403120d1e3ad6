"""What a write task reports (no Airflow import, so it is tested without a scheduler).

* :func:`decision_line` - the one line the task log shows about admission;
* :func:`task_result` - the XCom return value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deltaguard.engines.base import WriteResult


def decision_line(waited_s: float, behind: Sequence[str], explanation: str | None = None) -> str:
    """The admission decision in one line for the task log.

    :param waited_s: seconds spent waiting for the lease.
    :param behind: the tasks it waited for (owner descriptions), in the order first seen.
    :param explanation: the conflict model's explanation from the first wait (reason and advice).
    """
    if not behind and waited_s < 1:
        return "deltaguard: lease granted at once (no conflicting write was running or queued)"
    who = ", ".join(dict.fromkeys(behind)) or "other writers"
    line = f"deltaguard: waited {waited_s:.0f} s behind {who}"
    if explanation:
        line += f" ({explanation})"
    return line


def task_result(
    result: WriteResult,
    *,
    waited_s: float,
    behind: Sequence[str],
    lease_id: str | None,
    app_id: str | None,
    app_version: int | None,
    decision: str,
) -> dict[str, Any]:
    """The operator's XCom return value (JSON-serialisable)."""
    out: dict[str, Any] = dict(result.to_json())
    out.update(
        {
            "waited_s": round(waited_s, 3),
            "waited_behind": list(dict.fromkeys(behind)),
            "lease_id": lease_id,
            "app_id": app_id,
            "app_version": app_version,
            "decision": decision,
        }
    )
    return out
