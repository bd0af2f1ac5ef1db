"""Natural batching of concurrent produce requests to one partition (event loop only).

While a partition has a proposal of this coalescer in flight, plain produce requests (no producer id:
nothing to deduplicate) to it wait; when the proposal completes, everything that waited goes as ONE batch,
one Raft entry, and each request gets its own consecutive offsets. There is no timer: a request that
finds nothing in flight is proposed at once, so light load sees no added latency, and heavy load makes
fewer, larger entries (fewer journal records, Raft messages, applies and fsync rounds).

A merged proposal succeeds or fails as a whole: every request in it gets the same error, which is what
each of them would have got alone (not leader, outcome unknown, timeout). A request cancelled while it
waits is left out; one cancelled after its batch was proposed is written anyway, as a cancelled solo
proposal would be.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from raftlog.errors import check
from raftlog.storage import ProducerRecord

Propose = Callable[[Sequence[ProducerRecord], int], Awaitable[tuple[int, int]]]
"""(records, timeout_ms) -> (base_offset, end_offset) of one batch."""

RECORD_OVERHEAD_BYTES = 32  # a generous bound on a record's framing in a batch


def estimated_bytes(records: Sequence[ProducerRecord]) -> int:
    total = 0
    for record in records:
        total += RECORD_OVERHEAD_BYTES + len(record.value) + len(record.key or b"")
        total += sum(len(name) + len(value) + 8 for name, value in record.headers)
    return total


@dataclass(slots=True)
class _Waiting:
    records: Sequence[ProducerRecord]
    size: int
    timeout_ms: int
    future: asyncio.Future[tuple[int, int]]


class ProduceCoalescer:
    """One per partition leader replica. ``bytes_max``: merged batches stay under this estimate (half
    the partition's ``max.message.bytes``, so that the exact encoded size never trips the limit for
    requests that fit alone)."""

    def __init__(self, propose: Propose, bytes_max: int, records_max: int = 10_000) -> None:
        check(bytes_max > 0 and records_max > 0, f"coalescer limits {bytes_max} bytes, {records_max} records")
        self._propose = propose
        self._bytes_max = bytes_max
        self._records_max = records_max
        self._in_flight = False
        self._queue: deque[_Waiting] = deque()
        self._tasks: set[asyncio.Task[None]] = set()
        self.merged_proposals = 0  # counters for tests and metrics
        self.merged_requests = 0

    async def produce(self, records: Sequence[ProducerRecord], timeout_ms: int) -> tuple[int, int]:
        if not self._in_flight and not self._queue:
            self._in_flight = True
            try:
                return await self._propose(records, timeout_ms)
            finally:
                self._in_flight = False
                self._start_next()
        future: asyncio.Future[tuple[int, int]] = asyncio.get_running_loop().create_future()
        self._queue.append(_Waiting(records, estimated_bytes(records), timeout_ms, future))
        return await future

    def _start_next(self) -> None:
        if self._in_flight:
            return
        group: list[_Waiting] = []
        size = count = 0
        while self._queue:
            waiting = self._queue[0]
            if waiting.future.cancelled():
                self._queue.popleft()
                continue
            over = size + waiting.size > self._bytes_max or count + len(waiting.records) > self._records_max
            if group and over:
                break
            self._queue.popleft()
            group.append(waiting)
            size += waiting.size
            count += len(waiting.records)
        if not group:
            return
        self._in_flight = True
        task = asyncio.get_running_loop().create_task(self._run(group))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, group: list[_Waiting]) -> None:
        records = [record for waiting in group for record in waiting.records]
        try:
            base_offset, end_offset = await self._propose(records, min(w.timeout_ms for w in group))
        except Exception as error:  # handed to every request of the batch, each re-raises it
            for waiting in group:
                if not waiting.future.done():
                    waiting.future.set_exception(error)
        else:
            check(
                end_offset - base_offset == len(records),
                f"merged batch of {len(records)} records got offsets [{base_offset}, {end_offset})",
            )
            self.merged_proposals += 1
            self.merged_requests += len(group)
            offset = base_offset
            for waiting in group:
                end = offset + len(waiting.records)
                if not waiting.future.done():
                    waiting.future.set_result((offset, end))
                offset = end
        finally:
            self._in_flight = False
            self._start_next()
