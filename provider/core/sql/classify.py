"""Classify one Spark SQL write statement into the :class:`~deltaguard.core.operations.Operation` it performs.

DML (INSERT, UPDATE, DELETE, MERGE) is parsed with sqlglot's Spark dialect. Delta/Databricks commands that
sqlglot only knows as opaque commands (OPTIMIZE, REORG, ALTER TABLE ... actions, REPLACE TABLE, CREATE
TABLE) are read from sqlglot's tokens, never with regular expressions over raw text, so quotes, comments and
backticks cannot fool the classifier. A statement that cannot be classified raises
:class:`SqlClassificationError`: the model never guesses what a write does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.tokenizer_core import Token, TokenType

from deltaguard.core.locations import normalise_location
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.sql.columns import column_text
from deltaguard.core.sql.limits import shown, sql_size_problem
from deltaguard.core.sql.predicates import DIALECT, PredicateError, parse_predicate


class SqlClassificationError(ValueError):
    """A SQL statement that is not exactly one Delta write deltaguard can classify."""


@dataclass(frozen=True)
class ClassifiedStatement:
    """The result of :func:`classify_sql`.

    :param operation: the write, with ``sql`` set to the original statement.
    :param table: the target table as written (``sales.daily``), or the path of ``delta.`/path```.
    """

    operation: Operation
    table: str | None


def _fail(sql: str, why: str) -> SqlClassificationError:
    return SqlClassificationError(f"cannot classify SQL {shown(sql)}: {why}")


def _tokenize(text: str, sql: str) -> list[Token]:
    try:
        return list(Dialect.get_or_raise(DIALECT).tokenize(text))
    except SqlglotError as error:
        raise _fail(sql, str(error).splitlines()[0] if str(error) else "it does not tokenize") from None


def _one_statement(sql: str) -> list[Token]:
    """The tokens of the single statement in ``sql``; a trailing semicolon is fine, two statements are not."""
    statements: list[list[Token]] = [[]]
    for token in _tokenize(sql, sql):
        if token.token_type is TokenType.SEMICOLON:
            statements.append([])
        else:
            statements[-1].append(token)
    non_empty = [tokens for tokens in statements if tokens]
    if not non_empty:
        raise SqlClassificationError("cannot classify an empty SQL statement")
    if len(non_empty) > 1:
        raise _fail(sql, f"it contains {len(non_empty)} statements; give one statement per operation")
    return non_empty[0]


def classify_sql(sql: str) -> ClassifiedStatement:
    """Classify one Spark SQL statement.

    :param sql: one INSERT / UPDATE / DELETE / MERGE / OPTIMIZE / REORG / ALTER TABLE / CREATE or REPLACE
        TABLE statement.
    :raises SqlClassificationError: for anything else, or a statement that does not parse.
    """
    if not isinstance(sql, str):
        raise SqlClassificationError(f"SQL must be text, not {type(sql).__name__}")
    too_large = sql_size_problem(sql, DIALECT)
    if too_large is not None:
        raise _fail(sql, f"too large to parse: {too_large}")
    tokens = _one_statement(sql)
    keyword = tokens[0].text.upper()
    handler = _HANDLERS.get(keyword)
    if handler is None:
        raise _fail(sql, f"{keyword} is not a Delta write deltaguard can classify")
    return handler(sql, tokens)


# -------------------------------------------------------------------------------------- parsed DML


def _parse(sql: str) -> exp.Expr:
    try:
        statements = [s for s in sqlglot.parse(sql, read=DIALECT) if s is not None]
    except SqlglotError as error:
        message = getattr(error, "errors", None)
        detail = message[0].get("description") if message and isinstance(message[0], dict) else None
        raise _fail(sql, f"it does not parse as Spark SQL ({detail or 'syntax error'})") from None
    if len(statements) != 1:
        raise _fail(sql, "expected exactly one statement")
    return statements[0]


def _table_name(table: exp.Table) -> str:
    parts = table.parts
    if len(parts) == 2 and parts[0].name.lower() == "delta" and _is_path(parts[1]):
        return parts[1].name
    return ".".join(part.name for part in parts)


def _is_path(part: exp.Expr) -> bool:
    return bool(part.args.get("quoted")) or "/" in part.name


def _delta_path(table: exp.Table) -> str | None:
    parts = table.parts
    if len(parts) == 2 and parts[0].name.lower() == "delta" and _is_path(parts[1]):
        return normalise_location(parts[1].name)
    return None


def _same_table(a: exp.Table, b: exp.Table) -> bool:
    """Could ``a`` and ``b`` be the same table? Unknown qualifiers count as the same (so we err to 'reads'),
    and so does a ``delta.`path``` beside a table name (the name may be registered at that path)."""
    a_path, b_path = _delta_path(a), _delta_path(b)
    if a_path is not None or b_path is not None:
        return a_path is None or b_path is None or a_path == b_path
    a_parts = [part.name.lower() for part in a.parts]
    b_parts = [part.name.lower() for part in b.parts]
    shorter, longer = sorted((a_parts, b_parts), key=len)
    return bool(shorter) and longer[-len(shorter) :] == shorter


def _predicate_text(node: exp.Expr | None, sql: str) -> str | None:
    """Render a condition and check it is one the conflict model can parse."""
    if node is None:
        return None
    text = node.sql(dialect=DIALECT)
    _check_predicate(text, sql)
    return text


def _check_predicate(text: str, sql: str) -> None:
    try:
        parse_predicate(text)
    except PredicateError as error:
        raise _fail(sql, str(error)) from None


def _qualifiers(target: exp.Table) -> frozenset[str]:
    """The names a column of the target may be qualified with: its alias, its name, its dotted name."""
    parts = [part.name.lower() for part in target.parts]
    names = {".".join(parts[i:]) for i in range(len(parts))}
    if target.alias:
        names = {target.alias.lower()}  # with an alias, the table name no longer qualifies its columns
    return frozenset(names)


def _unqualify(node: exp.Expr | None, qualifiers: frozenset[str]) -> exp.Expr | None:
    """``node`` with the target's own qualifiers removed from its columns (``t.date`` -> ``date``).

    Other qualifiers stay: ``meta.date`` may be a struct field, which the conflict model does not confuse
    with the partition column ``date``. Columns inside subqueries keep their qualifiers.
    """
    if node is None:
        return None

    def strip(current: exp.Expr) -> exp.Expr:
        if (
            isinstance(current, exp.Column)
            and len(current.parts) > 1
            and ".".join(part.name for part in current.parts[:-1]).lower() in qualifiers
            and current.find_ancestor(exp.Query) is None
        ):
            return exp.column(current.this.copy())
        return current

    return node.copy().transform(strip)


def _reads_target(statement: exp.Expr, target: exp.Table) -> bool:
    """Whether the statement reads its own table anywhere besides the target reference (a subquery, a CTE,
    a MERGE source, an INSERT ... SELECT). A relation whose name could be the target counts."""
    return any(
        table is not target and (_unknown_relation(table) or _same_table(table, target))
        for table in statement.find_all(exp.Table)
    )


def _unknown_relation(table: exp.Table) -> bool:
    """A relation that is not a plain name (``IDENTIFIER(:t)``, ``${table}``, a table function): it may be
    the target itself, so it counts as one (a view over the target under another name is not detected)."""
    return not isinstance(table.this, exp.Identifier)


def _assignments(items: Sequence[exp.Expr], qualifiers: frozenset[str]) -> tuple[tuple[str, str], ...]:
    """``SET a = x, t.b = y`` as ``(("a", "x"), ("b", "y"))``; ``SET *`` as ``(("*", "*"),)``."""
    found: list[tuple[str, str]] = []
    for item in items:
        if isinstance(item, exp.EQ) and isinstance(item.this, exp.Column):
            column = _unqualify(item.this, qualifiers)
            assert isinstance(column, exp.Column)
            name = column_text(part.name for part in column.parts)  # `a.b` stays one column
            found.append((name, item.expression.sql(dialect=DIALECT)))
        else:
            found.append(("*", "*"))  # SET * or a form not understood: every column may change
    return tuple(found)


def _where(node: exp.Expr) -> exp.Expr | None:
    where = node.args.get("where")
    return where.this if isinstance(where, exp.Where) else where


#: Clauses each parsed statement may carry; anything else sqlglot recognises (``REPLACE USING``,
#: ``UPDATE ... FROM``, ``DELETE ... USING``, ``DEFAULT VALUES``, ...) is not classified rather than guessed.
_ALLOWED_ARGS: dict[type[exp.Expr], frozenset[str]] = {
    exp.Insert: frozenset({"this", "expression", "overwrite", "where", "by_name", "with_", "hint"}),
    exp.Update: frozenset({"this", "expressions", "where", "with_"}),
    exp.Delete: frozenset({"this", "where", "with_"}),
    exp.Merge: frozenset({"this", "using", "on", "whens", "with_"}),
}


#: What a statement too deeply nested to parse is judged as, by its first keyword: reading the whole table,
#: writing anywhere (every column may change, inserts come from anywhere, an INSERT may overwrite).
_TOO_DEEP: dict[str, Operation] = {
    "UPDATE": Operation(OperationKind.UPDATE, reads_target=True, assignments=(("*", "*"),)),
    "DELETE": Operation(OperationKind.DELETE, reads_target=True),
    "MERGE": Operation(OperationKind.MERGE, reads_target=True, assignments=(("*", "*"),), inserts=None),
    "INSERT": Operation(OperationKind.OVERWRITE, reads_target=True),
    "WITH": Operation(OperationKind.OVERWRITE, reads_target=True),
}


#: the clause that makes a MERGE or INSERT evolve the target's schema as it commits
_SCHEMA_EVOLUTION = ("WITH", "SCHEMA", "EVOLUTION")


def _classify_parsed(sql: str, tokens: Sequence[Token]) -> ClassifiedStatement:
    """INSERT, UPDATE, DELETE and MERGE (optionally after ``WITH``), parsed by sqlglot."""
    evolving = _without_schema_evolution(sql, tokens)
    if evolving is not None:
        # sqlglot does not parse the clause: the statement is classified without it, then judged as the
        # metadata change its commit makes (ADR 0035)
        classified = _classify_parsed(evolving, _one_statement(evolving))
        operation = replace(classified.operation, evolves_schema=True, sql=sql)
        return ClassifiedStatement(operation, classified.table)
    try:
        return _classify_tree(sql)
    except RecursionError:
        # A valid statement nested deeper than sqlglot's parser can recurse: judged conservatively.
        keyword = tokens[0].text.upper()
        why = (
            f"{keyword} statement nested too deeply to analyse, judged as reading and writing the whole table"
        )
        return ClassifiedStatement(replace(_TOO_DEEP[keyword], sql=sql, label=why), None)


def _without_schema_evolution(sql: str, tokens: Sequence[Token]) -> str | None:
    """``MERGE WITH SCHEMA EVOLUTION INTO ...`` (or ``INSERT WITH SCHEMA EVOLUTION ...``) without the
    clause; ``None`` when the statement has none."""
    if len(tokens) < 5 or tokens[0].text.upper() not in ("MERGE", "INSERT"):
        return None
    if tuple(_words(token) for token in tokens[1:4]) != _SCHEMA_EVOLUTION:
        return None
    return sql[: tokens[1].start] + sql[tokens[3].end + 1 :]


def _classify_tree(sql: str) -> ClassifiedStatement:
    statement = _parse(sql)
    allowed = _ALLOWED_ARGS.get(type(statement))
    if allowed is None:
        raise _fail(sql, f"{statement.key.upper()} is not a Delta write deltaguard can classify")
    unknown = sorted(
        key for key, value in statement.args.items() if value not in (None, False, []) and key not in allowed
    )
    if unknown:
        clause = unknown[0].rstrip("_").upper()
        raise _fail(sql, f"{statement.key.upper()} with a {clause} clause is not classified")
    target = statement.this.this if isinstance(statement.this, exp.Schema) else statement.this
    if not isinstance(target, exp.Table):
        raise _fail(sql, f"the {statement.key.upper()} target is not a table")
    if isinstance(statement, exp.Insert):
        return _classify_insert(statement, target, sql)
    if isinstance(statement, exp.Merge):
        return _classify_merge(statement, target, sql)
    qualifiers = _qualifiers(target)
    predicate = _predicate_text(_unqualify(_where(statement), qualifiers), sql)
    operation = Operation(
        OperationKind.UPDATE if isinstance(statement, exp.Update) else OperationKind.DELETE,
        predicate=predicate,
        reads_target=_reads_target(statement, target),
        assignments=_assignments(statement.expressions, qualifiers)
        if isinstance(statement, exp.Update)
        else (),
        sql=sql,
    )
    return ClassifiedStatement(operation, _table_name(target))


def _classify_insert(insert: exp.Insert, target: exp.Table, sql: str) -> ClassifiedStatement:
    reads_target = any(
        table is not target and _same_table(table, target) for table in insert.find_all(exp.Table)
    )
    partition = target.args.get("partition")
    static = [item for item in (partition.expressions if partition else []) if isinstance(item, exp.EQ)]
    static_text = _predicate_text(exp.and_(*static), sql) if static else None
    replace_where = _predicate_text(_unqualify(_where(insert), _qualifiers(target)), sql)
    overwrite = bool(insert.args.get("overwrite"))
    kind, predicate = OperationKind.INSERT, static_text
    if replace_where is not None:
        if overwrite:
            raise _fail(sql, "INSERT OVERWRITE cannot be combined with REPLACE WHERE")
        kind, predicate = OperationKind.REPLACE_WHERE, replace_where
    elif overwrite and static_text is not None:
        # Static partitions: exactly those partitions are replaced (a dynamic part only narrows that).
        kind = OperationKind.REPLACE_WHERE
    elif overwrite:
        # No static partition: the whole table (or, in dynamic mode, partitions only known at run time).
        kind = OperationKind.OVERWRITE
    operation = Operation(kind, predicate=predicate, reads_target=reads_target, sql=sql)
    return ClassifiedStatement(operation, _table_name(target))


def _classify_merge(merge: exp.Merge, target: exp.Table, sql: str) -> ClassifiedStatement:
    alias = target.alias or ".".join(part.name for part in target.parts)
    condition = _predicate_text(merge.args.get("on"), sql)
    whens = merge.args.get("whens")
    clauses = whens.expressions if whens is not None else []
    if any(clause.args.get("source") for clause in clauses):
        # WHEN NOT MATCHED BY SOURCE visits every target row the source does not match, so the ON
        # condition's target conjuncts no longer bound what is read: the MERGE reads the whole table.
        condition = None
    qualifiers = _qualifiers(target)
    assignments: list[tuple[str, str]] = []
    inserted: list[str | None] = []
    for clause in clauses:
        then = clause.args.get("then")
        if isinstance(then, exp.Update):
            assignments.extend(_assignments(then.expressions, qualifiers))
        elif isinstance(then, exp.Insert):
            inserted.append(_inserted_rows(then, sql))
    operation = Operation(
        OperationKind.MERGE,
        merge_condition=condition,
        target_alias=alias,
        reads_target=_reads_target(merge, target),
        assignments=tuple(assignments),
        inserts=_any_of(inserted),
        sql=sql,
    )
    return ClassifiedStatement(operation, _table_name(target))


def _inserted_rows(insert: exp.Insert, sql: str) -> str | None:
    """What ``WHEN NOT MATCHED THEN INSERT`` adds: the literal column values it fixes, or ``None`` (anywhere)
    when it inserts source values only (``INSERT *``, ``VALUES (s.id, s.date)``)."""
    columns, values = insert.this, insert.expression
    if not isinstance(columns, exp.Tuple) or not isinstance(values, exp.Tuple):
        return None
    fixed = [
        exp.EQ(this=exp.column(column.name, quoted=True), expression=value.copy())
        for column, value in zip(columns.expressions, values.expressions, strict=False)
        if isinstance(column, exp.Column) and isinstance(value, exp.Literal | exp.Boolean | exp.Cast)
    ]
    if not fixed:
        return None
    return _predicate_text(exp.and_(*fixed), sql)


def _any_of(predicates: Sequence[str | None]) -> str | None:
    """The rows any of several insert clauses adds: ``""`` for none, ``None`` for anywhere."""
    if not predicates:
        return ""
    if any(predicate is None for predicate in predicates):
        return None
    return " OR ".join(f"({predicate})" for predicate in predicates)


# ------------------------------------------------------------------------------ token-level commands


@dataclass
class _Cursor:
    """Walks a token list of one statement (and the text its offsets refer to)."""

    sql: str
    text: str
    tokens: Sequence[Token]
    index: int = 0

    def peek(self, offset: int = 0) -> str:
        position = self.index + offset
        return _words(self.tokens[position]) if position < len(self.tokens) else ""

    def at_end(self) -> bool:
        return self.index >= len(self.tokens)

    def accept(self, *words: str) -> bool:
        """Consume ``words`` if the next tokens spell exactly these keywords.

        sqlglot folds some keyword pairs into one token (``CLUSTER BY``), so tokens are matched by their words.
        """
        wanted = list(words)
        position = self.index
        while wanted:
            if position >= len(self.tokens):
                return False
            token_words = _words(self.tokens[position]).split(" ")
            if wanted[: len(token_words)] != token_words:
                return False
            del wanted[: len(token_words)]
            position += 1
        self.index = position
        return True

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            found = self.peek() or "the end"
            raise _fail(self.sql, f"expected {' '.join(words)} but found {found}")

    def table_name(self) -> str:
        """A possibly qualified table name; ``delta.`/path``` yields the path."""
        parts: list[Token] = []
        while True:
            if self.at_end() or not _is_name_token(self.tokens[self.index]):
                raise _fail(self.sql, f"expected a table name but found {self.peek() or 'the end'}")
            parts.append(self.tokens[self.index])
            self.index += 1
            if self.peek() != ".":
                break
            self.index += 1
        if (
            len(parts) == 2
            and parts[0].text.lower() == "delta"
            and (parts[1].token_type is TokenType.IDENTIFIER or "/" in parts[1].text)
        ):
            return parts[1].text
        return ".".join(part.text for part in parts)

    def text_until(self, *stop_words: str) -> str | None:
        """The raw text of the tokens up to (not including) the first top-level ``stop_words`` keyword."""
        start = self.index
        depth = 0
        while not self.at_end():
            token_type = self.tokens[self.index].token_type
            if depth == 0 and self.peek() in stop_words:
                break
            if token_type is TokenType.L_PAREN:
                depth += 1
            elif token_type is TokenType.R_PAREN:
                depth -= 1
            self.index += 1
        if self.index == start:
            return None
        return self.text[self.tokens[start].start : self.tokens[self.index - 1].end + 1]

    def predicate_after_where(self, *stop_words: str) -> str | None:
        if not self.accept("WHERE"):
            return None
        text = self.text_until(*stop_words)
        if text is None:
            raise _fail(self.sql, "WHERE has no condition")
        _check_predicate(text, self.sql)
        return text

    def finish(self) -> None:
        if not self.at_end():
            raise _fail(self.sql, f"unexpected {self.peek()} after the statement")


def _words(token: Token) -> str:
    """A keyword token's text, upper-cased, with single spaces (``CLUSTER   BY`` -> ``CLUSTER BY``)."""
    return " ".join(token.text.upper().split())


