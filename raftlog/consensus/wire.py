"""The node-to-node Raft wire format: a pure codec, no sockets, clocks or threads.

Everything a :mod:`raftlog.consensus.hub` connection carries is defined here, so it can be tested
without I/O and reviewed in one place. msgpack only; nothing is ever unpickled.

Framing (all integers big-endian)::

    frame   := length:u32 | kind:u8 | body | tag
    length  := 1 + len(body) + len(tag)     (checked against ``frame_bytes_max`` before buffering)
    body    := handshake frames: msgpack in clear; session frames: the AES-256-GCM encryption of the
               msgpack body under the session key of this direction and the nonce
               ``seq:u64 | kind:u8 | 000`` (12 bytes)
    tag     := the 16-byte GCM tag of that encryption; absent on the handshake frames

Handshake (mutual challenge-response over a shared cluster secret; ``transcript`` binds the protocol
version, the message-schema fingerprint, both node ids and both fresh 32-byte nonces)::

    dialer   -> acceptor  HELLO      {v, schema, node=dialer_id, to=acceptor_id, nonce=Nd}
    acceptor -> dialer    CHALLENGE  {v, schema, node=acceptor_id, nonce=Na,
                                      proof=HMAC(secret, "acceptor-proof" | transcript)}
    dialer   -> acceptor  AUTH       {proof=HMAC(secret, "dialer-proof" | transcript)}

Each side then derives one key per direction (``HMAC(secret, "key dialer->acceptor" | transcript)`` and
the reverse). ``seq`` is an implicit per-direction frame counter starting at 0, so a frame cannot be
injected, reordered, replayed within a connection or replayed into another one (fresh nonces, fresh
keys). Session frames are encrypted as well as authenticated, always (one mode: GCM encryption costs a
few GB/s per core with AES-NI, far below what msgpack and fsync cost per byte), so Raft entries,
group ids and everything else after the handshake are unreadable on the wire. The handshake frames are
in clear: they carry the protocol version, the schema fingerprint, both node ids, nonces and HMAC
proofs, none of which lets a listener forge or read a session.

After the handshake a connection carries BATCH frames (and PING frames when idle). A BATCH body is a
msgpack stream of records::

    [ref, "group-id"]   declare: on this connection and direction, ``ref`` (0, 1, 2... in order) names a
                        Raft group
    ref                 the next object is a message for the group declared as ``ref``
    {0: type, f: v...}  a pysyncobj message: type code and field codes from :data:`MESSAGE_TYPES`

Message codec: every dict pysyncobj 0.3.17 sends is described field by field in :data:`MESSAGE_TYPES`
(code, value kind, required or optional). Decoding validates every field and restores the exact Python
shapes SyncObj indexes and compares: ``entries`` is a list of ``(command: bytes, idx, term)`` tuples and
``serialized`` is ``None``, ``False`` or a ``(data: bytes, is_first, is_last)`` tuple. Unknown types,
unknown fields, missing fields and wrong kinds raise :class:`MalformedMessage`. The schema is part of the
protocol: its fingerprint is exchanged in the handshake, so nodes built with different schemas refuse
each other instead of mis-decoding. To carry a new message type or field, extend :data:`MESSAGE_TYPES`
(never reuse a code) and bump :data:`WIRE_VERSION`.
"""

from __future__ import annotations

import hashlib
import hmac
import socket
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, cast

import msgpack
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from raftlog.consensus.messages import RaftMessage
from raftlog.errors import RaftlogError, with_fields
from raftlog.packing import pack

WIRE_VERSION = 5
"""Bumped on any change to framing, handshake or :data:`MESSAGE_TYPES`. 2: frame MACs are GMAC. 3: quiescence
(``append_entries.quiesce``, ``next_node_idx.quiet``, ``wake``, ``leader_gone``). 4: pre-vote
(``request_vote.pre``, ``response_vote.pre``). 5: session frame bodies are encrypted (AES-256-GCM)."""

NONCE_BYTES = 32
KEY_BYTES = 32  # session keys (AES-256) and handshake proofs (HMAC-SHA256)
MAC_BYTES = 16  # the GCM tag closing every session frame (it authenticates the encrypted body)
FRAME_BYTES_MAX_DEFAULT = 64 * 1024 * 1024
HANDSHAKE_FRAME_BYTES_MAX = 4096
NODE_ID_BYTES_MAX = 255
GROUP_ID_BYTES_MAX = 255
GROUP_REFS_MAX = 1 << 20
"""Distinct groups one direction of one connection may declare (bounds the interning tables)."""

