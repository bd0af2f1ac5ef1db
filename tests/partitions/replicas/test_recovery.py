"""Recovery of a replica behind its log (``partitions.replicas.recovery``), with fake peers, a fake clock
and a fake driver over real logs: batches are copied unchanged, a failing peer is skipped for the next, the
log restarts where the peers' logs start, no progress backs off (bounded), the node's rate limit is counted
in tokens, closing stops it, and completion is confirmed on the driver."""

from __future__ import annotations

import asyncio
import os
import pathlib
import time
from collections.abc import Callable

import pytest

from partitions import commands
from partitions.replicas.recovery import (
    Copied,
    PeerBatches,
    PeerFetchFailed,
    Recoveries,
    Restarted,
    TokenBucket,
    Unusable,
    take_answer,
    throttle_bucket,
)
from partitions.replicas.state_machine import PartitionStateMachine, Produced
from raftlog.storage import Log, LogConfig, ProducerRecord
from raftlog.storage.batch import Compression, TimestampType, encode_batch, with_log_append_time
from raftlog.storage.batch_reads import decode_batch

CONFIG = LogConfig(segment_bytes=16 * 1024, index_interval_bytes=512)
KiB = 1024


def produce(index: int, size: int = 200) -> bytes:
    batch = encode_batch(0, [ProducerRecord(b"%d-" % index + b"v" * size)], 0, 1_000)
    return commands.encode(commands.Produce(batch))


PRODUCER_ID = 4242


