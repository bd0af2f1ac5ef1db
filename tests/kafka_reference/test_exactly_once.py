"""Exactly-once applications, unchanged, against raftlog and against Apache Kafka with the same assertions
(Kafka's transactions: KIP-98, and KIP-447's fencing by consumer-group metadata):

- Kafka's own Java client (kafka-clients): a transactional consume-transform-produce loop with
  ``sendOffsetsToTransaction``, aborts, a fenced producer, an open transaction holding the last stable
  offset, and a transaction the coordinator aborts at its timeout (``java/Scenarios.java``);
- a Kafka Streams application with ``processing.guarantee=exactly_once_v2`` (``exactly_once_apps.py``);
- quixstreams with ``processing_guarantee="exactly-once"`` (``examples/quixstreams_totals.py``);
- confluent-kafka's transactional producer in a consume-transform-produce loop with
  ``send_offsets_to_transaction`` (``examples/transactional_loop.py``).

What each proves is read back with ``isolation.level=read_committed``: every input's output once, none
from an aborted transaction, after a kill -9 of the application (and of a node) in the middle of its
transactions.
"""

from __future__ import annotations

import json
import pathlib
import random
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from conftest import Systems
from java_client import JavaClient
from kafka_fixtures import RawKafka
from kio.schema.errors import ErrorCode
from quixstreams_processes import Processor, Readings
from streams_app import StreamsInstance, compile_word_count

from kafka_api import wire
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

SYSTEMS = ("raftlog", "kafka")
# how a late EndTxn of a transaction the coordinator aborted at its timeout is refused: both finalize
# transaction version 2 (KIP-890: an epoch bump at every end) and answer the producer INVALID_TXN_STATE
LATE_COMMIT = "InvalidTxnStateException"
FIND_COORDINATOR, TRANSACTION_KEY = 10, 1
LOOP = pathlib.Path(__file__).resolve().parents[2] / "examples" / "transactional_loop.py"
CATCH_UP_TIMEOUT_S = 120.0


def _topic(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def _create(bootstrap: str, names: list[str], partitions: int, config: dict[str, str] | None = None) -> None:
    """Topics of replication factor 3, each partition led before it is used."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until its futures end
    wanted = [NewTopic(n, partitions, 3, config=config or {}) for n in names]
    for future in admin.create_topics(wanted, operation_timeout=30).values():
        future.result(60)

    def led() -> bool:
        topics = admin.list_topics(timeout=10).topics
        return all(
            n in topics
            and topics[n].error is None
            and all(p.leader >= 0 for p in topics[n].partitions.values())
            for n in names
        )

    wait_for(led, f"leaders for {names}")


def coordinator_of(bootstrap: str, key: str, key_type: int) -> int:
    """The broker id that coordinates ``key`` (FindCoordinator v4: key type 0 a group, 1 a transactional
    id), asked of the first broker that answers it."""
    cls = wire.request_class(FIND_COORDINATOR, 4)
    body = wire.build(cls, key_type=key_type, coordinator_keys=(key,))

    def ask() -> int | None:
        for address in bootstrap.split(","):
            try:
                raw = RawKafka(address)
            except OSError:
                continue
            try:
                found = raw.call(FIND_COORDINATOR, 4, body).coordinators[0]
            finally:
                raw.close()
            if found.error_code == ErrorCode.none:
                return int(found.node_id)
        return None

    coordinator: int = wait_for(ask, f"the coordinator of {key}")
    return coordinator


def _committed(bootstrap: str, group: str, topic: str, partitions: int, stable: bool = False) -> list[int]:
    """The group's committed offsets of the topic's partitions (-1001 where none); with ``stable``, once
    no transaction's offsets for them are pending (OffsetFetch's require_stable)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    found = admin.list_consumer_group_offsets([request], require_stable=stable)[group].result(30)
    return [tp.offset for tp in sorted(found.topic_partitions, key=lambda tp: tp.partition)]


