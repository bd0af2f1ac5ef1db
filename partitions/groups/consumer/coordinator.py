"""The consumer group protocol's coordinator (KIP-848) on the node leading a group's ``__consumer_groups``
partition: runs ``consumer.group``'s pure state machine against the group as the replicated table holds
it, writes each changed group there (``ConsumerGroupRecord``) before the member is answered, and keeps
the timers Kafka keeps in memory: each member's session and the rebalance timeout of a member asked to
revoke partitions. A member's session is the group's ``consumer.session.timeout.ms`` group config, else
the node's ``session_timeout_ms`` (Kafka's ``group.consumer.session.timeout.ms``, 45 s), read at each of
its heartbeats as Kafka reschedules its session timer; the heartbeat interval answered is the group's
``consumer.heartbeat.interval.ms``, else the node's (``partitions.resource_configs.consumer_timeouts``).
Timers are soft state of the leader term: a coordinator taking over (a failover, a restart) starts every
member's session afresh, and the group, its epochs, members and assignments are the table's, so none is
lost.

One group, one protocol (``group_types``, asked once per heartbeat): a group held by HTTP instances or a
share group is not a consumer group (``NotConsumerGroup``, Kafka's GROUP_ID_NOT_FOUND); an empty classic
group is taken over by the first consumer protocol member joining it (Kafka's offline migration), and a
classic group with members is converted by it (``from_classic``, Kafka's online upgrade). Heartbeats of
one group are handled one at a time (a lock per group); those of different groups concurrently.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import replace
from typing import Protocol

from partitions.errors import TopicAuthorizationFailed
from partitions.groups.classic.members import ClassicGroup, GroupCode, GroupRefusal
from partitions.groups.consumer import classic_members
from partitions.groups.consumer.classic_members import ClassicJoin
from partitions.groups.consumer.from_classic import from_classic
from partitions.groups.consumer.group import (
    Answer,
    ConsumerGroup,
    ConsumerMember,
    Heartbeat,
    fence,
    regex_after,
    revocation_overdue,
    validate,
)
from partitions.groups.consumer.group import heartbeat as step
from partitions.groups.consumer.to_classic import Downgraded, to_classic
from partitions.groups.consumer.topic_regex import EVERYONE, BudgetSpent, RegexResolver, Viewer
from partitions.groups.defaults import (
    CONSUMER_SESSION_TIMEOUT_MS_DEFAULT,
    MIGRATION_POLICIES,
    MIGRATION_POLICY_DEFAULT,
    REGEX_RESOLVE_BUDGET_MS_DEFAULT,
)
from partitions.groups.epoch_coordinator import EpochCoordinator, GroupRecords
from partitions.groups.epoch_members import JOIN_EPOCH
from partitions.groups.errors import (
    ConsumerProtocolVersion,
    GroupNotEmpty,
    GroupTopicsHidden,
    InvalidRegularExpression,
    StaleMemberEpoch,
    UnknownMember,
)
from partitions.groups.group_model import Group
from partitions.groups.group_types import GroupType
from partitions.resource_configs import consumer_timeouts

log = logging.getLogger("raftlog.groups")

SESSION_TIMEOUT_MS_DEFAULT = CONSUMER_SESSION_TIMEOUT_MS_DEFAULT
HEARTBEAT_INTERVAL_MS_DEFAULT = 5_000  # Kafka's group.consumer.heartbeat.interval.ms
OFFSET_COMMIT_CONSUMER_VERSION = 9  # the first OffsetCommit a consumer protocol member may use
# a classic group converted while its members wrote rebalances (each a new generation) is read again this
# many times in one heartbeat; then the member is answered the refusal and its next heartbeat tries again
CONVERT_ATTEMPTS = 3


class ConsumerRecords(GroupRecords, Protocol):
    """What this coordinator needs of the node's group coordinator (``coordinator.GroupCoordinator``)."""

    def partition_count(self, topic: str) -> int: ...

    def topics(self) -> Collection[str]:
        """Every topic there is (for regular expression subscriptions): an object replaced whole when
        the topics change, the same one while they do not (``topic_regex`` caches by it)."""
        ...

    def led_consumer_groups(self) -> Iterable[tuple[str, int, ConsumerGroup]]:
        """(name, term, state) of every consumer protocol group in a partition led here."""
        ...

    async def record_consumer(
        self, group: str, state: ConsumerGroup, converts: int | None = None
    ) -> None: ...

    def classic_to_convert(self, group: str) -> tuple[int, int, ClassicGroup] | None:
        """(the term its partition is led here in, the generation the table holds, the classic group)
        when classic members hold the group against a consumer protocol member; None otherwise."""
        ...

    def drop_classic(self, group: str) -> None:
        """The classic coordinator lets the group go; its waiting members rejoin."""
        ...

    async def record_downgrade(self, group: str, classic: Downgraded, converts: int) -> None:
        """The classic group a consumer protocol group at epoch ``converts`` becomes, written in its
        place, collecting its members' joins."""
        ...


