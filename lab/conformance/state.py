"""What a table looks like after a pair of writes, and whether a concurrent outcome is serial-equivalent.

Two writes that both commit concurrently are only harmless if the table ends up exactly as one of the two
serial executions would have left it (A then B, or B then A, each run on a fresh copy of the initial table).
Rows are compared as a multiset, so duplicated rows (two concurrent OPTIMIZEs) are caught; schema and table
properties are compared too, so a constraint committed over rows that violate it is caught as well.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TableState:
    """A canonical, comparable snapshot of a table's content and metadata.

    :param rows: every row as canonical JSON (sorted keys), the list sorted; duplicates are kept.
    :param columns: column names, sorted.
    :param properties: table properties (CHECK constraints included, as ``delta.constraints.*``), sorted.
    """

    rows: tuple[str, ...]
    columns: tuple[str, ...]
    properties: tuple[tuple[str, str], ...]

    @classmethod
    def of(
        cls, records: Iterable[Mapping[str, Any]], columns: Iterable[str], properties: Mapping[str, str]
    ) -> TableState:
        """Build a state from plain rows (dicts), column names and properties.

        :param records: the table's rows.
        :param columns: the table's column names.
        :param properties: the table's properties.
        """
        canonical = sorted(json.dumps(dict(r), sort_keys=True, default=str) for r in records)
        return cls(
            rows=tuple(canonical),
            columns=tuple(sorted(columns)),
            properties=tuple(sorted((str(k), str(v)) for k, v in properties.items())),
        )

    def differences(self, other: TableState) -> list[str]:
        """Human-readable differences to ``other`` (empty when equal)."""
        found: list[str] = []
        if self.columns != other.columns:
            found.append(f"columns {list(self.columns)} vs {list(other.columns)}")
        if self.properties != other.properties:
            found.append(f"properties {dict(self.properties)} vs {dict(other.properties)}")
        if self.rows != other.rows:
            found.append(f"{len(self.rows)} rows vs {len(other.rows)} rows")
        return found


@dataclass(frozen=True)
class Outcome:
    """How a pair of writes ended: which writes committed, and the table afterwards.

    :param committed: the roles (``A``/``B``) whose write committed.
    :param state: the table's state after both writes were attempted.
    """

    committed: frozenset[str]
    state: TableState


def matching_serial_order(concurrent: Outcome, serial: Mapping[str, Outcome]) -> str | None:
    """The serial order a concurrent outcome is equivalent to, or ``None`` when it matches none.

    Equivalent means the same writes committed and the table is identical (rows as a multiset, columns,
    properties).

    :param concurrent: what the concurrent execution produced.
    :param serial: the serial executions by name (``"A,B"``, ``"B,A"``).
    """
    for name, outcome in serial.items():
        if outcome.committed == concurrent.committed and outcome.state == concurrent.state:
            return name
    return None


def explain_mismatch(concurrent: Outcome, serial: Mapping[str, Outcome]) -> str:
    """Why a concurrent outcome matches no serial order (for the report).

    :param concurrent: what the concurrent execution produced.
    :param serial: the serial executions by name.
    """
    parts: list[str] = []
    for name, outcome in serial.items():
        diffs: Sequence[str] = concurrent.state.differences(outcome.state)
        if outcome.committed != concurrent.committed:
            diffs = [f"committed {sorted(concurrent.committed)} vs {sorted(outcome.committed)}", *diffs]
        parts.append(f"vs {name}: " + ("; ".join(diffs) or "identical"))
    return " | ".join(parts)
