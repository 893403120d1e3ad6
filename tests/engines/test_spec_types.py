"""Each spec type is declared once: its class carries its name and checks, engines register runners."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from deltalake import DeltaTable

from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.table_config import TableConfig
from deltaguard.engines import specs
from deltaguard.engines.base import Runners, Unsupported, validate_spec
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.deltars.ops import RUNNERS as DELTA_RS_RUNNERS
from deltaguard.engines.errors import InvalidWriteError, UnsupportedWriteError
from deltaguard.engines.spark.runners import RUNNERS as SPARK_RUNNERS
from deltaguard.engines.spark.runners import validate_spec as spark_validate
from deltaguard.engines.specs import SpecCheck
from tests.engines.helpers import rows

#: every engine the package ships, by the runner table it registers
SHIPPED: dict[str, Runners[object]] = {"delta-rs": DELTA_RS_RUNNERS, "spark": SPARK_RUNNERS}  # type: ignore[dict-item]


def test_the_registry_is_built_from_the_classes() -> None:
    declared = {
        cls for cls in vars(specs).values() if isinstance(cls, type) and issubclass(cls, specs.WriteSpec)
    }
    assert set(specs.SPEC_TYPES.values()) == declared - {specs.WriteSpec}
    assert all(specs.SPEC_TYPES[cls.json_name] is cls for cls in declared - {specs.WriteSpec})


def test_a_second_class_cannot_take_a_json_name() -> None:
    with pytest.raises(TypeError, match="taken by DeleteSpec"):

        @dataclasses.dataclass(frozen=True)
        class Other(specs.WriteSpec):
            json_name: ClassVar[str] = "delete"

    assert specs.SPEC_TYPES["delete"] is specs.DeleteSpec


@pytest.mark.parametrize("engine", sorted(SHIPPED))
@pytest.mark.parametrize(
    "spec_type", sorted(specs.SPEC_TYPES.values(), key=lambda c: c.json_name), ids=lambda c: c.json_name
)
def test_every_spec_type_has_a_runner_or_a_reason_in_each_shipped_engine(
    engine: str, spec_type: type[specs.WriteSpec]
) -> None:
    entry = SHIPPED[engine].entry(spec_type)
    assert entry is not None, f"{engine} registers nothing for {spec_type.__name__}"
    if isinstance(entry, Unsupported):
        assert len(entry.reason) > 10, "say why, and what to do instead"


def test_only_sql_statements_are_unsupported_by_a_shipped_engine() -> None:
    unsupported = {
        (engine, cls.json_name)
        for engine, table in SHIPPED.items()
        for cls in specs.SPEC_TYPES.values()
        if isinstance(table.entry(cls), Unsupported)
    }
    assert unsupported == {("delta-rs", "sql")}


# -- a spec type declared in one place ------------------------------------------------------------------


@pytest.fixture
def truncate() -> Iterator[type[specs.WriteSpec]]:
    """A spec type no engine knows, declared only here (and unregistered afterwards)."""

    @dataclasses.dataclass(frozen=True)
    class TruncateSpec(specs.WriteSpec):
        json_name: ClassVar[str] = "truncate_for_test"
        described_as: ClassVar[str] = "a TRUNCATE"

        keep_days: int = 0

        def operation(self) -> Operation:
            return Operation(OperationKind.DELETE)

        def validate(self, check: SpecCheck) -> None:
            if self.keep_days < 0:
                raise InvalidWriteError("keep_days must be >= 0")

    try:
        yield TruncateSpec
    finally:
        del specs.SPEC_TYPES["truncate_for_test"]


def test_a_new_spec_type_is_validated_by_its_own_checks(truncate: type[specs.WriteSpec]) -> None:
    validate_spec(truncate(keep_days=1), TableConfig(uri="/t"))  # type: ignore[call-arg]
    with pytest.raises(InvalidWriteError, match="keep_days must be >= 0"):
        validate_spec(truncate(keep_days=-1), TableConfig(uri="/t"))  # type: ignore[call-arg]
    with pytest.raises(InvalidWriteError, match="A TRUNCATE needs an existing table"):
        validate_spec(truncate(), TableConfig(exists=False, uri="/t"))


def test_a_new_spec_type_is_refused_by_engines_without_a_runner(
    truncate: type[specs.WriteSpec], partitioned: str
) -> None:
    spec = truncate()
    before = DeltaTable(partitioned).version()
    with pytest.raises(UnsupportedWriteError, match="A TRUNCATE is not supported by delta-rs") as refused:
        DeltaRsEngine().write(partitioned, spec)
    assert refused.value.engine == "delta-rs" and refused.value.spec_type is truncate
    assert DeltaTable(partitioned).version() == before  # nothing written
    with pytest.raises(UnsupportedWriteError, match="not supported by Spark: it has no runner"):
        spark_validate(spec, TableConfig(uri="/t"))
    assert all(table.entry(truncate) is None for table in SHIPPED.values())  # neither runner nor Unsupported


def test_delta_rs_refuses_a_sql_statement_with_its_reason(tmp_path: Path) -> None:
    spec = specs.SqlSpec(sql="DELETE FROM t", classified=Operation(OperationKind.DELETE))
    with pytest.raises(UnsupportedWriteError, match="runs no SQL statements; write it with engine='spark'"):
        DeltaRsEngine().validate(str(tmp_path), spec, TableConfig(uri=str(tmp_path)))


def test_creating_writes_are_the_classes_that_say_so() -> None:
    assert {cls.json_name for cls in specs.SPEC_TYPES.values() if cls.creates_table} == {
        "append",
        "overwrite",
        "create",
    }
    create = specs.SqlSpec(
        sql="CREATE TABLE x AS SELECT 1", classified=Operation(OperationKind.CREATE_OR_REPLACE)
    )
    assert create.may_create() and not specs.DeleteSpec().may_create()
    assert specs.AppendSpec(source=rows([1], "a")).may_create()


def test_every_spec_type_says_which_operation_the_model_judges() -> None:
    # the base class's operation() only raises: a spec type without its own would reach no decision
    forgot = [name for name, cls in specs.SPEC_TYPES.items() if cls.operation is specs.WriteSpec.operation]
    assert forgot == []
