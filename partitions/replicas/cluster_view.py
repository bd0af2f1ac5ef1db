"""What gossip tells this node about the others (pure: no sockets, no clock).

Each node publishes a small gossip metadata blob: its HTTP and Raft addresses, its leadership claims
(partition group -> the Raft term in which it leads), its disk use and, only while one of its replicas
has failed, those failures (``replica_failures``). When the claims do not fit the gossip budget only
their version travels, and peers fetch the table with a peer call (``peer.leadership``, served at
``POST /internal/v1/peer/leadership``) when the version changes; likewise a failure list that does not
fit travels as its digest and peers fetch it (``peer.replica_failures``) when the digest differs from
the list they hold. A node with no failed replica sends no failure field at all. Membership is
advisory: the view feeds routing, placement and health, never a Raft voter set.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import msgpack

from partitions.replicas import failures as replica_failures
from partitions.replicas.failures import NO_FAILURES_DIGEST, ReplicaFailure

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
    failures_digest: int = NO_FAILURES_DIGEST  # of the node's failed replicas (none: NO_FAILURES_DIGEST)
    failures: tuple[ReplicaFailure, ...] | None = ()  # None: too large for gossip, fetch it over HTTP
    kafka: str | None = None  # HOST:PORT of the node's Kafka listener, as clients reach it; None: none
    disk_full: bool = False  # its writes are refused for want of room (raftlog.storage.space)
    release: str | None = None  # the node's raftlog version; None: a node of 0.1.0 (it gossiped none)
    supported: Mapping[str, int] | None = None  # feature -> highest level its code supports (None: 0.1.0)


def encode_meta(
    http: str,
    raft: str,
    claims_version: int,
    claims: Mapping[str, int],
    limit_bytes: int,
    disk: tuple[int, int] | None = None,
    failures: Sequence[ReplicaFailure] = (),
    kafka: str | None = None,
    disk_full: bool = False,
    release: tuple[str, Mapping[str, int]] | None = None,
) -> bytes:
    """The gossip metadata blob. ``disk`` (used, free bytes) rides as an optional sixth field; failed
    replicas, when there are any, as a seventh: [digest, rows] (null: none); the Kafka listener's address,
    when the node has one, as an eighth; ``true`` as a ninth while its disk is full (a node before that
    field reads eight); ``release`` (the node's version and the highest level of each feature its code
    supports) as a tenth, [version, {feature: level}] (release 0.1.0 reads nine and ignores the rest, so
    the ninth is then ``false``, never null). What does not fit ``limit_bytes`` is left out, the failure
    rows first, then the claims, then both (their version and digest still travel)."""
    claim_rows = sorted([g, t] for g, t in claims.items())
    tail: list[object] = [] if disk is None else [list(disk)]
    failure_rows = replica_failures.rows(failures) if failures else None
    blob = b""
    for with_claims, with_failures in ((True, True), (True, False), (False, True), (False, False)):
        fields: list[object] = [META_VERSION, http, raft, claims_version, claim_rows if with_claims else None]
        if failure_rows is not None or kafka is not None or disk_full or release is not None:
            fields += [
                list(disk) if disk is not None else None,
                None
                if failure_rows is None
                else [replica_failures.digest(failures), failure_rows if with_failures else None],
            ]
            if kafka is not None or disk_full or release is not None:
                fields.append(kafka)
            if disk_full or release is not None:
                fields.append(disk_full)
            if release is not None:
                fields.append([release[0], dict(release[1])])
        else:
            fields += tail
        blob = bytes(msgpack.packb(fields, use_bin_type=True))
        if len(blob) <= limit_bytes:
            return blob
    raise ValueError(
        f"gossip metadata of {len(blob)} bytes exceeds {limit_bytes} even without claims and failures"
    )


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
    disk = _disk(fields[5]) if len(fields) > 5 and fields[5] is not None else None
    if version != META_VERSION or not isinstance(http, str) or not isinstance(raft, str):
        raise MetaFormatError(f"unknown gossip metadata version {version!r}")
    if not isinstance(claims_version, int):
        raise MetaFormatError("claims version is not an integer")
    has_failures = len(fields) > 6 and fields[6] is not None
    failures_digest, failures = _failures(fields[6]) if has_failures else (NO_FAILURES_DIGEST, ())
    kafka = fields[7] if len(fields) > 7 else None
    if kafka is not None and not isinstance(kafka, str):
        raise MetaFormatError(f"malformed Kafka address {str(kafka)[:40]!r}")
    disk_full = fields[8] if len(fields) > 8 else False
    if not isinstance(disk_full, bool):
        raise MetaFormatError(f"malformed disk-full flag {str(disk_full)[:40]!r}")
    release, supported = _release(fields[9]) if len(fields) > 9 else (None, None)
    table = None
    if claims is not None:
        try:
            table = {str(group): int(term) for group, term in claims}
        except (TypeError, ValueError):
            raise MetaFormatError("malformed leadership claims") from None
    return NodeMeta(
        http,
        raft,
        claims_version,
        table,
        disk,
        failures_digest,
        failures,
        kafka,
        disk_full,
        release,
        supported,
    )


def _release(value: object) -> tuple[str, dict[str, int]]:
    if (
        isinstance(value, list)
        and len(value) >= 2
        and isinstance(value[0], str)
        and len(value[0]) <= 64
        and isinstance(value[1], dict)
        and all(
            isinstance(f, str) and isinstance(v, int) and not isinstance(v, bool) for f, v in value[1].items()
        )
    ):
        return value[0], dict(value[1])
    raise MetaFormatError(f"malformed release {str(value)[:40]!r}")


def _failures(value: object) -> tuple[int, tuple[ReplicaFailure, ...] | None]:
    """[digest, rows or None]; the rows' node is filled in by the view (it knows the sender)."""
    if not isinstance(value, list) or len(value) != 2 or not isinstance(value[0], int):
        raise MetaFormatError(f"malformed replica failures {str(value)[:40]!r}")
    if value[1] is None:
        return value[0], None
    try:
        return value[0], tuple(replica_failures.from_rows("", value[1]))
    except ValueError as exc:
        raise MetaFormatError(str(exc)) from None


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
    failures: dict[tuple[str, int], ReplicaFailure] = field(default_factory=dict)  # (topic, partition)
    failures_digest: int = NO_FAILURES_DIGEST  # of ``failures``


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
        if decoded.failures is not None:
            self._set_failures(peer, node_id, decoded.failures)
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
        return self._needs_fetch(
            node_id, lambda peer, meta: meta.claims is None and meta.claims_version > peer.claims_version
        )

    def set_failures(self, node_id: str, failures: Sequence[ReplicaFailure]) -> None:
        """A member's failed replicas fetched over HTTP (it published only their digest)."""
        peer = self._peers.get(node_id)
        if peer is not None:
            self._set_failures(peer, node_id, failures)

    @staticmethod
    def _set_failures(peer: _Peer, node_id: str, failures: Sequence[ReplicaFailure]) -> None:
        owned = [replace(f, node=node_id) for f in failures]
        peer.failures = {(f.topic, f.partition): f for f in owned}
        peer.failures_digest = replica_failures.digest(owned)

    def needs_failures(self, node_id: str) -> bool:
        """True when the member published a failure list we do not hold (too large for its gossip)."""
        return self._needs_fetch(
            node_id, lambda peer, meta: meta.failures is None and meta.failures_digest != peer.failures_digest
        )

    def _needs_fetch(self, node_id: str, behind: Callable[[_Peer, NodeMeta], bool]) -> bool:
        """Whether the member is up (alive or suspect) and its meta, in place of a table too large for its
        gossip, names a version or digest that ``behind`` finds newer than the one we hold."""
        peer = self._peers.get(node_id)
        return (
            peer is not None
            and peer.meta is not None
            and peer.state in ("alive", "suspect")
            and behind(peer, peer.meta)
        )

    def failure(self, node_id: str, topic: str, partition: int) -> ReplicaFailure | None:
        """The member's replica of the partition if it reports it failed (dead and left members report
        nothing: they are down altogether)."""
        peer = self._peers.get(node_id)
        if peer is None or not peer.failures or peer.state in ("dead", "left"):
            return None
        return peer.failures.get((topic, partition))

    def failures(self) -> list[ReplicaFailure]:
        """Every failed replica the alive and suspect members report."""
        return [
            failure
            for peer in self._peers.values()
            if peer.failures and peer.state in ("alive", "suspect")
            for failure in peer.failures.values()
        ]

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
        claim = self.leader_claim(group_id)
        return None if claim is None else claim[0]

    def leader_claim(self, group_id: str) -> tuple[str, int] | None:
        """:meth:`leader_for` and the term it claims."""
        best: tuple[int, int, str] | None = None
        for node_id, peer in self._peers.items():
            term = peer.claims.get(group_id)
            if term is None or peer.state in ("dead", "left"):
                continue
            rank = (term, 1 if peer.state == "alive" else 0, node_id)
            if best is None or rank[:2] > best[:2]:
                best = rank
        return None if best is None else (best[2], best[0])

    def leader_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for group_id in {g for p in self._peers.values() for g in p.claims}:
            leader = self.leader_for(group_id)
            if leader is not None:
                counts[leader] = counts.get(leader, 0) + 1
        return counts
