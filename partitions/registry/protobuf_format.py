"""A Protobuf file's text as Confluent's registry prints it: ``ProtobufSchemaUtils.toString`` (the
canonical text it stores and answers) and, with ``normalize``, ``toNormalizedString`` (names fully
qualified, fields, constants, reserved ranges and options sorted, imports sorted, the synthetic map
entries written as ``map<K, V>``). A port of those functions over protobuf_elements; its output is
compared with Confluent's in tests/partitions/registry/test_protobuf.py."""

from __future__ import annotations

import decimal
import math
from contextlib import nullcontext
from typing import Any

from partitions.registry.protobuf_context import Names
from partitions.registry.protobuf_elements import (
    MAX_TAG,
    SCALAR_KINDS,
    SCALAR_NAMES,
    Enum,
    EnumConstant,
    Extend,
    Extensions,
    Field,
    Group,
    Kind,
    Message,
    OneOf,
    Option,
    Primitive,
    ProtoFile,
    Reserved,
    Rpc,
    Service,
)

_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    "'": "\\'",
    '"': '\\"',
}


def escape(text: str) -> str:
    return "".join(_ESCAPES.get(char, char) for char in text)


def _indented(lines: str) -> str:
    parts = lines.split("\n")
    while len(parts) > 1 and parts[-1] == "":  # Java's split drops every trailing empty string
        parts.pop()
    return "".join(f"  {line}\n" for line in parts)


def _block(opening: str, *sections: list[str]) -> str:
    """``opening`` (``... {``), then each section that has statements, on a line of its own after a blank
    line (the first: after the opening's line), indented; then ``}``."""
    out = [opening]
    for section in sections:
        if section:
            out.append("\n")
            out += [_indented(statement) for statement in section]
    out.append("}\n")
    return "".join(out)


def _listed(texts: list[str]) -> str:
    """The texts one a line, indented, a comma after each but the last."""
    return "".join(_indented(text + ("," if i < len(texts) - 1 else "")) for i, text in enumerate(texts))


def _bracketed(texts: list[str]) -> str:
    """``[one]``, or ``[`` and the texts ``_listed`` and ``]``."""
    return f"[{texts[0]}]" if len(texts) == 1 else f"[\n{_listed(texts)}]"


def _scalar(value: Any, normalize: bool = False) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if normalize and isinstance(value, float) and math.isfinite(value):
        # Confluent's normalizer prints numbers with Java's DecimalFormat: no grouping, at most three
        # fraction digits (half-even), no trailing zeros
        text = format(
            decimal.Decimal(repr(value)).quantize(decimal.Decimal("0.001"), decimal.ROUND_HALF_EVEN), "f"
        )
        return text.rstrip("0").rstrip(".") if "." in text else text
    return str(value)


