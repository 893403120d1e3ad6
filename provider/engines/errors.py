"""Typed errors every engine raises, whatever the engine's own exception types.

Defined in :mod:`deltaguard.exceptions` (the one error tree); imported here for the engines.
"""

from __future__ import annotations

from deltaguard.exceptions import (
    ConflictKind,
    DeltaConflictError,
    DeltaGuardError,
    InvalidWriteError,
    SparkSetupError,
    TableAccessError,
)

__all__ = [
    "ConflictKind",
    "DeltaConflictError",
    "DeltaGuardError",
    "InvalidWriteError",
    "SparkSetupError",
    "TableAccessError",
]
