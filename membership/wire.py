"""Wire format: versioned msgpack, every UDP datagram and TCP push-pull frame encrypted and authenticated.

Layout of a packet (a UDP datagram, or the payload of one length-prefixed TCP frame)::

    version:u8 (=2) | kind:u8 | salt:16 | ChaCha20-Poly1305(key, nonce=0, body, aad=version|kind|salt)
    key := HMAC-SHA256(secret, "raftlog-gossip-v2 key" | 0x00 | salt)

The sealed body is the msgpack body encrypted, followed by its 16-byte Poly1305 tag. The salt is 16 fresh
random bytes per packet, given by the caller (this module stays pure), so every packet has its own key
and the fixed nonce is never reused under a key. Member ids, addresses, metadata (topic names,
watermarks) and every other field are unreadable on the wire; a packet under another secret, or altered
in any byte, fails the tag and is rejected before anything is decoded.

kind 1, a compound UDP datagram: body = [sender_id, sender_address, packet_number, [message, ...]]
kind 2/3, push-pull request/response: body = [sender_id, sender_address, packet_number, join,
[record, ...], in_reply_to]; a response's in_reply_to is the request's packet number, so a response
cannot be replayed into another exchange. TCP frames are prefixed with a big-endian u32 length.

Messages are lists whose first element is a type code (see ``_CODES``). Nothing is ever unpickled; every
field is type- and range-checked here, so the protocol core only ever sees well-formed values.

Replay: each sender numbers its packets with one strictly increasing 64-bit counter that starts at the
sender's wall clock in microseconds, so it keeps increasing across restarts without stored state.
Receivers keep, per sender and channel (UDP / TCP), the highest number seen plus a 256-packet sliding
bitmap (as IPsec/DTLS do) and reject repeats and anything older than the window (:class:`ReplayGuard`).
A sender's window is forgotten after 60 s of silence, so a member whose clock stepped back across a
restart is only muted briefly; what a replayed packet of a long-silent sender could say is already
superseded by incarnation ordering (a member's alive/suspect/dead claims only win with a higher
incarnation).
"""

from __future__ import annotations

import hmac
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

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

VERSION = 2  # 1: HMAC-SHA256, body in clear
KIND_DATAGRAM = 1
KIND_PUSH_PULL_REQUEST = 2
KIND_PUSH_PULL_RESPONSE = 3
SALT_BYTES = 16
TAG_BYTES = 16
HEADER_BYTES = 2 + SALT_BYTES + TAG_BYTES
"""Bytes of a packet that are not its msgpack body: version, kind, salt and tag."""
_KEY_LABEL = b"raftlog-gossip-v2 key\x00"
_NONCE = bytes(12)  # one packet per key (fresh salt), so a fixed nonce never repeats under a key
FRAME_PREFIX = struct.Struct(">I")
ID_CHARS_MAX = 128
ADDRESS_CHARS_MAX = 300
INT_MAX = 2**63 - 1
REPLAY_WINDOW = 256
REPLAY_FORGET_MS = 60_000
REPLAY_SENDERS_MAX = 4096

_PING, _PING_REQUEST, _ACK, _NACK, _ALIVE, _SUSPECT, _DEAD = 1, 2, 3, 4, 5, 6, 7
_STATE_CODES = {MemberState.ALIVE: 0, MemberState.SUSPECT: 1, MemberState.DEAD: 2, MemberState.LEFT: 3}
_STATES = {code: state for state, code in _STATE_CODES.items()}


@dataclass(frozen=True, slots=True)
class Datagram:
    sender_id: str
    sender_address: str
    packet_number: int
    messages: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class PushPullFrame:
    kind: int
    sender_id: str
    sender_address: str
    packet_number: int
    body: PushPullBody
    in_reply_to: int


# ---------------------------------------------------------------------------------------------- encoding


def _message_fields(message: Message) -> list[Any]:
    if isinstance(message, Ping):
        return [_PING, message.sequence, message.target_id]
    if isinstance(message, Ack):
        return [_ACK, message.sequence]
    if isinstance(message, Alive):
        return [_ALIVE, message.node_id, message.address, message.incarnation, message.meta]
    if isinstance(message, Suspect):
        return [_SUSPECT, message.node_id, message.incarnation, message.from_id]
    if isinstance(message, Dead):
        return [_DEAD, message.node_id, message.incarnation, message.from_id]
    if isinstance(message, PingRequest):
        return [_PING_REQUEST, message.sequence, message.target_id, message.target_address, message.want_nack]
    return [_NACK, message.sequence]


def message_size(message: Message) -> int:
    """Bytes this message adds to a compound datagram (exact for broadcasts, an upper bound for the rest)."""
    if isinstance(message, Ack | Nack):
        return 11  # fixarray, code, uint64
    if isinstance(message, Ping):
        return 16 + 4 * len(message.target_id)  # fixarray, code, uint64, str32 header, utf-8 bound
    return len(msgpack.packb(_message_fields(message)))


def datagram_overhead(sender_id: str, sender_address: str) -> int:
    """Bytes of a datagram that are not messages (header, tag, sender, packet number, list header)."""
    header = msgpack.packb([sender_id, sender_address, INT_MAX])
    return HEADER_BYTES + len(header) + 3


