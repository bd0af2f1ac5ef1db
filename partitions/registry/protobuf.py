"""PROTOBUF, the schema type: a .proto file (proto2 or proto3, with imports) or, as confluent-kafka's
ProtobufSerializer registers it, a base64-encoded FileDescriptorProto; Confluent's registry takes both.

- parse: text is compiled by protoc (protobuf_compile: errors as protoc words them, with line and
  column); a base64 FileDescriptorProto is checked by building its descriptor pool. Google's well-known
  and common types and Confluent's own (confluent/meta.proto, confluent/type/decimal.proto) resolve
  without a reference, as Confluent's registry resolves them.
- canonical / normalized: the text Confluent's registry prints (protobuf_format over the elements
  protobuf_convert makes), also for a base64 descriptor; ``formatted`` is Confluent's
  ``formattedString`` (``serialized``: what confluent-kafka's Protobuf deserializers ask for).
- backward_incompatibilities: Confluent's protobuf diff (protobuf_diff) and its words.
- decode / encode: the message at Confluent's message indexes as protobuf's JSON mapping, as Confluent's
  REST Proxy v2 prints and parses it (``JsonFormat`` with default values printed).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Sequence
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError, Message

from partitions.registry.protobuf_compile import MAIN_FILE, compile_files
from partitions.registry.protobuf_context import Names
from partitions.registry.protobuf_convert import Converter
from partitions.registry.protobuf_diff import COMPATIBLE_CHANGES, compare
from partitions.registry.protobuf_elements import Kind, Option, Primitive, ProtoFile
from partitions.registry.protobuf_format import canonical_text, normalized_text
from partitions.registry.protobuf_text import Written, without_map_entry_options, written_file
from partitions.registry.schema_types import PROTOBUF, InvalidRecord, InvalidSchema, ParsedSchema, Resolved

_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_CONFLUENT_META = {
    "google.protobuf.FileOptions": "confluent.file_meta",
    "google.protobuf.MessageOptions": "confluent.message_meta",
    "google.protobuf.FieldOptions": "confluent.field_meta",
    "google.protobuf.EnumOptions": "confluent.enum_meta",
    "google.protobuf.EnumValueOptions": "confluent.enum_value_meta",
}


def _descriptor_of(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The FileDescriptorProto a base64 text encodes, or None when the text is not one."""
    compact = "".join(text.split())
    if not compact or not _BASE64.fullmatch(compact):
        return None
    try:
        return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(compact, validate=True))
    except (binascii.Error, DecodeError):
        return None


