"""The witness texts the Spark oracle casts, and the partition types it builds witnesses of (no JVM)."""

from __future__ import annotations

import pytest

from deltaguard.engines.spark.meaning import spark_type, witness_sql, witness_texts


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


def test_the_witness_rows_are_the_product_of_the_columns_texts() -> None:
    query = witness_sql([("k", "integer", [None, "1"]), ("a.b", "string", [None, "it's \\ é"])])
    # every text is hex-encoded UTF-8, so quotes and backslashes never meet Spark's parser
    assert "it's" not in query and "CAST(X'" + "it's \\ é".encode().hex().upper() + "' AS STRING)" in query
    rows = query.split(" FROM VALUES ", 1)[1].split(" AS __witness", 1)[0]
    assert rows.count("(CAST(") == 4  # 2 x 2 rows
    assert "try_cast(__text0 AS integer) AS `k`" in query
    assert "try_cast(__text1 AS string) AS `a.b`" in query
    # a row is dropped when a text its type cannot hold was cast to NULL
    assert "(__text0 IS NULL OR try_cast(__text0 AS integer) IS NOT NULL)" in query


def test_too_many_witness_rows_are_refused() -> None:
    texts = [str(i) for i in range(65)]
    with pytest.raises(ValueError, match="more than 4096"):
        witness_sql([("a", "integer", texts), ("b", "integer", texts)])
    with pytest.raises(ValueError, match="no partition columns"):
        witness_sql([])
