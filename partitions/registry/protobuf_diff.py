"""Why data written with one Protobuf schema could not be read with another: a port of Confluent's
``protobuf-provider`` ``diff/`` package (SchemaDiff, MessageSchemaDiff, FieldSchemaDiff, EnumSchemaDiff,
Context, Difference), the differences it finds, which of them it counts compatible, and the words
``ProtobufSchema.isBackwardCompatible`` answers for the others. Confluent's own examples
(diff-schema-examples.json) are the judge: tests/partitions/registry/test_protobuf.py runs them all."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

from partitions.registry.json_schema_difference import map_order, union_order
from partitions.registry.protobuf_context import Names, TypeInfo, resolve_in
from partitions.registry.protobuf_elements import SCALAR_NAMES, Enum, Field, Message, ProtoFile

COMPATIBLE_CHANGES = frozenset(
    {
        "MESSAGE_ADDED",
        "MESSAGE_MOVED",
        "ENUM_ADDED",
        "ENUM_REMOVED",
        "ENUM_CONST_ADDED",
        "ENUM_CONST_CHANGED",
        "ENUM_CONST_REMOVED",
        "FIELD_ADDED",
        "FIELD_REMOVED",
        "FIELD_NAME_CHANGED",
        "FIELD_STRING_OR_BYTES_LABEL_CHANGED",
        "ONEOF_ADDED",
        "ONEOF_REMOVED",
        "ONEOF_FIELD_ADDED",
        "ONEOF_FIELD_MOVED_TO_TOP_LEVEL",
    }
)

_IN = "in the %s schema"  # Confluent leaves its %s unfilled: ProtobufSchema answers the text as is
_DESCRIPTIONS = {
    "PACKAGE_CHANGED": f"The package at '{{path}}' {_IN} does not match the package in the %s schema",
    "MESSAGE_REMOVED": f"The %s schema is missing a MESSAGE type at path '{{path}}' {_IN}",
    "FIELD_KIND_CHANGED": f"The type of a field at path '{{path}}' {_IN} does not match the %s schema",
    "FIELD_SCALAR_KIND_CHANGED": (
        f"The kind of a SCALAR field at path '{{path}}' {_IN} does not match its kind in the %s schema"
    ),
    "FIELD_NAMED_TYPE_CHANGED": (
        f"The type of a MESSAGE field at path '{{path}}' {_IN} does not match its type in the %s schema"
    ),
    "FIELD_NUMERIC_LABEL_CHANGED": (
        f"The label for a NUMERIC field at path '{{path}}' {_IN} does not match its label in the %s schema"
    ),
    "REQUIRED_FIELD_ADDED": f"A required field  at path '{{path}}' {_IN} is missing in the %s schema",
    "REQUIRED_FIELD_REMOVED": f"The %s schema is missing a required field at path: '{{path}}' {_IN}",
    "ONEOF_FIELD_REMOVED": f"The %s schema is missing a oneof field at path '{{path}}' {_IN}",
    "ONEOF_FIELD_MOVED_TO_TOP_LEVEL": (
        f"The oneof field at path '{{path}}' {_IN} was moved out of its oneof to a top-level field "
        "in the %s schema"
    ),
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": (
        f"Multiple fields in the oneof at path '{{path}}' {_IN} are outside a oneof in the %s schema"
    ),
    "FIELD_MOVED_TO_EXISTING_ONEOF": (
        f"A field in the oneof at path '{{path}}' {_IN} is outside an existing oneof in the %s schema"
    ),
}

# Protobuf's wire-compatible groups of scalars (Confluent's ScalarKind); an enum is a GENERAL_NUMBER.
_SCALAR_KINDS = {
    **dict.fromkeys(("int32", "int64", "uint32", "uint64", "bool"), "GENERAL_NUMBER"),
    **dict.fromkeys(("sint32", "sint64"), "SIGNED_NUMBER"),
    **dict.fromkeys(("string", "bytes"), "STRING_OR_BYTES"),
    **dict.fromkeys(("fixed32", "sfixed32"), "FIXED32"),
    **dict.fromkeys(("fixed64", "sfixed64"), "FIXED64"),
    "float": "FLOAT",
    "double": "DOUBLE",
}
_NUMERIC_KINDS = frozenset({"GENERAL_NUMBER", "SIGNED_NUMBER", "FIXED32", "FIXED64", "FLOAT", "DOUBLE"})


@dataclass(frozen=True, slots=True)
class Difference:
    type: str
    path: str

    def message(self) -> str:
        """As Confluent's ``Difference.toString`` words it (the %s are left as Confluent leaves them)."""
        description = _DESCRIPTIONS.get(self.type, "").replace("{path}", self.path)
        return '{errorType:"' + self.type + '", description:"' + description + '"}'


