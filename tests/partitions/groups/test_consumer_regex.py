"""Regular expression subscriptions (KIP-848) resolved with RE2, off the event loop, within a time budget,
cached, and only to topics the member's principal may DESCRIBE; a description hidden from a principal
that may not DESCRIBE every topic its members are assigned (issue 72, items 1 and 6). The attack on a
real secure cluster: ``tests/kafka_api/test_consumer_group_regex.py``."""

from __future__ import annotations

import asyncio
import threading
import types
from dataclasses import replace
from types import MappingProxyType

import pytest

from partitions.errors import TopicAuthorizationFailed
from partitions.groups.assignors import TopicPartition as TP
from partitions.groups.consumer.coordinator import ConsumerGroupCoordinator
from partitions.groups.consumer.group import Heartbeat
from partitions.groups.consumer.topic_regex import (
    REGEX_CHARS_MAX,
    BudgetSpent,
    RegexResolver,
    Viewer,
    compile_regex,
    resolve,
)
from partitions.groups.errors import GroupTopicsHidden, InvalidRegularExpression, UnknownGroup
from tests.partitions.groups.test_consumer_coordinator import Clock, Table

ATTACK = "o(([a-z-]*)*)*!"  # the issue's: Python's re backtracks 4x more for each character matched
# names the attack's regex matches all of but the last character of: a backtracking engine tries every
# way of splitting each name between the three stars (it ran for seconds at 14 characters; these have
# 201): RE2 reads each once
HOSTILE = ("o" + "ab-" * 66, *(f"o{'a' * 150}{i:05d}" for i in range(20)))


def never_over() -> bool:
    return False


def everything(topic: str) -> bool:
    return True


def test_the_issues_regex_resolves_to_nothing_in_one_pass() -> None:
    """With ``re`` this does not finish (4x per character, 200 characters); RE2 reads each name once."""
    assert resolve(ATTACK, HOSTILE, everything, never_over) == ()
    assert resolve("o(([a-z-]*)*)*", HOSTILE[:1], everything, never_over) == HOSTILE[:1]


def test_whole_names_only_never_internal_ones_and_only_those_the_viewer_may_describe() -> None:
    topics = ["orders", "orders-1", "orders-2", "pre-orders-1", "__consumer_groups", "secret-orders-1"]
    assert resolve("orders-.*", topics, everything, never_over) == ("orders-1", "orders-2")
    assert resolve(".*", topics, lambda t: t != "orders-2", never_over) == (
        "orders", "orders-1", "pre-orders-1", "secret-orders-1"
    )  # fmt: skip


@pytest.mark.parametrize(
    "regex",
    [
        "(a)\\1",  # a backreference: RE2 has none (nor has RE2/J)
        "(?=a)b",  # a lookahead
        "a++",
        "t([",
        "a{1001}",  # RE2's repetition bound
        "x" * (REGEX_CHARS_MAX + 1),
    ],
)
def test_what_re2_refuses_is_an_invalid_regular_expression(regex: str) -> None:
    with pytest.raises(InvalidRegularExpression):
        compile_regex(regex)


def test_a_resolution_past_its_budget_ends() -> None:
    looks = []

    def over() -> bool:
        looks.append(1)
        return len(looks) > 2

    with pytest.raises(BudgetSpent):
        resolve("t.*", [f"t{i}" for i in range(10_000)], everything, over)
    assert len(looks) == 3  # it stopped at the first look past the budget, not at the end


def test_results_are_cached_per_regex_viewer_topics_and_acls() -> None:
    async def scenario() -> None:
        resolver = RegexResolver()
        topics: tuple[str, ...] = ("orders-1", "pay-1")
        alice = Viewer("User:alice", "h", everything, acls=("acl",))
        assert await resolver.resolve("orders-.*", topics, alice) == ("orders-1",)
        assert await resolver.resolve("orders-.*", topics, alice) == ("orders-1",)
        assert resolver.resolved == 1  # the second from the cache
        bob = Viewer("User:bob", "h", lambda t: False, acls=alice.acls)
        assert await resolver.resolve("orders-.*", topics, bob) == ()  # another principal: its own
        grown = ("orders-1", "orders-2", "pay-1")  # a new object: the topics changed
        assert await resolver.resolve("orders-.*", grown, alice) == ("orders-1", "orders-2")
        revoked = Viewer("User:alice", "h", lambda t: t != "orders-2", acls=("other acl",))
        assert await resolver.resolve("orders-.*", grown, revoked) == ("orders-1",)
        assert resolver.resolved == 4
        resolver.close()

    asyncio.run(scenario())


