"""The lease manager's I/O side: lease stores (SQLite, PostgreSQL) and the manager that drives them.

The admission decisions themselves are pure and live in :mod:`deltaguard.core.admission`.
"""