class _Context:
    def __init__(self, original: Names, update: Names) -> None:
        self.tables = {True: original, False: update}
        self.packages = {True: original.package, False: update.package}
        self.path: list[str] = []
        self.scope: list[str] = []
        self.schemas: set[int] = set()  # messages being compared (a recursion guard, by identity)
        self.differences: list[Difference] = []

    def sub(self, original_package: str, update_package: str, local_name: str) -> _Context:
        context = _Context(self.tables[True], self.tables[False])
        context.packages = {True: original_package, False: update_package}
        context.schemas = set(self.schemas)
        context.path = local_name.split(".")
        context.scope = local_name.split(".")
        return context

    def add(self, kind: str) -> None:
        self.differences.append(Difference(kind, "#/" + "/".join(self.path)))

    @contextmanager
    def at(self, path: str, named: bool = False) -> Iterator[None]:
        self.path.append(path)
        if named:
            self.scope.append(path)
        try:
            yield
        finally:
            self.path.pop()
            if named:
                self.scope.pop()

    @contextmanager
    def at_field(self, tag: int, oneof: str | None) -> Iterator[None]:
        """At a field's tag, inside its oneof when it is in one."""
        with self.at(oneof) if oneof is not None else nullcontext(), self.at(str(tag)):
            yield

    def resolve(self, name: str, original: bool) -> str | None:
        types = self.tables[original].types
        if not types:
            return None
        return resolve_in(types, self.packages[original], self.scope, name)

    def type(self, name: str, original: bool) -> TypeInfo | None:
        full = self.resolve(name, original)
        return self.tables[original].types.get(full) if full is not None else None

    def compatible(self) -> bool:
        return all(d.type in COMPATIBLE_CHANGES for d in self.differences)


def compare(
    original: ProtoFile, update: ProtoFile, original_names: Names, update_names: Names
) -> list[Difference]:
    """Every difference Confluent's ``SchemaDiff.compare(original, update)`` finds."""
    context = _Context(original_names, update_names)
    if original.package != update.package:
        context.add("PACKAGE_CHANGED")
    _compare_types(context, original.types, update.types)
    return context.differences


def _index(types: list[Message | Enum]) -> tuple[dict[str, Message], dict[str, int], dict[str, Enum]]:
    messages = {t.name: t for t in types if isinstance(t, Message)}
    indexes = {t.name: i for i, t in enumerate(t for t in types if isinstance(t, Message))}
    enums = {t.name: t for t in types if isinstance(t, Enum)}
    return messages, indexes, enums


def _compare_types(context: _Context, original: list[Message | Enum], update: list[Message | Enum]) -> None:
    original_messages, original_indexes, original_enums = _index(original)
    update_messages, update_indexes, update_enums = _index(update)
    # names in the order Confluent's HashSet of them iterates (its differences come in that order)
    for name in union_order(map_order(list(original_messages)), map_order(list(update_messages))):
        with context.at(name, named=True):
            before, after = original_messages.get(name), update_messages.get(name)
            if after is None:
                info = context.type(name, True)
                if info is not None and not info.is_map:
                    context.add("MESSAGE_REMOVED")
            elif before is None:
                info = context.type(name, False)
                if info is not None and not info.is_map:
                    context.add("MESSAGE_ADDED")
            else:
                _compare_messages(context, before, after)
                if original_indexes.get(name) != update_indexes.get(name):
                    context.add("MESSAGE_MOVED")
    for name in union_order(map_order(list(original_enums)), map_order(list(update_enums))):
        with context.at(name, named=True):
            before_enum, after_enum = original_enums.get(name), update_enums.get(name)
            if after_enum is None:
                context.add("ENUM_REMOVED")
            elif before_enum is None:
                context.add("ENUM_ADDED")
            else:
                _compare_enums(context, before_enum, after_enum)


