"""A stopping node's pass over the groups it leads (``partitions.replicas.handover``): whom each goes to,
what is kept and why, and the bounds (transfers at once, time). The real stop, with node processes:
``tests/scenario/test_controlled_shutdown.py``."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from partitions.replicas import handover
from partitions.replicas.handover import NO_TARGET, OFF, OUT_OF_TIME, HandOver, hand_over, target
from raftlog.consensus.errors import ProposalRejected
from raftlog.consensus.interface import GroupStatus, Role


def _status(role: Role = Role.LEADER, voters: str = "n1 n2 n3", last: int = 10, **match: int) -> GroupStatus:
    return GroupStatus(
        "g", "n1", role, 1, "n1" if role is Role.LEADER else "n2", last, last, last, last,
        match_index=match, voters=frozenset(voters.split()),
    )  # fmt: skip


@dataclass
class Group:
    """A replica's group as the pass sees it: its status, and a transfer that takes ``delay_s``."""

    group_id: str
    state: GroupStatus
    refuse: bool = False
    delay_s: float = 0.0
    asked: list[tuple[str | None, int]] = field(default_factory=list)
    running: list[int] = field(default_factory=lambda: [0, 0])  # now, most at once (shared by a test)

    def status(self) -> GroupStatus:
        return self.state

    async def transfer_leadership(self, target_node_id: str | None, timeout_ms: int) -> None:
        self.asked.append((target_node_id, timeout_ms))
        self.running[0] += 1
        self.running[1] = max(self.running[1], self.running[0])
        try:
            await asyncio.sleep(self.delay_s)
            if self.refuse:
                raise ProposalRejected(self.group_id, "target not caught up")
        finally:
            self.running[0] -= 1


def test_a_group_goes_to_a_voter_holding_the_whole_log_then_to_the_one_given_fewest() -> None:
    everyone = lambda node: True  # noqa: E731
    assert target(_status(n2=10, n3=9), everyone, {}) == "n2"
    assert target(_status(n2=9, n3=10), everyone, {}) == "n3"  # caught up first
    assert target(_status(n2=10, n3=10), everyone, {"n2": 1}) == "n3"  # then spread
    assert target(_status(n2=10, n3=10), everyone, {}) == "n2"  # then by id
    assert target(_status(n2=3, n3=5, last=10), everyone, {}) == "n2"  # neither whole: fewest given, id


def test_no_voter_that_may_not_lead_is_chosen_and_a_group_of_one_keeps_its_leader() -> None:
    assert target(_status(n2=10, n3=10), lambda node: node != "n2", {}) == "n3"
    assert target(_status(n2=10, n3=10), lambda node: False, {}) is None
    assert target(_status(voters="n1"), lambda node: True, {}) is None


def test_the_pass_hands_over_what_it_leads_and_says_what_it_kept_and_why() -> None:
    groups = [
        Group("a", _status(n2=10, n3=10)),
        Group("b", _status(n2=10, n3=10)),
        Group("c", _status(n2=10, n3=10), refuse=True),
        Group("d", _status(voters="n1")),  # no other voter
        Group("e", _status(Role.FOLLOWER)),  # led elsewhere: not this node's to hand over
    ]
    done = asyncio.run(hand_over(groups, lambda node: True, 5.0, "n1"))
    assert (done.led, done.handed) == (4, 2)
    assert done.kept == {NO_TARGET: 1, "kept: ProposalRejected": 1}
    assert [g.asked[0][0] for g in groups[:3]] == ["n2", "n3", "n2"]  # spread over the two others
    assert all(0 < timeout_ms <= 5000 for g in groups[:3] for _, timeout_ms in g.asked)
    assert groups[4].asked == [] and groups[3].asked == []
    assert done.describe().startswith("handed over 2 of 4 leaderships in ")
    assert done.describe().endswith("(1 kept: ProposalRejected, 1 kept: no other voter may lead)")


def test_off_hands_nothing_over_and_says_so() -> None:
    groups = [Group("a", _status(n2=10, n3=10)), Group("b", _status(Role.FOLLOWER))]
    done = asyncio.run(hand_over(groups, lambda node: True, 0.0, "n1"))
    assert (done.led, done.handed, done.kept) == (1, 0, {OFF: 1})
    assert groups[0].asked == []


def test_transfers_run_at_most_so_many_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handover, "TRANSFERS_AT_ONCE", 3)
    running = [0, 0]
    groups = [Group(f"g{i}", _status(n2=10, n3=10), delay_s=0.01, running=running) for i in range(10)]
    done = asyncio.run(hand_over(groups, lambda node: True, 30.0, "n1"))
    assert done.handed == 10
    assert running[1] == 3


def test_what_waits_past_the_deadline_is_kept() -> None:
    """A clock that has passed the deadline once the first transfers began: the ones still waiting for
    their turn are not started."""
    now = [0.0]
    groups = [Group(f"g{i}", _status(n2=10, n3=10)) for i in range(handover.TRANSFERS_AT_ONCE + 5)]

    async def run() -> HandOver:
        original = groups[0].transfer_leadership

        async def first(target_node_id: str | None, timeout_ms: int) -> None:
            await original(target_node_id, timeout_ms)
            now[0] = 100.0  # the deadline passes while the first batch runs

        groups[0].transfer_leadership = first  # type: ignore[method-assign]
        return await hand_over(groups, lambda node: True, 1.0, "n1", clock=lambda: now[0])

    done = asyncio.run(run())
    assert (done.led, done.handed, done.kept) == (len(groups), handover.TRANSFERS_AT_ONCE, {OUT_OF_TIME: 5})


def test_a_transfer_that_fails_with_a_bug_is_raised_not_left_unread() -> None:
    """A typed refusal is counted and kept; anything else is a bug the stop must not hide."""

    class Broken(Group):
        async def transfer_leadership(self, target_node_id: str | None, timeout_ms: int) -> None:
            raise ZeroDivisionError("a bug")

    groups = [Group("a", _status(n2=10, n3=10)), Broken("b", _status(n2=10, n3=10))]
    with pytest.raises(ZeroDivisionError, match="a bug"):
        asyncio.run(hand_over(groups, lambda node: True, 5.0, "n1"))
    assert groups[0].asked  # the others were still handed over