def _is_name_token(token: Token) -> bool:
    return token.token_type in (TokenType.VAR, TokenType.IDENTIFIER) or token.text.isidentifier()


def _command_cursor(sql: str, tokens: Sequence[Token]) -> _Cursor:
    """A cursor after the leading keyword; sqlglot swallows the rest of some commands into one string."""
    if (
        len(tokens) == 2
        and tokens[0].token_type is TokenType.COMMAND
        and tokens[1].token_type is TokenType.STRING
    ):
        remainder = tokens[1].text
        return _Cursor(sql, remainder, _tokenize(remainder, sql))
    return _Cursor(sql, sql, tokens, index=1)


def _classify_optimize(sql: str, tokens: Sequence[Token]) -> ClassifiedStatement:
    """``OPTIMIZE t [WHERE p] [ZORDER BY (c1, c2)]`` or ``OPTIMIZE t FULL``."""
    cursor = _command_cursor(sql, tokens)
    name = cursor.table_name()
    predicate = cursor.predicate_after_where("ZORDER", "FULL")
    zorder: tuple[str, ...] = ()
    if cursor.accept("ZORDER", "BY"):
        zorder = _column_list(cursor)
        if not zorder:
            raise _fail(sql, "ZORDER BY has no columns")
    elif cursor.accept("FULL") and predicate is not None:
        raise _fail(sql, "OPTIMIZE ... FULL takes no WHERE")
    cursor.finish()
    operation = Operation(OperationKind.OPTIMIZE, predicate=predicate, zorder_by=zorder, sql=sql)
    return ClassifiedStatement(operation, name)