def test_a_budget_spent_is_remembered_for_those_topics() -> None:
    async def scenario() -> None:
        ticks = iter(range(0, 10_000_000, 10))  # 10 s a look: every resolution runs past 1 s at once
        resolver = RegexResolver(budget_ms=1_000, clock=lambda: next(ticks))
        topics = tuple(f"t{i}" for i in range(1_000))
        viewer = Viewer("User:a", "h", everything)
        for _ in range(2):
            with pytest.raises(BudgetSpent):
                await resolver.resolve("t.*", topics, viewer)
        assert resolver.resolved == 1
        resolver.close()

    asyncio.run(scenario())


def test_one_principals_resolutions_take_turns_behind_anothers() -> None:
    """Mallory's three new regexes at once and then bob's: bob's is matched second, not fourth."""

    async def scenario() -> None:
        resolver = RegexResolver()
        order: list[str] = []

        def seen(who: str) -> Viewer:
            def describable(topic: str) -> bool:
                order.append(f"{who} {topic}")
                return True

            return Viewer(f"User:{who}", "h", describable)

        topics = ("t1", "t2", "t3", "t4")
        mallory, bob = seen("mallory"), seen("bob")
        asks = [resolver.resolve(f"t{i}", topics, mallory) for i in (1, 2, 3)]
        await asyncio.gather(*asks, resolver.resolve("t4", topics, bob))
        assert order == ["mallory t1", "bob t4", "mallory t2", "mallory t3"]
        resolver.close()

    asyncio.run(scenario())


def test_a_heartbeats_many_names_are_checked_off_the_loop() -> None:
    """A heartbeat may name any number of topics: DESCRIBE of each is asked on the resolver's thread
    beyond a few, and the first hidden one (in name order) is the answer."""

    async def scenario() -> None:
        resolver = RegexResolver()
        threads: set[str] = set()

        def describable(topic: str) -> bool:
            threads.add(threading.current_thread().name)
            return not topic.startswith("secret")

        viewer = Viewer("User:m", "h", describable)
        assert await resolver.hidden(["b", "secret-2", "a", "secret-1"], viewer) == "secret-1"
        assert threads == {threading.current_thread().name}  # a few: on the loop
        threads.clear()
        many = [f"t{i:05d}" for i in range(10_000)] + ["secret-x"]
        assert await resolver.hidden(many, viewer) == "secret-x"
        assert await resolver.hidden(many[:-1], viewer) is None
        assert len(threads) == 1 and threading.current_thread().name not in threads
        resolver.close()

    asyncio.run(scenario())


# -- at the coordinator: whose topics, refused names, hidden descriptions -----------------------------