class Lines:
    """Lines of ``WORDS_PER_LINE`` words from a vocabulary of ``VOCABULARY``, produced idempotently to the
    partitions of a topic in turn; how many times each word was written."""

    VOCABULARY = 20
    WORDS_PER_LINE = 4

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.topic, self.partitions = topic, partitions
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
        )
        self.random = random.Random(40)
        self.written: dict[str, int] = {}
        self.lines = 0

    def produce(self, count: int) -> None:
        for _ in range(count):
            words = [f"w{self.random.randrange(self.VOCABULARY)}" for _ in range(self.WORDS_PER_LINE)]
            for word in words:
                self.written[word] = self.written.get(word, 0) + 1
            self.producer.produce(
                self.topic, " ".join(words).encode(), partition=self.lines % self.partitions
            )
            self.lines += 1
            self.producer.poll(0)
        assert self.producer.flush(60) == 0, "every line acknowledged"


class Counts:
    """The application's output as a read_committed reader sees it: each word's counts in the order
    written (a word's counts are in one partition)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": f"checker-{uuid.uuid4().hex[:8]}",
             "enable.auto.commit": False, "isolation.level": "read_committed"}
        )  # fmt: skip
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.counts: dict[str, list[int]] = {}
        self.read = 0

    def poll(self, alive: Callable[[], None]) -> None:
        alive()
        for message in self.consumer.consume(1000, 0.2):
            if message.error():
                raise KafkaException(message.error())
            self.counts.setdefault(message.key().decode(), []).append(int(message.value()))
            self.read += 1

    def reach(self, count: int, alive: Callable[[], None]) -> None:
        deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
        while self.read < count:
            assert time.monotonic() < deadline, (
                f"not {count} counts read in {CATCH_UP_TIMEOUT_S} s: {self.read}"
            )
            self.poll(alive)

    def caught_up(self, lines: Lines, alive: Callable[[], None]) -> None:
        """Each word's last count is the times it was written; then every count, exactly: 1, 2, ... once
        each (a count written twice, or one missing, is a record processed twice or lost)."""
        deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
        while any(self.counts.get(w, [0])[-1] < n for w, n in lines.written.items()):
            assert time.monotonic() < deadline, f"the counts did not catch up in {CATCH_UP_TIMEOUT_S} s"
            self.poll(alive)
        for word, times in sorted(lines.written.items()):
            counts = self.counts[word]
            assert counts == list(range(1, times + 1)), (
                f"{word} written {times} times; counts read: {len(counts)}, repeated "
                f"{sorted({c for c in counts if counts.count(c) > 1})[:10]}, last {counts[-5:]}"
            )


def _epoch_bumps(systems: Systems) -> float:
    """Transactions raftlog's coordinators ended with an epoch bump (transaction version 2), over /metrics."""
    total = 0.0
    for url in systems.raftlog.servers:
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
            found = re.search(r"^raftlog_transaction_epoch_bumps_total (\S+)$", answer.read().decode(), re.M)
        total += float(found.group(1)) if found else 0.0
    return total


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_java_transactional_producer_commits_aborts_and_is_fenced_and_read_committed_sees_commits_only(
    systems: Systems, java_client: JavaClient, system: str
) -> None:
    """Kafka's Java client 4.x speaks transaction version 2 to both (EndTxn v5 bumps the epoch at every
    end, Produce v12 and TxnOffsetCommit v5 add partitions and groups themselves)."""
    bumps_before = _epoch_bumps(systems)
    observed = java_client(
        "consume-transform-produce", {"bootstrap.servers": systems.servers()[system]}, _topic("java-txn")
    )
    assert observed == {
        # an aborted transaction's offsets are not the group's; a committed one's are
        "group_offset_after_abort": 10,
        "group_offset_at_end": 30,
        # KIP-447: offsets sent with a generation the group is not at are refused
        "offsets_of_another_generation": "CommitFailedException",
        # an open transaction holds the last stable offset below the end, and readers at it
        "stable_below_end_while_open": True,
        "read_committed_while_open": {"commit-1": 10, "commit-3": 10},
        # the second producer of the transactional id aborted the open transaction and fenced the first
        "fenced_commit": "ProducerFencedException",
        "stable_at_end": True,
        # a read_committed reader: each committed record once, in order, nothing aborted or left open
        "read_committed": {"commit-1": 10, "commit-3": 10, "commit-5": 10},
        "read_committed_each_once_in_order": True,
        # the aborted records are in the log all the same: read_uncommitted reads them
        "read_uncommitted": {"abort-2": 10, "commit-1": 10, "commit-3": 10, "commit-5": 10, "open-4": 10},
    }
    if system == "raftlog":  # commit-1, abort-2, commit-3, the refused offsets' abort, commit-5
        assert _epoch_bumps(systems) - bumps_before >= 4


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_a_transaction_open_past_its_timeout_is_aborted_by_the_coordinator(
    systems: Systems, java_client: JavaClient, system: str
) -> None:
    settings = {"bootstrap.servers": systems.servers()[system]}
    observed = java_client("transaction-timeout", settings, _topic("java-txn-timeout"))
    assert observed == {
        "stable_below_end_while_open": True,
        "aborted_by_the_coordinator": True,
        "late_commit": LATE_COMMIT,
        "read_committed": {},
        "read_uncommitted": {"expired": 10},
    }


