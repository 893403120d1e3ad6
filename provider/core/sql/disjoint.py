"""When two predicates' DNF terms exclude each other: per-column constraints compiled from atoms, and their
disjointness, sound first (``True`` only when no value can satisfy both)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from deltaguard.core.sql.dnf import Atom, Term
from deltaguard.core.sql.predicate_values import DATE, DATESTR, DAY, NUMSTR, STR, Domain


class _Conflict:
    """Null-ness marker for "must be NULL and must not be NULL" (never equal to True/False/None)."""


_CONFLICT = _Conflict()
#: ``True``: must be NULL; ``False``: must not be NULL; ``None``: either; ``_CONFLICT``: impossible.
_Null = bool | None | _Conflict


@dataclass
class ColumnConstraint:
    """Everything one conjunctive term says about one column."""

    null: _Null = None
    domains: dict[str, Domain] = field(default_factory=dict)
    #: the values of ``domains`` *or* NULL (a reader whose engine keeps NULL-valued files for its
    #: comparisons, see :func:`null_widened_terms`); never set by parsing
    or_null: bool = False
    #: with ``or_null``: also the empty string (a logged-null partition a string comparison may keep)
    or_empty: bool = False

    def add(self, atom: Atom) -> None:
        self.null = _merge_null(self.null, atom.null)
        if atom.kind is not None and atom.domain is not None:
            known = self.domains.get(atom.kind)
            self.domains[atom.kind] = atom.domain if known is None else known.intersect(atom.domain)

    def is_empty(self) -> bool:
        return _empty(self.null, _lifted(self.domains).values())


def _lifted(domains: dict[str, Domain]) -> dict[str, Domain]:
    """``domains`` with finite sets of dates also stated as ``CAST(c AS DATE)`` values (kind ``day``).

    ``c = '2024-01-05'`` and ``c = DATE '2024-01-05'`` both mean ``CAST(c AS DATE) = DATE '2024-01-05'`` on
    every column type (a STRING column holds text that casts to that date, a DATE column that date, a
    TIMESTAMP column midnight of it), so such sets may meet ``year(c)`` and ``c LIKE '2024-01%'``. Ranges
    are not lifted (on a TIMESTAMP column ``ts > DATE '2024-01-05'`` holds at noon that day).
    """
    lifted: list[Domain] = []
    for kind in (DATESTR, DATE):
        domain = domains.get(kind)
        if domain is not None and domain.values is not None:
            # Admitted values only: bounds and exclusions of the domain already apply to them.
            admitted = frozenset(
                value
                for value in domain.values
                if not Domain(values=frozenset({value})).intersect(domain).is_empty()
            )
            lifted.append(Domain(values=admitted))
    if not lifted:
        return domains
    day = domains.get(DAY)
    for domain in lifted:
        day = domain if day is None else day.intersect(domain)
    assert day is not None
    return {**domains, DAY: day}


#: A compiled conjunctive term: column -> constraint, never provably empty on its own.
Compiled = dict[str, ColumnConstraint]


def _merge_null(a: _Null, b: _Null) -> _Null:
    if a is None:
        return b
    if b is None or a is b:
        return a
    return _CONFLICT


def _empty(null: _Null, domains: Iterable[Domain]) -> bool:
    domain_list = list(domains)
    if null is _CONFLICT:
        return True
    # Every comparison needs a non-NULL value, so "must be NULL" plus any domain is empty.
    if null is True and domain_list:
        return True
    return any(domain.is_empty() for domain in domain_list)


def compile_term(term: Term) -> Compiled | None:
    """Group a term's atoms by column; ``None`` if the term is provably unsatisfiable."""
    compiled: Compiled = {}
    for atom in term:
        compiled.setdefault(atom.column, ColumnConstraint()).add(atom)
    if any(constraint.is_empty() for constraint in compiled.values()):
        return None
    return compiled


def terms_disjoint(a: Compiled, b: Compiled) -> bool:
    """Whether two compiled terms exclude each other: some column both constrain has no value in common."""
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    for column, first in small.items():
        second = large.get(column)
        if second is not None and _columns_disjoint(first, second):
            return True
    return False


def _admits_null(constraint: ColumnConstraint) -> bool:
    """Whether a NULL value satisfies the constraint (a comparison domain needs a non-NULL value)."""
    return constraint.or_null or (
        constraint.null is True or (constraint.null is None and not constraint.domains)
    )


#: kinds whose comparisons a string column's empty string may satisfy (it is below every other string)
TEXT_KINDS = frozenset({STR, DATESTR, NUMSTR})


def _admits_empty_string(constraint: ColumnConstraint) -> bool:
    """Whether the empty string may satisfy the constraint (conservatively ``True`` where unsure): only a
    string comparison can hold for it, and it is below every other string."""
    if constraint.null is True:
        return False
    for kind, domain in constraint.domains.items():
        if kind not in TEXT_KINDS:
            return False  # a typed comparison (number, date, ...): no string column value of ''
        if domain.values is not None:
            if kind != STR or "" not in domain.values:
                return False
        elif domain.low is not None and not (domain.low.value == "" and domain.low.inclusive):
            return False
        if "" in domain.excluded:
            return False
    return True


def _columns_disjoint(first: ColumnConstraint, second: ColumnConstraint) -> bool:
    """Whether two satisfiable constraints on one column exclude each other."""
    if first.or_null or second.or_null:
        # NULL is shared when both admit it; otherwise only the non-NULL values can meet
        if _admits_null(first) and _admits_null(second):
            return False
        # delta-rs logs an empty-string partition value as null, so a widened read keeps its files too
        # (measured): the other side must not admit ''
        widened, plain = (first, second) if first.or_null else (second, first)
        if widened.or_empty and not plain.or_null and _admits_empty_string(plain):
            return False
        return _columns_disjoint(
            ColumnConstraint(first.null, first.domains), ColumnConstraint(second.null, second.domains)
        )
    null = _merge_null(first.null, second.null)
    if null is _CONFLICT or (null is True and (first.domains or second.domains)):
        return True
    # Each domain is satisfiable on its own (unsatisfiable terms were dropped): only shared kinds can clash.
    first_domains, second_domains = _lifted(first.domains), _lifted(second.domains)
    for kind, domain in second_domains.items():
        known = first_domains.get(kind)
        if known is not None and known.intersect(domain).is_empty():
            return True
    return False


def string_values_only(constraint: ColumnConstraint) -> bool:
    """An equality or IN list of plain (non-date, non-number) string literals, nothing else."""
    domain = constraint.domains.get(STR)
    return len(constraint.domains) == 1 and domain is not None and domain.values is not None
