"""Avro schema texts parsed as Apache Avro's Java library (1.12) parses them for Confluent's registry
(``AvroSchema``: a ``Schema.Parser`` with the strict name validator and default validation for a schema
registered anew, each reference parsed first into the same context). Pure.

Parsing follows ``Schema.parse`` and ``ParseContext``: a name not yet defined is a placeholder resolved
after the whole text is read (so a type may be used before the text defines it), field defaults are
checked against their type, and every error is ``InvalidSchema`` with the words of Avro's exception
(Confluent's 42201 answer quotes them after "details:").
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from partitions.registry import avro_json
from partitions.registry.avro_model import (
    ENUM_RESERVED,
    FIELD_RESERVED,
    INT_RANGE,
    MISSING,
    ORDERS,
    PRIMITIVES,
    SCHEMA_RESERVED,
    Field,
    Name,
    Node,
    check_name,
    equal,
    name_error,
    to_string,
    valid_default,
)
from partitions.registry.schema_types import InvalidSchema

# The deepest JSON a schema's text may nest: the checks walking a schema recurse once or twice per level
# and Python's stack holds about a thousand frames (Avro's Java has no such bound; no schema seen in use
# nests a tenth as deep: a record in a record is three levels).
DEPTH_MAX = 200

# -- parsing ---------------------------------------------------------------------------------------


def load_json(text: str) -> Any:
    """The JSON of a schema's text (one value; Jackson's parser allows comments: they are refused
    here, as no client of the registry sends them)."""
    decoder = json.JSONDecoder(parse_constant=_reject_constant)
    stripped = text.lstrip(" \t\n\r")
    try:
        value, end = decoder.raw_decode(stripped)
    except (json.JSONDecodeError, ValueError) as error:
        raise InvalidSchema(f"Invalid JSON: {error}") from None
    except RecursionError:
        raise InvalidSchema("Invalid JSON: nested too deeply") from None
    dangling = stripped[end:].strip()
    if dangling:
        raise InvalidSchema(f"dangling content after end of schema: {dangling}")
    if _depth(value) > DEPTH_MAX:
        raise InvalidSchema(f"the schema's JSON is nested deeper than {DEPTH_MAX} levels")
    return value


def _depth(value: Any) -> int:
    """How deeply ``value``'s arrays and objects nest (walked without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            stack += [(member, depth + 1) for member in (item.values() if isinstance(item, dict) else item)]
    return deepest


def _reject_constant(name: str) -> Any:
    raise ValueError(f"Non-standard token '{name}'")


class Context:
    """``ParseContext``: the named types known (references first), the ones this text defined."""

    def __init__(self) -> None:
        self.named: dict[str, Node] = {}

    def find(self, name: str, space: str | None) -> Node:
        if name in PRIMITIVES:
            return Node(name)
        full = f"{space}.{name}" if space is not None and "." not in name else name
        found = self.named.get(full) or self.named.get(name)
        return found if found is not None else Node("record", unresolved=full)

    def put(self, node: Node) -> None:
        assert node.name is not None
        full = node.name.full
        parts = full.split(".")
        for part in parts[:-1]:
            error = name_error(part)
            if error is not None:
                raise InvalidSchema(f'Namespace part "{part}" is invalid: {error}')
        known = self.named.get(full)
        if known is None:
            self.named[full] = node
        elif known is not node and not equal(known, node):
            raise InvalidSchema(f"Can't redefine: {full}")


def parse_text(text: str, context: Context, validate_defaults: bool = True) -> Node:
    """One schema's text parsed into ``context`` (``Schema.Parser.parse``), its names resolved."""
    value = load_json(text)
    try:
        node = _parse(value, context, None, validate_defaults)
        return _resolve(node, context, validate_defaults)
    except RecursionError:
        raise InvalidSchema("schema nested too deeply") from None


def _text(container: Any, key: str) -> str | None:
    """``getOptionalText``: a string member, None when absent or not a string."""
    value = container.get(key) if isinstance(container, dict) else None
    return value if isinstance(value, str) else None


def _required(container: Any, key: str, error: str) -> str:
    value = _text(container, key)
    if value is None:
        raise InvalidSchema(f"{error}: {avro_json.dumps(container)}")
    return value