@pytest.fixture(scope="module")
def word_count() -> str:
    """The class path of ``examples/kafka_streams/WordCount.java``, compiled (``java_build``)."""
    return compile_word_count()


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_kafka_streams_exactly_once_v2_counts_every_word_once_across_kill_9_of_an_instance_and_a_node(
    systems: Systems, word_count: str, system: str, tmp_path: pathlib.Path
) -> None:
    """Two instances of the word count; kill -9 of one while lines stream in, restarted; then kill -9 of the
    node coordinating its transactions, restarted. Read with read_committed, each word's counts are 1, 2,
    ..., n once each, n the times it was written: nothing processed twice, nothing lost, nothing read from
    a transaction that was aborted (by the restarted instance fencing its killed self, or by a timeout)."""
    bootstrap = systems.servers()[system]
    run = uuid.uuid4().hex[:8]
    source, sink = f"wc-lines-{run}", f"wc-counts-{run}"
    _create(bootstrap, [source, sink], partitions=2)
    lines, counts = Lines(bootstrap, source, 2), Counts(bootstrap, sink, 2)
    instances = [
        StreamsInstance(word_count, tmp_path / name, bootstrap, f"wc-{run}", (source, sink), 6000)
        for name in ("a", "b")
    ]
    first = instances[0]

    def alive() -> None:
        for instance in instances:
            instance.check_alive()

    killed: int | None = None
    started = time.monotonic()
    took: dict[str, float] = {}
    try:
        for instance in instances:
            instance.start()
        transactional_ids = [instance.running() for instance in instances]
        lines.produce(300)
        counts.caught_up(lines, alive)
        took["start"] = time.monotonic() - started

        # kill -9 of an instance while lines stream in: its open transaction is aborted when it comes back
        # (same transactional id) or at its timeout, and its tasks' work since their last commit is redone
        lines.produce(1500)
        counts.reach(counts.read + 1000, alive)
        first.kill()
        lines.produce(300)
        first.start()
        transactional_ids[0] = first.running()
        counts.caught_up(lines, alive)
        took["instance killed"] = time.monotonic() - started

        # kill -9 of the node coordinating the first instance's transactions, mid-stream
        lines.produce(1500)
        counts.reach(counts.read + 1000, alive)
        killed = coordinator_of(bootstrap, transactional_ids[0][0], TRANSACTION_KEY)
        systems.kill(system, killed)
        lines.produce(300)
        systems.restart(system, killed)
        killed = None
        counts.caught_up(lines, alive)
        took["node killed"] = time.monotonic() - started
        uncaught = [line for instance in instances for line in instance.uncaught()]
        print(f"{system}: {lines.lines} lines, {counts.read} counts; seconds {took}; uncaught {uncaught}")
    finally:
        for instance in instances:
            instance.kill()
        counts.consumer.close()
        if killed is not None:
            systems.restart(system, killed)


