"""Avro schemas as Spark types and back, as Spark's own ``from_avro`` / ``to_avro`` map them (pure).

Avro to Spark (``spark_type``): records are structs, a union with null is its other branch, nullable
(``["int", "long"]`` is a long and ``["float", "double"]`` a double, as in Spark); arrays, maps (string
keys), enums as strings, fixed and bytes as binary; logical types: ``date``, ``timestamp-millis`` and
``-micros`` (timestamp), ``local-timestamp-*`` (timestamp_ntz), ``decimal`` (precision at most 38),
``uuid`` (string), ``time-millis`` (int, ms of the day) and ``time-micros`` (long). What Spark's
``from_avro`` makes a struct of ``member0``, ``member1``... (a union of other types) and recursive types
are refused naming the field. ``to_python`` gives the function turning fastavro's value of a schema into
what pyarrow takes for its Spark type (None where fastavro's value is that already).

Spark to Avro (``avro_schema``): the inverse, with Spark's names (the top record ``topLevelRecord``, a
nested one named by its field in its parent's namespace), timestamps as ``timestamp-micros``. A nullable
column is ``["null", type]`` with default null (Spark's ``to_avro`` puts null second, without a default):
so a nullable column added later is a change the registry's default (BACKWARD) check accepts.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from raftlog_spark.errors import SchemaError

Convert = Callable[[Any], Any] | None  # fastavro's value -> pyarrow's; None: the value as it is
PRIMITIVES: dict[str, DataType] = {
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "bytes": BinaryType(),
    "string": StringType(),
}
# Spark's type -> the Avro primitive it is written as: PRIMITIVES turned around, and Spark's narrower
# integers written as Avro's int
_PRIMITIVES_OF_SPARK: tuple[tuple[type[DataType], str], ...] = (
    *((type(spark), primitive) for primitive, spark in PRIMITIVES.items()),
    (ByteType, "int"),
    (ShortType, "int"),
)
DECIMAL_PRECISION_MAX = 38  # Spark's DecimalType
TOP_RECORD = "topLevelRecord"  # Spark's to_avro's name of the top record


def _named(schema: Any, namespace: str) -> str:
    name = str(schema["name"])
    space = schema.get("namespace", namespace) if "." not in name else ""
    return f"{space}.{name}" if space else name


class _Walk:
    """One walk of a schema: named types by full name (references' included), the names being walked (a
    recursive type cannot be a Spark type)."""

    def __init__(self, named: Mapping[str, Any]) -> None:
        self.named: dict[str, Any] = dict(named)
        self.open: list[str] = []

    def resolve(self, schema: Any, namespace: str, where: str) -> tuple[Any, str]:
        """A name's definition (and its namespace), or the schema itself."""
        if isinstance(schema, str) and schema not in PRIMITIVES and schema != "null":
            full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
            found = self.named.get(full, self.named.get(schema))
            if found is None:
                raise SchemaError(f"{where}: the Avro type {schema!r} is not defined")
            return found, full.rpartition(".")[0]
        return schema, namespace


def spark_type(
    schema: Any, named: Mapping[str, Any] | None = None, where: str = "value"
) -> tuple[DataType, bool, Convert]:
    """The Spark type of an Avro schema (its JSON value), whether it is nullable, and the conversion of
    fastavro's values to pyarrow's; ``named``: the named types its references define (full name ->
    their JSON). Unsupported types raise ``SchemaError`` naming the field (``where``)."""
    return _spark(schema, _Walk(named or {}), "", where)


def _spark(schema: Any, walk: _Walk, namespace: str, where: str) -> tuple[DataType, bool, Convert]:
    schema, namespace = walk.resolve(schema, namespace, where)
    if isinstance(schema, list):
        return _union(schema, walk, namespace, where)
    if isinstance(schema, str):
        schema = {"type": schema}
    kind = schema.get("type")
    if isinstance(kind, list | dict) or (kind not in PRIMITIVES and kind not in _COMPLEX):
        if kind == "null":
            raise SchemaError(f"{where}: the Avro type null alone has no Spark column")
        return _spark(kind, walk, namespace, where)  # {"type": {"type": "array", ...}}, {"type": "Name"}
    logical = schema.get("logicalType")
    if logical is not None and (found := _logical(schema, kind, logical, where)) is not None:
        return found
    if kind in PRIMITIVES:
        return PRIMITIVES[kind], False, None
    return _COMPLEX[kind](schema, walk, namespace, where)


