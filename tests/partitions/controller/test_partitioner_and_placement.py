"""Key -> partition like Kafka; replicas and leaders spread evenly."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from partitions.controller.commands import AddPartitions, CreateTopic, DeleteTopic, encode
from partitions.controller.placement import (
    Load,
    TopicsLoad,
    check_assignment,
    internal_replication_factor,
    place,
)
from partitions.controller.state import ControllerStateMachine
from partitions.errors import CapacityExceeded, InvalidReassignment, PlacementImpossible, TooFewLiveNodes
from partitions.features import RAFTLOG_VERSION, SUPPORTED, kept_out
from partitions.replicas.cluster_view import ClusterView, encode_meta
from partitions.replicas.routing import Routing
from raftlog.storage.partitioner import murmur2, partition_for_key

# Kafka's own test vectors (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java)
KAFKA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), KAFKA_MURMUR2.items())
def test_murmur2_matches_kafka(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


@given(st.binary(max_size=64), st.integers(1, 1000))
def test_partition_is_stable_and_in_range(key: bytes, partitions: int) -> None:
    chosen = partition_for_key(key, partitions)
    assert 0 <= chosen < partitions
    assert chosen == partition_for_key(key, partitions)


@given(st.integers(1, 7), st.integers(1, 40), st.data())
def test_placement_is_balanced_and_valid(node_count: int, partitions: int, data: st.DataObject) -> None:
    nodes = [f"n{i}" for i in range(1, node_count + 1)]
    factor = data.draw(st.integers(1, node_count))
    assignment = place(nodes, partitions, factor)
    assert len(assignment) == partitions
    replicas: Counter[str] = Counter()
    leaders: Counter[str] = Counter()
    for replica_set in assignment:
        assert len(replica_set) == factor and len(set(replica_set)) == factor
        replicas.update(replica_set)
        leaders[replica_set[0]] += 1
    assert max(replicas[n] for n in nodes) - min(replicas[n] for n in nodes) <= 1
    fair_share = -(-partitions // node_count)
    assert max(leaders.values()) <= fair_share + 1, f"leaders {dict(leaders)} for {partitions} partitions"


def test_placement_accounts_for_existing_topics() -> None:
    existing = {"old": [["n1", "n2"], ["n1", "n2"]]}
    [replica_set] = place(["n1", "n2", "n3"], 1, 2, existing)
    assert replica_set[0] == "n3", "the only node without replicas or leaderships should lead the new one"


NODES = ["n1", "n2", "n3", "n4"]


@given(st.data())
def test_the_load_counted_from_each_change_is_the_load_counted_afresh(data: st.DataObject) -> None:
    """``TopicsLoad`` counts a new mapping of topics from its difference with the last one; after every
    change the controller applies (a topic created, grown, deleted, created again under its name) its load
    is what a count over every topic gives, and a placement over it is the placement over the topics."""
    machine, load = ControllerStateMachine(), TopicsLoad()
    names = st.sampled_from(["a", "b", "c", "d"])

    def replica_sets(factor: int) -> list[list[str]]:
        replica_set = st.lists(st.sampled_from(NODES), min_size=factor, max_size=factor, unique=True)
        return data.draw(st.lists(replica_set, min_size=1, max_size=4))

    for index in range(1, data.draw(st.integers(1, 12)) + 1):
        name = data.draw(names)
        topic = machine.metadata.topics.get(name)
        if topic is None:
            command: CreateTopic | DeleteTopic | AddPartitions = CreateTopic(
                name, replica_sets(data.draw(st.integers(1, 3)))
            )
        elif data.draw(st.booleans()):
            command = DeleteTopic(name)
        else:
            added = replica_sets(len(topic.replicas[0]))
            command = AddPartitions(name, topic.partitions + len(added), added)
        machine.apply(index, 1, encode(command))
        topics = machine.metadata.topics
        counted = load.of(topics)
        afresh = Load.of(t.replicas for t in topics.values())
        assert (dict(counted.replicas), dict(counted.leaders)) == (
            {n: c for n, c in afresh.replicas.items() if c},
            {n: c for n, c in afresh.leaders.items() if c},
        )
        assert load.of(topics) is counted, "the same mapping counted again"
        existing = {n: t.replicas for n, t in topics.items()}
        assert place(NODES, 3, 2, counted) == place(NODES, 3, 2, existing)


def test_placement_refuses_a_factor_above_the_live_nodes() -> None:
    with pytest.raises(PlacementImpossible):
        place(["n1", "n2"], 3, 3)


def test_placement_takes_a_crashed_node_only_when_the_live_ones_are_too_few_and_never_as_leader() -> None:
    assert place(["n1", "n2", "n3"], 3, 2, standby=["n4"]) == place(["n1", "n2", "n3"], 3, 2)
    placed = place(["n1", "n2"], 6, 3, standby=["n3"])
    assert all(sorted(rs) == ["n1", "n2", "n3"] and rs[0] != "n3" for rs in placed), placed
    assert {rs[0] for rs in placed} == {"n1", "n2"}, "leaders spread over the live nodes"
    [spread] = [place(["n1"], 4, 2, standby=["n2", "n3"])]
    assert Counter(rs[1] for rs in spread) == {"n2": 2, "n3": 2}, "standby replicas spread too"
    with pytest.raises(PlacementImpossible):
        place(["n1", "n2"], 1, 4, standby=["n3"])
    with pytest.raises(PlacementImpossible):
        place([], 1, 1, standby=["n3"])


@pytest.mark.parametrize(
    ("live", "down", "factor"),
    [
        (["n1", "n2", "n3"], [], 3),
        (["n1", "n2", "n3", "n4", "n5"], [], 3),
        (["n1", "n2"], ["n3"], 3),  # a node killed moments ago takes a replica, as Kafka's fenced broker
        (["n1", "n2"], ["n3", "n4"], 3),
        (["n1", "n2"], [], 2),  # a 2-node cluster
        (["n1"], [], 1),  # a 1-node cluster
    ],
)
def test_an_internal_topic_counts_the_nodes_down_after_a_crash_while_a_majority_is_live(
    live: list[str], down: list[str], factor: int
) -> None:
    assert internal_replication_factor(live, down) == factor
    for replicas in place(live, 4, factor, standby=down):  # __consumer_groups' 4 partitions
        assert replicas[0] in live, "a standby node never leads"
        assert sum(node in live for node in replicas) > factor // 2, f"{replicas}: a majority is live"


@pytest.mark.parametrize(("live", "down"), [(["n1"], ["n2", "n3"]), (["n1"], ["n2"])])
def test_an_internal_topic_is_not_created_while_a_majority_of_its_replicas_would_be_down(
    live: list[str], down: list[str]
) -> None:
    with pytest.raises(TooFewLiveNodes) as refused:
        internal_replication_factor(live, down)
    assert (refused.value.live, refused.value.down) == (1, len(down))
    assert "retry once they are back" in str(refused.value)


def test_a_node_that_left_is_not_counted_for_an_internal_topic() -> None:
    view = ClusterView("n1")
    for node, state in (("n2", "alive"), ("n3", "dead"), ("n4", "left")):
        view.update(node, state, 1, encode_meta(f"http://{node}", f"{node}:1", 1, {}, 512))
    addresses = {n: f"http://{n}" for n in ("n1", "n2", "n3", "n4")}
    routing = Routing("n1", addresses, view, None, dict)  # type: ignore[arg-type]  # nodes only
    assert (routing.placeable(), routing.standby()) == (["n1", "n2"], ["n3"])
    assert internal_replication_factor(routing.placeable(), routing.standby()) == 3
    view.update("n3", "left", 2, b"")  # its goodbye: gone for placement
    assert (routing.placeable(), routing.standby()) == (["n1", "n2"], [])
    assert internal_replication_factor(routing.placeable(), routing.standby()) == 2


def test_placement_within_capacity_fills_nodes_up_to_the_limit() -> None:
    existing = {"a": [["n1", "n2"], ["n2", "n3"]]}  # n1 1, n2 2, n3 1
    placed = place(["n1", "n2", "n3"], 4, 2, existing, replicas_max=4)
    held = Counter(node for assignment in ([*existing["a"], *placed],) for rs in assignment for node in rs)
    assert max(held.values()) == 4 and sum(held.values()) == 12  # exactly full: accepted


def test_placement_beyond_capacity_is_refused_with_what_each_node_has_left() -> None:
    existing = {"a": [["n1", "n2", "n3"]] * 9}  # 9 replicas on each node
    with pytest.raises(CapacityExceeded) as refused:
        place(["n1", "n2", "n3"], 2, 3, existing, replicas_max=10)
    error = refused.value
    assert error.replicas_max == 10
    assert error.room == {"n1": 1, "n2": 1, "n3": 1}
    assert error.over == {"n1": 11, "n2": 11, "n3": 11}
    assert "2 partition(s) x replication factor 3" in str(error) and "--replicas-max" in str(error)
    assert place(["n1", "n2", "n3"], 1, 3, existing, replicas_max=10)  # what fits still does


def test_without_a_limit_placement_never_refuses_for_capacity() -> None:
    assert len(place(["n1", "n2", "n3"], 10_000, 3, {"a": [["n1", "n2", "n3"]] * 50_000})) == 10_000


def test_a_node_kept_out_is_neither_alive_nor_placeable_and_the_hubs_refusal_names_it_first() -> None:
    """A node whose code is below the cluster's levels (as it gossips them: none, release 0.1.0) is kept
    out: no routing, no placement, no leadership counted; the Raft hub's refusal at its last handshake
    names it even while its gossip still says otherwise (a node restarted on an earlier release whose new
    gossip has not come yet)."""
    view = ClusterView("n1")
    view.update("n2", "alive", 1, encode_meta("http://n2", "n2:1", 1, {}, 512, release=("0.2.0", SUPPORTED)))
    view.update("n3", "alive", 1, encode_meta("http://n3", "n3:1", 1, {}, 512))  # release 0.1.0: no levels
    addresses = {n: f"http://{n}" for n in ("n1", "n2", "n3")}
    refused: dict[str, str] = {}

    def rule(announced: Mapping[str, int] | None) -> str | None:
        return kept_out({RAFTLOG_VERSION: 2}, announced)

    routing = Routing("n1", addresses, view, None, dict, kept_out=rule, refused=refused.get)  # type: ignore[arg-type]
    assert routing.kept_out("n3") is not None and "release 0.1.0" in str(routing.kept_out("n3"))
    assert routing.kept_out("n2") is None and routing.kept_out("n1") is None
    assert routing.alive_nodes() == ["n1", "n2"] and routing.placeable() == ["n1", "n2"]
    refused["n2"] = "refused at its handshake"
    assert routing.kept_out("n2") == "refused at its handshake"
    assert routing.alive_nodes() == ["n1"]
    view.update("n4", "dead", 1, b"")  # a node not heard from is down, not kept out
    assert routing.kept_out("n4") is None


def test_a_node_without_the_kafka_listener_the_others_serve_may_not_lead() -> None:
    """As gossip tells the listeners: a node lacking the Kafka door while another serving node has one is
    named (it would lead partitions Kafka clients cannot reach); a node not heard from yet is not judged,
    and in a cluster where no node serves Kafka none lacks it."""
    view = ClusterView("n1")
    for node, kafka in (("n2", "127.0.0.1:9093"), ("n3", None)):
        view.update(node, "alive", 1, encode_meta(f"http://{node}", f"{node}:1", 1, {}, 512, kafka=kafka))
    addresses = {n: f"http://{n}" for n in ("n1", "n2", "n3", "n4")}
    routing = Routing("n1", addresses, view, None, dict, kafka="127.0.0.1:9092")  # type: ignore[arg-type]
    routing.learn("n2", "http://n2", "127.0.0.1:9093")
    routing.learn("n3", "http://n3", None)
    assert [routing.doors_missing(n) for n in ("n1", "n2", "n3", "n4")] == [(), (), ("kafka",), ()]
    assert routing.may_lead("n3") is not None and "--kafka" in str(routing.may_lead("n3"))
    assert routing.may_lead("n2") is None
    routing.learn("n3", "http://n3", "127.0.0.1:9094")  # started again with --kafka
    assert routing.may_lead("n3") is None
    plain = Routing("n1", addresses, view, None, dict)  # type: ignore[arg-type]  # no node serves Kafka
    plain.learn("n3", "http://n3", None)
    assert plain.doors_missing("n3") == ()


def test_replicas_placed_by_hand_are_checked_as_placement_would_have_chosen_them() -> None:
    """``kafka-topics --replica-assignment``: taken as given, first node the preferred leader; refused
    (InvalidReassignment, nothing placed) for no partition, an empty or repeating set, mixed replication
    factors, or a node that is neither live nor a standby; past ``replicas_max``, CapacityExceeded."""
    live = ["n1", "n2", "n3"]
    assert check_assignment([["n2", "n1"], ["n3", "n2"]], live) == [["n2", "n1"], ["n3", "n2"]]
    assert check_assignment([["n4", "n1"]], live, standby=["n4"]) == [["n4", "n1"]]  # down, not gone
    for bad, why in (
        ([], "at least one partition"),
        ([[]], "at least one replica"),
        ([["n1", "n1"]], "repeats a node"),
        ([["n1", "n2"], ["n3"]], "same replication factor"),
        ([["n1", "n9"]], "node n9 is not a node"),
    ):
        with pytest.raises(InvalidReassignment, match=why):
            check_assignment(bad, live)
    existing = {"t": [["n1"], ["n1"]]}
    with pytest.raises(CapacityExceeded):
        check_assignment([["n1", "n2"]], live, existing, replicas_max=2)
    assert check_assignment([["n2", "n3"]], live, existing, replicas_max=2) == [["n2", "n3"]]
