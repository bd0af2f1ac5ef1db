"""A ``recovery.FetchBatches`` through the peer client: a peer replica's committed batches from an offset
(``PeerService.read_batches``), or where its log starts when it no longer has that offset."""

from __future__ import annotations

from partitions.peers.client import PeerClient, remote_peer
from partitions.replicas.recovery import FetchBatches, PeerBatches, PeerFetchFailed
from raftlog.errors import RaftlogError
from raftlog.storage.errors import OffsetOutOfRange


def peer_fetch_batches(client: PeerClient, topic: str, partition: int) -> FetchBatches:
    async def fetch(peer: str, offset: int, max_bytes: int) -> PeerBatches:
        try:
            fetched = await remote_peer(client, peer).read_batches(topic, partition, offset, max_bytes)
        except OffsetOutOfRange as refusal:
            if refusal.log_start_offset > offset:  # its log starts after our end
                return PeerBatches(log_start_offset=refusal.log_start_offset)
            raise PeerFetchFailed(peer, str(refusal)) from refusal
        except RaftlogError as error:  # unreachable, no replica there, recovering itself...
            raise PeerFetchFailed(peer, f"{type(error).__name__}: {error}") from error
        return PeerBatches(fetched.data)

    return fetch
