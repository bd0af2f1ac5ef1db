"""Kafka's transactions on a real 3-node cluster with confluent-kafka (librdkafka 2.16), unchanged: a
transactional producer commits and aborts and read_committed readers see only what committed; offsets sent
to a transaction commit with it; a second producer of the id fences the first; a transaction left open past
its timeout is aborted and its producer fenced; the coordinator's node killed mid-transaction, the
transaction commits on its successor. The raw protocol where clients never go: FindCoordinator,
InitProducerId's refusals, AddPartitionsToTxn's, NOT_COORDINATOR, DescribeTransactions, ListTransactions."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka_fixtures import RawKafka, http_client
from kio.schema.errors import ErrorCode
from waiting import wait_for

from kafka_api import wire
from raftlog_client.client import RaftlogClient
from raftlog_client.errors import ClientError
from raftlog_client.local_cluster import LocalCluster

FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS, END_TXN = 10, 22, 24, 26
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66


@pytest.fixture(scope="module")
def topic(kafka_cluster: LocalCluster) -> str:
    with http_client(kafka_cluster) as client:
        client.create_topic("payments", 3, 3)
    return "payments"


def _producer(cluster: LocalCluster, tid: str, **settings: Any) -> Producer:
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": tid, "linger.ms": 5, **settings}
    )
    producer.init_transactions(60)
    return producer


def _read(cluster: LocalCluster, topic: str, isolation: str, group: str | None = None) -> list[bytes]:
    """Every record a reader at ``isolation`` finds in the topic, from the start to each partition's end
    (read_committed: its last stable offset)."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group or f"reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    partitions = len(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{topic} not read to its end at {isolation}: {at_end}"
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                at_end.add(message.partition())
                continue
            values.append(message.value())
    finally:
        consumer.close()
    return values


def _transaction(cluster: LocalCluster, tid: str) -> dict[str, Any]:
    """The id's transaction, from its coordinator through the HTTP API (``GET /v1/transactions/{id}``)."""

    async def described() -> dict[str, Any]:
        client = RaftlogClient(cluster.servers)
        try:
            return await client.transaction(tid)
        finally:
            await client.close()

    return asyncio.run(described())


def test_committed_records_are_read_committed_and_aborted_ones_never(
    kafka_cluster: LocalCluster, topic: str
) -> None:
    tid = "commits-and-aborts"
    producer = _producer(kafka_cluster, tid)
    for round_, commit in enumerate((True, False, True, False, True)):
        producer.begin_transaction()
        for i in range(30):
            producer.produce(
                topic, value=f"{round_}-{i}-{'keep' if commit else 'drop'}".encode(), partition=i % 3
            )
        if commit:
            producer.commit_transaction(60)
        else:
            producer.flush(60)  # written to the partitions, then aborted
            producer.abort_transaction(60)
    # EndTxn is answered once decided, as Kafka answers: the markers follow
    described = wait_for(
        lambda: (d := _transaction(kafka_cluster, tid))["state"].startswith("Complete") and d,
        f"{tid} complete",
    )
    assert described["state"] == "CompleteCommit" and described["partitions"] == []
    committed = _read(kafka_cluster, topic, "read_committed")
    everything = _read(kafka_cluster, topic, "read_uncommitted")
    assert sorted(committed) == sorted(v for v in everything if v.endswith(b"keep"))
    assert len(committed) == 90 and len(everything) == 150
    for partition in range(3):  # in each partition, the committed records in the order they were sent
        mine = [v for v in committed if int(v.split(b"-")[1]) % 3 == partition]
        assert mine == sorted(mine, key=lambda v: (int(v.split(b"-")[0]), int(v.split(b"-")[1])))
    # the HTTP door reads the same: at read_committed only what committed, at read_uncommitted every
    # producer record, and never a transaction marker as a record (each partition holds 5 of them)
    with http_client(kafka_cluster) as client:
        for isolation, expected in (("read_committed", committed), ("read_uncommitted", everything)):
            read: list[bytes] = []
            for partition in range(3):
                read += _http_values(client, topic, partition, isolation)
            assert sorted(read) == sorted(expected), isolation
        assert sorted(_instance_values(client, topic, len(committed))) == sorted(committed)


def _instance_values(client: Any, topic: str, count: int) -> list[bytes]:
    """What an HTTP consumer instance with isolation.level read_committed reads of the topic: ``count``
    records, and none more within a read after them."""
    v2 = {"Content-Type": "application/vnd.kafka.v2+json"}
    group = f"http-{uuid.uuid4().hex[:8]}"
    config = {
        "name": "i",
        "format": "binary",
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
    }
    client.request("POST", f"/consumers/{group}", json.dumps(config).encode(), v2)
    base = f"/consumers/{group}/instances/i"
    client.request("POST", f"{base}/subscription", json.dumps({"topics": [topic]}).encode(), v2)
    values: list[bytes] = []
    binary = {"Accept": "application/vnd.kafka.binary.v2+json"}
    deadline = time.monotonic() + 60
    while len(values) < count:
        assert time.monotonic() < deadline, f"{len(values)} of {count} read"
        rows = json.loads(client.request("GET", f"{base}/records?timeout=500", headers=binary).body)
        values += [base64.b64decode(row["value"]) for row in rows]
    rows = json.loads(client.request("GET", f"{base}/records?timeout=500", headers=binary).body)
    client.request("DELETE", base, headers=v2)
    return values + [base64.b64decode(row["value"]) for row in rows]


def _http_values(client: Any, topic: str, partition: int, isolation: str) -> list[bytes]:
    """A partition's values from offset 0 to its end through ``GET .../records?isolation=``."""
    values: list[bytes] = []
    offset = 0
    for _ in range(1_000):
        path = f"/topics/{topic}/partitions/{partition}/records?offset={offset}&isolation={isolation}"
        answer = client.request("GET", path, headers={"Accept": "application/vnd.kafka.binary.v2+json"})
        rows = json.loads(answer.body)
        if not rows:
            return values
        values += [base64.b64decode(row["value"]) for row in rows]
        offset = rows[-1]["offset"] + 1
    raise AssertionError(f"{topic}-{partition} not read to its end")


def test_offsets_sent_to_a_transaction_commit_with_it(kafka_cluster: LocalCluster, topic: str) -> None:
    """A consume-transform-produce step: the input's offsets are the group's once the output commits,
    and stay where they were when it aborts."""
    with http_client(kafka_cluster) as client:
        client.create_topic("input", 1, 3)
    feeder = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    for i in range(10):
        feeder.produce("input", value=f"in-{i}".encode(), partition=0)
    feeder.flush(30)
    group = "transformer"
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_cluster.bootstrap_servers,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["input"])
    producer = _producer(kafka_cluster, "transformer-1")
    try:
        inputs: list[Any] = []
        deadline = time.monotonic() + 60
        while len(inputs) < 10:
            assert time.monotonic() < deadline, f"read {len(inputs)} of 10 inputs"
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                inputs.append(message)
        for step, (batch, commit) in enumerate(((inputs[:4], True), (inputs[4:], False))):
            producer.begin_transaction()
            for message in batch:
                producer.produce(topic, value=b"out-" + message.value(), partition=step)
            end = [TopicPartition("input", 0, batch[-1].offset() + 1)]
            producer.send_offsets_to_transaction(end, consumer.consumer_group_metadata(), 60)
            if commit:
                producer.commit_transaction(60)
            else:
                producer.abort_transaction(60)
            committed = consumer.committed([TopicPartition("input", 0)], timeout=30)[0].offset
            assert committed == 4, (step, committed)  # the first step's; the aborted one's never
        # EndTxn answers once PrepareAbort is written; the markers, then CompleteAbort, follow (as on Kafka)
        described = wait_for(
            lambda: (d := _transaction(kafka_cluster, "transformer-1"))["state"] == "CompleteAbort" and d,
            "transformer-1's abort completed",
        )
        assert described["groups"] == []
    finally:
        consumer.close()
    outputs = [v for v in _read(kafka_cluster, topic, "read_committed") if v.startswith(b"out-")]
    assert outputs == [b"out-in-0", b"out-in-1", b"out-in-2", b"out-in-3"]