def _cipher(secret: bytes, salt: bytes) -> ChaCha20Poly1305:
    return ChaCha20Poly1305(hmac.digest(secret, _KEY_LABEL + salt, "sha256"))


def _seal(secret: bytes, kind: int, body: bytes, salt: bytes) -> bytes:
    if len(salt) != SALT_BYTES:
        raise ValueError(f"salt must be {SALT_BYTES} fresh random bytes, got {len(salt)}")
    prefix = bytes((VERSION, kind)) + salt
    return prefix + _cipher(secret, salt).encrypt(_NONCE, body, prefix)


def encode_datagram(
    secret: bytes,
    sender_id: str,
    sender_address: str,
    packet_number: int,
    messages: Sequence[Message],
    *,
    salt: bytes,
) -> bytes:
    """One sealed datagram; ``salt``: :data:`SALT_BYTES` fresh random bytes (``os.urandom``)."""
    body = msgpack.packb([sender_id, sender_address, packet_number, [_message_fields(m) for m in messages]])
    return _seal(secret, KIND_DATAGRAM, body, salt)


def encode_push_pull(
    secret: bytes,
    kind: int,
    sender_id: str,
    sender_address: str,
    packet_number: int,
    body: PushPullBody,
    in_reply_to: int = 0,
    *,
    salt: bytes,
) -> bytes:
    """One sealed, length-prefixed push-pull frame; ``salt`` as for :func:`encode_datagram`."""
    records = [[r.node_id, r.address, r.incarnation, _STATE_CODES[r.state], r.meta] for r in body.members]
    packed = msgpack.packb([sender_id, sender_address, packet_number, body.join, records, in_reply_to])
    frame = _seal(secret, kind, packed, salt)
    return FRAME_PREFIX.pack(len(frame)) + frame


# ---------------------------------------------------------------------------------------------- decoding


def _authenticate(secret: bytes, data: bytes, kinds: tuple[int, ...]) -> tuple[int, bytes]:
    if len(data) < HEADER_BYTES + 1:
        raise Malformed(f"packet of {len(data)} bytes is shorter than the header")
    version, kind = data[0], data[1]
    if version != VERSION:
        raise Malformed(f"unknown wire version {version}")
    if kind not in kinds:
        raise Malformed(f"unexpected packet kind {kind}")
    prefix_bytes = 2 + SALT_BYTES
    try:
        body = _cipher(secret, data[2:prefix_bytes]).decrypt(_NONCE, data[prefix_bytes:], data[:prefix_bytes])
    except InvalidTag:
        raise Unauthenticated("the packet's tag does not verify under the cluster secret") from None
    return kind, body


def _unpack(body: bytes, bin_max: int) -> Any:
    try:
        return msgpack.unpackb(
            body,
            raw=False,
            use_list=True,
            strict_map_key=True,
            max_bin_len=bin_max,
            max_str_len=ADDRESS_CHARS_MAX,
            max_ext_len=0,
            max_map_len=0,
        )
    except (ValueError, TypeError, OverflowError, msgpack.UnpackException) as error:
        raise Malformed(f"undecodable msgpack body: {error}") from None


def _str(value: Any, limit: int, what: str) -> str:
    if not isinstance(value, str) or not value or len(value) > limit:
        raise Malformed(f"{what} must be a non-empty string of at most {limit} characters")
    return value


def _int(value: Any, what: str) -> int:
    if type(value) is not int or not 0 <= value <= INT_MAX:
        raise Malformed(f"{what} must be an integer in 0..2**63-1")
    return value


def _bool(value: Any, what: str) -> bool:
    if type(value) is not bool:
        raise Malformed(f"{what} must be a boolean")
    return value


def _meta(value: Any, meta_bytes_max: int) -> bytes:
    if not isinstance(value, bytes) or len(value) > meta_bytes_max:
        raise Malformed(f"meta must be at most {meta_bytes_max} bytes")
    return value


def _fields(value: Any, count: int, what: str) -> list[Any]:
    if not isinstance(value, list) or len(value) != count:
        raise Malformed(f"{what} must be a list of {count} fields")
    return value


def _message(raw: Any, meta_bytes_max: int) -> Message:
    if not isinstance(raw, list) or not raw:
        raise Malformed("a message must be a non-empty list")
    code = raw[0]
    if code == _PING:
        f = _fields(raw, 3, "ping")
        return Ping(_int(f[1], "sequence"), _str(f[2], ID_CHARS_MAX, "target_id"))
    if code == _ACK:
        return Ack(_int(_fields(raw, 2, "ack")[1], "sequence"))
    if code == _NACK:
        return Nack(_int(_fields(raw, 2, "nack")[1], "sequence"))
    if code == _ALIVE:
        f = _fields(raw, 5, "alive")
        return Alive(
            _str(f[1], ID_CHARS_MAX, "node_id"),
            _str(f[2], ADDRESS_CHARS_MAX, "address"),
            _int(f[3], "incarnation"),
            _meta(f[4], meta_bytes_max),
        )
    if code in (_SUSPECT, _DEAD):  # the same fields: (node_id, incarnation, from_id)
        verdict = Suspect if code == _SUSPECT else Dead
        f = _fields(raw, 4, verdict.__name__.lower())
        return verdict(
            _str(f[1], ID_CHARS_MAX, "node_id"),
            _int(f[2], "incarnation"),
            _str(f[3], ID_CHARS_MAX, "from_id"),
        )
    if code == _PING_REQUEST:
        f = _fields(raw, 5, "ping request")
        return PingRequest(
            _int(f[1], "sequence"),
            _str(f[2], ID_CHARS_MAX, "target_id"),
            _str(f[3], ADDRESS_CHARS_MAX, "target_address"),
            _bool(f[4], "want_nack"),
        )
    raise Malformed(f"unknown message type {code!r}")