class ConsumerGroupCoordinator(EpochCoordinator[ConsumerGroup, ConsumerMember]):
    """Event loop only. ``monotonic`` (ms) times sessions and rebalance timeouts."""

    asking = GroupType.CONSUMER
    what = "consumer group"

    def __init__(
        self,
        records: ConsumerRecords,
        monotonic: Callable[[], int],
        session_timeout_ms: int = SESSION_TIMEOUT_MS_DEFAULT,
        heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS_DEFAULT,
        new_member_id: Callable[[], str] = lambda: str(uuid.uuid4()),
        group_configs: Callable[[str], Mapping[str, str]] = lambda group: {},
        regex_budget_ms: int = REGEX_RESOLVE_BUDGET_MS_DEFAULT,
        migration_policy: str = MIGRATION_POLICY_DEFAULT,
    ) -> None:
        """``group_configs``: a group's configs (``partitions.resource_configs``), read at each use;
        ``migration_policy``: Kafka's ``group.consumer.migration.policy`` (``MIGRATION_POLICIES``)."""
        if migration_policy not in MIGRATION_POLICIES:
            choices = ", ".join(MIGRATION_POLICIES)
            raise ValueError(f"migration policy {migration_policy!r}: use one of {choices}")
        super().__init__(records, monotonic, revocation_overdue, group_configs)
        self._consumer = records
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self._new_member_id = new_member_id
        self.regexes = RegexResolver(budget_ms=regex_budget_ms)  # --group-consumer-regex-budget-ms
        self.migration_policy = migration_policy  # --group-consumer-migration-policy

    def timeouts(self, name: str) -> tuple[int, int]:
        """The group's session timeout and heartbeat interval (ms) as its configs say now."""
        return consumer_timeouts(
            self.group_configs(name), self.session_timeout_ms, self.heartbeat_interval_ms
        )

    def session_ms(self, name: str) -> int:
        return self.timeouts(name)[0]

    def _of(self, group: Group) -> ConsumerGroup | None:
        return group.consumer

    def _new(self, name: str) -> ConsumerGroup:
        return ConsumerGroup(name)

    def _led(self) -> Iterable[tuple[str, int, ConsumerGroup]]:
        return self._consumer.led_consumer_groups()

    def _fence(self, state: ConsumerGroup, member_id: str) -> ConsumerGroup:
        return fence(state, member_id)

    async def _record(self, name: str, state: ConsumerGroup) -> None:
        """Written whole; or, when only classic members are left in it and the migration policy allows,
        written as the classic group it becomes (Kafka's online downgrade, ``to_classic``), which the
        classic coordinator runs from then on: its timers here are dropped at the next sweep."""
        downgrade = self.migration_policy in ("bidirectional", "downgrade")
        classic = to_classic(state, downgrade)
        if classic is None:
            await self._consumer.record_consumer(name, state)
            return
        held = self.state_of(name)
        converts = state.group_epoch if held is None else held.group_epoch
        await self._consumer.record_downgrade(name, classic, converts)
        log.info(
            "consumer group %s: converted to a classic group at generation %d with %d member(s)",
            name, classic.generation, len(classic.members),
        )  # fmt: skip

    async def heartbeat(self, name: str, hb: Heartbeat, viewer: Viewer = EVERYONE) -> Answer:
        """A ConsumerGroupHeartbeat from ``viewer`` (the principal it came from): the group's next state
        written, then answered. As Kafka: each topic it subscribes to by name must be one it may DESCRIBE
        (TopicAuthorizationFailed), and its regex resolves only to topics it may DESCRIBE."""
        validate(hb)
        hidden = await self.regexes.hidden(hb.subscribed or (), viewer)
        if hidden is not None:
            raise TopicAuthorizationFailed(viewer.principal or "", "describe", "topic", hidden)
        await self._records.readable(name)
        async with self._timers.lock(name):
            attempts = 0
            while True:
                term, state, converts = self._current_or_converted(name, hb.member_epoch == JOIN_EPOCH)
                regex = regex_after(state, hb) if hb.member_epoch >= 0 else None
                regex_topics = None if regex is None else await self._resolve(name, state, hb, regex, viewer)
                topics = set(state.subscribed_topics()) | set(hb.subscribed or ()) | set(regex_topics or ())
                counts = {t: self._consumer.partition_count(t) for t in sorted(topics)}
                new_member_id = hb.member_id or self._new_member_id()
                answer = step(state, hb, counts, new_member_id, regex_topics=regex_topics)
                session_ms = self.session_ms(name)
                if converts is None:
                    await self._stepped(
                        name, term, state, answer.group, answer.member_id, answer.left, session_ms
                    )
                    return answer
                try:
                    await self._convert(name, term, converts, answer, session_ms)
                except GroupNotEmpty:  # the classic members wrote a rebalance meanwhile: read it again
                    attempts += 1
                    if attempts == CONVERT_ATTEMPTS:
                        raise
                    continue
                return answer

    def _current_or_converted(self, name: str, joining: bool) -> tuple[int, ConsumerGroup, int | None]:
        """``_current`` with None; but a classic group with members that a joining member finds is the
        consumer protocol group it becomes (Kafka's online upgrade, ``from_classic``), with the classic
        generation the table holds, which the write of the heartbeat's result converts (``_convert``)."""
        found = self._consumer.classic_to_convert(name) if joining else None
        if found is None:
            return (*self._current(name, joining), None)
        term, generation, classic = found
        upgrade = self.migration_policy in ("bidirectional", "upgrade")
        return term, from_classic(classic, self._consumer.partition_count, upgrade=upgrade), generation

    async def _convert(self, name: str, term: int, converts: int, answer: Answer, session_ms: int) -> None:
        """The joining member's heartbeat on the converted group written in the classic group's place, as
        Kafka writes the conversion and the heartbeat's records at once: the classic coordinator lets the
        group go first (its waiting members rejoin, into the consumer group), and again once written (a
        classic call may have loaded it from the table meanwhile); then each member's session starts, the
        classic members' of their own timeout. GroupNotEmpty when the table no longer holds generation
        ``converts``."""
        self._consumer.drop_classic(name)
        await self._consumer.record_consumer(name, answer.group, converts=converts)
        self._consumer.drop_classic(name)
        timers = self._timers.of(name, term)
        for member in answer.group.members.values():
            classic_ms = None if member.classic is None else member.classic.session_timeout_ms
            self._timers.heard(timers, member, classic_ms or session_ms)
        log.info(
            "consumer group %s: converted from a classic group at generation %d with %d member(s)",
            name, converts, len(answer.group.members) - 1,
        )  # fmt: skip

    async def _resolve(
        self, name: str, state: ConsumerGroup, hb: Heartbeat, regex: str, viewer: Viewer
    ) -> tuple[str, ...] | None:
        """The topics the member's regex resolves to for its principal (off the loop, cached), or None
        when a regex it already had ran past the time budget: it keeps the topics it had. A new regex
        past the budget is refused (InvalidRegularExpression), as RE2 refusing it is. A kept one RE2
        refuses (written before, when groups matched with Python's ``re``) resolves to no topic, logged,
        as Kafka ignores a stored regex it cannot parse."""
        new = regex != regex_after(state, replace(hb, subscribed_regex=None))
        try:
            return await self.regexes.resolve(regex, self._consumer.topics(), viewer)
        except InvalidRegularExpression as refused:
            if new:
                raise
            log.warning("consumer group %s: member %s's regex is ignored: %s", name, hb.member_id, refused)
            return ()
        except BudgetSpent:
            if new:
                raise InvalidRegularExpression(
                    regex, f"matching it took longer than the {self.regexes.budget_ms} ms allowed"
                ) from None
            log.warning(
                "consumer group %s: the regex of member %s ran past %d ms; its topics are kept",
                name, hb.member_id, self.regexes.budget_ms,
            )  # fmt: skip
            return None

    # -- classic members (consumer/classic_members.py) ----------------------------------------------------

    def holds_with_members(self, name: str) -> bool:
        """Whether the group is a consumer protocol group with members led here: the classic protocol's
        calls for it are this coordinator's (``classic_members``)."""
        state = self.consumer_group(name)
        return state is not None and bool(state.members)

    async def classic_join(self, name: str, request: ClassicJoin) -> Answer:
        """A classic member's JoinGroup: the group's next state written, then answered (its session its
        own session timeout). GroupRefusal as Kafka answers; MemberIdRequired for a new member that must
        join again with the id it carries."""
        if self.migration_policy == "disabled":
            raise GroupRefusal(
                GroupCode.inconsistent_group_protocol,
                f"Cannot join the consumer group {name} with the classic protocol because the group "
                "migration is disabled.",
            )
        async with self._timers.lock(name):
            term, state = self._current(name, False)
            new_member_id = request.member_id or self._new_member_id()
            answer = classic_members.join(state, request, self._consumer.partition_count, new_member_id)
            session_ms = request.session_timeout_ms
            await self._stepped(name, term, state, answer.group, answer.member_id, answer.left, session_ms)
            return answer

    def classic_sync(
        self, name: str, member_id: str, generation: int, protocol_type: str | None, protocol_name: str | None
    ) -> bytes:
        """A classic member's SyncGroup: its assignment's bytes; its session runs again from now."""
        term, state = self._current(name, False)
        assignment = classic_members.sync(state, member_id, generation, protocol_type, protocol_name)
        member, classic = classic_members.classic_member(state, member_id)
        self._timers.heard(self._timers.of(name, term), member, classic.session_timeout_ms)
        return assignment

    def classic_heartbeat(self, name: str, member_id: str, generation: int) -> None:
        """A classic member's Heartbeat: its session runs again from now; REBALANCE_IN_PROGRESS (a
        GroupRefusal) when it must rejoin."""
        term, state = self._current(name, False)
        member, classic, rejoin = classic_members.check_heartbeat(state, member_id, generation)
        self._timers.heard(self._timers.of(name, term), member, classic.session_timeout_ms)
        if rejoin is not None:
            raise rejoin

    async def classic_leave(self, name: str, leaving: list[tuple[str, str | None]]) -> list[GroupCode]:
        """A LeaveGroup to a consumer protocol group: each member named fenced, the group written once."""
        async with self._timers.lock(name):
            term, state = self._current(name, False)
            after, answers, gone = classic_members.leave(state, leaving)
            if after != state:
                await self._record(name, after)
            timers = self._timers.of(name, term)
            for member in gone:
                self._timers.left(timers, member.member_id)
                log.info("consumer group %s: member %s left (LeaveGroup)", name, member.member_id)
            return answers

    # -- what the other APIs check -----------------------------------------------------------------------

    def consumer_group(self, name: str) -> ConsumerGroup | None:
        """The group's consumer protocol state when the table holds one and it is led here."""
        return self.state_of(name)

    def check_commit(
        self, name: str, member_id: str, epoch: int, api_version: int, transactional: bool = False
    ) -> bool:
        """An OffsetCommit (or, ``transactional``, a TxnOffsetCommit) to a consumer protocol group with
        members, checked as Kafka's ``ConsumerGroup.validateOffsetCommit`` (UnknownMember,
        ConsumerProtocolVersion for an OffsetCommit below v9, StaleMemberEpoch): True when checked, False
        when the group is not such a group (the classic rules apply)."""
        state = self.consumer_group(name)
        if state is None or not state.members:
            return False
        if epoch < 0 and not member_id:
            raise UnknownMember(name, member_id)  # from outside the group while it has members
        member = state.members.get(member_id)
        if member is None:
            raise UnknownMember(name, member_id)
        if member.classic is not None:  # a classic member: its generation is its epoch
            if epoch != member.epoch:
                raise GroupRefusal(
                    GroupCode.illegal_generation,
                    f"The received generation id {epoch} does not match the expected member epoch "
                    f"{member.epoch}.",
                )
            return True
        if not transactional and api_version < OFFSET_COMMIT_CONSUMER_VERSION:
            raise ConsumerProtocolVersion(
                f"OffsetCommit version {OFFSET_COMMIT_CONSUMER_VERSION} or above must be used by members "
                "using the consumer group protocol"
            )
        if epoch != member.epoch:
            raise StaleMemberEpoch(name, member_id, epoch, member.epoch)
        return True

    async def describe_for(self, name: str, viewer: Viewer) -> ConsumerGroup:
        """The group as ``describe``, as Kafka's ConsumerGroupDescribe shows it to ``viewer``: a group one
        of whose members is assigned (or targeted, or revoking) a topic it may not DESCRIBE is
        GroupTopicsHidden (TOPIC_AUTHORIZATION_FAILED, no member shown; checked off the loop when many)."""
        state = self.describe(name)
        topics = {
            tp.topic
            for m in state.members.values()
            for tps in (m.assigned, m.revoking, state.target.get(m.member_id, ()))
            for tp in tps
        }
        if await self.regexes.hidden(topics, viewer) is not None:
            raise GroupTopicsHidden(viewer.principal or "", "describe", "topic", name)
        return state