def test_a_new_producer_of_the_id_fences_the_old_one(kafka_cluster: LocalCluster, topic: str) -> None:
    old = _producer(kafka_cluster, "fenced")
    old.begin_transaction()
    old.produce(topic, value=b"zombie", partition=0)
    old.flush(30)
    epoch = _transaction(kafka_cluster, "fenced")["producer_epoch"]
    new = _producer(kafka_cluster, "fenced")  # aborts the zombie's open transaction, fencing it
    described = _transaction(kafka_cluster, "fenced")
    # one bump aborted the zombie's transaction (its markers fence it in each partition), one is the new
    # producer's
    assert described["producer_epoch"] == epoch + 2 and described["state"] == "Empty"
    with pytest.raises(KafkaException) as refused:
        old.commit_transaction(30)
    assert refused.value.args[0].fatal(), refused.value.args[0]  # fenced for good
    new.begin_transaction()
    new.produce(topic, value=b"successor", partition=0)
    new.commit_transaction(60)
    committed = _read(kafka_cluster, topic, "read_committed")
    assert b"successor" in committed and b"zombie" not in committed


def test_a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced(
    kafka_cluster: LocalCluster, topic: str
) -> None:
    stalled = _producer(kafka_cluster, "stalled", **{"transaction.timeout.ms": 2_000})
    stalled.begin_transaction()
    stalled.produce(topic, value=b"stalled", partition=1)
    stalled.flush(30)
    wait_for(
        lambda: _transaction(kafka_cluster, "stalled")["state"] == "CompleteAbort",
        "the coordinator to abort the transaction past its 2 s timeout",
    )
    with pytest.raises(KafkaException):
        stalled.commit_transaction(30)
    later = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    later.produce(topic, value=b"after-the-abort", partition=1)
    later.flush(30)
    committed = _read(kafka_cluster, topic, "read_committed")
    assert b"after-the-abort" in committed and b"stalled" not in committed  # its LSO moved on


