"""A consumer instance's read, done by the node the member called, straight from each partition's leader.

The group's coordinator grants the read (``GroupService.begin_read``: the member's partitions, positions,
``fetch.min.bytes`` and how long it may wait) and takes the new positions back (``end_read``); the records
themselves travel once, from each partition's leader (this node's own replica when it leads) to this
node, never through the coordinator. A group's members, each behind a node of its own, read in parallel
on every node instead of all through one.

Every assigned partition is read at once, first without waiting (every partition's answer is kept);
while less than ``fetch.min.bytes`` came, a long poll on all of them that the first partition with
records ends (the others are cancelled: reads, nothing to undo), until the read's time is up. Each round
gives every partition an equal share of what is left of ``max_bytes``. Records travel as the stored
batches; a position moves to the end of the last batch returned. A partition without a position starts
at the group's committed offset, else at ``auto.offset.reset``; one whose position fell out of its log
(retention) is reset by ``auto.offset.reset``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from partitions.consumers.protocol import FetchedPart, ReadPlan
from partitions.data.service import DataService, Served
from partitions.groups.assignors import TopicPartition
from raftlog.errors import RaftlogError
from raftlog.storage.batch import decode_header
from raftlog.storage.batch_reads import split_batches
from raftlog.storage.errors import OffsetOutOfRange

P = ParamSpec("P")
T = TypeVar("T")


class PartitionData(Protocol):
    """The data partitions as the groups code reaches them, wherever their leaders are
    (``cluster.Routed[DataService]``): ``run(DataService.method, *arguments)``."""

    async def run(
        self,
        method: Callable[Concatenate[DataService, P], Awaitable[T]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> Served[T]: ...


@dataclass
class ReadResult:
    """What a read got: batches per partition (in partition order), the positions to report (every
    partition that got one, read or not), the high watermarks seen, and the partitions that failed."""

    parts: list[FetchedPart] = field(default_factory=list)
    positions: dict[TopicPartition, int] = field(default_factory=dict)
    end_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    failures: list[RaftlogError] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Fetched:
    part: FetchedPart | None  # None: nothing came
    next_offset: int | None = None  # the position after the part's last batch
    reset_to: int | None = None  # the position fell out of the log: start again here
    high_watermark: int | None = None


async def read_assigned(data: PartitionData, group: str, plan: ReadPlan, max_bytes: int) -> ReadResult:
    """Read the plan's partitions (see the module's docstring); a partition that fails (no leader right
    now) is left out and its error kept, the others are read."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + plan.wait_ms / 1000
    min_bytes = max_bytes if plan.fetch_min_bytes < 0 else min(plan.fetch_min_bytes, max_bytes)
    result = ReadResult(positions=dict(plan.positions))
    for tp in plan.assigned:
        if tp in result.positions:
            continue
        try:
            result.positions[tp] = await _starting_offset(data, group, plan.offset_reset, tp)
        except RaftlogError as exc:  # that partition has no leader right now: read the others
            result.failures.append(exc)
    size = 0
    wait = False
    while True:
        readable = [tp for tp in plan.assigned if tp in result.positions]
        wait_ms = max(0, int((deadline - loop.time()) * 1000)) if wait else 0
        if not readable or (wait and wait_ms == 0):
            break
        budget = max(1, (max_bytes - size) // len(readable))
        reset = plan.offset_reset
        tasks = {
            tp: asyncio.create_task(
                _fetch(data, reset, tp, result.positions[tp], wait_ms, budget, plan.read_committed)
            )
            for tp in readable
        }
        fetched_now, failures = await _first_records(tasks, first=wait)
        result.failures += failures
        for tp, fetched in sorted(fetched_now.items()):
            if fetched.high_watermark is not None:
                result.end_offsets[tp] = fetched.high_watermark
            moved_to = fetched.reset_to if fetched.reset_to is not None else fetched.next_offset
            if moved_to is None:
                continue
            result.positions[tp] = moved_to
            if fetched.reset_to is None and fetched.part is not None:
                result.parts.append(fetched.part)
                size += len(fetched.part.data)
        if min_bytes == 0 or (result.parts and size >= min_bytes):
            break
        wait = True
    result.parts.sort(key=lambda part: part.tp)
    return result


async def _starting_offset(data: PartitionData, group: str, offset_reset: str, tp: TopicPartition) -> int:
    committed = (await data.run(DataService.committed_offset, group, tp.topic, tp.partition)).value
    if committed is not None:
        return committed
    bounds = (await data.run(DataService.offsets, tp.topic, tp.partition)).value
    return bounds.log_start_offset if offset_reset == "earliest" else bounds.high_watermark


async def _fetch(
    data: PartitionData,
    offset_reset: str,
    tp: TopicPartition,
    offset: int,
    timeout_ms: int,
    max_bytes: int,
    read_committed: bool,
) -> _Fetched:
    reads = DataService.fetch_stable if read_committed else DataService.fetch_batches
    try:
        served = await data.run(reads, tp.topic, tp.partition, offset, max_bytes, timeout_ms)
    except OffsetOutOfRange as exc:
        earliest = offset_reset == "earliest"
        return _Fetched(None, reset_to=exc.log_start_offset if earliest else exc.end_offset)
    fetched = served.value
    if not fetched.data:
        return _Fetched(None, high_watermark=fetched.high_watermark)
    last = None
    for batch in split_batches(fetched.data):
        last = batch
    assert last is not None  # data is not empty: split_batches yields at least one batch
    next_offset = decode_header(last).end_offset
    part = FetchedPart(tp, offset, fetched.data, fetched.aborted)
    return _Fetched(part, next_offset, high_watermark=fetched.high_watermark)


async def _first_records(
    tasks: dict[TopicPartition, asyncio.Task[_Fetched]], *, first: bool
) -> tuple[dict[TopicPartition, _Fetched], list[RaftlogError]]:
    """Wait until every partition answered or, with ``first``, one answered with records; cancel the
    rest."""
    results: dict[TopicPartition, _Fetched] = {}
    failures: list[RaftlogError] = []
    by_task = {task: tp for tp, task in tasks.items()}
    pending: set[asyncio.Task[_Fetched]] = set(tasks.values())
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                error = task.exception()
                if isinstance(error, RaftlogError):
                    failures.append(error)
                elif error is not None:
                    raise error
                else:
                    results[by_task[task]] = task.result()
            if first and any(f.part for f in results.values()):
                break
    finally:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    return results, failures