def _parse(value: Any, context: Context, space: str | None, validate_defaults: bool) -> Node:
    if isinstance(value, str):
        return context.find(value, space)
    if isinstance(value, list):
        return _union([_parse(item, context, space, validate_defaults) for item in value])
    if not isinstance(value, dict):
        raise InvalidSchema(f"Schema not yet supported: {avro_json.dumps(value)}")
    kind = _required(value, "type", "No type")
    if kind in PRIMITIVES:
        return Node(kind, props=_props(value, SCHEMA_RESERVED))
    if kind in ("record", "error"):
        return _record(value, context, space, kind == "error", validate_defaults)
    if kind == "enum":
        return _enum(value, context, space)
    if kind in ("array", "map"):
        member = "items" if kind == "array" else "values"
        if member not in value:
            what = "Array has no items type" if kind == "array" else "Map has no values type"
            raise InvalidSchema(f"{what}: {avro_json.dumps(value)}")
        node = Node(kind, props=_props(value, SCHEMA_RESERVED))
        setattr(node, member, _parse(value[member], context, space, validate_defaults))
        return node
    if kind == "fixed":
        return _fixed(value, context, space)
    raise InvalidSchema(
        'A schema "type" MUST be a primitive type or one of "enum", "fixed", "record", "error", "array"'
        ' or "map".'
    )


def _props(value: dict[str, Any], reserved: frozenset[str]) -> dict[str, Any]:
    return {key: item for key, item in value.items() if key not in reserved}


def _named(value: dict[str, Any], kind: str, space: str | None) -> Node:
    given_space = _text(value, "namespace")
    name = Name.of(
        _required(value, "name", "No name in schema"), given_space if given_space is not None else space
    )
    if name.full in PRIMITIVES:
        raise InvalidSchema(f"Schemas may not be named after primitives: {name.full}")
    return Node(kind, name=name, doc=_text(value, "doc"))


def _aliases(value: dict[str, Any]) -> list[str] | None:
    aliases = value.get("aliases")
    if aliases is None:
        return None
    if not isinstance(aliases, list):
        raise InvalidSchema(f"aliases not an array: {avro_json.dumps(value)}")
    out: list[str] = []
    for alias in aliases:
        if not isinstance(alias, str):
            raise InvalidSchema(f"alias not a string: {avro_json.dumps(alias)}")
        if alias not in out:
            out.append(alias)
    return out


def _add_aliases(node: Node, value: dict[str, Any]) -> None:
    assert node.name is not None
    for alias in _aliases(value) or []:
        name = Name.of(alias, node.name.space)
        if all(name.full != known.full for known in node.aliases):
            node.aliases.append(name)


def _record(
    value: dict[str, Any], context: Context, space: str | None, error: bool, validate_defaults: bool
) -> Node:
    node = _named(value, "record", space)
    node.error = error
    assert node.name is not None
    fields = value.get("fields")
    if not isinstance(fields, list):
        raise InvalidSchema(f"Record has no fields: {avro_json.dumps(value)}")
    for position, member in enumerate(fields):
        parsed = _field(member, context, node.name.space, validate_defaults)
        earlier = node.field_named(parsed.name)
        if earlier is not None:
            raise InvalidSchema(
                f"Duplicate field {parsed.name} in record {node.name.full}: {_field_text(parsed, position)}"
                f" and {_field_text(earlier, earlier.position)}."
            )
        parsed.position = position
        node.fields.append(parsed)
    node.props = _props(value, SCHEMA_RESERVED)
    _add_aliases(node, value)
    context.put(node)
    return node


def _field_text(member: Field, position: int) -> str:
    """``Field.toString``."""
    return f"{member.name} type:{member.schema.type.upper()} pos:{position}"


def _field(value: Any, context: Context, space: str | None, validate_defaults: bool) -> Field:
    name = _required(value, "name", "No field name")
    if "type" not in value:
        raise InvalidSchema(f"No field type: {avro_json.dumps(value)}")
    schema = _parse(value["type"], context, space, validate_defaults)
    order = "ascending"
    if "order" in value:
        given = value["order"]
        if not isinstance(given, str) or given.lower() not in ORDERS:
            raise InvalidSchema(f"No enum constant org.apache.avro.Schema.Field.Order.{str(given).upper()}")
        order = given.lower()
    default = value.get("default", MISSING)
    if default is not MISSING and schema.type in ("float", "double") and isinstance(default, str):
        default = java_parse_double(default)
    made = Field(check_name(name), schema, _text(value, "doc"), default, order)
    if validate_defaults:
        _check_default(made)
    made.props = _props(value, FIELD_RESERVED)
    made.aliases = _aliases(value) or []
    return made


