"""Render Python values as SQL literals safely, with sqlglot, for the dialect that will read them.

Partition values reach SQL text in two places: the explicit target predicate the engine adds to a MERGE
condition, and the predicate the conflict model reasons about. A value such as ``x' OR '1'='1`` must stay
one literal, so values are never formatted into SQL by hand.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from decimal import Decimal

from sqlglot import exp

#: Spark SQL (delta-spark, Databricks, and the conflict model's parser).
SPARK = "spark"
#: DataFusion, which parses delta-rs predicates: standard SQL strings (no backslash escapes).
DATAFUSION = "postgres"


def sql_literal(value: object, dialect: str = SPARK) -> str:
    """Render one Python value as a SQL literal.

    :param value: ``str``, ``int``, ``float``, ``bool``, ``Decimal``, ``date``, ``datetime`` or ``None``.
    :param dialect: a sqlglot dialect name; decides how quotes and backslashes are escaped.
    :raises TypeError: for any other type.
    """
    return _literal_expression(value).sql(dialect=dialect)


def _literal_expression(value: object) -> exp.Expression:
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


def column_equals(column: str, value: object, qualifier: str | None = None) -> exp.Expression:
    """``qualifier.column = value`` (``IS NULL`` for ``None``) as a sqlglot expression."""
    col = exp.column(column, table=qualifier, quoted=not column.isidentifier())
    if value is None:
        return exp.Is(this=col, expression=exp.Null())
    return exp.EQ(this=col, expression=_literal_expression(value))


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
    condition: str, values: Mapping[str, object], target_alias: str = "t", dialect: str = SPARK
) -> str:
    """Add explicit target partition conjuncts to a MERGE condition.

    The seed's advice: ``s.date = t.date`` restricts nothing, ``t.date = '2024-01-01'`` does. The original
    condition is parenthesised so an ``OR`` in it cannot swallow the added conjuncts.

    :param condition: the MERGE ``ON`` condition.
    :param values: target partition column -> value; empty returns the condition unchanged.
    :param target_alias: the target table's alias in the condition.
    :param dialect: the sqlglot dialect to render for.
    """
    if not values:
        return condition
    return f"({condition}) AND {partition_predicate(values, qualifier=target_alias, dialect=dialect)}"
