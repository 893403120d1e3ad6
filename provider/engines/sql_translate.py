"""Translate one Spark SQL write statement into an engine-neutral spec, where a plain spec can express it.

Used by :class:`~deltaguard.operators.sql.DeltaSqlOperator`: delta-rs cannot run Spark SQL, so a statement
runs there only when it maps onto a delta-rs call (DELETE, UPDATE, OPTIMIZE with partition equalities,
ALTER TABLE SET TBLPROPERTIES / ADD COLUMNS, INSERT ... VALUES with a column list). Anything else (MERGE
from another table, INSERT ... SELECT, CREATE ... AS SELECT, ...) returns ``None`` and the caller refuses it
or hands it to Spark. Pure: sqlglot only.
"""

from __future__ import annotations

import re
from typing import Any

import sqlglot
from sqlglot import exp

from deltaguard.engines import specs
from deltaguard.engines.errors import InvalidWriteError

_DIALECT = "spark"
_OPTIMIZE = re.compile(
    r"^\s*OPTIMIZE\s+(?P<table>\S+)(?:\s+WHERE\s+(?P<where>.*?))?(?:\s+ZORDER\s+BY\s*\(?(?P<z>[^)]*)\)?)?\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)


def _sql(node: exp.Expression | None) -> str | None:
    return node.sql(dialect=_DIALECT) if node is not None else None


def _literal_value(node: exp.Expression) -> Any:
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        return float(text) if any(c in text for c in ".eE") else int(text)
    if isinstance(node, exp.Boolean):
        return node.this
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        return -_literal_value(node.this)
    raise ValueError(f"not a literal: {node.sql(dialect=_DIALECT)}")


def _equalities(where: str) -> dict[str, Any] | None:
    """``a = 1 AND b = 'x'`` -> ``{"a": 1, "b": "x"}``; ``None`` for anything else."""
    try:
        tree = sqlglot.parse_one(where, read=_DIALECT)
    except sqlglot.errors.ParseError:
        return None
    out: dict[str, Any] = {}
    for conjunct in tree.flatten() if isinstance(tree, exp.And) else [tree]:
        if not (isinstance(conjunct, exp.EQ) and isinstance(conjunct.this, exp.Column)):
            return None
        try:
            out[conjunct.this.name] = _literal_value(conjunct.expression)
        except ValueError:
            return None
    return out


def _translate_optimize(sql: str) -> specs.WriteSpec | None:
    match = _OPTIMIZE.match(sql)
    if not match:
        return None
    filters: dict[str, Any] = {}
    if match.group("where"):
        parsed = _equalities(match.group("where"))
        if parsed is None:
            return None
        filters = parsed
    zorder = tuple(c.strip().strip("`") for c in (match.group("z") or "").split(",") if c.strip())
    return specs.OptimizeSpec(zorder_by=zorder, partition_filters=filters)


def _translate_insert(tree: exp.Insert) -> specs.WriteSpec | None:
    values = tree.expression
    target = tree.this
    if tree.args.get("overwrite") or not isinstance(values, exp.Values) or not isinstance(target, exp.Schema):
        return None
    import pyarrow as pa

    columns = [col.name for col in target.expressions]
    rows: list[list[Any]] = []
    for row in values.expressions:
        cells = row.expressions if isinstance(row, exp.Tuple) else [row]
        if len(cells) != len(columns):
            raise InvalidWriteError(f"INSERT row has {len(cells)} values for {len(columns)} columns")
        try:
            rows.append([_literal_value(c) for c in cells])
        except ValueError:
            return None
    data = pa.table({name: [r[i] for r in rows] for i, name in enumerate(columns)})
    return specs.AppendSpec(source=data)


def translate(sql: str) -> specs.WriteSpec | None:
    """The spec equivalent to ``sql``, or ``None`` when no plain spec expresses it.

    :param sql: one Spark SQL write statement.
    :raises InvalidWriteError: when the statement is malformed in a way no engine would accept.
    """
    if _OPTIMIZE.match(sql):
        return _translate_optimize(sql)
    try:
        tree = sqlglot.parse_one(sql, read=_DIALECT)
    except sqlglot.errors.ParseError as exc:
        raise InvalidWriteError(f"cannot parse SQL: {exc}") from None
    if isinstance(tree, exp.Delete):
        return specs.DeleteSpec(predicate=_sql(tree.args.get("where") and tree.args["where"].this))
    if isinstance(tree, exp.Update):
        if tree.args.get("from") or tree.args.get("joins"):
            return None
        updates: dict[str, str] = {}
        for assignment in tree.expressions:
            if not isinstance(assignment, exp.EQ):
                return None
            updates[assignment.this.sql(dialect=_DIALECT)] = assignment.expression.sql(dialect=_DIALECT)
        where = tree.args.get("where")
        return specs.UpdateSpec(updates=updates, predicate=_sql(where.this) if where else None)
    if isinstance(tree, exp.Alter) and len(tree.args.get("actions") or []) == 1:
        action = tree.args["actions"][0]
        if isinstance(action, exp.AlterSet):
            props: dict[str, str] = {}
            for holder in action.expressions:
                for prop in holder.expressions if isinstance(holder, exp.Properties) else [holder]:
                    if not isinstance(prop, exp.Property):
                        return None
                    props[
                        str(_literal_value(prop.this) if isinstance(prop.this, exp.Literal) else prop.name)
                    ] = str(_literal_value(prop.args["value"]))
            return specs.SetPropertiesSpec(properties=props) if props else None
        if isinstance(action, exp.Schema):
            cols = {
                d.name: d.args["kind"].sql(dialect=_DIALECT).lower()
                for d in action.expressions
                if isinstance(d, exp.ColumnDef)
            }
            return specs.AddColumnsSpec(columns=cols) if len(cols) == len(action.expressions) else None
        return None
    if isinstance(tree, exp.Insert):
        return _translate_insert(tree)
    return None
