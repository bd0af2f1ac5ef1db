"""``raftlog bench perf --transactions``: what Kafka's transactions cost a producer, on raftlog and on Apache
Kafka in the same run, through the same client (confluent-kafka, the same settings on both).

Per system and record size, two produce phases, each on a fresh topic of ``--partitions`` partitions
replicated 3 ways, and each topic read back:

- ``plain``: ``--concurrency`` idempotent producers (acks=all, linger 5 ms), each on a thread of its own,
  in rounds. A round is N records (``--transactions N``, 100 by default) spread over the partitions
  (record i of producer j's round to partition (i + j) mod p), and ends when ``flush`` returned with
  every record acknowledged.
- ``txn``: the same producers, each with a ``transactional.id``, each round one transaction:
  ``begin_transaction``, the N records, ``commit_transaction``. What differs from ``plain`` is what a
  transaction adds: AddPartitionsToTxn, EndTxn, a marker in every partition the round wrote, and the
  waits for them. The slowdown is plain records/s over transactional records/s.
- ``plain-rc`` and ``txn-rc``: one consumer at ``isolation.level=read_committed`` assigned every
  partition from offset 0. Its rate counts until it has read every committed record; it then reads
  on until each partition reports its end, and a record beyond the committed ones (of an aborted or
  unfinished transaction) is an error in the report, as is one short of them.

Before a phase's window each producer runs ``init_transactions`` (transactional) and one round, not
counted, so that connections, coordinators and, on the first transactional producer, the internal topic
(raftlog's ``__transactions``, Kafka's ``__transaction_state``) are made outside the measurement; their
records are read back with the others. Every loop is bounded: the rounds by ``--duration``, a commit or
flush by COMMIT_TIMEOUT_S (a retriable commit error is tried again, COMMIT_TRIES in all), a read by
``--consume-seconds``, every thread's join by a deadline. A client error is counted by the call that
raised it and its name (``commit_transaction CONCURRENT_TRANSACTIONS``) and said once in full on stderr.
A producer goes on after an abortable error (its transaction aborted: its records are not expected) and
stops after any other (its round's records are then neither expected nor excluded).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from raftlog_bench.cluster_report import LatencySummary
from raftlog_bench.cpu import CpuMeter
from raftlog_bench.kafka_target import CONSUME_BATCH, TopicAdmin, producer_settings, read_settings
from raftlog_bench.output import say
from raftlog_bench.perf_phases import quiet
from raftlog_bench.perf_report import PLAIN, READ_COMMITTED, TRANSACTIONAL, PhaseResult, Workload
from raftlog_bench.stats import size_label
from raftlog_bench.tally import Tally, phase_result, showing
from raftlog_bench.targets import Layout

T = TypeVar("T")
LINGER_MS = 5  # as perf's batch producer
INIT_TIMEOUT_S = 60.0  # init_transactions: the first one makes the internal topic
COMMIT_TIMEOUT_S = 30.0  # commit_transaction, abort_transaction, flush
COMMIT_TRIES = 3
QUEUE_FULL_WAIT_S = 0.01
CLOSE_TIMEOUT_S = 30.0
# a producer's last round may start just before the window ends: its wait for it, at most
ROUND_TIMEOUT_S = COMMIT_TIMEOUT_S * (COMMIT_TRIES + 1) + 10


class _RoundError(Exception):
    """A round failed: ``step`` is the client call that said so (``flush``, ``commit_transaction``...)."""

    def __init__(self, step: str, error: KafkaError) -> None:
        super().__init__(f"{step}: {error.str()}")
        self.step = step
        self.error = error


@dataclass(slots=True)
class _Counts:
    """A produce phase's count, written by its producers' threads."""

    tally: Tally = field(default_factory=Tally)
    commit_waits: list[float] = field(default_factory=list)
    unknown: int = 0  # records of rounds that ended in an error other than an abort: committed or not
    lock: threading.Lock = field(default_factory=threading.Lock)
    said: set[str] = field(default_factory=set)

    def done(self, records: int, round_s: float, commit_s: float) -> None:
        with self.lock:
            self.tally.records += records
            self.tally.latencies.append(round_s)
            self.commit_waits.append(commit_s)

    def failed(self, system: str, failure: _RoundError, unknown: int) -> None:
        key = f"{failure.step} {failure.error.name()}"
        with self.lock:
            self.tally.errors[key] += 1
            self.unknown += unknown
            first = key not in self.said
            self.said.add(key)
        if first:  # what the client said, once in full: the report keeps the count by name
            error = failure.error
            say(
                f"{system}: {failure} (code {error.code()}, retriable {error.retriable()}, abortable"
                f" {error.txn_requires_abort()}, fatal {error.fatal()})"
            )


class _RoundProducer:
    """One producer of a phase and the rounds it runs on its own thread."""

    def __init__(self, system: str, index: int, layout: Layout, bootstrap_servers: str, txn_id: str | None):
        settings = producer_settings(bootstrap_servers, LINGER_MS)
        if txn_id is not None:
            settings["transactional.id"] = txn_id
        self.system = system
        self.index = index
        self.layout = layout
        self.transactional = txn_id is not None
        self.value = os.urandom(layout.record_bytes)
        self.producer = Producer(settings)
        self._failed: list[KafkaError] = []  # this round's delivery errors (callbacks run on this thread)

    def _delivered(self, error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            self._failed.append(error)

    def _call(self, step: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except KafkaException as exc:
            raise _RoundError(step, exc.args[0]) from None

    def _produce(self, partition: int) -> None:
        give_up = time.perf_counter() + COMMIT_TIMEOUT_S
        while True:
            try:
                self.producer.produce(
                    self.layout.name, self.value, partition=partition, on_delivery=self._delivered
                )
                return
            except BufferError:  # the local queue is full: let deliveries drain it
                if time.perf_counter() > give_up:
                    raise _RoundError("produce", KafkaError(KafkaError._QUEUE_FULL, "queue full")) from None
                self.producer.poll(QUEUE_FULL_WAIT_S)
            except KafkaException as exc:
                raise _RoundError("produce", exc.args[0]) from None

    def _commit(self, counts: _Counts) -> None:
        for attempt in range(COMMIT_TRIES):
            try:
                self.producer.commit_transaction(COMMIT_TIMEOUT_S)
                return
            except KafkaException as exc:
                failure = _RoundError("commit_transaction", exc.args[0])
                if not failure.error.retriable() or attempt + 1 == COMMIT_TRIES:
                    raise failure from None
                counts.failed(self.system, failure, 0)  # tried again: librdkafka's rule for a retriable one

    def round(self, counts: _Counts) -> tuple[float, float]:
        """One round of records, committed or acknowledged: (its seconds, the seconds after its last record
        was handed to the client). Raises ``_RoundError``."""
        self._failed.clear()
        begun = time.perf_counter()
        if self.transactional:
            self._call("begin_transaction", self.producer.begin_transaction)
        partitions = self.layout.partitions
        for i in range(self.layout.batch_records):
            self._produce((i + self.index) % partitions)
        handed = time.perf_counter()
        if self.transactional:
            self._commit(counts)
        else:
            left = self._call("flush", lambda: self.producer.flush(COMMIT_TIMEOUT_S))
            if left:
                raise _RoundError(
                    "flush", KafkaError(KafkaError._TIMED_OUT, f"{left} records unacknowledged")
                )
        if self._failed:  # plain: a record the producer gave up on (in a transaction, the commit raised)
            raise _RoundError("delivery", self._failed[0])
        done = time.perf_counter()
        return done - begun, done - handed

    def _ended(self, failure: _RoundError, counts: _Counts) -> bool:
        """After a failed round: True when the producer can go on (its transaction aborted)."""
        records = self.layout.batch_records
        if not (self.transactional and failure.error.txn_requires_abort() and not failure.error.fatal()):
            counts.failed(self.system, failure, records)
            return False
        counts.failed(self.system, failure, 0)
        try:
            self._call("abort_transaction", lambda: self.producer.abort_transaction(COMMIT_TIMEOUT_S))
        except _RoundError as again:
            counts.failed(self.system, again, records)
            return False
        return True

    def prepare(self, counts: _Counts) -> bool:
        """``init_transactions`` (transactional) and one round; False when the producer cannot go on."""
        try:
            if self.transactional:
                self._call("init_transactions", lambda: self.producer.init_transactions(INIT_TIMEOUT_S))
            round_s, commit_s = self.round(counts)
        except _RoundError as failure:
            return self._ended(failure, counts)
        counts.done(self.layout.batch_records, round_s, commit_s)
        return True

    def run(self, deadline: float, counts: _Counts) -> None:
        """Rounds until ``deadline`` (``time.perf_counter()``) or an error it cannot go on after."""
        while time.perf_counter() < deadline:
            try:
                round_s, commit_s = self.round(counts)
            except _RoundError as failure:
                if not self._ended(failure, counts):
                    return
            else:
                counts.done(self.layout.batch_records, round_s, commit_s)

    def close(self) -> None:
        self.producer.close()


def _in_threads(name: str, calls: Sequence[Callable[[], T]], timeout_s: float) -> list[T | None]:
    """Each call on a daemon thread of its own, all at once; their results, None for one that raised or
    had not returned within ``timeout_s`` (it is left running)."""
    results: list[T | None] = [None] * len(calls)

    def one(index: int) -> None:
        results[index] = calls[index]()

    threads = [
        threading.Thread(target=one, args=(i,), name=f"{name}-{i}", daemon=True) for i in range(len(calls))
    ]
    for thread in threads:
        thread.start()
    give_up = time.monotonic() + timeout_s
    for thread in threads:
        thread.join(max(0.0, give_up - time.monotonic()))
    return results


@dataclass(frozen=True, slots=True)
class _Produced:
    result: PhaseResult
    committed: int  # records acknowledged (plain) or committed, warm-up rounds included
    unknown: int  # records whose round ended in an error that leaves their fate open


async def _produce_phase(
    kind: str, system: str, layout: Layout, workload: Workload, bootstrap_servers: str, pids: dict[str, int]
) -> _Produced:
    """Every producer prepared (not counted), then rounds for ``workload.seconds``: the phase's row."""
    warm, counts = _Counts(), _Counts()
    producers = [
        _RoundProducer(
            system, j, layout, bootstrap_servers, f"{layout.name}-{j}" if kind == TRANSACTIONAL else None
        )
        for j in range(workload.concurrency)
    ]
    try:
        started = time.perf_counter()
        ready = await asyncio.to_thread(
            _in_threads, "bench-prepare", [lambda p=p: p.prepare(warm) for p in producers],
            INIT_TIMEOUT_S + ROUND_TIMEOUT_S,
        )  # fmt: skip
        going = [p for p, ok in zip(producers, ready, strict=True) if ok]
        say(
            f"{system} {kind}: {len(going)} of {len(producers)} producers ready (a round each) in"
            f" {time.perf_counter() - started:.1f} s"
        )
        await quiet(workload)
        meter = CpuMeter(pids)
        start = time.perf_counter()
        deadline = start + workload.seconds
        label = f"{system} {kind} {size_label(layout.record_bytes)} x {layout.batch_records}"
        async with showing(label, workload.seconds, counts.tally):
            rounds = [lambda p=p: p.run(deadline, counts) or True for p in going]
            ran = await asyncio.to_thread(
                _in_threads, "bench-rounds", rounds, workload.seconds + ROUND_TIMEOUT_S
            )
        elapsed = time.perf_counter() - start
        cpu = meter.stop()
        stuck = ran.count(None)
        if stuck:
            counts.tally.errors[f"producers still in a round {ROUND_TIMEOUT_S:g} s after the window"] += stuck
    finally:
        await asyncio.to_thread(_in_threads, "bench-close", [p.close for p in producers], CLOSE_TIMEOUT_S)
    counts.tally.errors.update(warm.tally.errors)
    result = phase_result(
        system, kind, layout, workload.concurrency, counts.tally, 0, elapsed,
        counts.tally.records * layout.record_bytes, cpu,
    )  # fmt: skip
    result = replace(result, commit_latency=LatencySummary.of(counts.commit_waits))
    return _Produced(result, warm.tally.records + counts.tally.records, warm.unknown + counts.unknown)


