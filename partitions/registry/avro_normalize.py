"""Confluent's ``normalize=true`` form of an Avro schema (``AvroSchema.normalize``): the text that
``AvroSchemaUtils.toNormalizedString`` builds, parsed again and printed as Avro prints it. Pure.

What the build changes, and so what two texts of one schema may differ in and still normalize alike: a
named type's props and a field's props sorted by key (a valid logical type's ``logicalType``, ``precision``
and ``scale`` first), aliases sorted, an empty doc of a named type dropped, and a field's default
converted through its type as Avro's ``Field.defaultVal()`` does (``1`` for a ``double`` becomes ``1.0``;
a default no branch of a union takes is dropped). The references' types are written by name.
"""

from __future__ import annotations

import math
from typing import Any

from partitions.registry import avro_json
from partitions.registry.avro_model import INT_RANGE, Field, Node
from partitions.registry.schema_types import InvalidSchema

_TIME_TYPES = {
    "date": ("int",),
    "time-millis": ("int",),
    "time-micros": ("long",),
    "timestamp-millis": ("long",),
    "timestamp-micros": ("long",),
    "timestamp-nanos": ("long",),
    "local-timestamp-millis": ("long",),
    "local-timestamp-micros": ("long",),
    "local-timestamp-nanos": ("long",),
    "big-decimal": ("bytes",),
}
_NOT_CONVERTED: Any = object()


def normalized_text(root: Node, references: list[str]) -> str:
    """``toNormalizedString``: the build, with each referenced type (by full name) written by name."""
    env = {name: avro_json.string(name) for name in references}
    out: list[str] = []
    _build(root, env, out)
    return "".join(out)


def _int_prop(node: Node, key: str) -> int | None:
    value = node.props.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and INT_RANGE[0] <= value <= INT_RANGE[1]:
        return value
    return None


def _logical_type(node: Node) -> str | None:
    """``LogicalTypes.fromSchemaIgnoreInvalid``: the name of a valid built-in logical type, or None."""
    name = node.props.get("logicalType")
    if not isinstance(name, str):
        return None
    if name in _TIME_TYPES:
        return name if node.type in _TIME_TYPES[name] else None
    if name == "uuid":
        return name if node.type == "string" or (node.type == "fixed" and node.size == 16) else None
    if name == "duration":
        return name if node.type == "fixed" and node.size == 12 else None
    if name == "decimal":
        precision = _int_prop(node, "precision")
        scale = _int_prop(node, "scale") if "scale" in node.props else 0
        if precision is None or scale is None or node.type not in ("bytes", "fixed"):
            return None
        top = 2**31 - 1 if node.type == "bytes" else math.floor(math.log10(2) * (8 * node.size - 1))
        return name if 0 < precision <= top and 0 <= scale <= precision else None
    return None


def _logical_props(node: Node, out: list[str]) -> None:
    logical = _logical_type(node)
    if logical is None:
        return
    out.append(f',"logicalType":{avro_json.string(logical)}')
    if logical == "decimal":
        out.append(f',"precision":{_int_prop(node, "precision")}')
        scale = _int_prop(node, "scale") if "scale" in node.props else 0
        if scale:
            out.append(f',"scale":{scale}')


def _simple_props(props: dict[str, Any], out: list[str]) -> None:
    for key in sorted(props, key=lambda k: k.encode("utf-16-be")):
        out.append(f",{avro_json.string(key)}:{avro_json.dumps(props[key])}")