_HEADER = struct.Struct(">IB")
_GCM_NONCE = struct.Struct(">QB3x")  # seq, kind: unique per key, as a session never reuses a seq
_UINT64_MAX = (1 << 64) - 1

# Frame kinds.
KIND_HELLO = 1
KIND_CHALLENGE = 2
KIND_AUTH = 3
KIND_BATCH = 16
KIND_PING = 17
HANDSHAKE_KINDS = frozenset({KIND_HELLO, KIND_CHALLENGE, KIND_AUTH})
SESSION_KINDS = frozenset({KIND_BATCH, KIND_PING})


# ---------------------------------------------------------------------------------------------- errors


class WireError(RaftlogError):
    """Base of every error raised by the wire codec. The transport closes the connection on any of them."""


class MalformedFrame(WireError):
    """Bytes that are not a valid frame or batch: bad header, unknown kind, undecodable msgpack."""


@with_fields
class FrameTooLarge(WireError):
    """A frame whose declared length exceeds the limit; raised before any buffer of that size exists."""

    frame_bytes: int
    frame_bytes_max: int
    template = "frame of {frame_bytes} bytes exceeds frame_bytes_max={frame_bytes_max}"


class MalformedMessage(WireError):
    """A message that does not match :data:`MESSAGE_TYPES` (on encode: a bug; on decode: a bad peer)."""


@with_fields
class UnknownMessageType(MalformedMessage):
    """A message type that :data:`MESSAGE_TYPES` does not describe."""

    message_type: object
    template = "unknown message type {message_type!r}"


class AuthenticationFailed(WireError):
    """A handshake proof or a frame MAC did not verify, or the peer is not who it claims to be."""


@with_fields
class ProtocolMismatch(WireError):
    """The peer speaks another wire version or message schema."""

    ours: object
    theirs: object
    template = "protocol mismatch: ours {ours!r}, peer's {theirs!r}"


# ------------------------------------------------------------------------------------- message schema


class Kind(Enum):
    """The value kinds a message field may hold."""

    UINT = "uint"  # int (never bool), 0 <= v < 2**64: terms, indexes, request ids
    INT = "int"  # int (never bool), signed 64-bit: FAIL_REASON codes
    BOOL = "bool"
    BYTES = "bytes"
    TRANSMISSION = "transmission"  # 'start' | 'process' | 'finish'
    ENTRIES = "entries"  # list of (command: bytes, idx: uint, term: uint)
    SNAPSHOT_CHUNK = "snapshot_chunk"  # None | False | (data: bytes, is_first: bool, is_last: bool)


@dataclass(frozen=True)
class Field:
    code: int
    name: str
    kind: Kind
    required: bool


@dataclass(frozen=True)
class MessageType:
    code: int
    name: str
    fields: tuple[Field, ...]


def _f(code: int, name: str, kind: Kind, required: bool = True) -> Field:
    return Field(code, name, kind, required)


_U, _I, _B, _BY = Kind.UINT, Kind.INT, Kind.BOOL, Kind.BYTES

MESSAGE_TYPES: tuple[MessageType, ...] = (
    # syncobj.py:643 candidate -> all
    MessageType(
        1,
        "request_vote",
        (
            _f(1, "term", _U),
            _f(2, "last_log_index", _U),
            _f(3, "last_log_term", _U),
            # raftlog.consensus.core pre-vote: would you vote for me in ``term``? (nothing persisted)
            _f(4, "pre", _B, required=False),
        ),
    ),
    # syncobj.py:940; ``pre``: a pre-vote granted for ``term``
    MessageType(2, "response_vote", (_f(1, "term", _U), _f(2, "pre", _B, required=False))),
    # syncobj.py:1286-1317: regular (prevLogIdx/prevLogTerm, entries), chunked big entry
    # (transmission/data) and snapshot install (serialized)
    MessageType(
        3,
        "append_entries",
        (
            _f(1, "term", _U),
            _f(2, "commit_index", _U),
            _f(3, "entries", Kind.ENTRIES, required=False),
            _f(4, "prevLogIdx", _U, required=False),
            _f(5, "prevLogTerm", _U, required=False),
            _f(6, "transmission", Kind.TRANSMISSION, required=False),
            _f(7, "data", _BY, required=False),
            _f(8, "serialized", Kind.SNAPSHOT_CHUNK, required=False),
            # raftlog.consensus.core: a leader with nothing in flight asks its followers to go quiet
            _f(9, "quiesce", _B, required=False),
        ),
    ),
    # syncobj.py:1101; raftlog.consensus.core adds the replier's term so a stale ack can be ignored
    MessageType(
        4,
        "next_node_idx",
        (
            _f(1, "next_node_idx", _U),
            _f(2, "reset", _B),
            _f(3, "success", _B),
            _f(4, "term", _U, required=False),
            _f(5, "quiet", _B, required=False),  # the follower went quiet on a quiescing heartbeat
        ),
    ),
    # syncobj.py:556 follower forwards a command to the leader
    MessageType(5, "apply_command", (_f(1, "command", _BY), _f(2, "request_id", _U, required=False))),
    # syncobj.py:534-569, 1090
    MessageType(
        6,
        "apply_command_response",
        (
            _f(1, "request_id", _U),
            _f(2, "error", _I, required=False),
            _f(3, "log_idx", _U, required=False),
            _f(4, "log_term", _U, required=False),
        ),
    ),
    # syncobj.py:449 leadership transfer
    MessageType(7, "timeout_now", (_f(1, "term", _U),)),
    # raftlog.consensus.core quiescence: a replica that knows no leader asks a quiet leader to heartbeat;
    # a leader replica that stops tells its quiet followers not to wait for it
    MessageType(8, "wake", (_f(1, "term", _U),)),
    MessageType(9, "leader_gone", (_f(1, "term", _U),)),
)