def produce_record_model(index: int, size: int = 200) -> bytes:
    """Entry ``index`` as Kafka's record model has it, cycling through every codec: tombstones, null keys,
    null header values; every third batch stamped LogAppendTime as a leader does, every other one a
    producer's (id, epoch and a growing sequence)."""
    records = [
        ProducerRecord(
            None if (index + j) % 4 == 0 else b"%d-%d-" % (index, j) + b"v" * (size // 3),
            key=None if (index + j) % 3 == 0 else b"k%d" % j,
            headers=(("trace", None), ("j", b"%d" % j)) if j != 1 else (),
            timestamp_ms=1_000 + index,
        )
        for j in range(1 + index % 3)
    ]
    codec = list(Compression)[index % len(Compression)]
    producer = (PRODUCER_ID, index) if index % 2 else (None, None)
    batch = encode_batch(0, records, 0, 1_000, *producer, producer_epoch=2 if index % 2 else None,
                         compression=codec)  # fmt: skip
    if index % 3 == 0:
        batch = with_log_append_time(batch, 50_000 + index)
    return commands.encode(commands.Produce(batch))


class Pair:
    """A leader machine holding ``count`` entries and a follower restored from its snapshot (behind)."""

    def __init__(
        self,
        root: pathlib.Path,
        name: str = "p",
        count: int = 60,
        size: int = 200,
        command: Callable[[int, int], bytes] = produce,
    ) -> None:
        self.leader = PartitionStateMachine(Log.open(str(root / f"{name}-leader"), CONFIG))
        self.next_index = 1
        self.size = size
        self.command = command
        self.apply(count, follower=False)
        self.follower = PartitionStateMachine(Log.open(str(root / f"{name}-follower"), CONFIG))
        self.follower.restore(self.leader.snapshot() or b"")
        assert self.follower.behind

    def apply(self, count: int, follower: bool = True) -> None:
        """Commit ``count`` more entries: the leader applies them, and the follower too if asked."""
        for _ in range(count):
            command = self.command(self.next_index, self.size)
            self.leader.apply(self.next_index, 1, command)
            if follower:
                self.follower.apply(self.next_index, 1, command)
            self.next_index += 1

    def serve(self, offset: int, max_bytes: int) -> PeerBatches:
        """What the leader's ``GET .../batches`` answers."""
        log = self.leader.log
        if offset < log.log_start_offset:
            return PeerBatches(log_start_offset=log.log_start_offset)
        return PeerBatches(b"".join(b.data for b in log.read_batches(offset, max_bytes, log.end_offset)))

    def logs_equal(self) -> bool:
        def batches(log: Log) -> list[bytes]:
            return [b.data for b in log.read_batches(log.log_start_offset, 1 << 30)]

        leader, follower = self.leader.log, self.follower.log
        return (follower.log_start_offset, follower.end_offset) == (
            leader.log_start_offset,
            leader.end_offset,
        ) and batches(follower) == batches(leader)


class Harness:
    """Recoveries on a fake clock (sleep advances it), appending inline, with a fake driver."""

    def __init__(self, rate_bytes_per_s: int = 1 << 40, chunk_bytes: int = 4 * KiB) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.on_driver: list[Callable[[], bool]] = []
        self.before_confirm: Callable[[], None] | None = None
        self.recoveries = Recoveries(
            self.run_on_driver,
            rate_bytes_per_s=rate_bytes_per_s,
            chunk_bytes=chunk_bytes,
            clock=lambda: self.now,
            sleep=self.sleep,
            to_thread=self.inline,
        )

    async def run_on_driver(self, function: Callable[[], bool]) -> bool:
        self.on_driver.append(function)
        if self.before_confirm is not None:  # an apply that lands before the driver runs the check
            self.before_confirm()
            self.before_confirm = None
        return function()

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)

    @staticmethod
    async def inline(function: Callable[..., object], *args: object) -> object:
        await asyncio.sleep(0)
        return function(*args)

    async def finish(self, key: str, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.recoveries.running(key):
            if time.monotonic() > deadline:
                raise AssertionError(f"recovery of {key} still running after {timeout_s:g} s")
            await asyncio.sleep(0.001)


async def test_batches_are_copied_unchanged_and_completion_is_confirmed_on_the_driver(
    tmp_path: pathlib.Path,
) -> None:
    pair = Pair(tmp_path)
    harness = Harness()
    asked: list[tuple[str, int, int]] = []

    async def fetch(peer: str, offset: int, max_bytes: int) -> PeerBatches:
        asked.append((peer, offset, max_bytes))
        return pair.serve(offset, max_bytes)

    assert harness.recoveries.start("p", pair.follower, lambda: ["n2"], fetch)
    assert not harness.recoveries.start("p", pair.follower, lambda: ["n2"], fetch), "one per replica"
    await harness.finish("p")
    assert pair.logs_equal() and not pair.follower.behind
    assert len(asked) >= 3 and all(m == 4 * KiB for _, _, m in asked), "in chunks of chunk_bytes"
    assert harness.on_driver == [pair.follower.recovered]
    metrics = harness.recoveries.metrics()
    assert metrics["recovery_bytes"] == pair.leader.log.size_bytes
    assert metrics["recovery_replicas"] == metrics["recovery_offsets_missing"] == 0
    assert metrics["recovery_completed"] == 1
    pair.apply(3)  # later entries are the follower's apply's again
    assert pair.logs_equal()


async def test_a_confirmation_that_finds_the_log_short_again_goes_on_recovering(
    tmp_path: pathlib.Path,
) -> None:
    pair = Pair(tmp_path)
    harness = Harness()

    def install_a_newer_snapshot() -> None:  # lands on the driver before the check runs
        pair.apply(4, follower=False)
        pair.follower.restore(pair.leader.snapshot() or b"")

    harness.before_confirm = install_a_newer_snapshot

    async def fetch(peer: str, offset: int, max_bytes: int) -> PeerBatches:
        return pair.serve(offset, max_bytes)

    harness.recoveries.start("p", pair.follower, lambda: ["n2"], fetch)
    await harness.finish("p")
    assert harness.on_driver == [pair.follower.recovered] * 2, "short once, then confirmed"
    assert pair.logs_equal() and not pair.follower.behind


async def test_a_gap_of_kafka_record_model_batches_is_copied_byte_for_byte(tmp_path: pathlib.Path) -> None:
    """What a follower recovers is the leader's stored batches, unchanged: compressed with every codec,
    LogAppendTime, producer fields, tombstones, null keys and null header values all come through."""
    pair = Pair(tmp_path, count=60, command=produce_record_model)
    harness = Harness()

    async def fetch(peer: str, offset: int, max_bytes: int) -> PeerBatches:
        return pair.serve(offset, max_bytes)

    harness.recoveries.start("p", pair.follower, lambda: ["n2"], fetch)
    await harness.finish("p")
    assert pair.logs_equal() and not pair.follower.behind
    copied = [decode_batch(b.data) for b in pair.follower.log.read_batches(0, 1 << 30)]
    assert len(copied) == 60
    headers = [b.header for b in copied]
    records = [r for b in copied for r in b.records]
    # the gap held every kind of batch and record the test means to copy
    assert {h.compression for h in headers} == set(Compression)
    assert {h.timestamp_type for h in headers} == set(TimestampType)
    assert {(h.producer_id, h.producer_epoch) for h in headers} == {(None, None), (PRODUCER_ID, 2)}
    assert any(r.value is None for r in records) and any(r.key is None for r in records)
    assert any(value is None for r in records for _, value in r.headers)
    stamped = [b for b in copied if b.header.timestamp_type is TimestampType.LOG_APPEND_TIME]
    assert all(r.timestamp_ms == b.header.max_timestamp_ms >= 50_000 for b in stamped for r in b.records)
    # later entries are applied on both, and a retried producer batch is a duplicate on both
    pair.apply(4)
    ends = (pair.leader.log.end_offset, pair.follower.log.end_offset)
    retried = produce_record_model(max(i for i in range(pair.next_index) if i % 2))
    for machine in (pair.leader, pair.follower):
        result = machine.apply(pair.next_index, 1, retried)
        assert isinstance(result, Produced) and result.duplicate
    assert (pair.leader.log.end_offset, pair.follower.log.end_offset) == ends
    assert pair.logs_equal()


async def test_a_failing_or_garbled_peer_is_skipped_for_the_next(tmp_path: pathlib.Path) -> None:
    pair = Pair(tmp_path)
    harness = Harness()
    asked: list[str] = []

    async def fetch(peer: str, offset: int, max_bytes: int) -> PeerBatches:
        asked.append(peer)
        if peer == "down":
            raise PeerFetchFailed(peer, "connection refused")
        if peer == "garbled":
            return PeerBatches(b"\x00" * 100)
        return pair.serve(offset, max_bytes)

    harness.recoveries.start("p", pair.follower, lambda: ["down", "garbled", "up"], fetch)
    await harness.finish("p")
    assert pair.logs_equal()
    assert asked[:3] == ["down", "garbled", "up"] and set(asked) == {"down", "garbled", "up"}
    assert harness.sleeps == [], "a peer answering is progress: no backoff"


async def test_the_log_restarts_where_the_peers_logs_start(tmp_path: pathlib.Path) -> None:
    pair = Pair(tmp_path, count=300)
    log = pair.leader.log
    assert log.segment_count > 2
    log.advance_start(log._segments[2].base_offset)  # two segments gone on the peer (deleted records)
    start = log.log_start_offset
    assert start > 0
    harness = Harness()

    async def fetch(peer: str, offset: int, max_bytes: int) -> PeerBatches:
        return pair.serve(offset, max_bytes)

    harness.recoveries.start("p", pair.follower, lambda: ["n2"], fetch)
    await harness.finish("p")
    assert pair.follower.log.log_start_offset == start and pair.logs_equal()


async def test_no_progress_backs_off_doubling_to_a_bound_and_retries_until_a_peer_answers(
    tmp_path: pathlib.Path,
) -> None:
    pair = Pair(tmp_path)
    harness = Harness()
    healthy = asyncio.Event()

    async def fetch(peer: str, offset: int, max_bytes: int) -> PeerBatches:
        if len(harness.sleeps) >= 8:
            healthy.set()
        if not healthy.is_set():
            return PeerBatches(b"")  # a peer that has nothing yet (e.g. behind itself)
        return pair.serve(offset, max_bytes)

    harness.recoveries.start("p", pair.follower, lambda: ["n2", "n3"], fetch)
    await harness.finish("p")
    assert harness.sleeps == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]
    assert pair.logs_equal()


