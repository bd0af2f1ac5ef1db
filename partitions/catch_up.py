"""Bringing a replica's log up to an installed snapshot by copying committed batches from a peer.

When the leader has compacted its Raft journal past what a follower holds, the follower receives the
partition's metadata snapshot instead of the entries; the records themselves live in the peers' segmented
logs. ``catch_up`` copies them, batch by batch, exactly as stored (offsets, terms and CRCs unchanged), from
whichever replica can serve them, through the peers' internal endpoint for it (``peer.read_batches``).

It runs inside ``StateMachine.restore`` on the consensus driver thread and therefore blocks that thread
while it copies; every request is bounded by ``timeout_s`` and ``max_bytes``.
"""

from __future__ import annotations

import logging
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from partitions.controller import TopicMetadata
from partitions.errors import ReplicaBehind
from partitions.peer_client import ERRORS, MEDIA_TYPE, OPS, REGISTRY
from partitions.peer_codec import pack, unpack
from partitions.services import FetchedBatches
from raftlog.storage.batch import BatchFormatError, split_batches
from raftlog.storage.errors import OffsetOutOfRange
from raftlog.storage.log import Log

log = logging.getLogger("raftlog.catch_up")

FETCH_BYTES_MAX = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class PeerAnswer:
    data: bytes = b""
    log_start_offset: int | None = None  # set when the peer no longer has the offset asked for


Fetch = Callable[[str, int], PeerAnswer]  # (peer node id, offset) -> answer


def peer_fetch(
    topic: str, partition: int, address: Callable[[str], str | None], credential: str, timeout_s: float = 10.0
) -> Fetch:
    """A ``Fetch`` through the peers' internal endpoint for catch-up batches (``peer.read_batches``;
    blocking, urllib), presenting the cluster ``credential`` (``peer_client.internal_credential``)."""
    op = OPS["peer.read_batches"]

    def fetch(node_id: str, offset: int) -> PeerAnswer:
        base = address(node_id)
        if not base:
            raise OSError(f"no address known for node {node_id}")
        arguments = {"topic": topic, "partition": partition, "offset": offset, "max_bytes": FETCH_BYTES_MAX}
        request = urllib.request.Request(
            base.rstrip("/") + op.path,
            data=pack(arguments, REGISTRY),
            headers={"Authorization": f"Bearer {credential}", "Content-Type": MEDIA_TYPE},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            reply = unpack(answer.read(), REGISTRY, ERRORS)
        if not isinstance(reply, dict):
            raise ValueError(f"node {node_id} answered {str(reply)[:100]}")
        error = reply.get("error")
        if isinstance(error, OffsetOutOfRange) and error.log_start_offset > offset:
            return PeerAnswer(log_start_offset=error.log_start_offset)
        if error is not None:
            raise ValueError(f"node {node_id}: {error}")
        batches = reply.get("ok")
        if not isinstance(batches, FetchedBatches):
            raise ValueError(f"node {node_id} answered {str(batches)[:100]}")
        return PeerAnswer(batches.data)

    return fetch


def catch_up_from_peers(
    topic: TopicMetadata, partition: int, node_id: str, address: Callable[[str], str | None], credential: str
) -> Callable[[Log, int], None]:
    """What a replica's state machine calls to copy what an installed snapshot says it lacks."""
    peers = [n for n in topic.replicas[partition] if n != node_id]
    fetch = peer_fetch(topic.name, partition, address, credential)

    def copy(target: Log, offset: int) -> None:
        catch_up(target, offset, peers, fetch)

    return copy


def catch_up(log_: Log, target_offset: int, peers: Sequence[str], fetch: Fetch) -> None:
    """Append committed batches from ``peers`` until ``log_`` reaches ``target_offset``.

    If every peer's log starts after our end (retention moved on), the local log restarts at the earliest
    start a peer offers. Raises ``ReplicaBehind`` when no peer can make progress.
    """
    while log_.end_offset < target_offset:
        offset = log_.end_offset
        progressed = False
        for peer in peers:
            try:
                answer = fetch(peer, offset)
            except (OSError, ValueError) as error:  # URLError and HTTPError are OSErrors
                log.warning(
                    "%s: catch-up from %s at offset %d failed: %s", log_.directory, peer, offset, error
                )
                continue
            if answer.log_start_offset is not None:
                log.warning("%s: %s starts at %d, after our end %d: restarting the log there",
                            log_.directory, peer, answer.log_start_offset, offset)  # fmt: skip
                log_.truncate_fully_and_start_at(answer.log_start_offset)
                progressed = True
                break
            try:
                for batch in split_batches(answer.data):
                    if log_.end_offset >= target_offset:
                        break
                    log_.append_batch(batch, enforce_size_limit=False)
                    progressed = True
            except BatchFormatError as error:
                log.warning("%s: torn response from %s: %s", log_.directory, peer, error)
            if progressed:
                break
        if not progressed:
            raise ReplicaBehind(log_.end_offset, target_offset)
    log.info("%s: caught up to offset %d", log_.directory, log_.end_offset)