def read_verdict(read: int, committed: int, unknown: int) -> str | None:
    """What is wrong with a read_committed reader having read ``read`` records of a topic into which
    ``committed`` records were committed and ``unknown`` more were written by rounds that ended without
    an answer (committed or not); None when nothing is."""
    if committed <= read <= committed + unknown:
        return None
    expected = f"{committed}" if unknown == 0 else f"{committed} to {committed + unknown}"
    if read < committed:
        return f"read {read} of {expected} committed: committed records missing"
    return f"read {read} of {expected} committed: more (duplicates, aborted or open transactions)"


async def _read_phase(
    kind: str, system: str, layout: Layout, workload: Workload, bootstrap_servers: str, pids: dict[str, int],
    produced: _Produced,
) -> PhaseResult:  # fmt: skip
    """The topic read from its start at read_committed: the rate until every committed record was read,
    then on to each partition's end to see that nothing else is there."""
    tally = Tally()
    expected = produced.committed
    meter = CpuMeter(pids)
    start = time.perf_counter()
    deadline = start + workload.consume_seconds
    reached: list[float] = []  # when the count reached the records committed
    nbytes = 0

    def read() -> None:
        nonlocal nbytes
        consumer = Consumer({
            **read_settings(bootstrap_servers, workload.fetch_bytes), "group.id": f"bench-{os.getpid()}",
            "isolation.level": "read_committed", "enable.partition.eof": True,
        })  # fmt: skip
        consumer.assign([TopicPartition(layout.name, p, 0) for p in range(layout.partitions)])
        at_end: set[int] = set()
        try:
            while time.perf_counter() < deadline and len(at_end) < layout.partitions:
                for message in consumer.consume(CONSUME_BATCH, 0.2):
                    error = message.error()
                    if error is None:
                        tally.records += 1
                        nbytes += len(message.value() or b"")
                    elif error.code() == KafkaError._PARTITION_EOF:
                        at_end.add(message.partition() or 0)
                    else:
                        tally.errors[f"consume {error.name()}"] += 1
                if not reached and tally.records >= expected:
                    reached.append(time.perf_counter())
        finally:
            consumer.close()

    label = f"{system} {kind}{READ_COMMITTED} {size_label(layout.record_bytes)}"
    async with showing(label, workload.consume_seconds, tally):
        await asyncio.to_thread(read)
    cpu = meter.stop()
    read_all = tally.records
    wrong = read_verdict(read_all, produced.committed, produced.unknown)
    if wrong is not None:
        tally.errors[wrong] += 1
    seconds = (reached[0] if reached else time.perf_counter()) - start
    tally.records = min(read_all, expected)  # the rate is of the committed records
    return phase_result(system, kind + READ_COMMITTED, layout, 1, tally, expected, seconds, nbytes, cpu)


async def drive_transactions(
    admin: TopicAdmin, bootstrap_servers: str, system: str, workload: Workload, pids: dict[str, int],
    prefix: str,
) -> list[PhaseResult]:  # fmt: skip
    """Every transactions phase of ``workload`` against one system: per record size, plain then
    transactional produce, each on a topic of its own (made and removed through ``admin``) read back at
    read_committed."""
    results: list[PhaseResult] = []
    await admin.connect()
    try:
        for record_bytes in workload.record_sizes:
            for kind in (PLAIN, TRANSACTIONAL):
                name = f"{prefix}_{kind}_{record_bytes}"
                layout = Layout(name, workload.partitions, record_bytes, workload.transaction_records)
                await admin.create(layout)
                try:
                    produced = await _produce_phase(kind, system, layout, workload, bootstrap_servers, pids)
                    results.append(produced.result)
                    if workload.consume:
                        await quiet(workload)
                        results.append(
                            await _read_phase(
                                kind, system, layout, workload, bootstrap_servers, pids, produced
                            )
                        )
                finally:
                    await admin.delete()
    finally:
        await admin.close()
    return results
