"""Confluent's wire format (``partitions/registry/framing.py``) against confluent-kafka's own: the header and
Protobuf message indexes its serializers write are what ``frame`` writes, and what ``unframe`` and
``message_indexes`` read back from it."""

from __future__ import annotations

import io

import pytest
from confluent_kafka.schema_registry.common.serde import SchemaId
from hypothesis import given
from hypothesis import strategies as st

from partitions.registry.framing import NotFramed, frame, message_indexes, unframe

IDS = st.integers(min_value=0, max_value=2**31 - 1)
INDEXES = st.lists(st.integers(min_value=0, max_value=2**31 - 1), min_size=1, max_size=8)


@given(IDS, st.binary(max_size=64))
def test_avro_and_json_frames_are_confluents(schema_id: int, payload: bytes) -> None:
    theirs = SchemaId("AVRO", schema_id).id_to_bytes() + payload
    assert frame(schema_id, payload) == theirs
    framed = unframe(theirs)
    assert (framed.schema_id, bytes(framed.body)) == (schema_id, payload)


@given(IDS, INDEXES, st.binary(max_size=64))
def test_protobuf_message_indexes_are_confluents(schema_id: int, indexes: list[int], payload: bytes) -> None:
    theirs = SchemaId("PROTOBUF", schema_id, message_indexes=indexes).id_to_bytes() + payload
    assert frame(schema_id, payload, indexes) == theirs
    read = SchemaId("PROTOBUF")
    rest = read.from_bytes(io.BytesIO(frame(schema_id, payload, indexes)))
    assert (read.id, read.message_indexes, rest.read()) == (schema_id, indexes, payload)
    framed = unframe(theirs)
    got, body = message_indexes(framed.body)
    assert (framed.schema_id, list(got or (0,)), bytes(body)) == (schema_id, indexes, payload)


def test_the_first_message_is_one_zero_byte() -> None:
    assert frame(7, b"p", ()) == frame(7, b"p", [0]) == b"\x00\x00\x00\x00\x07\x00p"
    assert message_indexes(b"\x00p") == ((), memoryview(b"p"))


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "shorter than"),
        (b"\x00\x00\x00", "shorter than"),
        (b'{"name": "a"}', "Unknown magic byte"),
        (b"\x01\x00\x00\x00\x01", "Unknown magic byte"),
        (b"\x00\xff\xff\xff\xff", "outside"),
    ],
)
def test_bytes_not_framed_are_refused(data: bytes, why: str) -> None:
    with pytest.raises(NotFramed, match=why):
        unframe(data)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"", "cut short"),
        (b"\x06\x02", "announced"),  # three indexes, one byte
        (b"\x02\x80", "cut short"),
        (b"\x02\xff\xff\xff\xff\xff\x01", "longer than"),
        (b"\x02\x01", "negative"),
    ],
)
def test_message_indexes_that_do_not_read_are_refused(body: bytes, why: str) -> None:
    with pytest.raises(NotFramed, match=why):
        message_indexes(body)