def _logical(schema: Any, kind: str, logical: str, where: str) -> tuple[DataType, bool, Convert] | None:
    """A logical type's Spark type, or None where Avro says to read the underlying type (an unknown or
    invalid logical type)."""
    if logical == "date" and kind == "int":
        return DateType(), False, None
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return TimestampType(), False, None
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
        return TimestampNTZType(), False, None
    if logical == "uuid" and kind == "string":
        return StringType(), False, _uuid_text
    if logical == "time-millis" and kind == "int":
        return IntegerType(), False, _time_millis
    if logical == "time-micros" and kind == "long":
        return LongType(), False, _time_micros
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = schema.get("precision"), schema.get("scale", 0)
        if not isinstance(precision, int) or not 0 < precision <= DECIMAL_PRECISION_MAX:
            raise SchemaError(
                f"{where}: decimal precision {precision!r}: Spark's decimals take 1 to "
                f"{DECIMAL_PRECISION_MAX}"
            )
        return DecimalType(precision, scale), False, None
    return None


def _uuid_text(value: Any) -> Any:
    return str(value) if isinstance(value, uuid.UUID) else value


def _time_millis(value: Any) -> Any:
    return _time_micros(value) // 1000 if isinstance(value, datetime.time) else value


def _time_micros(value: Any) -> Any:
    if not isinstance(value, datetime.time):
        return value
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond


def _union(branches: list[Any], walk: _Walk, namespace: str, where: str) -> tuple[DataType, bool, Convert]:
    others = [b for b in branches if b != "null" and b != {"type": "null"}]
    nullable = len(others) < len(branches)
    if len(others) == 1:
        kind, _, convert = _spark(others[0], walk, namespace, where)
        return kind, nullable, convert
    if sorted(map(str, others)) in (["int", "long"], ["double", "float"]):
        return (LongType() if "long" in others else DoubleType()), nullable, None
    raise SchemaError(
        f"{where}: the Avro union {branches!r} has {len(others)} types besides null; Spark's from_avro makes "
        "it a struct of member0, member1, ..., which this format does not build"
    )


def _record(schema: Any, walk: _Walk, namespace: str, where: str) -> tuple[DataType, bool, Convert]:
    full = _named(schema, namespace)
    if full in walk.open:
        raise SchemaError(f"{where}: the Avro record {full} contains itself; a Spark type cannot")
    walk.named[full] = schema
    walk.open.append(full)
    fields: list[StructField] = []
    converts: dict[str, Callable[[Any], Any]] = {}
    for field in schema.get("fields", []):
        name = field["name"]
        kind, nullable, convert = _spark(field["type"], walk, full.rpartition(".")[0], f"{where}.{name}")
        fields.append(StructField(name, kind, nullable))
        if convert is not None:
            converts[name] = convert
    walk.open.pop()
    if not converts:
        return StructType(fields), False, None

    return StructType(fields), False, lambda value: _fields(converts, value)


def _fields(converts: Mapping[str, Callable[[Any], Any]], value: Any) -> Any:
    """A record's value with the fields of ``converts`` converted."""
    if value is None:
        return None
    out = dict(value)
    for name, convert in converts.items():
        if name in out:
            out[name] = convert(out[name])
    return out


def _array(schema: Any, walk: _Walk, namespace: str, where: str) -> tuple[DataType, bool, Convert]:
    kind, nullable, convert = _spark(schema["items"], walk, namespace, f"{where}[]")
    if convert is None:
        return ArrayType(kind, nullable), False, None
    return ArrayType(kind, nullable), False, lambda v: None if v is None else [convert(x) for x in v]