def _column_list(cursor: _Cursor) -> tuple[str, ...]:
    """``(a, b)`` or ``a, b``: plain column names only."""
    parenthesised = cursor.accept("(")
    names: list[str] = []
    while not cursor.at_end() and cursor.peek() != ")":
        token = cursor.tokens[cursor.index]
        if not _is_name_token(token):
            raise _fail(cursor.sql, f"expected a column name but found {token.text}")
        names.append(token.text)
        cursor.index += 1
        if not cursor.accept(","):
            break
    if parenthesised:
        cursor.expect(")")
    return tuple(names)


def _classify_reorg(sql: str, tokens: Sequence[Token]) -> ClassifiedStatement:
    """``REORG TABLE t [WHERE p] APPLY (PURGE)`` or ``... APPLY (UPGRADE UNIFORM(...))``."""
    cursor = _command_cursor(sql, tokens)
    cursor.expect("TABLE")
    name = cursor.table_name()
    predicate = cursor.predicate_after_where("APPLY")
    cursor.expect("APPLY", "(")
    if cursor.accept("PURGE"):
        cursor.expect(")")
        cursor.finish()
        return ClassifiedStatement(Operation(OperationKind.REORG_PURGE, predicate=predicate, sql=sql), name)
    if cursor.accept("UPGRADE"):
        # A protocol upgrade; the clause's details do not change how it conflicts.
        return ClassifiedStatement(Operation(OperationKind.REORG_UPGRADE, sql=sql), name)
    raise _fail(sql, f"REORG ... APPLY ({cursor.peek()}) is neither PURGE nor UPGRADE")


