"""Spark SQL type names -> deltalake types."""

from __future__ import annotations

import pytest
from deltalake.schema import ArrayType, MapType, PrimitiveType, StructType

from deltaguard.engines.errors import InvalidWriteError
from deltaguard.engines.spark.schema_types import schema_from_spark_types, spark_type_to_delta


@pytest.mark.parametrize(
    ("spark", "delta"),
    [
        ("string", "string"),
        ("VARCHAR(20)", "string"),
        ("bigint", "long"),
        ("INT", "integer"),
        ("smallint", "short"),
        ("tinyint", "byte"),
        ("double", "double"),
        ("float", "float"),
        ("boolean", "boolean"),
        ("binary", "binary"),
        ("date", "date"),
        ("timestamp", "timestamp"),
        ("timestamp_ntz", "timestamp_ntz"),
        ("decimal(10,2)", "decimal(10,2)"),
        ("decimal", "decimal(10,0)"),
        ("numeric(5)", "decimal(5,0)"),
    ],
)
def test_primitives(spark: str, delta: str) -> None:
    result = spark_type_to_delta(spark)
    assert isinstance(result, PrimitiveType)
    assert result.type == delta


def test_nested_types() -> None:
    array = spark_type_to_delta("array<decimal(5,1)>")
    assert isinstance(array, ArrayType) and array.element_type == PrimitiveType("decimal(5,1)")
    mapping = spark_type_to_delta("map<string, array<int>>")
    assert isinstance(mapping, MapType) and mapping.value_type == ArrayType(PrimitiveType("integer"))
    struct = spark_type_to_delta("struct<a:int, b:map<string,bigint>>")
    assert isinstance(struct, StructType)
    assert [f.name for f in struct.fields] == ["a", "b"]


@pytest.mark.parametrize(
    "bad",
    ["varchar2", "decimal(40,2)", "decimal(5,6)", "array<int", "map<string>", "struct<a>", "struct<>", ""],
)
def test_bad_types(bad: str) -> None:
    with pytest.raises(InvalidWriteError):
        spark_type_to_delta(bad)


def test_schema_from_spark_types() -> None:
    schema = schema_from_spark_types({"id": "bigint", "name": "string"})
    assert [(f.name, f.type) for f in schema.fields] == [
        ("id", PrimitiveType("long")),
        ("name", PrimitiveType("string")),
    ]
    with pytest.raises(InvalidWriteError):
        schema_from_spark_types({})
