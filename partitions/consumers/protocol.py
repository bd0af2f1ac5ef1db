"""The consumer groups' protocol, as the front doors ask it, and its result types (pure).

``GroupService``: consumer groups, served by each group's coordinator (a member's records are read by the
node it called, from each partition's leader, between ``begin_read`` and ``end_read``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from partitions.features import OFFSET_METADATA
from partitions.groups.assignors import TopicPartition
from partitions.groups.group_model import REQUEST_TIMEOUT_MS_MAX, InstanceConfig
from partitions.peer_ops import peer


@dataclass(frozen=True, slots=True)
class ConsumerCreated:
    instance_id: str
    coordinator: str  # the node serving the group: where the instance's requests go best


@dataclass(frozen=True, slots=True)
class Assignment:
    partitions: tuple[TopicPartition, ...]
    generation: int


@dataclass(frozen=True, slots=True)
class ReadPlan:
    """A member's read as its coordinator grants it (``GroupService.begin_read``): the node the member
    called reads the partitions from their leaders, then reports with ``end_read``."""

    read_id: int
    format: str  # "json" | "binary": the member's
    generation: int
    assigned: tuple[TopicPartition, ...]
    positions: dict[TopicPartition, int]  # assigned partitions with a position (the others: committed)
    offset_reset: str  # "earliest" | "latest": where a partition without a committed offset starts
    fetch_min_bytes: int  # -1: as many as the read may return
    wait_ms: int  # how long the read may still wait for records
    read_committed: bool = False  # below each partition's last stable offset, aborted records left out


@dataclass(frozen=True, slots=True)
class ReadEnd:
    """What ``end_read`` kept: the partitions whose positions moved (still the member's, so their records
    may be handed out) and the group's generation now."""

    kept: tuple[TopicPartition, ...]
    generation: int


@dataclass(frozen=True, slots=True)
class FetchedPart:
    """Batches of one assigned partition, from ``offset`` (records before it are skipped by the reader)."""

    tp: TopicPartition
    offset: int
    data: bytes
    aborted: tuple[tuple[int, int], ...] = ()  # read_committed: the aborted transactions among ``data``


@dataclass(frozen=True, slots=True)
class ConsumerRecords:
    """What a member's fetch got: batches per partition, in partition order, and how to render them."""

    format: str  # "json" | "binary": the member's
    generation: int
    parts: tuple[FetchedPart, ...]


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    tp: TopicPartition
    offset: int
    metadata: str = ""  # committed with it (travels only when not empty)


@dataclass(frozen=True, slots=True)
class MemberPartition:
    tp: TopicPartition
    position: int | None
    committed_offset: int | None
    end_offset: int
    lag: int | None  # end offset - committed offset; None while nothing is committed


@dataclass(frozen=True, slots=True)
class MemberDescription:
    instance_id: str  # a Kafka client's member id
    topics: tuple[str, ...]
    partitions: tuple[MemberPartition, ...]
    client_id: str = ""  # a Kafka client's client.id (an HTTP member: its instance id)
    client_host: str = ""  # the address the member's client came from


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group: str
    generation: int
    assignor: str  # of a Kafka group: the protocol its members chose (range, cooperative-sticky...)
    members: int
    coordinator_partition: int
    state: str = "Empty"  # Kafka's: Empty, PreparingRebalance, CompletingRebalance, Stable
    protocol_type: str = "consumer"  # Kafka's: consumer (HTTP groups too), connect..., "" offsets only
    # how its members join: "http", "kafka" (a share group with both: "http,kafka"); None while it has none
    door: str | None = None
    # Kafka's group type: "classic" (HTTP groups too), "consumer" (KIP-848), "share" (KIP-932)
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class GroupDeleted:
    group: str
    offsets_deleted: int  # partitions whose committed offset of the group was deleted


@dataclass(frozen=True, slots=True)
class GroupDescription:
    summary: GroupSummary
    members: tuple[MemberDescription, ...]
    lag: int
    unassigned: tuple[MemberPartition, ...] = ()  # partitions of its topics no member holds (an empty group)


@dataclass(frozen=True, slots=True)
class ShareMembership:
    """A share group member (KIP-932) as its coordinator answered a heartbeat of the HTTP door: its epoch
    and every partition assigned to it (after a leave: those it had), and how often to call."""

    member_id: str
    member_epoch: int  # -1: it left
    assignment: tuple[TopicPartition, ...]
    heartbeat_interval_ms: int
    session_timeout_ms: int