def _map(schema: Any, walk: _Walk, namespace: str, where: str) -> tuple[DataType, bool, Convert]:
    kind, nullable, convert = _spark(schema["values"], walk, namespace, f"{where}{{}}")
    if convert is None:
        return MapType(StringType(), kind, nullable), False, None
    return (
        MapType(StringType(), kind, nullable),
        False,
        lambda v: None if v is None else {k: convert(x) for k, x in v.items()},
    )


def _enum(schema: Any, walk: _Walk, namespace: str, where: str) -> tuple[DataType, bool, Convert]:
    walk.named[_named(schema, namespace)] = schema
    return StringType(), False, None


def _fixed(schema: Any, walk: _Walk, namespace: str, where: str) -> tuple[DataType, bool, Convert]:
    walk.named[_named(schema, namespace)] = schema
    return BinaryType(), False, None


_COMPLEX: dict[str, Callable[[Any, _Walk, str, str], tuple[DataType, bool, Convert]]] = {
    "record": _record,
    "error": _record,
    "array": _array,
    "map": _map,
    "enum": _enum,
    "fixed": _fixed,
}


# -- Spark to Avro -------------------------------------------------------------------------------------


def avro_schema(kind: DataType, where: str = "value") -> Any:
    """The Avro schema (its JSON value) values of Spark type ``kind`` are written with; the top-level value
    itself is never null (a null value is a tombstone, written as no value)."""
    return _avro(kind, False, TOP_RECORD, "", where)


def _avro(kind: DataType, nullable: bool, name: str, namespace: str, where: str) -> Any:
    schema = _avro_of(kind, name, namespace, where)
    return ["null", schema] if nullable else schema


def _avro_of(kind: DataType, name: str, namespace: str, where: str) -> Any:
    for spark_class, primitive in _PRIMITIVES_OF_SPARK:
        if isinstance(kind, spark_class):
            return primitive
    if isinstance(kind, DecimalType):
        return {"type": "bytes", "logicalType": "decimal", "precision": kind.precision, "scale": kind.scale}
    if isinstance(kind, DateType):
        return {"type": "int", "logicalType": "date"}
    if isinstance(kind, TimestampType):
        return {"type": "long", "logicalType": "timestamp-micros"}
    if isinstance(kind, TimestampNTZType):
        return {"type": "long", "logicalType": "local-timestamp-micros"}
    if isinstance(kind, ArrayType):
        items = _avro(kind.elementType, kind.containsNull, name, namespace, where)
        return {"type": "array", "items": items}
    if isinstance(kind, MapType) and isinstance(kind.keyType, StringType):
        values = _avro(kind.valueType, kind.valueContainsNull, name, namespace, where)
        return {"type": "map", "values": values}
    if isinstance(kind, StructType):
        inner = f"{namespace}.{name}" if namespace else name
        fields = []
        for field in kind.fields:
            schema = _avro(field.dataType, field.nullable, field.name, inner, f"{where}.{field.name}")
            fields.append(
                {"name": field.name, "type": schema, "default": None}
                if field.nullable
                else {"name": field.name, "type": schema}
            )
        record: dict[str, Any] = {"type": "record", "name": name, "fields": fields}
        if namespace:
            record["namespace"] = namespace
        return record
    raise SchemaError(f"column {where}: Spark type {kind.simpleString()} has no Avro type here")


def to_avro_value(kind: DataType) -> Convert:
    """The conversion of pyarrow's Python value of a Spark type (``to_pylist``) into what fastavro writes:
    maps come as lists of pairs; None where the value is fastavro's already."""
    if isinstance(kind, MapType):
        inner = to_avro_value(kind.valueType)
        return lambda v: None if v is None else {k: (inner(x) if inner else x) for k, x in v}
    if isinstance(kind, ArrayType):
        element = to_avro_value(kind.elementType)
        return None if element is None else (lambda v: None if v is None else [element(x) for x in v])
    if isinstance(kind, StructType):
        converts = {f.name: c for f in kind.fields if (c := to_avro_value(f.dataType)) is not None}
        return (lambda v: _fields(converts, v)) if converts else None
    return None
