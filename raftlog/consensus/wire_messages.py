"""The Raft messages on the wire: their schema and their codec. Pure: no sockets, clocks or threads.

Owns :data:`WIRE_VERSION` and :data:`SCHEMA_FINGERPRINT` (both exchanged in the handshake of
:mod:`raftlog.consensus.wire`), :data:`MESSAGE_TYPES` (every message type pysyncobj 0.3.17 and our core
send, field by field: code, value kind, required or optional), the per-kind checks of a value's exact
Python shape, :func:`encode_message` / :func:`decode_message` (one message as a msgpack map of field
codes), and the checks of a node id and a group id. How messages are batched per group is
:mod:`raftlog.consensus.wire_batch`; the whole format is described in :mod:`raftlog.consensus.wire`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, cast

import msgpack

from raftlog.consensus.messages import RaftMessage
from raftlog.consensus.wire_errors import MalformedMessage, UnknownMessageType
from raftlog.packing import pack

WIRE_VERSION = 5
"""Bumped on any change to framing, handshake or :data:`MESSAGE_TYPES`. 2: frame MACs are GMAC. 3: quiescence
(``append_entries.quiesce``, ``next_node_idx.quiet``, ``wake``, ``leader_gone``). 4: pre-vote
(``request_vote.pre``, ``response_vote.pre``). 5: session frame bodies are encrypted (AES-256-GCM). It lives
with the schema, below :mod:`raftlog.consensus.wire`, because :func:`schema_fingerprint` digests it."""

NODE_ID_BYTES_MAX = 255
GROUP_ID_BYTES_MAX = 255

_UINT64_MAX = (1 << 64) - 1


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
    """Turn one unpacked message object (from a BATCH body, :mod:`raftlog.consensus.wire_batch`) back into
    the dict SyncObj expects: a :data:`raftlog.consensus.messages.RaftMessage`, every field checked against
    its schema here."""
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


# --------------------------------------------------------------------------------------------- ids


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
