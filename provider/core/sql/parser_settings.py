"""String literals whose reading depends on a Spark session's parser settings.

The conflict model reads every condition as Spark SQL with its default parser settings. Spark runs the very
text it was given (the delta-rs engine runs the model's own parse, rendered for DataFusion), so a text must
mean the same under the settings of the session that runs it. Two settings change what a string literal is
(measured on Spark 4.2 with delta-spark 4.4.0):

* ``spark.sql.ansi.doubleQuotedIdentifiers``: with ANSI mode on, ``"x"`` names the column ``x`` instead of
  the text ``'x'``: ``DELETE ... WHERE p = "x"`` deleted the rows of partition ``y`` whose column ``x`` held
  ``'y'``, none of partition ``x``. With ANSI mode off it stays text.
* ``spark.sql.parser.escapedStringLiterals``: backslashes are kept, ``'a\\b'`` reads as two backslashes and
  ``'it\\'s'`` as ``it\\'s``.
"""

from __future__ import annotations

import functools

from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.tokenizer_core import TokenType

from deltaguard.core.sql.predicates import DIALECT


@functools.lru_cache(maxsize=4096)
def parser_dependent_literals(text: str | None) -> tuple[str, ...]:
    """The string literals of ``text``, as written, that the parser settings above may read otherwise:
    double-quoted ones and ones holding a backslash. Raw strings (``r'...'``) keep backslashes whatever
    the settings and are not listed.

    :param text: a Spark SQL condition or expression (``None``: none).
    :returns: the literals as written, in order; a text the tokenizer refuses is returned whole (its
        reading is not established).
    """
    if not text or ('"' not in text and "\\" not in text):
        return ()
    try:
        tokens = Dialect.get_or_raise(DIALECT).tokenize(text)
    except SqlglotError:
        return (text,)
    found: list[str] = []
    for token in tokens:
        if token.token_type is not TokenType.STRING:
            continue
        written = text[token.start : token.end + 1]
        if written.startswith('"') or "\\" in written:
            found.append(written)
    return tuple(dict.fromkeys(found))
