"""Text and JSON reports of a conformance run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from deltaguard.conformance.cells import CellResult, summarize


def cell_line(result: CellResult) -> str:
    """One line: the cell, the model's prediction, what each order did, and a flag."""
    predicted = {None: "model-error", True: "conflict", False: "no_conflict"}[result.prediction.conflict]
    flag = "UNSOUND" if result.unsound else ("allowed" if result.engine_allows else "")
    orders = "  ".join(f"{o.order}={o.observed.value}{':' + o.kind if o.kind else ''}" for o in result.orders)
    return f"{result.cell.key:<95} predicted={predicted:<11} {orders:<70} {flag}".rstrip()


def summary_text(results: Sequence[CellResult]) -> str:
    """``cells=..., unsound=..., precision=...`` with the counts behind precision."""
    s = summarize(results)
    return (
        f"cells={s.cells} unsound={s.unsound} engine_allowed={s.engine_allowed} model_allowed={s.model_allowed} "
        f"both_allowed={s.both_allowed} inconclusive={s.inconclusive} precision={s.precision:.1%}"
    )


def to_json(results: Sequence[CellResult], meta: dict[str, Any]) -> dict[str, Any]:
    """The whole run as one JSON document (``meta``: engine, version, slice, elapsed time...)."""
    return {"meta": meta, "summary": summarize(results).to_json(), "cells": [r.to_json() for r in results]}


def write_json(path: Path, results: Sequence[CellResult], meta: dict[str, Any]) -> None:
    """Write :func:`to_json` to ``path`` (parent directories are created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_json(results, meta), indent=1, sort_keys=False) + "\n", encoding="utf-8")