_BY_NAME: dict[str, MessageType] = {t.name: t for t in MESSAGE_TYPES}
_BY_CODE: dict[int, MessageType] = {t.code: t for t in MESSAGE_TYPES}
_REQUIRED: dict[int, frozenset[int]] = {
    t.code: frozenset(f.code for f in t.fields if f.required) for t in MESSAGE_TYPES
}
_TYPE_KEY = 0
_TRANSMISSIONS = frozenset({"start", "process", "finish"})


def _check_schema() -> None:
    if len(_BY_NAME) != len(MESSAGE_TYPES) or len(_BY_CODE) != len(MESSAGE_TYPES):
        raise MalformedMessage(f"duplicate message type name or code in MESSAGE_TYPES: {MESSAGE_TYPES!r}")
    for t in MESSAGE_TYPES:
        codes = [f.code for f in t.fields]
        if len(set(codes)) != len(codes) or _TYPE_KEY in codes:
            raise MalformedMessage(f"message type {t.name!r} has duplicate or reserved field codes {codes}")


_check_schema()


def schema_fingerprint() -> bytes:
    """A digest of :data:`WIRE_VERSION` and :data:`MESSAGE_TYPES`; both handshake sides must agree."""
    described = [
        WIRE_VERSION,
        [
            [t.code, t.name, [[f.code, f.name, f.kind.value, f.required] for f in t.fields]]
            for t in MESSAGE_TYPES
        ],
    ]
    return hashlib.sha256(msgpack.packb(described, use_bin_type=True)).digest()[:16]


SCHEMA_FINGERPRINT = schema_fingerprint()


def _is_uint(value: object) -> bool:
    return type(value) is int and 0 <= value <= _UINT64_MAX


def _is_int(value: object) -> bool:
    return type(value) is int and -(1 << 63) <= value < (1 << 63)


def _entries_ok(entries: list[Any]) -> bool:
    """Every entry is a ``(bytes, uint, uint)`` tuple. Column-wise so the loops run in C: batches of
    hundreds of entries are the common case."""
    if not entries:
        return True
    if set(map(type, entries)) != {tuple} or set(map(len, entries)) != {3}:
        return False
    commands, indexes, terms = zip(*entries, strict=True)
    return (
        set(map(type, commands)) == {bytes}
        and set(map(type, indexes)) == {int}
        and set(map(type, terms)) == {int}
        and min(indexes) >= 0
        and max(indexes) <= _UINT64_MAX
        and min(terms) >= 0
        and max(terms) <= _UINT64_MAX
    )


def _entry_ok(entry: object) -> bool:
    return (
        type(entry) is tuple
        and len(entry) == 3
        and type(entry[0]) is bytes
        and _is_uint(entry[1])
        and _is_uint(entry[2])
    )


def _bool_ok(value: object) -> bool:
    return type(value) is bool


def _bytes_ok(value: object) -> bool:
    return type(value) is bytes


def _transmission_ok(value: object) -> bool:
    return type(value) is str and value in _TRANSMISSIONS


def _all_entries_ok(value: object) -> bool:
    return type(value) is list and _entries_ok(value)


def _snapshot_chunk_ok(value: object) -> bool:
    if value is None or value is False:
        return True
    return (
        type(value) is tuple
        and len(value) == 3
        and type(value[0]) is bytes
        and type(value[1]) is bool
        and type(value[2]) is bool
    )


