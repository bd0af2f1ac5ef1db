"""An Avro schema as Apache Avro's Java library (1.12) holds it, and what it says of one without parsing:
whether a value is a valid default of a type (``Schema.isValidDefault``), whether two schemas are equal
(``Schema.equals``: names, props, fields, symbols and sizes, not docs nor aliases) and how it is printed
(``Schema.toString``, Confluent's ``canonicalString()``: compact, Avro's order of keys, a named type
written in full once and by name after, the references' types by name). Pure.

A schema is a graph of ``Node`` objects: one per named type (a recursive record refers to itself), a new
one per occurrence of a primitive, array, map or union, as Java's parser makes them; the compatibility
check (``avro_compat``) depends on that identity as Java's memo does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from partitions.registry import avro_json
from partitions.registry.schema_types import InvalidSchema

PRIMITIVES = ("string", "bytes", "int", "long", "float", "double", "boolean", "null")
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
MISSING: Any = object()


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


def check_name(name: Any) -> str:
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
        check_name(simple if dot else name)
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
    default: Any = MISSING  # a JSON value, MISSING when none
    order: str = "ascending"
    aliases: list[str] = field(default_factory=list)
    props: dict[str, Any] = field(default_factory=dict)
    position: int = 0

    @property
    def has_default(self) -> bool:
        return self.default is not MISSING


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
    _field_index: dict[str, Field] = field(default_factory=dict, repr=False)  # ``field_named``'s
    _fields_indexed: int = field(default=0, repr=False)

    @property
    def full_name(self) -> str:
        """``Schema.getFullName``: a named type's full name, else its type's name."""
        return self.name.full if self.name is not None else self.type

    def field_named(self, name: str) -> Field | None:
        """The first field of that name. Fields are indexed by name as they are appended (a linear scan
        each made parsing, printing and comparing a record of n fields cost n squared: 18,000 fields took
        a minute)."""
        index = self._field_index
        if self._fields_indexed > len(self.fields):  # fields replaced by fewer: index them again
            index.clear()
            self._fields_indexed = 0
        for f in self.fields[self._fields_indexed :]:
            index.setdefault(f.name, f)
        self._fields_indexed = len(self.fields)
        return index.get(name)

    def alias_names(self) -> list[str]:
        """``Schema.getAliases()``: full names, ".x" for an alias without namespace in a namespace."""
        if self.name is None:
            return []
        return [
            f".{a.name}" if a.space is None and self.name.space is not None else a.full for a in self.aliases
        ]


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
            if given is MISSING or not _valid_value(member.schema, given):
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
