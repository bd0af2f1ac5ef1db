"""What real clients never send, sent on purpose: each gets Kafka's error or a closed connection, the
node keeps serving every other client, and nothing is written."""

from __future__ import annotations

import asyncio
import datetime
import socket
import struct
import time
from typing import Any

import crc32c
from kafka_fixtures import RawKafka, http_client, request_frame
from kio.schema.errors import ErrorCode
from waiting import wait_for, wait_until

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.server import KafkaServer, Limits
from partitions.features import Features
from partitions.names import broker_id
from partitions.security.quotas import ClientQuotas
from raftlog.storage.batch import ProducerRecord, encode_batch
from raftlog_client.local_cluster import LocalCluster

PRODUCE_VERSION = 9
FETCH_VERSION = 12
METADATA_VERSION = 8


def _versions(raw: RawKafka, version: int = 3) -> Any:
    cls = wire.request_class(18, version)
    return raw.call(18, version, wire.build(cls, client_software_name="raw", client_software_version="1"))


def _produce_request(
    topic: str, partition: int, batch: bytes, acks: int = -1, transactional: str | None = None
) -> Any:
    cls = wire.request_class(0, PRODUCE_VERSION)
    part = wire.build(wire.sibling(cls, "PartitionProduceData"), index=partition, records=batch)
    data = wire.build(wire.sibling(cls, "TopicProduceData"), name=topic, partition_data=(part,))
    return wire.build(cls, transactional_id=transactional, acks=acks, timeout=datetime.timedelta(seconds=10),
                      topic_data=(data,))  # fmt: skip


def _partition_error(answer: Any) -> ErrorCode:
    return answer.responses[0].partition_responses[0].error_code


def _batch(count: int = 3) -> bytes:
    records = [ProducerRecord(b"k%d" % i, b"v", ()) for i in range(count)]
    return encode_batch(0, records, 0, int(time.time() * 1000))


def _transactional_batch() -> bytes:
    """A transactional producer's batch (attribute bit 4), of a producer no coordinator knows."""
    records = [ProducerRecord(b"k", b"v", ())]
    batch = bytearray(encode_batch(0, records, 0, int(time.time() * 1000), 4242, 0, producer_epoch=0))
    struct.pack_into(">h", batch, 21, struct.unpack_from(">h", batch, 21)[0] | 0x10)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def _leader_and_follower(cluster: LocalCluster, topic: str) -> tuple[str, str]:
    """Kafka addresses of partition 0's leader and of another node, as Metadata names them."""
    raw = RawKafka(cluster.kafka["n1"])
    try:
        cls = wire.request_class(3, METADATA_VERSION)
        topic_cls = wire.sibling(cls, "MetadataRequestTopic")
        request = wire.build(
            cls,
            topics=(wire.build(topic_cls, name=topic),),
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )

        def led() -> Any:
            partition = raw.call(3, METADATA_VERSION, request).topics[0].partitions[0]
            return partition if partition.leader_id >= 0 else None

        leader = wait_for(led, f"a leader of {topic}/0", 30, every_s=0.3).leader_id
    finally:
        raw.close()
    by_id = {broker_id(node): address for node, address in cluster.kafka.items()}
    follower = next(address for node_id, address in by_id.items() if node_id != leader)
    return by_id[leader], follower


def test_an_unsupported_api_versions_version_is_answered_at_v0_with_what_is_served(
    kafka_cluster: LocalCluster,
) -> None:
    raw = RawKafka(kafka_cluster.kafka["n1"])
    try:
        cls = wire.request_class(18, 3)
        body = wire.build(cls, client_software_name="raw", client_software_version="1")
        frame = bytearray(raw.frame(18, 3, body))
        struct.pack_into(">h", frame, 6, 99)  # the header's api version
        raw.send_raw(bytes(frame))
        answer = raw.answer(18, 0)
        assert answer.error_code is ErrorCode.unsupported_version
        assert {k.api_key for k in answer.api_keys} >= {0, 1, 2, 3, 18, 22}
        assert _versions(raw).error_code is ErrorCode.none, "the connection goes on"
    finally:
        raw.close()


