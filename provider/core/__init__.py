"""The pure core of deltaguard: conflict model, table configuration, predicates, lease decisions.

Nothing under this package imports Airflow or an engine (a test enforces it).
"""

from deltaguard.core.decision import Decision, DeltaException, PairVerdict, Verdict
from deltaguard.core.model import decide, pair_verdict
from deltaguard.core.operations import DML, METADATA_CHANGES, Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig

__all__ = [
    "DML",
    "METADATA_CHANGES",
    "Decision",
    "DeltaException",
    "EngineName",
    "EngineProfile",
    "Operation",
    "OperationKind",
    "PairVerdict",
    "TableConfig",
    "Verdict",
    "decide",
    "pair_verdict",
]
