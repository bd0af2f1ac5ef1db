"""A consumer protocol group left with classic members only becoming a classic group again
(``consumer/to_classic.py``, Kafka's online downgrade), pure: written at the group's epoch with each
member's target partitions as its assignment, in its subscription's version, and the protocol its
members vote for; and when it stays a consumer protocol group."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from partitions.groups.assignors import TopicPartition as TP
from partitions.groups.consumer.assignment import STABLE
from partitions.groups.consumer.group import ClassicProtocols, ConsumerGroup, ConsumerMember
from partitions.groups.consumer.to_classic import to_classic
from partitions.groups.consumer_protocol import decode_assignment

V0 = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"  # ConsumerProtocolSubscription v0 of "t"
V1 = b"\x00\x01\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff\x00\x00\x00\x00"  # v1: no owned partitions


def _member(member_id: str, protocols: tuple[tuple[str, bytes], ...] | None) -> ConsumerMember:
    classic = None if protocols is None else ClassicProtocols(6_000, protocols)
    return ConsumerMember(
        member_id, None, None, f"client-{member_id}", "/h", 5, 5, STABLE, 20_000, ("t",), None,
        frozenset({TP("t", 0)}), classic=classic,
    )  # fmt: skip


def _group(*members: ConsumerMember) -> ConsumerGroup:
    target = {m.member_id: frozenset({TP("t", i), TP("t", i + 2)}) for i, m in enumerate(members)}
    return ConsumerGroup(
        "g", 6, 5, MappingProxyType({m.member_id: m for m in members}), MappingProxyType(target),
        MappingProxyType({"t": 4}),
    )  # fmt: skip


def test_classic_members_alone_become_a_classic_group_with_their_target_partitions() -> None:
    group = _group(
        _member("x", (("roundrobin", V1), ("range", V1))),
        _member("y", (("range", V0), ("roundrobin", V0))),
        _member("z", (("range", V0),)),
    )
    classic = to_classic(group, downgrade=True)
    assert classic is not None
    assert (classic.protocol, classic.generation, classic.leader) == (
        "range",
        6,
        "x",
    )  # two of three vote range
    x, y, _ = classic.members
    assert (x.member_id, x.client_id, x.session_timeout_ms, x.rebalance_timeout_ms) == (
        "x",
        "client-x",
        6_000,
        20_000,
    )
    assert x.subscription == V1 and y.subscription == V0  # their metadata of the protocol chosen
    assert decode_assignment(x.assignment) == (TP("t", 0), TP("t", 2))  # the target, not what it holds now
    assert x.assignment[:2] == b"\x00\x01" and y.assignment[:2] == b"\x00\x00"  # each in its version


def test_it_stays_a_consumer_protocol_group_with_a_member_of_that_protocol_or_no_member_or_no_downgrade() -> (
    None
):
    classic = _member("x", (("range", V0),))
    assert to_classic(_group(classic, _member("m", None)), downgrade=True) is None
    assert to_classic(replace(_group(classic), members=MappingProxyType({})), downgrade=True) is None
    assert to_classic(_group(classic), downgrade=False) is None
    assert to_classic(_group(classic, replace(classic, member_id="y")), downgrade=True, members_max=1) is None