#: ALTER TABLE actions by their leading keywords (longest first wins, see _alter_kind).
_ALTER_ACTIONS: dict[tuple[str, ...], OperationKind] = {
    ("SET", "TBLPROPERTIES"): OperationKind.SET_TBLPROPERTIES,
    ("UNSET", "TBLPROPERTIES"): OperationKind.SET_TBLPROPERTIES,
    ("ADD", "COLUMNS"): OperationKind.ADD_COLUMNS,
    ("ADD", "COLUMN"): OperationKind.ADD_COLUMNS,
    ("DROP", "FEATURE"): OperationKind.REORG_UPGRADE,
    ("DROP", "COLUMNS"): OperationKind.ALTER_SCHEMA,
    ("DROP", "COLUMN"): OperationKind.ALTER_SCHEMA,
    ("RENAME", "COLUMN"): OperationKind.ALTER_SCHEMA,
    ("ALTER", "COLUMN"): OperationKind.ALTER_SCHEMA,
    ("CHANGE",): OperationKind.ALTER_SCHEMA,
    ("REPLACE", "COLUMNS"): OperationKind.ALTER_SCHEMA,
    ("ADD", "CONSTRAINT"): OperationKind.ALTER_SCHEMA,
    ("DROP", "CONSTRAINT"): OperationKind.ALTER_SCHEMA,
    ("ADD", "PRIMARY", "KEY"): OperationKind.ALTER_SCHEMA,
    ("DROP", "PRIMARY", "KEY"): OperationKind.ALTER_SCHEMA,
    ("DROP", "FOREIGN", "KEY"): OperationKind.ALTER_SCHEMA,
    ("CLUSTER", "BY"): OperationKind.ALTER_SCHEMA,
}