def test_frames_that_are_not_requests_close_only_their_connection(kafka_cluster: LocalCluster) -> None:
    bystander = RawKafka(kafka_cluster.kafka["n1"])
    good = _versions(bystander)
    cases = {
        "oversized": struct.pack(">i", 200 * 1024 * 1024) + b"\0" * 64,
        "shorter than a header": struct.pack(">i", 3) + b"\0\0\0",
        "negative size": struct.pack(">i", -5),
        "unknown api": struct.pack(">ihhi", 8, 999, 0, 1),
        "unserved version": struct.pack(">ihhi", 8, 3, 99, 1),
        "garbage body": struct.pack(">ihhih", 14, 3, METADATA_VERSION, 1, -1) + b"\x7f\xff\xff\xff",
    }
    for name, payload in cases.items():
        raw = RawKafka(kafka_cluster.kafka["n1"])
        try:
            raw.send_raw(payload)
            assert raw.closed_by_server(), name
        finally:
            raw.close()
    assert _versions(bystander).api_keys == good.api_keys, "other connections are served throughout"
    bystander.close()


def test_refused_produces_write_nothing(kafka_cluster: LocalCluster) -> None:
    with http_client(kafka_cluster) as client:
        client.create_topic("refusals", 1, 3)
    leader, follower = _leader_and_follower(kafka_cluster, "refusals")
    corrupt = bytearray(_batch())
    corrupt[-1] ^= 0xFF  # the CRC no longer matches
    raw, elsewhere = RawKafka(leader), RawKafka(follower)
    try:
        assert _partition_error(
            elsewhere.call(0, PRODUCE_VERSION, _produce_request("refusals", 0, _batch()))
        ) is (ErrorCode.not_leader_or_follower)
        answers = {
            "corrupt": raw.call(0, PRODUCE_VERSION, _produce_request("refusals", 0, bytes(corrupt))),
            "two batches": raw.call(0, PRODUCE_VERSION, _produce_request("refusals", 0, _batch() + _batch())),
            "acks": raw.call(0, PRODUCE_VERSION, _produce_request("refusals", 0, _batch(), acks=5)),
            "transactional": raw.call(
                0, PRODUCE_VERSION, _produce_request("refusals", 0, _transactional_batch(), transactional="t")
            ),
            "no transactional id": raw.call(
                0, PRODUCE_VERSION, _produce_request("refusals", 0, _transactional_batch())
            ),
            "unknown partition": raw.call(0, PRODUCE_VERSION, _produce_request("refusals", 7, _batch())),
            "unknown topic": raw.call(0, PRODUCE_VERSION, _produce_request("nosuch", 0, _batch())),
        }
        codes = {name: _partition_error(answer) for name, answer in answers.items()}
        assert codes == {
            "corrupt": ErrorCode.invalid_record,
            "two batches": ErrorCode.invalid_record,
            "acks": ErrorCode.invalid_required_acks,
            "transactional": ErrorCode.invalid_txn_state,  # KIP-890: no ongoing transaction holds it
            "no transactional id": ErrorCode.transactional_id_authorization_failed,  # as Kafka answers it
            "unknown partition": ErrorCode.unknown_topic_or_partition,
            "unknown topic": ErrorCode.unknown_topic_or_partition,
        }
        messages = [
            answers[n].responses[0].partition_responses[0].error_message for n in ("corrupt", "transactional")
        ]
        assert "crc32c" in (messages[0] or "") and "AddPartitionsToTxn first" in (messages[1] or "")
        with http_client(kafka_cluster) as client:
            assert client.offsets("refusals", 0) == (0, 0), "nothing was written"
        ok = raw.call(0, PRODUCE_VERSION, _produce_request("refusals", 0, _batch()))
        answer = ok.responses[0].partition_responses[0]
        assert _partition_error(ok) is ErrorCode.none and answer.base_offset == 0
        assert answer.log_start_offset == 0, "the partition's log start offset, as Kafka answers it"
    finally:
        raw.close()
        elsewhere.close()


