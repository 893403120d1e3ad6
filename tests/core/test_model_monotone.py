"""The model's conflicts are monotone in the running operations: an operation that conflicts with some
running writes also conflicts when more are running. The re-admission of a queue grants a run of alike
waiters on the proof of its last member's decision (ADR 0031), which rests on this."""

from __future__ import annotations

import itertools
import random

import pytest

from deltaguard.core import model
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig

K = OperationKind
#: Databricks has the 3-way rule (a count of readers); delta-spark stands for the pair rules alone
PROFILES = [EngineProfile(EngineName.DELTA_SPARK, "4.0"), EngineProfile(EngineName.DATABRICKS, "14.3")]
TABLES = [
    TableConfig(partition_columns=("date",)),
    TableConfig(
        partition_columns=("date",),
        properties={"delta.enableDeletionVectors": "true", "delta.enableRowTracking": "true"},
    ),
]
POOL = [
    Operation(K.INSERT),
    Operation(K.INSERT, predicate="date = '2024-01-01'"),
    Operation(K.INSERT, reads_target=True),
    Operation(K.UPDATE, predicate="date = '2024-01-01'"),
    Operation(K.UPDATE, predicate="id = 3"),
    Operation(K.DELETE, predicate="date = '2024-01-02'"),
    Operation(K.MERGE, merge_condition="t.id = s.id"),
    Operation(K.MERGE, merge_condition="t.id = s.id AND t.date = '2024-01-01'"),
    Operation(K.OPTIMIZE),
    Operation(K.SET_TBLPROPERTIES),
]


@pytest.mark.slow  # ~7,000 decisions per case: seconds on a quiet machine, a minute at a load of 19
@pytest.mark.parametrize(("profile", "table"), list(itertools.product(PROFILES, TABLES)))
def test_more_running_writes_never_take_a_conflict_away(profile: EngineProfile, table: TableConfig) -> None:
    """Every candidate beside every one or two running writes, and then one more (the 3-way rule counts
    readers: two and three must both conflict), in a random position."""
    rng = random.Random(20261128)
    runnings = [[], *([op] for op in POOL), *map(list, itertools.combinations_with_replacement(POOL, 2))]
    with model.pair_memo():  # each operation's facts and each pair judged once (the answers are the same)
        _check(rng, runnings, table, profile)


def _check(
    rng: random.Random, runnings: list[list[Operation]], table: TableConfig, profile: EngineProfile
) -> None:
    for candidate in POOL:
        for running in runnings:
            if not model.decide(candidate, running, table, profile).conflict:
                continue
            for extra in POOL:
                more = list(running)
                more.insert(rng.randint(0, len(more)), extra)
                assert model.decide(candidate, more, table, profile).conflict, (candidate, running, extra)
