"""The errors of the node-to-node Raft wire format (:mod:`raftlog.consensus.wire` and the modules beside
it): ``WireError`` and its family. Every one of them is fatal for the connection it arises on: the hub
closes it, and none travels further than the hub thread.
"""

from __future__ import annotations

from raftlog.errors import RaftlogError, with_fields


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
    """A message that does not match :data:`~raftlog.consensus.wire_messages.MESSAGE_TYPES` (on encode: a
    bug; on decode: a bad peer)."""


@with_fields
class UnknownMessageType(MalformedMessage):
    """A message type that :data:`~raftlog.consensus.wire_messages.MESSAGE_TYPES` does not describe."""

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
