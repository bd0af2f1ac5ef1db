"""Natural batching of plain produce requests: nothing waits when nothing is in flight; what arrives
during a proposal goes as one batch with consecutive offsets per request; a failure reaches every
request of the batch; cancelled requests are left out; batches stay under the size bound."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from partitions.coalesce import ProduceCoalescer, estimated_bytes
from raftlog.storage import ProducerRecord


class FakeLog:
    """Proposals complete when the test releases them; offsets are dense like the real log's."""

    def __init__(self) -> None:
        self.batches: list[list[bytes]] = []
        self.gates: list[asyncio.Event] = []
        self.end = 0
        self.fail_next: Exception | None = None

    async def propose(self, records: Sequence[ProducerRecord], timeout_ms: int) -> tuple[int, int]:
        gate = asyncio.Event()
        self.gates.append(gate)
        self.batches.append([r.value for r in records])
        await gate.wait()
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        base = self.end
        self.end += len(records)
        return base, self.end


def recs(*values: bytes) -> list[ProducerRecord]:
    return [ProducerRecord(v) for v in values]


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_alone_goes_at_once_and_waiters_go_together_in_order() -> None:
    log = FakeLog()
    coalescer = ProduceCoalescer(log.propose, bytes_max=1 << 20)
    first = asyncio.create_task(coalescer.produce(recs(b"a"), 1000))
    await settle()
    assert log.batches == [[b"a"]], "nothing in flight: proposed at once"
    waiting = [asyncio.create_task(coalescer.produce(recs(b"b%d" % i, b"c%d" % i), 1000)) for i in range(3)]
    await settle()
    assert len(log.batches) == 1, "they wait while the first is in flight"
    log.gates[0].set()
    await settle()
    assert log.batches[1] == [b"b0", b"c0", b"b1", b"c1", b"b2", b"c2"]
    log.gates[1].set()
    assert await first == (0, 1)
    assert [await task for task in waiting] == [(1, 3), (3, 5), (5, 7)]
    assert (coalescer.merged_proposals, coalescer.merged_requests) == (1, 3)


async def test_a_failed_batch_fails_every_request_in_it() -> None:
    log = FakeLog()
    coalescer = ProduceCoalescer(log.propose, bytes_max=1 << 20)
    first = asyncio.create_task(coalescer.produce(recs(b"a"), 1000))
    await settle()
    waiting = [asyncio.create_task(coalescer.produce(recs(b"x"), 1000)) for _ in range(2)]
    await settle()
    log.gates[0].set()
    await settle()
    log.fail_next = RuntimeError("not leader any more")
    log.gates[1].set()
    await first
    for task in waiting:
        with pytest.raises(RuntimeError, match="not leader"):
            await task
    third = asyncio.create_task(coalescer.produce(recs(b"z"), 1000))
    await settle()
    log.gates[2].set()
    assert await third == (1, 2), "the coalescer goes on after a failure"


async def test_cancelled_waiters_are_left_out_and_batches_stay_under_the_bound() -> None:
    log = FakeLog()
    one = estimated_bytes(recs(b"v" * 100))
    coalescer = ProduceCoalescer(log.propose, bytes_max=2 * one)
    first = asyncio.create_task(coalescer.produce(recs(b"first"), 1000))
    await settle()
    tasks = [asyncio.create_task(coalescer.produce(recs(b"%d" % i + b"v" * 99), 1000)) for i in range(5)]
    await settle()
    tasks[1].cancel()
    log.gates[0].set()
    await settle()
    assert [len(batch) for batch in log.batches[1:]] == [2], "two per batch under the bound"
    assert log.batches[1][0].startswith(b"0") and log.batches[1][1].startswith(b"2"), "1 was cancelled"
    log.gates[1].set()
    await settle()
    log.gates[2].set()
    await first
    results = [await tasks[i] for i in (0, 2, 3, 4)]
    assert results == [(1, 2), (2, 3), (3, 4), (4, 5)]