def _classify_alter(sql: str, tokens: Sequence[Token]) -> ClassifiedStatement:
    """``ALTER TABLE t <action>``: properties, columns, features, constraints, clustering."""
    cursor = _command_cursor(sql, tokens)
    cursor.expect("TABLE")
    name = cursor.table_name()
    for words, kind in sorted(_ALTER_ACTIONS.items(), key=lambda item: -len(item[0])):
        if cursor.accept(*words):
            if cursor.at_end():
                raise _fail(sql, f"ALTER TABLE ... {' '.join(words)} is incomplete")
            return ClassifiedStatement(Operation(kind, sql=sql), name)
    action = " ".join(cursor.peek(i) for i in range(2)).strip() or "nothing"
    raise _fail(sql, f"ALTER TABLE ... {action} is not a change deltaguard can classify")


def _classify_create(sql: str, tokens: Sequence[Token]) -> ClassifiedStatement:
    """``CREATE [OR REPLACE] [EXTERNAL] TABLE [IF NOT EXISTS] t ...``, ``REPLACE TABLE t ...``, CTAS."""
    cursor = _Cursor(sql, sql, tokens)
    if not cursor.accept("REPLACE"):
        cursor.expect("CREATE")
        cursor.accept("OR", "REPLACE")
        cursor.accept("EXTERNAL")
    if not cursor.accept("TABLE"):
        raise _fail(sql, f"only tables are classified, not {cursor.peek() or 'this'}")
    cursor.accept("IF", "NOT", "EXISTS")
    name = cursor.table_name()
    return ClassifiedStatement(Operation(OperationKind.CREATE_OR_REPLACE, sql=sql), name)


_HANDLERS: dict[str, Callable[[str, Sequence[Token]], ClassifiedStatement]] = {
    "INSERT": _classify_parsed,
    "WITH": _classify_parsed,
    "UPDATE": _classify_parsed,
    "DELETE": _classify_parsed,
    "MERGE": _classify_parsed,
    "OPTIMIZE": _classify_optimize,
    "REORG": _classify_reorg,
    "ALTER": _classify_alter,
    "CREATE": _classify_create,
    "REPLACE": _classify_create,
}
