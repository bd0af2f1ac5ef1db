"""A FileDescriptorProto made the elements Confluent's registry compares and prints (protobuf_elements):
Confluent's ``ProtobufSchema.toProtoFile``, and for a schema given as text, what the text wrote
(protobuf_text), as Square Wire's parser keeps it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf import descriptor_pb2

from partitions.registry import protobuf_elements as elements
from partitions.registry.protobuf_elements import SCALARS, F, Kind
from partitions.registry.protobuf_text import Written, WrittenField

# The standard options Confluent's toProtoFile keeps, in its order, with Wire's kind of each.
FILE_OPTIONS = (
    ("java_package", Kind.STRING),
    ("java_outer_classname", Kind.STRING),
    ("java_multiple_files", Kind.BOOLEAN),
    ("java_generate_equals_and_hash", Kind.BOOLEAN),
    ("java_string_check_utf8", Kind.BOOLEAN),
    ("optimize_for", Kind.ENUM),
    ("go_package", Kind.STRING),
    ("cc_generic_services", Kind.BOOLEAN),
    ("java_generic_services", Kind.BOOLEAN),
    ("py_generic_services", Kind.BOOLEAN),
    ("deprecated", Kind.BOOLEAN),
    ("cc_enable_arenas", Kind.BOOLEAN),
    ("objc_class_prefix", Kind.STRING),
    ("csharp_namespace", Kind.STRING),
    ("swift_prefix", Kind.STRING),
    ("php_class_prefix", Kind.STRING),
    ("php_namespace", Kind.STRING),
    ("php_metadata_namespace", Kind.STRING),
    ("ruby_package", Kind.STRING),
)
MESSAGE_OPTIONS = (
    ("no_standard_descriptor_accessor", Kind.BOOLEAN),
    ("deprecated", Kind.BOOLEAN),
    ("map_entry", Kind.BOOLEAN),
)
FIELD_OPTIONS = (
    ("ctype", Kind.ENUM),
    ("packed", Kind.BOOLEAN),
    ("jstype", Kind.ENUM),
    ("deprecated", Kind.BOOLEAN),
    ("debug_redact", Kind.BOOLEAN),
    ("retention", Kind.ENUM),
)
ENUM_OPTIONS = (("allow_alias", Kind.BOOLEAN), ("deprecated", Kind.BOOLEAN))
ENUM_VALUE_OPTIONS = (("deprecated", Kind.BOOLEAN), ("debug_redact", Kind.BOOLEAN))
SERVICE_OPTIONS = (("deprecated", Kind.BOOLEAN),)
METHOD_OPTIONS = (("deprecated", Kind.BOOLEAN), ("idempotency_level", Kind.ENUM))


def _standard_options(options: Any, known: tuple[tuple[str, Kind], ...]) -> list[elements.Option]:
    found = []
    for name, kind in known:
        if options.HasField(name):
            value = getattr(options, name)
            if kind == Kind.ENUM:
                value = options.DESCRIPTOR.fields_by_name[name].enum_type.values_by_number[value].name
            found.append(elements.Option(name, kind, value))
    if any(f.name == "targets" for f, _ in options.ListFields()):
        enum_type = options.DESCRIPTOR.fields_by_name["targets"].enum_type
        found.extend(
            elements.Option("targets", Kind.ENUM, enum_type.values_by_number[t].name) for t in options.targets
        )
    return found


class Converter:
    """Confluent's ``toProtoFile``: a FileDescriptorProto's elements. ``written`` (the file's text as
    written, protobuf_text) makes them what Wire's parser makes of that text: types, labels, extendees,
    rpc types and the syntax statement always, and with ``as_written`` its options, defaults and ranges
    too (the canonical text; the normalizer reads the options as the descriptor holds them, already
    qualified and merged as Confluent's normalizer makes them). ``custom_options`` reads the options an
    options message carries as extensions (protobuf.py, from its descriptor pool)."""

    def __init__(
        self,
        file: descriptor_pb2.FileDescriptorProto,
        written: Written | None,
        custom_options: Callable[[Any], list[elements.Option]],
        as_written: bool = True,
    ) -> None:
        self.file = file
        self.written = written
        self.custom_options = custom_options
        self.as_written = written if as_written else None  # the text whose options, ranges, defaults print
        self.proto3 = file.syntax == "proto3"

    def options(
        self, options: Any, known: tuple[tuple[str, Kind], ...], key: tuple[str, ...]
    ) -> list[elements.Option]:
        if self.as_written is not None:
            return list(self.as_written.options.get(key, []))
        return _standard_options(options, known) + self.custom_options(options)

    def written_field(self, scope: tuple[str, ...], name: str) -> WrittenField | None:
        return self.written.fields.get((scope, name)) if self.written is not None else None

    def proto_file(self) -> elements.ProtoFile:
        file = self.file
        imports, public, weak = [], [], []
        for index, name in enumerate(file.dependency):
            if index in file.public_dependency:
                public.append(name)
            elif index in file.weak_dependency:
                weak.append(name)
            else:
                imports.append(name)
        types: list[elements.Message | elements.Enum] = [
            self.message(m, (m.name,)) for m in file.message_type
        ]
        types += [self.enum(e, (e.name,)) for e in file.enum_type]
        if self.written is not None:
            syntax = self.written.syntax
        else:
            syntax = file.syntax if file.syntax in ("proto2", "proto3") else None
        return elements.ProtoFile(
            package=file.package or None,
            syntax=syntax,
            imports=imports,
            public_imports=public,
            weak_imports=weak,
            types=types,
            services=[self.service(s) for s in file.service],
            extends=self.extends(file.extension, ()),
            options=self.options(file.options, FILE_OPTIONS, ("file",)),
        )

    def extends(self, fields: Any, scope: tuple[str, ...]) -> list[elements.Extend]:
        grouped: dict[str, list[elements.Field]] = {}
        for fd in fields:
            written = self.written_field(scope, fd.name)
            extendee = written.extendee if written is not None and written.extendee else fd.extendee
            grouped.setdefault(extendee, []).append(self.field(fd, scope, in_oneof=False))
        return [elements.Extend(name, fields) for name, fields in grouped.items()]

    def message(self, descriptor: descriptor_pb2.DescriptorProto, scope: tuple[str, ...]) -> elements.Message:
        fields: list[elements.Field] = []
        oneofs = [
            elements.OneOf(o.name, [], self.options(o.options, (), ("oneof", *scope, o.name)))
            for o in descriptor.oneof_decl
        ]
        map_entries: set[str] = set()
        groups: list[elements.Group] = []
        for fd in descriptor.field:
            group = self.group(fd, descriptor, scope)
            if group is not None:  # Wire's element of a text's group; its message is no nested type
                map_entries.add(group.name)
                if fd.HasField("oneof_index"):
                    group.label = None
                    oneofs[fd.oneof_index].groups.append(group)
                else:
                    groups.append(group)
            elif fd.HasField("oneof_index") and not fd.proto3_optional:
                oneofs[fd.oneof_index].fields.append(self.field(fd, scope, in_oneof=True))
            else:
                field_element = self.field(fd, scope, in_oneof=False)
                if field_element.type.startswith("map<"):
                    map_entries.add(fd.type_name.rsplit(".", 1)[-1])
                fields.append(field_element)
        nested: list[elements.Message | elements.Enum] = [
            self.message(m, (*scope, m.name)) for m in descriptor.nested_type if m.name not in map_entries
        ]
        nested += [self.enum(e, (*scope, e.name)) for e in descriptor.enum_type]
        if self.as_written is not None:
            reserveds = list(self.as_written.reserveds.get(("message", *scope), []))
            extensions = list(self.as_written.extensions.get(scope, []))
        else:
            reserveds = [elements.Reserved([_range(r.start, r.end - 1)]) for r in descriptor.reserved_range]
            reserveds += [elements.Reserved([name]) for name in descriptor.reserved_name]
            extensions = [
                elements.Extensions([_range(r.start, r.end - 1)], _standard_options(r.options, ()))
                for r in descriptor.extension_range
            ]
        return elements.Message(
            name=descriptor.name,
            fields=fields,
            oneofs=[o for o in oneofs if o.fields or o.groups],
            nested=nested,
            options=self.options(descriptor.options, MESSAGE_OPTIONS, ("message", *scope)),
            reserveds=reserveds,
            extensions=extensions,
            extends=self.extends(descriptor.extension, scope),
            groups=groups,
        )

    def group(
        self,
        fd: descriptor_pb2.FieldDescriptorProto,
        message: descriptor_pb2.DescriptorProto,
        scope: tuple[str, ...],
    ) -> elements.Group | None:
        written = self.written_field(scope, fd.name)
        if fd.type != F.TYPE_GROUP or written is None or not written.group:
            return None
        body = next((m for m in message.nested_type if m.name == written.type), None)
        if body is None:
            return None
        fields = [self.field(f, (*scope, body.name), in_oneof=False) for f in body.field]
        return elements.Group(written.label, body.name, fd.number, fields)

    def field(
        self, fd: descriptor_pb2.FieldDescriptorProto, scope: tuple[str, ...], in_oneof: bool
    ) -> elements.Field:
        written = self.written_field(scope, fd.name)
        if written is not None:
            label, type_name = (None if in_oneof else written.label), written.type
        else:
            label, type_name = (None if in_oneof else self.label(fd)), fd.type_name or SCALARS[fd.type]
        default = fd.default_value if not self.proto3 and fd.HasField("default_value") else None
        if self.as_written is not None and written is not None:
            options, default = list(written.options), written.default
        else:
            options = _standard_options(fd.options, FIELD_OPTIONS) + self.custom_options(fd.options)
        return elements.Field(
            label=label,
            type=type_name,
            name=fd.name,
            tag=fd.number,
            default=default,
            json_name=fd.json_name if fd.HasField("json_name") else None,
            options=options,
        )

    def label(self, fd: descriptor_pb2.FieldDescriptorProto) -> str | None:
        if fd.proto3_optional:
            return "optional"
        if fd.label == F.LABEL_REPEATED:
            return "repeated"
        if self.proto3:
            return None
        return "required" if fd.label == F.LABEL_REQUIRED else "optional"

    def enum(self, descriptor: descriptor_pb2.EnumDescriptorProto, path: tuple[str, ...]) -> elements.Enum:
        constants = [
            elements.EnumConstant(
                v.name, v.number, self.options(v.options, ENUM_VALUE_OPTIONS, ("value", *path, v.name))
            )
            for v in descriptor.value
        ]
        if self.as_written is not None:
            reserveds = list(self.as_written.reserveds.get(("enum", *path), []))
        else:
            reserveds = [elements.Reserved([_range(r.start, r.end)]) for r in descriptor.reserved_range]
            reserveds += [elements.Reserved([name]) for name in descriptor.reserved_name]
        options = self.options(descriptor.options, ENUM_OPTIONS, ("enum", *path))
        return elements.Enum(descriptor.name, constants, options, reserveds)

    def service(self, descriptor: descriptor_pb2.ServiceDescriptorProto) -> elements.Service:
        rpcs = []
        for m in descriptor.method:
            request, response = m.input_type, m.output_type
            if self.written is not None:
                request, response = self.written.rpc_types.get((descriptor.name, m.name), (request, response))
            options = self.options(m.options, METHOD_OPTIONS, ("rpc", descriptor.name, m.name))
            rpcs.append(
                elements.Rpc(m.name, request, response, m.client_streaming, m.server_streaming, options)
            )
        options = self.options(descriptor.options, SERVICE_OPTIONS, ("service", descriptor.name))
        return elements.Service(descriptor.name, rpcs, options)


def _range(start: int, end_inclusive: int) -> int | tuple[int, int]:
    return start if start == end_inclusive else (start, end_inclusive)
