"""Every saved meaning-fuzzer reproducer (``lab/fuzz/meaning_regressions``) stays judged as a conflict.

Each one is a delta-rs write that touched (or, for ``read`` findings, read) a partition the model called
untouched, or whose source read its table while the model said it read nothing of it (``source`` findings:
the write and its mirror were let run at once), confirmed stale-concurrently when it was found.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.fuzz import meaning

SAVED = sorted((Path(meaning.__file__).parent / "meaning_regressions").glob("*.json"))


def test_there_are_reproducers() -> None:
    assert SAVED


@pytest.mark.parametrize("path", SAVED, ids=[p.stem for p in SAVED])
def test_the_model_refuses_what_delta_rs_touches(path: Path, tmp_path: Path) -> None:
    saved = json.loads(path.read_text())
    touched, conflict = meaning.replay(saved, tmp_path)
    if touched is None:
        # The write's text is refused before any lease now (DataFusion cannot plan it on the table), so it
        # never runs beside another write; the model's verdict must still not separate the pair.
        assert conflict
        return
    if "read" not in saved.get("model_allows", ()):
        assert touched  # delta-rs still touches the partition (else the reproducer proves nothing)
    assert conflict
