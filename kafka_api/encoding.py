"""Kafka answers encoded by a function made once per message class from its kio schema: the same bytes as
kio's ``entity_writer`` (``tests/kafka_api/test_encoding.py`` holds every answer class the door serves to
it), at a fraction of the interpreter's work. kio's writer calls a function and a ``write`` per field and
opens a ``BytesIO`` per flexible entity for its tagged fields; the function made here packs each run of
fixed-width fields with one ``struct``, appends to one ``bytearray`` and, for an entity without tagged
fields set, appends their count (0) as a constant. Tagged fields that are set (rare in answers) are
written by kio's own field writers. A ``bytes`` value of at least ``BY_REFERENCE_BYTES`` (a fetch's
records) is not copied: the frame is returned as parts, that value one of its own, for one vectored
write.

The source of each function is Python made from the schema's fields (``_Source``) and compiled once per
class, as Kafka compiles its message classes from the same JSON schemas; nothing of it comes from a
request. It reads a class's fields as kio's writer does, through ``kio.serial``'s own introspection
(private modules of the pinned kio 0.6.5: a kio that changed them fails the test above, not a client)."""

from __future__ import annotations

import dataclasses
import io
import struct
from collections.abc import Callable
from typing import Any

from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.serial._serialize import get_field_writer
from kio.serial.writers import write_tagged_field
from kio.static.constants import uuid_zero
from kio.static.primitive import uvarint

from kafka_api.wire import SIZE

BY_REFERENCE_BYTES = 16 * 1024  # a bytes value this large (a fetch's records) joins a frame uncopied

Writer = Callable[[bytearray, list[tuple[int, Any]], Any], None]

# fixed-width kinds: struct code, and how a value becomes what struct packs ({} is the value's expression)
_FIXED = {
    "int8": ("b", "{}"),
    "int16": ("h", "{}"),
    "int32": ("i", "{}"),
    "int64": ("q", "{}"),
    "uint8": ("B", "{}"),
    "uint16": ("H", "{}"),
    "uint32": ("I", "{}"),
    "uint64": ("Q", "{}"),
    "float64": ("d", "{}"),
    "bool": ("?", "{}"),
    "error_code": ("h", "{}.value"),
    "timedelta_i32": ("i", "round({}.total_seconds() * 1000)"),
    "timedelta_i64": ("q", "round({}.total_seconds() * 1000)"),
    "datetime_i64": ("q", "round({}.timestamp() * 1000)"),
}


def _uvarint(buf: bytearray, value: int) -> None:
    while value > 0x7F:
        buf.append(0x80 | (value & 0x7F))
        value >>= 7
    buf.append(value)


def _blob(buf: bytearray, refs: list[tuple[int, Any]], value: Any) -> None:
    """A string's or bytes' content (its length already written): a large immutable one by reference."""
    if len(value) >= BY_REFERENCE_BYTES and (
        type(value) is bytes or (type(value) is memoryview and type(value.obj) is bytes)
    ):
        refs.append((len(buf), value))
    else:
        buf += value


_WRITERS: dict[tuple[type, bool], Writer] = {}


def writer(cls: type, nullable: bool = False) -> Writer:
    """The function that appends an entity of ``cls`` (None too, if ``nullable``), made on first use."""
    made = _WRITERS.get((cls, nullable))
    if made is None:
        made = _WRITERS[(cls, nullable)] = _Source(cls, nullable).compile()
    return made


def encode(correlation_id: int, response: Any) -> list[bytes | bytearray | memoryview]:
    """A response frame, size prefix included, as the parts to write in order: a fetch's records are
    parts of their own, not copied into the frame."""
    header_class = response.__header_schema__
    buf, refs = bytearray(SIZE.size), []  # type: tuple[bytearray, list[tuple[int, Any]]]
    writer(header_class)(buf, refs, header_class(correlation_id=correlation_id))
    writer(type(response))(buf, refs, response)
    size = len(buf) - SIZE.size + sum(memoryview(value).nbytes for _, value in refs)
    SIZE.pack_into(buf, 0, size)
    if not refs:
        return [buf]
    whole = memoryview(buf)
    parts: list[bytes | bytearray | memoryview] = []
    start = 0
    for at, value in refs:
        if at > start:
            parts.append(whole[start:at])
        parts.append(value)
        start = at
    if start < len(buf):
        parts.append(whole[start:])
    return parts


