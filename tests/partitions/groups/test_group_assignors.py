"""Assignors: every subscribed partition to exactly one subscribed member, balanced, deterministic."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from partitions.groups.assignors import ASSIGNORS, TopicPartition, range_assign, round_robin_assign

TOPICS = ["a", "b", "c"]
members = st.lists(st.sampled_from([f"m{i}" for i in range(8)]), min_size=1, max_size=8, unique=True)
counts = st.fixed_dictionaries({t: st.integers(0, 12) for t in TOPICS})


def test_range_gives_contiguous_ranges_first_members_one_extra() -> None:
    got = range_assign({"m1": ["t"], "m2": ["t"], "m3": ["t"]}, {"t": 7})
    assert got == {
        "m1": (TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)),
        "m2": (TopicPartition("t", 3), TopicPartition("t", 4)),
        "m3": (TopicPartition("t", 5), TopicPartition("t", 6)),
    }


def test_round_robin_deals_across_topics_and_skips_unsubscribed_members() -> None:
    got = round_robin_assign({"m1": ["x", "y"], "m2": ["y"]}, {"x": 2, "y": 2})
    assert got == {
        "m1": (TopicPartition("x", 0), TopicPartition("x", 1), TopicPartition("y", 1)),
        "m2": (TopicPartition("y", 0),),
    }


def test_more_members_than_partitions_leaves_some_idle() -> None:
    for assign in ASSIGNORS.values():
        got = assign({"m1": ["t"], "m2": ["t"], "m3": ["t"]}, {"t": 2})
        assert sorted(len(v) for v in got.values()) == [0, 1, 1]


@settings(max_examples=200, deadline=None)
@given(members, counts, st.data())
def test_each_partition_to_exactly_one_subscribed_member(
    names: list[str], sizes: dict[str, int], data: st.DataObject
) -> None:
    subscriptions = {m: data.draw(st.lists(st.sampled_from(TOPICS), unique=True), label=m) for m in names}
    for name, assign in ASSIGNORS.items():
        got = assign(subscriptions, sizes)
        assert set(got) == set(names), name
        owned = [tp for tps in got.values() for tp in tps]
        wanted = {t for topics in subscriptions.values() for t in topics}
        expected = {TopicPartition(t, p) for t in wanted for p in range(sizes[t])}
        assert len(owned) == len(set(owned)) and set(owned) == expected, name
        for member, tps in got.items():
            assert all(tp.topic in subscriptions[member] for tp in tps), name
        assert assign(dict(reversed(list(subscriptions.items()))), sizes) == got, f"{name}: order matters"


@settings(max_examples=200, deadline=None)
@given(members, counts)
def test_balanced_with_identical_subscriptions(names: list[str], sizes: dict[str, int]) -> None:
    subscriptions = {m: TOPICS for m in names}
    spread = [len(v) for v in round_robin_assign(subscriptions, sizes).values()]
    assert max(spread) - min(spread) <= 1
    ranged = range_assign(subscriptions, sizes)
    for topic in TOPICS:
        per_topic = [sum(1 for tp in tps if tp.topic == topic) for tps in ranged.values()]
        assert max(per_topic) - min(per_topic) <= 1
