"""A Protobuf file as Confluent's registry sees it: Square Wire's syntax tree (``ProtoFileElement``),
which protobuf_convert makes of a FileDescriptorProto and, for a text, what the text wrote.

The printer (protobuf_format) and the compatibility check (protobuf_diff) read these elements.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor_pb2

F = descriptor_pb2.FieldDescriptorProto
MAX_TAG = 536870911  # Protobuf's largest field number; ranges to it print "max"

SCALARS = {
    F.TYPE_DOUBLE: "double",
    F.TYPE_FLOAT: "float",
    F.TYPE_INT64: "int64",
    F.TYPE_UINT64: "uint64",
    F.TYPE_INT32: "int32",
    F.TYPE_FIXED64: "fixed64",
    F.TYPE_FIXED32: "fixed32",
    F.TYPE_BOOL: "bool",
    F.TYPE_STRING: "string",
    F.TYPE_BYTES: "bytes",
    F.TYPE_UINT32: "uint32",
    F.TYPE_SFIXED32: "sfixed32",
    F.TYPE_SFIXED64: "sfixed64",
    F.TYPE_SINT32: "sint32",
    F.TYPE_SINT64: "sint64",
}
SCALAR_NAMES = frozenset(SCALARS.values())


class Kind(enum.StrEnum):
    """What an option's value is (Wire's ``OptionElement.Kind``)."""

    STRING = "STRING"
    BOOLEAN = "BOOLEAN"
    ENUM = "ENUM"
    NUMBER = "NUMBER"
    MAP = "MAP"
    LIST = "LIST"
    OPTION = "OPTION"  # a text's (name).sub = value: the value is the Option of sub


SCALAR_KINDS = frozenset({Kind.BOOLEAN, Kind.ENUM, Kind.NUMBER})  # printed bare; a Primitive in a map or list


@dataclass(frozen=True, slots=True)
class Primitive:
    """A value inside an option's map, with its kind (Wire's ``OptionPrimitive``)."""

    kind: Kind
    value: Any


@dataclass(slots=True)
class Option:
    name: str
    kind: Kind
    value: Any  # str | bool | int | float | dict[str, Any] | list[Any]
    parenthesized: bool = False


@dataclass(slots=True)
class Field:
    label: str | None  # "optional", "required", "repeated" or None
    type: str
    name: str
    tag: int
    default: str | None = None
    json_name: str | None = None
    options: list[Option] = field(default_factory=list)


@dataclass(slots=True)
class Group:
    """A proto2 group as Wire keeps it from a text: its own element, not a field and a nested message."""

    label: str | None
    name: str
    tag: int
    fields: list[Field]


@dataclass(slots=True)
class OneOf:
    name: str
    fields: list[Field]
    options: list[Option] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)


@dataclass(slots=True)
class Reserved:
    values: list[int | tuple[int, int] | str]  # a tag, an inclusive range, or a name


@dataclass(slots=True)
class Extensions:
    values: list[int | tuple[int, int]]
    options: list[Option] = field(default_factory=list)


@dataclass(slots=True)
class Extend:
    name: str
    fields: list[Field]


@dataclass(slots=True)
class EnumConstant:
    name: str
    tag: int
    options: list[Option] = field(default_factory=list)


@dataclass(slots=True)
class Enum:
    name: str
    constants: list[EnumConstant]
    options: list[Option] = field(default_factory=list)
    reserveds: list[Reserved] = field(default_factory=list)


@dataclass(slots=True)
class Message:
    name: str
    fields: list[Field]
    oneofs: list[OneOf]
    nested: list[Message | Enum]
    options: list[Option] = field(default_factory=list)
    reserveds: list[Reserved] = field(default_factory=list)
    extensions: list[Extensions] = field(default_factory=list)
    extends: list[Extend] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)

    @property
    def is_map_entry(self) -> bool:
        return any(option.name == "map_entry" and option.value is True for option in self.options)


@dataclass(slots=True)
class Rpc:
    name: str
    request: str
    response: str
    client_streaming: bool
    server_streaming: bool
    options: list[Option] = field(default_factory=list)


@dataclass(slots=True)
class Service:
    name: str
    rpcs: list[Rpc]
    options: list[Option] = field(default_factory=list)


@dataclass(slots=True)
class ProtoFile:
    package: str | None
    syntax: str | None  # "proto2", "proto3" or None (no syntax statement: proto2)
    imports: list[str]
    public_imports: list[str]
    weak_imports: list[str]
    types: list[Message | Enum]
    services: list[Service]
    extends: list[Extend]
    options: list[Option]