def _entries_encodable(value: object) -> bool:
    """Encode-side check. The sender is our own SyncObj, so only the container and the first and last
    entry are checked (a shape drift is uniform); the receiver checks every entry."""
    return type(value) is list and (not value or (_entry_ok(value[0]) and _entry_ok(value[-1])))


# Per kind: whether a value has the exact Python shape pysyncobj uses for it (what a receiver checks).
_VALUE_OK: dict[Kind, Callable[[object], bool]] = {
    Kind.UINT: _is_uint,
    Kind.INT: _is_int,
    Kind.BOOL: _bool_ok,
    Kind.BYTES: _bytes_ok,
    Kind.TRANSMISSION: _transmission_ok,
    Kind.ENTRIES: _all_entries_ok,
    Kind.SNAPSHOT_CHUNK: _snapshot_chunk_ok,
}
_ENCODE_CHECK: dict[Kind, Callable[[object], bool]] = {**_VALUE_OK, Kind.ENTRIES: _entries_encodable}


def _restore_entries(value: object) -> list[Any]:
    """Validate decoded entries and return the shape SyncObj expects: msgpack decodes arrays as tuples
    (use_list=False), so each entry already is (command, idx, term); the outer sequence becomes a list,
    as in pysyncobj's journal slices."""
    if type(value) is not tuple:
        raise MalformedMessage(f"entries must be an array, got {type(value).__name__}")
    entries = list(value)
    if not _entries_ok(entries):
        raise MalformedMessage("entries must be [command: bin, idx: uint, term: uint] triples")
    return entries


# Per message type, per field: its code and its check, found with one lookup per field (the codec runs for
# every message, heartbeats included).
_ENCODE_FIELDS: dict[str, tuple[MessageType, dict[str, tuple[int, Callable[[object], bool], Field]]]] = {
    t.name: (t, {f.name: (f.code, _ENCODE_CHECK[f.kind], f) for f in t.fields}) for t in MESSAGE_TYPES
}
_DECODE_FIELDS: dict[int, tuple[MessageType, dict[int, tuple[str, Callable[[object], bool], Field]]]] = {
    t.code: (t, {f.code: (f.name, _VALUE_OK[f.kind], f) for f in t.fields}) for t in MESSAGE_TYPES
}


def encode_message(message: Mapping[str, Any]) -> bytes:
    """Encode one pysyncobj message dict. Raises :class:`MalformedMessage` (a bug in the caller or a
    message type this codec does not know yet) instead of sending something the peer cannot decode."""
    name = message.get("type")
    described = _ENCODE_FIELDS.get(name) if type(name) is str else None
    if described is None:
        raise UnknownMessageType(name)
    mtype, fields = described
    out: dict[int, Any] = {_TYPE_KEY: mtype.code}
    for key, value in message.items():
        if key == "type":
            continue
        field = fields.get(key)
        if field is None:
            raise MalformedMessage(f"message type {mtype.name!r} has no field {key!r}")
        code, check, described_field = field
        if not check(value):
            raise MalformedMessage(
                f"field {mtype.name}.{key} must be {described_field.kind.value},"
                f" got {type(value).__name__}: {value!r:.80}"
            )
        out[code] = value
    if not _REQUIRED[mtype.code] <= out.keys():
        missing = _REQUIRED[mtype.code] - out.keys()
        names = sorted(f.name for f in mtype.fields if f.code in missing)
        raise MalformedMessage(f"message type {mtype.name!r} lacks required fields {names}")
    try:
        packed = pack(out)
    except (TypeError, ValueError, OverflowError) as exc:
        raise MalformedMessage(f"message type {mtype.name!r} is not encodable: {exc}") from exc
    return packed


def decode_message(obj: object) -> RaftMessage:
    """Turn one unpacked message object (from :func:`_unpacker`) back into the dict SyncObj expects: a
    :data:`raftlog.consensus.messages.RaftMessage`, every field checked against its schema here."""
    if type(obj) is not dict:
        raise MalformedMessage(f"message must be a map, got {type(obj).__name__}")
    code = obj.get(_TYPE_KEY)
    described = _DECODE_FIELDS.get(code) if type(code) is int else None
    if described is None:
        raise UnknownMessageType(code)
    mtype, fields = described
    message: dict[str, Any] = {"type": mtype.name}
    for key, value in obj.items():
        if key == _TYPE_KEY:
            continue
        field = fields.get(key) if type(key) is int else None
        if field is None:
            raise MalformedMessage(f"message type {mtype.name!r} has no field code {key!r}")
        name, check, described_field = field
        if described_field.kind is Kind.ENTRIES:
            message[name] = _restore_entries(value)
        elif check(value):
            message[name] = value
        else:
            raise MalformedMessage(
                f"value of kind {described_field.kind.value} has the wrong shape: {type(value).__name__}"
            )
    if not _REQUIRED[mtype.code] <= obj.keys():
        missing = _REQUIRED[mtype.code] - obj.keys()
        names = sorted(f.name for f in mtype.fields if f.code in missing)
        raise MalformedMessage(f"message type {mtype.name!r} lacks required fields {names}")
    return cast(RaftMessage, message)  # as checked above (tests/consensus/test_raft_messages.py)


