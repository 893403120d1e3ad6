"""Text and JSON reports of a conformance run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.conformance.cells import CellResult, Observed, summarize


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


#: outcomes whose engine message adds nothing to the conflict kind (kept out of the JSON to keep it small)
_PLAIN = frozenset({Observed.COMMIT.value, Observed.CONFLICT.value})


def compact_cell(result: CellResult) -> dict[str, Any]:
    """A cell for the JSON file: the rule instead of its reason text (``deltaguard check`` prints reasons),
    and engine messages only where they explain something (corruption, errors)."""
    data = result.to_json()
    data.pop("reason", None)
    for order in data["orders"]:
        if order["observed"] in _PLAIN:
            order.pop("detail", None)
    return data


def to_json(results: Sequence[CellResult], meta: dict[str, Any]) -> dict[str, Any]:
    """The whole run as one JSON document (``meta``: engine, version, slice, elapsed time...)."""
    return {
        "meta": meta,
        "summary": summarize(results).to_json(),
        "cells": [compact_cell(r) for r in results],
    }


def write_json(path: Path, results: Sequence[CellResult], meta: dict[str, Any]) -> None:
    """Write :func:`to_json` to ``path`` (parent directories are created), one cell per line."""
    document = to_json(results, meta)
    cells = document.pop("cells")
    head = json.dumps(document, indent=1)[:-2]  # reopen the object to append the cells
    lines = ",\n".join("  " + json.dumps(cell, separators=(",", ":")) for cell in cells)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'{head},\n "cells": [\n{lines}\n ]\n}}\n', encoding="utf-8")