class ExactTotals:
    """quixstreams' outputs as a read_committed reader sees them, by key."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": f"checker-{uuid.uuid4().hex[:8]}",
             "enable.auto.commit": False, "isolation.level": "read_committed"}
        )  # fmt: skip
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.outputs: dict[int, list[dict[str, Any]]] = {}
        self.read = 0

    def poll(self, processor: Processor) -> None:
        processor.check_alive()
        for message in self.consumer.consume(500, 0.2):
            if message.error():
                raise KafkaException(message.error())
            key = int(message.key().decode().removeprefix("k"))
            self.outputs.setdefault(key, []).append(json.loads(message.value()))
            self.read += 1

    def reach(self, count: int, processor: Processor) -> None:
        deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
        while self.read < count:
            assert time.monotonic() < deadline, f"not {count} outputs in {CATCH_UP_TIMEOUT_S} s: {self.read}"
            self.poll(processor)

    def caught_up(self, readings: Readings, processor: Processor) -> None:
        """Each key's last output is its last reading's; then every output, exactly: one per reading, in
        order, each reading handed over once (``processed`` is ``seq``) and its sum the running sum."""
        deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
        written = [key for key, seq in readings.seq.items() if seq]
        while any(self.outputs.get(key, [{"seq": 0}])[-1]["seq"] < readings.seq[key] for key in written):
            assert time.monotonic() < deadline, f"the outputs did not catch up in {CATCH_UP_TIMEOUT_S} s"
            self.poll(processor)
        for key in written:
            expected = [
                {"seq": seq, "sum": total, "processed": seq, "gap": False}
                for seq, total in enumerate(readings.sums[key], start=1)
            ]
            found = self.outputs[key]
            differing = [(f, e) for f, e in zip(found, expected, strict=False) if f != e]
            assert found == expected, (
                f"k{key}: {len(found)} outputs for {len(expected)} readings; the first that differs "
                f"(found, expected): {differing[:1] or found[len(expected) :][:1]}"
            )


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_quixstreams_exactly_once_totals_are_exact_across_kill_9_of_the_processor(
    systems: Systems, system: str, tmp_path: pathlib.Path
) -> None:
    """``examples/quixstreams_totals.py`` with ``--processing-guarantee exactly-once``: killed with -9 in
    the middle of a stream of readings and started again, its outputs read with read_committed are one per
    reading, each reading handed over once: what it did after its last checkpoint (outputs, changelog,
    offsets: one transaction) is aborted by the coordinator at the transaction's timeout and done again."""
    bootstrap = systems.servers()[system]
    run = uuid.uuid4().hex[:8]
    source, sink, group = f"readings-{run}", f"totals-{run}", f"totals-{run}"
    _create(bootstrap, [source, sink], partitions=1)
    # quixstreams reads its store's changelog topic back the moment it has created it, and stops if the
    # broker asked does not know it yet (TopicNotFoundError, seen against Kafka, whose brokers learn of a
    # new topic from their controller a moment later): the changelog is made here, as quixstreams makes it
    changelog = f"changelog__{group}--{source}--default"
    _create(bootstrap, [changelog], partitions=1, config={"cleanup.policy": "compact"})
    processor = Processor(
        bootstrap, (source, sink), group, tmp_path / "state", tmp_path / "processor.log",
        "--processing-guarantee", "exactly-once", "--transaction-timeout-ms", "10000",
        "--commit-every", "300",  # a checkpoint (one transaction) every 300 readings or every second
    )  # fmt: skip
    readings, totals = Readings(bootstrap, source), ExactTotals(bootstrap, sink)
    started = time.monotonic()
    took: dict[str, float] = {}
    try:
        processor.start()
        readings.produce(600)
        totals.caught_up(readings, processor)
        took["start"] = time.monotonic() - started

        readings.produce(4000)
        totals.reach(totals.read + 300, processor)
        processor.kill()
        behind = _committed(bootstrap, group, source, 1)[0]
        assert behind < sum(readings.seq.values()), "killed with readings still to process"
        readings.produce(600)
        processor.start()
        totals.caught_up(readings, processor)
        took["processor killed"] = time.monotonic() - started
        print(f"{system}: {totals.read} outputs; seconds {took}")
    finally:
        processor.kill()
        totals.consumer.close()


