"""A share group's assignment (``share.group.assign``) holds what Kafka's share ``SimpleAssignor`` holds,
for any members, subscriptions, partition counts and assignment before: each topic's every partition goes
to ceil(members / partitions) of the members subscribing to it, distinct; each of them gets at least one
and within one of the others; nobody gets a partition of a topic it does not subscribe to; what a member
held is kept while that allows (a member joining a balanced group takes only its share); and the same
inputs give the same assignment (a coordinator taking over assigns as its predecessor would)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from partitions.groups.assignors import TopicPartition as TP
from partitions.groups.share.group import assign

TOPICS = ("t", "u", "v")
subscriptions = st.dictionaries(
    st.sampled_from([f"m{i}" for i in range(12)]),
    st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3, unique=True).map(tuple),
    min_size=1,
    max_size=12,
)
counts = st.fixed_dictionaries({t: st.integers(0, 8) for t in TOPICS})


def _check(subs: dict[str, tuple[str, ...]], parts: dict[str, int], got: dict[str, frozenset[TP]]) -> None:
    assert set(got) == set(subs)
    for topic in TOPICS:
        members = [m for m, ts in subs.items() if topic in ts]
        if not members or not parts[topic]:
            assert not any(tp.topic == topic for tps in got.values() for tp in tps)
            continue
        sharing = -(-len(members) // parts[topic])
        holders = Counter(tp for m in members for tp in got[m] if tp.topic == topic)
        assert holders == {TP(topic, p): sharing for p in range(parts[topic])}, "each partition, shared"
        mine = [sum(1 for tp in got[m] if tp.topic == topic) for m in members]
        assert min(mine) >= 1 and max(mine) - min(mine) <= 1, (topic, mine)
    for member, tps in got.items():
        assert {tp.topic for tp in tps} <= set(subs[member]), "only its own topics"


@settings(max_examples=300, deadline=None)
@given(subscriptions, counts, st.data())
def test_every_partition_is_shared_evenly_among_its_topic_s_members(subs, parts, data) -> None:  # type: ignore[no-untyped-def]
    before = assign(subs, parts)
    _check(subs, parts, before)
    # any membership change after it: members leave, others come, topics gain partitions
    after_subs = data.draw(subscriptions)
    after_parts = {t: c + data.draw(st.integers(0, 2)) for t, c in parts.items()}
    after = assign(after_subs, after_parts, before)
    _check(after_subs, after_parts, after)
    assert after == assign(after_subs, after_parts, before), "deterministic"


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10), st.integers(1, 12))
def test_a_member_joining_takes_only_its_share(members: int, partitions: int) -> None:
    """Those already there keep all but what the newcomer takes: every partition that moves goes to it."""
    subs = {f"m{i:02}": ("t",) for i in range(members)}
    before = assign(subs, {"t": partitions})
    joined = {**subs, "new": ("t",)}
    after = assign(joined, {"t": partitions}, before)
    lost = sum(len(before[m] - after[m]) for m in subs)
    gained_by_others = sum(len(after[m] - before[m]) for m in subs)
    sharing_grew = -(-(members + 1) // partitions) > -(-members // partitions)
    if not sharing_grew:  # the same partitions per holder: the newcomer's part is all that moves
        assert gained_by_others == 0 and lost == len(after["new"])


def test_kafka_s_examples() -> None:
    """Fewer members than partitions: one member a partition; more: a partition to several."""
    three = assign({"a": ("t",), "b": ("t",), "c": ("t",)}, {"t": 6})
    assert sorted(len(tps) for tps in three.values()) == [2, 2, 2]
    five_on_two = assign({m: ("t",) for m in "abcde"}, {"t": 2})
    assert Counter(tp for tps in five_on_two.values() for tp in tps) == {TP("t", 0): 3, TP("t", 1): 3}
    assert assign({"a": ("t",)}, {"t": 0}) == {"a": frozenset()}
