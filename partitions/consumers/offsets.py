"""A consumer group's committed offsets as every door stores, reads and deletes them (``GroupOffsets``).

Committed offsets live with each data partition, on its leader (docs/decisions/0003). When that leader
goes (a node killed, an election, a replica recovering from its peers), a commit must be neither lost nor
answered with an error its client does not retry, and a read must not look like "nothing committed". So
each call here is tried again, while the partition finds its leader, until the request's time is spent
(``OFFSETS_TIME_MS``: a Raft election takes up to ~3 s here); only then does it fail, with
``OffsetsUnavailable``, which each door answers as retriable: the Kafka door COORDINATOR_LOAD_IN_PROGRESS,
which every Kafka group client retries (Kafka's answer while its offsets partition loads; a leader's
LEADER_NOT_AVAILABLE or NOT_LEADER_OR_FOLLOWER would end a commit in librdkafka, the Java client and
franz-go), the HTTP door 503.

Asking again loses nothing: a commit whose outcome was unknown stores the same offset again (a commit is
no counter), a transactional one pends the same offset again, a delete deletes nothing twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from partitions.commands import check_offset_metadata
from partitions.consumers.reader import PartitionData
from partitions.data.service import NO_LEADER_EPOCH, DataService, GroupOffset
from partitions.errors import (
    HopLimitExceeded,
    NoController,
    OffsetsUnavailable,
    PeerOutcomeUnknown,
    PeerUnreachable,
    ReplicaRecovering,
)
from partitions.features import GROUP_OFFSET, OFFSET_LEADER_EPOCH, OFFSET_METADATA, Features
from raftlog.consensus.errors import (
    GroupClosed,
    NoLeader,
    NotLeader,
    OutcomeUnknown,
    ProposalDiscarded,
    ProposalQueueFull,
)
from raftlog.storage.errors import LogClosed, StorageUnavailable

T = TypeVar("T")

# How long a door's call waits for a partition's leader before it answers "retry": under the 10 s
# franz-go waits for the answer to a request without a timeout of its own (OffsetCommit, OffsetFetch),
# and more than two elections
OFFSETS_TIME_MS = 8_000
RETRY_PAUSE_S = 0.1
# What a partition answers while its leader moves or cannot answer yet: asked again until the time is spent
RETRIED: tuple[type[Exception], ...] = (
    NoLeader,
    NotLeader,
    ProposalDiscarded,  # overwritten by a new leader: not applied
    ProposalQueueFull,
    OutcomeUnknown,  # the same offset stored again, if it was
    GroupClosed,  # the replica closed under the call (moved, node stopping)
    ReplicaRecovering,
    HopLimitExceeded,
    PeerUnreachable,  # the leader's node is down: its successor is elected meanwhile
    PeerOutcomeUnknown,
    NoController,
    LogClosed,
    StorageUnavailable,  # a full disk on the leader (it hands its leadership over)
)


class GroupOffsets:
    """A group's committed offsets on each partition's leader, each call tried again while the partition's
    leader moves (module docstring). ``data``: the cluster-wide data service."""

    def __init__(
        self,
        data: PartitionData,
        time_ms: int = OFFSETS_TIME_MS,
        monotonic: Callable[[], float] = time.monotonic,
        features: Features | None = None,
    ) -> None:
        """``features``: the gate before a format the previous release cannot read (None: every one)."""
        self._data = data
        self._features = features
        self._time_ms = time_ms
        self._monotonic = monotonic

    def _details(self, leader_epoch: int, metadata: str) -> dict[str, Any]:
        """The leader epoch and metadata arguments: none for an unknown epoch or no metadata (the
        command's first form, and a leader of release 0.1.0 takes the call), nor while the feature level
        predates their form: until ``raftlog.version`` 2 is finalized a commit keeps no metadata (read
        back as ""), rather than being refused mid-upgrade."""
        details: dict[str, Any] = {}
        allows = (lambda _: True) if self._features is None else self._features.allows
        if leader_epoch != NO_LEADER_EPOCH and allows(OFFSET_LEADER_EPOCH):
            details["leader_epoch"] = leader_epoch
        if metadata and allows(OFFSET_METADATA):
            details["metadata"] = metadata
        return details

    @staticmethod
    def check_metadata(metadata: Iterable[str]) -> None:
        """Each of a request's metadata strings within Kafka's bound (``commands.check_offset_metadata``,
        which the partition's leader applies to each commit too): asked before any of the request's
        commits is made, so one too large commits nothing of it. OffsetMetadataTooLarge."""
        for text in metadata:
            check_offset_metadata(text)

    async def commit(
        self,
        group: str,
        topic: str,
        partition: int,
        offset: int,
        reset: bool,
        leader_epoch: int = NO_LEADER_EPOCH,
        metadata: str = "",
    ) -> int:
        """Store ``offset`` (and the leader epoch and metadata named with it); returns the stored offset
        (never lower unless ``reset``). OffsetMetadataTooLarge (``commands.OFFSET_METADATA_MAX``) from
        the partition's leader."""
        epoch = self._details(leader_epoch, metadata)

        async def call(timeout_ms: int) -> int:
            return (
                await self._data.run(
                    DataService.commit_offset, group, topic, partition, offset, reset, timeout_ms, **epoch
                )
            ).value

        return await self._until(group, topic, partition, call)

    async def commit_txn(
        self,
        group: str,
        topic: str,
        partition: int,
        offset: int,
        producer_id: int,
        producer_epoch: int,
        transaction: int,
        leader_epoch: int = NO_LEADER_EPOCH,
        metadata: str = "",
    ) -> None:
        """Store ``offset`` pending for the producer's open transaction (``commit_txn_offset``)."""
        epoch = self._details(leader_epoch, metadata)

        async def call(timeout_ms: int) -> None:
            await self._data.run(
                DataService.commit_txn_offset, group, topic, partition, offset, producer_id, producer_epoch,
                transaction, timeout_ms, **epoch,
            )  # fmt: skip

        await self._until(group, topic, partition, call)

    async def committed(
        self, group: str, topic: str, partition: int, require_stable: bool = False
    ) -> GroupOffset | None:
        """The committed offset, its leader epoch and metadata; None when the group committed none (never
        because the partition's leader could not be reached: that is ``OffsetsUnavailable``)."""

        async def call(timeout_ms: int) -> GroupOffset | None:
            if self._features is not None and not self._features.allows(GROUP_OFFSET):
                return await self._committed_before(group, topic, partition, require_stable)
            return (
                await self._data.run(DataService.group_offset, group, topic, partition, require_stable)
            ).value

        return await self._until(group, topic, partition, call)

    async def _committed_before(
        self, group: str, topic: str, partition: int, require_stable: bool
    ) -> GroupOffset | None:
        """What release 0.1.0's leaders serve: the offset alone (no leader epoch was committed before)."""
        method = DataService.stable_committed_offset if require_stable else DataService.committed_offset
        offset = (await self._data.run(method, group, topic, partition)).value
        return None if offset is None else GroupOffset(offset)

    async def delete(self, group: str, topic: str, partition: int) -> bool:
        """Forget the group's offset of the partition; whether it had one."""

        async def call(timeout_ms: int) -> bool:
            return (
                await self._data.run(DataService.delete_offset, group, topic, partition, timeout_ms)
            ).value

        return await self._until(group, topic, partition, call)

    async def _until(self, group: str, topic: str, partition: int, call: Callable[[int], Awaitable[T]]) -> T:
        """``call(timeout_ms)`` (the time left), again after each refusal in ``RETRIED`` while time is
        left; then OffsetsUnavailable. No try outlives the time: one still waiting then is given up."""
        deadline = self._monotonic() + self._time_ms / 1000
        while True:
            left_s = deadline - self._monotonic()
            try:
                async with asyncio.timeout(max(left_s, 0.0)):
                    return await call(max(1, int(left_s * 1000)))
            except RETRIED as refusal:
                reason = str(refusal)
            except TimeoutError:
                reason = f"no leader answered within {self._time_ms} ms"
            if self._monotonic() + RETRY_PAUSE_S >= deadline:
                raise OffsetsUnavailable(group, topic, partition, reason)
            await asyncio.sleep(RETRY_PAUSE_S)