def test_raw_coordinator_requests_and_their_refusals(kafka_cluster: LocalCluster, topic: str) -> None:
    tid = "raw-1"
    servers = kafka_cluster.bootstrap_servers.split(",")
    raw = RawKafka(servers[0])
    try:

        def coordinator_of(name: str) -> str:
            cls = wire.request_class(FIND_COORDINATOR, 3)
            found = raw.call(FIND_COORDINATOR, 3, wire.build(cls, key=name, key_type=1))
            assert found.error_code is ErrorCode.none, found
            return next(s for s in servers if s.endswith(f":{found.port}"))

        coordinator = coordinator_of(tid)
        # an id no producer holds, coordinated by the same node
        unknown = next(n for n in (f"nobody-{i}" for i in range(100)) if coordinator_of(n) == coordinator)
    finally:
        raw.close()
    raw = RawKafka(coordinator)
    others = [RawKafka(s) for s in servers if s != coordinator]
    try:

        def init(timeout_ms: int, name: str = tid, on: RawKafka = raw) -> Any:
            cls = wire.request_class(INIT_PRODUCER_ID, 4)
            body = wire.build(
                cls,
                transactional_id=name,
                transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
                producer_id=-1,
                producer_epoch=-1,
            )
            return on.call(INIT_PRODUCER_ID, 4, body)

        assert init(900_001).error_code is ErrorCode.invalid_transaction_timeout  # past the node's bound
        assert init(1_000, "x" * 513).error_code is ErrorCode.invalid_request
        assert all(init(1_000, on=other).error_code is ErrorCode.not_coordinator for other in others)
        first = init(60_000)
        second = init(60_000)
        assert (second.producer_id, second.producer_epoch) == (first.producer_id, first.producer_epoch + 1)

        def add(epoch: int, *named: tuple[str, list[int]]) -> dict[tuple[str, int], ErrorCode]:
            cls = wire.request_class(ADD_PARTITIONS, 3)
            topics = tuple(
                wire.build(wire.sibling(cls, "AddPartitionsToTxnTopic"), name=n, partitions=tuple(ps))
                for n, ps in named
            )
            body = wire.build(
                cls,
                v3_and_below_transactional_id=tid,
                v3_and_below_producer_id=first.producer_id,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=topics,
            )
            answer = raw.call(ADD_PARTITIONS, 3, body)
            return {
                (t.name, p.partition_index): p.partition_error_code
                for t in answer.results_by_topic_v3_and_below
                for p in t.results_by_partition
            }

        refused = add(second.producer_epoch, (topic, [0, 7]), ("no-such-topic", [0]))
        assert refused == {
            (topic, 0): ErrorCode.operation_not_attempted,
            (topic, 7): ErrorCode.unknown_topic_or_partition,
            ("no-such-topic", 0): ErrorCode.unknown_topic_or_partition,
        }
        assert add(first.producer_epoch, (topic, [0])) == {(topic, 0): ErrorCode.producer_fenced}
        assert add(second.producer_epoch, (topic, [0, 2])) == {
            (topic, 0): ErrorCode.none,
            (topic, 2): ErrorCode.none,
        }

        described = raw.call(
            DESCRIBE_TRANSACTIONS,
            0,
            wire.build(wire.request_class(DESCRIBE_TRANSACTIONS, 0), transactional_ids=(tid, unknown)),
        ).transaction_states
        assert [(d.transactional_id, d.error_code, d.transaction_state) for d in described] == [
            (tid, ErrorCode.none, "Ongoing"),
            (unknown, ErrorCode.transactional_id_not_found, ""),
        ]
        assert [(t.topic, t.partitions) for t in described[0].topics] == [(topic, (0, 2))]
        assert described[0].producer_epoch == second.producer_epoch
        assert wire.millis(described[0].transaction_timeout) == 60_000

        cls = wire.request_class(LIST_TRANSACTIONS, 1)
        listed = raw.call(
            LIST_TRANSACTIONS,
            1,
            wire.build(cls, state_filters=("Ongoing", "Bogus"), producer_id_filters=(), duration_filter=-1),
        )
        assert tid in [t.transactional_id for t in listed.transaction_states]
        assert listed.unknown_state_filters == ("Bogus",)
        elsewhere = [
            t.transactional_id
            for other in others
            for t in other.call(
                LIST_TRANSACTIONS,
                1,
                wire.build(cls, state_filters=(), producer_id_filters=(), duration_filter=-1),
            ).transaction_states
        ]
        assert tid not in elsewhere  # each broker lists what it coordinates

        def matching(pattern: str) -> tuple[ErrorCode, list[str]]:  # ListTransactions v2, KIP-1152
            body = wire.build(
                wire.request_class(LIST_TRANSACTIONS, 2), state_filters=(), producer_id_filters=(),
                duration_filter=-1, transactional_id_pattern=pattern,
            )  # fmt: skip
            answer = raw.call(LIST_TRANSACTIONS, 2, body)
            return answer.error_code, [t.transactional_id for t in answer.transaction_states]

        assert matching("raw-\\d+") == (ErrorCode.none, [tid])
        assert matching("raw") == (ErrorCode.none, [])  # the whole id, as Kafka's RE2/J matches()
        assert matching("raw-(\\d)\\1") == (ErrorCode.invalid_regular_expression, [])  # no backreferences

        body = wire.build(
            wire.request_class(END_TXN, 3),
            transactional_id=tid,
            producer_id=first.producer_id,
            producer_epoch=second.producer_epoch,
            committed=False,
        )
        assert raw.call(END_TXN, 3, body).error_code is ErrorCode.none
        wait_for(lambda: _transaction(kafka_cluster, tid)["state"] == "CompleteAbort", f"{tid} aborted")
    finally:
        raw.close()
        for other in others:
            other.close()


