"""The bytes Kafka consumers put in a group's member metadata and assignments (protocol type
``consumer``): ``ConsumerProtocolSubscription`` and ``ConsumerProtocolAssignment``, Kafka's non-flexible
encoding. A classic group never needs them to run (the assignor runs in the client); they are read to
show which partitions a Kafka member holds and which topics it subscribes to (OffsetDelete refuses
those), and written to show HTTP members to Kafka's tools. A classic member of a consumer protocol group
(``consumer/classic_members.py``) is run by them: its subscription read whole (``Subscription``), its
assignment written in its subscription's version.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from partitions.groups.assignors import TopicPartition

_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")
PARTITIONS_MAX = 100_000  # a count past this is not an assignment


class NotAnAssignment(ValueError):
    """Bytes that do not decode as a consumer assignment."""


class _Reader:
    """Kafka's non-flexible primitives from the front of ``data``; NotAnAssignment when cut short."""

    def __init__(self, data: bytes) -> None:
        self.view = memoryview(data)
        self.at = _I16.size  # the version: every version starts with the same fields
        if len(self.view) < self.at:
            raise NotAnAssignment("shorter than a version")

    def take(self, codec: struct.Struct) -> int:
        if self.at + codec.size > len(self.view):
            raise NotAnAssignment(f"cut short at byte {self.at}")
        (value,) = codec.unpack_from(self.view, self.at)
        self.at += codec.size
        return int(value)

    def nullable_bytes(self) -> int:
        """Passed over: a length (-1: null) and that many bytes; the length."""
        length = self.take(_I32)
        if length < -1 or self.at + max(length, 0) > len(self.view):
            raise NotAnAssignment(f"bytes of length {length} at byte {self.at}")
        self.at += max(length, 0)
        return length

    def nullable_string(self) -> str | None:
        if self.at + _I16.size <= len(self.view) and _I16.unpack_from(self.view, self.at)[0] == -1:
            self.at += _I16.size
            return None
        return self.string()

    def string(self) -> str:
        length = self.take(_I16)
        if length < 0 or self.at + length > len(self.view):
            raise NotAnAssignment(f"a topic name of {length} bytes at byte {self.at}")
        text = bytes(self.view[self.at : self.at + length]).decode("utf-8", "replace")
        self.at += length
        return text


def decode_subscription(data: bytes) -> tuple[str, ...]:
    """The topics of a ``ConsumerProtocolSubscription`` (any version: v1+ only append fields)."""
    reader = _Reader(data)
    count = reader.take(_I32)
    if not 0 <= count <= PARTITIONS_MAX:
        raise NotAnAssignment(f"{count} topics")
    return tuple(reader.string() for _ in range(count))


ASSIGNMENT_VERSION_MAX = 3  # ConsumerProtocolAssignment's versions: 0-3, every one with the same fields


@dataclass(frozen=True, slots=True)
class Subscription:
    """A ``ConsumerProtocolSubscription`` whole: v1 added the partitions the member owns, v2 its
    generation, v3 its rack."""

    version: int
    topics: tuple[str, ...]
    owned: tuple[TopicPartition, ...] = ()
    rack: str | None = None


def read_subscription(data: bytes) -> Subscription:
    """Every field of a ``ConsumerProtocolSubscription`` this version has (NotAnAssignment when the bytes
    are not one)."""
    reader = _Reader(data)
    (version,) = _I16.unpack_from(reader.view, 0)
    if version < 0:
        raise NotAnAssignment(f"version {version}")
    count = reader.take(_I32)
    if not 0 <= count <= PARTITIONS_MAX:
        raise NotAnAssignment(f"{count} topics")
    topics = tuple(reader.string() for _ in range(count))
    reader.nullable_bytes()  # user data
    owned: list[TopicPartition] = []
    if version >= 1:
        owned_topics = reader.take(_I32)
        if not 0 <= owned_topics <= PARTITIONS_MAX:
            raise NotAnAssignment(f"{owned_topics} owned topics")
        for _ in range(owned_topics):
            topic = reader.string()
            partitions = reader.take(_I32)
            if not 0 <= partitions <= PARTITIONS_MAX - len(owned):
                raise NotAnAssignment(f"{partitions} owned partitions of {topic!r}")
            owned.extend(TopicPartition(topic, reader.take(_I32)) for _ in range(partitions))
    if version >= 2:
        reader.take(_I32)  # the generation it last had
    rack = reader.nullable_string() if version >= 3 else None
    return Subscription(version, topics, tuple(owned), rack)


def decode_assignment(data: bytes) -> tuple[TopicPartition, ...]:
    """The partitions of a ``ConsumerProtocolAssignment`` (any version: v1+ only append fields)."""
    return _partitions(_Reader(data))


def read_assignment(data: bytes) -> tuple[tuple[TopicPartition, ...], bool]:
    """The partitions of a ``ConsumerProtocolAssignment`` and whether it carries user data (a custom
    assignor's: bytes that are neither null nor empty); bytes ending after the partitions carry none."""
    reader = _Reader(data)
    partitions = _partitions(reader)
    user_data = reader.at < len(reader.view) and reader.nullable_bytes() > 0
    return partitions, user_data


def _partitions(reader: _Reader) -> tuple[TopicPartition, ...]:
    take = reader.take
    found: list[TopicPartition] = []
    topics = take(_I32)
    if not 0 <= topics <= PARTITIONS_MAX:
        raise NotAnAssignment(f"{topics} topics")
    for _ in range(topics):
        topic = reader.string()
        count = take(_I32)
        if not 0 <= count <= PARTITIONS_MAX - len(found):
            raise NotAnAssignment(f"{count} partitions of {topic!r}")
        found.extend(TopicPartition(topic, take(_I32)) for _ in range(count))
    return tuple(found)


def encode_assignment(partitions: Sequence[TopicPartition], version: int = 0) -> bytes:
    """A ``ConsumerProtocolAssignment`` of ``partitions`` (no user data), in ``version`` (its versions
    differ only in the number)."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    parts = [_I16.pack(min(max(version, 0), ASSIGNMENT_VERSION_MAX)), _I32.pack(len(by_topic))]
    for topic, numbers in sorted(by_topic.items()):
        parts += [_string(topic), _I32.pack(len(numbers)), *(_I32.pack(p) for p in sorted(numbers))]
    parts.append(_I32.pack(-1))  # user data: null
    return b"".join(parts)


def encode_subscription(topics: Sequence[str]) -> bytes:
    """A ``ConsumerProtocolSubscription`` v0 of ``topics`` (no user data)."""
    parts = [_I16.pack(0), _I32.pack(len(topics)), *(_string(t) for t in sorted(topics)), _I32.pack(-1)]
    return b"".join(parts)


def _string(text: str) -> bytes:
    encoded = text.encode("utf-8")
    return _I16.pack(len(encoded)) + encoded