def _unpacker(limit_bytes: int) -> msgpack.Unpacker:
    return msgpack.Unpacker(
        use_list=False,
        raw=False,
        strict_map_key=False,
        max_buffer_size=max(limit_bytes, 1),
    )


def _unpack_one(data: bytes, what: str) -> object:
    try:
        return msgpack.unpackb(data, use_list=False, raw=False, strict_map_key=False)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise MalformedFrame(f"undecodable {what}: {exc}") from exc


# ----------------------------------------------------------------------------------------- batches


def check_group_id(group: object) -> str:
    """A group id is a non-empty str of at most :data:`GROUP_ID_BYTES_MAX` UTF-8 bytes."""
    if type(group) is not str or not group or len(group.encode()) > GROUP_ID_BYTES_MAX:
        raise MalformedMessage(
            f"group id must be a non-empty str of <= {GROUP_ID_BYTES_MAX} bytes: {group!r}"
        )
    return group


def check_node_id(node_id: object) -> str:
    """A node id is a non-empty str of at most :data:`NODE_ID_BYTES_MAX` UTF-8 bytes."""
    if type(node_id) is not str or not node_id or len(node_id.encode()) > NODE_ID_BYTES_MAX:
        raise MalformedMessage(
            f"node id must be a non-empty str of <= {NODE_ID_BYTES_MAX} bytes: {node_id!r}"
        )
    return node_id


class BatchEncoder:
    """The sending half of one connection's group interning; builds BATCH bodies. One per connection."""

    def __init__(self) -> None:
        self._refs: dict[str, int] = {}

    def encode(self, items: Iterable[tuple[str, bytes]]) -> bytes:
        """``items`` are ``(group, encoded message)`` pairs (messages from :func:`encode_message`)."""
        return b"".join(self.encode_parts(items))

    def encode_parts(self, items: Iterable[tuple[str, bytes]]) -> list[bytes]:
        """What :meth:`encode` gives, as the pieces it joins (for :meth:`Session.seal_into`)."""
        parts: list[bytes] = []
        refs = self._refs
        for group, payload in items:
            ref = refs.get(group)
            if ref is None:
                ref = len(refs)
                if ref >= GROUP_REFS_MAX:
                    raise MalformedMessage(
                        f"more than GROUP_REFS_MAX={GROUP_REFS_MAX} groups on one connection"
                    )
                refs[group] = ref
                parts.append(msgpack.packb([ref, group]))
            parts.append(msgpack.packb(ref))
            parts.append(payload)
        return parts


class BatchDecoder:
    """The receiving half of one connection's group interning; parses BATCH bodies. One per connection."""

    def __init__(self) -> None:
        self._groups: list[str] = []

    def decode(self, body: bytes | memoryview) -> list[tuple[str, RaftMessage]]:
        unpacker = _unpacker(len(body))
        unpacker.feed(body)
        out: list[tuple[str, RaftMessage]] = []
        groups = self._groups
        expecting_message_for: str | None = None
        try:
            for obj in unpacker:
                if expecting_message_for is not None:
                    out.append((expecting_message_for, decode_message(obj)))
                    expecting_message_for = None
                elif type(obj) is int:
                    if not 0 <= obj < len(groups):
                        raise MalformedFrame(f"undeclared group ref {obj} (declared: {len(groups)})")
                    expecting_message_for = groups[obj]
                elif type(obj) is tuple and len(obj) == 2 and type(obj[0]) is int:
                    ref, group = obj
                    if ref != len(groups) or ref >= GROUP_REFS_MAX:
                        raise MalformedFrame(
                            f"group declaration out of order: ref {ref}, expected {len(groups)}"
                        )
                    try:
                        groups.append(check_group_id(group))
                    except MalformedMessage as exc:
                        raise MalformedFrame(str(exc)) from exc
                else:
                    raise MalformedFrame(f"unexpected batch record of type {type(obj).__name__}")
        except (ValueError, TypeError, msgpack.UnpackException) as exc:
            raise MalformedFrame(f"undecodable batch: {exc}") from exc
        if expecting_message_for is not None:
            raise MalformedFrame(
                f"batch ends after a group ref without its message ({expecting_message_for!r})"
            )
        return out