def test_an_end_txn_v5_abort_of_a_transaction_that_added_nothing_bumps_the_epoch(
    kafka_cluster: LocalCluster,
) -> None:
    """As Kafka 4's coordinator at transaction version 2 (a new cluster's level): franz-go aborts with
    EndTxn v5 a transaction none of whose produces succeeded; its commit of nothing is INVALID_TXN_STATE."""
    tid = "raw-empty-abort"
    servers = kafka_cluster.bootstrap_servers.split(",")
    raw = RawKafka(servers[0])
    try:
        cls = wire.request_class(FIND_COORDINATOR, 3)
        found = raw.call(FIND_COORDINATOR, 3, wire.build(cls, key=tid, key_type=1))
        assert found.error_code is ErrorCode.none, found
    finally:
        raw.close()
    raw = RawKafka(next(s for s in servers if s.endswith(f":{found.port}")))
    try:
        init = wire.build(
            wire.request_class(INIT_PRODUCER_ID, 5),
            transactional_id=tid,
            transaction_timeout=datetime.timedelta(milliseconds=60_000),
            producer_id=-1,
            producer_epoch=-1,
        )
        given = raw.call(INIT_PRODUCER_ID, 5, init)
        assert given.error_code is ErrorCode.none, given

        def end(epoch: int, committed: bool) -> Any:
            body = wire.build(
                wire.request_class(END_TXN, 5),
                transactional_id=tid,
                producer_id=given.producer_id,
                producer_epoch=epoch,
                committed=committed,
            )
            return raw.call(END_TXN, 5, body)

        aborted = end(given.producer_epoch, committed=False)
        assert (aborted.error_code, aborted.producer_id, aborted.producer_epoch) == (
            ErrorCode.none, given.producer_id, given.producer_epoch + 1
        )  # fmt: skip
        wait_for(lambda: _transaction(kafka_cluster, tid)["state"] == "CompleteAbort", f"{tid} aborted")
        assert end(aborted.producer_epoch, committed=True).error_code is ErrorCode.invalid_txn_state
        assert end(given.producer_epoch, committed=False).error_code is ErrorCode.none  # a retry
    finally:
        raw.close()


