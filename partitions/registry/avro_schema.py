"""Avro schemas as Apache Avro's Java library (1.12) parses and prints them, which is what Confluent's
registry does with a schema's text (``AvroSchema``: a ``Schema.Parser`` with the strict name validator and
default validation for a schema registered anew, each reference parsed first; ``canonicalString()`` is
``Schema.toString(references, false)``). Pure.

A parsed schema is a graph of ``Node`` objects: one per named type (a recursive record refers to itself),
a new one per occurrence of a primitive, array, map or union, as Java's parser makes them; the
compatibility check (``avro_compat``) depends on that identity as Java's memo does.

Parsing follows ``Schema.parse`` and ``ParseContext``: a name not yet defined is a placeholder resolved
after the whole text is read (so a type may be used before the text defines it), field defaults are
checked against their type (``Schema.isValidDefault``), and every error is ``InvalidSchema`` with the
words of Avro's exception (Confluent's 42201 answer quotes them after "details:").
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from partitions.registry import avro_json
from partitions.registry.schema_types import InvalidSchema

PRIMITIVES = ("string", "bytes", "int", "long", "float", "double", "boolean", "null")
NAMED = ("record", "enum", "fixed")
TYPE_NAMES = frozenset(("record", "enum", "array", "map", "union", "fixed", *PRIMITIVES))
SCHEMA_RESERVED = frozenset(
    ("doc", "fields", "items", "name", "namespace", "size", "symbols", "values", "type", "aliases")
)
ENUM_RESERVED = SCHEMA_RESERVED | {"default"}
FIELD_RESERVED = frozenset(("default", "doc", "name", "order", "type", "aliases"))
ORDERS = ("ascending", "descending", "ignore")
INT_RANGE = (-(2**31), 2**31 - 1)
LONG_RANGE = (-(2**63), 2**63 - 1)
_STRICT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MISSING: Any = object()


def name_error(name: Any) -> str | None:
    """Avro's ``NameValidator.STRICT_VALIDATOR``: why ``name`` is not a name, or None."""
    if name is None:
        return "Null name"
    if name == "":
        return "Empty name"
    if not (name[0].isascii() and (name[0].isalpha() or name[0] == "_")):
        return f"Illegal initial character: {name}"
    if not _STRICT_NAME.match(name):
        return f"Illegal character in: {name}"
    return None


def _check_name(name: Any) -> str:
    error = name_error(name)
    if error is not None:
        raise InvalidSchema(error)
    return str(name)


@dataclass(eq=False)
class Name:
    name: str
    space: str | None

    @classmethod
    def of(cls, name: str, space: str | None) -> Name:
        """``Schema.Name(name, space)``: a dotted name brings its own namespace."""
        head, dot, simple = name.rpartition(".")
        if dot:
            space = head
        _check_name(simple if dot else name)
        return cls(simple if dot else name, space or None)

    @property
    def full(self) -> str:
        return self.name if self.space is None else f"{self.space}.{self.name}"

    def qualified(self, default_space: str | None) -> str:
        """``Name.getQualified``: the short name where the namespace is the default one and the short
        name is not a type's name."""
        if self.space is not None and self.space == default_space and self.name not in TYPE_NAMES:
            return self.name
        return self.full


@dataclass(eq=False)
class Field:
    name: str
    schema: Node
    doc: str | None = None
    default: Any = _MISSING  # a JSON value, _MISSING when none
    order: str = "ascending"
    aliases: list[str] = field(default_factory=list)
    props: dict[str, Any] = field(default_factory=dict)
    position: int = 0

    @property
    def has_default(self) -> bool:
        return self.default is not _MISSING


@dataclass(eq=False)
class Node:
    type: str  # a primitive's name, record (also for Avro's "error"), enum, fixed, array, map, union
    props: dict[str, Any] = field(default_factory=dict)
    name: Name | None = None  # named types
    doc: str | None = None
    aliases: list[Name] = field(default_factory=list)
    error: bool = False  # a record declared as "error"
    fields: list[Field] = field(default_factory=list)
    symbols: list[str] = field(default_factory=list)
    enum_default: str | None = None
    size: int = 0
    items: Node | None = None  # array
    values: Node | None = None  # map
    types: list[Node] = field(default_factory=list)  # union
    unresolved: str | None = None  # a placeholder for a name not yet defined

    @property
    def full_name(self) -> str:
        """``Schema.getFullName``: a named type's full name, else its type's name."""
        return self.name.full if self.name is not None else self.type

    def field_named(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)

    def alias_names(self) -> list[str]:
        """``Schema.getAliases()``: full names, ".x" for an alias without namespace in a namespace."""
        if self.name is None:
            return []
        return [
            f".{a.name}" if a.space is None and self.name.space is not None else a.full for a in self.aliases
        ]


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
    dangling = stripped[end:].strip()
    if dangling:
        raise InvalidSchema(f"dangling content after end of schema: {dangling}")
    return value


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
    default = value.get("default", _MISSING)
    if default is not _MISSING and schema.type in ("float", "double") and isinstance(default, str):
        default = java_parse_double(default)
    made = Field(_check_name(name), schema, _text(value, "doc"), default, order)
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
        _check_name(symbol if isinstance(symbol, str) else None)
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


