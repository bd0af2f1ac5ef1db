"""Wire format: round trips, authentication, validation and the replay window."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from membership import wire
from membership.errors import Malformed, Oversized, Replayed, Unauthenticated
from membership.messages import (
    Ack,
    Alive,
    Dead,
    MemberRecord,
    Message,
    Nack,
    Ping,
    PingRequest,
    PushPullBody,
    Suspect,
)
from membership.model import MemberState

SECRET = b"k" * 32
SALT = bytes(range(wire.SALT_BYTES))  # callers pass os.urandom(wire.SALT_BYTES)
ids = st.text(min_size=1, max_size=40)
ints = st.integers(min_value=0, max_value=2**63 - 1)
metas = st.binary(max_size=512)
messages: st.SearchStrategy[Message] = st.one_of(
    st.builds(Ping, ints, ids),
    st.builds(PingRequest, ints, ids, ids, st.booleans()),
    st.builds(Ack, ints),
    st.builds(Nack, ints),
    st.builds(Alive, ids, ids, ints, metas),
    st.builds(Suspect, ids, ints, ids),
    st.builds(Dead, ids, ints, ids),
)


@given(st.lists(messages, max_size=5), ids, ints)
def test_datagrams_round_trip_and_message_size_is_exact(
    batch: list[Message], sender: str, number: int
) -> None:
    data = wire.encode_datagram(SECRET, sender, "127.0.0.1:1", number, batch, salt=SALT)
    decoded = wire.decode_datagram(SECRET, data, 1_000_000, 512)
    assert decoded == wire.Datagram(sender, "127.0.0.1:1", number, tuple(batch))
    assert len(data) <= wire.datagram_overhead(sender, "127.0.0.1:1") + sum(
        wire.message_size(m) for m in batch
    )


@given(
    st.lists(st.builds(MemberRecord, ids, ids, ints, st.sampled_from(list(MemberState)), metas), max_size=20)
)
def test_push_pull_frames_round_trip(records: list[MemberRecord]) -> None:
    body = PushPullBody(True, tuple(records))
    frame = wire.encode_push_pull(
        SECRET, wire.KIND_PUSH_PULL_RESPONSE, "a", "h:1", 5, body, in_reply_to=4, salt=SALT
    )
    (length,) = wire.FRAME_PREFIX.unpack(frame[:4])
    assert length == len(frame) - 4
    decoded = wire.decode_push_pull(SECRET, frame[4:], 512, wire.KIND_PUSH_PULL_RESPONSE)
    assert (decoded.sender_id, decoded.packet_number, decoded.in_reply_to, decoded.body) == ("a", 5, 4, body)
    with pytest.raises(Malformed):  # a response is not accepted where a request is expected
        wire.decode_push_pull(SECRET, frame[4:], 512, wire.KIND_PUSH_PULL_REQUEST)


@given(st.data())
def test_any_flipped_bit_or_other_secret_is_rejected(data: st.DataObject) -> None:
    packet = wire.encode_datagram(SECRET, "a", "h:1", 1, [Alive("b", "h:2", 3, b"meta")], salt=SALT)
    with pytest.raises(Unauthenticated):
        wire.decode_datagram(b"other secret", packet, 1400, 512)
    index = data.draw(st.integers(min_value=1, max_value=len(packet) - 1))
    bit = data.draw(st.integers(min_value=0, max_value=7))
    tampered = bytearray(packet)
    tampered[index] ^= 1 << bit
    with pytest.raises((Unauthenticated, Malformed)):
        wire.decode_datagram(SECRET, bytes(tampered), 1400, 512)


def _signed(value: object) -> bytes:
    return wire._seal(SECRET, wire.KIND_DATAGRAM, msgpack.packb(value), SALT)


@pytest.mark.parametrize(
    "body",
    [
        ["a", "h:1", 1, [[99, 1]]],  # unknown message type
        ["a", "h:1", -1, []],  # negative packet number
        ["a", "h:1", 1, [[5, "b", "h:2", 1, b"x" * 600]]],  # meta over the limit
        ["", "h:1", 1, []],  # empty sender
        ["a", "h:1", 1, [[1, 7, 7]]],  # target id not a string
        ["a", "h:1", 1, [[6, "b", True, "c"]]],  # bool is not an incarnation
        ["a", "h:1", 1, {"m": 1}],  # maps are not allowed
        ["a", "h:1", 1],  # wrong arity
    ],
)
def test_authentic_but_malformed_bodies_are_rejected(body: object) -> None:
    with pytest.raises(Malformed):
        wire.decode_datagram(SECRET, _signed(body), 1400, 512)


def test_oversized_datagrams_are_rejected_before_any_work() -> None:
    packet = wire.encode_datagram(SECRET, "a", "h:1", 1, [Alive("b", "h:2", 3, b"x" * 512)] * 3, salt=SALT)
    with pytest.raises(Oversized):
        wire.decode_datagram(SECRET, packet, 1400, 512)


def test_nothing_a_packet_carries_is_readable_on_the_wire() -> None:
    """Gossip metadata names topics and watermarks: neither a datagram nor a push-pull frame shows it,
    nor the members' ids and addresses; two packets of the same content differ (a fresh salt each)."""
    meta = msgpack.packb({"topics": ["payroll-salaries"], "high_watermark": 987654321})
    alive = Alive("node-b", "10.1.2.3:7946", 3, meta)
    datagrams = [
        wire.encode_datagram(SECRET, "node-a", "10.1.2.4:7946", 1, [alive], salt=bytes([i]) * wire.SALT_BYTES)
        for i in range(2)
    ]
    record = MemberRecord("node-b", "10.1.2.3:7946", 3, MemberState.ALIVE, meta)
    frame = wire.encode_push_pull(
        SECRET,
        wire.KIND_PUSH_PULL_REQUEST,
        "node-a",
        "10.1.2.4:7946",
        2,
        PushPullBody(False, (record,)),
        salt=SALT,
    )
    for packet in (*datagrams, frame):
        for clear in (b"payroll-salaries", meta, b"node-b", b"node-a", b"10.1.2.3", b"high_watermark"):
            assert clear not in packet
    assert datagrams[0][wire.HEADER_BYTES :] != datagrams[1][wire.HEADER_BYTES :]
    assert wire.decode_datagram(SECRET, datagrams[1], 1400, 512).messages == (alive,)


def test_replay_guard_accepts_each_number_once_within_a_sliding_window() -> None:
    guard = wire.ReplayGuard(window=8, forget_after_ms=1_000)
    for number in (10, 12, 11, 15):  # reordering inside the window is fine
        guard.check("a", 1, number, 0)
    for number in (10, 12, 15, 7):  # repeats, and too old (15 - 7 >= 8)
        with pytest.raises(Replayed):
            guard.check("a", 1, number, 0)
    guard.check("a", 2, 10, 0)  # channels and senders are independent
    guard.check("b", 1, 10, 0)
    guard.check("a", 1, 100, 0)
    with pytest.raises(Replayed):
        guard.check("a", 1, 92, 0)
    guard.check("a", 1, 5, 2_000)  # a sender silent for longer than forget_after_ms starts afresh
    guard.forget("a")
    guard.check("a", 1, 5, 2_000)


def test_replay_guard_is_bounded_in_senders() -> None:
    guard = wire.ReplayGuard(senders_max=16)
    for i in range(100):
        guard.check(f"s{i}", 1, 1, i)
    assert len(guard) == 16
