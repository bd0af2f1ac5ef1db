"""The Raft wire codec: exact round trips of pysyncobj messages, and rejection of everything else."""

from __future__ import annotations

import contextlib
import os
import pickle
import socket
import struct
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftlog.consensus import wire, wire_batch, wire_errors, wire_messages

SECRET = b"cluster-secret-0123456789abcdef"

# --------------------------------------------------------------------------------------- strategies

uint = st.integers(min_value=0, max_value=(1 << 64) - 1)
small_uint = st.integers(min_value=0, max_value=1 << 40)
command = st.binary(max_size=200)
entry = st.tuples(command, small_uint, small_uint)

KIND_STRATEGIES: dict[wire_messages.Kind, st.SearchStrategy[Any]] = {
    wire_messages.Kind.UINT: uint,
    wire_messages.Kind.INT: st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
    wire_messages.Kind.BOOL: st.booleans(),
    wire_messages.Kind.BYTES: st.binary(max_size=300),
    wire_messages.Kind.TRANSMISSION: st.sampled_from(["start", "process", "finish"]),
    wire_messages.Kind.ENTRIES: st.lists(entry, max_size=20),
    wire_messages.Kind.SNAPSHOT_CHUNK: st.one_of(
        st.none(), st.just(False), st.tuples(st.binary(max_size=300), st.booleans(), st.booleans())
    ),
}


def message_of(mtype: wire_messages.MessageType) -> st.SearchStrategy[dict[str, Any]]:
    required = {f.name: KIND_STRATEGIES[f.kind] for f in mtype.fields if f.required}
    optional = {f.name: KIND_STRATEGIES[f.kind] for f in mtype.fields if not f.required}
    return st.fixed_dictionaries({"type": st.just(mtype.name), **required}, optional=optional)


messages = st.one_of([message_of(t) for t in wire_messages.MESSAGE_TYPES])
group_ids = st.text(min_size=1, max_size=40).filter(
    lambda g: len(g.encode()) <= wire_messages.GROUP_ID_BYTES_MAX
)


