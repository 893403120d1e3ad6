"""The target rows a MERGE reads: the part of its ``ON`` condition that restricts the target alone."""

from __future__ import annotations

import functools

from sqlglot import exp

from deltaguard.core.sql.dnf import flatten
from deltaguard.core.sql.predicates import DIALECT, EVERYTHING, Predicate, parse_predicate


def merge_target_predicate(condition: str, target_alias: str = "t") -> Predicate:
    """The part of a MERGE ``ON`` condition that restricts which target rows the MERGE reads.

    Only top-level ``AND`` conjuncts whose columns are all qualified with ``target_alias`` count
    (``t.date = '2024-01-01'``); conjuncts with source or unqualified columns (``s.date = t.date``) restrict
    nothing. The kept conjuncts are returned with their qualifiers removed; none kept is :data:`EVERYTHING`.

    :param condition: the MERGE ``ON`` condition.
    :param target_alias: the target's alias (or its table name, possibly ``db.table``), case-insensitive.
    :raises PredicateError: if the condition does not parse.
    """
    return _merge_target_cached(condition, target_alias.lower())


@functools.lru_cache(maxsize=4096)
def _merge_target_cached(condition: str, alias: str) -> Predicate:
    parsed = parse_predicate(condition)
    if parsed.tree is None:
        return EVERYTHING
    kept = [
        _unqualified(conjunct)
        for conjunct in flatten(parsed.tree, exp.And)
        if _only_target_columns(conjunct, alias)
    ]
    if not kept:
        return EVERYTHING
    # Keep an OR in parentheses so the text stays right when a caller ANDs it with more conditions.
    kept = [
        exp.paren(conjunct, copy=False) if isinstance(conjunct, exp.Or) else conjunct for conjunct in kept
    ]
    tree = exp.and_(*kept) if len(kept) > 1 else kept[0]
    return Predicate(sql=tree.sql(dialect=DIALECT), is_everything=False, tree=tree)


def _qualifier_matches(column: exp.Column, alias: str) -> bool:
    qualifier = ".".join(part.name for part in column.parts[:-1]).lower()
    if not qualifier:
        return False
    return qualifier == alias or ("." in alias and qualifier == alias.rsplit(".", 1)[1])


def _only_target_columns(conjunct: exp.Expr, alias: str) -> bool:
    if conjunct.find(exp.Query, exp.Subquery) is not None:
        return False
    return all(_qualifier_matches(column, alias) for column in conjunct.find_all(exp.Column))


def _unqualified(conjunct: exp.Expr) -> exp.Expr:
    def strip(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column):
            return exp.column(node.this.copy())
        return node

    return conjunct.transform(strip)