def _init_producer(raw: RawKafka) -> tuple[int, int]:
    """An idempotent producer's id and epoch (InitProducerId without a transactional id)."""
    cls = wire.request_class(22, 4)
    body = wire.build(cls, transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60),
                      producer_id=-1, producer_epoch=-1)  # fmt: skip
    answer = raw.call(22, 4, body)
    assert answer.error_code is ErrorCode.none
    return answer.producer_id, answer.producer_epoch


def test_a_gap_in_a_kafka_producers_sequences_is_refused_and_filled(kafka_cluster: LocalCluster) -> None:
    """Batches at sequences 0 (two records), 5, 2, 3: Kafka answers 5 OUT_OF_ORDER_SEQUENCE_NUMBER and
    appends 2 and 3; a retry of 2 gets its first offset. The HTTP API's producers keep their rule
    (sequences per request, gaps allowed)."""
    with http_client(kafka_cluster) as client:
        client.create_topic("sequences", 1, 3)
    leader, _ = _leader_and_follower(kafka_cluster, "sequences")
    raw = RawKafka(leader)
    try:
        producer_id, epoch = _init_producer(raw)

        def send(sequence: int, *values: bytes) -> tuple[ErrorCode, int]:
            records = [ProducerRecord(v) for v in values]
            batch = encode_batch(0, records, 0, int(time.time() * 1000), producer_id, sequence,
                                 producer_epoch=epoch)  # fmt: skip
            answer = raw.call(0, PRODUCE_VERSION, _produce_request("sequences", 0, batch))
            return _partition_error(answer), answer.responses[0].partition_responses[0].base_offset

        answers = [send(0, b"s0", b"s1"), send(5, b"s5"), send(2, b"s2"), send(3, b"s3"), send(2, b"s2")]
    finally:
        raw.close()
    assert answers == [
        (ErrorCode.none, 0),
        (ErrorCode.out_of_order_sequence_number, -1),
        (ErrorCode.none, 2),
        (ErrorCode.none, 3),
        (ErrorCode.none, 2),  # the retry: its first offset
    ]
    with http_client(kafka_cluster) as client:
        page = client.fetch_page("sequences", 0, 0, 1 << 20, 0, columnar=True)
        assert list(page.values) == [b"s0", b"s1", b"s2", b"s3"]
        client.create_topic("http-sequences", 1, 3)
        for sequence in (0, 5):
            batch = encode_batch(0, [ProducerRecord(b"h")], 0, int(time.time() * 1000), 77, sequence)
            client.produce_batch("http-sequences", 0, batch, idempotent=True)
        assert client.offsets("http-sequences", 0) == (0, 2), "the HTTP API's skip is taken"


def test_a_fetch_past_the_end_is_out_of_range(kafka_cluster: LocalCluster) -> None:
    with http_client(kafka_cluster) as client:
        client.create_topic("ranges", 1, 3)
    leader, _ = _leader_and_follower(kafka_cluster, "ranges")
    raw = RawKafka(leader)
    try:
        cls = wire.request_class(1, FETCH_VERSION)
        part = wire.build(
            wire.sibling(cls, "FetchPartition"),
            partition=0,
            current_leader_epoch=-1,
            fetch_offset=5,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=1 << 20,
        )
        topic = wire.build(wire.sibling(cls, "FetchTopic"), topic="ranges", partitions=(part,))
        body = wire.build(cls, cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(milliseconds=100),
                          min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                          topics=(topic,), forgotten_topics_data=(), rack_id="")  # fmt: skip
        answer = raw.call(1, FETCH_VERSION, body)
        partition = answer.responses[0].partitions[0]
        assert partition.error_code is ErrorCode.offset_out_of_range and partition.high_watermark == -1
    finally:
        raw.close()