def same_shape(a: Any, b: Any) -> bool:
    """Equality that also tells tuple from list and bool from int (``(1, 2) == [1, 2]`` is False anyway,
    but ``True == 1`` is True)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_shape(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same_shape(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def round_trip(message: dict[str, Any]) -> dict[str, Any]:
    encoded = wire_messages.encode_message(message)
    return wire_messages.decode_message(
        msgpack.unpackb(encoded, use_list=False, raw=False, strict_map_key=False)
    )


# ------------------------------------------------------------------------------------ message codec


@settings(max_examples=400, deadline=None)
@given(messages)
def test_every_message_round_trips_with_exact_python_types(message: dict[str, Any]) -> None:
    assert same_shape(round_trip(message), message)


def test_real_pysyncobj_shapes_round_trip() -> None:
    """The shapes SyncObj indexes: entries as a list of (bytes, idx, term) tuples, serialized as a tuple."""
    samples: list[dict[str, Any]] = [
        {"type": "request_vote", "term": 3, "last_log_index": 10, "last_log_term": 2},
        {"type": "response_vote", "term": 3},
        {
            "type": "append_entries",
            "term": 3,
            "commit_index": 9,
            "entries": [(b"\x00", 11, 3), (b"\x01payload", 12, 3)],
            "prevLogIdx": 10,
            "prevLogTerm": 2,
        },
        {
            "type": "append_entries",
            "term": 3,
            "commit_index": 9,
            "entries": [],
            "prevLogIdx": 12,
            "prevLogTerm": 3,
        },
        {
            "type": "append_entries",
            "transmission": "start",
            "data": b"chunk",
            "term": 3,
            "commit_index": 9,
            "prevLogIdx": 10,
            "prevLogTerm": 2,
        },
        {"type": "append_entries", "term": 3, "commit_index": 9, "serialized": (b"snap", True, False)},
        {"type": "append_entries", "term": 3, "commit_index": 9, "serialized": None},
        {"type": "next_node_idx", "next_node_idx": 13, "reset": False, "success": True},
        {"type": "next_node_idx", "next_node_idx": 13, "reset": False, "success": True, "term": 3},
        {"type": "apply_command", "command": b"\x01cmd", "request_id": 7},
        {"type": "apply_command", "command": b"\x01cmd"},
        {"type": "apply_command_response", "request_id": 7, "log_idx": 13, "log_term": 3},
        {"type": "apply_command_response", "request_id": 7, "error": 2},
        {"type": "timeout_now", "term": 3},
    ]
    for message in samples:
        decoded = round_trip(message)
        assert same_shape(decoded, message), (message, decoded)
    entries = round_trip(samples[2])["entries"]
    assert isinstance(entries, list) and entries[-1][1] == 12 and isinstance(entries[0], tuple)


@pytest.mark.parametrize(
    "message",
    [
        {"type": "install_snapshot", "term": 1},  # unknown type
        {"term": 1},  # no type
        {"type": "response_vote", "term": 1, "extra": 2},  # unknown field
        {"type": "response_vote"},  # missing field
        {"type": "response_vote", "term": True},  # bool is not an int here
        {"type": "response_vote", "term": -1},  # negative term
        {"type": "response_vote", "term": 1 << 64},  # does not fit
        {"type": "apply_command", "command": "text, not bytes"},
        {"type": "append_entries", "term": 1, "commit_index": 0, "entries": [[b"x", 1, 1]]},  # list entry
        {"type": "append_entries", "term": 1, "commit_index": 0, "entries": ((b"x", 1, 1),)},  # tuple outer
        {"type": "append_entries", "term": 1, "commit_index": 0, "entries": [(b"x", 1)]},
        {"type": "append_entries", "term": 1, "commit_index": 0, "transmission": "middle"},
        {"type": "append_entries", "term": 1, "commit_index": 0, "serialized": (b"x", 1, 0)},
        {"type": "append_entries", "term": 1, "commit_index": 0, "serialized": True},
        {"type": "next_node_idx", "next_node_idx": 1, "reset": 0, "success": 1},
    ],
)
def test_encode_refuses_messages_outside_the_schema(message: dict[str, Any]) -> None:
    with pytest.raises(wire_errors.MalformedMessage):
        wire_messages.encode_message(message)


@pytest.mark.parametrize(
    "obj",
    [
        {0: 99, 1: 1},  # unknown type code
        {1: 1},  # no type code
        {0: 2},  # response_vote without term
        {0: 2, 1: 1, 9: 1},  # unknown field code
        {0: 2, "term": 1},  # string field key
        {0: 2, 1: "1"},
        {0: 2, 1: 1.5},
        {0: 3, 1: 1, 2: 0, 3: ((b"x", 1),)},  # entry of two
        {0: 3, 1: 1, 2: 0, 3: (("x", 1, 1),)},  # str command
        {0: 3, 1: 1, 2: 0, 3: b"not an array"},
        {0: 3, 1: 1, 2: 0, 8: (b"x", True)},  # snapshot chunk of two
        {0: 2, 1: msgpack.ExtType(1, b"\x00")},  # ext types are never accepted
        [2, 1],
        "response_vote",
    ],
)
def test_decode_rejects_malformed_messages(obj: Any) -> None:
    with pytest.raises(wire_errors.MalformedMessage):
        wire_messages.decode_message(obj)


def test_schema_fingerprint_is_stable_and_versioned() -> None:
    assert wire_messages.schema_fingerprint() == wire_messages.SCHEMA_FINGERPRINT
    assert len(wire_messages.SCHEMA_FINGERPRINT) == 16


# ------------------------------------------------------------------------------------------ batches


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.tuples(group_ids, messages), max_size=15), max_size=5))
def test_batches_round_trip_and_intern_groups_across_frames(batches: list[list[tuple[str, Any]]]) -> None:
    encoder, decoder = wire_batch.BatchEncoder(), wire_batch.BatchDecoder()
    for batch in batches:
        body = encoder.encode([(group, wire_messages.encode_message(m)) for group, m in batch])
        decoded = decoder.decode(body)
        assert len(decoded) == len(batch)
        for (group, message), (got_group, got_message) in zip(batch, decoded, strict=True):
            assert got_group == group
            assert same_shape(got_message, message)


def test_group_name_sent_once_per_connection() -> None:
    encoder = wire_batch.BatchEncoder()
    payload = wire_messages.encode_message({"type": "response_vote", "term": 1})
    first = encoder.encode([("topic-with-a-long-name/17", payload)])
    second = encoder.encode([("topic-with-a-long-name/17", payload)])
    assert b"topic-with-a-long-name/17" in first and b"topic-with-a-long-name/17" not in second


@pytest.mark.parametrize(
    "records",
    [
        [0, {0: 2, 1: 1}],  # ref never declared
        [[1, "g"], 1, {0: 2, 1: 1}],  # declaration skips ref 0
        [[0, "g"], 0],  # ref without its message
        [[0, ""], 0, {0: 2, 1: 1}],  # empty group id
        [[0, 5], 0, {0: 2, 1: 1}],  # group id not a string
        [[0, "g"], "0", {0: 2, 1: 1}],  # ref not an int
        [[0, "g"], 0, {0: 77}],  # unknown message type
    ],
)
def test_malformed_batches_are_rejected(records: list[Any]) -> None:
    body = b"".join(msgpack.packb(r, use_bin_type=True) for r in records)
    with pytest.raises(wire_errors.WireError):
        wire_batch.BatchDecoder().decode(body)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_never_escape_as_anything_but_wire_errors(garbage: bytes) -> None:
    with contextlib.suppress(wire_errors.WireError):
        wire_batch.BatchDecoder().decode(garbage)
    reader = wire.FrameReader(wire.HANDSHAKE_FRAME_BYTES_MAX)
    with contextlib.suppress(wire_errors.WireError):
        reader.frames(garbage)


def test_a_pickle_is_not_a_message() -> None:
    class Boom:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, ("echo pwned",))

    body = pickle.dumps(Boom())
    with pytest.raises(wire_errors.WireError):
        wire_batch.BatchDecoder().decode(body)


# ------------------------------------------------------------------------------------------ framing


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(sorted(wire.SESSION_KINDS)), st.binary(max_size=300)), max_size=10),
    st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=20),
)
def test_frames_survive_any_chunking(frames: list[tuple[int, bytes]], cuts: list[int]) -> None:
    stream = b"".join(wire.frame(kind, body) for kind, body in frames)
    reader = wire.FrameReader(wire.HANDSHAKE_FRAME_BYTES_MAX)
    received: list[tuple[int, bytes]] = []
    position, i = 0, 0
    while position < len(stream):
        step = cuts[i % len(cuts)]
        received += reader.frames(stream[position : position + step])
        position += step
        i += 1
    received += reader.frames(b"")
    assert received == frames
    assert reader.buffered_bytes == 0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(sorted(wire.SESSION_KINDS)), st.binary(max_size=300)), max_size=10),
    st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=20),
    st.integers(min_value=6, max_value=200),
)
def test_large_frames_assembled_in_place_survive_any_chunking(
    frames: list[tuple[int, bytes]], cuts: list[int], large_frame_bytes: int
) -> None:
    """The same with a low large-frame threshold: frames above it are assembled in their own buffer,
    the bytes after one of them go back to the shared buffer."""
    stream = b"".join(wire.frame(kind, body) for kind, body in frames)
    reader = wire.FrameReader(wire.HANDSHAKE_FRAME_BYTES_MAX, large_frame_bytes=large_frame_bytes)
    received: list[tuple[int, bytes]] = []
    position, i = 0, 0
    while position <= len(stream):
        step = cuts[i % len(cuts)]
        received += [
            (kind, bytes(payload)) for kind, payload in reader.frames(stream[position : position + step])
        ]
        position += step
        i += 1
    assert received == frames
    assert reader.buffered_bytes == 0


def test_a_large_frame_is_read_from_the_socket_into_its_own_buffer() -> None:
    small, large = os.urandom(100), os.urandom(300_000)
    stream = (
        wire.frame(wire.KIND_BATCH, small)
        + wire.frame(wire.KIND_BATCH, large)
        + wire.frame(wire.KIND_PING, b"")
    )
    sender, receiver = socket.socketpair()
    with sender, receiver:
        reader = wire.FrameReader(1 << 20)
        received: list[tuple[int, bytes | memoryview]] = []
        for start in range(0, len(stream), 7_000):  # the large frame arrives over many reads
            sender.sendall(stream[start : start + 7_000])
            while reader.buffered_bytes + sum(len(p) + 5 for _, p in received) < min(
                start + 7_000, len(stream)
            ):
                assert reader.receive(receiver, 4096) > 0
                while (item := reader.next_frame()) is not None:
                    received.append(item)
        assert [(kind, bytes(payload)) for kind, payload in received] == [
            (wire.KIND_BATCH, small),
            (wire.KIND_BATCH, large),
            (wire.KIND_PING, b""),
        ]
        assert isinstance(received[1][1], memoryview)  # a view of the buffer the socket filled
        sender.close()
        assert reader.receive(receiver, 4096) == 0  # the peer closed


def test_oversized_frame_is_rejected_from_its_header_alone() -> None:
    reader = wire.FrameReader(1 << 20)
    reader.feed(struct.pack(">I", (1 << 20) + 1))  # the body never needs to arrive
    with pytest.raises(wire_errors.FrameTooLarge) as raised:
        reader.next_frame()
    assert raised.value.frame_bytes == (1 << 20) + 1
    assert reader.buffered_bytes == 4


def test_empty_frame_is_malformed() -> None:
    with pytest.raises(wire_errors.MalformedFrame):
        wire.FrameReader(wire.HANDSHAKE_FRAME_BYTES_MAX).frames(b"\x00\x00\x00\x00")


# ---------------------------------------------------------------------------------------- handshake


def handshake(
    dialer_secret: bytes = SECRET,
    acceptor_secret: bytes = SECRET,
    dialer_id: str = "n2",
    acceptor_id: str = "n1",
    dialed_id: str = "n1",
    known: frozenset[str] = frozenset({"n2", "n3"}),
) -> tuple[wire.Session, wire.Session]:
    dialer = wire.DialerHandshake(dialer_secret, dialer_id, dialed_id, os.urandom(32))
    acceptor = wire.AcceptorHandshake(acceptor_secret, acceptor_id, os.urandom(32), known.__contains__)
    reader = wire.FrameReader(wire.HANDSHAKE_FRAME_BYTES_MAX)
    ((kind, payload),) = reader.frames(dialer.hello())
    ((kind, payload),) = reader.frames(acceptor.on_hello(kind, payload))
    auth, dialer_session = dialer.on_challenge(kind, payload)
    ((kind, payload),) = reader.frames(auth)
    acceptor_session = acceptor.on_auth(kind, payload)
    return dialer_session, acceptor_session


def test_handshake_derives_matching_directional_sessions() -> None:
    dialer, acceptor = handshake()
    reader = wire.FrameReader(1 << 20)
    for i in range(3):
        ((kind, payload),) = reader.frames(dialer.seal(wire.KIND_BATCH, b"d%d" % i))
        assert acceptor.open(kind, payload) == b"d%d" % i
        ((kind, payload),) = reader.frames(acceptor.seal(wire.KIND_PING, b""))
        assert dialer.open(kind, payload) == b""


def test_a_frame_sealed_into_a_buffer_is_the_frame_seal_builds() -> None:
    """seal_into appends the pieces to a buffer that already holds bytes and computes the MAC there:
    the same frame as seal() of the joined body, opened by the peer, the sequence moving on alike."""
    dialer, acceptor = handshake()
    parts = [b"\x00", os.urandom(70_000), b"\x01", os.urandom(10)]
    buffer = bytearray(b"already queued")
    size = dialer.seal_into(buffer, wire.KIND_BATCH, parts)
    frame = bytes(buffer[len(b"already queued") :])
    assert size == len(frame) - 4 and struct.unpack(">I", frame[:4])[0] == size
    reader = wire.FrameReader(1 << 20)
    ((kind, payload),) = reader.frames(frame)
    assert acceptor.open(kind, payload) == b"".join(parts)
    ((kind, payload),) = reader.frames(dialer.seal(wire.KIND_BATCH, b"next"))
    assert acceptor.open(kind, payload) == b"next"
    with pytest.raises(wire_errors.MalformedFrame):
        dialer.seal_into(bytearray(), wire.KIND_HELLO, [b"x"])  # not a session frame kind


def test_wrong_secret_fails_on_both_sides() -> None:
    with pytest.raises(wire_errors.AuthenticationFailed):  # the dialer refuses an acceptor without the secret
        handshake(acceptor_secret=b"another-secret-of-enough-length")
    # An acceptor facing a dialer without the secret: the dialer cannot forge the AUTH proof.
    acceptor = wire.AcceptorHandshake(SECRET, "n1", os.urandom(32), {"n2"}.__contains__)
    impostor = wire.DialerHandshake(b"another-secret-of-enough-length", "n2", "n1", os.urandom(32))
    reader = wire.FrameReader(wire.HANDSHAKE_FRAME_BYTES_MAX)
    ((kind, payload),) = reader.frames(impostor.hello())
    acceptor.on_hello(kind, payload)
    forged = wire.frame(wire.KIND_AUTH, msgpack.packb({"proof": os.urandom(32)}))
    ((kind, payload),) = reader.frames(forged)
    with pytest.raises(wire_errors.AuthenticationFailed):
        acceptor.on_auth(kind, payload)


def test_handshake_refuses_unknown_or_misdirected_peers() -> None:
    with pytest.raises(wire_errors.AuthenticationFailed):
        handshake(dialer_id="intruder")
    with pytest.raises(wire_errors.AuthenticationFailed):
        handshake(dialed_id="n7")  # dialer meant to reach n7, reached n1
    with pytest.raises(wire_errors.AuthenticationFailed):
        handshake(dialer_id="n1", known=frozenset({"n1"}))  # claims the acceptor's own id


def test_handshake_refuses_other_protocol_versions() -> None:
    acceptor = wire.AcceptorHandshake(SECRET, "n1", os.urandom(32), {"n2"}.__contains__)
    hello = {
        "v": wire_messages.WIRE_VERSION + 1,
        "schema": wire_messages.SCHEMA_FINGERPRINT,
        "node": "n2",
        "to": "n1",
    }
    hello["nonce"] = os.urandom(32)
    with pytest.raises(wire_errors.ProtocolMismatch):
        acceptor.on_hello(wire.KIND_HELLO, msgpack.packb(hello))
    hello["v"], hello["schema"] = wire_messages.WIRE_VERSION, b"\x00" * 16
    with pytest.raises(wire_errors.ProtocolMismatch):
        acceptor.on_hello(wire.KIND_HELLO, msgpack.packb(hello))


def test_forged_replayed_reordered_and_reflected_frames_are_rejected() -> None:
    dialer, acceptor = handshake()
    reader = wire.FrameReader(1 << 20)
    first = dialer.seal(wire.KIND_BATCH, b"first")
    second = dialer.seal(wire.KIND_BATCH, b"second")
    ((kind1, payload1),) = reader.frames(first)
    ((kind2, payload2),) = reader.frames(second)

    flipped = bytearray(payload1)
    flipped[0] ^= 1
    with pytest.raises(wire_errors.AuthenticationFailed):  # forged body
        acceptor.open(kind1, bytes(flipped))
    with pytest.raises(wire_errors.AuthenticationFailed):  # reordered
        acceptor.open(kind2, payload2)
    with pytest.raises(wire_errors.AuthenticationFailed):  # kind changed
        acceptor.open(wire.KIND_PING, payload1)
    assert acceptor.open(kind1, payload1) == b"first"
    with pytest.raises(wire_errors.AuthenticationFailed):  # replayed
        acceptor.open(kind1, payload1)

    # reflected: a frame the acceptor sent, fed back to the acceptor
    ((kind, payload),) = reader.frames(acceptor.seal(wire.KIND_BATCH, b"mine"))
    with pytest.raises(wire_errors.AuthenticationFailed):
        acceptor.open(kind, payload)

    # replayed into another connection between the same nodes
    _, other_acceptor = handshake()
    with pytest.raises(wire_errors.AuthenticationFailed):
        other_acceptor.open(kind1, payload1)


def test_handshake_frames_are_small() -> None:
    acceptor = wire.AcceptorHandshake(SECRET, "n1", os.urandom(32), {"n2"}.__contains__)
    with pytest.raises(wire_errors.FrameTooLarge):
        acceptor.on_hello(wire.KIND_HELLO, b"\x00" * (wire.HANDSHAKE_FRAME_BYTES_MAX + 1))
    with pytest.raises(wire_errors.MalformedFrame):
        acceptor.on_hello(wire.KIND_AUTH, msgpack.packb({}))
    with pytest.raises(wire_errors.MalformedFrame):
        acceptor.on_hello(wire.KIND_HELLO, b"\xc1")  # reserved msgpack byte