def decode_datagram(secret: bytes, data: bytes, udp_bytes_max: int, meta_bytes_max: int) -> Datagram:
    """Authenticate then decode one datagram; raises a :class:`~membership.errors.WireError` subclass."""
    if len(data) > udp_bytes_max:
        raise Oversized(f"datagram of {len(data)} bytes exceeds udp_bytes_max={udp_bytes_max}")
    _, body = _authenticate(secret, data, (KIND_DATAGRAM,))
    raw = _fields(_unpack(body, meta_bytes_max), 4, "datagram")
    if not isinstance(raw[3], list):
        raise Malformed("datagram messages must be a list")
    return Datagram(
        _str(raw[0], ID_CHARS_MAX, "sender_id"),
        _str(raw[1], ADDRESS_CHARS_MAX, "sender_address"),
        _int(raw[2], "packet_number"),
        tuple(_message(m, meta_bytes_max) for m in raw[3]),
    )


def decode_push_pull(secret: bytes, frame: bytes, meta_bytes_max: int, expect_kind: int) -> PushPullFrame:
    """Authenticate then decode one push-pull frame (without its length prefix)."""
    kind, body = _authenticate(secret, frame, (expect_kind,))
    raw = _fields(_unpack(body, meta_bytes_max), 6, "push-pull")
    if not isinstance(raw[4], list):
        raise Malformed("push-pull members must be a list")
    records = []
    for entry in raw[4]:
        f = _fields(entry, 5, "member record")
        state = _STATES.get(f[3]) if type(f[3]) is int else None
        if state is None:
            raise Malformed(f"unknown member state {f[3]!r}")
        records.append(
            MemberRecord(
                _str(f[0], ID_CHARS_MAX, "node_id"),
                _str(f[1], ADDRESS_CHARS_MAX, "address"),
                _int(f[2], "incarnation"),
                state,
                _meta(f[4], meta_bytes_max),
            )
        )
    return PushPullFrame(
        kind,
        _str(raw[0], ID_CHARS_MAX, "sender_id"),
        _str(raw[1], ADDRESS_CHARS_MAX, "sender_address"),
        _int(raw[2], "packet_number"),
        PushPullBody(_bool(raw[3], "join"), tuple(records)),
        _int(raw[5], "in_reply_to"),
    )


# ------------------------------------------------------------------------------------------------ replay


@dataclass(eq=False, slots=True)
class ReplayGuard:
    """Sliding-window replay filter keyed by (sender, channel); bounded in senders and window size."""

    window: int = REPLAY_WINDOW
    forget_after_ms: int = REPLAY_FORGET_MS
    senders_max: int = REPLAY_SENDERS_MAX
    # key -> [highest number, bitmap of seen numbers below highest (bit i = highest - i), last seen ms]
    _seen: dict[tuple[str, int], list[int]] = field(default_factory=dict, init=False)

    def check(self, sender_id: str, channel: int, number: int, now_ms: int) -> None:
        """Accept ``number`` once; raise :class:`Replayed` for repeats and numbers older than the window."""
        key = (sender_id, channel)
        entry = self._seen.get(key)
        if entry is None or now_ms - entry[2] > self.forget_after_ms:
            if entry is None and len(self._seen) >= self.senders_max:
                oldest = min(self._seen, key=lambda k: self._seen[k][2])
                del self._seen[oldest]
            self._seen[key] = [number, 1, now_ms]
            return
        highest, bitmap, _ = entry
        if number > highest:
            shift = number - highest
            bitmap = ((bitmap << shift) | 1) & ((1 << self.window) - 1) if shift < self.window else 1
            entry[0], entry[1], entry[2] = number, bitmap, now_ms
            return
        offset = highest - number
        if offset >= self.window:
            raise Replayed(f"packet {number} from {sender_id} is older than the replay window")
        if bitmap >> offset & 1:
            raise Replayed(f"packet {number} from {sender_id} was already received")
        entry[1] = bitmap | (1 << offset)
        entry[2] = now_ms

    def forget(self, sender_id: str) -> None:
        for channel in (KIND_DATAGRAM, KIND_PUSH_PULL_REQUEST, KIND_PUSH_PULL_RESPONSE):
            self._seen.pop((sender_id, channel), None)

    def __len__(self) -> int:
        return len(self._seen)