class Printer:
    def __init__(self, names: Names | None, ignore_extensions: bool = False) -> None:
        self.normalize = names is not None
        self.names = names if names is not None else Names()  # consulted only to normalize
        self.ignore_extensions = ignore_extensions  # Confluent's format=ignore_extensions

    def resolve(self, name: str) -> str:
        full = self.names.resolve(name)
        if full is None:
            raise ValueError(f"Could not resolve type: {name}")
        return "." + full

    def file(self, file: ProtoFile) -> str:
        out = []
        if file.syntax is not None and (not self.normalize or file.syntax == "proto3"):
            out.append(f'syntax = "{file.syntax}";\n')
        if file.package is not None:
            out.append(f"package {file.package};\n")
        if file.imports or file.public_imports:
            out.append("\n")
            imports, public = file.imports, file.public_imports
            if self.normalize:
                imports, public = sorted(set(imports)), sorted(set(public))
            out += [f'import "{name}";\n' for name in imports]
            out += [f'import public "{name}";\n' for name in public]
        options = self.options(file.options)
        if options:
            out.append("\n")
            out += [self.option_statement(option) for option in options]
        types = self.types(file.types)
        if types:
            out.append("\n")
            out += self.type_texts(types, indent=False)
        if file.extends and not self.ignore_extensions:
            out.append("\n")
            out += [self.extend(extend) for extend in self.extends(file.extends)]
        if file.services:
            out.append("\n")
            out += [self.service(service) for service in file.services]
        return "".join(out)

    def type_texts(self, types: list[Message | Enum], indent: bool) -> list[str]:
        out = []
        for kind in (Message, Enum):
            for element in types:
                if isinstance(element, kind):
                    with self._enter(element.name):
                        text = self.message(element) if isinstance(element, Message) else self.enum(element)
                    out.append(_indented(text) if indent else text)
        return out

    def _enter(self, name: str) -> Any:

        return self.names.enter(name) if self.normalize else nullcontext()

    def types(self, types: list[Message | Enum]) -> list[Message | Enum]:
        if not self.normalize:
            return types
        kept: list[Message | Enum] = []
        for element in types:
            if isinstance(element, Message):
                info = self.names.get(element.name)
                if info is not None and info.is_map:
                    continue
            kept.append(element)
        return kept

    def extends(self, extends: list[Extend]) -> list[Extend]:
        if not self.normalize:
            return extends
        grouped: dict[str, list[Field]] = {}
        for extend in extends:
            for field in extend.fields:
                grouped.setdefault(self.resolve(extend.name), []).append(field)
        return [Extend(name, fields) for name, fields in grouped.items()]

    def service(self, service: Service) -> str:
        return _block(
            f"service {service.name} {{",
            [self.option_statement(option) for option in self.options(service.options)],
            [self.rpc(rpc) for rpc in service.rpcs],
        )

    def rpc(self, rpc: Rpc) -> str:
        request, response = rpc.request, rpc.response
        if self.normalize:
            request, response = self.resolve(request), self.resolve(response)
        out = [f"rpc {rpc.name} ("]
        out.append(("stream " if rpc.client_streaming else "") + request + ") returns (")
        out.append(("stream " if rpc.server_streaming else "") + response + ")")
        options = self.options(rpc.options)
        if options:
            out.append(" {\n")
            out += [_indented(self.option_statement(option)) for option in options]
            out.append("}")
        out.append(";\n")
        return "".join(out)

    def reserveds(self, reserveds: list[Reserved]) -> list[Reserved]:
        if not self.normalize:
            return reserveds
        single = [Reserved([value]) for reserved in reserveds for value in reserved.values]

        def order(reserved: Reserved) -> tuple[int, str]:
            value = reserved.values[0]
            start = value[0] if isinstance(value, tuple) else value if isinstance(value, int) else 2**31 - 1
            return (start, _range_text(value, False))

        return sorted(single, key=order)

    def enum(self, enum: Enum) -> str:
        out = [f"enum {enum.name} {{"]
        if enum.reserveds:
            out.append("\n")
            out += [_indented(self.reserved(reserved)) for reserved in self.reserveds(enum.reserveds)]
        if not enum.reserveds and (enum.options or enum.constants):
            out.append("\n")
        out += [_indented(self.option_statement(option)) for option in self.options(enum.options)]
        constants = enum.constants
        if self.normalize:
            constants = sorted(constants, key=lambda c: (c.tag, c.name))
        out += [_indented(self.constant(constant)) for constant in constants]
        out.append("}\n")
        return "".join(out)

    def constant(self, constant: EnumConstant) -> str:
        text = f"{constant.name} = {constant.tag}"
        options = self.options(constant.options)
        if options:
            text += " " + self.option_list(options)
        return text + ";\n"

    def message(self, message: Message) -> str:
        out = [f"message {message.name} {{"]
        if message.reserveds:
            out.append("\n")
            out += [_indented(self.reserved(reserved)) for reserved in self.reserveds(message.reserveds)]
        options = self.options(message.options)
        if options:
            out.append("\n")
            out += [_indented(self.option_statement(option)) for option in options]
        if message.fields:
            out.append("\n")
            out += [_indented(statement) for statement in self.field_statements(message.fields)]
        if message.oneofs:
            out.append("\n")
            oneofs = message.oneofs
            if self.normalize:
                oneofs = [
                    OneOf(o.name, sorted(o.fields, key=lambda f: f.tag), o.options, o.groups)
                    for o in oneofs
                    if o.fields
                ]
                oneofs.sort(key=lambda o: o.fields[0].tag)
            out += [_indented(self.oneof(oneof)) for oneof in oneofs]
        if message.groups:
            out.append("\n")
            out += [_indented(self.group(group)) for group in self.sorted_groups(message.groups)]
        if message.extensions and not self.ignore_extensions:
            out.append("\n")
            extensions = message.extensions
            if self.normalize:
                extensions = sorted(
                    (Extensions([value], e.options) for e in extensions for value in e.values),
                    key=lambda e: e.values[0][0] if isinstance(e.values[0], tuple) else e.values[0],
                )
            out += [_indented(self.extensions(extension)) for extension in extensions]
        if message.extends and not self.ignore_extensions:
            out.append("\n")
            out += [_indented(self.extend(extend)) for extend in self.extends(message.extends)]
        types = self.types(message.nested)
        if types:
            out.append("\n")
            out += self.type_texts(types, indent=True)
        out.append("}\n")
        return "".join(out)

    def reserved(self, reserved: Reserved) -> str:
        return "reserved " + ", ".join(_range_text(v, self.normalize) for v in reserved.values) + ";\n"

    def extensions(self, extensions: Extensions) -> str:
        text = "extensions " + ", ".join(_range_text(v, self.normalize) for v in extensions.values)
        options = self.options(extensions.options)
        if options:
            text += " " + self.option_list(options)
        return text + ";\n"

    def oneof(self, oneof: OneOf) -> str:
        return _block(
            f"oneof {oneof.name} {{",
            [self.option_statement(option) for option in self.options(oneof.options)],
            [self.field(field) for field in oneof.fields],
            [self.group(group) for group in self.sorted_groups(oneof.groups)],
        )

    def sorted_groups(self, groups: list[Group]) -> list[Group]:
        return sorted(groups, key=lambda g: g.tag) if self.normalize else groups

    def group(self, group: Group) -> str:
        label = f"{group.label} " if group.label is not None else ""
        return _block(f"{label}group {group.name} = {group.tag} {{", self.field_statements(group.fields))

    def extend(self, extend: Extend) -> str:
        return _block(f"extend {extend.name} {{", self.field_statements(extend.fields))

    def field_statements(self, fields: list[Field]) -> list[str]:
        """The fields' statements, by tag when normalizing."""
        ordered = sorted(fields, key=lambda f: f.tag) if self.normalize else fields
        return [self.field(field) for field in ordered]

    def field(self, field: Field) -> str:
        label, field_type = field.label, field.type
        if self.normalize:
            is_map = field_type.startswith("map<")
            if field_type not in SCALAR_NAMES and not is_map:
                field_type = self.resolve(field_type)
                info = self.names.types.get(field_type[1:])
                if info is not None and info.is_map:
                    field_type = info.map_type() or field_type
                    is_map = True
            if is_map:
                key, value = field_type[4:-1].split(",", 1)
                value = value.strip()
                resolved = self.names.resolve(value)
                if resolved is not None:
                    value = "." + resolved
                field_type = f"map<{key.strip()}, {value}>"
                label = None
        text = (f"{label} " if label is not None else "") + f"{field_type} {field.name} = {field.tag}"
        options = list(field.options)
        if field.default is not None:
            options.append(Option("default", _default_kind(field.type), field.default))
        if field.json_name is not None:
            options.append(Option("json_name", Kind.STRING, field.json_name))
        options = self.options(options)
        if options:
            text += " " + self.option_list(options)
        return text + ";\n"

    def options(self, options: list[Option]) -> list[Option]:
        if self.ignore_extensions:  # custom options go, Confluent's own stay
            options = [o for o in options if not o.parenthesized or o.name.startswith("confluent.")]
        if not self.normalize or not options:
            return options
        qualified = []
        for option in options:
            if option.parenthesized:
                resolved = self.names.resolve(option.name, table="extend_fields")
                if resolved is not None:
                    option = Option(resolved, option.kind, option.value, True)
            qualified.append(option)
        return sorted(qualified, key=lambda o: o.name)

    def option_statement(self, option: Option) -> str:
        return f"option {self.option(option)};\n"

    def option_list(self, options: list[Option]) -> str:
        return _bracketed([self.option(option) for option in options])

    def option(self, option: Option) -> str:
        name = f"({option.name})" if option.parenthesized else option.name
        if option.kind == Kind.STRING:
            return f'{name} = "{escape(str(option.value))}"'
        if option.kind in SCALAR_KINDS:
            return f"{name} = {_scalar(option.value, self.normalize and option.kind == Kind.NUMBER)}"
        if option.kind == Kind.MAP:
            return f"{name} = {{\n{self.option_map(option.value)}}}"
        if option.kind == Kind.LIST:
            return f"{name} = {self.option_list_value(option.value)}"
        if option.kind == Kind.OPTION:
            return f"{name}.{self.option(option.value)}"
        return name

    def option_list_value(self, values: list[Any]) -> str:
        return _bracketed([self.value(value) for value in values])

    def option_map(self, values: dict[str, Any]) -> str:
        items = list(values.items())
        if self.normalize:
            items = sorted((k, v) for k, v in items if not (isinstance(v, list) and not v))
        return _listed([f"{key}: {self.value(value)}" for key, value in items])

    def value(self, value: Any) -> str:
        if isinstance(value, str):
            return f'"{escape(value)}"'
        if isinstance(value, dict):
            return f"{{\n{self.option_map(value)}}}"
        if isinstance(value, list):
            if self.normalize and len(value) == 1:
                return self.value(value[0])
            return f"[\n{_listed([self.value(v) for v in value])}]"
        if isinstance(value, Primitive):
            if value.kind == Kind.STRING:
                return self.value(value.value)
            return _scalar(value.value, self.normalize and value.kind == Kind.NUMBER)
        if isinstance(value, Option):
            return self.option(value)
        return _scalar(value)


def _default_kind(field_type: str) -> Kind:
    if field_type == "bool":
        return Kind.BOOLEAN
    if field_type == "string":
        return Kind.STRING
    if field_type in SCALAR_NAMES:
        return Kind.NUMBER
    return Kind.ENUM


def _range_text(value: int | tuple[int, int] | str, normalize: bool) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, int):
        return str(value)
    start, end = value
    if normalize and start == end:
        return str(start)
    return f"{start} to {end if end < MAX_TAG else 'max'}"


def canonical_text(file: ProtoFile, ignore_extensions: bool = False) -> str:
    return Printer(None, ignore_extensions).file(file)


def normalized_text(file: ProtoFile, names: Names) -> str:
    return Printer(names).file(file)