class _NoGroups:
    """A coordinator no request here reaches."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"no request here reaches a group (asked for {name})")


class _NoMetadata:
    def features(self) -> Features:
        return Features(lambda: {}, lambda: 0)  # a cluster that finalized nothing: what ApiVersions reads

    def client_quotas(self) -> ClientQuotas:
        return ClientQuotas(dict)  # no quota set: every request is answered as it is


class _NoNode:
    """A door for requests that need no node (ApiVersions, which reads only the feature levels)."""

    metadata = _NoMetadata()

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"ApiVersions should not ask the node for {name}")


async def test_a_client_that_never_reads_is_closed_and_connections_are_bounded() -> None:
    limits = Limits(connections_max=1, in_flight_max=4, send_timeout_s=0.5, send_buffer_bytes=4096)
    server = KafkaServer(Door(_NoNode(), "c", _NoGroups()), limits)  # type: ignore[arg-type]
    await server.start("127.0.0.1", 0)
    try:
        address = f"127.0.0.1:{server.port}"
        cls = wire.request_class(18, 3)
        body = wire.build(cls, client_software_name="raw", client_software_version="1")
        frame = request_frame(18, 3, body, 1)
        tiny = socket.socket()
        tiny.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # fills after a few answers
        tiny.connect(("127.0.0.1", server.port))
        _, silent = await asyncio.open_connection(sock=tiny)

        async def silent_admitted() -> bool:
            return len(server._open) == 1

        await wait_until(silent_admitted, "the silent client holds the only connection")
        refused = await asyncio.to_thread(lambda: RawKafka(address).closed_by_server())
        assert refused and server.stats.refused_connections >= 1
        closed = False
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not closed:  # send, never read
            silent.write(frame * 2000)
            try:
                await asyncio.wait_for(silent.drain(), 1.0)
            except ConnectionError:
                closed = True
            except TimeoutError:
                pass
        assert closed, "the client that never read its answers was closed"
        served = await asyncio.to_thread(_versions, RawKafka(address))
        assert served.error_code is ErrorCode.none, "and the next client is served"
        silent.close()
    finally:
        await server.close()


async def test_one_address_may_hold_hundreds_and_at_the_bound_a_newcomer_takes_from_it() -> None:
    """Kafka bounds no address by default: 150 connections from one address are each served (the bound
    of 100 per address cut a client test suite's extra connections). At the node-wide bound, a newcomer
    from another address takes the oldest connection of the address holding most."""
    server = KafkaServer(Door(_NoNode(), "c", _NoGroups()), Limits())  # type: ignore[arg-type]
    await server.start("127.0.0.1", 0)
    address = f"127.0.0.1:{server.port}"
    many: list[RawKafka] = []
    try:
        for _ in range(150):
            many.append(await asyncio.to_thread(RawKafka, address))
        answers = await asyncio.gather(*(asyncio.to_thread(_versions, raw) for raw in many))
        assert all(answer.error_code is ErrorCode.none for answer in answers)
    finally:
        for raw in many:
            raw.close()
        await server.close()

    bounded = KafkaServer(Door(_NoNode(), "c", _NoGroups()), Limits(connections_max=3))  # type: ignore[arg-type]
    await bounded.start("127.0.0.1", 0)
    try:
        holders = [socket.create_connection(("127.0.0.1", bounded.port), source_address=("127.0.0.2", 0))
                   for _ in range(3)]  # fmt: skip

        async def holders_admitted() -> bool:
            return len(bounded._open) == 3

        await wait_until(holders_admitted, "127.0.0.2 holds all three connections")
        newcomer = await asyncio.to_thread(RawKafka, f"127.0.0.1:{bounded.port}")
        served = await asyncio.to_thread(_versions, newcomer)
        assert served.error_code is ErrorCode.none and bounded.stats.cut_for_newcomer == 1
        holders[0].settimeout(10)
        assert await asyncio.to_thread(holders[0].recv, 1) == b"", "the oldest of 127.0.0.2's was closed"
        same = await asyncio.to_thread(
            lambda: socket.create_connection(("127.0.0.1", bounded.port), source_address=("127.0.0.2", 0))
        )
        same.settimeout(10)
        assert await asyncio.to_thread(same.recv, 1) == b"", "it takes none back"
        assert bounded.stats.refused_connections == 1
        for sock in (*holders, same):
            sock.close()
        newcomer.close()
    finally:
        await bounded.close()