async def test_recoveries_share_the_nodes_rate_limit_counted_in_tokens(tmp_path: pathlib.Path) -> None:
    rate, chunk = 16 * KiB, 4 * KiB
    pairs = [Pair(tmp_path, name, count=80) for name in ("a", "b")]
    harness = Harness(rate_bytes_per_s=rate, chunk_bytes=chunk)
    burst = harness.recoveries.bucket.burst
    assert burst == max(chunk, rate / 10)

    def fetcher(pair: Pair) -> Callable[[str, int, int], object]:
        async def fetch(peer: str, offset: int, max_bytes: int) -> PeerBatches:
            await asyncio.sleep(0)  # the two recoveries interleave
            return pair.serve(offset, max_bytes)

        return fetch

    for name, pair in zip(("a", "b"), pairs, strict=True):
        harness.recoveries.start(name, pair.follower, lambda: ["n2"], fetcher(pair))  # type: ignore[arg-type]
    await harness.finish("a")
    await harness.finish("b")
    assert all(p.logs_equal() for p in pairs)
    copied = harness.recoveries.bytes_copied
    assert copied == sum(p.leader.log.size_bytes for p in pairs) > 10 * burst
    # every byte copied was paid for: past the burst, at the rate (one bucket for both: each alone
    # would have had its own burst, and they would have waited 2 * burst / rate less)
    assert sum(harness.sleeps) == pytest.approx((copied - burst) / rate)
    assert harness.now == pytest.approx((copied - burst) / rate)


