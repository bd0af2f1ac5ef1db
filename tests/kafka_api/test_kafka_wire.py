"""The Kafka wire crossing: requests decode as kio's classes, responses encode with the right header,
and a frame that is not what it says is refused (never half-read)."""

from __future__ import annotations

import datetime
import struct

import pytest
from kafka_fixtures import request_frame
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.serial import entity_reader

from kafka_api import encoding, wire
from kafka_api.apis import APIS, versions_response


def _frame(api_key: int, version: int, body: object, correlation_id: int = 7) -> bytes:
    return request_frame(api_key, version, body, correlation_id)[4:]  # without the size prefix


def _metadata_request(version: int) -> object:
    cls = wire.request_class(3, version)
    topic = wire.sibling(cls, "MetadataRequestTopic")
    return wire.build(
        cls,
        topics=(wire.build(topic, name="orders", topic_id=None),),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


@pytest.mark.parametrize("version", [1, 8, 9])
def test_a_request_decodes_into_kios_class_with_its_header(version: int) -> None:
    frame = _frame(3, version, _metadata_request(version), correlation_id=41)
    request = wire.parse(frame)
    assert (request.api_key, request.api_version, request.correlation_id) == (3, version, 41)
    assert request.client_id == "raw" and [t.name for t in request.body.topics] == ["orders"]
    expected_header = HeaderV2 if version >= 9 else HeaderV1
    assert wire.request_class(3, version).__header_schema__ is expected_header


def test_bytes_after_the_request_or_a_truncated_one_are_refused() -> None:
    frame = _frame(3, 9, _metadata_request(9))
    with pytest.raises(wire.MalformedRequest, match="bytes after the request"):
        wire.parse(frame + b"\0")
    for cut in (len(frame) - 1, 9, 3):
        with pytest.raises(wire.MalformedRequest):
            wire.parse(frame[:cut])


# what librdkafka 2.16 (confluent-kafka's AdminClient.alter_user_scram_credentials) sent: deletions of
# judy/SCRAM-SHA-512 and bob/SCRAM-SHA-256 and an upsertion of x, then one byte after the request
LIBRDKAFKA_ALTER_USER_SCRAM_CREDENTIALS = bytes.fromhex(
    "0033000000000003000772646b61666b610003056a756479020004626f62010002027801000010000973616c7473616c"
    "74210e2a95fcd4bcbadb3966d1c93c5f716703d2ca58f1d3a1c20bfd209df53a7ca5000000"
)


def test_the_byte_librdkafka_writes_after_alter_user_scram_credentials_is_taken_as_kafka_takes_it() -> None:
    request = wire.parse(LIBRDKAFKA_ALTER_USER_SCRAM_CREDENTIALS)
    assert [(d.name, d.mechanism) for d in request.body.deletions] == [("judy", 2), ("bob", 1)]
    assert [(u.name, u.iterations, u.salt) for u in request.body.upsertions] == [("x", 4096, b"saltsalt")]
    with pytest.raises(wire.MalformedRequest, match="bytes after the request"):
        wire.parse(LIBRDKAFKA_ALTER_USER_SCRAM_CREDENTIALS + b"\0")  # that byte only, nothing more
    with pytest.raises(wire.MalformedRequest, match="bytes after the request"):
        wire.parse(LIBRDKAFKA_ALTER_USER_SCRAM_CREDENTIALS[:-1] + b"\1")


# What librdkafka 2.16.0 (confluent-kafka 2.16.1) sent for all topics, a consumer's (allow.auto.create.topics
# false) and an AdminClient.list_topics (true), at each flexible version of Metadata a broker offered it:
# the topic count is the four bytes it reserved, 00 00 00 00, never shrunk to the compact null array's 00
# (librdkafka issue 5049). Without mending, kio reads three of the zeros as the booleans and the next byte
# as a count of tagged fields ("Unknown tagged field tag: 0"), or finds three bytes after the request.
LIBRDKAFKA_ALL_TOPICS = {
    (9, False): "0003000900000003000772646b61666b61000000000000000000",
    (9, True): "0003000900000003000772646b61666b61000000000001000000",
    (10, True): "0003000a00000003000772646b61666b61000000000001000000",
    (11, False): "0003000b00000003000772646b61666b610000000000000000",
    (12, False): "0003000c00000003000772646b61666b610000000000000000",
    (12, True): "0003000c00000003000772646b61666b610000000000010000",
    (13, False): "0003000d00000003000772646b61666b610000000000000000",
    (13, True): "0003000d00000003000772646b61666b610000000000010000",
}
# and, well formed, its request for brokers only (an empty array) and for topic "t" (v12: the zero topic id)
LIBRDKAFKA_BROKERS_ONLY_V9 = "0003000900000002000772646b61666b61000100000000"
LIBRDKAFKA_ONE_TOPIC_V12 = (
    "0003000c00000002000772646b61666b61000200000000000000000000000000000000027400000000"
)


@pytest.mark.parametrize(("version", "auto_create"), sorted(LIBRDKAFKA_ALL_TOPICS))
def test_librdkafkas_metadata_for_all_topics_is_read_as_it_means(version: int, auto_create: bool) -> None:
    frame = bytes.fromhex(LIBRDKAFKA_ALL_TOPICS[version, auto_create])
    request = wire.parse(frame)
    assert (request.api_key, request.api_version, request.client_id) == (3, version, "rdkafka")
    assert request.body.topics is None  # every topic
    assert request.body.allow_auto_topic_creation is auto_create
    assert request.body.include_topic_authorized_operations is False
    assert getattr(request.body, "include_cluster_authorized_operations", False) is False
    with pytest.raises(wire.MalformedRequest):
        wire.parse(frame + b"\1")  # mended or not, a byte too many
    header_end = len(frame) - (4 if version >= 11 else 5) - 3
    assert frame[header_end : header_end + 4] == b"\0\0\0\0"
    with pytest.raises(wire.MalformedRequest):  # only those four zeros are mended
        wire.parse(frame[:header_end] + b"\0\0\0\2" + frame[header_end + 4 :])


def test_librdkafkas_well_formed_metadata_requests_read_as_sent() -> None:
    brokers_only = wire.parse(bytes.fromhex(LIBRDKAFKA_BROKERS_ONLY_V9))
    assert brokers_only.body.topics == ()
    one = wire.parse(bytes.fromhex(LIBRDKAFKA_ONE_TOPIC_V12))
    assert [(t.name, t.topic_id) for t in one.body.topics] == [("t", None)]  # kio reads the zero id as None


def test_a_metadata_request_with_four_zeros_is_mended_only_where_librdkafka_sends_it() -> None:
    # v8 and before: not flexible, the count is an int32 and four zeros are an empty array, read as sent
    v8 = _frame(3, 8, _metadata_request(8))
    body = v8[len(v8) - 3 - len(b"orders") - 2 - 4 :]
    assert wire.parse(v8).body.topics[0].name == "orders" and body.startswith(b"\0\0\0\1")
    well_formed = _frame(3, 13, wire.build(wire.request_class(3, 13), topics=None,
                                            allow_auto_topic_creation=False,
                                            include_topic_authorized_operations=False))  # fmt: skip
    assert well_formed.endswith(b"\0\0\0\0")  # null, false, false, no tagged fields: taken as sent
    assert wire.parse(well_formed).body.topics is None


def test_a_response_frame_carries_its_size_and_correlation_id() -> None:
    frame = b"".join(encoding.encode(99, versions_response(3, ErrorCode.none)))
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    assert struct.unpack_from(">i", frame, 4)[0] == 99
    # ApiVersions answers with response header v0 (no tagged fields) whatever its version
    body, used = entity_reader(wire.response_class(18, 3))(frame, 8)
    assert used == len(frame) - 8
    served = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert served == {api.key: (api.min_version, api.max_version) for api in APIS.values()}


def test_every_served_version_has_kios_classes_both_ways() -> None:
    for api in APIS.values():
        for version in range(api.min_version, api.max_version + 1):
            assert wire.request_class(api.key, version).__api_key__ == api.key
            assert wire.response_class(api.key, version).__api_key__ == api.key


def test_build_leaves_out_what_a_version_does_not_have() -> None:
    old, new = wire.response_class(3, 1), wire.response_class(3, 9)
    values = {"throttle_time": wire.NO_THROTTLE, "brokers": (), "cluster_id": "c", "controller_id": 1,
              "topics": (), "cluster_authorized_operations": 0}  # fmt: skip
    assert not hasattr(wire.build(old, **values), "cluster_id")
    assert wire.build(new, **values).cluster_id == "c"


def test_durations_and_timestamps_convert_at_millisecond_precision() -> None:
    assert wire.millis(datetime.timedelta(seconds=30, microseconds=1500)) == 30_001
    stamp = wire.timestamp(1_790_000_000_123)
    assert stamp.tzinfo is not None and stamp.microsecond == 123_000
    assert round(stamp.timestamp() * 1000) == 1_790_000_000_123


def _fetch_response(version: int, records: bytes) -> object:
    cls = wire.response_class(1, version)
    partition = wire.build(
        wire.sibling(cls, "PartitionData"), partition_index=0, error_code=ErrorCode.none, high_watermark=5,
        last_stable_offset=5, log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1,
        records=records,
    )  # fmt: skip
    topic = wire.build(wire.sibling(cls, "FetchableTopicResponse"), topic="t", partitions=(partition,))
    return wire.build(
        cls, throttle_time=wire.NO_THROTTLE, error_code=ErrorCode.none, session_id=0, responses=(topic,)
    )


@pytest.mark.parametrize("version", [4, 11, 12])  # before and after the flexible versions
def test_a_fetchs_records_leave_uncopied_and_the_frame_reads_back_whole(version: int) -> None:
    records = bytes(range(256)) * 4096  # 1 MiB
    parts = encoding.encode(7, _fetch_response(version, records))
    assert any(part is records for part in parts)  # the very object: not copied into the frame
    frame = b"".join(parts)
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    header_size = 8 if version < 12 else 9  # correlation id, and tagged fields when flexible
    body, used = entity_reader(wire.response_class(1, version))(frame, header_size)
    assert used == len(frame) - header_size
    assert body.responses[0].partitions[0].records == records


def test_small_values_and_mutable_buffers_are_copied_into_the_frame() -> None:
    small = b"x" * 100
    parts = encoding.encode(7, _fetch_response(12, small))
    assert len(parts) == 1  # one contiguous frame
    assert not any(part is small for part in parts)
    mutable = bytearray(1 << 20)  # could change before the transport sent it: copied, however large
    parts = encoding.encode(7, _fetch_response(12, mutable))  # type: ignore[arg-type]
    assert len(parts) == 1 and not any(part is mutable for part in parts)