class Loop:
    """``examples/transactional_loop.py`` as a process of its own, its output in ``log``."""

    def __init__(self, bootstrap: str, topics: tuple[str, str], group: str, log: pathlib.Path) -> None:
        self.argv = [
            sys.executable, str(LOOP), "--broker", bootstrap, "--source", topics[0], "--sink", topics[1],
            "--group", group, "--transactional-id", f"{group}-1", "--batch", "50",
            "--session-timeout-ms", "6000",
        ]  # fmt: skip
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)
        self.process = None

    def check_alive(self) -> None:
        if self.process is None or self.process.poll() is not None:
            raise AssertionError(
                f"the loop exited; its log ends:\n{self.log.read_text(errors='replace')[-3000:]}"
            )


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_confluent_kafka_transactional_loop_writes_each_record_once_across_kill_9(
    systems: Systems, system: str, tmp_path: pathlib.Path
) -> None:
    """A consume-transform-produce loop on confluent-kafka (``send_offsets_to_transaction``), killed with -9
    while records stream through it and started again with the same transactional id (fencing its killed
    self, whose open transaction is aborted): read with read_committed, its sink holds each source record's
    output once, in the source's order, and its group's offsets are the source's ends."""
    bootstrap = systems.servers()[system]
    run = uuid.uuid4().hex[:8]
    source, sink, group = f"loop-in-{run}", f"loop-out-{run}", f"loop-{run}"
    partitions = 2
    _create(bootstrap, [source, sink], partitions=partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    written = [0] * partitions

    def produce(count: int) -> None:
        for i in range(count):
            partition = i % partitions
            producer.produce(source, f"r-{partition}-{written[partition]}".encode(), partition=partition)
            written[partition] += 1
            producer.poll(0)
        assert producer.flush(60) == 0, "every record acknowledged"

    reader = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"checker-{run}", "enable.auto.commit": False,
         "isolation.level": "read_committed"}
    )  # fmt: skip
    reader.assign([TopicPartition(sink, p, 0) for p in range(partitions)])
    outputs: list[list[dict[str, Any]]] = [[] for _ in range(partitions)]
    loop = Loop(bootstrap, (source, sink), group, tmp_path / "loop.log")

    def read_until(count: int) -> None:
        deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
        while sum(map(len, outputs)) < count:
            assert time.monotonic() < deadline, f"not {count} outputs in {CATCH_UP_TIMEOUT_S} s"
            loop.check_alive()
            for message in reader.consume(1000, 0.2):
                if message.error():
                    raise KafkaException(message.error())
                outputs[message.partition()].append(json.loads(message.value()))

    started = time.monotonic()
    try:
        loop.start()
        produce(4000)
        read_until(1000)
        loop.kill()  # mid-stream: a transaction open, most likely, and more read than committed
        assert sum(_committed(bootstrap, group, source, partitions)) < sum(written), "killed mid-stream"
        produce(1000)
        loop.start()
        read_until(sum(written))
        took = time.monotonic() - started
        for partition in range(partitions):
            expected = [
                {"partition": partition, "offset": offset, "value": f"r-{partition}-{offset}"}
                for offset in range(written[partition])
            ]
            assert outputs[partition] == expected, (
                f"partition {partition}: {len(outputs[partition])} outputs for {written[partition]} records"
            )
        ends = f"the group's offsets at the source's ends, {written}"
        wait_for(lambda: _committed(bootstrap, group, source, partitions, stable=True) == written, ends)
        print(f"{system}: {sum(written)} records through the loop in {took:.1f} s")
    finally:
        loop.kill()
        reader.close()