class GroupService(Protocol):
    """Consumer groups (Confluent REST v2 instances); every call is served by the group's coordinator."""

    @peer("Create a consumer instance on the group's coordinator", write=True)
    async def create_instance(
        self, group: str, name: str | None, config: InstanceConfig, client_host: str = ""
    ) -> ConsumerCreated: ...

    @peer("Remove a consumer instance on the group's coordinator", write=True)
    async def delete_instance(self, group: str, instance: str) -> None: ...

    @peer("Subscribe a consumer instance (rebalances)", write=True)
    async def subscribe(self, group: str, instance: str, topics: list[str]) -> None: ...

    @peer("A consumer instance's topics")
    async def subscription(self, group: str, instance: str) -> list[str]: ...

    @peer("A consumer instance's partitions and the group's generation")
    async def assignment(self, group: str, instance: str) -> Assignment:
        """A heartbeat: the partitions assigned now, rebalancing first if a subscribed topic changed."""
        ...

    @peer("Set a consumer instance's positions")
    async def seek(self, group: str, instance: str, offsets: dict[TopicPartition, int]) -> None: ...

    @peer("Set a consumer instance's positions to its partitions' ends")
    async def seek_to(self, group: str, instance: str, partitions: list[TopicPartition], end: bool) -> None:
        """Positions at the partitions' beginnings (``end`` False) or ends."""
        ...

    @peer("Set a consumer instance's positions by record timestamps")
    async def seek_to_times(self, group: str, instance: str, times: dict[TopicPartition, int]) -> None:
        """Positions at the first record of each partition whose timestamp is at or after the time given
        (ms since the epoch), or at its end when none is that late (Kafka's ``offsetsForTimes``)."""
        ...

    @peer(
        "Grant a consumer instance's read (waits for an assignment)",
        wait_arg="timeout_ms",
        wait_unset_ms=REQUEST_TIMEOUT_MS_MAX,
    )
    async def begin_read(
        self,
        group: str,
        instance: str,
        timeout_ms: int | None,
        generation: int | None,
        format: str | None,
    ) -> ReadPlan:
        """A heartbeat, then what the member may read and for how long (``timeout_ms``, None: the
        member's ``consumer.request.timeout.ms``); with nothing assigned yet, waits within that time for
        a rebalance to assign something. The member stays alive until ``end_read`` or the plan's
        deadline. Raises StaleGeneration when ``generation`` is old, ConsumerFormatMismatch when
        ``format`` is not the member's, before anything is read."""
        ...

    @peer("A consumer instance's read ended: move its positions")
    async def end_read(
        self,
        group: str,
        instance: str,
        read_id: int,
        positions: dict[TopicPartition, int],
        end_offsets: dict[TopicPartition, int],
    ) -> ReadEnd:
        """The read ended: ``positions`` move (only for partitions still the member's: the others'
        records must not be handed out), ``end_offsets`` (high watermarks seen) feed lag."""
        ...

    @peer("Commit a consumer instance's offsets (fenced)", write=True, since={"metadata": OFFSET_METADATA})
    async def commit(
        self,
        group: str,
        instance: str,
        offsets: dict[TopicPartition, int] | None,
        generation: int | None,
        metadata: dict[TopicPartition, str] | None = None,
    ) -> None:
        """Fenced by the coordinator (assigned partitions, current generation), then committed on each
        partition's leader; ``offsets`` None commits the positions; ``metadata``: the strings committed
        with some of them (OffsetMetadataTooLarge past Kafka's bound)."""
        ...

    @peer("A consumer instance's committed offsets")
    async def committed(
        self, group: str, instance: str, partitions: list[TopicPartition] | None
    ) -> list[CommittedOffset]:
        """Committed offsets of ``partitions`` (None: the member's assigned partitions)."""
        ...

    @peer("A consumer group's members, offsets and lag")
    async def describe(self, group: str) -> GroupDescription:
        """Members of either door, their partitions, committed offsets and lag (UnknownGroup: none)."""
        ...

    @peer("Delete an empty consumer group and its offsets", write=True)
    async def delete_group(self, group: str) -> GroupDeleted:
        """Delete an empty group and its committed offsets (Kafka's DeleteGroups); GroupNotEmpty while a
        member of either door is live, UnknownGroup when there is none."""
        ...

    @peer("Record a group-level commit's topics (a reset waits for no member)", write=True)
    async def note_commit(self, group: str, topics: list[str], reset: bool, force: bool) -> None:
        """A commit of the group's offsets of ``topics`` outside any member (a door's group-level commit,
        an operator's reset) is about to be made: recorded; a ``reset`` is refused while a member is live
        (GroupNotEmpty: its next commit would undo the reset), unless ``force``."""
        ...

    @peer("A share group member's heartbeat (join, stay, leave) on the group's coordinator", write=True)
    async def share_heartbeat(
        self,
        group: str,
        member: str,
        epoch: int | None,
        topics: list[str] | None,
        client_id: str = "",
        client_host: str = "",
    ) -> ShareMembership:
        """A share group member of the HTTP door (``partitions.groups.share.coordinator``, the one the
        Kafka door's ShareGroupHeartbeat asks): ``epoch`` 0 joins subscribed to ``topics``, None stays in
        the epoch it was given, -1 leaves. Answers its whole assignment (a leave: what it had)."""
        ...

    @peer("Whether a share group member is live on the group's coordinator")
    async def share_member(self, group: str, member: str) -> None:
        """Nothing when ``member`` is a live member of the share group (``partitions.groups.share.coordinator
        .check_member``), else ``UnknownMember``: what a node asks before it opens a share session for it."""
        ...

    @peer("The groups of one coordinator partition")  # while it elects, waited for: a listing is whole
    async def list_groups(self, coordinator_partition: int) -> list[GroupSummary]:
        """The groups of one partition of the coordinators' topic, from its leader."""
        ...

    @peer("How many coordinator partitions there are")
    async def coordinator_partitions(self) -> int:
        """How many coordinator partitions there are (0 before the first group)."""
        ...
