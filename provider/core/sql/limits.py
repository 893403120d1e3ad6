"""How much SQL deltaguard agrees to parse: a bound on text length and on token count, checked before sqlglot.

sqlglot's parser is pure Python: its time and memory grow with the number of tokens (about 0.8 s and
hundreds of MB for 80,000 tokens on a quiet machine, measured with sqlglot 30.31; a 10 MB predicate of
300,000 ORs ran for minutes). Every SQL text a user gives (a predicate, a MERGE condition, an UPDATE
expression, a statement for ``deltaguard check``) is measured here first, so the ``check`` command, the
operators and the lease manager refuse the same oversized input at once, with one clear line.

The bounds are far above any hand-written or templated condition (a 5,000-value ``IN`` list is about
10,000 tokens) and low enough that a text at the bound parses in well under a second. Nesting depth is
bounded after parsing (:data:`deltaguard.core.sql.predicates.MAX_DEPTH`): a valid but deep predicate is
analysed as the whole table, which is sound.
"""

from __future__ import annotations

from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError

#: The longest SQL text parsed, in characters (checked before anything else: no tokenizer runs on more).
MAX_SQL_CHARS = 100_000
#: The most tokens one SQL text may hold (every node of the parsed tree comes from at least one token).
MAX_SQL_TOKENS = 10_000


def sql_size_problem(text: str, dialect: str = "spark") -> str | None:
    """Why ``text`` is too large to parse, or ``None`` when it is within the bounds.

    A text that does not tokenize is left to the parser, which says why in its own words.

    :param text: the SQL text.
    :param dialect: the sqlglot dialect it is written in.
    """
    if len(text) > MAX_SQL_CHARS:
        return f"it is {len(text):,} characters long; deltaguard parses at most {MAX_SQL_CHARS:,}"
    try:
        tokens = Dialect.get_or_raise(dialect).tokenize(text)
    except SqlglotError:
        return None
    if len(tokens) > MAX_SQL_TOKENS:
        return (
            f"it holds {len(tokens):,} SQL tokens; deltaguard parses at most {MAX_SQL_TOKENS:,} "
            "(split the write, or name the rows by a partition or a join)"
        )
    return None


def shown(text: str, limit: int = 120) -> str:
    """``text`` quoted for a one-line message: its whitespace runs made one space, cut after ``limit`` characters.

    :param text: the SQL text.
    :param limit: how many characters are shown.
    """
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "...")