# ------------------------------------------------------------------------------------------ framing


def frame(kind: int, body: bytes, mac: bytes = b"") -> bytes:
    """Serialize one frame (the MAC, if any, comes from :class:`Session`)."""
    return b"".join((_HEADER.pack(1 + len(body) + len(mac), kind), body, mac))


LARGE_FRAME_BYTES = 64 * 1024


class FrameReader:
    """Incremental frame splitter for one connection's inbound byte stream.

    Checks every declared length against the limit as soon as its 4 bytes arrive, before buffering
    the rest. Returns ``(kind, payload)`` where payload is body plus MAC (MAC checked by :class:`Session`).
    A frame of at least ``large_frame_bytes`` (a batch of entries) is assembled in one buffer of its
    declared size, which :meth:`receive` reads the socket straight into; its payload is a view of that
    buffer. Small frames come many to a read and are split out of a shared buffer.
    """

    def __init__(self, frame_bytes_max: int, large_frame_bytes: int = LARGE_FRAME_BYTES) -> None:
        if frame_bytes_max < HANDSHAKE_FRAME_BYTES_MAX:
            raise MalformedFrame(f"frame_bytes_max={frame_bytes_max} below {HANDSHAKE_FRAME_BYTES_MAX}")
        self._buffer = bytearray()
        self._large: bytearray | None = None  # a large frame under way (length, kind, payload)
        self._filled = 0  # bytes of it received
        self.frame_bytes_max = frame_bytes_max
        self._large_frame_bytes = large_frame_bytes

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer) + self._filled

    def feed(self, data: bytes | memoryview) -> None:
        """Append received bytes; then call :meth:`next_frame` until it returns None."""
        large = self._large
        if large is None:
            self._buffer += data
            return
        take = min(len(data), len(large) - self._filled)
        with memoryview(data) as view:
            large[self._filled : self._filled + take] = view[:take]
            self._buffer += view[take:]  # what follows the large frame
        self._filled += take

    def receive(self, sock: socket.socket, chunk_bytes: int) -> int:
        """One read from ``sock``: the rest of a large frame under way straight into its buffer, else up
        to ``chunk_bytes``. Returns how many bytes arrived (0: the peer closed the connection)."""
        large = self._large
        if large is None:
            data = sock.recv(chunk_bytes)
            self._buffer += data
            return len(data)
        with memoryview(large) as view:
            count = sock.recv_into(view[self._filled :])
        self._filled += count
        return count

    def next_frame(self) -> tuple[int, bytes | memoryview] | None:
        """The next complete frame, or None. Checks the declared length against the current limit
        (which the caller may change between frames, e.g. once a handshake completes)."""
        large = self._large
        if large is not None:
            if self._filled < len(large):
                return None
            self._large, self._filled = None, 0
            return large[4], memoryview(large)[_HEADER.size :]
        buffer = self._buffer
        available = len(buffer)
        if available < 4:
            return None
        (length,) = struct.unpack_from(">I", buffer, 0)
        if length > self.frame_bytes_max:
            raise FrameTooLarge(length, self.frame_bytes_max)
        if length < 1:
            raise MalformedFrame("frame length 0 (no kind byte)")
        if available - 4 < length:
            if 4 + length >= self._large_frame_bytes:  # everything buffered belongs to this frame
                large = bytearray(4 + length)
                large[:available] = buffer
                self._large, self._filled = large, available
                buffer.clear()
            return None
        kind = buffer[4]
        with memoryview(buffer) as view:
            payload = bytes(view[_HEADER.size : 4 + length])
        del buffer[: 4 + length]
        return kind, payload

    def frames(self, data: bytes) -> list[tuple[int, bytes | memoryview]]:
        """Feed ``data`` and return every complete frame (for callers that never change the limit)."""
        self.feed(data)
        out: list[tuple[int, bytes | memoryview]] = []
        while (item := self.next_frame()) is not None:
            out.append(item)
        return out


