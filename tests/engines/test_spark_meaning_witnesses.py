"""The witness texts the Spark oracle casts, and the partition types it builds witnesses of (no JVM)."""

from __future__ import annotations

import pytest

from deltaguard.engines.spark.meaning import spark_type, witness_texts


def test_null_first_each_candidate_once_then_the_types_extras() -> None:
    assert witness_texts(["1", None, "01", "1"], "integer") == [None, "1", "01"]
    assert witness_texts(["a"], "string") == [None, "a", ""]
    assert witness_texts([], " Boolean ") == [None, "true", "false"]
    assert witness_texts(["true"], "boolean") == [None, "true", "false"]


@pytest.mark.parametrize("kind", ["integer", "long", "int", "string", "date", "timestamp", "timestamp_ntz"])
def test_primitive_types_are_cast_as_spelled(kind: str) -> None:
    assert spark_type(kind.upper()) == kind


def test_decimal_keeps_its_precision_and_scale() -> None:
    assert spark_type("decimal(10, 2)") == "decimal(10, 2)"


@pytest.mark.parametrize("kind", ["struct<a:int>", "array<int>", "binary", "int) OR (true", "variant"])
def test_other_types_are_refused(kind: str) -> None:
    with pytest.raises(ValueError, match="no witness rows"):
        spark_type(kind)