def test_token_bucket_counts_debts_and_refills_up_to_its_burst() -> None:
    bucket = TokenBucket(rate_per_s=100, burst=50, now_s=0.0)
    assert bucket.take(30, 0.0) == 0 and bucket.tokens == 20
    assert bucket.take(40, 0.0) == pytest.approx(0.2)  # 20 in debt: 0.2 s at 100/s
    assert bucket.take(10, 0.0) == pytest.approx(0.3)  # debts queue
    assert bucket.take(0, 10.0) == 0 and bucket.tokens == 50, "refilled, but never beyond the burst"
    assert bucket.take(0, 5.0) == 0 and bucket.tokens == 50, "a clock going back refills nothing"


async def test_closing_the_replica_or_the_node_stops_its_recovery(tmp_path: pathlib.Path) -> None:
    pairs = [Pair(tmp_path, name) for name in ("a", "b")]
    harness = Harness()
    fetching = asyncio.Event()
    calls: list[str] = []

    async def never(peer: str, offset: int, max_bytes: int) -> PeerBatches:
        calls.append(peer)
        fetching.set()
        await asyncio.Event().wait()  # a peer that never answers
        raise AssertionError("unreachable")

    harness.recoveries.start("a", pairs[0].follower, lambda: ["n2"], never)
    harness.recoveries.start("b", pairs[1].follower, lambda: ["n2"], never)
    await asyncio.wait_for(fetching.wait(), 5)
    harness.recoveries.stop("a")
    assert not harness.recoveries.running("a") and harness.recoveries.running("b")
    await harness.recoveries.close()
    assert not harness.recoveries.running("b")
    count = len(calls)
    await asyncio.sleep(0.01)  # a negative window: no fetch after the stop
    assert len(calls) == count and pairs[0].follower.behind, "nothing more after the stop"


