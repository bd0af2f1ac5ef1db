"""The typed Raft messages (``raftlog.consensus.messages``) and the wire's schema (``MESSAGE_TYPES``) say the
same: one type per message type, the same fields, the same ones required, values of the kinds the decoder
restores. A field added to one and not the other fails here."""

from __future__ import annotations

import typing

import msgpack
import pytest

from raftlog.consensus import messages, wire_messages

KIND_TYPES = {
    wire_messages.Kind.UINT: int,
    wire_messages.Kind.INT: int,
    wire_messages.Kind.BOOL: bool,
    wire_messages.Kind.BYTES: bytes,
    wire_messages.Kind.TRANSMISSION: typing.Literal["start", "process", "finish"],
    wire_messages.Kind.ENTRIES: list[messages.Entry],
    wire_messages.Kind.SNAPSHOT_CHUNK: messages.SnapshotChunk,
}


def _typed(name: str) -> type:
    classes = {typing.get_args(typing.get_type_hints(c)["type"])[0]: c for c in messages.MESSAGE_CLASSES}
    return classes[name]


@pytest.mark.parametrize("described", wire_messages.MESSAGE_TYPES, ids=lambda t: t.name)
def test_each_message_type_has_its_typed_form_field_for_field(described: wire_messages.MessageType) -> None:
    cls = _typed(described.name)
    hints = typing.get_type_hints(cls)
    assert hints.pop("type") == typing.Literal[described.name]
    assert set(hints) == {field.name for field in described.fields}
    required = {field.name for field in described.fields if field.required}
    assert cls.__required_keys__ - {"type"} == required  # type: ignore[attr-defined]
    for field in described.fields:
        assert hints[field.name] == KIND_TYPES[field.kind], field.name


def test_every_typed_message_is_on_the_wire() -> None:
    assert len(messages.MESSAGE_CLASSES) == len(wire_messages.MESSAGE_TYPES)
    assert set(typing.get_args(messages.RaftMessage)) == set(messages.MESSAGE_CLASSES)


def test_a_decoded_message_has_exactly_the_typed_fields() -> None:
    sent: messages.AppendEntries = {
        "type": "append_entries",
        "term": 3,
        "commit_index": 7,
        "entries": [(b"\x01cmd", 8, 3)],
        "prevLogIdx": 7,
        "prevLogTerm": 3,
    }
    packed = wire_messages.encode_message(sent)
    decoded = wire_messages.decode_message(
        msgpack.unpackb(packed, use_list=False, raw=False, strict_map_key=False)
    )
    assert decoded == sent
    assert set(decoded) <= set(typing.get_type_hints(messages.AppendEntries))
