"""One Kafka request naming tens of thousands of partitions or topics does not hold a node's event loop:
while it is served, another client's ApiVersions is answered throughout, never waiting as long as
``HELD_SHARE`` of the big request's own time (a node that did the work at once would make it wait nearly all
of it; on a loaded machine a probe waits for the CPU too: half was exceeded, 1.54 s of 2.96 s, with four
CPU-bound processes beside the suite) nor, when
that is short, longer than ``LIVE_WITHIN_S`` (a liveness bound, not a speed claim; relative to the big
request's time so that it holds on a loaded machine), and the big request itself gets a whole answer,
as Kafka gives it.
Also: a classic group's members bound holds against joins sent at once from many connections, and a
long poll woken by a produce reads its partitions once woken, not once more in its wait."""

from __future__ import annotations

import datetime
import struct
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka_fixtures import RawKafka, http_client
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from loop_held import never_held
from prometheus_client.parser import text_string_to_metric_families

from kafka_api import wire
from partitions.groups.classic.coordinator import MEMBERS_MAX
from raftlog.storage.batch import ProducerRecord, encode_batch
from raftlog_client.local_cluster import LocalCluster
from raftlog_contract import METRICS_PATH

LIVE_WITHIN_S = 1.0  # another client's ApiVersions may always wait this long while the big request is served
HELD_SHARE = 0.75  # ... or this share of the big request's time: a loop held by it makes it wait nearly all
TOPIC = "wide"
PARTITIONS = 4
# Entries of one request. What the node's Kafka server does with any request, decoding it and encoding its
# answer, takes a few microseconds an entry on the event loop (kafka_api/server.py): the sizes keep that
# part well under the bound, and each request's own work well over it on a node that does it at once.
PRODUCE_ENTRIES = 60_000  # appends in one Produce
LIST_OFFSETS_ENTRIES = 50_000  # partitions named in one ListOffsets
FETCH_ENTRIES = 30_000  # partitions named in one Fetch
METADATA_ENTRIES = 100_000  # topic names in one Metadata
# Entries past what the node could decode and encode on its loop within the bound (~10 MiB): the server
# decodes such a frame and encodes its answer on a worker thread
HUGE_LIST_OFFSETS_ENTRIES = 600_000
FETCH_MAX_BYTES = 1024 * 1024
ANSWER_TIMEOUT_S = 180.0  # how long the test waits for the big answer on a busy machine


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One node (the big requests' partitions all led there), with a topic of ``PARTITIONS`` partitions."""
    with LocalCluster(str(tmp_path_factory.mktemp("work")), nodes=1) as cluster:
        with http_client(cluster) as client:
            client.create_topic(TOPIC, PARTITIONS, 1)
        raw = RawKafka(cluster.kafka["n1"])
        try:
            cls = wire.request_class(3, 8)
            topic = wire.build(wire.sibling(cls, "MetadataRequestTopic"), name=TOPIC)
            request = wire.build(cls, topics=(topic,), allow_auto_topic_creation=False,
                                 include_cluster_authorized_operations=False,
                                 include_topic_authorized_operations=False)  # fmt: skip
            deadline = time.monotonic() + 60
            while not _led(raw.call(3, 8, request)):
                assert time.monotonic() < deadline, f"{TOPIC}'s partitions have no leader"
                time.sleep(0.1)
        finally:
            raw.close()
        yield cluster


def _led(metadata: Any) -> bool:
    partitions = metadata.topics[0].partitions
    return len(partitions) == PARTITIONS and all(p.leader_id >= 0 for p in partitions)


def _versions(raw: RawKafka) -> Any:
    cls = wire.request_class(18, 3)
    return raw.call(18, 3, wire.build(cls, client_software_name="probe", client_software_version="1"))


def served_live(address: str, big: Callable[[RawKafka], Any]) -> Any:
    """The answer of ``big`` (called on a connection of its own), once it is checked that another
    connection's ApiVersions answers (probed again as soon as each came) were never held by it: the
    longest wait below ``HELD_SHARE`` of ``big``'s own time, or below ``LIVE_WITHIN_S``."""
    probe = RawKafka(address)
    _versions(probe)  # connected and served before the big request starts
    longest = 0.0
    done = threading.Event()

    def probing() -> None:
        nonlocal longest
        while not done.is_set():
            started = time.monotonic()
            _versions(probe)
            longest = max(longest, time.monotonic() - started)

    prober = threading.Thread(target=probing, daemon=True)
    prober.start()
    raw = RawKafka(address)
    raw.sock.settimeout(ANSWER_TIMEOUT_S)
    began = time.monotonic()
    try:
        answer = big(raw)
    finally:
        took = time.monotonic() - began
        done.set()
        prober.join(timeout=ANSWER_TIMEOUT_S)
        raw.close()
        probe.close()
    bound = max(LIVE_WITHIN_S, took * HELD_SHARE)
    assert longest < bound, f"another client waited {longest:.2f} s of the {took:.2f} s it took to serve"
    return answer


def _batch() -> bytes:
    return encode_batch(0, [ProducerRecord(b"k", b"v", ())], 0, int(time.time() * 1000))


def test_a_produce_of_many_partitions_leaves_other_clients_served(node: LocalCluster) -> None:
    cls = wire.request_class(0, 9)
    batch = _batch()
    part_cls = wire.sibling(cls, "PartitionProduceData")
    parts = tuple(wire.build(part_cls, index=i % PARTITIONS, records=batch) for i in range(PRODUCE_ENTRIES))
    data = wire.build(wire.sibling(cls, "TopicProduceData"), name=TOPIC, partition_data=parts)
    request = wire.build(cls, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=60),
                         topic_data=(data,))  # fmt: skip
    answer = served_live(node.kafka["n1"], lambda raw: raw.call(0, 9, request))
    answered = answer.responses[0].partition_responses
    assert len(answered) == PRODUCE_ENTRIES
    assert {p.error_code for p in answered} == {ErrorCode.none}
    for partition in range(PARTITIONS):  # each append got its own offset, in the request's order
        offsets = [p.base_offset for p in answered if p.index == partition]
        assert offsets == sorted(set(offsets))


