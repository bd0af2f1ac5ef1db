"""The cluster-wide call (``partitions.peers.cluster.Router``): run here, else where the leader hints point,
at most ``MAX_HOPS`` times; a hint naming the caller or the node just asked means nobody leads right now
(tried again for a bounded wait, then ``NoLeader``); a topic unknown here is asked of the controller leader.
Over in-memory services: no sockets."""

from __future__ import annotations

import pytest

from partitions.controller.state import CONTROLLER_GROUP
from partitions.errors import (
    HopLimitExceeded,
    NoController,
    NoControllerLeader,
    PeerUnreachable,
    UnknownTopic,
)
from partitions.peers.cluster import MAX_HOPS, Router
from raftlog.consensus.errors import NoLeader, NotLeader
from raftlog.storage.errors import DiskFull


class View:
    """The one thing the router asks of the node's view: the controller leader."""

    def __init__(self, node_id: str, controller: str | None) -> None:
        self.node_id = node_id
        self._controller = controller

    def controller(self) -> str | None:
        return self._controller


class Service:
    """One node's answer to ``whoami``: its name, or the refusal it was given."""

    def __init__(self, name: str, refusal: Exception | None = None) -> None:
        self.name = name
        self.refusal = refusal
        self.calls = 0

    async def whoami(self) -> str:
        self.calls += 1
        if self.refusal is not None:
            raise self.refusal
        return self.name


def router(
    nodes: dict[str, Service], controller: str | None = "n1", leader_wait_s: float = 0.0
) -> tuple[Router, Service]:
    return Router("n1", View("n1", controller), leader_wait_s), nodes["n1"]


async def run(
    nodes: dict[str, Service],
    topic: str | None = None,
    controller: str | None = "n1",
    leader_wait_s: float = 0.0,
) -> object:
    route, local = router(nodes, controller, leader_wait_s)
    served = await route.run(local, nodes.__getitem__, lambda s: s.whoami(), topic)
    return served.value, served.node


async def test_a_call_runs_here_when_this_node_serves_it() -> None:
    assert await run({"n1": Service("n1")}) == ("n1", "n1")


async def test_a_call_follows_the_hints_to_the_leader() -> None:
    nodes = {
        "n1": Service("n1", NotLeader("g", "n2")),
        "n2": Service("n2", NotLeader("g", "n3")),
        "n3": Service("n3"),
    }
    assert await run(nodes) == ("n3", "n3")
    assert [nodes[n].calls for n in ("n1", "n2", "n3")] == [1, 1, 1]


async def test_hints_that_go_round_stop_at_the_hop_limit() -> None:
    nodes = {
        "n1": Service("n1", NotLeader("g", "n2")),
        "n2": Service("n2", NotLeader("g", "n3")),
        "n3": Service("n3", NotLeader("g", "n2")),
    }
    with pytest.raises(HopLimitExceeded) as raised:
        await run(nodes)
    assert raised.value.hops == MAX_HOPS
    assert nodes["n2"].calls + nodes["n3"].calls == MAX_HOPS


@pytest.mark.parametrize("hint", [None, "n1", "n2"], ids=["none", "the caller", "the node asked"])
async def test_a_hint_naming_nobody_or_the_caller_or_the_node_asked_is_no_leader(hint: str | None) -> None:
    nodes = {"n1": Service("n1", NotLeader("g", "n2")), "n2": Service("n2", NotLeader("g", hint))}
    with pytest.raises(NoLeader):
        await run(nodes)


class Electing(Service):
    """A node that knows no leader for its first ``refusals`` calls, then is elected."""

    def __init__(self, name: str, refusals: int) -> None:
        super().__init__(name)
        self.refusals = refusals

    async def whoami(self) -> str:
        self.calls += 1
        if self.calls <= self.refusals:
            raise NoLeader("g")
        return self.name


async def test_a_call_that_finds_no_leader_waits_for_one_within_the_bound() -> None:
    electing = {"n1": Electing("n1", refusals=3)}
    assert await run(electing, leader_wait_s=5.0) == ("n1", "n1")  # tried again until elected
    assert electing["n1"].calls == 4

    never = {"n1": Electing("n1", refusals=10**9)}
    with pytest.raises(NoLeader):  # the bound passes: "retry later"
        await run(never, leader_wait_s=0.3)
    assert 2 <= never["n1"].calls <= 10

    route, local = router({"n1": Electing("n1", refusals=1)}, leader_wait_s=5.0)
    with pytest.raises(NoLeader):  # a view of the cluster answers what it sees now
        await route.run(local, lambda node: local, lambda s: s.whoami(), wait_for_leader=False)


