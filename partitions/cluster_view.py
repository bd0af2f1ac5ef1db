"""What gossip tells this node about the others (pure: no sockets, no clock).

Each node publishes a small gossip metadata blob: its HTTP and Raft addresses and its leadership claims
(partition group -> the Raft term in which it leads). When the claims do not fit the gossip budget only
their version travels, and peers fetch the table over HTTP (``GET /replication/leadership``) when the
version changes. Membership is advisory: the view feeds routing and placement, never a Raft voter set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import msgpack

META_VERSION = 1
STATES = ("alive", "suspect", "dead", "left")


class MetaFormatError(ValueError):
    """Gossip metadata that is not ours (another version or garbage); the member is kept, its meta not."""


@dataclass(frozen=True, slots=True)
class NodeMeta:
    http: str
    raft: str
    claims_version: int
    claims: dict[str, int] | None  # None: too large for gossip, fetch it over HTTP
    disk: tuple[int, int] | None = None  # (bytes used under the node's data dir, bytes free on its disk)


def encode_meta(
    http: str,
    raft: str,
    claims_version: int,
    claims: Mapping[str, int],
    limit_bytes: int,
    disk: tuple[int, int] | None = None,
) -> bytes:
    """The gossip metadata blob; claims are left out (version only) when they would exceed ``limit_bytes``.
    ``disk`` (used, free bytes) rides as an optional sixth field."""
    tail = [] if disk is None else [list(disk)]
    full: bytes = msgpack.packb(
        [META_VERSION, http, raft, claims_version, sorted([g, t] for g, t in claims.items()), *tail],
        use_bin_type=True,
    )
    if len(full) <= limit_bytes:
        return full
    brief: bytes = msgpack.packb([META_VERSION, http, raft, claims_version, None, *tail], use_bin_type=True)
    if len(brief) > limit_bytes:
        raise ValueError(f"gossip metadata of {len(brief)} bytes exceeds {limit_bytes} even without claims")
    return brief


def decode_meta(blob: bytes) -> NodeMeta:
    try:
        fields = msgpack.unpackb(blob, raw=False)
        version, http, raft, claims_version, claims = fields[:5]
    except (
        ValueError,
        TypeError,
        KeyError,
        msgpack.ExtraData,
        msgpack.FormatError,
        msgpack.StackError,
    ) as exc:
        raise MetaFormatError(f"unreadable gossip metadata: {exc}") from None
    disk = _disk(fields[5]) if len(fields) > 5 else None
    if version != META_VERSION or not isinstance(http, str) or not isinstance(raft, str):
        raise MetaFormatError(f"unknown gossip metadata version {version!r}")
    if not isinstance(claims_version, int):
        raise MetaFormatError("claims version is not an integer")
    if claims is None:
        return NodeMeta(http, raft, claims_version, None, disk)
    try:
        table = {str(group): int(term) for group, term in claims}
    except (TypeError, ValueError):
        raise MetaFormatError("malformed leadership claims") from None
    return NodeMeta(http, raft, claims_version, table, disk)


def _disk(value: object) -> tuple[int, int]:
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
    ):
        raise MetaFormatError(f"malformed disk usage {str(value)[:40]!r}")
    return value[0], value[1]


@dataclass(slots=True)
class _Peer:
    state: str
    incarnation: int
    meta: NodeMeta | None = None
    claims: dict[str, int] = field(default_factory=dict)
    claims_version: int = -1  # version of ``claims``


class ClusterView:
    """Merged gossip state. Fed by ``update`` (from gossip events) and ``set_claims`` (from HTTP)."""

    def __init__(self, self_id: str) -> None:
        self.self_id = self_id
        self._peers: dict[str, _Peer] = {}

    def update(self, node_id: str, state: str, incarnation: int, meta: bytes) -> NodeMeta | None:
        """Record a member's gossip state; returns its decoded meta (None when it has none we can read)."""
        if state not in STATES:
            raise ValueError(f"unknown member state {state!r}")
        peer = self._peers.setdefault(node_id, _Peer(state, incarnation))
        peer.state, peer.incarnation = state, incarnation
        if not meta:
            return peer.meta
        try:
            decoded = decode_meta(meta)
        except MetaFormatError:
            return peer.meta
        peer.meta = decoded
        if decoded.claims is not None:
            peer.claims, peer.claims_version = decoded.claims, decoded.claims_version
        return decoded

    def remove(self, node_id: str) -> None:
        self._peers.pop(node_id, None)

    def set_claims(self, node_id: str, version: int, claims: Mapping[str, int]) -> None:
        """Claims fetched over HTTP; an answer older than what we have is ignored."""
        peer = self._peers.get(node_id)
        if peer is not None and version >= peer.claims_version:
            peer.claims, peer.claims_version = dict(claims), version

    def needs_claims(self, node_id: str) -> bool:
        """True when the member's published claims version is newer than the table we hold."""
        peer = self._peers.get(node_id)
        return (
            peer is not None
            and peer.meta is not None
            and peer.meta.claims is None
            and peer.meta.claims_version > peer.claims_version
            and peer.state in ("alive", "suspect")
        )

    def state(self, node_id: str) -> str | None:
        peer = self._peers.get(node_id)
        return None if peer is None else peer.state

    def incarnation(self, node_id: str) -> int:
        peer = self._peers.get(node_id)
        return 0 if peer is None else peer.incarnation

    def meta(self, node_id: str) -> NodeMeta | None:
        peer = self._peers.get(node_id)
        return None if peer is None else peer.meta

    def node_ids(self) -> list[str]:
        return sorted(self._peers)

    def alive(self) -> list[str]:
        """Members a new replica may be placed on (suspects are not)."""
        return sorted(n for n, p in self._peers.items() if p.state == "alive")

    def leader_for(self, group_id: str) -> str | None:
        """The member claiming leadership of ``group_id`` in the highest term, skipping dead and left
        members; suspects only when no alive member claims it."""
        best: tuple[int, int, str] | None = None
        for node_id, peer in self._peers.items():
            term = peer.claims.get(group_id)
            if term is None or peer.state in ("dead", "left"):
                continue
            rank = (term, 1 if peer.state == "alive" else 0, node_id)
            if best is None or rank[:2] > best[:2]:
                best = rank
        return None if best is None else best[2]

    def leader_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for group_id in {g for p in self._peers.values() for g in p.claims}:
            leader = self.leader_for(group_id)
            if leader is not None:
                counts[leader] = counts.get(leader, 0) + 1
        return counts
