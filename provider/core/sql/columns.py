"""Which columns a predicate or expression reads, and which column an assignment sets, read with sqlglot's
identifier rules."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from deltaguard.core.sql.predicates import DIALECT, Predicate


def referenced_columns(p: Predicate) -> frozenset[str]:
    """Lower-cased, unqualified names of the columns a predicate uses (outside any subquery).

    :param p: the predicate.
    """
    if p.tree is None:
        return frozenset()
    names = set()
    for node in p.tree.walk(prune=lambda n: isinstance(n, exp.Subquery | exp.Query)):
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            names.add(node.name.lower())
    return frozenset(names)


def expression_columns(sql: str) -> frozenset[str] | None:
    """Lower-cased names of the columns a scalar expression reads (struct paths by their first part), or
    ``None`` when it cannot be parsed (a caller must then assume it reads any column).

    :param sql: a Spark SQL expression, such as a generation expression ``CAST(ts AS DATE)``.
    """
    return _expression_columns_cached(sql)


@functools.lru_cache(maxsize=1024)
def _expression_columns_cached(sql: str) -> frozenset[str] | None:
    try:
        tree = sqlglot.parse_one(sql, read=DIALECT)
    except (SqlglotError, RecursionError):
        return None
    names = set()
    for node in tree.walk():
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            parts = [part.name for part in node.parts]
            names.add(parts[0].lower() if parts else node.name.lower())
        elif isinstance(node, exp.Star):
            return None
    return frozenset(names)


@dataclass(frozen=True)
class AssignedColumn:
    """What an assignment's column text names, read as Spark reads an identifier path.

    :param names: the lower-cased top-level column names the assignment may change: for one identifier
        (```a.b``` quoted, or ``date``) that column; for a path (``meta.date``, or the unquoted key ``a.b``
        of a typed spec) every part and the whole dotted name, since it may be a struct field of its first
        part or a column named with dots. A superset is only less precise, never unsound.
    :param column: the one column it sets when it is a single identifier (lower-cased), else ``None``.
    """

    names: frozenset[str]
    column: str | None


def assigned_column(text: str) -> AssignedColumn:
    """Read an assignment's column (``UPDATE ... SET <column> = ...``) with sqlglot's identifier rules.

    ``*`` (``SET *``) names every column: ``names`` is ``{"*"}``.

    :param text: the column as the statement or a spec spells it.
    """
    return _assigned_cached(text)


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def column_text(parts: Iterable[str]) -> str:
    """An identifier path as Spark SQL text: each part quoted with backticks unless it is a plain name."""
    return ".".join(
        part if _PLAIN_NAME.fullmatch(part) else "`" + part.replace("`", "``") + "`" for part in parts
    )


@functools.lru_cache(maxsize=4096)
def _assigned_cached(text: str) -> AssignedColumn:
    raw = text.strip()
    if raw == "*":
        return AssignedColumn(frozenset({"*"}), None)
    loose = {raw.lower(), raw.strip("` ").lower(), *(part.strip("` ").lower() for part in raw.split("."))}
    try:
        node = sqlglot.parse_one(raw, read=DIALECT)
    except (SqlglotError, RecursionError):
        node = None
    if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
        return AssignedColumn(frozenset(loose), None)  # not an identifier path: every reading of it
    parts = [part.name.lower() for part in node.parts]
    if len(parts) == 1:
        return AssignedColumn(frozenset(parts), parts[0])
    return AssignedColumn(frozenset({*parts, ".".join(parts)}) | loose, None)
