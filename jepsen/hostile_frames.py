"""What the hostile clients send (``jepsen.hostile``), pure: Kafka frames (ApiVersions, a Produce of a
compression bomb, SASL PLAIN), the bombs themselves, a pinning frame's header, the HTTP credentials that
must be refused, and how an answer's error code is read."""

from __future__ import annotations

import base64
import datetime
import io
import struct
import zlib
from typing import Any

import cramjam
import crc32c
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

PRODUCE_VERSION = 9
API_VERSIONS_VERSION = 3
SASL_USER, SASL_PASSWORD = "hostile-user", "hostile-user's password"  # an ordinary user, no ACL needed


def kafka_frame(api_key: int, version: int, body: Any, correlation_id: int) -> bytes:
    """A whole Kafka request frame (size prefix included)."""
    cls: Any = load_request_schema(api_key, version)
    header_cls = cls.__header_schema__
    buffer = io.BytesIO()
    header = header_cls(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id="hostile",
    )
    entity_writer(header_cls)(buffer, header)
    entity_writer(cls)(buffer, body)
    payload = buffer.getvalue()
    return struct.pack(">i", len(payload)) + payload


def api_versions_frame() -> bytes:
    cls: Any = load_request_schema(18, API_VERSIONS_VERSION)
    return kafka_frame(
        18, API_VERSIONS_VERSION, cls(client_software_name="h", client_software_version="1"), 1
    )


def gzip_bomb(inflated_bytes: int) -> bytes:
    """Concatenated gzip members of zeros (a gzip stream may hold many; Kafka's reader and aiokafka's
    read them all): ~1 KiB per MiB inflated."""
    member = zlib.compressobj(9, zlib.DEFLATED, 31)
    one = member.compress(bytes(1024 * 1024)) + member.flush()
    return one * max(1, inflated_bytes // (1024 * 1024))


def zstd_bomb(inflated_bytes: int) -> bytes:
    """Concatenated zstd frames of zeros (a zstd stream may hold many)."""
    chunk = 16 * 1024 * 1024
    one = bytes(cramjam.zstd.compress(bytes(chunk), level=3))
    return one * max(1, inflated_bytes // chunk)


CODECS = {"gzip": 1, "zstd": 4}


def bomb_batch(body: bytes, codec: str, now_ms: int) -> bytes:
    """A RecordBatch v2 (Kafka's layout: docs/storage-format.md) that says it holds one record, CreateTime,
    no producer, whose records section is ``body`` compressed with ``codec``; its CRC is right, so only
    inflating it shows what it is."""
    header = struct.pack(
        ">qiibIhiqqqhii", 0, 49 + len(body), 0, 2, 0, CODECS[codec], 0, now_ms, now_ms, -1, -1, -1, 1
    )
    batch = bytearray(header + body)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(memoryview(batch)[21:]))
    return bytes(batch)


def produce_frame(topic: str, partition: int, batch: bytes, correlation_id: int) -> bytes:
    cls: Any = load_request_schema(0, PRODUCE_VERSION)
    module = __import__(cls.__module__, fromlist=["x"])
    part = module.PartitionProduceData(index=partition, records=batch)
    data = module.TopicProduceData(name=topic, partition_data=(part,))
    body = cls(transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=10), topic_data=(data,))
    return kafka_frame(0, PRODUCE_VERSION, body, correlation_id)


def sasl_frames(user: str = SASL_USER, password: str = SASL_PASSWORD) -> tuple[bytes, bytes]:
    """SaslHandshake v1 (PLAIN) and SaslAuthenticate v2 of ``user``."""
    handshake: Any = load_request_schema(17, 1)
    authenticate: Any = load_request_schema(36, 2)
    token = f"\0{user}\0{password}".encode()
    return (kafka_frame(17, 1, handshake(mechanism="PLAIN"), 1),
            kafka_frame(36, 2, authenticate(auth_bytes=token), 2))  # fmt: skip


def sasl_error(api_key: int, version: int, frame: bytes) -> int:
    """The error code of a SaslHandshake or SaslAuthenticate answer."""
    cls: Any = load_response_schema(api_key, version)
    _, used = entity_reader(cls.__header_schema__)(frame, 0)
    body, _ = entity_reader(cls)(frame, used)
    return int(body.error_code.value)


def pin_header() -> bytes:
    """A Produce v9 request header (client id "p"): what a large produce's frame starts with."""
    return struct.pack(">hhih", 0, PRODUCE_VERSION, 99, 1) + b"p" + b"\0"


def produce_error(frame: bytes) -> int:
    """The partition's error code of a Produce answer (0: accepted)."""
    cls: Any = load_response_schema(0, PRODUCE_VERSION)
    _, used = entity_reader(cls.__header_schema__)(frame, 0)
    body, _ = entity_reader(cls)(frame, used)
    return int(body.responses[0].partition_responses[0].error_code.value)


BAD_CREDENTIALS = (
    b"Bearer \xff\xfe\xfd",  # not UTF-8
    b"Bearer rlt_nope_nope",
    b"Bearer " + b"A" * 4096,
    b"Basic !!!",
    b"Basic " + base64.b64encode(b"\xff\xfe:\xfd"),  # a user and password that are not UTF-8
    b"Basic " + base64.b64encode(b"nobody:wrong"),
)