def _list_offsets(entries: int) -> Any:
    """A ListOffsets v6 naming the topic's partitions in turn, ``entries`` of them (each again and again)."""
    cls = wire.request_class(2, 6)
    part_cls = wire.sibling(cls, "ListOffsetsPartition")
    parts = tuple(
        wire.build(part_cls, partition_index=i % PARTITIONS, current_leader_epoch=-1, timestamp=-1)
        for i in range(entries)
    )
    topic = wire.build(wire.sibling(cls, "ListOffsetsTopic"), name=TOPIC, partitions=parts)
    return wire.build(cls, replica_id=-1, isolation_level=0, topics=(topic,))


def test_a_list_offsets_naming_partitions_again_and_again_answers_each_and_stays_live(
    node: LocalCluster,
) -> None:
    request = _list_offsets(LIST_OFFSETS_ENTRIES)
    answer = served_live(node.kafka["n1"], lambda raw: raw.call(2, 6, request))
    answered = answer.topics[0].partitions
    assert len(answered) == LIST_OFFSETS_ENTRIES
    assert [p.error_code for p in answered[:PARTITIONS]] == [ErrorCode.none] * PARTITIONS
    assert {p.error_code for p in answered[PARTITIONS:]} == {ErrorCode.invalid_request}  # as Kafka


def test_a_request_too_large_to_decode_on_the_loop_is_decoded_and_answered_off_it(
    node: LocalCluster,
) -> None:
    request = _list_offsets(HUGE_LIST_OFFSETS_ENTRIES)
    answer = served_live(node.kafka["n1"], lambda raw: raw.call(2, 6, request))
    assert len(answer.topics[0].partitions) == HUGE_LIST_OFFSETS_ENTRIES