class Session:
    """Per-connection AEAD state after a successful handshake: one key and one sequence per direction.
    Session frames are encrypted and authenticated (AES-256-GCM)."""

    def __init__(self, send_key: bytes, receive_key: bytes) -> None:
        if len(send_key) != KEY_BYTES or len(receive_key) != KEY_BYTES or send_key == receive_key:
            raise AuthenticationFailed("session keys must be two distinct 32-byte keys")
        self._send = AESGCM(send_key)
        self._receive = AESGCM(receive_key)
        self.send_seq = 0
        self.receive_seq = 0

    def seal(self, kind: int, body: bytes) -> bytes:
        """Build the next encrypted and authenticated frame in the send direction."""
        sealed = self._send.encrypt(self._next_nonce(kind), body, b"")  # ciphertext | tag
        return b"".join((_HEADER.pack(1 + len(sealed), kind), sealed))

    def seal_into(self, buffer: bytearray, kind: int, parts: Sequence[bytes]) -> int:
        """Append the next encrypted and authenticated frame, whose body is ``parts`` joined, to
        ``buffer``: the pieces are copied once, into the buffer, and encrypted there in place (no joined
        body). Returns the frame's size as its length field counts it (kind, body and tag)."""
        body_bytes = sum(len(part) for part in parts)
        size = 1 + body_bytes + MAC_BYTES
        nonce = self._next_nonce(kind)
        buffer += _HEADER.pack(size, kind)
        start = len(buffer)
        for part in parts:
            buffer += part
        buffer += bytes(MAC_BYTES)
        with memoryview(buffer) as view, view[start : start + body_bytes] as body, view[start:] as out:
            self._send.encrypt_into(nonce, body, b"", out)
        return size

    def _next_nonce(self, kind: int) -> bytes:
        if kind not in SESSION_KINDS:
            raise MalformedFrame(f"kind {kind} is not a session frame kind")
        if self.send_seq > _UINT64_MAX:
            raise MalformedFrame("2**64 frames sent on one connection: the nonce would repeat")
        nonce = _GCM_NONCE.pack(self.send_seq, kind)
        self.send_seq += 1
        return nonce

    def open(self, kind: int, payload: bytes | memoryview) -> memoryview:
        """Verify and decrypt the next inbound frame; returns its body in clear. Any failure is fatal for
        the connection."""
        if kind not in SESSION_KINDS:
            raise MalformedFrame(f"unexpected frame kind {kind} on an authenticated connection")
        if len(payload) < MAC_BYTES:
            raise MalformedFrame(f"frame of {len(payload)} bytes is shorter than its MAC")
        try:
            body = self._receive.decrypt(_GCM_NONCE.pack(self.receive_seq, kind), payload, b"")
        except InvalidTag:
            raise AuthenticationFailed(
                f"bad MAC on frame seq {self.receive_seq} (forged, replayed or reordered)"
            ) from None
        self.receive_seq += 1
        return memoryview(body)


# ---------------------------------------------------------------------------------------- handshake


def _transcript(dialer_id: str, acceptor_id: str, dialer_nonce: bytes, acceptor_nonce: bytes) -> bytes:
    packed: bytes = msgpack.packb(
        [
            b"raftlog-wire",
            WIRE_VERSION,
            SCHEMA_FINGERPRINT,
            dialer_id,
            acceptor_id,
            dialer_nonce,
            acceptor_nonce,
        ],
        use_bin_type=True,
    )
    return packed


def _mac(secret: bytes, label: bytes, transcript: bytes) -> bytes:
    return hmac.digest(secret, label + b"\x00" + transcript, "sha256")


def _check_secret(secret: bytes) -> None:
    if type(secret) is not bytes or len(secret) < 16:
        raise AuthenticationFailed("the cluster secret must be bytes of at least 16 bytes")


def _check_nonce(nonce: object) -> bytes:
    if type(nonce) is not bytes or len(nonce) != NONCE_BYTES:
        raise MalformedFrame(f"nonce must be {NONCE_BYTES} bytes")
    return nonce


def _parse_map(kind: int, payload: bytes, expected_kind: int, what: str) -> dict[Any, Any]:
    if kind != expected_kind:
        raise MalformedFrame(f"expected {what} frame (kind {expected_kind}), got kind {kind}")
    if len(payload) > HANDSHAKE_FRAME_BYTES_MAX:
        raise FrameTooLarge(len(payload), HANDSHAKE_FRAME_BYTES_MAX)
    obj = _unpack_one(payload, what)
    if type(obj) is not dict:
        raise MalformedFrame(f"{what} must be a map")
    return obj


def _check_versions(obj: Mapping[Any, Any]) -> None:
    if obj.get("v") != WIRE_VERSION:
        raise ProtocolMismatch(WIRE_VERSION, obj.get("v"))
    if obj.get("schema") != SCHEMA_FINGERPRINT:
        raise ProtocolMismatch(SCHEMA_FINGERPRINT.hex(), repr(obj.get("schema")))


