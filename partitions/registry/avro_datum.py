"""A record between Avro's binary encoding and Avro's JSON encoding, as Confluent's REST Proxy v2 answers
and takes Avro values: a union's value as ``{"branch": value}`` (the branch's full name for a named type,
its type's name otherwise; ``null`` bare), bytes and fixed as strings of the characters U+0000..U+00FF
(ISO-8859-1, as Avro's ``JsonEncoder``), a float as its shortest single-precision digits, NaN and the
infinities as the strings Jackson writes. Pure.

Encoding is fastavro's (its C writer), given a copy of the schema in which every named type has a
synthetic name and every non-null union branch is wrapped in a one-field record: a record adds no bytes,
so the encoding is the same, and the value's branch is chosen by that record's name (``["int", "long"]``
needs it). Decoding is ``_Reader``'s, here, because fastavro's reader does not do what a broker checking
payloads needs: it takes a negative union or enum index as Python's ``list[-1]`` (a corrupt payload
read as data), cannot say which branch of ``["int", "long"]`` it read, and has no bound on an array of
values of no bytes (``null``, a record without fields, ``fixed`` of size 0: a block count alone could make
it build billions; ``_Reader`` counts them against ``ZERO_BYTE_VALUES_MAX``, as Avro's Java reader bounds
them since AVRO-4241). Nor is it slower: a record read to JSON here costs less than fastavro's reading of
it followed by the conversion to JSON.
"""

from __future__ import annotations

import io
import math
import struct
from typing import Any

import fastavro

from partitions.registry.avro_json import float32_value, single_precision
from partitions.registry.avro_model import INT_RANGE, LONG_RANGE, Node
from partitions.registry.schema_types import InvalidRecord

ZERO_BYTE_VALUES_MAX = 1_000_000  # values of no bytes in one record's collections
_SPECIAL = {math.inf: "Infinity", -math.inf: "-Infinity"}


def branch_label(branch: Node) -> str:
    return branch.full_name


def _json_float(value: float, single: bool) -> Any:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return _SPECIAL[value]
    return float32_value(value) if single else value


def _zero_bytes(node: Node, seen: set[int]) -> bool:
    """Whether a value of ``node`` may be encoded in no bytes."""
    if node.type == "null" or (node.type == "fixed" and node.size == 0):
        return True
    if node.type != "record" or id(node) in seen:
        return False
    seen.add(id(node))
    return all(_zero_bytes(member.schema, seen) for member in node.fields)


