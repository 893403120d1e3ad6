"""Typed errors every engine raises, whatever the engine's own exception types.

Defined in :mod:`deltaguard.exceptions` (the one error tree); imported here for the engines.
"""

from __future__ import annotations

from deltaguard.exceptions import (
    CommitFencedError,
    ConflictKind,
    DeltaConflictError,
    DeltaGuardError,
    EnginePanicError,
    InvalidWriteError,
    SparkSetupError,
    TableAccessError,
    UnsupportedWriteError,
)

__all__ = [
    "CommitFencedError",
    "ConflictKind",
    "DeltaConflictError",
    "DeltaGuardError",
    "EnginePanicError",
    "InvalidWriteError",
    "SparkSetupError",
    "TableAccessError",
    "UnsupportedWriteError",
]