class DialerHandshake:
    """The connecting side. ``hello()`` first; then ``on_challenge()`` returns the AUTH frame and session."""

    def __init__(self, secret: bytes, self_id: str, peer_id: str, nonce: bytes) -> None:
        _check_secret(secret)
        self._secret = secret
        self.self_id = check_node_id(self_id)
        self.peer_id = check_node_id(peer_id)
        self._nonce = _check_nonce(nonce)

    def hello(self) -> bytes:
        body = msgpack.packb(
            {
                "v": WIRE_VERSION,
                "schema": SCHEMA_FINGERPRINT,
                "node": self.self_id,
                "to": self.peer_id,
                "nonce": self._nonce,
            },
            use_bin_type=True,
        )
        return frame(KIND_HELLO, body)

    def on_challenge(self, kind: int, payload: bytes) -> tuple[bytes, Session]:
        obj = _parse_map(kind, payload, KIND_CHALLENGE, "challenge")
        _check_versions(obj)
        if obj.get("node") != self.peer_id:
            raise AuthenticationFailed(
                f"dialed {self.peer_id!r} but the acceptor says it is {obj.get('node')!r}"
            )
        acceptor_nonce = _check_nonce(obj.get("nonce"))
        if acceptor_nonce == self._nonce:
            raise AuthenticationFailed("acceptor echoed our nonce")
        transcript = _transcript(self.self_id, self.peer_id, self._nonce, acceptor_nonce)
        proof = obj.get("proof")
        if type(proof) is not bytes or not hmac.compare_digest(
            proof, _mac(self._secret, b"acceptor-proof", transcript)
        ):
            raise AuthenticationFailed(
                f"acceptor {self.peer_id!r} failed the challenge (wrong cluster secret?)"
            )
        auth = frame(
            KIND_AUTH,
            msgpack.packb({"proof": _mac(self._secret, b"dialer-proof", transcript)}, use_bin_type=True),
        )
        session = Session(
            send_key=_mac(self._secret, b"key dialer->acceptor", transcript),
            receive_key=_mac(self._secret, b"key acceptor->dialer", transcript),
        )
        return auth, session


class AcceptorHandshake:
    """The accepting side. ``on_hello()`` returns the CHALLENGE frame; ``on_auth()`` returns the session.

    ``is_known_peer`` decides whether a claimed dialer id may connect at all (checked before any proof
    is computed, so unknown ids learn nothing).
    """

    def __init__(
        self, secret: bytes, self_id: str, nonce: bytes, is_known_peer: Callable[[str], bool]
    ) -> None:
        _check_secret(secret)
        self._secret = secret
        self.self_id = check_node_id(self_id)
        self._nonce = _check_nonce(nonce)
        self._is_known_peer = is_known_peer
        self.peer_id: str | None = None
        self._transcript: bytes | None = None

    def on_hello(self, kind: int, payload: bytes) -> bytes:
        obj = _parse_map(kind, payload, KIND_HELLO, "hello")
        _check_versions(obj)
        claimed = obj.get("node")
        try:
            peer_id = check_node_id(claimed)
        except MalformedMessage as exc:
            raise MalformedFrame(str(exc)) from exc
        if obj.get("to") != self.self_id:
            raise AuthenticationFailed(
                f"peer {peer_id!r} meant to reach {obj.get('to')!r}, not {self.self_id!r}"
            )
        if peer_id == self.self_id or not self._is_known_peer(peer_id):
            raise AuthenticationFailed(f"unknown peer id {peer_id!r}")
        dialer_nonce = _check_nonce(obj.get("nonce"))
        if dialer_nonce == self._nonce:
            raise AuthenticationFailed("dialer echoed our nonce")
        self.peer_id = peer_id
        self._transcript = _transcript(peer_id, self.self_id, dialer_nonce, self._nonce)
        body = msgpack.packb(
            {
                "v": WIRE_VERSION,
                "schema": SCHEMA_FINGERPRINT,
                "node": self.self_id,
                "nonce": self._nonce,
                "proof": _mac(self._secret, b"acceptor-proof", self._transcript),
            },
            use_bin_type=True,
        )
        return frame(KIND_CHALLENGE, body)

    def on_auth(self, kind: int, payload: bytes) -> Session:
        if self._transcript is None:
            raise MalformedFrame("auth frame before hello")
        obj = _parse_map(kind, payload, KIND_AUTH, "auth")
        proof = obj.get("proof")
        if type(proof) is not bytes or not hmac.compare_digest(
            proof, _mac(self._secret, b"dialer-proof", self._transcript)
        ):
            raise AuthenticationFailed(
                f"dialer {self.peer_id!r} failed the challenge (wrong cluster secret?)"
            )
        return Session(
            send_key=_mac(self._secret, b"key acceptor->dialer", self._transcript),
            receive_key=_mac(self._secret, b"key dialer->acceptor", self._transcript),
        )
