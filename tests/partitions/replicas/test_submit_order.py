"""Produces to one partition propose in the order their calls began, whatever each waits for first."""

from __future__ import annotations

import asyncio

import pytest

from partitions.replicas.submit_order import SubmitOrder


async def _produce(
    order: SubmitOrder, name: str, wait_s: float, proposed: list[str], fail: bool = False
) -> None:
    turn = order.take()
    try:
        await asyncio.sleep(wait_s)  # e.g. recompressing on a reader thread
        if fail:
            raise ValueError(name)
        await turn.wait()
    finally:
        turn.end()
    proposed.append(name)  # what Raft's synchronous submit would see


async def test_a_slow_first_produce_still_proposes_first() -> None:
    order, proposed = SubmitOrder(), list[str]()
    await asyncio.gather(
        *(_produce(order, n, w, proposed) for n, w in (("a", 0.05), ("b", 0.0), ("c", 0.02)))
    )
    assert proposed == ["a", "b", "c"]


async def test_without_turns_the_slow_one_would_land_last() -> None:
    """The hazard the turns remove (so the test above can fail)."""
    proposed: list[str] = []

    async def unordered(name: str, wait_s: float) -> None:
        await asyncio.sleep(wait_s)
        proposed.append(name)

    await asyncio.gather(unordered("a", 0.05), unordered("b", 0.0))
    assert proposed == ["b", "a"]


async def test_a_produce_that_fails_or_is_cancelled_lets_the_next_go() -> None:
    order, proposed = SubmitOrder(), list[str]()
    results = await asyncio.gather(
        _produce(order, "a", 0.02, proposed, fail=True),
        _produce(order, "b", 0.0, proposed),
        return_exceptions=True,
    )
    assert isinstance(results[0], ValueError) and proposed == ["b"]
    slow = asyncio.ensure_future(_produce(order, "c", 10.0, proposed))
    after = asyncio.ensure_future(_produce(order, "d", 0.0, proposed))
    await asyncio.sleep(0.01)
    slow.cancel()
    await asyncio.wait_for(after, 1.0)
    with pytest.raises(asyncio.CancelledError):
        await slow
    assert proposed == ["b", "d"]