class _Source:
    """The Python source of one class's writer, a line at a time, with the names it refers to."""

    def __init__(self, cls: type, nullable: bool) -> None:
        self.cls, self.nullable = cls, nullable
        self.lines: list[str] = []
        self.names: dict[str, Any] = {"_uvarint": _uvarint, "_blob": _blob, "_uuid_zero": uuid_zero}
        self._fixed: list[tuple[str, str]] = []  # the run of fixed-width fields not packed yet ...
        self._fixed_depth = 1  # ... and the depth of its lines
        self._count = 0

    def _name(self, value: Any) -> str:
        self._count += 1
        name = f"_n{self._count}"
        self.names[name] = value
        return name

    def _line(self, text: str, depth: int = 1) -> None:
        self._flush()
        self.lines.append("    " * depth + text)

    def _pack(self, code: str, expression: str, depth: int) -> None:
        """A fixed-width field, packed with the fields next to it at the same depth."""
        if self._fixed and self._fixed_depth != depth:
            self._flush()
        self._fixed.append((code, expression))
        self._fixed_depth = depth

    def _flush(self) -> None:
        if self._fixed:
            packer = self._name(struct.Struct(">" + "".join(code for code, _ in self._fixed)))
            values = ", ".join(expression for _, expression in self._fixed)
            self._fixed = []
            self.lines.append("    " * self._fixed_depth + f"buf += {packer}.pack({values})")

    def compile(self) -> Writer:
        cls = self.cls
        flexible = cls.__flexible__  # type: ignore[attr-defined]
        if self.nullable:  # KIP-893: a marker byte, -1 for null
            self.lines.append("    if e is None:")
            self.lines.append("        buf.append(0xFF)")
            self.lines.append("        return")
            self.lines.append("    buf.append(1)")
        tagged: list[tuple[uvarint, dataclasses.Field[Any]]] = []
        for field in dataclasses.fields(cls):
            tag = get_field_tag(field)
            if tag is not None:
                tagged.append((tag, field))
                continue
            self._field(field, flexible)
        if flexible:
            if tagged:
                self._line(f"{self._name(_tagged_writer(cls, sorted(tagged, key=lambda t: t[0])))}(buf, e)")
            else:
                self._line("buf.append(0)")  # no tagged fields
        self._flush()
        body = "\n".join(self.lines) or "    pass"
        source = f"def write(buf, refs, e):\n{body}\n"
        scope: dict[str, Any] = dict(self.names)
        exec(compile(source, f"<kafka_api.encoding {cls.__module__}.{cls.__qualname__}>", "exec"), scope)
        made: Writer = scope["write"]
        return made

    def _field(self, field: dataclasses.Field[Any], flexible: bool) -> None:
        kind = classify_field(field)
        optional = is_optional(field)
        value = f"e.{field.name}"
        if isinstance(kind, PrimitiveField):
            self._primitive(get_schema_field_type(field), flexible, optional, value, 1)
            return
        if isinstance(kind, EntityField):
            self._line(f"{self._name(writer(kind.type_, nullable=optional))}(buf, refs, {value})")
            return
        # an array: of entities or of primitives, its length first (null: -1, compact: length + 1)
        self._line(f"items = {value}")
        self._line("if items is None:")
        self._line("buf.append(0)" if flexible else "buf += b'\\xff\\xff\\xff\\xff'", 2)
        self._line("else:")
        if flexible:
            self._line("_uvarint(buf, len(items) + 1)", 2)
        else:
            self._line(f"buf += {self._name(SIZE)}.pack(len(items))", 2)
        self._line("for item in items:", 2)
        if isinstance(kind, EntityTupleField):
            self._line(f"{self._name(writer(kind.type_))}(buf, refs, item)", 3)
        else:
            assert isinstance(kind, PrimitiveTupleField)
            self._primitive(get_schema_field_type(field), flexible, False, "item", 3)
        self._flush()

    def _primitive(self, kafka_type: str, flexible: bool, optional: bool, value: str, depth: int) -> None:
        fixed = _FIXED.get(kafka_type)
        if fixed is not None and not (optional and kafka_type == "datetime_i64"):
            code, expression = fixed
            self._pack(code, expression.format(value), depth)
            return
        if kafka_type == "datetime_i64":  # nullable: -1
            self._line(f"v = {value}", depth)
            packer = self._name(struct.Struct(">q"))
            self._line(f"buf += {packer}.pack(-1 if v is None else round(v.timestamp() * 1000))", depth)
            return
        if kafka_type == "uuid":
            self._line(f"v = {value}", depth)
            self._line("buf += (_uuid_zero if v is None else v).bytes", depth)
            return
        if kafka_type not in ("string", "bytes", "records"):
            raise NotImplementedError(f"no writer for Kafka type {kafka_type!r}")
        self._line(f"v = {value}", depth)
        if kafka_type == "string":
            self._line("if v.__class__ is str:", depth)
            self._line("v = v.encode()", depth + 1)
        elif not optional:
            self._line("if v is None:", depth)
            self._line("raise TypeError('Unexpectedly received None value')", depth + 1)
        if optional:
            self._line("if v is None:", depth)
            null = (
                "buf.append(0)"
                if flexible
                else ("buf += b'\\xff\\xff'" if kafka_type == "string" else "buf += b'\\xff\\xff\\xff\\xff'")
            )
            self._line(null, depth + 1)
            self._line("else:", depth)
            depth += 1
        if flexible:
            self._line("_uvarint(buf, len(v) + 1)", depth)
        else:
            size = struct.Struct(">h" if kafka_type == "string" else ">i")
            self._line(f"buf += {self._name(size)}.pack(len(v))", depth)
        self._line("_blob(buf, refs, v)", depth)


def _tagged_writer(
    cls: type, tagged: list[tuple[uvarint, dataclasses.Field[Any]]]
) -> Callable[[bytearray, Any], None]:
    """The tagged fields of ``cls`` as kio writes them: those with a value other than the default, in
    tag order, after their count."""
    writers = [
        (
            tag,
            field.name,
            field.default,
            get_tagged_field_default(field),
            get_field_writer(field, flexible=True, is_request_header=False, is_tag=True),
        )
        for tag, field in tagged
    ]

    def write_tagged(buf: bytearray, entity: Any) -> None:
        tags: io.BytesIO | None = None  # made only when a tag is set: most answers set none
        count = 0
        for tag, name, default, implicit, field_writer in writers:
            value = getattr(entity, name)
            if value == default or (default is dataclasses.MISSING and value == implicit):
                continue
            tags = tags or io.BytesIO()
            write_tagged_field(buffer=tags, tag=tag, writer=field_writer, value=value)
            count += 1
        _uvarint(buf, count)
        if tags is not None:
            buf += tags.getvalue()

    return write_tagged
