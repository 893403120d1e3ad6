"""Differential fuzzing of partition column *types* on delta-rs: the values and literals where engines and the
model may disagree about which partitions a predicate names.

The main fuzz table partitions by one STRING column holding letters. This module partitions a small table by a
column of another type, with values chosen where comparisons are fragile, and draws two rewrites (UPDATE or
DELETE) whose predicates compare it with numbers, numeric strings, plain strings or dates:

- STRING holding digits (``'2'``, ``'12'``, ``'30'``, ``'007'``): text order differs from numeric order;
- BIGINT and INT (negative values too);
- DECIMAL(5,2) (``1.50``, ``10.25``);
- DOUBLE with ``-0.0``, ``0.0`` and ``NaN``;
- DATE, compared with ``DATE '...'`` and with plain date text.

deltaguard's view: the configuration the engine layer reads (:func:`deltaguard.engines.discovery.read_table_config`)
and :func:`deltaguard.core.model.decide` both ways. The engine's view: both commit orders from one snapshot
(the second write commits from its stale handle) and the serial orders. A case is *unsound* when deltaguard
admits both writes and a concurrent order fails, or commits a table no serial order gives.

``python -m lab.fuzz.partition_types --seed 1 --cases 200`` runs cases and prints a JSON summary
(ADR 0003 fact 13).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

#: partition type -> (Arrow type, partition values, literals a predicate compares it with)
TYPES: dict[str, tuple[pa.DataType, list[Any], list[str]]] = {
    "string_digits": (
        pa.string(),
        ["2", "7", "12", "30", "007"],
        ["2", "5", "10", "12", "'2'", "'12'", "'007'", "7", "1.5"],
    ),
    "long": (pa.int64(), [-3, 2, 7, 12, 30], ["-3", "0", "2", "5", "10", "12", "'12'", "1.5"]),
    "integer": (pa.int32(), [2, 7, 12], ["2", "5", "10", "12"]),
    "decimal": (
        pa.decimal128(5, 2),
        [Decimal("1.50"), Decimal("2.00"), Decimal("10.25")],
        ["1.5", "2", "10", "10.25", "'1.5'"],
    ),
    "double": (pa.float64(), [-0.0, 0.0, 1.5, float("nan")], ["0", "-1", "1", "1.5", "0.0"]),
    "date": (
        pa.date32(),
        [0, 1, 9],  # days after 2024-01-01, made dates in _table
        ["DATE '2024-01-01'", "DATE '2024-01-02'", "'2024-01-05'", "'2024-01-10'"],
    ),
}
_OPS = ("=", "<", "<=", ">", ">=", "<>")


@dataclass(frozen=True)
class TypeWrite:
    """One rewrite: ``kind`` (UPDATE or DELETE) and its WHERE condition."""

    kind: str
    where: str

    def sql(self, table: str) -> str:
        if self.kind == "DELETE":
            return f"DELETE FROM {table} WHERE {self.where}"
        return f"UPDATE {table} SET x = x + 1 WHERE {self.where}"


@dataclass(frozen=True)
class TypeCase:
    """A partition type and two writes from one snapshot."""

    partition_type: str
    first: TypeWrite
    second: TypeWrite

    def to_json(self) -> dict[str, Any]:
        return {
            "partition_type": self.partition_type,
            "first": [self.first.kind, self.first.where],
            "second": [self.second.kind, self.second.where],
        }


def _predicate(rng: random.Random, literals: list[str]) -> str:
    form = rng.randrange(4)
    if form == 0:
        low, high = sorted(rng.sample(literals, 2)) if len(literals) > 1 else (literals[0], literals[0])
        return f"p BETWEEN {low} AND {high}"
    if form == 1:
        listed = ", ".join(rng.sample(literals, min(len(literals), rng.randint(1, 3))))
        return f"p {'NOT IN' if rng.random() < 0.25 else 'IN'} ({listed})"
    atom = f"p {rng.choice(_OPS)} {rng.choice(literals)}"
    return f"NOT ({atom})" if form == 3 else atom


def generate(seed: int, count: int) -> list[TypeCase]:
    """``count`` cases drawn from ``seed`` (the same seed gives the same cases)."""
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        name = rng.choice(sorted(TYPES))
        literals = TYPES[name][2]
        writes = [TypeWrite(rng.choice(("UPDATE", "DELETE")), _predicate(rng, literals)) for _ in range(2)]
        cases.append(TypeCase(name, writes[0], writes[1]))
    return cases


def _table(path: str, name: str) -> None:
    from datetime import date, timedelta

    from deltalake import write_deltalake

    typ, values, _ = TYPES[name]
    if name == "date":
        values = [date(2024, 1, 1) + timedelta(days=int(v)) for v in values]
    n = len(values)
    data = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "x": pa.array([0] * n, pa.int64()),
            "p": pa.array(values, typ),
        }
    )
    write_deltalake(path, data, partition_by=["p"])


def _rows(path: str) -> list[str]:
    from deltalake import DeltaTable
    from deltalake.query import QueryBuilder

    data = QueryBuilder().register("t", DeltaTable(path)).execute("SELECT id, x FROM t").read_all()
    return sorted(json.dumps(row, sort_keys=True) for row in pa.table(data).to_pylist())


def check(case: TypeCase, workdir: Path) -> dict[str, Any]:
    """The model's verdict and the engine's outcomes for one case (``unsound`` says whether they disagree)."""
    from deltaguard.core.model import decide
    from deltaguard.core.sql.classify import classify_sql
    from deltaguard.engines.deltars.engine import DeltaRsEngine
    from deltaguard.engines.discovery import read_table_config
    from deltaguard.engines.errors import DeltaConflictError
    from deltaguard.engines.sql_translate import translate

    engine = DeltaRsEngine()
    base = str(workdir / "base")
    _table(base, case.partition_type)
    config = read_table_config(base)
    profile = engine.profile()
    writes = (case.first, case.second)
    result: dict[str, Any] = {"case": case.to_json()}
    try:
        ops = [classify_sql(w.sql(f"delta.`{base}`")).operation for w in writes]
        verdicts = [decide(ops[1], [ops[0]], config, profile), decide(ops[0], [ops[1]], config, profile)]
    except ValueError as error:
        result.update(verdict="unclassified", unsound=False, detail=str(error)[:200])
        shutil.rmtree(base, ignore_errors=True)
        return result
    admitted = not any(v.conflict for v in verdicts)
    result["verdict"] = "no_conflict" if admitted else "conflict"
    result["reason"] = verdicts[0].reasons[0][:300] if verdicts[0].reasons else ""

    def run(order: tuple[int, int], stale: bool) -> tuple[list[str], list[str]]:
        path = str(workdir / f"{'c' if stale else 's'}{order[0]}")
        shutil.rmtree(path, ignore_errors=True)
        shutil.copytree(base, path)
        handles = [engine.open_table(path), engine.open_table(path)] if stale else [None, None]
        outcomes = []
        for i in order:
            try:
                engine.write(path, translate(writes[i].sql(f"delta.`{path}`")), snapshot=handles[i])
                outcomes.append("ok")
            except DeltaConflictError as error:
                outcomes.append(f"conflict: {str(error)[:160]}")
            except Exception as error:  # the engine refusing the write is an outcome too
                outcomes.append(f"error: {type(error).__name__}: {str(error)[:160]}")
        rows = _rows(path)
        shutil.rmtree(path, ignore_errors=True)
        return outcomes, rows

    serial = {order: run(order, stale=False) for order in ((0, 1), (1, 0))}
    concurrent = {order: run(order, stale=True) for order in ((0, 1), (1, 0))}
    shutil.rmtree(base, ignore_errors=True)
    serial_ok = all(all(o == "ok" for o in outcomes) for outcomes, _ in serial.values())
    serial_rows = [rows for _, rows in serial.values()]
    harmful = [
        f"{order}: {outcomes}"
        for order, (outcomes, rows) in concurrent.items()
        if any(o != "ok" for o in outcomes) or rows not in serial_rows
    ]
    result["engine"] = {str(order): outcomes for order, (outcomes, _) in concurrent.items()}
    result["executed"] = serial_ok
    result["engine_allows"] = serial_ok and not harmful
    result["unsound"] = admitted and serial_ok and bool(harmful)
    return result


def run_cases(seed: int, count: int) -> dict[str, Any]:
    """Check ``count`` cases from ``seed``; a JSON-ready summary with every unsound case."""
    summary: dict[str, Any] = {"seed": seed, "cases": 0, "executed": 0, "admitted": 0, "engine_allows": 0}
    summary.update(admitted_and_engine_allows=0, unsound=[])
    with tempfile.TemporaryDirectory() as scratch:
        for case in generate(seed, count):
            result = check(case, Path(scratch))
            summary["cases"] += 1
            summary["executed"] += bool(result.get("executed"))
            summary["admitted"] += result.get("verdict") == "no_conflict"
            summary["engine_allows"] += bool(result.get("engine_allows"))
            summary["admitted_and_engine_allows"] += result.get("verdict") == "no_conflict" and bool(
                result.get("engine_allows")
            )
            if result["unsound"]:
                summary["unsound"].append(result)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.fuzz.partition_types", description=__doc__)
    parser.add_argument("--seed", type=int, default=0, help="random seed of the cases")
    parser.add_argument("--cases", type=int, default=100, help="how many cases")
    args = parser.parse_args(argv)
    summary = run_cases(args.seed, args.cases)
    json.dump(summary, sys.stdout, indent=2, default=str)
    print()
    return 1 if summary["unsound"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
