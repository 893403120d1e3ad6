"""Spark SQL type names (``bigint``, ``decimal(10,2)``, ``array<string>``, ...) as deltalake schema types.

Specs describe columns with Spark SQL type names so one spec works for every engine; delta-rs needs
:mod:`deltalake.schema` types. Nested types are parsed recursively.
"""

from __future__ import annotations

import re

from deltalake.schema import ArrayType, Field, MapType, PrimitiveType, Schema, StructType

from deltaguard.engines.errors import InvalidWriteError

DeltaType = PrimitiveType | ArrayType | MapType | StructType

#: Spark SQL primitive type names (and their aliases) -> Delta primitive type names.
_PRIMITIVES: dict[str, str] = {
    "string": "string",
    "varchar": "string",
    "char": "string",
    "text": "string",
    "bigint": "long",
    "long": "long",
    "int": "integer",
    "integer": "integer",
    "smallint": "short",
    "short": "short",
    "tinyint": "byte",
    "byte": "byte",
    "float": "float",
    "real": "float",
    "double": "double",
    "boolean": "boolean",
    "bool": "boolean",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ltz": "timestamp",
    "timestamp_ntz": "timestamp_ntz",
}

_DECIMAL = re.compile(r"^(?:decimal|dec|numeric)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?$")
_SIZED_STRING = re.compile(r"^(?:varchar|char)\s*\(\s*\d+\s*\)$")


def spark_type_to_delta(type_name: str) -> DeltaType:
    """Convert one Spark SQL type name into a deltalake type.

    :param type_name: e.g. ``string``, ``BIGINT``, ``decimal(10,2)``, ``array<int>``,
        ``map<string,bigint>``, ``struct<a:int,b:string>``.
    :raises InvalidWriteError: for a name that is not a Spark SQL type.
    """
    text = type_name.strip()
    lowered = text.lower()
    if lowered in _PRIMITIVES:
        return PrimitiveType(_PRIMITIVES[lowered])
    if _SIZED_STRING.match(lowered):
        return PrimitiveType("string")
    decimal = _DECIMAL.match(lowered)
    if decimal:
        precision = int(decimal.group(1) or 10)
        scale = int(decimal.group(2) or 0)
        if not 1 <= precision <= 38 or not 0 <= scale <= precision:
            raise InvalidWriteError(
                f"invalid decimal type {type_name!r}: precision 1..38, scale 0..precision"
            )
        return PrimitiveType(f"decimal({precision},{scale})")
    inner = _generic_arguments(text, "array")
    if inner is not None:
        (element,) = _expect_arguments(inner, 1, type_name)
        return ArrayType(spark_type_to_delta(element), contains_null=True)
    inner = _generic_arguments(text, "map")
    if inner is not None:
        key, value = _expect_arguments(inner, 2, type_name)
        return MapType(spark_type_to_delta(key), spark_type_to_delta(value), value_contains_null=True)
    inner = _generic_arguments(text, "struct")
    if inner is not None:
        fields = []
        for member in _split_top_level(inner):
            name, sep, member_type = member.partition(":")
            if not sep or not name.strip():
                raise InvalidWriteError(f"struct member {member!r} of {type_name!r} must be 'name:type'")
            fields.append(Field(name.strip().strip("`"), spark_type_to_delta(member_type), nullable=True))
        if not fields:
            raise InvalidWriteError(f"struct type {type_name!r} has no members")
        return StructType(fields)
    raise InvalidWriteError(f"unknown Spark SQL type {type_name!r}")


def schema_from_spark_types(columns: dict[str, str] | None) -> Schema:
    """A deltalake schema from ``column -> Spark SQL type name`` (all columns nullable).

    :raises InvalidWriteError: when there are no columns or a type is unknown.
    """
    if not columns:
        raise InvalidWriteError("a schema needs at least one column")
    return Schema(
        [Field(name, spark_type_to_delta(type_name), nullable=True) for name, type_name in columns.items()]
    )


def _generic_arguments(text: str, keyword: str) -> str | None:
    """The text between ``keyword<`` and the final ``>``, or ``None`` if ``text`` is not that generic."""
    match = re.match(rf"^{keyword}\s*<(.*)>$", text, re.IGNORECASE | re.DOTALL)
    return match.group(1) if match else None


def _expect_arguments(inner: str, count: int, type_name: str) -> list[str]:
    parts = _split_top_level(inner)
    if len(parts) != count:
        raise InvalidWriteError(f"{type_name!r} needs {count} type argument(s), got {len(parts)}")
    return parts


def _split_top_level(inner: str) -> list[str]:
    """Split on commas that are not nested inside ``<...>`` or ``(...)``."""
    parts: list[str] = []
    depth = 0
    current = ""
    for ch in inner:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
            if depth < 0:
                raise InvalidWriteError(f"unbalanced brackets in type arguments {inner!r}")
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if depth != 0:
        raise InvalidWriteError(f"unbalanced brackets in type arguments {inner!r}")
    if current.strip():
        parts.append(current.strip())
    return parts
