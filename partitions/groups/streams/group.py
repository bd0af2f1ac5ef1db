"""The streams group protocol (KIP-1071) as a pure state machine: a group is an immutable value, and each
operation (a member's heartbeat, its leave, its fencing once its session or rebalance timeout passed)
returns the next value with the answer, or raises the protocol's typed refusal. No clock, no I/O: the
coordinator (``streams/coordinator.py``) keeps the timers, writes each changed group to the replicated
group table before answering, and passes in the topics' partition counts.

As Kafka's ``GroupMetadataManager.streamsGroupHeartbeat``:

1. the member is created (epoch 0; its id is the client's), found (its epoch checked as the consumer
   protocol's), or, a static member rejoining, its old member replaced once that one left with epoch -2;
2. the first member's topology becomes the group's (``topology.validate``d); a member with an older
   topology epoch is told STALE_TOPOLOGY, one with another topology of the same epoch is refused
   ("Topology updates are not supported yet.", as Kafka 4.4);
3. the topology is configured against the topics there are (``topology.configure``): the tasks of each
   subtopology, or a status saying what is missing (source topics; internal topics, which the coordinator
   creates); a member's changed metadata, changed partition counts, a topology that became ready (or
   stopped being) or a changed number of standby replicas bumps the group epoch;
4. a group epoch past the target assignment's computes a new target (``assignor.assign``; nothing while
   the topology is not ready) and the member is reconciled towards its tasks (``reconcile``).

Leaving (epoch -1) removes the member and bumps the group epoch; a static member leaving with -2 stays
until it rejoins or its session ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import msgpack

from partitions.groups.epoch_members import (
    JOIN_EPOCH,
    STATIC_LEAVE_EPOCH,
    leaving,
    member_of,
    put_member,
    static_member,
)
from partitions.groups.errors import GroupFull, InvalidGroupRequest
from partitions.groups.streams.assignor import MemberSpec, assign
from partitions.groups.streams.reconcile import (
    EMPTY,
    MEMBER_STATES,
    STABLE,
    UNREVOKED_TASKS,
    Holders,
    Tasks,
    reconcile,
)
from partitions.groups.streams.topology import (
    ASSIGNMENT_DELAYED,
    SHUTDOWN_APPLICATION,
    STALE_TOPOLOGY,
    ConfiguredTopology,
    StreamsTopology,
    Task,
    TopicInfo,
    configure,
)
from partitions.groups.streams.topology import validate as validate_topology

DELAYED_DETAIL = "Assignment delayed due to the configured initial rebalance delay."  # Kafka 4.4's words
STREAMS_MEMBERS_MAX = 1_000  # as the other protocols' (Kafka's group.streams.max.size is unbounded)
# what one caller can make the group table hold, where Kafka has no bound of its own: a topology (kept once
# per group, in every replica and snapshot) and a member's own metadata (ids, endpoint, tags): with the
# members bound, a group's record stays within a few MiB, as a classic group's (CLASSIC_GROUP_BYTES_MAX)
TOPOLOGY_BYTES_MAX = 1 << 20
MEMBER_METADATA_BYTES_MAX = 4 << 10  # Kafka Streams sends at most 5 client tags of 20 + 30 characters
ROW_VERSION = 0  # of ``StreamsGroup.to_row``; a reader takes extra fields


@dataclass(frozen=True, slots=True)
class StreamsMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    epoch: int
    previous_epoch: int
    state: str  # reconcile.MEMBER_STATES
    rebalance_timeout_ms: int
    topology_epoch: int
    process_id: str
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    assigned: Tasks = EMPTY
    revoking: Tasks = EMPTY
    # the epoch each active task (assigned or pending revocation) was given to the member in: a commit of an
    # older member epoch passes for the tasks it held since then (Kafka 4.4's assignment epoch validator)
    active_epochs: Mapping[Task, int] = field(default_factory=lambda: MappingProxyType({}))

    def task_epoch(self, task: Task) -> int | None:
        """The epoch the member was given the active task in, None when it holds no such task."""
        if task not in self.assigned.active and task not in self.revoking.active:
            return None
        return self.active_epochs.get(task, self.epoch)

    def metadata(self) -> tuple[Any, ...]:
        """What a change of bumps the group epoch (Kafka's ``hasStreamsMemberMetadataChanged``)."""
        return (
            self.instance_id, self.rack_id, self.rebalance_timeout_ms, self.topology_epoch, self.client_id,
            self.client_host, self.process_id, self.client_tags, self.user_endpoint,
        )  # fmt: skip

    def to_row(self) -> list[Any]:
        return [
            self.member_id, self.instance_id, self.rack_id, self.client_id, self.client_host, self.epoch,
            self.previous_epoch, self.state, self.rebalance_timeout_ms, self.topology_epoch, self.process_id,
            None if self.user_endpoint is None else list(self.user_endpoint),
            [list(kv) for kv in self.client_tags], self.assigned.to_row(), self.revoking.to_row(),
            [[s, p, e] for (s, p), e in sorted(self.active_epochs.items())],
        ]  # fmt: skip

    @classmethod
    def from_row(cls, row: list[Any]) -> StreamsMember:
        member_id, instance_id, rack, client_id, host, epoch, previous, state, rebalance_ms = row[:9]
        topology_epoch, process, endpoint, tags, assigned, revoking = row[9:15]
        if state not in MEMBER_STATES:
            raise ValueError(f"member state {state!r}")
        return cls(
            str(member_id), None if instance_id is None else str(instance_id),
            None if rack is None else str(rack), str(client_id), str(host), int(epoch), int(previous),
            str(state), int(rebalance_ms), int(topology_epoch), str(process),
            None if endpoint is None else (str(endpoint[0]), int(endpoint[1])),
            tuple((str(k), str(v)) for k, v in tags), Tasks.from_row(assigned), Tasks.from_row(revoking),
            MappingProxyType({(str(s), int(p)): int(e) for s, p, e in (row[15] if len(row) > 15 else ())}),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class StreamsGroup:
    name: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    topology: StreamsTopology | None = None
    validated_epoch: int = -1  # the topology epoch last configured ready (-1: not ready)
    members: Mapping[str, StreamsMember] = field(default_factory=lambda: MappingProxyType({}))
    target: Mapping[str, Tasks] = field(default_factory=lambda: MappingProxyType({}))
    # the partitions of the topology's topics when the group last looked (a change bumps the epoch)
    partition_counts: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    standby_replicas: int = 0  # the group's streams.num.standby.replicas at its last assignment
    endpoint_epoch: int = 0
    shutdown_by: str | None = None  # the member that asked the application to shut down

    @property
    def state(self) -> str:
        """Kafka's: Empty, NotReady, Assigning, Reconciling, Stable."""
        if not self.members:
            return "Empty"
        if self.topology is None or self.topology.epoch != self.validated_epoch:
            return "NotReady"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(m.epoch != self.assignment_epoch or m.state != STABLE for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def static_member(self, instance_id: str) -> StreamsMember | None:
        return static_member(self.members, instance_id)

    def source_partitions(self, tasks: Iterable[Task]) -> list[tuple[str, int]]:
        """The topic partitions the tasks read (their subtopology's source and repartition source topics
        at the task's partition, where the topic has it), sorted."""
        if self.topology is None:
            return []
        by_id = {s.subtopology_id: s for s in self.topology.subtopologies}
        found = set()
        for subtopology_id, partition in tasks:
            s = by_id.get(subtopology_id)
            for topic in s.inputs() if s else ():
                if partition < self.partition_counts.get(topic, 0):
                    found.add((topic, partition))
        return sorted(found)

    def holders(self) -> Holders:
        """Which process holds each task now (assigned or pending revocation)."""
        active: dict[Any, str] = {}
        standby: dict[Any, set[str]] = {}
        warmup: dict[Any, set[str]] = {}
        for m in self.members.values():
            for tasks in (m.assigned, m.revoking):
                for t in tasks.active:
                    active[t] = m.process_id
                for t in tasks.standby:
                    standby.setdefault(t, set()).add(m.process_id)
                for t in tasks.warmup:
                    warmup.setdefault(t, set()).add(m.process_id)
        return Holders(
            active.get,
            lambda t: frozenset(standby.get(t, ())),
            lambda t: frozenset(warmup.get(t, ())),
        )

    def to_row(self) -> list[Any]:
        return [
            ROW_VERSION, self.group_epoch, self.assignment_epoch,
            None if self.topology is None else self.topology.to_row(), self.validated_epoch,
            [m.to_row() for m in self.members.values()],
            {member: tasks.to_row() for member, tasks in self.target.items()},
            dict(self.partition_counts), self.standby_replicas, self.endpoint_epoch, self.shutdown_by,
        ]  # fmt: skip

    @classmethod
    def from_row(cls, name: str, row: list[Any]) -> StreamsGroup:
        _version, group_epoch, assignment_epoch, topology, validated, members, target = row[:7]
        counts, standby_replicas, endpoint_epoch, shutdown_by = row[7:11]
        parsed = [StreamsMember.from_row(m) for m in members]
        return cls(
            name, int(group_epoch), int(assignment_epoch),
            None if topology is None else StreamsTopology.from_row(topology), int(validated),
            MappingProxyType({m.member_id: m for m in parsed}),
            MappingProxyType({str(k): Tasks.from_row(v) for k, v in target.items()}),
            MappingProxyType({str(t): int(c) for t, c in counts.items()}), int(standby_replicas),
            int(endpoint_epoch), None if shutdown_by is None else str(shutdown_by),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class StreamsHeartbeat:
    """A StreamsGroupHeartbeat. None: unchanged since the member's last heartbeat."""

    group: str
    member_id: str
    member_epoch: int
    endpoint_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: StreamsTopology | None = None
    owned: Tasks | None = None  # active, standby and warm-up tasks it has (all three sent, or none)
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""
    regexes: bool = False  # a subtopology names source topics by regular expression


@dataclass(frozen=True, slots=True)
class StreamsAnswer:
    """The next group and what the member is told (``tasks`` None: not sent)."""

    group: StreamsGroup
    member_id: str
    member_epoch: int
    tasks: Tasks | None = None
    status: tuple[tuple[int, str], ...] = ()
    to_create: tuple[TopicInfo, ...] = ()  # internal topics the coordinator creates
    left: StreamsMember | None = None  # the member that left or was replaced by this operation


def validate(hb: StreamsHeartbeat) -> None:
    """Kafka's ``throwIfStreamsGroupHeartbeatRequestIsUsingUnsupportedFeatures`` and
    ``throwIfStreamsGroupHeartbeatRequestIsInvalid`` (InvalidGroupRequest, Kafka's words), and the
    topology's own rules (``topology.validate``: InvalidTopology)."""
    if hb.regexes:
        raise InvalidGroupRequest("Regular expressions for source topics are not supported yet.")
    for given, name in ((hb.member_id, "MemberId"), (hb.group, "GroupId")):
        if not given:
            raise InvalidGroupRequest(f"{name} can't be empty.")
    for maybe, name in ((hb.instance_id, "InstanceId"), (hb.rack_id, "RackId")):
        if maybe == "":
            raise InvalidGroupRequest(f"{name} can't be empty.")
    if hb.member_epoch == JOIN_EPOCH:
        if hb.rebalance_timeout_ms == -1:
            raise InvalidGroupRequest("RebalanceTimeoutMs must be provided in first request.")
        if hb.owned is None:  # Kafka 4.4 refuses null lists too (asked raw: its words)
            raise InvalidGroupRequest("ActiveTasks must be empty when (re-)joining.")
        for kind, tasks in (
            ("Active", hb.owned.active),
            ("Standby", hb.owned.standby),
            ("Warmup", hb.owned.warmup),
        ):
            if tasks:
                raise InvalidGroupRequest(f"{kind}Tasks must be empty when (re-)joining.")
        if hb.topology is None:
            raise InvalidGroupRequest("Topology must be non-null when (re-)joining.")
        validate_topology(hb.topology)
    elif hb.member_epoch == STATIC_LEAVE_EPOCH:
        if hb.instance_id is None:
            raise InvalidGroupRequest("InstanceId can't be null.")
    elif hb.member_epoch < STATIC_LEAVE_EPOCH:
        raise InvalidGroupRequest(
            f"MemberEpoch is {hb.member_epoch}, but must be greater than or equal to -2."
        )
    if hb.member_epoch != JOIN_EPOCH and hb.topology is not None:
        raise InvalidGroupRequest("Topology can only be provided when (re-)joining.")
    _check_bounds(hb)


def _check_bounds(hb: StreamsHeartbeat) -> None:
    """The topology and the member's metadata within what a group may hold (``TOPOLOGY_BYTES_MAX``,
    ``MEMBER_METADATA_BYTES_MAX``, measured as the table stores them)."""
    if hb.topology is not None:
        size = len(msgpack.packb(hb.topology.to_row(), use_bin_type=True))
        if size > TOPOLOGY_BYTES_MAX:
            raise InvalidGroupRequest(
                f"The topology is {size} bytes, past the {TOPOLOGY_BYTES_MAX} bytes a streams group may hold."
            )
    metadata = [
        hb.member_id, hb.instance_id, hb.rack_id, hb.process_id, hb.client_id, hb.client_host,
        None if hb.user_endpoint is None else list(hb.user_endpoint),
        None if hb.client_tags is None else [list(kv) for kv in hb.client_tags],
    ]  # fmt: skip
    size = len(msgpack.packb(metadata, use_bin_type=True))
    if size > MEMBER_METADATA_BYTES_MAX:
        raise InvalidGroupRequest(
            f"The member's metadata (ids, endpoint, client tags) is {size} bytes, past the "
            f"{MEMBER_METADATA_BYTES_MAX} bytes a streams group member may hold."
        )


def _new_member(hb: StreamsHeartbeat) -> StreamsMember:
    return StreamsMember(
        hb.member_id, hb.instance_id, hb.rack_id, hb.client_id, hb.client_host, 0, 0, STABLE, 0,
        -1 if hb.topology is None else hb.topology.epoch, hb.process_id or "",
    )  # fmt: skip


def _member_of(group: StreamsGroup, hb: StreamsHeartbeat) -> tuple[StreamsMember, StreamsMember | None]:
    """The member the heartbeat is from (created when joining) and the static member it replaces
    (``epoch_members``, the consumer protocol's rule, as Kafka's)."""
    owned = hb.owned
    return member_of(
        group.name, group.members, hb.member_id, hb.member_epoch, hb.instance_id,
        lambda m: owned is not None and owned.within(m.assigned),
        lambda: _new_member(hb),
        lambda static: replace(static, member_id=hb.member_id, epoch=0, previous_epoch=0),
    )  # fmt: skip


def _topology_of(group: StreamsGroup, hb: StreamsHeartbeat) -> StreamsTopology:
    """The group's topology once the heartbeat is applied (Kafka's ``maybeUpdateTopology``)."""
    if hb.topology is None:
        if group.topology is None:
            raise InvalidGroupRequest("The topology is null and the group topology is also null.")
        return group.topology
    if group.topology is None:
        return hb.topology
    if group.topology.epoch > hb.topology.epoch:
        return group.topology  # the member's is stale: it is told so
    if group.topology != hb.topology:
        raise InvalidGroupRequest("Topology updates are not supported yet.")
    return group.topology


def heartbeat(
    group: StreamsGroup,
    hb: StreamsHeartbeat,
    partition_count: Callable[[str], int | None],
    standby_replicas: int = 0,
    members_max: int = STREAMS_MEMBERS_MAX,
    assignment_delayed: bool = False,
) -> StreamsAnswer:
    """A heartbeat (``validate`` first). ``partition_count``: a topic's partitions now, None when there
    is no such topic; ``standby_replicas``: the group's ``streams.num.standby.replicas`` now;
    ``assignment_delayed``: the group's initial rebalance delay runs (the coordinator's clock: Kafka's
    ``streams.initial.rebalance.delay.ms`` from when a member joined the empty group), so no new target
    is computed and the member is told ASSIGNMENT_DELAYED, as Kafka's coordinator tells it."""
    validate(hb)
    if hb.member_epoch < 0:
        return leave(group, hb)
    known = hb.member_id in group.members or (
        hb.instance_id is not None and group.static_member(hb.instance_id) is not None
    )
    if hb.member_epoch == JOIN_EPOCH and not known and len(group.members) >= members_max:
        raise GroupFull(group.name, members_max)
    member, replaced = _member_of(group, hb)
    updated = replace(
        member,
        instance_id=hb.instance_id if hb.instance_id is not None else member.instance_id,
        rack_id=hb.rack_id if hb.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=(
            hb.rebalance_timeout_ms if hb.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms
        ),
        topology_epoch=hb.topology.epoch if hb.topology is not None else member.topology_epoch,
        process_id=hb.process_id if hb.process_id is not None else member.process_id,
        client_tags=hb.client_tags if hb.client_tags is not None else member.client_tags,
        user_endpoint=(
            hb.user_endpoint
            if hb.member_epoch == JOIN_EPOCH or hb.user_endpoint is not None
            else member.user_endpoint
        ),
        client_id=hb.client_id,
        client_host=hb.client_host,
    )
    bump = (
        replaced is not None
        or member.member_id not in group.members
        or updated.metadata() != member.metadata()
    )
    topology = _topology_of(group, hb)
    status: list[tuple[int, str]] = []
    if updated.topology_epoch < topology.epoch:
        status.append(
            (
                STALE_TOPOLOGY,
                f"The member's topology epoch {updated.topology_epoch} is behind the group's topology "
                f"epoch {topology.epoch}.",
            )
        )
    counts = {t: c for t in sorted(topology.required_topics()) if (c := partition_count(t)) is not None}
    configured = configure(topology, lambda t: counts.get(t))
    if counts != dict(group.partition_counts):
        bump = True
    validated = topology.epoch if configured.ready else -1
    if configured.ready and hb.owned is not None:
        _check_tasks(configured, hb.owned)
    if validated != group.validated_epoch or standby_replicas != group.standby_replicas:
        bump = True
    members, target = put_member(group.members, group.target, updated, replaced, EMPTY)
    next_group = replace(
        group,
        group_epoch=group.group_epoch + (1 if bump else 0),
        topology=topology,
        validated_epoch=validated,
        members=MappingProxyType(members),
        target=MappingProxyType(target),
        partition_counts=MappingProxyType(counts),
        standby_replicas=standby_replicas,
        shutdown_by=hb.member_id if hb.shutdown_application else group.shutdown_by,
    )
    if assignment_delayed:
        # as Kafka 4.4 answers (asked raw): the member follows the group epoch with no tasks, and the
        # group's target waits, so the first heartbeat after the delay computes it for every member
        status.append((ASSIGNMENT_DELAYED, DELAYED_DETAIL))
        toward = replace(next_group, assignment_epoch=next_group.group_epoch, target=MappingProxyType({}))
    else:
        if next_group.group_epoch > next_group.assignment_epoch:
            if any(m.epoch >= next_group.group_epoch for m in next_group.members.values()):
                # members followed the group epoch through a delay: the target comes at the next epoch,
                # so that each is reconciled to it (at its own epoch it would count as reconciled)
                next_group = replace(next_group, group_epoch=next_group.group_epoch + 1)
            next_group = _assign(next_group, configured)
        toward = next_group
    reconciled = _reconcile(toward, toward.members[updated.member_id], hb.owned)
    next_group = _with_member(next_group, reconciled)
    changed = reconciled.assigned != member.assigned
    if (changed and reconciled.user_endpoint is not None) or updated.user_endpoint != member.user_endpoint:
        next_group = replace(next_group, endpoint_epoch=next_group.endpoint_epoch + 1)
    if configured.status is not None:
        status.append(configured.status)
    if next_group.shutdown_by is not None:
        status.append(
            (
                SHUTDOWN_APPLICATION,
                f"Streams group member {next_group.shutdown_by} encountered a fatal error and requested a "
                "shutdown for the entire application.",
            )
        )
    joining = hb.member_epoch == JOIN_EPOCH
    return StreamsAnswer(
        next_group,
        reconciled.member_id,
        reconciled.epoch,
        reconciled.assigned if joining or changed else None,
        tuple(status),
        configured.to_create if configured.status is not None else (),
        replaced,
    )


def _check_tasks(configured: ConfiguredTopology, owned: Tasks) -> None:
    """Kafka's ``throwIfRequestContainsInvalidTasks``."""
    for subtopology, partition in sorted(owned.active | owned.standby | owned.warmup):
        tasks = configured.tasks.get(subtopology)
        if tasks is None:
            raise InvalidGroupRequest(f"Subtopology {subtopology} does not exist in the topology.")
        if not 0 <= partition < tasks:
            raise InvalidGroupRequest(
                f"Task {partition} for subtopology {subtopology} is invalid. Number of tasks for this "
                f"subtopology: {tasks}"
            )


def _assign(group: StreamsGroup, configured: ConfiguredTopology) -> StreamsGroup:
    """A new target assignment at the group epoch: every task of a ready topology, none otherwise."""
    if configured.ready:
        specs = {
            m.member_id: MemberSpec(
                m.process_id,
                group.target.get(m.member_id, EMPTY).active,
                group.target.get(m.member_id, EMPTY).standby,
            )
            for m in group.members.values()
        }
        given = assign(specs, configured.tasks, configured.stateful, group.standby_replicas)
        target = {member: Tasks(a.active, a.standby, a.warmup) for member, a in given.items()}
    else:
        target = {member: EMPTY for member in group.members}
    return replace(group, assignment_epoch=group.group_epoch, target=MappingProxyType(target))


def _reconcile(group: StreamsGroup, member: StreamsMember, owned: Tasks | None) -> StreamsMember:
    if member.epoch == group.assignment_epoch and member.state == STABLE:
        return member
    step = reconcile(
        member.state,
        member.epoch,
        member.assigned,
        member.revoking,
        member.process_id,
        group.assignment_epoch,
        group.target.get(member.member_id, EMPTY),
        _without(group, member.member_id).holders(),
        owned,
    )
    previous = member.epoch if step.epoch != member.epoch else member.previous_epoch
    held = step.assigned.active | step.revoking.active  # a task kept keeps its epoch; a new one: this step's
    epochs = {t: e for t in held if (e := member.task_epoch(t)) is not None}
    epochs.update({t: step.epoch for t in held if t not in epochs})
    return replace(
        member, state=step.state, epoch=step.epoch, previous_epoch=previous, assigned=step.assigned,
        revoking=step.revoking, active_epochs=MappingProxyType(epochs),
    )  # fmt: skip


def _without(group: StreamsGroup, member_id: str) -> StreamsGroup:
    return replace(
        group, members=MappingProxyType({k: m for k, m in group.members.items() if k != member_id})
    )


def _with_member(group: StreamsGroup, member: StreamsMember) -> StreamsGroup:
    members = dict(group.members)
    members[member.member_id] = member
    return replace(group, members=MappingProxyType(members))


def leave(group: StreamsGroup, hb: StreamsHeartbeat) -> StreamsAnswer:
    """Epoch -1 (leave) or -2 (a static member leaving for a while); a member leaving may ask the
    application to shut down (Kafka's ``streamsGroupLeave``)."""
    member = leaving(group.name, group.members, hb.member_id, hb.instance_id)
    left: StreamsMember | None = member
    if hb.instance_id is not None and hb.member_epoch == STATIC_LEAVE_EPOCH:
        after = _with_member(group, replace(member, epoch=STATIC_LEAVE_EPOCH, revoking=EMPTY))
        left = None  # it stays in the group, its session running
    else:
        after = fence(group, member.member_id)
    if hb.shutdown_application and after.members:
        after = replace(after, shutdown_by=hb.member_id)
    return StreamsAnswer(after, hb.member_id, hb.member_epoch, None, (), (), left)


def fence(group: StreamsGroup, member_id: str) -> StreamsGroup:
    """The member is removed (it left, or its session or rebalance timeout passed): the group epoch is
    bumped, so the next heartbeat computes a target without it; its tasks are free at once. The last
    member gone, a shutdown asked for is forgotten (as Kafka clears it on Empty) and the (empty) target
    is at the new epoch, as Kafka writes its target assignment metadata then (``streamsGroupFenceMember``)."""
    if member_id not in group.members:
        return group
    members = {k: m for k, m in group.members.items() if k != member_id}
    target = {k: t for k, t in group.target.items() if k != member_id}
    epoch = group.group_epoch + 1
    return replace(
        group,
        group_epoch=epoch,
        assignment_epoch=group.assignment_epoch if members else epoch,
        members=MappingProxyType(members),
        target=MappingProxyType(target),
        shutdown_by=group.shutdown_by if members else None,
    )


def revocation_overdue(member: StreamsMember) -> bool:
    """Whether the member is waiting to revoke (its rebalance timeout runs while it is)."""
    return member.state == UNREVOKED_TASKS
