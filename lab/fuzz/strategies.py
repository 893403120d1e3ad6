"""Hypothesis strategies for realistic Spark SQL writes on the fuzz table, and for hostile model input.

Statements are built as a user would write them: predicates with AND/OR/NOT, IN lists, ranges, functions,
casts, struct fields and both literal kinds for dates; UPDATEs that set partition columns (rows move);
self-reading INSERT ... SELECT and MERGE USING the target; MERGE with matched / not matched / not matched
by source clauses; appends into one or several partitions; INSERT OVERWRITE and REPLACE WHERE; OPTIMIZE
with and without ZORDER. Only functions that both Spark and delta-rs' DataFusion evaluate the same way are
used in executable statements, so what differs between engines is the commit, not the SQL dialect.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from lab.fuzz.cases import (
    DATES,
    INITIAL_IDS,
    ISOLATION_LEVELS,
    LONG_BOUND,
    LONG_TEXT,
    PARTITION_VALUES,
    PARTITIONINGS,
    TABLE,
    FuzzCase,
    FuzzLayout,
    FuzzStatement,
)

Predicate = tuple[str, tuple[str, ...]]
Draw = Callable[[st.SearchStrategy[Any]], Any]

_COMPARISONS = ("=", "<", "<=", ">", ">=", "<>")
_ATOM_KINDS = (
    *("p_eq", "p_in", "p_ne", "d_cmp", "d_between", "id_cmp", "id_in", "id_between", "v_cmp"),
    *("upper", "abs", "cast_id", "cast_d", "struct_k", "struct_n", "null"),
)
#: comparisons that do not name ``p``: the rest of a condition already scoped to one ``p`` value
_NON_P_KINDS = tuple(kind for kind in _ATOM_KINDS if not kind.startswith("p_") and kind != "upper")


def _date_literal(draw: Draw, date: str) -> tuple[str, str]:
    """A date as ``DATE '...'`` or as a plain string the engine casts (both are common)."""
    if draw(st.booleans()):
        return f"DATE '{date}'", "date_literal"
    return f"'{date}'", "string_date_literal"


@st.composite
def atoms(draw: Draw, q: str = "", kinds: tuple[str, ...] = _ATOM_KINDS) -> Predicate:
    """One comparison on the fuzz table, columns qualified by ``q`` (``"t."`` inside a MERGE)."""
    kind = draw(st.sampled_from(kinds))
    value = draw(st.sampled_from(PARTITION_VALUES))
    date = draw(st.sampled_from(DATES))
    number = draw(st.integers(min_value=0, max_value=14))
    op = draw(st.sampled_from(_COMPARISONS))
    if kind == "p_eq":
        return f"{q}p = '{value}'", ("on_p",)
    if kind == "p_in":
        values = draw(st.lists(st.sampled_from(PARTITION_VALUES), min_size=1, max_size=3, unique=True))
        negated = draw(st.booleans())
        listed = ", ".join(f"'{v}'" for v in values)
        return f"{q}p {'NOT IN' if negated else 'IN'} ({listed})", ("on_p", "in_list")
    if kind == "p_ne":
        return f"{q}p <> '{value}'", ("on_p",)
    if kind == "d_cmp":
        literal, tag = _date_literal(draw, date)
        return f"{q}d {op} {literal}", ("on_d", tag)
    if kind == "d_between":
        low, high = sorted((date, draw(st.sampled_from(DATES))))
        return f"{q}d BETWEEN DATE '{low}' AND DATE '{high}'", ("on_d", "range", "date_literal")
    if kind == "id_cmp":
        return f"{q}id {op} {number}", ("on_data",)
    if kind == "id_in":
        ids = draw(st.lists(st.integers(min_value=1, max_value=14), min_size=1, max_size=4, unique=True))
        return f"{q}id IN ({', '.join(map(str, ids))})", ("on_data", "in_list")
    if kind == "id_between":
        return f"{q}id BETWEEN {number} AND {number + draw(st.integers(0, 6))}", ("on_data", "range")
    if kind == "v_cmp":
        return f"{q}v {op} {number * 10}", ("on_data",)
    if kind == "upper":
        return f"upper({q}p) = '{value.upper()}'", ("on_p", "function")
    if kind == "abs":
        return f"abs({q}v - {number * 10}) < {draw(st.integers(5, 40))}", ("on_data", "function")
    if kind == "cast_id":
        return f"CAST({q}id AS STRING) = '{number}'", ("on_data", "cast")
    if kind == "cast_d":
        return f"CAST({q}d AS STRING) = '{date}'", ("on_d", "cast")
    if kind == "struct_k":
        return f"{q}s.k = 'k{number % 3}'", ("on_data", "struct_field")
    if kind == "struct_n":
        return f"{q}s.n {op} {number}", ("on_data", "struct_field")
    return f"{q}s.k IS NULL", ("on_data", "struct_field", "null_test")


def _combine(children: st.SearchStrategy[Predicate]) -> st.SearchStrategy[Predicate]:
    joined = st.tuples(st.sampled_from(("AND", "OR")), children, children).map(
        lambda t: (f"({t[1][0]}) {t[0]} ({t[2][0]})", (*t[1][1], *t[2][1], t[0].lower()))
    )
    negated = children.map(lambda child: (f"NOT ({child[0]})", (*child[1], "not")))
    return st.one_of(joined, negated)


def predicates(q: str = "", max_leaves: int = 4, on_p: bool = True) -> st.SearchStrategy[Predicate]:
    """Predicates of up to ``max_leaves`` comparisons joined by AND/OR/NOT (``on_p``: may name ``p``)."""
    return st.recursive(atoms(q, _ATOM_KINDS if on_p else _NON_P_KINDS), _combine, max_leaves=max_leaves)


def _where(draw: Draw, q: str = "", scope: str | None = None) -> Predicate | None:
    """A WHERE condition, or (rarely) none at all.

    Pipelines mostly write one partition's worth of rows, so half the conditions are scoped to one ``p``
    value (``p = 'b' AND (...)``), whatever the layout: that is where a model may allow a pair.
    """
    if scope is None and draw(st.integers(0, 9)) == 0:
        return None
    text, tags = draw(predicates(q, on_p=scope is None))
    scope = scope or draw(st.sampled_from((*PARTITION_VALUES, None)))
    if scope is None:
        return text, tags
    return f"{q}p = '{scope}' AND ({text})", (*tags, "scoped")


@st.composite
def new_rows(draw: Draw, one_partition: str | None = None, existing: bool = True) -> list[dict[str, Any]]:
    """1-3 rows with distinct ids: new ids (100+) and, when ``existing``, ids of initial rows (MERGE matches)."""
    pool = [*range(100, 106), *(INITIAL_IDS if existing else ())]
    ids = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True))
    return [
        {
            "id": row_id,
            "p": one_partition or draw(st.sampled_from(PARTITION_VALUES)),
            "d": draw(st.sampled_from(DATES)),
            "v": draw(st.integers(0, 9)) * 100 + 1,
            "s": {"k": draw(st.sampled_from(("k0", "k1", "x"))), "n": row_id},
        }
        for row_id in ids
    ]


def _values_sql(rows: list[dict[str, Any]]) -> str:
    """``VALUES (...), (...) AS src(id, p, d, v, s)`` with typed literals, as a Spark user writes them."""
    rendered = ", ".join(
        f"({r['id']}, '{r['p']}', DATE '{r['d']}', {r['v']}, named_struct('k', '{r['s']['k']}', 'n', {r['s']['n']}))"
        for r in rows
    )
    return f"VALUES {rendered} AS src(id, p, d, v, s)"


def _tags(*groups: tuple[str, ...] | None) -> tuple[str, ...]:
    return tuple(sorted({tag for group in groups if group for tag in group}))


@st.composite
def deletes(draw: Draw, scope: str | None = None) -> FuzzStatement:
    where = _where(draw, scope=scope)
    if where is not None and draw(st.integers(0, 7)) == 0:
        # a subquery over the target: the DELETE reads rows the predicate alone does not name
        where = (f"id IN (SELECT id FROM {TABLE} WHERE {where[0]})", (*where[1], "subquery_self_read"))
    sql = f"DELETE FROM {TABLE}" + (f" WHERE {where[0]}" if where else "")
    return FuzzStatement(sql, "sql", tags=_tags(where[1] if where else ("no_predicate",)))


@st.composite
def updates(draw: Draw, scope: str | None = None) -> FuzzStatement:
    sets: dict[str, str] = {}
    tags: list[str] = []
    for column, expression, tag in draw(
        st.lists(
            st.sampled_from(
                (
                    ("v", "v + 1", ""),
                    ("v", "v * 2", ""),
                    ("p", f"'{draw(st.sampled_from(PARTITION_VALUES))}'", "moves_rows"),
                    ("d", f"DATE '{draw(st.sampled_from(DATES))}'", "moves_rows"),
                )
            ),
            min_size=1,
            max_size=2,
            unique_by=lambda item: item[0],
        )
    ):
        sets[column] = expression
        if tag:
            tags.append(tag)
    where = _where(draw, scope=scope)
    assignments = ", ".join(f"{c} = {e}" for c, e in sets.items())
    sql = f"UPDATE {TABLE} SET {assignments}" + (f" WHERE {where[0]}" if where else "")
    return FuzzStatement(sql, "sql", tags=_tags(tuple(tags), where[1] if where else ("no_predicate",)))


@st.composite
def inserts(draw: Draw, layout: FuzzLayout, scope: str | None = None) -> FuzzStatement:
    """INSERT ... VALUES (as ``DeltaSqlOperator`` runs it), or a typed append into one ``p`` partition."""
    if "p" not in layout.partition_by or draw(st.booleans()):
        rows = draw(new_rows(one_partition=scope, existing=False))
        values = ", ".join(f"({r['id']}, '{r['p']}', '{r['d']}', {r['v']}, NULL)" for r in rows)
        spread = "one_partition" if len({r["p"] for r in rows}) == 1 else "several_partitions"
        sql = f"INSERT INTO {TABLE} (id, p, d, v, s) VALUES {values}"
        return FuzzStatement(sql, "sql", tags=("append", spread))
    value = scope or draw(st.sampled_from(PARTITION_VALUES))
    rows = draw(new_rows(one_partition=value, existing=False))
    values = ", ".join(
        f"({r['id']}, DATE '{r['d']}', {r['v']}, named_struct('k', '{r['s']['k']}', 'n', {r['s']['n']}))"
        for r in rows
    )
    sql = f"INSERT INTO {TABLE} PARTITION (p = '{value}') (id, d, v, s) VALUES {values}"
    spec = {"type": "append", "rows": rows, "partition_values": {"p": value}}
    return FuzzStatement(sql, "spec", spec, tags=("append", "one_partition", "partition_values"))


@st.composite
def insert_selects(draw: Draw, scope: str | None = None) -> FuzzStatement:
    """``INSERT INTO t SELECT ... FROM t WHERE ...``: an append that reads the target."""
    where = _where(draw, scope=scope) or draw(predicates())
    shift = draw(st.sampled_from((100, 200)))
    moved = scope or draw(st.sampled_from((None, *PARTITION_VALUES)))
    p_column = f"'{moved}' AS p" if moved else "p"
    select = f"SELECT id + {shift} AS id, {p_column}, d, v, s FROM {TABLE} WHERE {where[0]}"
    spec = {"type": "append", "select": select}
    # a typed append has no way to say its source reads the target, so only the classified SQL judges it
    return FuzzStatement(f"INSERT INTO {TABLE} {select}", "spec", spec, tags=_tags(("self_read",), where[1]))


@st.composite
def merges(draw: Draw, layout: FuzzLayout, scope: str | None = None) -> FuzzStatement:
    """MERGE from literal rows or from the target itself, with a random subset of clauses."""
    tags: list[str] = []
    self_read = draw(st.integers(0, 3)) == 0
    spec: dict[str, Any] = {"type": "merge"}
    if self_read:
        where = _where(draw, scope=scope) or draw(predicates(max_leaves=2))
        shift = draw(st.sampled_from((0, 100)))
        source_sql = f"(SELECT id + {shift} AS id, p, d, v + 1 AS v, s FROM {TABLE} WHERE {where[0]})"
        spec["select"] = source_sql[1:-1]
        tags.extend(("self_read", *where[1]))
    else:
        rows = draw(new_rows(one_partition=scope))
        spec["rows"] = rows
        source_sql = f"(SELECT * FROM {_values_sql(rows)})"
        tags.append("one_partition" if len({r["p"] for r in rows}) == 1 else "several_partitions")
    condition = "t.id = s.id"
    choices = ("target_literal", "same_p") if scope else ("", "same_p", "target_literal")
    if "p" in layout.partition_by:
        # the typed operator's declared partitions must be partition columns (the engine refuses others)
        choices = (*choices, "declared")
    extra = draw(st.sampled_from(choices))
    target_values: dict[str, str] = {}
    if extra == "same_p":
        condition += " AND t.p = s.p"
    elif extra == "target_literal":
        condition += f" AND t.p = '{scope or draw(st.sampled_from(PARTITION_VALUES))}'"
        tags.append("target_filter")
    elif extra == "declared":
        # the typed operator's target_partition_values: the engine adds t.p = '<value>' itself
        target_values = {"p": scope or draw(st.sampled_from(PARTITION_VALUES))}
        tags.append("target_filter")
    spec["condition"] = condition
    spec["target_partition_values"] = target_values
    on_sql = condition + (f" AND t.p = '{target_values['p']}'" if target_values else "")
    clauses: list[str] = []
    matched = draw(st.sampled_from(("none", "update_v", "update_p", "delete", "delete_then_update")))
    if matched in ("delete", "delete_then_update"):
        spec["matched_delete"] = True
        spec["matched_condition"] = "s.v > 500"
        clauses.append("WHEN MATCHED AND s.v > 500 THEN DELETE")
    if matched in ("update_v", "delete_then_update"):
        spec["matched_update"] = {"v": "s.v"}
        clauses.append("WHEN MATCHED THEN UPDATE SET v = s.v")
    if matched == "update_p":
        spec["matched_update"] = {"p": "s.p", "v": "s.v"}
        clauses.append("WHEN MATCHED THEN UPDATE SET p = s.p, v = s.v")
        tags.append("moves_rows")
    if draw(st.booleans()) or not clauses:
        spec["not_matched_insert_all"] = True
        clauses.append("WHEN NOT MATCHED THEN INSERT *")
    if draw(st.integers(0, 3)) == 0:
        spec["not_matched_by_source_delete"] = True
        clauses.append("WHEN NOT MATCHED BY SOURCE THEN DELETE")
        tags.append("not_matched_by_source")
    sql = f"MERGE INTO {TABLE} t USING {source_sql} s ON {on_sql} " + " ".join(clauses)
    return FuzzStatement(sql, "spec", spec, tags=_tags(tuple(tags), (f"merge_{matched}",)))


#: REPLACE WHERE predicates and a row factory that keeps every row inside the predicate
_REPLACE_PREDICATES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("p = 'a'", ("a",), DATES),
    ("p = 'b'", ("b",), DATES),
    ("p IN ('a', 'c')", ("a", "c"), DATES),
    ("d >= DATE '2024-01-02'", PARTITION_VALUES, DATES[1:]),
    ("d = DATE '2024-01-01'", PARTITION_VALUES, DATES[:1]),
    ("p = 'b' AND d = DATE '2024-01-03'", ("b",), DATES[2:]),
    ("id >= 100", PARTITION_VALUES, DATES),
)


@st.composite
def replace_wheres(draw: Draw, scope: str | None = None) -> FuzzStatement:
    predicate, ps, ds = draw(st.sampled_from(_REPLACE_PREDICATES))
    if scope is not None:
        predicate, ps, ds = f"p = '{scope}'", (scope,), DATES
    rows = [
        {**row, "p": draw(st.sampled_from(ps)), "d": draw(st.sampled_from(ds))}
        for row in draw(new_rows(existing=False))
    ]
    sql = f"INSERT INTO {TABLE} REPLACE WHERE {predicate} SELECT * FROM {_values_sql(rows)}"
    spec = {"type": "replace_where", "rows": rows, "predicate": predicate}
    tags = ("replace_where", "on_data" if predicate.startswith("id") else "on_partition_values")
    return FuzzStatement(sql, "spec", spec, tags=tags)


@st.composite
def overwrites(draw: Draw) -> FuzzStatement:
    rows = draw(new_rows(existing=False))
    sql = f"INSERT OVERWRITE {TABLE} SELECT * FROM {_values_sql(rows)}"
    return FuzzStatement(sql, "spec", {"type": "overwrite", "rows": rows}, tags=("overwrite",))


def optimizes(layout: FuzzLayout, scope: str | None = None) -> st.SearchStrategy[FuzzStatement]:
    """OPTIMIZE with an optional WHERE on a partition column of ``layout`` and an optional ZORDER BY."""

    @st.composite
    def build(draw: Draw) -> FuzzStatement:
        sql = f"OPTIMIZE {TABLE}"
        tags = ["optimize"]
        if scope is not None and "p" in layout.partition_by:
            sql += f" WHERE p = '{scope}'"
            tags.append("on_partition_values")
        elif layout.partition_by and draw(st.booleans()):
            column = draw(st.sampled_from(layout.partition_by))
            value = draw(st.sampled_from(PARTITION_VALUES if column == "p" else DATES))
            sql += f" WHERE {column} = '{value}'"
            tags.append("on_partition_values")
        if draw(st.booleans()):
            sql += f" ZORDER BY ({draw(st.sampled_from(('v', 'id', 'v, id')))})"
            tags.append("zorder")
        return FuzzStatement(sql, "sql", tags=tuple(tags))

    return build()


@st.composite
def layouts(draw: Draw) -> FuzzLayout:
    """Partitioned by one or two columns, or unpartitioned with clustered or mixed files; DV; isolation."""
    partition_by = draw(st.sampled_from(PARTITIONINGS))
    return FuzzLayout(
        partition_by=partition_by,
        clustered=not partition_by and draw(st.booleans()),
        deletion_vectors=draw(st.booleans()),
        isolation=draw(st.sampled_from(ISOLATION_LEVELS)),
    )


def statements(layout: FuzzLayout, scope: str | None = None) -> st.SearchStrategy[FuzzStatement]:
    """Any write on ``layout``; with ``scope``, one that works on the rows of ``p = scope`` only (as a
    per-partition pipeline job does), which is where the model allows pairs and soundness is at stake."""
    options = [
        deletes(scope),
        updates(scope),
        inserts(layout, scope),
        merges(layout, scope),
        insert_selects(scope),
        replace_wheres(scope),
        optimizes(layout, scope),
    ]
    if scope is None:
        options.append(overwrites())
    return st.one_of(options)


@st.composite
def cases(draw: Draw, triples: bool = True) -> FuzzCase:
    """A layout and two (sometimes three) writes on it, half of the time scoped to partitions."""
    layout = draw(layouts())
    # shrinks towards a pair: 0 (the minimal draw) means two writes
    count = 3 if triples and draw(st.integers(0, 4)) == 4 else 2
    if draw(st.booleans()):
        # per-partition jobs: each write scoped to its own p value (or, sometimes, the same one); such jobs
        # mostly run on tables partitioned by p
        if "p" not in layout.partition_by and draw(st.integers(0, 3)) > 0:
            layout = FuzzLayout(
                draw(st.sampled_from((("p",), ("p", "d")))), False, layout.deletion_vectors, layout.isolation
            )
        scopes = draw(st.sampled_from((PARTITION_VALUES, ("a", "a", "b"), ("b", "c", "c"))))
        return FuzzCase(layout, tuple(draw(statements(layout, scopes[i])) for i in range(count)))
    return FuzzCase(layout, tuple(draw(statements(layout)) for _ in range(count)))


@st.composite
def stats_cases(draw: Draw) -> FuzzCase:
    """Cases where delta-rs decides with per-file statistics (ADR 0020): an unpartitioned table with one file
    per date (or, sometimes, mixed files), two or three rewrites, half of them scoped to one date."""
    layout = FuzzLayout(
        (), clustered=draw(st.integers(0, 3)) > 0, isolation=draw(st.sampled_from(ISOLATION_LEVELS))
    )
    count = 3 if draw(st.integers(0, 4)) == 4 else 2
    found = []
    for _ in range(count):
        statement = draw(statements(layout))
        if draw(st.booleans()):
            date = draw(st.sampled_from(DATES))
            kind = draw(st.sampled_from(("UPDATE", "DELETE")))
            # a string literal: the SQL path turns DATE '...' into a CAST the engine refuses to render
            where = f"d = '{date}'" + draw(
                st.sampled_from(("", " AND id > 2", " AND v < 100", " AND p = 'a'"))
            )
            sql = (
                f"UPDATE {TABLE} SET v = v + 1 WHERE {where}"
                if kind == "UPDATE"
                else f"DELETE FROM {TABLE} WHERE {where}"
            )
            statement = FuzzStatement(sql, tags=("per_date",))
        found.append(statement)
    return FuzzCase(layout, tuple(found))


# ------------------------------------------------------------- edge values: NULL, empty, long, negative

#: conditions on the edge rows' values (``FuzzLayout.edge_rows``); ``{q}`` is the column qualifier
_EDGE_ATOMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("{q}p IS NULL", ("on_p", "null_test")),
    ("{q}p IS NOT NULL", ("on_p", "null_test")),
    ("{q}p > 'a'", ("on_p", "range")),
    ("{q}p <> 'b'", ("on_p",)),
    ("NOT ({q}p = 'a')", ("on_p", "not")),
    ("{q}p NOT IN ('a', 'c')", ("on_p", "in_list")),
    ("{q}p = ''", ("on_p", "empty_string")),
    (f"{{q}}p >= '{LONG_BOUND}'", ("on_p", "long_string")),
    (f"{{q}}p < '{LONG_TEXT}'", ("on_p", "long_string")),
    ("{q}v < 0", ("on_data", "negative")),
    ("{q}v >= -140", ("on_data", "negative")),
    ("{q}s IS NULL", ("on_data", "null_test")),
)
#: what a per-partition job on the edge rows is scoped to (NULL, or a comparison that NULL fails)
_EDGE_SCOPES: tuple[str, ...] = (
    "p IS NULL",
    "p = 'a'",
    "p = 'b'",
    "p = ''",
    f"p = '{LONG_TEXT}'",
    "p > 'b'",
    "p < 'b'",
    "p <> 'a'",
    "p IS NOT NULL",
)
#: assignments that write edge values (rows move into the NULL, empty or long ``p`` partition)
_EDGE_SETS: tuple[tuple[str, str, str], ...] = (
    ("p", "NULL", "moves_rows"),
    ("p", "''", "moves_rows"),
    ("p", f"'{LONG_TEXT}'", "moves_rows"),
    ("v", "-v", "negative"),
    ("v", "v - 1000", "negative"),
)


@st.composite
def edge_atoms(draw: Draw, q: str = "") -> Predicate:
    """One condition on NULL, empty, long multi-byte or negative values (or, half the time, an ordinary one)."""
    if draw(st.booleans()):
        text, tags = draw(st.sampled_from(_EDGE_ATOMS))
        return text.format(q=q), (*tags, "edge_value")
    return draw(atoms(q))


def edge_predicates(q: str = "", max_leaves: int = 3) -> st.SearchStrategy[Predicate]:
    """:func:`predicates` whose leaves may test NULL, empty, long or negative values."""
    return st.recursive(edge_atoms(q), _combine, max_leaves=max_leaves)


def _edge_where(draw: Draw, scope: str | None) -> Predicate:
    """A condition, scoped to ``scope`` (a partition condition such as ``p IS NULL``) when given."""
    text, tags = draw(edge_predicates())
    if scope is None:
        return text, tags
    if draw(st.booleans()):
        return scope, ("scoped", "edge_scope")
    return f"{scope} AND ({text})", (*tags, "scoped", "edge_scope")


@st.composite
def edge_replace_wheres(draw: Draw) -> FuzzStatement:
    """REPLACE WHERE of the NULL partition, or of the long multi-byte ``p`` values (whose new file delta-rs
    records with a cut minimum)."""
    value = draw(st.sampled_from((None, LONG_TEXT)))
    predicate = "p IS NULL" if value is None else f"p >= '{LONG_TEXT}'"
    rows = [{**row, "p": value} for row in draw(new_rows(existing=False))]
    rendered = ", ".join(
        f"({r['id']}, {'NULL' if value is None else repr(value)}, DATE '{r['d']}', {r['v']}, "
        f"named_struct('k', '{r['s']['k']}', 'n', {r['s']['n']}))"
        for r in rows
    )
    sql = f"INSERT INTO {TABLE} REPLACE WHERE {predicate} SELECT * FROM VALUES {rendered} AS src(id, p, d, v, s)"
    spec = {"type": "replace_where", "rows": rows, "predicate": predicate}
    return FuzzStatement(sql, "spec", spec, tags=("replace_where", "edge_value", "on_partition_values"))


@st.composite
def edge_statements(draw: Draw, scope: str | None = None) -> FuzzStatement:
    """An UPDATE or DELETE on the edge rows' values (NULL / empty / long ``p``, negative ``v``), or a
    REPLACE WHERE of the NULL or long ``p`` partition."""
    kind = draw(st.sampled_from(("UPDATE", "DELETE", "REPLACE")))
    if kind == "REPLACE" and scope is None:
        return draw(edge_replace_wheres())
    where = _edge_where(draw, scope)
    if kind == "DELETE":
        return FuzzStatement(f"DELETE FROM {TABLE} WHERE {where[0]}", tags=_tags(where[1]))
    # a per-partition job mostly changes values in place (moving rows out of a partition reads as "anywhere")
    choices = _EDGE_SETS if scope is None or draw(st.integers(0, 3)) == 0 else _EDGE_SETS[3:]
    sets = draw(st.lists(st.sampled_from(choices), min_size=1, max_size=2, unique_by=lambda item: item[0]))
    assignments = ", ".join(f"{column} = {expression}" for column, expression, _ in sets)
    tags = tuple(tag for _, _, tag in sets)
    return FuzzStatement(
        f"UPDATE {TABLE} SET {assignments} WHERE {where[0]}", tags=_tags(tags, where[1], ("edge_value",))
    )


@st.composite
def edge_cases(draw: Draw, triples: bool = True) -> FuzzCase:
    """Cases on a table that also holds the edge rows (``p`` NULL, empty or a long multi-byte string,
    negative ``v``, NULL ``s``): writes on those values beside any other write, half of the time as
    per-partition jobs where one job is scoped to the NULL partition or to a comparison NULL fails."""
    base = draw(layouts())
    layout = FuzzLayout(
        base.partition_by, base.clustered, base.deletion_vectors, base.isolation, edge_rows=True
    )
    count = 3 if triples and draw(st.integers(0, 4)) == 4 else 2
    if draw(st.booleans()):
        if "p" not in layout.partition_by:
            layout = FuzzLayout(("p",), False, layout.deletion_vectors, layout.isolation, edge_rows=True)
        scopes = draw(st.permutations(_EDGE_SCOPES))
        found = [draw(edge_statements(scopes[i])) for i in range(count)]
    else:
        found = [draw(st.one_of(edge_statements(), statements(layout))) for _ in range(count)]
    # at least one write on the edge values
    if not any("edge_value" in statement.tags or "edge_scope" in statement.tags for statement in found):
        found[0] = draw(edge_statements())
    return FuzzCase(layout, tuple(found))


#: per-date rewrites on the edge rows' values for the statistics fuzzer (``{date}``: one of :data:`DATES`)
_EDGE_STATS_WRITES: tuple[str, ...] = (
    f"UPDATE {TABLE} SET p = '{LONG_TEXT}' WHERE d = '{{date}}'",
    f"UPDATE {TABLE} SET p = '' WHERE d = '{{date}}'",
    f"UPDATE {TABLE} SET v = -v WHERE d = '{{date}}'",
    f"UPDATE {TABLE} SET p = '{LONG_TEXT}' WHERE d = '{{date}}' AND id > 2",
    f"DELETE FROM {TABLE} WHERE p >= '{LONG_BOUND}'",
    f"DELETE FROM {TABLE} WHERE p > '{LONG_TEXT}'",
    f"DELETE FROM {TABLE} WHERE p < '{LONG_TEXT}' AND d = '{{date}}'",
    f"UPDATE {TABLE} SET v = v + 1 WHERE p = ''",
    f"DELETE FROM {TABLE} WHERE v < 0 AND d = '{{date}}'",
    f"UPDATE {TABLE} SET v = v + 1 WHERE v < -100",
    f"UPDATE {TABLE} SET v = v - 1 WHERE p IS NULL AND d = '{{date}}'",
)


@st.composite
def edge_stats_cases(draw: Draw) -> FuzzCase:
    """:func:`stats_cases` on a table with the edge rows: per-date rewrites that write or select long
    multi-byte, empty or negative values, whose file statistics delta-rs records cut (ADR 0020)."""
    base = draw(stats_cases())
    layout = FuzzLayout((), base.layout.clustered, isolation=base.layout.isolation, edge_rows=True)
    found = list(base.statements)
    for index in range(len(found)):
        if draw(st.integers(0, 5)) == 0:
            found[index] = draw(edge_replace_wheres())
        elif index == 0 or draw(st.booleans()):
            template = draw(st.sampled_from(_EDGE_STATS_WRITES))
            found[index] = FuzzStatement(
                template.format(date=draw(st.sampled_from(DATES))), tags=("per_date", "edge_value")
            )
    return FuzzCase(layout, tuple(found))


# ---------------------------------------------------------------------------------- hostile inputs


@dataclass(frozen=True)
class HostileLimits:
    """How big hostile inputs get.

    :param depth: most nested parentheses around one comparison.
    :param chain: most comparisons in one AND or OR chain.
    :param mixed: most nested ``NOT (x AND/OR y)`` levels.
    :param json_depth: most nested JSON arrays in a ``deltaguard check`` document.
    """

    depth: int = 3000
    chain: int = 3000
    mixed: int = 400
    json_depth: int = 200_000


@st.composite
def hostile_predicates(draw: Draw, limits: HostileLimits = HostileLimits()) -> str:
    """Predicates meant to break a parser: deep nesting, long AND/OR chains, odd literals and names."""
    shape = draw(st.sampled_from(("deep", "chain", "mixed", "random")))
    if shape == "deep":
        depth = draw(st.integers(1, limits.depth))
        return "(" * depth + "p = 'a'" + ")" * depth
    if shape == "chain":
        joiner = draw(st.sampled_from((" AND ", " OR ")))
        return joiner.join(f"id = {i}" for i in range(draw(st.integers(2, limits.chain))))
    if shape == "mixed":
        depth = draw(st.integers(1, limits.mixed))
        text = "p = 'a'"
        for i in range(depth):
            text = f"NOT ({text} {'AND' if i % 2 else 'OR'} id > {i})"
        return text
    pieces = draw(
        st.lists(
            st.one_of(
                st.sampled_from(
                    (
                        "p",
                        "d",
                        "id",
                        "s.k",
                        "`we ird`",
                        "t.p",
                        "CAST(",
                        ")",
                        "(",
                        "=",
                        "IN",
                        "NOT",
                        "AND",
                        "OR",
                    )
                ),
                st.sampled_from(
                    ("'x'", "DATE '2024-13-45'", "1e308", "-0", "NULL", "TRUE", "X'00'", "'\\''")
                ),
                st.text(max_size=8),
            ),
            min_size=1,
            max_size=30,
        )
    )
    return " ".join(pieces)


_ENGINES: tuple[dict[str, str], ...] = (
    {"name": "delta-rs", "version": "1.6.6"},
    {"name": "delta-spark", "version": "4.0.0"},
    {"name": "databricks", "runtime": "14.3"},
)


@st.composite
def hostile_documents(draw: Draw, limits: HostileLimits = HostileLimits()) -> Any:
    """``deltaguard check`` documents: valid skeletons with hostile predicates (as objects), and deeply
    nested JSON (as text)."""
    shape = draw(st.sampled_from(("predicate", "nested", "types")))
    if shape == "nested":
        # JSON text nested deeper than a recursive decoder goes (the CLI reads text, not objects)
        depth = draw(st.integers(1, limits.json_depth))
        return (
            '{"engine": {"name": "delta-rs", "version": "1.6.6"}, "running": '
            + "[" * depth
            + "]" * depth
            + "}"
        )
    engine = draw(st.sampled_from(_ENGINES))
    operation = draw(st.sampled_from(("DELETE", "UPDATE", "MERGE", "REPLACE_WHERE", "OPTIMIZE", "INSERT")))
    key = "merge_condition" if operation == "MERGE" else "predicate"
    text = draw(hostile_predicates(limits))
    if shape == "types":
        return {
            "engine": draw(st.sampled_from((engine, {"name": "databricks"}, {"name": 1}, []))),
            "table": draw(
                st.sampled_from(({}, {"partition_columns": ["p"]}, {"properties": {"a": 1}}, None))
            ),
            "running": draw(st.sampled_from(([], [{"operation": "DELETE", "predicate": text}], [None]))),
            "candidate": {"operation": operation, key: text},
        }
    return {
        "engine": engine,
        "table": {"partition_columns": ["p"]},
        "running": [{"operation": "DELETE", "predicate": "p = 'a'"}],
        "candidate": {"operation": operation, key: text},
    }
