"""Replay every saved fuzz finding through the same differential check that found it.

Each ``fuzz_regressions/*.json`` file holds one shrunk case (layout, statements, the model's verdicts, the
engine's orders and the expected serial results) as ``python -m lab.fuzz`` saved it. A file whose ``status``
is ``open`` is a finding the model does not handle yet: its test is a strict xfail naming the finding
(``finding``, a sentence, or else its ``class``), so it turns red the moment the model is fixed (then set
``status`` to ``fixed``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lab.fuzz.cases import FuzzCase
from lab.fuzz.check import check_case
from lab.fuzz.engine import DeltaRsDifferentialEngine

REGRESSIONS = Path(__file__).parent / "fuzz_regressions"


def _params() -> list[Any]:
    params = []
    for path in sorted(REGRESSIONS.glob("*.json")):
        saved = json.loads(path.read_text(encoding="utf-8"))
        marks = []
        if saved.get("status") == "open":
            what = saved.get("finding") or saved["class"]
            marks.append(pytest.mark.xfail(strict=True, reason=f"model fix pending: {what}"))
        params.append(pytest.param(path, id=path.stem, marks=marks))
    return params


@pytest.mark.parametrize("path", _params())
def test_saved_case_is_sound(path: Path) -> None:
    saved = json.loads(path.read_text(encoding="utf-8"))
    case = FuzzCase.from_json(saved["case"])
    result = check_case(case, DeltaRsDifferentialEngine(), run_conflicts=True)
    assert not result.crashed, result.views
    # the engine still behaves as when the case was saved: same serial results, so the replay is meaningful
    expected = {order: sorted(body["rows"]) for order, body in saved["serial"].items()}
    assert {order: sorted(o.state.rows) for order, o in result.serial.items()} == expected
    assert not result.unsound, json.dumps(result.to_json(), indent=2)


def test_saved_cases_are_well_formed() -> None:
    for path in sorted(REGRESSIONS.glob("*.json")):
        saved = json.loads(path.read_text(encoding="utf-8"))
        assert {"case", "class", "status", "serial", "views", "orders"} <= set(saved), path.name
        assert saved["status"] in ("open", "fixed"), path.name
        assert FuzzCase.from_json(saved["case"]).to_json() == saved["case"], path.name
