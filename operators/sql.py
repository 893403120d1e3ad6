"""``DeltaSqlOperator``: one Spark SQL write statement, admitted by the conflict model like any other write."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from deltaguard.engines import specs
from deltaguard.engines.errors import InvalidWriteError
from deltaguard.operators.base import DeltaWriteOperator

if TYPE_CHECKING:
    from deltaguard.core.operations import Operation
    from deltaguard.core.table_config import TableConfig


class DeltaSqlOperator(DeltaWriteOperator):
    """Run one Spark SQL write statement on ``table``.

    The statement is classified by :func:`deltaguard.core.sql.classify.classify_sql` (that is what the lease
    manager reasons about). With the Spark engine it runs as written. With delta-rs it runs only where it
    translates to a delta-rs call (DELETE, UPDATE, OPTIMIZE [WHERE partition = value] [ZORDER BY],
    ALTER TABLE SET TBLPROPERTIES / ADD COLUMNS, INSERT INTO t (cols) VALUES ...); anything else fails
    before any lease with an error saying to use ``engine="spark"``.

    :param sql: the statement (templated). It must write the table named by ``table``.
    """

    template_fields: Sequence[str] = (*DeltaWriteOperator.template_fields, "sql")
    template_ext: Sequence[str] = (".sql",)
    template_fields_renderers = {"sql": "sql"}

    def __init__(self, *, sql: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sql = sql

    def _classified(self) -> Operation | None:
        try:
            from deltaguard.core.sql.classify import classify_sql
        except ImportError:  # classifier not available: the translated spec's own operation is used
            return None
        try:
            return classify_sql(self.sql).operation
        except ValueError as exc:  # SqlClassificationError is a ValueError
            raise InvalidWriteError(f"the conflict model cannot classify this statement: {exc}") from None

    def build_spec(self, table_config: TableConfig) -> specs.WriteSpec:
        from deltaguard.engines.sql_translate import translate

        if not isinstance(self.sql, str) or not self.sql.strip():
            raise InvalidWriteError("DeltaSqlOperator needs a SQL statement")
        classified = self._classified()
        engine_name = getattr(self.resolved_engine, "name", "")
        if engine_name == "spark" and classified is not None:
            # run as written: Spark parses what the translator does not (MERGE WITH SCHEMA EVOLUTION)
            return specs.SqlSpec(sql=self.sql, classified=classified)
        translated = translate(self.sql)
        if translated is not None and engine_name != "spark":
            return translated
        if engine_name == "spark":
            operation = classified or (translated.operation() if translated is not None else None)
            if operation is None:
                raise InvalidWriteError("cannot classify the statement for the conflict model")
            return specs.SqlSpec(sql=self.sql, classified=operation)
        first_word = self.sql.strip().split(None, 1)[0].upper()
        raise InvalidWriteError(
            f"delta-rs cannot run this {first_word} statement (it does not translate to a delta-rs call); "
            "run it with engine='spark' or use the typed operator (DeltaMergeOperator, DeltaInsertOperator, ...)"
        )

    def conflict_operation(self, spec: specs.WriteSpec) -> Operation:
        # the classifier sees the whole statement (e.g. INSERT ... SELECT reading the target)
        return self._classified() or spec.operation()