class ProtobufSchema:
    """A parsed Protobuf schema (implements schema_types.ParsedSchema)."""

    schema_type = PROTOBUF

    def __init__(
        self,
        file: descriptor_pb2.FileDescriptorProto,
        dependencies: dict[str, descriptor_pb2.FileDescriptorProto],
        written: dict[str, Written | None],
    ) -> None:
        if file.syntax == "editions":
            # Confluent's registry reads proto2 and proto3 (Wire's syntax tree and its printer know no
            # edition): a text printed without its edition would mean another schema
            raise InvalidSchema(f"{file.name}: Protobuf editions are not supported, only proto2 and proto3")
        self.file = file
        self.dependencies = dependencies
        self.pool = descriptor_pool.DescriptorPool()
        self._add_to_pool()
        # as Wire reads the text (the canonical text, the compatibility check) ...
        self.element = self._element(file, written.get(file.name), as_written=True)
        self.dependency_elements = {
            name: self._element(d, written.get(name), as_written=True) for name, d in dependencies.items()
        }
        # ... and with the options the descriptors hold (the normalized text)
        self._written = written
        self.names = self._names()
        self._canonical: str | None = None  # each text made once: a schema never changes
        self._normalized: str | None = None

    def _add_to_pool(self) -> None:
        added: set[str] = set()

        def add(proto: descriptor_pb2.FileDescriptorProto, depth: int) -> None:
            if proto.name in added:
                return
            if depth > len(self.dependencies) + 1:
                raise InvalidSchema(f"Import cycle through {proto.name}")
            for name in proto.dependency:
                dependency = self.dependencies.get(name)
                if dependency is None:
                    raise InvalidSchema(f"Import {name!r} of {proto.name} is not resolved")
                add(dependency, depth + 1)
            try:
                self.pool.Add(proto)
            except (TypeError, ValueError, KeyError) as error:
                raise InvalidSchema(f"Invalid Protobuf descriptor {proto.name}: {error}") from None
            added.add(proto.name)

        add(self.file, 0)

    def _element(
        self, proto: descriptor_pb2.FileDescriptorProto, written: Written | None, as_written: bool
    ) -> ProtoFile:
        return Converter(proto, written, self._custom_options, as_written).proto_file()

    def _names(self, as_written: bool = True) -> Names:
        """The types of the file and its imports by name (a fresh table: resolving moves its scope)."""
        if as_written:
            files = [*self.dependency_elements.items(), ("", self.element)]
        else:
            files = [(n, self._element(d, self._written.get(n), False)) for n, d in self.dependencies.items()]
            files.append(("", self._element(self.file, self._written.get(self.file.name), False)))
        names = Names()
        names.collect(files)
        return names

    def _custom_options(self, options: Message) -> list[Option]:
        """The options ``options`` carries as extensions (Confluent's ``toCustomOptions``), Confluent's
        own ``confluent.*_meta`` first as its ``toOption`` writes them."""
        full_name = options.DESCRIPTOR.full_name
        serialized = options.SerializeToString()
        if not serialized:
            return []
        try:
            descriptor = self.pool.FindMessageTypeByName(full_name)
        except KeyError:
            return []
        parsed = message_factory.GetMessageClass(descriptor).FromString(serialized)
        meta: list[Option] = []
        custom: list[Option] = []
        for field, value in parsed.ListFields():
            if not field.is_extension:
                continue
            if field.full_name == _CONFLUENT_META.get(full_name):
                meta_value = _meta_map(value)
                if meta_value:
                    meta.append(Option(field.full_name, Kind.MAP, meta_value, True))
            elif not field.full_name.startswith("confluent."):
                values = list(value) if field.is_repeated else [value]
                custom.extend(
                    Option(field.full_name, _kind(field, v), _option_value(field, v, False), True)
                    for v in values
                )
        return meta + custom

    def canonical(self) -> str:
        if self._canonical is None:
            self._canonical = canonical_text(self.element)
        return self._canonical

    def normalized(self) -> str:
        if self._normalized is None:
            try:
                element = self._element(self.file, self._written.get(self.file.name), as_written=False)
                self._normalized = normalized_text(element, self._names(as_written=False))
            except ValueError as error:
                raise InvalidSchema(str(error)) from None
        return self._normalized

    def serialized(self) -> str:
        """Confluent's ``format=serialized``: the file's FileDescriptorProto, base64-encoded."""
        return base64.standard_b64encode(self.file.SerializeToString()).decode("ascii")

    def formatted(self, format: str) -> str:
        """The text Confluent's ``formattedString(format)`` answers (``GET /schemas/ids/{id}?format=``):
        ``serialized`` (what confluent-kafka's Protobuf deserializers ask for), ``ignore_extensions``
        (custom options and extensions left out), else the canonical text, as Confluent answers a format
        it does not know."""
        if format.lower() == "serialized":
            return self.serialized()
        if format.lower() == "ignore_extensions":
            return canonical_text(self.element, ignore_extensions=True)
        return self.canonical()

    def backward_incompatibilities(self, previous: ParsedSchema) -> list[str]:
        if not isinstance(previous, ProtobufSchema):
            return ["Incompatible because of different schema type"]
        differences = compare(previous.element, self.element, previous.names, self.names)
        return [d.message() for d in differences if d.type not in COMPATIBLE_CHANGES]

    def message_class(self, message_indexes: Sequence[int]) -> type[Message]:
        indexes = list(message_indexes) or [0]
        try:
            descriptor = self.pool.FindFileByName(self.file.name).message_types_by_name
            message = list(descriptor.values())[indexes[0]]
            for index in indexes[1:]:
                message = message.nested_types[index]
        except IndexError:
            raise InvalidRecord(f"No message at indexes {indexes} of the schema") from None
        message_class: type[Message] = message_factory.GetMessageClass(message)
        return message_class

    def decode(self, payload: bytes | memoryview, message_indexes: Sequence[int] = ()) -> Any:
        message_class = self.message_class(message_indexes)
        try:
            message = message_class.FromString(bytes(payload))
        except DecodeError as error:
            raise InvalidRecord(
                f"Payload is not a {message_class.DESCRIPTOR.full_name} message: {error}"
            ) from None
        try:
            return json_format.MessageToDict(
                message, always_print_fields_with_no_presence=True, descriptor_pool=self.pool
            )
        except (TypeError, ValueError, KeyError) as error:  # an Any whose type the schema does not know
            raise InvalidRecord(
                f"Payload is not a {message_class.DESCRIPTOR.full_name} message: {error}"
            ) from None

    def encode(self, value: Any) -> tuple[tuple[int, ...], bytes]:
        message_class = self.message_class(())
        name = message_class.DESCRIPTOR.full_name
        if not isinstance(value, dict):
            raise InvalidRecord(
                f"Value is not a {name} message: a JSON object is, not {type(value).__name__}"
            )
        try:
            message = json_format.ParseDict(value, message_class(), descriptor_pool=self.pool)
        except json_format.ParseError as error:
            raise InvalidRecord(f"Value is not a {name} message: {error}") from None
        return (), message.SerializeToString()