async def test_appends_run_in_a_thread_with_real_to_thread(tmp_path: pathlib.Path) -> None:
    pair = Pair(tmp_path)

    async def on_driver(function: Callable[[], bool]) -> bool:
        return function()

    recoveries = Recoveries(on_driver, chunk_bytes=4 * KiB)

    async def fetch(peer: str, offset: int, max_bytes: int) -> PeerBatches:
        return pair.serve(offset, max_bytes)

    recoveries.start("p", pair.follower, lambda: ["n2"], fetch)
    for _ in range(5000):
        if not recoveries.running("p"):
            break
        await asyncio.sleep(0.001)
    assert pair.logs_equal()


def test_answers_that_cannot_continue_the_log_are_unusable(tmp_path: pathlib.Path) -> None:
    pair = Pair(tmp_path, count=20)
    follower = pair.follower
    batches = pair.leader.log.read_batches(0, 1 << 20)
    assert isinstance(take_answer(follower, 0, PeerBatches(log_start_offset=0)), Unusable)
    assert isinstance(take_answer(follower, 0, PeerBatches(batches[1].data)), Unusable)  # a gap
    assert isinstance(take_answer(follower, 0, PeerBatches(batches[0].data[:-1])), Unusable)  # torn
    corrupt = bytearray(batches[0].data)
    corrupt[-1] ^= 1
    assert isinstance(take_answer(follower, 0, PeerBatches(bytes(corrupt))), Unusable)  # CRC
    assert follower.log.end_offset == 0, "nothing written"
    good = take_answer(follower, 0, PeerBatches(batches[0].data + batches[1].data[:10]))
    assert good == Copied(1, len(batches[0].data), batches[0].header.record_count), "the good part"
    again = take_answer(follower, 0, PeerBatches(batches[0].data + batches[1].data))
    assert again == Copied(1, len(batches[1].data), 1), "what the log holds is skipped"
    hw = follower.high_watermark
    assert take_answer(follower, 2, PeerBatches(log_start_offset=hw + 1)) == Copied(), "past the hw: wait"
    assert take_answer(follower, 2, PeerBatches(log_start_offset=hw)) == Restarted(hw)
    assert (follower.log.log_start_offset, follower.log.end_offset) == (hw, hw)


def test_a_chunk_is_fsynced_once_not_per_batch(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair = Pair(tmp_path, count=20)
    data = b"".join(b.data for b in pair.leader.log.read_batches(0, 1 << 20))
    syncs: list[int] = []
    fdatasync = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (syncs.append(fd), fdatasync(fd))[1])
    outcome = take_answer(pair.follower, 0, PeerBatches(data))
    assert isinstance(outcome, Copied) and outcome.batches == 20
    assert len(syncs) == 1, f"{len(syncs)} fsyncs for one chunk"
    assert pair.follower.log.durable_end_offset == pair.follower.log.end_offset


def test_an_answer_that_stops_continuing_the_log_keeps_what_did(tmp_path: pathlib.Path) -> None:
    pair = Pair(tmp_path, count=20)
    batches = pair.leader.log.read_batches(0, 1 << 20)
    outcome = take_answer(pair.follower, 0, PeerBatches(batches[0].data + batches[2].data))
    assert outcome == Copied(1, len(batches[0].data), batches[0].header.record_count)
    assert pair.follower.log.end_offset == batches[0].header.end_offset


# -- Kafka's follower replication throttle -----------------------------------------------------------


def serving(pair: Pair, asked: list[int] | None = None) -> Callable[[str, int, int], object]:
    async def fetch(peer: str, offset: int, max_bytes: int) -> PeerBatches:
        if asked is not None:
            asked.append(max_bytes)
        await asyncio.sleep(0)  # recoveries interleave
        return pair.serve(offset, max_bytes)

    return fetch