class Codec:
    """Decode and encode records of one schema (fastavro's copy of it made on the first encoding: a
    broker only decoding never needs it)."""

    def __init__(self, root: Node) -> None:
        self.root = root
        self.names: dict[int, str] = {}  # a named type's id -> its synthetic name
        self.wrappers: dict[str, Node] = {}  # a wrapper record's name -> the union branch it holds
        self.wrapper_of: dict[tuple[int, int], str] = {}  # (union id, branch index) -> wrapper name
        self._fastavro_schema: Any = None

    @property
    def fastavro_schema(self) -> Any:
        if self._fastavro_schema is None:
            self._fastavro_schema = fastavro.parse_schema(self._fastavro(self.root), _write_hint=False)
        return self._fastavro_schema

    def _fastavro(self, node: Node) -> Any:
        kind = node.type
        if node.name is not None:
            if id(node) in self.names:
                return self.names[id(node)]
            name = self.names[id(node)] = f"raftlog.n{len(self.names)}"
            if kind == "enum":
                return {"type": "enum", "name": name, "symbols": list(node.symbols)}
            if kind == "fixed":
                return {"type": "fixed", "name": name, "size": node.size}
            fields = [{"name": f.name, "type": self._fastavro(f.schema)} for f in node.fields]
            return {"type": "record", "name": name, "fields": fields}
        if kind == "array":
            assert node.items is not None
            return {"type": "array", "items": self._fastavro(node.items)}
        if kind == "map":
            assert node.values is not None
            return {"type": "map", "values": self._fastavro(node.values)}
        if kind == "union":
            branches: list[Any] = []
            for index, branch in enumerate(node.types):
                if branch.type == "null":
                    branches.append("null")
                    continue
                wrapper = f"raftlog.u{len(self.wrappers)}"
                self.wrappers[wrapper] = branch
                self.wrapper_of[(id(node), index)] = wrapper
                value = self._fastavro(branch)
                branches.append({"type": "record", "name": wrapper, "fields": [{"name": "v", "type": value}]})
            return branches
        return kind

    # -- decoding ----------------------------------------------------------------------------------

    def decode(self, payload: bytes) -> Any:
        """The JSON value of one record's payload; the whole payload must be that record."""
        reader = _Reader(payload)
        try:
            value = reader.read(self.root)
        except RecursionError:
            raise InvalidRecord(f"a record nested too deeply (at byte {reader.position})") from None
        if reader.position != len(payload):
            raise InvalidRecord(
                f"{len(payload) - reader.position} bytes after the record's {reader.position}"
            )
        return value

    def encode(self, value: Any) -> bytes:
        """The binary encoding of a record's JSON value (``InvalidRecord`` naming where it is wrong)."""
        try:
            writer_schema = self.fastavro_schema
            datum = self._datum(self.root, value, "$")
        except RecursionError:
            raise InvalidRecord("a value nested too deeply") from None
        stream = io.BytesIO()
        try:
            fastavro.schemaless_writer(stream, writer_schema, datum)
        except RecursionError:
            raise InvalidRecord("a value nested too deeply") from None
        return stream.getvalue()

    def _datum(self, node: Node, value: Any, path: str) -> Any:
        kind = node.type
        if kind == "union":
            if value is None:
                if any(branch.type == "null" for branch in node.types):
                    return None
                raise InvalidRecord(f"{path}: null is not a branch of the union")
            if not isinstance(value, dict) or len(value) != 1:
                raise InvalidRecord(f'{path}: a union\'s value is null or {{"branch": value}}')
            label, inner = next(iter(value.items()))
            for index, branch in enumerate(node.types):
                if branch.type != "null" and branch_label(branch) == label:
                    wrapper = self.wrapper_of[(id(node), index)]
                    return (wrapper, {"v": self._datum(branch, inner, f"{path}.{label}")})
            raise InvalidRecord(f"{path}: {label!r} is not a branch of the union")
        if kind == "record":
            if not isinstance(value, dict):
                raise InvalidRecord(f"{path}: a record is a JSON object")
            unknown = set(value) - {f.name for f in node.fields}
            if unknown:
                raise InvalidRecord(f"{path}: no field {sorted(unknown)[0]!r} in {node.full_name}")
            datum = {}
            for member in node.fields:
                if member.name not in value:
                    raise InvalidRecord(f"{path}: missing field {member.name!r}")
                datum[member.name] = self._datum(member.schema, value[member.name], f"{path}.{member.name}")
            return datum
        if kind == "array":
            assert node.items is not None
            if not isinstance(value, list):
                raise InvalidRecord(f"{path}: an array is a JSON array")
            return [self._datum(node.items, item, f"{path}[{i}]") for i, item in enumerate(value)]
        if kind == "map":
            assert node.values is not None
            if not isinstance(value, dict):
                raise InvalidRecord(f"{path}: a map is a JSON object")
            return {key: self._datum(node.values, item, f"{path}.{key}") for key, item in value.items()}
        return _primitive(node, value, path)


def _primitive(node: Node, value: Any, path: str) -> Any:
    kind = node.type
    is_integer = isinstance(value, int) and not isinstance(value, bool)
    if kind == "null" and value is None:
        return None
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind in ("int", "long") and is_integer:
        low, high = INT_RANGE if kind == "int" else LONG_RANGE
        if low <= value <= high:
            return value
        raise InvalidRecord(f"{path}: {value} is out of an {kind}'s range")
    if kind in ("float", "double"):
        special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
        if isinstance(value, str) and value in special:
            return special[value]
        if is_integer or isinstance(value, float):
            try:
                number = float(value)
            except OverflowError:
                raise InvalidRecord(f"{path}: {value} is out of a {kind}'s range") from None
            # a float is the value cast to single precision, as Avro's JsonDecoder reads it (1e300: Infinity)
            return single_precision(number) if kind == "float" else number
    if kind == "string" and isinstance(value, str):
        return value
    if kind == "enum" and isinstance(value, str):
        if value in node.symbols:
            return value
        raise InvalidRecord(f"{path}: {value!r} is not a symbol of {node.full_name}")
    if kind in ("bytes", "fixed") and isinstance(value, str):
        try:
            raw = value.encode("latin-1")
        except UnicodeEncodeError:
            raise InvalidRecord(f"{path}: bytes are characters U+0000..U+00FF") from None
        if kind == "fixed" and len(raw) != node.size:
            raise InvalidRecord(f"{path}: {len(raw)} bytes for a fixed of {node.size}")
        return raw
    raise InvalidRecord(f"{path}: {_describe(value)} is not a {kind}")