# -- defaults --------------------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def valid_default(schema: Node, value: Any) -> bool:
    """``Schema.isValidDefault``."""
    kind = schema.type
    if schema.unresolved is not None:  # Java's placeholder: a record without fields
        return isinstance(value, dict)
    if kind in ("string", "bytes", "enum", "fixed"):
        return isinstance(value, str)
    if kind == "int":
        return _is_int(value) and INT_RANGE[0] <= value <= INT_RANGE[1]
    if kind == "long":
        return _is_int(value) and LONG_RANGE[0] <= value <= LONG_RANGE[1]
    if kind in ("float", "double"):
        return (_is_int(value) or isinstance(value, float)) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if kind == "array":
        assert schema.items is not None
        return isinstance(value, list) and all(valid_default(schema.items, item) for item in value)
    if kind == "map":
        assert schema.values is not None
        return isinstance(value, dict) and all(valid_default(schema.values, item) for item in value.values())
    if kind == "union":
        return any(_valid_value(branch, value) for branch in schema.types)
    if kind == "record":
        if not isinstance(value, dict):
            return False
        for member in schema.fields:
            given = value.get(member.name, member.default)
            if given is _MISSING or not _valid_value(member.schema, given):
                return False
        return True
    return False


def _valid_value(schema: Node, value: Any) -> bool:
    if schema.type == "union":
        return any(valid_default(branch, value) for branch in schema.types)
    return valid_default(schema, value)


# -- equality (Schema.equals: names, props, fields, symbols, sizes; not docs nor aliases) -----------


def equal(a: Node, b: Node, seen: set[tuple[int, int]] | None = None) -> bool:
    if a is b:
        return True
    if a.type != b.type or a.props != b.props or (a.unresolved or "") != (b.unresolved or ""):
        return False
    if (a.name.full if a.name else None) != (b.name.full if b.name else None):
        return False
    seen = set() if seen is None else seen
    if a.type == "record":
        if (id(a), id(b)) in seen:
            return True
        seen.add((id(a), id(b)))
        return len(a.fields) == len(b.fields) and all(
            x.name == y.name and x.order == y.order and x.props == y.props
            and _same_default(x.default, y.default) and equal(x.schema, y.schema, seen)
            for x, y in zip(a.fields, b.fields, strict=True)
        )  # fmt: skip
    if a.type == "enum":
        return a.symbols == b.symbols
    if a.type == "fixed":
        return a.size == b.size
    if a.type == "array":
        assert a.items is not None and b.items is not None
        return equal(a.items, b.items, seen)
    if a.type == "map":
        assert a.values is not None and b.values is not None
        return equal(a.values, b.values, seen)
    if a.type == "union":
        return len(a.types) == len(b.types) and all(
            equal(x, y, seen) for x, y in zip(a.types, b.types, strict=True)
        )
    return True


def _same_default(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


# -- printing (Schema.toString) --------------------------------------------------------------------


def to_string(node: Node, known: Iterable[str] = ()) -> str:
    """``Schema.toString(referencedSchemas, false)``: a named type already written, or one of ``known``
    (the references' full names), is written by name."""
    out: list[str] = []
    _write(node, set(known), None, out)
    return "".join(out)


def _write_props(props: Mapping[str, Any], out: list[str]) -> None:
    for key, value in props.items():
        out.append(f",{avro_json.string(key)}:{avro_json.dumps(value)}")


def _write(node: Node, known: set[str], space: str | None, out: list[str]) -> None:
    kind = node.type
    if node.name is not None:
        if node.name.full in known:
            out.append(avro_json.string(node.name.qualified(space)))
            return
        known.add(node.name.full)
        label = "error" if node.error else kind
        out.append(f'{{"type":"{label}","name":{avro_json.string(node.name.name)}')
        if node.name.space is not None:
            if node.name.space != space:
                out.append(f',"namespace":{avro_json.string(node.name.space)}')
        elif space is not None:
            out.append(',"namespace":""')
        if node.doc is not None:
            out.append(f',"doc":{avro_json.string(node.doc)}')
        if kind == "record":
            out.append(',"fields":[')
            for index, member in enumerate(node.fields):
                out.append("," if index else "")
                _write_field(member, known, node.name.space, out)
            out.append("]")
        elif kind == "enum":
            out.append(',"symbols":[' + ",".join(avro_json.string(s) for s in node.symbols) + "]")
            if node.enum_default is not None:
                out.append(f',"default":{avro_json.string(node.enum_default)}')
        else:
            out.append(f',"size":{node.size}')
        _write_props(node.props, out)
        if node.aliases:
            out.append(
                ',"aliases":['
                + ",".join(avro_json.string(a.qualified(node.name.space)) for a in node.aliases)
                + "]"
            )
        out.append("}")
    elif kind == "union":
        out.append("[")
        for index, branch in enumerate(node.types):
            out.append("," if index else "")
            _write(branch, known, space, out)
        out.append("]")
    elif kind in ("array", "map"):
        inner = node.items if kind == "array" else node.values
        assert inner is not None
        out.append(f'{{"type":"{kind}","{"items" if kind == "array" else "values"}":')
        _write(inner, known, space, out)
        _write_props(node.props, out)
        out.append("}")
    elif node.props:
        out.append(f'{{"type":"{kind}"')
        _write_props(node.props, out)
        out.append("}")
    else:
        out.append(f'"{kind}"')


def _write_field(member: Field, known: set[str], space: str | None, out: list[str]) -> None:
    out.append(f'{{"name":{avro_json.string(member.name)},"type":')
    _write(member.schema, known, space, out)
    if member.doc is not None:
        out.append(f',"doc":{avro_json.string(member.doc)}')
    if member.has_default:
        out.append(f',"default":{avro_json.dumps(member.default)}')
    if member.order != "ascending":
        out.append(f',"order":"{member.order}"')
    if member.aliases:
        out.append(',"aliases":[' + ",".join(avro_json.string(a) for a in member.aliases) + "]")
    _write_props(member.props, out)
    out.append("}")
