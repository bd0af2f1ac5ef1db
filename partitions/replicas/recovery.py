"""Recovery of a replica left behind its log: copying committed batches from peer replicas, off the
Raft driver thread (after Redpanda's ``recovery_stm``).

A follower that installs its leader's snapshot (the leader compacted its journal past what the follower
holds) gets the partition's metadata only; the records live in the peers' segmented logs. The state
machine is then *behind* (``PartitionStateMachine``: ``log.end_offset < high_watermark``) and goes on
applying: above its log's end it writes nothing. Here, one asyncio task per behind replica fetches what
is missing from the peers, in chunks of ``chunk_bytes``, and appends the batches exactly as stored
(offsets, terms and CRCs unchanged) in a thread, never past the high watermark, until the log has reached
it; it then confirms on the driver thread, where no apply interleaves, that nothing is missing, and ends.
A chunk is fsynced once, after its batches: a crash loses at most what is fetched again after it (the
installed snapshot stays the replica's until a snapshot after the recovery, which flushes the log).

- Peers are asked one after another (the caller's order: the leader first); one that fails or has
  nothing new is skipped for the next. A peer whose log starts after ours (retention) restarts our log
  there, as long as that is not past our high watermark (the log never gets ahead of it).
- A round without progress from any peer backs off, ``backoff_min_s`` doubling to ``backoff_max_s``,
  and the task retries while the replica is open; closing the replica or the node cancels it.
- One token bucket per node bounds what all its recoveries copy together (``rate_bytes_per_s``).
- A replica under Kafka's follower replication throttle (its ``throttle()``, read at each chunk from the
  node's metadata: ``partitions.replication_throttles.follower_rate``) also takes from a second bucket
  that all the node's throttled recoveries share, at that rate, asking chunks of at most one second's
  worth; it waits in steps of at most ``THROTTLE_RECHECK_S``, reading the rate again at each, so a change
  applies at once and a removal lifts the wait.

The fetching is injected (:data:`FetchBatches`): nothing here speaks HTTP (``partitions.peers.batches``
does, over the node's session), so this is tested with fakes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import InitVar, dataclass, field
from typing import Protocol

from partitions.errors import PartitionError
from partitions.replicas.defaults import RECOVERY_RATE_BYTES_PER_S_DEFAULT
from raftlog.errors import check, with_fields
from raftlog.storage.batch import BatchFormatError, BatchHeader, verify
from raftlog.storage.batch_reads import split_batches
from raftlog.storage.cleaner import note_rewritten
from raftlog.storage.errors import LogClosed, NotBatchBoundary, StorageUnavailable
from raftlog.storage.log import AppendResult, Log

log = logging.getLogger("raftlog.recovery")

MiB = 1024 * 1024
CHUNK_BYTES = 4 * MiB  # asked of a peer at a time
RATE_BYTES_PER_S_DEFAULT = RECOVERY_RATE_BYTES_PER_S_DEFAULT
BACKOFF_MIN_S = 0.2
BACKOFF_MAX_S = 5.0
THROTTLE_RECHECK_S = 1.0  # the longest a throttled recovery waits before it reads its rate again


@with_fields
class PeerFetchFailed(PartitionError):
    """A peer could not answer a fetch of batches (down, unreachable, timed out, no replica, an error
    status): recovery asks the next peer. Node-to-node only: never an answer to a client."""

    peer: str
    reason: str
    template = "fetching batches from {peer} failed: {reason}"


@dataclass(frozen=True, slots=True)
class PeerBatches:
    """A peer's answer: whole batches as stored from the offset asked (the first may start before it),
    or, when the peer's log starts after that offset, that start and no data."""

    data: bytes = b""
    log_start_offset: int | None = None


# (peer node id, offset, max_bytes) -> the peer's batches; raises PeerFetchFailed
FetchBatches = Callable[[str, int, int], Awaitable[PeerBatches]]
# the follower replication throttle of a recovering replica in bytes/s (None: not throttled), read at each
# chunk
Throttle = Callable[[], int | None]
# runs a function on the Raft driver thread (between two applies) and returns its result
RunOnDriver = Callable[[Callable[[], bool]], Awaitable[bool]]


class RecoveryTarget(Protocol):
    """What recovery needs of a replica's state machine (``PartitionStateMachine``)."""

    log: Log

    @property
    def high_watermark(self) -> int: ...

    @property
    def behind(self) -> bool: ...

    def append_recovered(self, batch: bytes, header: BatchHeader) -> AppendResult | None: ...

    def restart_log_at(self, offset: int) -> bool: ...

    def recovered(self) -> bool: ...


