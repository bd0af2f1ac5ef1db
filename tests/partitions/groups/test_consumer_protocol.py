"""The consumer protocol's bytes (``partitions.groups.consumer_protocol``): what is written reads back, and
bytes that are not an assignment or a subscription are refused, never read past their end or into a huge
allocation."""

from __future__ import annotations

import struct

import pytest

from partitions.groups.assignors import TopicPartition
from partitions.groups.consumer_protocol import (
    NotAnAssignment,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)


def test_an_assignment_reads_back_and_later_versions_fields_are_ignored() -> None:
    partitions = [TopicPartition("b", 1), TopicPartition("a", 0), TopicPartition("b", 0)]
    data = encode_assignment(partitions)
    assert sorted(decode_assignment(data)) == sorted(partitions)
    v3 = struct.pack(">h", 3) + data[2:] + b"\x00\x00\x00\x00"  # a later version appends fields
    assert sorted(decode_assignment(v3)) == sorted(partitions)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00\x00",
        struct.pack(">hi", 0, 2**31 - 1),  # two billion topics announced
        struct.pack(">hih", 0, 1, 50) + b"short",  # a topic name past the end
        struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">i", 2**30),  # a billion partitions
        struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">ii", 2, 0),  # one of two partitions
    ],
)
def test_bytes_that_are_not_an_assignment_are_refused(data: bytes) -> None:
    with pytest.raises(NotAnAssignment):
        decode_assignment(data)


def test_a_subscription_reads_back_whatever_its_version() -> None:
    data = encode_subscription(["b", "a"])
    assert sorted(decode_subscription(data)) == ["a", "b"]
    # v1 on append user data, owned partitions, a generation and a rack: the topics come first in all
    v3 = struct.pack(">h", 3) + data[2:] + struct.pack(">iii", 0, 7, -1)
    assert sorted(decode_subscription(v3)) == ["a", "b"]


@pytest.mark.parametrize(
    "data",
    [
        b"",
        struct.pack(">hi", 0, 2**31 - 1),
        struct.pack(">hih", 0, 2, 1) + b"t",
        struct.pack(">hih", 0, 1, -2),
    ],
)
def test_bytes_that_are_not_a_subscription_are_refused(data: bytes) -> None:
    with pytest.raises(NotAnAssignment):
        decode_subscription(data)
