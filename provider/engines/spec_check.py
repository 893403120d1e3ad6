"""What a write spec's own ``validate`` method checks with: the table it will write and the SQL parsers.

Every spec class carries its checks (:meth:`deltaguard.engines.specs.WriteSpec.validate`); this module gives
them the table they will write and the shared helpers, and imports no spec (the specs import it). Every
problem raises :class:`~deltaguard.engines.errors.InvalidWriteError` with a message that says what to fix.

SQL snippets are parsed twice: with sqlglot in the dialect the engine runs them in (syntax, one expression,
unqualified column names when the table's columns are known), and with the conflict model's own parser
(:func:`deltaguard.core.sql.predicates.parse_predicate`) for predicates, since a predicate the model cannot
read could only be judged wrong. The engine remains the final judge of semantics.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from deltaguard.core.sql.limits import sql_size_problem
from deltaguard.core.sql.literals import SPARK
from deltaguard.core.sql.predicates import parse_predicate
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.errors import InvalidWriteError


@dataclass(frozen=True)
class SpecCheck:
    """The table one spec is checked against.

    :param config: the table's configuration; ``None`` when unknown (a Spark write checks its spec again
        just before it runs, without reading the table): checks that need the table are skipped.
    :param partitions: the partition columns rows will be written under (the table's, or those the spec
        creates it with); ``None`` when unknown.
    :param columns: the table's column names when known (enables column-name checks).
    :param dialect: sqlglot dialect the snippets are written in (Spark SQL, as the conflict model reads them).
    """

    config: TableConfig | None = None
    partitions: tuple[str, ...] | None = None
    columns: Collection[str] | None = None
    dialect: str = SPARK

    @property
    def exists(self) -> bool | None:
        """Whether the table exists (``None``: unknown)."""
        return None if self.config is None else self.config.exists

    @property
    def uri(self) -> str:
        return (self.config.uri if self.config is not None else None) or "the table"

    def known_columns(self) -> set[str] | None:
        """The table's column names, lower-cased (``None``: unknown)."""
        return None if self.columns is None else {c.lower() for c in self.columns}

    def sql(self, text: Any, what: str, *, with_columns: bool = False) -> exp.Expr:
        """Parse one SQL expression in :attr:`dialect` (see :func:`parse_sql`)."""
        return parse_sql(text, what, self.dialect, self.columns if with_columns else None)

    def predicate(self, text: Any, what: str, *, with_columns: bool = True) -> None:
        """A predicate both the engine's dialect and the conflict model can read."""
        self.sql(text, what, with_columns=with_columns)
        try:
            parse_predicate(text)
        except ValueError as exc:  # PredicateError is a ValueError
            raise InvalidWriteError(f"{what} {text!r} cannot be parsed: {exc}") from None

    def partition_keys(self, values: Mapping[str, Any], what: str) -> None:
        """Every key of ``values`` must be a partition column (Delta names are case-insensitive)."""
        if self.partitions is None or not values:
            return
        known = {p.lower() for p in self.partitions}
        unknown = [key for key in values if key.lower() not in known]
        if unknown:
            partitioned = ", ".join(self.partitions) or "no column (the table is not partitioned)"
            raise InvalidWriteError(
                f"{what} name {', '.join(map(repr, unknown))}, but {self.uri} is partitioned by {partitioned}: "
                "not a partition column"
            )


def parse_sql(text: Any, what: str, dialect: str, columns: Collection[str] | None = None) -> exp.Expr:
    """Parse one SQL expression (not a statement), checking unqualified column names when known.

    :raises InvalidWriteError: when ``text`` is empty, does not parse, is several statements or a query/DDL.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidWriteError(f"{what} is empty: it must be a non-empty SQL expression, got {text!r}")
    too_large = sql_size_problem(text, dialect)
    if too_large is not None:
        raise InvalidWriteError(f"{what} {_shown(text)} is too large to parse: {too_large}")
    try:
        parsed = sqlglot.parse(text, read=dialect)
    except RecursionError:
        # sqlglot recurses about a dozen frames per parenthesis: refused, not a crash Airflow would retry.
        raise InvalidWriteError(f"{what} {_shown(text)} is nested too deeply to parse") from None
    except SqlglotError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        language = "Spark SQL" if dialect == SPARK else f"{dialect} SQL"
        raise InvalidWriteError(
            f"{what} {text!r} cannot be parsed: it does not parse as {language} ({reason})"
        ) from exc
    if len(parsed) != 1 or parsed[0] is None:
        raise InvalidWriteError(f"{what} must be one SQL expression, not several statements: {text!r}")
    expression: exp.Expr = parsed[0]
    if isinstance(expression, exp.Query | exp.DDL | exp.DML | exp.Command):
        raise InvalidWriteError(f"{what} must be an expression, not a statement: {text!r}")
    if columns is not None:
        known = {c.lower() for c in columns}
        for column in expression.find_all(exp.Column):
            if not column.table and column.name.lower() not in known:
                raise InvalidWriteError(f"{what} references unknown column {column.name!r}: {text!r}")
    return expression


def _shown(text: str, limit: int = 200) -> str:
    """``text`` for a one-line message, cut at ``limit`` characters."""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "...")


def check_properties(properties: Mapping[str, Any]) -> None:
    """Table properties are non-empty string keys to string values."""
    for key, value in properties.items():
        if not isinstance(key, str) or not key.strip() or not isinstance(value, str):
            raise InvalidWriteError(f"table properties are string -> string, got {key!r}: {value!r}")