async def test_throttled_recoveries_share_the_follower_throttle_and_the_others_do_not_wait(
    tmp_path: pathlib.Path,
) -> None:
    """Two replicas listed in their topics' follower.replication.throttled.replicas share one bucket at
    the rate (Kafka's follower quota is the broker's), asking at most a second's worth at a time; a third,
    not listed, copies under the node's bucket only."""
    rate = 2 * KiB
    pairs = {name: Pair(tmp_path, name, count=60) for name in ("a", "b", "free")}
    harness = Harness(chunk_bytes=64 * KiB)  # the node's own bucket: unlimited here
    asked: list[int] = []
    for name in ("a", "b"):
        harness.recoveries.start(
            name,
            pairs[name].follower,
            lambda: ["n2"],
            serving(pairs[name], asked),
            lambda: rate,  # type: ignore[arg-type]
        )
    await harness.finish("a")
    await harness.finish("b")
    throttled = sum(pairs[name].leader.log.size_bytes for name in ("a", "b"))
    assert harness.recoveries.throttled_bytes == throttled > 10 * rate
    assert asked and max(asked) == rate, "a chunk of one second's worth, not the node's 64 KiB"
    # every byte past the first second's paid for at the rate, by both together
    assert sum(harness.sleeps) == pytest.approx((throttled - rate) / rate)
    assert harness.recoveries.throttled_wait_s == pytest.approx(sum(harness.sleeps))
    assert max(harness.sleeps) <= 1.0, "waits in steps, reading the rate again at each"
    metrics = harness.recoveries.metrics()
    assert metrics["recovery_throttled_bytes"] == throttled
    assert metrics["recovery_throttled_seconds"] == pytest.approx(sum(harness.sleeps), abs=0.001)

    waited = len(harness.sleeps)
    harness.recoveries.start("free", pairs["free"].follower, lambda: ["n2"], serving(pairs["free"]))
    await harness.finish("free")
    assert all(p.logs_equal() for p in pairs.values())
    assert len(harness.sleeps) == waited, "a replica not listed is not throttled"
    assert harness.recoveries.throttled_bytes == throttled


async def test_a_change_of_the_rate_applies_at_once_and_a_removal_lifts_the_throttle(
    tmp_path: pathlib.Path,
) -> None:
    pair = Pair(tmp_path, count=80)
    harness = Harness(chunk_bytes=64 * KiB)
    rates: list[int | None] = [1 * KiB]
    asked: list[int] = []

    async def sleep(seconds: float) -> None:
        harness.sleeps.append(seconds)
        harness.now += seconds
        if len(harness.sleeps) == 2:
            rates.append(4 * KiB)  # kafka-configs raises the rate
        if len(harness.sleeps) == 4:
            rates.append(None)  # --verify removes the throttle
        await asyncio.sleep(0)

    harness.recoveries.sleep = sleep
    harness.recoveries.start("p", pair.follower, lambda: ["n2"], serving(pair, asked), lambda: rates[-1])  # type: ignore[arg-type]
    await harness.finish("p")
    assert pair.logs_equal()
    assert len(harness.sleeps) == 4, "no wait once the throttle is removed, not even the debt left"
    assert harness.recoveries.throttled_bucket is not None
    assert harness.recoveries.throttled_bucket.rate_per_s == 4 * KiB
    assert 1 * KiB in asked and 4 * KiB in asked and asked[-1] == 64 * KiB
    assert harness.recoveries.throttled_bytes < pair.leader.log.size_bytes


def test_a_throttle_bucket_holds_a_seconds_worth_and_is_retuned_keeping_its_debt() -> None:
    bucket = throttle_bucket(100, 0.0)
    assert (bucket.rate_per_s, bucket.burst, bucket.tokens) == (100, 100, 100)
    assert bucket.take(300, 0.0) == pytest.approx(2.0)
    assert throttle_bucket(200, 1.0, bucket) is bucket
    assert bucket.take(0, 1.0) == pytest.approx(0.5), "100 of debt left after a second, paid at 200/s"
    assert throttle_bucket(0, 0.0).rate_per_s == 1, "a rate of 0 all but stops the copying"