class TokenBucket:
    """A rate limit shared by every recovery of a node (pure: time comes in as ``now_s``). ``take``
    spends tokens, going into debt, and says how long the taker waits before it goes on: debts queue, so
    together the takers copy at most ``rate_per_s`` after a first ``burst``."""

    def __init__(self, rate_per_s: float, burst: float, now_s: float) -> None:
        check(rate_per_s > 0 and burst > 0, f"need a positive rate and burst, got {rate_per_s}, {burst}")
        self.rate_per_s = rate_per_s
        self.burst = burst
        self.tokens = burst
        self._updated_s = now_s

    def take(self, amount: float, now_s: float) -> float:
        """Spend ``amount`` tokens; the seconds to wait until the debt is paid (0 without debt)."""
        elapsed = max(0.0, now_s - self._updated_s)
        self._updated_s = max(self._updated_s, now_s)
        self.tokens = min(self.burst, self.tokens + elapsed * self.rate_per_s) - amount
        return max(0.0, -self.tokens / self.rate_per_s)

    def retune(self, rate_per_s: float, burst: float, now_s: float) -> None:
        """Go on at another rate and burst from ``now_s`` (refilled at the old rate until then): a debt
        stays, paid at the new rate."""
        check(rate_per_s > 0 and burst > 0, f"need a positive rate and burst, got {rate_per_s}, {burst}")
        if (rate_per_s, burst) == (self.rate_per_s, self.burst):
            return
        self.take(0, now_s)
        self.rate_per_s, self.burst = rate_per_s, burst
        self.tokens = min(self.tokens, burst)


def throttle_bucket(rate_per_s: int, now_s: float, bucket: TokenBucket | None = None) -> TokenBucket:
    """The bucket of a replication throttle of ``rate_per_s`` (Kafka's ``*.replication.throttled.rate``;
    0 acts as 1 byte/s, which all but stops the copying, as Kafka's quota of 0 does): a burst of one
    second's worth. ``bucket``: the one in use, retuned to the rate (a change of the config)."""
    rate = max(1, rate_per_s)
    if bucket is None:
        return TokenBucket(rate, rate, now_s)
    bucket.retune(rate, rate, now_s)
    return bucket


def next_backoff_s(current_s: float, maximum_s: float) -> float:
    return min(2 * current_s, maximum_s)


# -- what one peer answer does to the log (in a thread) ------------------------------------------------


@dataclass(frozen=True, slots=True)
class Copied:
    """Batches appended (``batches`` 0: the peer had nothing we may take now)."""

    batches: int = 0
    bytes: int = 0
    offsets: int = 0


@dataclass(frozen=True, slots=True)
class Restarted:
    offset: int


@dataclass(frozen=True, slots=True)
class Unusable:
    """An answer that cannot be used (torn, corrupt, not continuing our log): the next peer is asked."""

    reason: str


Outcome = Copied | Restarted | Unusable


def take_answer(target: RecoveryTarget, offset: int, answer: PeerBatches) -> Outcome:
    """Apply a peer's answer to a fetch at ``offset`` (this log's end when asked) to the log: restart it
    where the peer's log starts, or append the batches that continue it, up to the high watermark. Runs
    in a thread: CRC checks and writes of megabytes do not belong on the event loop."""
    if answer.log_start_offset is not None:
        start = answer.log_start_offset
        if start <= offset:
            return Unusable(f"says its log starts at {start}, not after our end {offset}")
        if not target.restart_log_at(start):
            return Copied()  # past our high watermark: our applies get there first
        return Restarted(start)
    batches = size = offsets = 0
    checked, malformed = _checked(answer.data)
    if not checked and malformed is not None:
        return Unusable(f"malformed answer: {malformed}")
    compacted_end = max((h.end_offset for _, h in checked if h.record_count != h.span), default=None)
    if compacted_end is not None:
        # compacted on the peer: a replay of the Raft entries these batches came from must not compare
        # them with the bytes proposed (raftlog.storage.cleaner)
        note_rewritten(target.log, compacted_end)
    for batch, header in checked:
        end = target.log.end_offset
        if header.end_offset <= end:
            continue  # what we hold (the first batch may start before the offset asked)
        if header.base_offset < end and not batches:
            if _holds_start(target, header):
                target.log.restart_empty_before(header.base_offset)  # copied whole, as the peer has it
                end = header.base_offset
            elif header.record_count != header.span and header.base_offset >= target.log.log_start_offset:
                # compacted on the peer, its batch covers records we hold: ours go for it (the same
                # records kept, fewer; all committed)
                try:
                    target.log.truncate(header.base_offset)
                except NotBatchBoundary as exc:
                    return Unusable(f"compacted batch at {header.base_offset} does not meet our log: {exc}")
                end = header.base_offset
        if header.base_offset != end:
            gap = f"batch at offset {header.base_offset} does not continue our log at {end}"
            if not batches:
                return Unusable(gap)
            log.warning("%s: answer stops continuing the log: %s", target.log.directory, gap)
            break
        if target.append_recovered(batch, header) is None:
            break  # at the high watermark: the rest is apply's, or waits until it is committed here
        batches, size, offsets = batches + 1, size + len(batch), offsets + header.span
    if malformed is not None:
        log.warning(
            "%s: malformed answer after %d good batches: %s", target.log.directory, batches, malformed
        )
    if batches:
        target.log.flush()  # one fsync per chunk, not per batch (append_recovered)
    return Copied(batches, size, offsets)


