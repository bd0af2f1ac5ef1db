"""The node-to-node Raft wire format: a pure codec, no sockets, clocks or threads.

Everything a :mod:`raftlog.consensus.hub` connection carries is described here, so it can be reviewed in
one place, and defined in four modules, each tested without I/O: this one owns the framing
(:func:`frame`, :class:`FrameReader`), the encrypted session (:class:`Session`) and the handshake
(:class:`DialerHandshake`, :class:`AcceptorHandshake`); :mod:`raftlog.consensus.wire_batch` owns the
BATCH body; :mod:`raftlog.consensus.wire_messages` owns the message schema and codec, :data:`WIRE_VERSION`
and the schema fingerprint; :mod:`raftlog.consensus.wire_errors` owns the ``WireError`` family. msgpack
only; nothing is ever unpickled.

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

Both HELLO and CHALLENGE may carry ``levels``, the feature levels the sender's code supports (a map of
at most 32 names to levels, ``check_levels``), so that a node can keep out a peer of an earlier release
once the cluster's levels are above what that peer announces (the hub's ``admit``). A node of release
0.1.0 sends none and ignores the key. The acceptor answers with its own only to a HELLO that carried
some, and the transcript then binds both maps (after the nonces), so neither can be altered or stripped
on the way without failing the proofs; a peer that announced none is judged as announcing nothing.

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
    {0: type, f: v...}  a pysyncobj message: type code and field codes from ``MESSAGE_TYPES``

Message codec (:mod:`raftlog.consensus.wire_messages`): every dict pysyncobj 0.3.17 sends is described
field by field in ``MESSAGE_TYPES`` (code, value kind, required or optional). Decoding validates every
field and restores the exact Python shapes SyncObj indexes and compares: ``entries`` is a list of
``(command: bytes, idx, term)`` tuples and ``serialized`` is ``None``, ``False`` or a ``(data: bytes,
is_first, is_last)`` tuple. Unknown types, unknown fields, missing fields and wrong kinds raise
``MalformedMessage``. The schema is part of the protocol: its fingerprint is exchanged in the handshake,
so nodes built with different schemas refuse each other instead of mis-decoding. To carry a new message
type or field, extend ``MESSAGE_TYPES`` (never reuse a code) and bump ``WIRE_VERSION``.
"""

from __future__ import annotations

import hmac
import socket
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgpack
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from raftlog.consensus.wire_errors import (
    AuthenticationFailed,
    FrameTooLarge,
    MalformedFrame,
    MalformedMessage,
    ProtocolMismatch,
)
from raftlog.consensus.wire_messages import SCHEMA_FINGERPRINT, WIRE_VERSION, check_node_id

NONCE_BYTES = 32
KEY_BYTES = 32  # session keys (AES-256) and handshake proofs (HMAC-SHA256)
MAC_BYTES = 16  # the GCM tag closing every session frame (it authenticates the encrypted body)
FRAME_BYTES_MAX_DEFAULT = 64 * 1024 * 1024
HANDSHAKE_FRAME_BYTES_MAX = 4096

_HEADER = struct.Struct(">IB")
_GCM_NONCE = struct.Struct(">QB3x")  # seq, kind: unique per key, as a session never reuses a seq
_SEQ_MAX = (1 << 64) - 1  # seq is a u64 in the GCM nonce

# Frame kinds.
KIND_HELLO = 1
KIND_CHALLENGE = 2
KIND_AUTH = 3
KIND_BATCH = 16
KIND_PING = 17
HANDSHAKE_KINDS = frozenset({KIND_HELLO, KIND_CHALLENGE, KIND_AUTH})
SESSION_KINDS = frozenset({KIND_BATCH, KIND_PING})


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
        if self.send_seq > _SEQ_MAX:
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


LEVELS_MAX = 32  # features a peer may announce
LEVEL_NAME_BYTES_MAX = 64
Levels = Mapping[str, int]


def _transcript(
    dialer_id: str,
    acceptor_id: str,
    dialer_nonce: bytes,
    acceptor_nonce: bytes,
    levels: tuple[Levels, Levels] | None = None,
) -> bytes:
    """What both proofs and keys are bound to; ``levels`` (the dialer's, the acceptor's) when both
    announced theirs (a transcript without them is release 0.1.0's, byte for byte)."""
    parts: list[object] = [
        b"raftlog-wire",
        WIRE_VERSION,
        SCHEMA_FINGERPRINT,
        dialer_id,
        acceptor_id,
        dialer_nonce,
        acceptor_nonce,
    ]
    if levels is not None:
        parts += [sorted(levels[0].items()), sorted(levels[1].items())]
    packed: bytes = msgpack.packb(parts, use_bin_type=True)
    return packed