def _check_default(made: Field) -> None:
    if made.has_default and not valid_default(made.schema, made.default):
        raise InvalidSchema(
            f"Invalid default for field {made.name}: {avro_json.dumps(made.default)}"
            f" not a {to_string(made.schema)}"
        )


def java_parse_double(text: str) -> float:
    """``Double.parseDouble`` of a float field's default given as a string."""
    stripped = text.strip()
    body = stripped[:-1] if stripped[-1:] in ("f", "F", "d", "D") else stripped
    special = {"NaN": math.nan, "Infinity": math.inf, "+Infinity": math.inf, "-Infinity": -math.inf}
    if stripped in special:
        return special[stripped]
    if re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", body):
        return float(body)
    raise InvalidSchema(f'For input string: "{text}"')


def _enum(value: dict[str, Any], context: Context, space: str | None) -> Node:
    node = _named(value, "enum", space)
    symbols = value.get("symbols")
    if not isinstance(symbols, list):
        raise InvalidSchema(f"Enum has no symbols: {avro_json.dumps(value)}")
    for symbol in symbols:
        check_name(symbol if isinstance(symbol, str) else None)
        if symbol in node.symbols:
            raise InvalidSchema(f"Duplicate enum symbol: {symbol}")
        node.symbols.append(symbol)
    node.enum_default = _text(value, "default")
    if node.enum_default is not None and node.enum_default not in node.symbols:
        raise InvalidSchema(
            f"The Enum Default: {node.enum_default} is not in the enum symbol set:"
            f" [{', '.join(node.symbols)}]"
        )
    node.props = _props(value, ENUM_RESERVED)
    _add_aliases(node, value)
    context.put(node)
    return node


def _fixed(value: dict[str, Any], context: Context, space: str | None) -> Node:
    node = _named(value, "fixed", space)
    size = value.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or not INT_RANGE[0] <= size <= INT_RANGE[1]:
        raise InvalidSchema(f"Invalid or no size: {avro_json.dumps(value)}")
    if size < 0:
        raise InvalidSchema(f"Malformed data. Length is negative: {size}")
    if size > 2**31 - 1 - 8:
        raise InvalidSchema(f"Cannot read arrays longer than {2**31 - 1 - 8} bytes in Java library")
    node.size = size
    node.props = _props(value, SCHEMA_RESERVED)
    _add_aliases(node, value)
    context.put(node)
    return node


def _union(types: list[Node]) -> Node:
    node = Node("union", types=types)
    _check_union(node)
    return node


def _check_union(node: Node) -> None:
    seen: set[str] = set()
    for branch in node.types:
        if branch.type == "union":
            raise InvalidSchema(f"Nested union: {to_string(node)}")
        name = f"unresolved {id(branch)}" if branch.unresolved else branch.full_name
        if name in seen:
            raise InvalidSchema(f"Duplicate in union:{name}")
        seen.add(name)


def _resolve(root: Node, context: Context, validate_defaults: bool) -> Node:
    """Every placeholder replaced by the type its name defines (``SchemaResolver``), defaults checked
    again against the resolved types, unions checked again for duplicates."""
    seen: set[int] = set()

    def resolved(node: Node) -> Node:
        if node.unresolved is None:
            return node
        found = context.named.get(node.unresolved)
        if found is None:
            raise InvalidSchema(f"Undefined schema: {node.unresolved}")
        return found

    def visit(node: Node) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        if node.type == "record":
            for member in node.fields:
                if member.schema.unresolved is not None or _has_placeholder(member.schema):
                    member.schema = resolved(member.schema)
                    visit(member.schema)
                    if validate_defaults:
                        _check_default(member)
                else:
                    visit(member.schema)
        elif node.type == "array":
            assert node.items is not None
            node.items = resolved(node.items)
            visit(node.items)
        elif node.type == "map":
            assert node.values is not None
            node.values = resolved(node.values)
            visit(node.values)
        elif node.type == "union":
            node.types = [resolved(branch) for branch in node.types]
            for branch in node.types:
                visit(branch)
            _check_union(node)

    for named in list(context.named.values()):
        visit(named)
    root = resolved(root)
    visit(root)
    return root


def _has_placeholder(node: Node) -> bool:
    if node.type == "array" and node.items is not None:
        return node.items.unresolved is not None or _has_placeholder(node.items)
    if node.type == "map" and node.values is not None:
        return node.values.unresolved is not None or _has_placeholder(node.values)
    if node.type == "union":
        return any(branch.unresolved is not None or _has_placeholder(branch) for branch in node.types)
    return False