def _describe(value: Any) -> str:
    return "null" if value is None else type(value).__name__


class _Reader:
    """Avro's binary decoding of one value, bounded by the payload (a block of N values needs N bytes
    unless they take none, which are counted)."""

    def __init__(self, payload: bytes) -> None:
        self.payload = payload
        self.position = 0
        self.zero_byte_values = 0

    def _take(self, count: int) -> bytes:
        end = self.position + count
        if count < 0 or end > len(self.payload):
            raise InvalidRecord(f"the record ends early (at byte {self.position}, {count} more wanted)")
        chunk = self.payload[self.position : end]
        self.position = end
        return chunk

    def _long(self) -> int:
        shift = result = 0
        while True:
            byte = self._take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7
            if shift > 63:
                raise InvalidRecord(f"a varint longer than 10 bytes at byte {self.position}")

    def _count(self, zero_byte: bool) -> int:
        count = self._long()
        if count < 0:
            self._long()  # the block's size in bytes
            count = -count
        if zero_byte:
            self.zero_byte_values += count
            if self.zero_byte_values > ZERO_BYTE_VALUES_MAX:
                raise InvalidRecord(f"more than {ZERO_BYTE_VALUES_MAX} values of no bytes in one record")
        elif count > len(self.payload) - self.position:
            raise InvalidRecord(f"a block of {count} values in {len(self.payload) - self.position} bytes")
        return count

    def read(self, node: Node) -> Any:
        kind = node.type
        if kind == "null":
            return None
        if kind == "boolean":
            byte = self._take(1)[0]
            if byte > 1:
                raise InvalidRecord(f"a boolean of byte {byte}")
            return byte == 1
        if kind in ("int", "long"):
            value = self._long()
            if kind == "int" and not INT_RANGE[0] <= value <= INT_RANGE[1]:
                raise InvalidRecord(f"{value} is out of an int's range")
            return value
        if kind in ("float", "double"):
            (value,) = struct.unpack(
                "<f" if kind == "float" else "<d", self._take(4 if kind == "float" else 8)
            )
            return _json_float(value, kind == "float")
        if kind in ("bytes", "string"):
            raw = self._take(self._long())
            if kind == "bytes":
                return raw.decode("latin-1")
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise InvalidRecord(f"a string that is not UTF-8: {error}") from None
        if kind == "fixed":
            return self._take(node.size).decode("latin-1")
        if kind == "enum":
            index = self._long()
            if not 0 <= index < len(node.symbols):
                raise InvalidRecord(f"enum index {index} of {len(node.symbols)} symbols")
            return node.symbols[index]
        if kind == "record":
            return {f.name: self.read(f.schema) for f in node.fields}
        if kind == "union":
            index = self._long()
            if not 0 <= index < len(node.types):
                raise InvalidRecord(f"union index {index} of {len(node.types)} branches")
            branch = node.types[index]
            return None if branch.type == "null" else {branch_label(branch): self.read(branch)}
        member = node.items if kind == "array" else node.values
        assert member is not None
        zero_byte = _zero_bytes(member, set())
        items: list[Any] = []
        entries: dict[str, Any] = {}
        while count := self._count(zero_byte and kind == "array"):
            for _ in range(count):
                if kind == "array":
                    items.append(self.read(member))
                else:
                    key = self.read(_STRING)
                    entries[key] = self.read(member)
        return items if kind == "array" else entries


_STRING = Node("string")
