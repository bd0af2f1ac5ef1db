"""One group, one protocol, decided in one place: each protocol asking to join a group another holds gets
its own refusal (the classic protocol's INCONSISTENT_GROUP_PROTOCOL, the consumer and share protocols'
GROUP_ID_NOT_FOUND, the HTTP door's 409), an empty group is free for any, a share group is one even
empty to a consumer protocol member, and a consumer protocol group one even empty to a share member."""

from __future__ import annotations

import pytest

from partitions.groups.classic.members import GroupCode, GroupRefusal
from partitions.groups.errors import GroupNotEmpty, NotConsumerGroup, NotShareGroup
from partitions.groups.group_types import GroupType, Holders, check_type, held_by, refusal

HTTP, CLASSIC, CONSUMER, SHARE = GroupType.HTTP, GroupType.CLASSIC, GroupType.CONSUMER, GroupType.SHARE


def _holding(holder: GroupType, members: int = 2) -> Holders:
    if holder is SHARE:
        return Holders(share_recorded=True, share=lambda: members)
    return Holders(**{holder.value: members}, share=lambda: 0)


@pytest.mark.parametrize("asking", [*GroupType, None])
def test_an_empty_group_is_free_for_every_protocol(asking: GroupType | None) -> None:
    assert held_by(Holders(share=lambda: 0), asking) is None
    check_type("g", asking, Holders(share=lambda: 0))


@pytest.mark.parametrize("holder", list(GroupType))
def test_a_protocol_is_never_refused_its_own_group(holder: GroupType) -> None:
    assert refusal("g", holder, _holding(holder)) is None


@pytest.mark.parametrize("holder", [HTTP, CONSUMER, SHARE])
def test_a_classic_member_is_refused_inconsistent_group_protocol(holder: GroupType) -> None:
    refused = refusal("g", CLASSIC, _holding(holder))
    assert isinstance(refused, GroupRefusal) and refused.code is GroupCode.inconsistent_group_protocol


@pytest.mark.parametrize(
    ("asking", "holder"), [(a, h) for a in (CONSUMER, SHARE) for h in GroupType if h is not a]
)
def test_a_consumer_or_share_member_is_refused_not_a_consumer_group(
    asking: GroupType, holder: GroupType
) -> None:
    refused = refusal("g", asking, _holding(holder))
    assert isinstance(refused, NotConsumerGroup) and refused.group == "g"
    assert isinstance(refused, NotShareGroup) is (asking is SHARE)
    if asking is SHARE:  # Kafka 4.4's words (GroupMetadataManager.getOrMaybeCreateShareGroup)
        assert str(refused).startswith("Group g is not a share group"), str(refused)


def test_an_http_instance_and_a_deletion_are_refused_group_not_empty_with_the_members_counted() -> None:
    for asking in (HTTP, None):
        refused = refusal("g", asking, Holders(classic=3, share=lambda: 0))
        assert isinstance(refused, GroupNotEmpty) and refused.members == 3
        assert refused.door == "the Kafka protocol"
    shared = refusal("g", HTTP, _holding(SHARE, 4))
    assert isinstance(shared, GroupNotEmpty) and shared.members == 4
    http = refusal("g", None, _holding(HTTP, 5))
    assert isinstance(http, GroupNotEmpty) and (http.members, http.door) == (5, "HTTP")


def test_an_empty_share_group_is_held_against_a_consumer_member_only() -> None:
    empty_share = Holders(share_recorded=True, share=lambda: 0)
    assert held_by(empty_share, CONSUMER) == (SHARE, 1)
    for asking in (CLASSIC, HTTP, None):
        assert held_by(empty_share, asking) is None


def test_the_share_coordinator_s_own_ask_never_reads_its_members() -> None:
    """The share coordinator asks while it works its members out: the rule must not ask it back."""
    held_by(Holders(), SHARE)
    held_by(Holders(share_recorded=True), CONSUMER)


def test_an_empty_consumer_protocol_group_is_held_against_a_share_and_a_streams_member_only() -> None:
    """Kafka 4.4 turns no group of another type into a share group: a share member joining a consumer
    protocol group that has no members left (its offsets and epoch kept) is refused, as a streams member
    is; a classic member, an HTTP instance and a deletion may take it."""
    empty_consumer = Holders(consumer_recorded=True, share=lambda: 0)
    assert held_by(empty_consumer, SHARE) == (CONSUMER, 1)
    assert held_by(empty_consumer, GroupType.STREAMS) == (CONSUMER, 1)
    refused = refusal("g", SHARE, empty_consumer)
    assert isinstance(refused, NotShareGroup), refused
    for asking in (CLASSIC, HTTP, None):
        assert held_by(empty_consumer, asking) is None
