"""The node's one map of the groups it runs in memory (``partitions.groups.held_map``): the classic and
the share coordinators each see only their own groups through it, a name is held by one protocol at a
time, one held empty is handed over, one held with members is the asker's refusal."""

from __future__ import annotations

import asyncio

import pytest

from partitions.groups.classic.coordinator import ClassicGroups
from partitions.groups.classic.members import GroupCode, GroupRefusal
from partitions.groups.errors import NotShareGroup
from partitions.groups.group_types import GroupType
from partitions.groups.held_map import HeldMap
from partitions.groups.share.coordinator import ShareGroup
from partitions.groups.share.group import ShareMember


def _join(groups: ClassicGroups, name: str, now: int) -> asyncio.Future:  # type: ignore[type-arg]
    return groups.join(
        name, "", client_id="c", client_host="", protocol_type="consumer", protocols=[("range", b"")],
        session_timeout_ms=3000, rebalance_timeout_ms=5000, require_known_id=False, now_ms=now,
    )  # fmt: skip


def _share_member(member_id: str) -> ShareMember:
    return ShareMember(member_id, 1, rack_id=None, client_id="c", client_host="", subscribed=("t",))


async def test_each_protocol_sees_its_own_groups_and_a_name_held_with_members_refuses_the_other() -> None:
    held = HeldMap()
    classic = ClassicGroups(initial_delay_ms=0, held=held)
    share = held.view(GroupType.SHARE, ShareGroup)
    joining = _join(classic, "g", 0)
    classic.tick(0)
    joined = await joining
    share["s"] = ShareGroup("s", term=1, members={"m": _share_member("m")})

    assert list(classic.groups) == ["g"] and list(share) == ["s"] and len(held) == 2
    assert "g" not in share and share.get("g") is None and "s" not in classic.groups
    assert held.holder("g") is GroupType.CLASSIC and held.holder("s") is GroupType.SHARE
    with pytest.raises(KeyError):
        del share["g"]  # not this protocol's to drop
    assert held.holder("g") is GroupType.CLASSIC

    with pytest.raises(NotShareGroup, match="classic Kafka protocol"):
        share["g"] = ShareGroup("g", term=1)  # a share member that raced the classic one's join
    with pytest.raises(GroupRefusal) as refused:
        _join(classic, "s", 10)  # a classic member while share members hold it
    assert refused.value.code is GroupCode.inconsistent_group_protocol
    assert held.holder("s") is GroupType.SHARE and len(share["s"].members) == 1

    classic.leave(
        "g", [(joined.member_id, None)], 20
    )  # the classic group empties: a share member may take it
    share["g"] = ShareGroup("g", term=1)
    assert held.holder("g") is GroupType.SHARE and "g" not in classic.groups and list(classic.groups) == []
