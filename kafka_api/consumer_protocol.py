"""The bytes Kafka consumers put in a group's member metadata and assignments (protocol type
``consumer``): ``ConsumerProtocolSubscription`` and ``ConsumerProtocolAssignment``, Kafka's non-flexible
encoding. The coordinator never needs them to run a group (the assignor runs in the client); they are
read to show which partitions a Kafka member holds, and written to show HTTP members to Kafka's tools.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from partitions.groups.assignors import TopicPartition

_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")
PARTITIONS_MAX = 100_000  # a count past this is not an assignment


class NotAnAssignment(ValueError):
    """Bytes that do not decode as a consumer assignment."""


def decode_assignment(data: bytes) -> tuple[TopicPartition, ...]:
    """The partitions of a ``ConsumerProtocolAssignment`` (any version: v1+ only append fields)."""
    view = memoryview(data)
    at = _I16.size  # the version
    if len(view) < at:
        raise NotAnAssignment("shorter than a version")

    def take(codec: struct.Struct) -> int:
        nonlocal at
        if at + codec.size > len(view):
            raise NotAnAssignment(f"cut short at byte {at}")
        (value,) = codec.unpack_from(view, at)
        at += codec.size
        return int(value)

    found: list[TopicPartition] = []
    topics = take(_I32)
    if not 0 <= topics <= PARTITIONS_MAX:
        raise NotAnAssignment(f"{topics} topics")
    for _ in range(topics):
        length = take(_I16)
        if length < 0 or at + length > len(view):
            raise NotAnAssignment(f"a topic name of {length} bytes at byte {at}")
        topic = bytes(view[at : at + length]).decode("utf-8", "replace")
        at += length
        count = take(_I32)
        if not 0 <= count <= PARTITIONS_MAX - len(found):
            raise NotAnAssignment(f"{count} partitions of {topic!r}")
        found.extend(TopicPartition(topic, take(_I32)) for _ in range(count))
    return tuple(found)


def encode_assignment(partitions: Sequence[TopicPartition]) -> bytes:
    """A ``ConsumerProtocolAssignment`` v0 of ``partitions`` (no user data)."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    parts = [_I16.pack(0), _I32.pack(len(by_topic))]
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
