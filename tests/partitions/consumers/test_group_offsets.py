"""``GroupOffsets``: a group's offset call is asked again while its partition's leader moves, and only
when the time is spent does it fail, with the one retriable ``OffsetsUnavailable``; other refusals pass
through at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from partitions.consumers.offsets import GroupOffsets
from partitions.data.service import DataService, GroupOffset, Served
from partitions.errors import OffsetsUnavailable, PeerUnreachable, ReplicaRecovering, UnknownTopic
from raftlog.consensus.errors import NoLeader, OutcomeUnknown


class Partitions:
    """The cluster-wide data service as a script: the refusals to raise first, then the answer."""

    def __init__(self, refusals: list[Exception], answer: object = None, hang: bool = False) -> None:
        self.refusals = refusals
        self.answer = answer
        self.hang = hang
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    async def run(self, method: Callable[..., Awaitable[Any]], /, *args: Any, **kwargs: Any) -> Served[Any]:
        self.calls.append((method.__name__, args, kwargs))
        if self.refusals:
            raise self.refusals.pop(0)
        if self.hang:
            await asyncio.sleep(3600)
        return Served(self.answer, "n1")


async def test_a_commit_waits_through_an_election_and_a_dead_leader() -> None:
    partitions = Partitions(
        [
            NoLeader("t-0"),
            PeerUnreachable("n2", "refused"),
            ReplicaRecovering("t-0", 1, 2),
            OutcomeUnknown("t-0", "x"),
        ],
        answer=42,
    )
    assert await GroupOffsets(partitions).commit("g", "t", 0, 42, True, leader_epoch=5) == 42
    assert len(partitions.calls) == 5
    name, args, kwargs = partitions.calls[-1]
    assert name == DataService.commit_offset.__name__ and args[:5] == ("g", "t", 0, 42, True)
    assert kwargs == {"leader_epoch": 5}


async def test_a_commit_without_an_epoch_does_not_name_one() -> None:
    """A node of the previous release takes the call as it did (no argument it does not know)."""
    partitions = Partitions([], answer=7)
    await GroupOffsets(partitions).commit("g", "t", 0, 7, False)
    assert partitions.calls[0][2] == {}


async def test_no_leader_for_the_whole_time_is_offsets_unavailable() -> None:
    partitions = Partitions([NoLeader("t-0")] * 1000)
    started = time.monotonic()
    with pytest.raises(OffsetsUnavailable) as raised:
        await GroupOffsets(partitions, time_ms=500).committed("g", "t", 3)
    assert 0.4 <= time.monotonic() - started < 5
    assert (raised.value.group, raised.value.topic, raised.value.partition) == ("g", "t", 3)
    assert "no leader" in raised.value.reason and len(partitions.calls) > 1


async def test_a_call_that_outlives_the_time_is_given_up() -> None:
    partitions = Partitions([], hang=True)
    with pytest.raises(OffsetsUnavailable):
        await asyncio.wait_for(GroupOffsets(partitions, time_ms=300).delete("g", "t", 0), 10)


async def test_a_refusal_that_waiting_cannot_change_passes_through_at_once() -> None:
    partitions = Partitions([UnknownTopic("t")])
    with pytest.raises(UnknownTopic):
        await GroupOffsets(partitions).committed("g", "t", 0)
    assert len(partitions.calls) == 1


async def test_a_read_answers_the_offset_and_its_epoch_or_none() -> None:
    found = GroupOffset(10, 3)
    assert await GroupOffsets(Partitions([NoLeader("t-0")], found)).committed("g", "t", 0, True) == found
    assert await GroupOffsets(Partitions([], None)).committed("g", "t", 0) is None