def _kind(field: Any, value: Any) -> Kind:
    if isinstance(value, bool):
        return Kind.BOOLEAN
    if isinstance(value, str):
        return Kind.STRING
    if field.type == field.TYPE_ENUM:
        return Kind.ENUM
    if isinstance(value, Message):
        return Kind.MAP
    if isinstance(value, list):
        return Kind.LIST
    return Kind.NUMBER


def _option_value(field: Any, value: Any, in_map: bool) -> Any:
    if isinstance(value, Message):
        return {
            (f"[{f.full_name}]" if f.is_extension else f.name): (
                [_option_value(f, v, True) for v in v_all] if f.is_repeated else _option_value(f, v_all, True)
            )
            for f, v_all in value.ListFields()
        }
    if field.type == field.TYPE_ENUM:
        value = (
            field.enum_type.values_by_number[value].name
            if value in field.enum_type.values_by_number
            else value
        )
        return Primitive(Kind.ENUM, value) if in_map else value
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if in_map and isinstance(value, bool):
        return Primitive(Kind.BOOLEAN, value)
    if in_map and isinstance(value, int | float):
        return Primitive(Kind.NUMBER, value)
    return value


def _meta_map(meta: Message) -> dict[str, Any]:
    """Confluent's ``toOption(name, Meta)``."""
    found: dict[str, Any] = {}
    if meta.doc:
        found["doc"] = meta.doc
    params = []
    for key, value in meta.params.items():
        params.append(
            {"value": value, "key": key} if key in ("precision", "scale") else {"key": key, "value": value}
        )
    if params:
        found["params"] = params
    if list(meta.tags):
        found["tags"] = list(meta.tags)
    rules = []
    for rule in meta.rules:
        entry = {k: getattr(rule, k) for k in ("name", "doc", "expr", "sql") if getattr(rule, k)}
        if entry:
            rules.append(entry)
    if rules:
        found["rules"] = rules
    return found


class ProtobufType:
    name = PROTOBUF

    def parse(self, text: str, resolved: Resolved) -> ProtobufSchema:
        return _Parser(resolved).parse(text)