def test_a_fetch_of_many_partitions_answers_each_reads_within_max_bytes_and_stays_live(
    node: LocalCluster,
) -> None:
    producer = RawKafka(node.kafka["n1"])
    try:  # ~100 KiB in each partition: a node reading every entry of the request reads gigabytes
        cls = wire.request_class(0, 9)
        value = b"x" * 1024
        batch = encode_batch(0, [ProducerRecord(None, value, ())] * 10, 0, int(time.time() * 1000))
        parts = tuple(
            wire.build(wire.sibling(cls, "PartitionProduceData"), index=p, records=batch)
            for p in range(PARTITIONS)
            for _ in range(10)
        )
        data = wire.build(wire.sibling(cls, "TopicProduceData"), name=TOPIC, partition_data=parts)
        request = wire.build(cls, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
                             topic_data=(data,))  # fmt: skip
        produced = producer.call(0, 9, request).responses[0].partition_responses
        assert {p.error_code for p in produced} == {ErrorCode.none}
    finally:
        producer.close()
    cls = wire.request_class(1, 12)
    part_cls = wire.sibling(cls, "FetchPartition")
    parts = tuple(
        wire.build(part_cls, partition=i % (PARTITIONS * 2), current_leader_epoch=-1, fetch_offset=0,
                   last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=FETCH_MAX_BYTES)
        for i in range(FETCH_ENTRIES)
    )  # fmt: skip
    topic = wire.build(wire.sibling(cls, "FetchTopic"), topic=TOPIC, partitions=parts)
    request = wire.build(cls, cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0,
                         max_bytes=FETCH_MAX_BYTES, isolation_level=0, session_id=0, session_epoch=-1,
                         topics=(topic,), forgotten_topics_data=(), rack_id="")  # fmt: skip
    answer = served_live(node.kafka["n1"], lambda raw: raw.call(1, 12, request))
    answered = answer.responses[0].partitions
    # one answer per partition, named once or 7,500 times: Kafka's FetchRequest.fetchData is a map
    assert sorted(p.partition_index for p in answered) == list(range(PARTITIONS * 2))
    codes = {p.partition_index: p.error_code for p in answered}
    assert codes == {
        p: ErrorCode.none if p < PARTITIONS else ErrorCode.unknown_topic_or_partition
        for p in range(PARTITIONS * 2)
    }
    assert answered[0].records, "the first partition's records are answered"
    assert sum(len(p.records or b"") for p in answered) <= FETCH_MAX_BYTES
    # those not read, past the answer's bytes, still tell the consumer where the partition ends
    assert all(p.high_watermark >= 100 for p in answered if p.partition_index < PARTITIONS)


def test_a_metadata_naming_a_topic_again_and_again_answers_it_once_and_stays_live(
    node: LocalCluster,
) -> None:
    cls = wire.request_class(3, 8)
    topic_cls = wire.sibling(cls, "MetadataRequestTopic")
    names = [TOPIC if i % 2 == 0 else "missing" for i in range(METADATA_ENTRIES)]
    request = wire.build(cls, topics=tuple(wire.build(topic_cls, name=n) for n in names),
                         allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                         include_topic_authorized_operations=False)  # fmt: skip
    answer = served_live(node.kafka["n1"], lambda raw: raw.call(3, 8, request))
    assert [t.name for t in answer.topics] == [TOPIC, "missing"], "each topic once, as Kafka answers"
    assert len(answer.topics[0].partitions) == PARTITIONS
    assert answer.topics[1].error_code is ErrorCode.unknown_topic_or_partition


def _next_answer(raw: RawKafka, api_key: int, version: int) -> Any:
    """The next answer on a connection with many requests in flight (any correlation id)."""
    size = struct.unpack(">i", raw._read(4))[0]
    frame = raw._read(size)
    cls = wire.response_class(api_key, version)
    _, used = entity_reader(cls.__header_schema__)(frame, 0)
    return entity_reader(cls)(frame, used)[0]


def _coordinated_here(address: str, group: str) -> None:
    """Until the node coordinates ``group`` (its first FindCoordinator creates the groups' topic)."""
    raw = RawKafka(address)
    try:
        cls = wire.request_class(10, 3)
        deadline = time.monotonic() + 60
        while raw.call(10, 3, wire.build(cls, key=group, key_type=0)).error_code is not ErrorCode.none:
            assert time.monotonic() < deadline, f"no coordinator for {group}"
            time.sleep(0.1)
    finally:
        raw.close()


