"""Why a predicate keeps Databricks from resolving conflicts row by row ("Isolation levels and write
conflicts", Limitations for row-level concurrency): complex types, non-deterministic functions, subqueries."""

from __future__ import annotations

from sqlglot import exp

from deltaguard.core.closed_world import function_name, is_deterministic
from deltaguard.core.sql.predicates import Predicate

COMPLEX_TYPE = "condition on a complex type (struct/array/map)"
SUBQUERY = "subquery"
CORRELATED_SUBQUERY = "correlated subquery"

#: sqlglot classes (by key) and Spark function names that take apart structs, arrays or maps.
_COMPLEX_FUNCTIONS = frozenset(
    {
        "arraycontains",
        "arraysize",
        "arrayfilter",
        "arrayany",
        "arrayall",
        "arrayjoin",
        "arraysort",
        "arrayagg",
        "arrayconcat",
        "arrayslice",
        "arrayfirst",
        "arraylast",
        "arraytostring",
        "arraysoverlap",
        "arrayintersect",
        "arrayoverlaps",
        "arrayuniqueagg",
        "mapkeys",
        "mapvalues",
        "mapfromentries",
        "explode",
        "explodeouter",
        "posexplode",
        "posexplodeouter",
        "inline",
        "flatten",
        "transform",
        "structextract",
        "elementat",
        "cardinality",
        "size",
        "get",
        "element_at",
        "try_element_at",
        "filter",
        "exists",
        "forall",
        "aggregate",
        "reduce",
        "sort_array",
        "zip_with",
        "arrays_zip",
        "slice",
        "get_field",
        "map_contains_key",
        "map_filter",
        "map_zip_with",
        "transform_keys",
        "transform_values",
    }
)
_COMPLEX_PREFIXES = ("array_", "map_", "arrays_")


def _function_names(node: exp.Func) -> tuple[str, ...]:
    if isinstance(node, exp.Anonymous):
        return (str(node.name).lower(),)
    return (node.key.lower(), *(name.lower() for name in node.sql_names()))


#: Constructors of complex values: comparing with ``array(...)``, ``named_struct(...)`` or ``map(...)`` is a
#: condition on a complex type.
_COMPLEX_CONSTRUCTORS = (exp.Array, exp.Struct, exp.Map, exp.VarMap, exp.MapFromEntries)


def _is_complex_access(node: exp.Expr, table_qualifiers: bool) -> bool:
    if isinstance(node, (exp.Bracket, exp.Dot, *_COMPLEX_CONSTRUCTORS)):
        return True
    # More than one qualifier: a struct field behind a table alias ("t.address.city"). Without known table
    # qualifiers even one qualifier may be a struct ("address.city").
    if isinstance(node, exp.Column) and len(node.parts) > (2 if table_qualifiers else 1):
        return True
    # EXISTS (SELECT ...) is a subquery; exists(array, x -> ...) is a higher-order array function.
    if isinstance(node, exp.Exists) and isinstance(node.this, exp.Query | exp.Subquery):
        return False
    if isinstance(node, exp.Lambda):
        return True
    if isinstance(node, exp.Func) and node.find(exp.Column) is not None:
        names = _function_names(node)
        return any(name in _COMPLEX_FUNCTIONS or name.startswith(_COMPLEX_PREFIXES) for name in names)
    return False


def _is_correlated(query: exp.Expr) -> bool:
    """A subquery that refers to a table alias it does not itself define (``t.id`` of the outer query)."""
    defined = {table.alias_or_name.lower() for table in query.find_all(exp.Table)}
    defined |= {alias.alias.lower() for alias in query.find_all(exp.TableAlias) if alias.name}
    defined |= {str(cte.alias).lower() for cte in query.find_all(exp.CTE)}
    for column in query.find_all(exp.Column):
        qualifier = column.table.lower()
        if qualifier and qualifier not in defined:
            return True
    return False


def row_level_limitations(p: Predicate, table_qualifiers: bool = False) -> tuple[str, ...]:
    """Why this predicate keeps Databricks from resolving conflicts row by row ("Isolation levels and write
    conflicts", Limitations for row-level concurrency).

    :param p: the predicate (of an UPDATE/DELETE, or a MERGE condition).
    :param table_qualifiers: ``x.y`` names column ``y`` of table ``x`` (a MERGE condition, whose
        qualifiers are the target and source aliases); otherwise a qualifier may be a struct column.
    :returns: short phrases, each at most once and in a fixed order: :data:`COMPLEX_TYPE`,
        ``"non-deterministic expression (<function>)"``, :data:`SUBQUERY`, :data:`CORRELATED_SUBQUERY`
        (a correlated subquery is reported as both). Empty when there is none.
    """
    if p.tree is None:
        return (p.unknown,) if p.unknown else ()
    complex_type = False
    random_names: list[str] = []
    subquery = correlated = False
    for node in p.tree.walk():
        if isinstance(node, exp.Subquery | exp.Query) and not isinstance(node.parent, exp.Subquery):
            subquery = True
            correlated = correlated or _is_correlated(node)
        if (
            isinstance(node, exp.Func)
            and node.find_ancestor(exp.Query) is None
            and not is_deterministic(node)
        ):
            # A function not known to be deterministic is not (ADR 0036); one taking apart a complex value
            # is a complex-type condition, and inside a subquery the subquery already is the limitation.
            name = function_name(node)
            over_query = isinstance(node, exp.Exists) and isinstance(node.this, exp.Query | exp.Subquery)
            if not over_query and not _is_complex_access(node, True) and name not in random_names:
                random_names.append(name)
        # Inside a subquery a qualifier names one of the subquery's own tables.
        in_query = isinstance(node, exp.Column) and node.find_ancestor(exp.Query) is not None
        complex_type = complex_type or _is_complex_access(node, table_qualifiers or in_query)
    reasons: list[str] = []
    if complex_type:
        reasons.append(COMPLEX_TYPE)
    reasons.extend(f"non-deterministic expression ({name})" for name in random_names)
    if subquery:
        reasons.append(SUBQUERY)
    if correlated:
        reasons.append(CORRELATED_SUBQUERY)
    return tuple(reasons)
