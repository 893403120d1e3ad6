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
        tree = (
            sqlglot.parse_one(text, read=SPARK).transform(_exact_date_cast).transform(_exact_timestamp_cast)
        )
        tree = tree.transform(_arrow_timestamp) if dialect == DATAFUSION else tree
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


def _exact_timestamp_cast(node: exp.Expression) -> exp.Expression:
    """Spark's ``CAST('2024-01-02 10:00:00' AS TIMESTAMP)`` (a try-cast to sqlglot) as a plain cast when the
    string is a well-formed timestamp (as :func:`_exact_date_cast` for dates; ``TIMESTAMP '…'`` is a plain
    cast already)."""
    if isinstance(node, exp.TryCast) and _timestamp_text(node) is not None:
        return exp.Cast(this=node.this.copy(), to=node.to.copy())
    return node


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


#: A timestamp string both engines read the same way: a date, or a date and time to the microsecond, with an
#: optional zone offset (a string without one is in the session's zone, UTC for delta-rs; ADR 0003 fact 12).
_PLAIN_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)?(Z|[+-]\d{2}:\d{2})?")
_UTC_MICROS = 'Timestamp(Microsecond, Some("UTC"))'
#: The Arrow types of Delta's timestamp columns in delta-rs, by the type a literal is cast to; ``None``: a
#: Python ``datetime`` value (:func:`literal_expression`), whose column may be either.
_ARROW_TIMESTAMP: dict[exp.DType, str | None] = {
    exp.DataType.Type.TIMESTAMPTZ: _UTC_MICROS,
    exp.DataType.Type.TIMESTAMPLTZ: _UTC_MICROS,
    exp.DataType.Type.TIMESTAMPNTZ: "Timestamp(Microsecond, None)",
    exp.DataType.Type.TIMESTAMP: None,
}


def _timestamp_text(node: exp.Expression) -> tuple[dt.datetime, exp.DType] | None:
    """The instant and target type of a cast of a well-formed timestamp string, else ``None``."""
    if not (
        isinstance(node, exp.Cast | exp.TryCast)
        and isinstance(node.this, exp.Literal)
        and node.this.is_string
        and node.to.this in _ARROW_TIMESTAMP
        and _PLAIN_TIMESTAMP.fullmatch(node.this.this)
    ):
        return None
    try:
        return dt.datetime.fromisoformat(node.this.this), node.to.this
    except ValueError:
        return None


def _arrow_timestamp(node: exp.Expression) -> exp.Expression:
    """A cast of a well-formed timestamp string as a DataFusion literal of Delta's microsecond type.

    DataFusion's ``CAST('…' AS TIMESTAMP[TZ])`` is a nanosecond timestamp, and delta-rs 1.6.6 (its kernel's
    file skipping) refuses to compare that with a Delta timestamp column: "Invalid comparison operation:
    Timestamp(µs, "UTC") >= Timestamp(ns)" for every DELETE, UPDATE and MERGE naming one (measured).
    ``arrow_cast`` to microseconds is the same instant; an offset is applied first (UTC text). A Python
    ``datetime`` value becomes a plain string, which DataFusion coerces to the column's own type (measured on
    ``TIMESTAMP`` and ``TIMESTAMP_NTZ`` columns). Spark's ``CAST`` of a malformed string is NULL, so only
    well-formed strings are rewritten; a zone offset on a ``TIMESTAMP_NTZ`` is left alone.
    """
    found = _timestamp_text(node) if isinstance(node, exp.Cast) else None
    if found is None:
        return node
    moment, kind = found
    arrow = _ARROW_TIMESTAMP[kind]
    if moment.tzinfo is not None:
        if kind == exp.DataType.Type.TIMESTAMPNTZ:
            return node
        moment = moment.astimezone(dt.UTC).replace(tzinfo=None)
    text = exp.Literal.string(moment.isoformat(sep=" "))
    if arrow is None:
        return text
    return exp.Anonymous(this="arrow_cast", expressions=[text, exp.Literal.string(arrow)])


def render_tree(tree: exp.Expr, dialect: str) -> str:
    """A sqlglot expression as text for the engine that runs ``dialect`` (the one place literals meet an
    engine's SQL: DataFusion's timestamps are rewritten to Delta's microseconds, :func:`_arrow_timestamp`)."""
    if dialect == DATAFUSION:
        tree = tree.copy().transform(_exact_date_cast).transform(_arrow_timestamp)
    return tree.sql(dialect=dialect)


def sql_literal(value: object, dialect: str = SPARK) -> str:
    """Render one Python value as a SQL literal.

    :param value: ``str``, ``int``, ``float``, ``bool``, ``Decimal``, ``date``, ``datetime`` or ``None``.
    :param dialect: a sqlglot dialect name; decides how quotes and backslashes are escaped.
    :raises TypeError: for any other type.
    """
    return render_tree(literal_expression(value), dialect)


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
    return render_tree(exp.and_(*conjuncts), dialect)


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