def _compare_enums(context: _Context, original: Enum, update: Enum) -> None:
    before = {c.tag: c for c in original.constants}
    after = {c.tag: c for c in update.constants}
    for tag in union_order(map_order(list(before)), map_order(list(after))):
        with context.at(str(tag)):
            if tag not in after:
                context.add("ENUM_CONST_REMOVED")
            elif tag not in before:
                context.add("ENUM_CONST_ADDED")
            elif before[tag].name != after[tag].name:
                context.add("ENUM_CONST_CHANGED")


def _fields(message: Message) -> tuple[dict[int, Field], dict[int, str], dict[str, list[Field]]]:
    by_tag = {f.tag: f for f in message.fields}
    oneof_of: dict[int, str] = {}
    oneofs: dict[str, list[Field]] = {}
    for oneof in message.oneofs:
        oneofs[oneof.name] = oneof.fields
        for f in oneof.fields:
            by_tag[f.tag] = f
            oneof_of[f.tag] = oneof.name
    return by_tag, oneof_of, oneofs


def _compare_messages(context: _Context, original: Message, update: Message) -> None:
    if id(original) not in context.schemas:
        context.schemas.add(id(original))
        try:
            _compare_message_fields(context, original, update)
        finally:
            context.schemas.discard(id(original))
    _compare_types(context, original.nested, update.nested)


def _compare_message_fields(context: _Context, original: Message, update: Message) -> None:
    before, before_oneof, before_oneofs = _fields(original)
    after, after_oneof, after_oneofs = _fields(update)
    deleted_oneofs = {
        name
        for name, members in before_oneofs.items()
        if name not in after_oneofs and not any(f.tag in after for f in members)
    }
    for oneof in update.oneofs:
        with context.at(oneof.name):
            groups, moved_in = set(), 0
            for f in oneof.fields:
                if f.tag in before_oneof:
                    groups.add("oneof:" + before_oneof[f.tag])
                elif f.tag in before:
                    groups.add(f"field:{f.tag}")
                    moved_in += 1
            if len(groups) > 1:
                context.add(
                    "MULTIPLE_FIELDS_MOVED_TO_ONEOF" if moved_in > 1 else "FIELD_MOVED_TO_EXISTING_ONEOF"
                )
    for name in sorted({**before_oneofs, **after_oneofs}):
        with context.at(name):
            if name not in after_oneofs:
                context.add("ONEOF_REMOVED")
            elif name not in before_oneofs:
                context.add("ONEOF_ADDED")
    for tag in sorted({**before, **after}):
        old, new = before.get(tag), after.get(tag)
        old_oneof, new_oneof = before_oneof.get(tag), after_oneof.get(tag)
        if new is None and old is not None:
            if old_oneof is None or old_oneof not in deleted_oneofs:
                _only_one_has(context, tag, old, old_oneof, _REMOVED)
        elif old is None and new is not None:
            _only_one_has(context, tag, new, new_oneof, _ADDED)
        elif old is not None and new is not None:
            if old_oneof is not None and new_oneof is None:
                with context.at(str(tag)):
                    context.add("ONEOF_FIELD_MOVED_TO_TOP_LEVEL")
            with context.at_field(tag, new_oneof):
                _compare_fields(context, old, new)


# a field only the original has, or only the update: its change in a oneof, of a required field, of another
_REMOVED = ("ONEOF_FIELD_REMOVED", "REQUIRED_FIELD_REMOVED", "FIELD_REMOVED")
_ADDED = ("ONEOF_FIELD_ADDED", "REQUIRED_FIELD_ADDED", "FIELD_ADDED")


def _only_one_has(
    context: _Context, tag: int, field: Field, oneof: str | None, changes: tuple[str, str, str]
) -> None:
    in_oneof, required, other = changes
    with context.at_field(tag, oneof):
        context.add(in_oneof if oneof is not None else required if field.label == "required" else other)


