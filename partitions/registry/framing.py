"""Confluent's wire format of a record's key or value (pure): what every serializer of Confluent's clients
writes and its deserializers read, and what the HTTP door's schema formats produce and consume.

A framed key or value is the magic byte 0, the schema's id as 4 bytes big-endian, then for a Protobuf schema
the indexes of the message in the schema (Confluent's ``MessageIndexes``: a zigzag varint count, then each
index as a zigzag varint; the first message, ``[0]``, is the single byte 0), then the payload the schema
encodes. ``frame`` writes it, ``unframe`` reads the header and ``message_indexes`` the Protobuf indexes after
it; ``NotFramed`` says why bytes are not in this format. The broker's record check reads the same header.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

MAGIC = 0
HEADER_BYTES = 5  # the magic byte and the schema id
SCHEMA_ID_MAX = 2**31 - 1
_ID = struct.Struct(">I")
_VARINT_BYTES_MAX = 5  # a 32-bit zigzag varint
_INDEX_MAX = 2**31 - 1


class NotFramed(ValueError):
    """The bytes are not a key or value in Confluent's wire format (Confluent's deserializers: "Unknown
    magic byte!", or indexes that do not read); the message says what."""


@dataclass(frozen=True, slots=True)
class Framed:
    """A framed key or value's schema id and what follows its header (the payload, after the message
    indexes for a Protobuf schema)."""

    schema_id: int
    body: memoryview


def frame(schema_id: int, payload: bytes, message_indexes: Sequence[int] | None = None) -> bytes:
    """The framed bytes of ``payload``; ``message_indexes`` for a Protobuf schema (``()`` or ``[0]``: its
    first message), None for the others."""
    if not 0 <= schema_id <= SCHEMA_ID_MAX:
        raise ValueError(f"schema id {schema_id} is outside [0, {SCHEMA_ID_MAX}]")
    header = bytes((MAGIC,)) + _ID.pack(schema_id)
    if message_indexes is None:
        return header + payload
    return header + _indexes_bytes(message_indexes) + payload


def _indexes_bytes(message_indexes: Sequence[int]) -> bytes:
    indexes = list(message_indexes)
    if indexes in ([], [0]):
        return b"\x00"  # Confluent's shortcut for the first message
    out = bytearray(_varint(len(indexes)))
    for index in indexes:
        if not 0 <= index <= _INDEX_MAX:
            raise ValueError(f"message index {index} is outside [0, {_INDEX_MAX}]")
        out += _varint(index)
    return bytes(out)


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 31)
    out = bytearray()
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def unframe(data: bytes | memoryview) -> Framed:
    """The schema id of a framed key or value and what follows the header; ``NotFramed`` when the bytes
    are shorter than a header or do not start with the magic byte."""
    view = memoryview(data)
    if len(view) < HEADER_BYTES:
        raise NotFramed(f"{len(view)} bytes: shorter than the {HEADER_BYTES}-byte header of a framed record")
    if view[0] != MAGIC:
        raise NotFramed(f"Unknown magic byte! (the first byte is {view[0]}, not {MAGIC})")
    (schema_id,) = _ID.unpack_from(view, 1)
    if schema_id > SCHEMA_ID_MAX:
        raise NotFramed(f"schema id {schema_id} is outside [0, {SCHEMA_ID_MAX}]")
    return Framed(schema_id, view[HEADER_BYTES:])


def message_indexes(body: bytes | memoryview) -> tuple[tuple[int, ...], memoryview]:
    """The Protobuf message indexes at the start of a framed record's body (``()``: the first message)
    and the payload after them; ``NotFramed`` when they do not read."""
    view = memoryview(body)
    count, position = _read_varint(view, 0)
    if count == 0:
        return (), view[position:]
    if not 0 < count <= len(view) - position:  # each index takes a byte at least
        raise NotFramed(f"{count} message indexes announced in {len(view) - position} bytes")
    indexes = []
    for _ in range(count):
        index, position = _read_varint(view, position)
        if index < 0:
            raise NotFramed(f"negative message index {index}")
        indexes.append(index)
    return tuple(indexes), view[position:]


def _read_varint(view: memoryview, position: int) -> tuple[int, int]:
    zigzag, shift = 0, 0
    for i in range(_VARINT_BYTES_MAX):
        if position + i >= len(view):
            raise NotFramed("message indexes cut short")
        byte = view[position + i]
        zigzag |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (zigzag >> 1) ^ -(zigzag & 1), position + i + 1
        shift += 7
    raise NotFramed("a message index longer than a 32-bit varint")