def _checked(data: bytes) -> tuple[list[tuple[bytes, BatchHeader]], str | None]:
    """The answer's whole, CRC-checked batches, up to the first that is not one (and what was wrong)."""
    checked: list[tuple[bytes, BatchHeader]] = []
    try:
        for batch in split_batches(data):
            checked.append((batch, verify(batch)))
    except BatchFormatError as error:
        return checked, str(error)
    return checked, None


def _holds_start(target: RecoveryTarget, header: BatchHeader) -> bool:
    """The batch holds the start of our log, which is empty there (restarted where the peers' logs start,
    inside a batch: deleted records) and the batch is committed: our log begins with it instead."""
    log = target.log
    return (
        log.size_bytes == 0
        and header.end_offset > log.end_offset
        and header.end_offset <= target.high_watermark
    )


# -- one task per behind replica --------------------------------------------------------------------


@dataclass(slots=True)
class _Recovering:
    key: str
    target: RecoveryTarget
    peers: Callable[[], Sequence[str]]
    fetch: FetchBatches
    throttle: Throttle
    task: asyncio.Task[None] | None = None
    bytes_copied: int = 0
    offsets_copied: int = 0
    stopping: bool = False

    def offsets_missing(self) -> int:
        return max(0, self.target.high_watermark - self.target.log.end_offset)