def test_joins_sent_at_once_never_pass_a_groups_members_bound(node: LocalCluster) -> None:
    _coordinated_here(node.kafka["n1"], "crowd")
    cls = wire.request_class(11, 5)
    protocol = wire.build(wire.sibling(cls, "JoinGroupRequestProtocol"), name="range", metadata=b"")
    request = wire.build(cls, group_id="crowd", session_timeout=datetime.timedelta(seconds=30),
                         rebalance_timeout=datetime.timedelta(seconds=30), member_id="",
                         group_instance_id=None, protocol_type="consumer", protocols=(protocol,))  # fmt: skip
    connections = [RawKafka(node.kafka["n1"]) for _ in range(10)]
    try:
        extra = 30
        per_connection = (MEMBERS_MAX + extra) // len(connections)
        for raw in connections:  # every join in flight before any answer is read
            raw.send_raw(b"".join(raw.frame(11, 5, request) for _ in range(per_connection)))
        codes = []
        for raw in connections:
            for _ in range(per_connection):
                codes.append(_next_answer(raw, 11, 5).error_code)
    finally:
        for raw in connections:
            raw.close()
    assert codes.count(ErrorCode.member_id_required) == MEMBERS_MAX  # each then joins with its id
    assert codes.count(ErrorCode.group_max_size_reached) == extra


# -- the node's liveness while a request names 100,000 partitions (issue 72, item 6) ------------------------

WIDE_ENTRIES = 100_000  # partition indexes named in one Fetch or Produce: the topic has PARTITIONS of them


def live_over_http(cluster: LocalCluster, big: Callable[[RawKafka], Any]) -> Any:
    """The answer of ``big``, once it is checked that the node's event loop was never held
    ``LIVE_WITHIN_S`` of CPU meanwhile (``loop_held``: what ``/status/live`` waits with a CPU to spare)."""
    raw = RawKafka(cluster.kafka["n1"])
    raw.sock.settimeout(ANSWER_TIMEOUT_S)
    try:
        with never_held(cluster.servers[0], LIVE_WITHIN_S):
            return big(raw)
    finally:
        raw.close()


def test_a_fetch_naming_100000_partitions_leaves_the_node_live(node: LocalCluster) -> None:
    cls = wire.request_class(1, 12)
    part_cls = wire.sibling(cls, "FetchPartition")
    parts = tuple(
        wire.build(part_cls, partition=i, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                   log_start_offset=-1, partition_max_bytes=1024)
        for i in range(WIDE_ENTRIES)
    )  # fmt: skip
    topic = wire.build(wire.sibling(cls, "FetchTopic"), topic=TOPIC, partitions=parts)
    request = wire.build(cls, cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0,
                         max_bytes=FETCH_MAX_BYTES, isolation_level=0, session_id=0, session_epoch=-1,
                         topics=(topic,), forgotten_topics_data=(), rack_id="")  # fmt: skip
    for _ in range(2):  # a second time: the errors the first left the collector to scan were held by then
        answer = live_over_http(node, lambda raw: raw.call(1, 12, request))
        codes = [p.error_code for p in answer.responses[0].partitions]
        assert len(codes) == WIDE_ENTRIES  # every partition answered: those that are not, refused one by one
        assert codes.count(ErrorCode.unknown_topic_or_partition) == WIDE_ENTRIES - PARTITIONS


def test_a_produce_naming_100000_partitions_leaves_the_node_live(node: LocalCluster) -> None:
    cls = wire.request_class(0, 9)
    batch = _batch()
    part_cls = wire.sibling(cls, "PartitionProduceData")
    parts = tuple(wire.build(part_cls, index=i, records=batch) for i in range(WIDE_ENTRIES))
    data = wire.build(wire.sibling(cls, "TopicProduceData"), name=TOPIC, partition_data=parts)
    request = wire.build(cls, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=60),
                         topic_data=(data,))  # fmt: skip
    answer = live_over_http(node, lambda raw: raw.call(0, 9, request))
    codes = [p.error_code for p in answer.responses[0].partition_responses]
    assert len(codes) == WIDE_ENTRIES
    assert codes[:PARTITIONS] == [ErrorCode.none] * PARTITIONS  # appended
    assert codes.count(ErrorCode.unknown_topic_or_partition) == WIDE_ENTRIES - PARTITIONS