class _Parser:
    """One parse: each resolved import made a text protoc can import (a base64 one as its normalized
    text, which Confluent's normalizer writes as valid .proto), each converted once."""

    def __init__(self, resolved: Resolved) -> None:
        self.resolved = resolved
        self.texts: dict[str, str] = {}
        self.in_progress: set[str] = set()  # base64 imports being converted (an import cycle stops here)

    def protoc_text(self, name: str) -> str:
        if name not in self.texts:
            text = self.resolved[name]
            if _descriptor_of(text) is not None:
                self.in_progress.add(name)
                try:
                    text = self.parse(text, name=name).normalized()
                finally:
                    self.in_progress.discard(name)
            self.texts[name] = text
        return self.texts[name]

    def import_texts(self) -> dict[str, str]:
        return {name: self.protoc_text(name) for name in self.resolved if name not in self.in_progress}

    def parse(self, text: str, name: str | None = None) -> ProtobufSchema:
        """As Confluent's ``toProtoFile(String)``: the text as a .proto file, else as a base64
        FileDescriptorProto, else the text's error."""
        try:
            return self.parse_text(text, name)
        except InvalidSchema:
            descriptor = _descriptor_of(text)
            if descriptor is None:
                raise
        return self.parse_descriptor(descriptor, name)

    def parse_text(self, text: str, name: str | None) -> ProtobufSchema:
        try:
            written_text: Written | None = written_file(text)
        except (ValueError, IndexError):
            written_text = None  # not a text the reader knows: protoc's error, or descriptors' form
        if written_text is None:
            file, dependencies = compile_files(text, self.import_texts())
        else:
            compiled_text, map_entries = without_map_entry_options(text, written_text)
            file, dependencies = compile_files(compiled_text, self.import_texts())
            _set_map_entries(file, map_entries)
        if name is not None:
            file.name = name
        written: dict[str, Written | None] = {file.name: written_text}
        for dependency in dependencies:
            if dependency in self.resolved and _descriptor_of(self.resolved[dependency]) is None:
                try:
                    written[dependency] = written_file(self.resolved[dependency])
                except (ValueError, IndexError):
                    written[dependency] = None
        return ProtobufSchema(file, dependencies, written)

    def parse_descriptor(
        self, descriptor: descriptor_pb2.FileDescriptorProto, name: str | None
    ) -> ProtobufSchema:
        _check_nesting(descriptor)
        if name is not None:
            descriptor.name = name
        elif not descriptor.name or descriptor.name in descriptor.dependency:
            descriptor.name = MAIN_FILE
        stub = 'syntax = "proto3";\n' + "".join(f'import public "{d}";\n' for d in descriptor.dependency)
        try:
            _, dependencies = compile_files(stub, self.import_texts())
        except InvalidSchema as error:  # protoc's words name the stub's lines: say whose imports they are
            raise InvalidSchema(f"The imports of {descriptor.name} do not resolve: {error}") from None
        return ProtobufSchema(descriptor, dependencies, {})


NESTING_MAX = 32  # message types within message types, as deep as protoc lets a text go


def _check_nesting(file: descriptor_pb2.FileDescriptorProto) -> None:
    """A descriptor's messages nest no deeper than protoc lets a text nest them (what reads a schema
    here recurses through its nesting)."""
    level = [(message, 1) for message in file.message_type]
    while level:
        message, depth = level.pop()
        if depth > NESTING_MAX:
            raise InvalidSchema(
                f"{file.name}: message {message.name} is nested deeper than {NESTING_MAX} levels"
            )
        level.extend((nested, depth + 1) for nested in message.nested_type)


def _set_map_entries(file: descriptor_pb2.FileDescriptorProto, scopes: list[tuple[str, ...]]) -> None:
    for scope in scopes:
        messages, message = file.message_type, None
        for name in scope:
            message = next((m for m in messages if m.name == name), None)
            if message is None:
                raise InvalidSchema(f"No message {'.'.join(scope)} for its map_entry option")
            messages = message.nested_type
        if message is not None:
            message.options.map_entry = True


PROTOBUF_TYPE = ProtobufType()

_: Callable[[str, Resolved], ParsedSchema] = PROTOBUF_TYPE.parse  # checked: a SchemaType's parse