def _build(node: Node, env: dict[str, str], out: list[str]) -> None:
    kind = node.type
    if kind == "union":
        out.append("[")
        for index, branch in enumerate(node.types):
            out.append("," if index else "")
            _build(branch, env, out)
        out.append("]")
    elif kind in ("array", "map"):
        member = node.items if kind == "array" else node.values
        assert member is not None
        out.append(f'{{"type":"{kind}","{"items" if kind == "array" else "values"}":')
        _build(member, env, out)
        _logical_props(node, out)
        _simple_props(node.props, out)
        out.append("}")
    elif node.name is not None:
        full = node.name.full
        if full in env:
            out.append(env[full])
            return
        env[full] = avro_json.string(full)
        out.append(f'{{"name":{env[full]},"type":"{kind}"')
        if kind == "enum":
            out.append(',"symbols":[' + ",".join(avro_json.string(s) for s in node.symbols) + "]")
        elif kind == "fixed":
            out.append(f',"size":{node.size}')
        else:
            out.append(',"fields":[')
            for index, member_field in enumerate(node.fields):
                out.append("," if index else "")
                _build_field(member_field, env, out)
            out.append("]")
        _logical_props(node, out)
        if node.doc:
            out.append(f',"doc":{avro_json.string(node.doc)}')
        if node.aliases:
            aliases = sorted(set(node.alias_names()), key=lambda a: a.encode("utf-16-be"))
            out.append(',"aliases":' + avro_json.dumps(aliases))
        if kind == "enum" and node.enum_default is not None:
            out.append(f',"default":{avro_json.string(node.enum_default)}')
        _simple_props(node.props, out)
        out.append("}")
    elif _logical_type(node) is not None or node.props:
        out.append(f'{{"type":"{kind}"')
        _logical_props(node, out)
        _simple_props(node.props, out)
        out.append("}")
    else:
        out.append(f'"{kind}"')


def _build_field(member: Field, env: dict[str, str], out: list[str]) -> None:
    out.append(f'{{"name":{avro_json.string(member.name)},"type":')
    _build(member.schema, env, out)
    out.append(f',"order":"{member.order.upper()}"')
    if member.doc is not None:
        out.append(f',"doc":{avro_json.string(member.doc)}')
    if member.aliases:
        out.append(
            ',"aliases":' + avro_json.dumps(sorted(set(member.aliases), key=lambda a: a.encode("utf-16-be")))
        )
    if member.has_default:
        converted = _converted(member.default, member.schema)
        if converted is not _NOT_CONVERTED:
            out.append(f',"default":{avro_json.dumps(converted)}')
    _simple_props(member.props, out)
    out.append("}")


def _converted(value: Any, schema: Node | None) -> Any:
    """``JacksonUtils.toObject(value, schema)`` written back as JSON: the default as its type holds it
    (``_NOT_CONVERTED`` where Avro's conversion gives nothing and the default is dropped)."""
    if value is None:
        return None
    if schema is not None and schema.type == "union":
        for branch in schema.types:
            if branch.type != "null":
                converted = _converted(value, branch)
                if converted is not _NOT_CONVERTED:
                    return converted
        return _NOT_CONVERTED
    kind = schema.type if schema is not None else None
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if kind in (None, "int", "long"):
            return value
        if kind == "float":
            return avro_json.Float32(float(value))
        if kind == "double":
            return float(value)
        return _NOT_CONVERTED
    if isinstance(value, float):
        if kind in (None, "double"):
            return value
        return avro_json.Float32(value) if kind == "float" else _NOT_CONVERTED
    if isinstance(value, str):
        return value if kind in (None, "string", "enum", "bytes", "fixed") else _NOT_CONVERTED
    if isinstance(value, list):
        items = schema.items if schema is not None and schema.type == "array" else None
        return [_element(item, items) for item in value]
    if isinstance(value, dict):
        converted_map: dict[str, Any] = {}
        for key, item in value.items():
            item_schema: Node | None = None
            if schema is not None and schema.type == "map":
                item_schema = schema.values
            elif schema is not None and schema.type == "record":
                member = schema.field_named(key)
                if member is None:  # Avro's NullPointerException: Confluent refuses the schema
                    raise InvalidSchema(f"the default's member {key} is no field of {schema.full_name}")
                item_schema = member.schema
            converted_map[key] = _element(item, item_schema)
        return converted_map
    return _NOT_CONVERTED


def _element(value: Any, schema: Node | None) -> Any:
    converted = _converted(value, schema)
    if converted is _NOT_CONVERTED:  # a null element of a list or map: Avro cannot write it either
        raise InvalidSchema(
            f"the default {avro_json.dumps(value)} is not a {schema.type if schema else 'value'}"
        )
    return converted