def _fetch_requests(node: LocalCluster) -> float:
    """The node's count of partition reads for fetches (``raftlog_fetch_requests_total``)."""
    with urllib.request.urlopen(node.urls["n1"] + METRICS_PATH, timeout=10) as answer:
        text = answer.read().decode()
    return next(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "raftlog_fetch_requests_total"
    )


def _fetch_one(partitions: dict[int, int], wait: datetime.timedelta) -> Any:
    """A Fetch v12 of ``TOPIC``'s partitions from their offsets (partition -> offset)."""
    cls = wire.request_class(1, 12)
    parts = tuple(
        wire.build(wire.sibling(cls, "FetchPartition"), partition=partition, current_leader_epoch=-1,
                   fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
                   partition_max_bytes=FETCH_MAX_BYTES)
        for partition, offset in partitions.items()
    )  # fmt: skip
    topic = wire.build(wire.sibling(cls, "FetchTopic"), topic=TOPIC, partitions=parts)
    return wire.build(cls, cluster_id=None, replica_id=-1, max_wait=wait, min_bytes=1,
                      max_bytes=FETCH_MAX_BYTES, isolation_level=0, session_id=0, session_epoch=-1,
                      topics=(topic,), forgotten_topics_data=(), rack_id="")  # fmt: skip


@pytest.mark.parametrize("waiting_on", [1, 2])
def test_a_long_poll_woken_by_a_produce_reads_its_partitions_once_woken(
    node: LocalCluster, waiting_on: int
) -> None:
    """A Fetch waiting for a record (max_wait 30 s) on one partition, or two, is answered the record a
    produce then appends to the last of them, and reads each partition twice: before its wait and once
    woken (its wait read them as well: three reads each, the wait's thrown away, a CRC walk and a copy
    of the records more on each consumer's wake-up)."""
    partitions = list(range(PARTITIONS - waiting_on, PARTITIONS))
    raw, producer = RawKafka(node.kafka["n1"]), RawKafka(node.kafka["n1"])
    try:
        raw.sock.settimeout(ANSWER_TIMEOUT_S)
        now = raw.call(1, 12, _fetch_one(dict.fromkeys(partitions, 0), datetime.timedelta(0)))
        ends = {p.partition_index: p.high_watermark for p in now.responses[0].partitions}
        before = _fetch_requests(node)
        raw.send_raw(raw.frame(1, 12, _fetch_one(ends, datetime.timedelta(seconds=30))))
        deadline = time.monotonic() + 60
        while _fetch_requests(node) == before:  # its first reads done: it waits (or is about to)
            assert time.monotonic() < deadline, "the long poll never read its partitions"
            time.sleep(0.01)
        cls = wire.request_class(0, 9)
        part = wire.build(wire.sibling(cls, "PartitionProduceData"), index=partitions[-1], records=_batch())
        data = wire.build(wire.sibling(cls, "TopicProduceData"), name=TOPIC, partition_data=(part,))
        request = wire.build(cls, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
                             topic_data=(data,))  # fmt: skip
        produced = producer.call(0, 9, request).responses[0].partition_responses[0]
        assert produced.error_code == ErrorCode.none
        answer = {p.partition_index: p for p in raw.answer(1, 12).responses[0].partitions}
        assert {p.error_code for p in answer.values()} == {ErrorCode.none}
        woken = answer[partitions[-1]]
        assert woken.high_watermark == ends[partitions[-1]] + 1
        assert woken.records, "the woken long poll answers the new record"
        assert _fetch_requests(node) - before <= 2 * waiting_on
    finally:
        raw.close()
        producer.close()