def check_levels(levels: object) -> dict[str, int] | None:
    """An announced ``levels`` map as sent (None: none announced); MalformedFrame when it is not a map of
    at most ``LEVELS_MAX`` short names to levels."""
    if levels is None:
        return None
    if (
        type(levels) is not dict
        or len(levels) > LEVELS_MAX
        or not all(
            type(name) is str
            and 0 < len(name.encode("utf-8")) <= LEVEL_NAME_BYTES_MAX
            and type(level) is int
            and 0 <= level < 2**15
            for name, level in levels.items()
        )
    ):
        raise MalformedFrame(f"levels must be a map of at most {LEVELS_MAX} feature names to levels")
    return dict(levels)


def _mac(secret: bytes, label: bytes, transcript: bytes) -> bytes:
    return hmac.digest(secret, label + b"\x00" + transcript, "sha256")


def _check_secret(secret: bytes) -> None:
    if type(secret) is not bytes or len(secret) < 16:
        raise AuthenticationFailed("the cluster secret must be bytes of at least 16 bytes")


def _check_nonce(nonce: object) -> bytes:
    if type(nonce) is not bytes or len(nonce) != NONCE_BYTES:
        raise MalformedFrame(f"nonce must be {NONCE_BYTES} bytes")
    return nonce


def _unpack_one(data: bytes, what: str) -> object:
    try:
        return msgpack.unpackb(data, use_list=False, raw=False, strict_map_key=False)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise MalformedFrame(f"undecodable {what}: {exc}") from exc


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

    def __init__(
        self, secret: bytes, self_id: str, peer_id: str, nonce: bytes, levels: Levels | None = None
    ) -> None:
        """``levels``: the feature levels this node's code supports, announced to the peer (None: none)."""
        _check_secret(secret)
        self._secret = secret
        self.self_id = check_node_id(self_id)
        self.peer_id = check_node_id(peer_id)
        self._nonce = _check_nonce(nonce)
        self._levels = check_levels(None if levels is None else dict(levels))
        self.peer_levels: dict[str, int] | None = None  # what the acceptor announced (after the challenge)

    def hello(self) -> bytes:
        hello: dict[str, object] = {
            "v": WIRE_VERSION,
            "schema": SCHEMA_FINGERPRINT,
            "node": self.self_id,
            "to": self.peer_id,
            "nonce": self._nonce,
        }
        if self._levels is not None:
            hello["levels"] = self._levels
        return frame(KIND_HELLO, msgpack.packb(hello, use_bin_type=True))

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
        peer_levels = check_levels(obj.get("levels"))
        if peer_levels is not None and self._levels is None:
            raise MalformedFrame("the acceptor announced levels to a dialer that announced none")
        bound = None if peer_levels is None or self._levels is None else (self._levels, peer_levels)
        transcript = _transcript(self.self_id, self.peer_id, self._nonce, acceptor_nonce, bound)
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
        self.peer_levels = peer_levels
        return auth, session


class AcceptorHandshake:
    """The accepting side. ``on_hello()`` returns the CHALLENGE frame; ``on_auth()`` returns the session.

    ``is_known_peer`` decides whether a claimed dialer id may connect at all (checked before any proof
    is computed, so unknown ids learn nothing).
    """

    def __init__(
        self,
        secret: bytes,
        self_id: str,
        nonce: bytes,
        is_known_peer: Callable[[str], bool],
        levels: Levels | None = None,
    ) -> None:
        """``levels``: the feature levels this node's code supports, announced to a dialer that announced
        its own (None: none)."""
        _check_secret(secret)
        self._secret = secret
        self.self_id = check_node_id(self_id)
        self._nonce = _check_nonce(nonce)
        self._is_known_peer = is_known_peer
        self._levels = check_levels(None if levels is None else dict(levels))
        self.peer_id: str | None = None
        self.peer_levels: dict[str, int] | None = None  # what the dialer announced (after the hello)
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
        peer_levels = check_levels(obj.get("levels"))
        bound = None if peer_levels is None or self._levels is None else (peer_levels, self._levels)
        self.peer_id = peer_id
        self.peer_levels = peer_levels
        self._transcript = _transcript(peer_id, self.self_id, dialer_nonce, self._nonce, bound)
        challenge: dict[str, object] = {
            "v": WIRE_VERSION,
            "schema": SCHEMA_FINGERPRINT,
            "node": self.self_id,
            "nonce": self._nonce,
            "proof": _mac(self._secret, b"acceptor-proof", self._transcript),
        }
        if bound is not None:
            challenge["levels"] = self._levels
        return frame(KIND_CHALLENGE, msgpack.packb(challenge, use_bin_type=True))

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