class Topics(Table):
    """A table whose cluster has the topics ``names`` (the object replaced when they change)."""

    def __init__(self, names: tuple[str, ...]) -> None:
        super().__init__()
        self.names = names

    def partition_count(self, topic: str) -> int:
        return 2 if topic in self.names else 0

    def topics(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.names


def _regex_join(regex: str, member: str = "") -> Heartbeat:
    return Heartbeat(member, 0, None, None, 10_000, None, None, frozenset(), subscribed_regex=regex)


def _viewer(principal: str, secret: bool) -> Viewer:
    """A principal that may DESCRIBE every topic but ``secret-*`` (unless ``secret``)."""
    return Viewer(principal, "h", lambda t: secret or not t.startswith("secret-"), acls=principal)


def _coordinator(names: tuple[str, ...]) -> tuple[ConsumerGroupCoordinator, Topics]:
    table = Topics(names)
    ids = iter(["a", "b", "c", "d"])
    return ConsumerGroupCoordinator(table, Clock(), 45_000, 5_000, lambda: next(ids)), table


def test_a_regex_resolves_to_the_topics_its_members_principal_may_describe() -> None:
    async def scenario() -> None:
        coordinator, _ = _coordinator(("orders-1", "secret-orders"))
        mallory = await coordinator.heartbeat("g", _regex_join(".*orders.*"), _viewer("User:m", False))
        assert mallory.assignment == {TP("orders-1", 0), TP("orders-1", 1)}
        admin = await coordinator.heartbeat("g", _regex_join(".*orders.*"), _viewer("User:admin", True))
        state = coordinator.describe("g")
        assert state.members["a"].regex_topics == ("orders-1",)
        assert state.members["b"].regex_topics == ("orders-1", "secret-orders")
        assert {tp.topic for tp in state.target["b"]} >= {"secret-orders"}
        assert admin.member_id == "b"

    asyncio.run(scenario())


def test_a_name_the_member_may_not_describe_is_refused_as_kafka_refuses_it() -> None:
    async def scenario() -> None:
        coordinator, _ = _coordinator(("orders-1", "secret-orders"))
        hb = Heartbeat("", 0, None, None, 10_000, ("orders-1", "secret-orders"), None, frozenset())
        with pytest.raises(TopicAuthorizationFailed, match="secret-orders"):
            await coordinator.heartbeat("g", hb, _viewer("User:m", False))
        with pytest.raises(UnknownGroup):
            coordinator.describe("g")  # nothing was written

    asyncio.run(scenario())


def test_a_description_naming_a_topic_the_asker_may_not_describe_is_refused_whole() -> None:
    async def scenario() -> None:
        coordinator, _ = _coordinator(("orders-1", "secret-orders"))
        await coordinator.heartbeat("g", _regex_join("secret-.*"), _viewer("User:admin", True))
        with pytest.raises(GroupTopicsHidden) as refused:
            await coordinator.describe_for("g", _viewer("User:m", False))
        assert "secret" not in str(refused.value)  # which topic is not said
        assert (await coordinator.describe_for("g", _viewer("User:admin", True))).members["a"].assigned

    asyncio.run(scenario())


def test_a_stable_groups_heartbeats_match_nothing_again_until_the_topics_change() -> None:
    async def scenario() -> None:
        coordinator, table = _coordinator(("orders-1",))
        viewer = _viewer("User:m", False)
        a = await coordinator.heartbeat("g", _regex_join("orders-.*"), viewer)
        b = await coordinator.heartbeat("g", _regex_join("orders-.*"), viewer)
        for _ in range(5):
            for member in (a, b):
                owned = frozenset(coordinator.describe("g").members[member.member_id].assigned)
                hb = Heartbeat(member.member_id, member.member_epoch, owned=owned)
                await coordinator.heartbeat("g", hb, viewer)
        assert coordinator.regexes.resolved == 1
        epoch = coordinator.describe("g").group_epoch
        table.names = ("orders-1", "orders-2")  # a topic made: the next heartbeat resolves again
        await coordinator.heartbeat("g", Heartbeat("a", coordinator.describe("g").members["a"].epoch), viewer)
        assert coordinator.regexes.resolved == 2
        assert coordinator.describe("g").members["a"].regex_topics == ("orders-1", "orders-2")
        assert coordinator.describe("g").group_epoch == epoch + 1

    asyncio.run(scenario())


def test_a_regex_past_the_budget_is_refused_when_new_and_keeps_its_topics_when_kept() -> None:
    async def scenario() -> None:
        coordinator, table = _coordinator(("orders-1",))
        viewer = _viewer("User:m", False)
        a = await coordinator.heartbeat("g", _regex_join("orders-.*"), viewer)
        spent = types.SimpleNamespace(now=0.0)

        def clock() -> float:
            spent.now += 10.0
            return spent.now

        coordinator.regexes = RegexResolver(budget_ms=1_000, clock=clock)
        table.names = ("orders-1", *(f"orders-{i}" for i in range(2, 500)))
        with pytest.raises(InvalidRegularExpression, match="longer than the 1000 ms"):
            await coordinator.heartbeat("g", Heartbeat("a", a.member_epoch, subscribed_regex="o.*"), viewer)
        kept = await coordinator.heartbeat("g", Heartbeat("a", a.member_epoch), viewer)
        assert kept.member_epoch == a.member_epoch
        assert coordinator.describe("g").members["a"].regex_topics == ("orders-1",)

    asyncio.run(scenario())


def test_a_kept_regex_re2_refuses_resolves_to_nothing_as_kafka_ignores_it() -> None:
    """A group written when regexes were matched with Python's ``re`` may hold a lookahead: its member's
    heartbeats go on (no topic from it), where a new one is refused."""

    async def scenario() -> None:
        coordinator, table = _coordinator(("orders-1", "orders-2"))
        viewer = _viewer("User:m", False)
        a = await coordinator.heartbeat("g", _regex_join("orders-.*"), viewer)
        with pytest.raises(InvalidRegularExpression):
            await coordinator.heartbeat(
                "g", Heartbeat("a", a.member_epoch, subscribed_regex="(?=o)o.*"), viewer
            )
        old = coordinator.describe("g")
        member = old.members["a"]
        written = replace(old, members=MappingProxyType({"a": replace(member, regex="(?=o)o.*")}))
        await table.record_consumer("g", written)
        kept = await coordinator.heartbeat("g", Heartbeat("a", member.epoch), viewer)
        assert kept.member_epoch >= member.epoch
        assert coordinator.describe("g").members["a"].regex_topics == ()

    asyncio.run(scenario())