class HandingOver(Service):
    """A leader whose disk is full: refuses with DiskFull for its first ``refusals`` calls, then names the
    replica it handed its leadership to."""

    def __init__(self, name: str, refusals: int, successor: str) -> None:
        super().__init__(name)
        self.refusals = refusals
        self.successor = successor

    async def whoami(self) -> str:
        self.calls += 1
        if self.calls <= self.refusals:
            raise DiskFull("/data", "no room")
        raise NotLeader("g", self.successor)


async def test_a_leader_refusing_for_want_of_room_is_asked_again_until_it_has_handed_over() -> None:
    nodes: dict[str, Service] = {
        "n1": Service("n1", NotLeader("g", "n2")),
        "n2": HandingOver("n2", refusals=3, successor="n3"),
        "n3": Service("n3"),
    }
    assert await run(nodes, leader_wait_s=5.0) == ("n3", "n3")  # the write lands on the new leader
    assert nodes["n2"].calls == 4

    stuck: dict[str, Service] = {"n1": HandingOver("n1", refusals=10**9, successor="n1")}
    with pytest.raises(DiskFull):  # nobody took over within the bound: 507, nothing done
        await run(stuck, leader_wait_s=0.3)


async def test_a_topic_unknown_here_is_asked_of_the_controller_leader() -> None:
    nodes = {"n1": Service("n1", UnknownTopic("new")), "n2": Service("n2")}
    assert await run(nodes, topic="new", controller="n2") == ("n2", "n2")
    with pytest.raises(NoController):  # no controller known: this node cannot tell
        await run(nodes, topic="new", controller=None)
    with pytest.raises(UnknownTopic):  # this node leads the controller: the topic does not exist
        await run(nodes, topic="new", controller="n1")
    with pytest.raises(UnknownTopic):  # a call about no topic in particular is not redirected
        await run(nodes, topic=None, controller="n2")


async def test_no_controller_leader_is_said_by_its_type_after_the_wait() -> None:
    """The controller's group without a leader (a NotLeader naming nobody, or NoLeader, of group
    ``controller``) ends in NoControllerLeader, which the Kafka door answers NOT_CONTROLLER as a broker
    with no active controller does; any other group's stays NoLeader (LEADER_NOT_AVAILABLE)."""
    for refusal in (NotLeader(CONTROLLER_GROUP, None), NoLeader(CONTROLLER_GROUP)):
        with pytest.raises(NoControllerLeader):
            await run({"n1": Service("n1", refusal)})
    with pytest.raises(NoLeader) as raised:
        await run({"n1": Service("n1", NotLeader("orders-0.3", None))})
    assert not isinstance(raised.value, NoControllerLeader)


class Killed(Service):
    """A node killed a moment ago: its name is in the others' hints, its port refuses (nothing is done)."""

    async def whoami(self) -> str:
        self.calls += 1
        raise PeerUnreachable(self.name, "whoami: connection refused")


async def test_a_controller_leader_that_cannot_be_reached_is_a_leader_not_known_yet() -> None:
    """This node still names the controller leader it last knew, now killed: the call is tried again
    while it may wait, and ends NoControllerLeader (Kafka's NOT_CONTROLLER, retried by admin clients),
    not the peer's failure (REQUEST_TIMED_OUT, which ends librdkafka's CreateTopics)."""
    nodes = {"n1": Service("n1", NotLeader(CONTROLLER_GROUP, "n3")), "n3": Killed("n3")}
    with pytest.raises(NoControllerLeader):
        await run(nodes, leader_wait_s=0.2)
    assert nodes["n3"].calls > 1  # asked again meanwhile


async def test_a_successor_elected_meanwhile_serves_the_call() -> None:
    """The hint moves on from the killed node to its successor while the call waits: served there."""
    killed = Killed("n3")

    class Electing(Service):
        async def whoami(self) -> str:
            self.calls += 1
            raise NotLeader("g", "n2" if killed.calls else "n3")

    nodes = {"n1": Electing("n1"), "n2": Service("n2"), "n3": killed}
    assert await run(nodes, leader_wait_s=5.0) == ("n2", "n2")
    assert killed.calls == 1


async def test_an_unreachable_leader_of_a_partition_is_the_peers_failure_once_the_wait_is_over() -> None:
    nodes = {"n1": Service("n1", NotLeader("topic-0", "n3")), "n3": Killed("n3")}
    with pytest.raises(PeerUnreachable):
        await run(nodes)


async def test_a_failure_a_reached_node_answered_about_another_node_is_its_answer() -> None:
    """n2 was reached and answered that n4 could not be: not n2 unreachable, no retry."""
    nodes = {"n1": Service("n1", NotLeader("g", "n2")), "n2": Service("n2", PeerUnreachable("n4", "x"))}
    with pytest.raises(PeerUnreachable) as raised:
        await run(nodes, leader_wait_s=1.0)
    assert raised.value.node_id == "n4" and nodes["n2"].calls == 1
