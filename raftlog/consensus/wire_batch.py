"""Batching: the BATCH frame body of :mod:`raftlog.consensus.wire`, a msgpack stream of group
declarations, group refs and messages encoded by :mod:`raftlog.consensus.wire_messages`, with group ids
interned per connection and direction (:class:`BatchEncoder` sends, :class:`BatchDecoder` receives). Pure:
no sockets, clocks or threads.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgpack

from raftlog.consensus.messages import RaftMessage
from raftlog.consensus.wire_errors import MalformedFrame, MalformedMessage
from raftlog.consensus.wire_messages import check_group_id, decode_message

GROUP_REFS_MAX = 1 << 20
"""Distinct groups one direction of one connection may declare (bounds the interning tables)."""


def _unpacker(limit_bytes: int) -> msgpack.Unpacker:
    return msgpack.Unpacker(
        use_list=False,
        raw=False,
        strict_map_key=False,
        max_buffer_size=max(limit_bytes, 1),
    )


class BatchEncoder:
    """The sending half of one connection's group interning; builds BATCH bodies. One per connection."""

    def __init__(self) -> None:
        self._refs: dict[str, int] = {}

    def encode(self, items: Iterable[tuple[str, bytes]]) -> bytes:
        """``items`` are ``(group, encoded message)`` pairs (messages from
        :func:`~raftlog.consensus.wire_messages.encode_message`)."""
        return b"".join(self.encode_parts(items))

    def encode_parts(self, items: Iterable[tuple[str, bytes]]) -> list[bytes]:
        """What :meth:`encode` gives, as the pieces it joins (for
        :meth:`raftlog.consensus.wire.Session.seal_into`)."""
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
