"""Render Python values as SQL literals safely, with sqlglot, for the dialect that will read them.

Partition values reach SQL text in two places: the explicit target predicate the engine adds to a MERGE
condition, and the predicate the conflict model reasons about. A value such as ``x' OR '1'='1`` must stay
one literal, so values are never formatted into SQL by hand.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from decimal import Decimal

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

#: Spark SQL (delta-spark, Databricks, and the conflict model's parser).
SPARK = "spark"
#: DataFusion, which parses delta-rs predicates: standard SQL strings (no backslash escapes).
DATAFUSION = "postgres"


class RenderError(ValueError):
    """SQL the executing engine would not read exactly as the conflict model read it."""


def render_sql(text: str, dialect: str) -> str:
    """Render a Spark SQL expression, read exactly as the conflict model reads it, in ``dialect``.

    The model reads every condition in Spark SQL (backslash escapes in strings); delta-rs executes
    DataFusion SQL (none), so ``day = 'x\\' OR true --'`` is one partition to the model and every row to
    delta-rs when handed over as text. Rendering the one parse for the executing engine, and checking that
    the engine's dialect reads the rendering back as the same tree, makes what runs what was judged.

    :param text: a Spark SQL expression (a condition, or the value of an assignment).
    :param dialect: the executing engine's sqlglot dialect (:data:`DATAFUSION`, :data:`SPARK`).
    :raises RenderError: when the text does not parse as one expression or the rendering would be read
        differently.
    """
    if dialect == SPARK:
        return text  # Spark runs the very text the model read
    try:
        tree = sqlglot.parse_one(text, read=SPARK).transform(_exact_date_cast)
        rendered = tree.sql(dialect=dialect)
        faithful = sqlglot.parse_one(rendered, read=dialect) == tree
    except (SqlglotError, RecursionError) as error:
        # in the user's terms: not sqlglot's class names
        why = (
            "nested too deeply" if isinstance(error, RecursionError) else "not expressible in its SQL dialect"
        )
        raise RenderError(f"cannot render {text!r} for the engine: {why}") from None
    if tree.find(exp.Select, exp.Subquery, exp.Exists) is not None:
        # delta-rs 1.x panics on a DELETE predicate with a subquery (a pyo3 PanicException, which escapes
        # error handling), and its predicates are row filters on the target only.
        raise RenderError(f"{text!r} holds a subquery, which the engine's predicates do not support")
    if tree.find(exp.Collate) is not None:
        # Spark 4 reads ``name COLLATE UTF8_LCASE = 'x'``; DataFusion (delta-rs 1.x) refuses the COLLATE node
        # only when it plans the write ("Unsupported ast node in sqltorel: Collate"), measured on deltalake
        # 1.6.6. Refused here, the task fails on its input before it takes a lease.
        raise RenderError(f"{text!r} uses COLLATE, which the engine's SQL (DataFusion) does not support")
    if not faithful:
        raise RenderError(
            f"{text!r} cannot be rendered faithfully in the engine's SQL dialect ({rendered!r})"
        )
    return rendered


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _exact_date_cast(node: exp.Expression) -> exp.Expression:
    """Spark's ``CAST('2024-01-02' AS DATE)`` (and ``DATE '2024-01-02'``, which sqlglot writes as that cast) as
    a plain cast when the string is a valid ``yyyy-mm-dd`` date.

    Spark SQL reads a cast as a try-cast (a malformed string gives NULL, not an error), which DataFusion
    spells differently; for a well-formed date both give the same value, so the one reading is kept.
    """
    if (
        isinstance(node, exp.TryCast)
        and isinstance(node.this, exp.Literal)
        and node.this.is_string
        and node.to.is_type(exp.DataType.Type.DATE)
        and _ISO_DATE.fullmatch(node.this.this)
    ):
        try:
            dt.date.fromisoformat(node.this.this)
        except ValueError:
            return node
        return exp.Cast(this=node.this.copy(), to=node.to.copy())
    return node


def sql_literal(value: object, dialect: str = SPARK) -> str:
    """Render one Python value as a SQL literal.

    :param value: ``str``, ``int``, ``float``, ``bool``, ``Decimal``, ``date``, ``datetime`` or ``None``.
    :param dialect: a sqlglot dialect name; decides how quotes and backslashes are escaped.
    :raises TypeError: for any other type.
    """
    return literal_expression(value).sql(dialect=dialect)


def literal_expression(value: object) -> exp.Expression:
    """One Python value as a sqlglot literal (see :func:`sql_literal` for the types)."""
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int | float | Decimal):
        return exp.Literal.number(value)
    if isinstance(value, dt.datetime):
        return exp.Cast(this=exp.Literal.string(value.isoformat(sep=" ")), to=exp.DataType.build("timestamp"))
    if isinstance(value, dt.date):
        return exp.Cast(this=exp.Literal.string(value.isoformat()), to=exp.DataType.build("date"))
    if isinstance(value, str):
        return exp.Literal.string(value)
    raise TypeError(f"cannot render {type(value).__name__} value {value!r} as a SQL literal")


def partition_value_text(value: object) -> str:
    """A partition value as Delta stores it in the log (strings; booleans lower-case): what a source value
    cast to a string must equal to belong to the declared partition (the engines' write-time checks)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    return value.isoformat() if isinstance(value, dt.date) else str(value)


def column_equals(column: str, value: object, qualifier: str | None = None) -> exp.Expression:
    """``qualifier.column = value`` (``IS NULL`` for ``None``) as a sqlglot expression."""
    col = exp.column(column, table=qualifier, quoted=not column.isidentifier())
    if value is None:
        return exp.Is(this=col, expression=exp.Null())
    return exp.EQ(this=col, expression=literal_expression(value))


def partition_predicate(
    values: Mapping[str, object], qualifier: str | None = None, dialect: str = SPARK
) -> str:
    """``date = '2024-01-01' AND country = 'DE'`` for a mapping of partition values.

    :param values: partition column -> value; must not be empty.
    :param qualifier: optional table alias to qualify the columns with.
    :param dialect: the sqlglot dialect to render for.
    """
    if not values:
        raise ValueError("partition_predicate needs at least one partition value")
    conjuncts = [column_equals(col, val, qualifier) for col, val in values.items()]
    return exp.and_(*conjuncts).sql(dialect=dialect)


def merge_condition_with_partitions(
    condition: str,
    values: Mapping[str, object],
    target_alias: str = "t",
    dialect: str = SPARK,
    extra: str | None = None,
) -> str:
    """Add explicit target partition conjuncts to a MERGE condition.

    The Databricks page's advice: ``s.date = t.date`` restricts nothing, ``t.date = '2024-01-01'`` does. The original
    condition is parenthesised so an ``OR`` in it cannot swallow the added conjuncts.

    :param condition: the MERGE ``ON`` condition.
    :param values: target partition column -> value; empty returns the condition unchanged.
    :param target_alias: the target table's alias in the condition.
    :param dialect: the sqlglot dialect to render for; the condition (Spark SQL) is rendered for it too.
    :param extra: one more conjunct, already rendered for ``dialect`` (the source-derived scope of ADR 0019,
        :meth:`deltaguard.core.merge_scope.MergeScope.conjunct`, built from literals like the partition values).
    :raises RenderError: when the condition cannot be rendered faithfully for ``dialect``.
    """
    rendered = render_sql(condition, dialect)
    parts = [f"({rendered})"]
    if values:
        parts.append(partition_predicate(values, qualifier=target_alias, dialect=dialect))
    if extra:
        parts.append(f"({extra})")
    return rendered if len(parts) == 1 else " AND ".join(parts)