@dataclass(eq=False)
class Recoveries:
    """A node's recoveries: at most one task per replica, all sharing one rate limit, and those under the
    follower replication throttle another one. Event loop only.

    ``_run_on_driver`` (given first) runs the completion check on the Raft driver thread; ``to_thread``
    runs the appends (``asyncio.to_thread``); ``sleep`` and ``clock`` are injectable for tests."""

    _run_on_driver: RunOnDriver
    rate_bytes_per_s: InitVar[int] = RATE_BYTES_PER_S_DEFAULT
    chunk_bytes: int = CHUNK_BYTES
    backoff_min_s: float = BACKOFF_MIN_S
    backoff_max_s: float = BACKOFF_MAX_S
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    to_thread: Callable[..., Awaitable[Outcome]] = asyncio.to_thread
    bucket: TokenBucket = field(init=False)
    _running: dict[str, _Recovering] = field(default_factory=dict, init=False)
    bytes_copied: int = field(default=0, init=False)  # by every recovery of this node since it started
    # the follower replication throttle: its bucket (made at its first use), what was fetched under it
    # and the seconds waited for it
    throttled_bucket: TokenBucket | None = field(default=None, init=False)
    throttled_bytes: int = field(default=0, init=False)
    throttled_wait_s: float = field(default=0.0, init=False)
    completed: int = field(default=0, init=False)

    def __post_init__(self, rate_bytes_per_s: int) -> None:
        check(
            self.chunk_bytes > 0 and 0 < self.backoff_min_s <= self.backoff_max_s,
            "chunk and backoff must be positive",
        )
        self.bucket = TokenBucket(
            rate_bytes_per_s, max(self.chunk_bytes, rate_bytes_per_s / 10), self.clock()
        )

    def start(
        self,
        key: str,
        target: RecoveryTarget,
        peers: Callable[[], Sequence[str]],
        fetch: FetchBatches,
        throttle: Throttle = lambda: None,
    ) -> bool:
        """Recover ``target`` (the replica ``key``) unless a recovery of it runs; True if one started."""
        if key in self._running:
            return False
        recovering = _Recovering(key, target, peers, fetch, throttle)
        recovering.task = asyncio.get_running_loop().create_task(self._run(recovering), name=f"recover {key}")
        recovering.task.add_done_callback(lambda task: self._ended(recovering, task))
        self._running[key] = recovering
        log.info(
            "%s: recovering offsets %d..%d from peers",
            key, target.log.end_offset, target.high_watermark,
        )  # fmt: skip
        return True

    def running(self, key: str) -> bool:
        return key in self._running

    def stop(self, key: str) -> None:
        """The replica closes: cancel its recovery (an append in flight finishes, or meets a closed log)."""
        recovering = self._running.pop(key, None)
        if recovering is not None and recovering.task is not None:
            recovering.stopping = True
            recovering.task.cancel()

    async def close(self) -> None:
        tasks = [r.task for r in self._running.values() if r.task is not None]
        for key in list(self._running):
            self.stop(key)
        await asyncio.gather(*tasks, return_exceptions=True)

    def metrics(self) -> dict[str, float]:
        running = list(self._running.values())
        missing_bytes = 0.0
        for recovering in running:
            per_offset = (
                recovering.bytes_copied / recovering.offsets_copied if recovering.offsets_copied else 0
            )
            missing_bytes += recovering.offsets_missing() * per_offset
        return {
            "recovery_replicas": len(running),
            "recovery_bytes": self.bytes_copied,
            "recovery_offsets_missing": sum(r.offsets_missing() for r in running),
            # estimated: the offsets missing times the bytes per offset copied so far
            "recovery_bytes_missing": int(missing_bytes),
            "recovery_completed": self.completed,
            "recovery_throttled_bytes": self.throttled_bytes,
            "recovery_throttled_seconds": round(self.throttled_wait_s, 3),
        }

    def _ended(self, recovering: _Recovering, task: asyncio.Task[None]) -> None:
        if self._running.get(recovering.key) is recovering:
            del self._running[recovering.key]
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: recovery failed", recovering.key, exc_info=task.exception())

    async def _run(self, recovering: _Recovering) -> None:
        target, key = recovering.target, recovering.key
        backoff_s = self.backoff_min_s
        while not recovering.stopping:
            if not target.behind:
                if await self._run_on_driver(target.recovered):
                    self.completed += 1
                    log.info(
                        "%s: recovered to offset %d (%d bytes copied)",
                        key, target.log.end_offset, recovering.bytes_copied,
                    )  # fmt: skip
                    return
                continue  # an apply moved the high watermark past the log meanwhile: go on
            try:
                progressed = await self._round(recovering)
            except LogClosed:
                return  # the replica is closing
            except StorageUnavailable as error:
                log.error("%s: recovery cannot write its log (retrying in %.1f s): %s", key, backoff_s, error)
                progressed = False
            if progressed:
                backoff_s = self.backoff_min_s
                continue
            await self.sleep(backoff_s)
            backoff_s = next_backoff_s(backoff_s, self.backoff_max_s)

    def _follower_bucket(self, rate: int) -> TokenBucket:
        self.throttled_bucket = throttle_bucket(rate, self.clock(), self.throttled_bucket)
        return self.throttled_bucket

    async def _throttled_wait(self, recovering: _Recovering) -> None:
        """Wait until the follower throttle's debt is paid, reading the rate again every step: a new rate
        applies at once, a removed throttle (or a replica no longer listed) ends the wait."""
        while not recovering.stopping:
            rate = recovering.throttle()
            if rate is None:
                return
            wait_s = self._follower_bucket(rate).take(0, self.clock())
            if wait_s <= 0:
                return
            step_s = min(wait_s, THROTTLE_RECHECK_S)
            await self.sleep(step_s)
            self.throttled_wait_s += step_s

    async def _round(self, recovering: _Recovering) -> bool:
        """Ask the peers in turn until one lets the log move on; whether one did."""
        target = recovering.target
        for peer in recovering.peers():
            offset = target.log.end_offset
            rate = recovering.throttle()
            try:
                answer = await recovering.fetch(
                    peer, offset, self.chunk_bytes if rate is None else min(self.chunk_bytes, max(1, rate))
                )
            except PeerFetchFailed as error:
                log.warning("%s: %s", recovering.key, error)
                continue
            wait_s = self.bucket.take(len(answer.data), self.clock())
            if wait_s > 0:
                await self.sleep(wait_s)
            if rate is not None and answer.data:
                self.throttled_bytes += len(answer.data)
                self._follower_bucket(rate).take(len(answer.data), self.clock())
                await self._throttled_wait(recovering)
            outcome = await self.to_thread(take_answer, target, offset, answer)
            if isinstance(outcome, Unusable):
                log.warning(
                    "%s: answer of %s at offset %d unusable: %s", recovering.key, peer, offset, outcome.reason
                )
                continue
            if isinstance(outcome, Restarted):
                log.warning(
                    "%s: %s's log starts at %d, after our end %d: restarting the log there",
                    recovering.key, peer, outcome.offset, offset,
                )  # fmt: skip
                return True
            if outcome.batches:
                recovering.bytes_copied += outcome.bytes
                recovering.offsets_copied += outcome.offsets
                self.bytes_copied += outcome.bytes
                return True
        return False