def _compare_fields(context: _Context, original: Field, update: Field) -> None:
    if original.name != update.name:
        context.add("FIELD_NAME_CHANGED")
    _compare_labels_and_types(context, original.label, update.label, original.type, update.type)


def _kind(context: _Context, type_name: str, original: bool) -> str:
    if type_name in SCALAR_NAMES:
        return "SCALAR"
    if type_name.startswith("map<"):
        return "MAP"
    info = context.type(type_name, original)
    return "SCALAR" if info is not None and isinstance(info.type, Enum) else "MESSAGE"


def _compare_labels_and_types(
    context: _Context,
    original_label: str | None,
    update_label: str | None,
    original_type: str,
    update_type: str,
) -> None:
    info = context.type(original_type, True)
    if info is not None and info.is_map:
        original_type = info.map_type() or original_type
    info = context.type(update_type, False)
    if info is not None and info.is_map:
        update_type = info.map_type() or update_type
    original_kind, update_kind = _kind(context, original_type, True), _kind(context, update_type, False)
    if original_kind != update_kind:
        context.add("FIELD_KIND_CHANGED")
    elif original_kind == "SCALAR":
        labelled = original_label is not None and update_label is not None
        _compare_scalars(context, original_type, update_type, labelled and original_label != update_label)
    elif original_kind == "MESSAGE":
        _compare_message_types(context, original_type, update_type)
    elif original_kind == "MAP":
        original_key, original_value = _map_parts(original_type)
        update_key, update_value = _map_parts(update_type)
        _compare_labels_and_types(context, None, None, original_key, update_key)
        _compare_labels_and_types(context, None, None, original_value, update_value)


def _map_parts(map_type: str) -> tuple[str, str]:
    key, value = map_type[4:-1].split(",", 1)
    return key.strip(), value.strip()


def _scalar_kind(context: _Context, type_name: str, original: bool) -> str:
    info = context.type(type_name, original)
    if info is not None and isinstance(info.type, Enum):
        return "GENERAL_NUMBER"
    if type_name not in _SCALAR_KINDS:
        raise ValueError(f"Unknown type {type_name}")
    return _SCALAR_KINDS[type_name]


def _compare_scalars(context: _Context, original_type: str, update_type: str, label_changed: bool) -> None:
    original_kind = _scalar_kind(context, original_type, True)
    update_kind = _scalar_kind(context, update_type, False)
    if original_kind != update_kind:
        context.add("FIELD_SCALAR_KIND_CHANGED")
    elif label_changed:
        if original_kind in _NUMERIC_KINDS:
            context.add("FIELD_NUMERIC_LABEL_CHANGED")
        elif original_kind == "STRING_OR_BYTES":
            context.add("FIELD_STRING_OR_BYTES_LABEL_CHANGED")


def _compare_message_types(context: _Context, original: str, update: str) -> None:
    original_full, update_full = context.resolve(original, True), context.resolve(update, False)
    if original_full is None or update_full is None:
        if original != update:
            context.add("FIELD_NAMED_TYPE_CHANGED")
        return
    original_info = context.tables[True].types[original_full]
    update_info = context.tables[False].types[update_full]
    original_local = _local(original_full, original_info.package)
    update_local = _local(update_full, update_info.package)
    if original_local != update_local:
        context.add("FIELD_NAMED_TYPE_CHANGED")
        return
    # Confluent does not compare two types of the schema's own file (the walk of the file compares
    # them) nor two of one referenced subject and version; a reference is known here by its import
    # path and text, so two imported types of one path are compared unless they are the same.
    if original_info.reference == update_info.reference and (
        original_info.reference == "" or original_info.type == update_info.type
    ):
        return
    if not isinstance(original_info.type, Message) or not isinstance(update_info.type, Message):
        return
    sub = context.sub(original_info.package, update_info.package, original_local)
    _compare_messages(sub, original_info.type, update_info.type)
    context.differences.extend(sub.differences)
    if not sub.compatible():
        context.add("FIELD_NAMED_TYPE_CHANGED")


def _local(full_name: str, package: str) -> str:
    return full_name[len(package) + 1 :] if package and full_name.startswith(package + ".") else full_name
