"""Predicates that hold for every row, whatever the row: ``1 = 1``, ``TRUE``, ``NOT FALSE``, ``c IS NULL OR c
IS NOT NULL``.

A DELETE with such a predicate deletes the whole table as surely as one without a predicate, so it needs
the same explicit consent. Only what sqlglot's simplifier reduces to the literal ``TRUE`` counts: a
predicate it cannot reduce (``x = x``, which is NULL on a NULL ``x``; ``coalesce(true, false)``) is not
claimed to be always true.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.simplify import simplify

from deltaguard.core.sql.predicates import DIALECT, parse_predicate


def always_true(sql: str) -> bool:
    """Whether the predicate ``sql`` is provably true on every row.

    :param sql: a Spark SQL predicate; text the model cannot parse or analyse is not claimed to be
        always true (its own checks refuse or report it).
    """
    try:
        tree = parse_predicate(sql).tree
    except ValueError:
        return False
    if tree is None:
        return False
    try:
        simplified = simplify(tree.copy(), dialect=DIALECT)
    except (SqlglotError, RecursionError):
        return False
    return isinstance(simplified, exp.Boolean) and simplified.this is True
