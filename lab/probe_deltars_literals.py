"""Which partitions a delta-rs DELETE of a numeric literal really rewrites, against the hand reading.

Run as a script (writes small tables under a scratch folder)::

    .venv/bin/python -m lab.probe_deltars_literals [--without-fraction-rule] [--out FILE]

For each partition type (BYTE, SHORT, INT, BIGINT, DATE, TIMESTAMP, BOOLEAN, each with a NULL partition),
each literal spelling in :data:`LITERALS` and each comparison shape in :data:`SHAPES`, one DELETE runs
through :class:`~deltaguard.engines.deltars.engine.DeltaRsEngine` on a fresh copy of the table, and the
partitions its commit removed files from are read from the Delta log. For every removed partition the
model is asked, with the hand reading alone, about the DELETE beside a DELETE of that one partition: the
engine's touch makes that pair conflict, so a ``no_conflict`` is a hole. ``--without-fraction-rule`` takes
out the rule that an integer partition compared with a number that is not whole separates nothing (ADR 0003
fact 13), to show what it closes. Prints the holes, the count and the refusals by class.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import itertools
import json
import shutil
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
#: partition type -> (Arrow type, the table's partition values, NULL included)
TYPES: dict[str, tuple[pa.DataType, list[Any]]] = {
    "byte": (pa.int8(), [0, 1, 2, 3, -1, 44, 127, -128, None]),
    "short": (pa.int16(), [0, 1, 2, 3, -1, 44, 32767, -32768, None]),
    "integer": (pa.int32(), [0, 1, 2, 3, -1, 10, -2147483648, 2147483647, None]),
    "long": (pa.int64(), [0, 1, 2, 3, -1, 10, -9223372036854775808, None]),
    "date": (pa.date32(), [dt.date(1970, 1, 1), dt.date(1970, 1, 2), dt.date(2024, 1, 1), None]),
    "timestamp": (
        pa.timestamp("us", tz="UTC"),
        [_EPOCH, _EPOCH + dt.timedelta(seconds=1), _EPOCH + dt.timedelta(days=1), None],
    ),
    "boolean": (pa.bool_(), [True, False, None]),
}
#: literal spellings: fractions, whole numbers in other forms, typed numbers, arithmetic, overflows, text
LITERALS: tuple[str, ...] = (
    "1.5", "0.5", "-0.5", "+1.5", ".5", "1.0", "1.50", "01.5", "1e0", "1E1", "10e-1", "15e-1", "1e-1", "1.5e0",
    "1.5D", "1.5BD", "3/2", "1 + 0.5", "CAST(1.5 AS DOUBLE)", "CAST(1.5 AS INT)", "300", "-129", "32768",
    "2147483648", "9223372036854775808", "19723", "86400", "'1.5'", "'1.0'", "' 1'", "1", "0", "-1", "TRUE",
)  # fmt: skip
#: comparison shapes a literal is placed in
SHAPES: tuple[str, ...] = (
    "p = {l}", "p <> {l}", "p < {l}", "p > {l}", "p <= {l}", "p >= {l}", "p IN ({l}, 3)", "p BETWEEN 0 AND {l}",
)  # fmt: skip


def _literal(value: Any, kind: str) -> str:
    if kind == "date":
        return f"DATE '{value.isoformat()}'"
    if kind == "timestamp":
        return f"TIMESTAMP '{value.strftime('%Y-%m-%d %H:%M:%S.%f')}+00:00'"
    if kind == "boolean":
        return "true" if value else "false"
    return str(value)


def _point(value: Any, kind: str) -> str:
    return "p IS NULL" if value is None else f"p = {_literal(value, kind)}"


def _logged(value: Any, kind: str) -> str | None:
    """The text delta-rs logs for a partition value (``None`` for NULL)."""
    if value is None:
        return None
    if kind == "timestamp":
        return str(value.strftime("%Y-%m-%d %H:%M:%S.%f"))
    if kind == "boolean":
        return "true" if value else "false"
    return value.isoformat() if kind == "date" else str(value)


def probe(root: Path) -> dict[str, Any]:
    """Run every DELETE; the holes (the hand reading's ``no_conflict`` beside a removed partition)."""
    from deltalake import write_deltalake

    from deltaguard.core.model import pair_verdict
    from deltaguard.core.operations import Operation, OperationKind
    from deltaguard.engines.deltars.engine import DeltaRsEngine
    from deltaguard.engines.specs import DeleteSpec

    engine = DeltaRsEngine()
    profile = engine.profile()
    holes: list[dict[str, str]] = []
    refused: Counter[str] = Counter()
    deletes = touched = 0
    for kind, (arrow, values) in TYPES.items():
        base = root / kind
        data = pa.table({"id": pa.array(range(len(values)), pa.int64()), "p": pa.array(values, arrow)})
        write_deltalake(str(base), data, partition_by=["p"])
        config = dataclasses.replace(engine.table_config(str(base)), meaning=None)
        for shape, literal in itertools.product(SHAPES, LITERALS):
            predicate = shape.format(l=literal)
            deletes += 1
            work = root / "work"
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(base, work)
            try:
                engine.write(str(work), DeleteSpec(predicate=predicate))
            except Exception as error:  # refused before anything is written
                refused[f"{kind}: {type(error).__name__}"] += 1
                continue
            log = work / "_delta_log" / f"{1:020d}.json"
            if not log.exists():
                continue
            actions = [json.loads(line) for line in log.read_text().splitlines()]
            removed = {a["remove"]["partitionValues"].get("p") for a in actions if "remove" in a}
            for value in values:
                if _logged(value, kind) not in removed:
                    continue
                touched += 1
                verdict = pair_verdict(
                    Operation(OperationKind.DELETE, predicate),
                    Operation(OperationKind.DELETE, _point(value, kind)),
                    config,
                    profile,
                )
                if not verdict.conflict:
                    holes.append({"type": kind, "delete": predicate, "removed": _point(value, kind)})
    return {
        "deletes": deletes,
        "touched_partitions": touched,
        "holes": holes,
        "refused": dict(refused.most_common()),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.probe_deltars_literals", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--without-fraction-rule", action="store_true", help="take out ADR 0003 fact 13's fraction rule"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.without_fraction_rule:
        from deltaguard.core.rules import deltars

        deltars.fractional_columns = lambda p: frozenset()  # type: ignore[assignment]
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as scratch:
        report = probe(Path(scratch))
    report["without_fraction_rule"] = args.without_fraction_rule
    for hole in report["holes"]:
        print(json.dumps(hole))
    print(
        f"{report['deletes']} DELETEs, {report['touched_partitions']} removed partitions asked about, "
        f"{len(report['holes'])} kept apart by the hand reading; refused: {report['refused']}"
    )
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 1 if report["holes"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