@pytest.fixture
def restarts(kafka_cluster: LocalCluster) -> Iterator[list[str]]:
    """Nodes a test killed, started again after it (the module's cluster goes on whole)."""
    killed: list[str] = []
    yield killed
    for node in killed:
        kafka_cluster.control("start", node)  # answers once the node is ready


def test_a_transaction_commits_after_its_coordinator_s_node_is_killed(
    kafka_cluster: LocalCluster, topic: str, restarts: list[str]
) -> None:
    tid = "survives-failover"
    producer = _producer(kafka_cluster, tid, **{"transaction.timeout.ms": 60_000})
    producer.begin_transaction()
    for i in range(60):
        producer.produce(topic, value=f"failover-{i}".encode(), partition=i % 3)
    producer.flush(60)
    before = _transaction(kafka_cluster, tid)
    assert before["state"] == "Ongoing" and len(before["partitions"]) == 3
    coordinator = before["coordinator"]
    kafka_cluster.control("stop", coordinator, kill=True)  # kill -9, mid-transaction
    restarts.append(coordinator)
    wait_for(
        lambda: _answered_by_other(kafka_cluster, tid, coordinator),
        f"a new coordinator of {tid} after {coordinator}'s kill",
    )
    after = _transaction(kafka_cluster, tid)
    assert (after["state"], after["partitions"], after["started_ms"]) == (
        "Ongoing",
        before["partitions"],
        before["started_ms"],
    )
    producer.commit_transaction(120)
    wait_for(lambda: _transaction(kafka_cluster, tid)["state"] == "CompleteCommit", f"{tid} committed")
    committed = [v for v in _read(kafka_cluster, topic, "read_committed") if v.startswith(b"failover-")]
    assert sorted(committed) == sorted(f"failover-{i}".encode() for i in range(60))


def _answered_by_other(cluster: LocalCluster, tid: str, dead: str) -> bool:
    try:
        return _transaction(cluster, tid)["coordinator"] != dead
    except ClientError:  # no coordinator yet (an election): asked again
        return False


def test_kafka_s_own_java_client_commits_aborts_and_describes(
    kafka_cluster: LocalCluster, java_client: Any
) -> None:
    """Kafka 4.1's producer, read_committed consumer and admin client, speaking transaction version 2:
    what they see is what they would see on Kafka. The zombie (its epoch fenced by the successor's
    InitProducerId) learns it from its next batch: with version 2 the batch adds its partition to the
    transaction, the coordinator answers PRODUCER_FENCED, and the leader tells the producer
    INVALID_PRODUCER_EPOCH, as Kafka's leader (AddPartitionsToTxnManager) maps it."""
    observed = java_client(
        "transactions", {"bootstrap.servers": kafka_cluster.bootstrap_servers}, "java-txn", "java-producer"
    )
    # commitTransaction returns once the coordinator has the decision (PrepareCommit), as Kafka's answers
    # EndTxn before its markers are written: the describe just after may still see it (a quiet run did)
    assert observed.pop("described_state") in ("PrepareCommit", "CompleteCommit")
    assert observed == {
        "described_timeout_ms": 60_000,  # the Java client's transaction.timeout.ms default
        "listed": True,
        "committed_offset": 42,
        "read_committed": 120,
        "aborted_read": False,
        "zombie": "InvalidProducerEpochException",
    }
