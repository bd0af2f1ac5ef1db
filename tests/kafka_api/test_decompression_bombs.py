"""Decompression bombs against a real node process: batches of a few KiB to a few MiB whose one record
inflates to up to a GiB, sent by a producer allowed to write, through the Kafka door (a raw Produce) and
the HTTP door (the batch media type), in each of Kafka's codecs. Each is refused as too large (Kafka's
MESSAGE_TOO_LARGE, HTTP's 413/41301) with nothing written, the node's own peak memory stays bounded, and
another client is answered while the bombs are handled."""

from __future__ import annotations

import concurrent.futures
import datetime
import pathlib
import time
from collections.abc import Iterator
from typing import Any

import pytest
from bombs import MiB, bomb_batch, streamed_zstd_bomb
from kafka_fixtures import RawKafka, http_client
from kio.schema.errors import ErrorCode

from kafka_api import wire
from raftlog.storage.batch import Compression, ProducerRecord, encode_batch
from raftlog_client.errors import RequestFailed
from raftlog_client.local_cluster import LocalCluster

PRODUCE_VERSION = 9
TOPIC = "bombs"
# the topic's max.message.bytes: room for a snappy bomb (snappy inflates ~20 times at most, so under
# Kafka's default of 1 MiB it cannot pass the node's 64 MiB bound; the others could)
MAX_MESSAGE_BYTES = 8 * MiB
INFLATED_BYTES = {
    Compression.GZIP: 1024 * MiB,  # ~1 MiB sent
    Compression.SNAPPY: 160 * MiB,  # ~7.5 MiB sent
    Compression.LZ4: 1024 * MiB,  # ~4.3 MiB sent
    Compression.ZSTD: 1024 * MiB,  # ~33 KiB sent
}
# what the node's peak memory may grow by while bombs are refused: the bound (64 MiB) on each of the two
# threads that inflate, and what the bombs' requests hold as sent
PEAK_GROWTH_MAX_BYTES = 200 * MiB
ANSWERED_WITHIN_S = 5.0  # another client's produce while bombs are inflated (a frozen door took 15 s)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(str(tmp_path_factory.mktemp("bombs")), nodes=1) as cluster:
        with http_client(cluster) as client:
            client.create_topic(TOPIC, 1, 1, {"max.message.bytes": MAX_MESSAGE_BYTES})
            client.create_topic("honest", 1, 1)
        yield cluster


def _now_ms() -> int:
    return int(time.time() * 1000)


def _produce_request(topic: str, batch: bytes) -> Any:
    cls = wire.request_class(0, PRODUCE_VERSION)
    part = wire.build(wire.sibling(cls, "PartitionProduceData"), index=0, records=batch)
    data = wire.build(wire.sibling(cls, "TopicProduceData"), name=topic, partition_data=(part,))
    return wire.build(cls, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
                      topic_data=(data,))  # fmt: skip


def _kafka_produce(cluster: LocalCluster, batch: bytes) -> tuple[ErrorCode, str]:
    """(error code, error message) of a raw Produce of ``batch`` to the bombs topic on a connection
    of its own."""
    raw = RawKafka(cluster.kafka["n1"])
    raw.sock.settimeout(60)
    try:
        answer = raw.call(0, PRODUCE_VERSION, _produce_request(TOPIC, batch))
    finally:
        raw.close()
    partition = answer.responses[0].partition_responses[0]
    return partition.error_code, partition.error_message or ""


def _http_produce(cluster: LocalCluster, batch: bytes) -> tuple[int, int | None, str]:
    """(status, error_code, message) of the batch posted with the batch media type (200: stored)."""
    with http_client(cluster) as client:
        try:
            client.produce_batch(TOPIC, 0, batch, idempotent=False)
        except RequestFailed as refused:
            return refused.status, refused.error_code, refused.message
    return 200, None, ""


def _memory_bytes(pid: int, field: str) -> int:
    """A field of /proc/PID/status given in kB (VmRSS: resident now, VmHWM: its peak)."""
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"/proc/{pid}/status has no {field}")


# how far the peak may sit above resident memory just after it was reset for the reset to count: a node
# that gave memory back in between (``raftlog_node.process.give_memory_back`` trims its heap every few
# seconds once quiet) would leave the peak at what it held before, and that drop counted as growth
RESET_SLACK_BYTES = 2 * MiB


def _reset_peak(pid: int) -> int:
    """Start the process's peak resident size (VmHWM) again from what it holds now (Linux 4.0+), and
    return what it holds: the baseline growth is measured from. Reset again while the node gave memory
    back between the reset and the read (the peak then is what it held before, not now)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pathlib.Path(f"/proc/{pid}/clear_refs").write_text("5")
        resident = _memory_bytes(pid, "VmRSS")
        if _memory_bytes(pid, "VmHWM") - resident <= RESET_SLACK_BYTES:
            return resident
    raise AssertionError("the node's resident memory kept falling for a minute after its peak was reset")


def test_bombs_are_refused_through_both_doors_with_nothing_written_and_memory_bounded(
    node: LocalCluster,
) -> None:
    pid = node.pids["n1"]
    bombs = {codec: bomb_batch(codec, inflated, _now_ms()) for codec, inflated in INFLATED_BYTES.items()}
    resident_before = _reset_peak(pid)
    kafka = {codec: _kafka_produce(node, batch) for codec, batch in bombs.items()}
    http = {codec: _http_produce(node, batch) for codec, batch in bombs.items()}
    peak = _memory_bytes(pid, "VmHWM")

    assert {codec: code for codec, (code, _) in kafka.items()} == dict.fromkeys(
        bombs, ErrorCode.message_too_large
    ), kafka
    assert all("inflate past" in message for _, message in kafka.values()), kafka
    assert {codec: answer[:2] for codec, answer in http.items()} == dict.fromkeys(bombs, (413, 41301)), http
    assert all("inflate past 67108864 bytes" in message for _, _, message in http.values()), http
    with http_client(node) as client:
        assert client.offsets(TOPIC, 0) == (0, 0), "nothing was written"
    growth = peak - resident_before
    assert growth < PEAK_GROWTH_MAX_BYTES, f"the node's peak memory grew by {growth / MiB:.0f} MiB"

    # the door still takes compressed batches that are what they say
    for codec in bombs:
        honest = encode_batch(0, [ProducerRecord(b"text " * 200)], 0, _now_ms(), compression=codec)
        assert _kafka_produce(node, honest) == (ErrorCode.none, "")
        assert _http_produce(node, honest) == (200, None, "")
    with http_client(node) as client:
        assert client.offsets(TOPIC, 0) == (0, 2 * len(bombs))


def test_another_client_is_answered_while_bombs_are_inflated(node: LocalCluster) -> None:
    senders = concurrent.futures.ThreadPoolExecutor(2 * len(INFLATED_BYTES))
    bombs = [bomb_batch(codec, inflated, _now_ms()) for codec, inflated in INFLATED_BYTES.items()]
    try:
        sent = [senders.submit(_kafka_produce, node, batch) for batch in bombs]
        sent += [senders.submit(_http_produce, node, batch) for batch in bombs]
        waits: list[float] = []
        with http_client(node) as client:
            while not all(future.done() for future in sent) or not waits:
                started = time.monotonic()
                client.produce("honest", [{"value": "aG9uZXN0"}], partition=0)
                waits.append(time.monotonic() - started)
        refusals = [future.result() for future in sent]
    finally:
        senders.shutdown(wait=True)
    assert [answer[0] for answer in refusals] == [ErrorCode.message_too_large] * len(bombs) + [413] * len(
        bombs
    )
    assert max(waits) < ANSWERED_WITHIN_S, f"another client waited {max(waits):.1f} s among {len(waits)}"
    with http_client(node) as client:
        assert client.offsets("honest", 0) == (0, len(waits)), "every answered produce was stored"
    # every refusal of this module came within a minute: one log line for them all, naming the topic
    log = pathlib.Path(node.directory, "n1", "node.log").read_text(encoding="utf-8", errors="replace")
    lines = [line for line in log.splitlines() if "inflate past their bound" in line]
    assert len(lines) == 1 and f"to {TOPIC}/0" in lines[0], lines


def test_the_node_bound_is_its_option_or_the_topics_max_message_bytes_when_larger(
    tmp_path: pathlib.Path,
) -> None:
    """A node started with ``--inflated-batch-max-mib 8`` refuses a batch inflating to 16 MiB, which the
    default bound (64 MiB) takes; a topic whose ``max.message.bytes`` is above the node's bound takes it:
    a batch as large uncompressed would be accepted there anyway."""
    with LocalCluster(str(tmp_path), nodes=1, serve_args=["--inflated-batch-max-mib", "8"]) as small:
        with http_client(small) as client:
            client.create_topic(TOPIC, 1, 1)
            client.create_topic("large", 1, 1, {"max.message.bytes": 32 * MiB})
        batch = bomb_batch(Compression.ZSTD, 16 * MiB, _now_ms())
        code, message = _kafka_produce(small, batch)
        assert code is ErrorCode.message_too_large and f"inflate past {8 * MiB} bytes" in message
        raw = RawKafka(small.kafka["n1"])
        try:
            answer = raw.call(0, PRODUCE_VERSION, _produce_request("large", batch))
        finally:
            raw.close()
        assert answer.responses[0].partition_responses[0].error_code is ErrorCode.none
        with http_client(small) as client:
            assert client.offsets(TOPIC, 0) == (0, 0) and client.offsets("large", 0) == (0, 1)


# what one bomb may add to the node's peak memory: the 64 MiB bound and what inflating holds besides the
# output (a few MiB: a zstd window of at most 8 MiB, a step's pieces, the batch as sent, up to 7.5 MiB);
# a zstd frame of 2 MiB window held 2 x 64 MiB before, one with a 128 MiB window (zstd's default bound)
# 64 + 128 MiB, and an output grown in the heap 134 MiB on a node that had given its heap back
PEAK_GROWTH_ONE_BOMB_MAX_BYTES = 96 * MiB
ONE_BOMB = {
    "gzip": lambda: bomb_batch(Compression.GZIP, 1024 * MiB, _now_ms()),
    "snappy": lambda: bomb_batch(Compression.SNAPPY, 160 * MiB, _now_ms()),
    "lz4": lambda: bomb_batch(Compression.LZ4, 1024 * MiB, _now_ms()),
    "zstd": lambda: bomb_batch(Compression.ZSTD, 1024 * MiB, _now_ms()),
    "zstd-streamed": lambda: streamed_zstd_bomb(256 * MiB, 21, _now_ms()),
    "zstd-wide-window": lambda: streamed_zstd_bomb(256 * MiB, 27, _now_ms()),
}


@pytest.mark.parametrize("bomb", ONE_BOMB, ids=list(ONE_BOMB))
def test_one_bomb_costs_the_node_no_more_memory_than_the_bound(node: LocalCluster, bomb: str) -> None:
    """The node's peak resident memory (VmHWM, reset before) while it refuses one bomb of each codec,
    sent whole through the Kafka door: the output inflating may allocate is the bound, not a multiple,
    whether or not the node gave its free heap back before."""
    pid = node.pids["n1"]
    batch = ONE_BOMB[bomb]()
    resident_before = _reset_peak(pid)
    code, message = _kafka_produce(node, batch)
    growth = _memory_bytes(pid, "VmHWM") - resident_before
    assert code is ErrorCode.message_too_large, message
    assert growth < PEAK_GROWTH_ONE_BOMB_MAX_BYTES, f"the node's peak memory grew by {growth / MiB:.0f} MiB"


def test_the_first_bomb_after_a_start_costs_the_bound_too(tmp_path: pathlib.Path) -> None:
    """A node that never inflated (its heap as cold as after a give-back): one gzip bomb grows it by
    the bound and what inflating holds besides, not by the heap a bytearray grown to 64 MiB leaves."""
    with LocalCluster(str(tmp_path), nodes=1) as cold:
        with http_client(cold) as client:
            client.create_topic(TOPIC, 1, 1, {"max.message.bytes": MAX_MESSAGE_BYTES})
        pid = cold.pids["n1"]
        batch = ONE_BOMB["gzip"]()
        resident_before = _reset_peak(pid)
        code, message = _kafka_produce(cold, batch)
        growth = _memory_bytes(pid, "VmHWM") - resident_before
    assert code is ErrorCode.message_too_large, message
    assert growth < PEAK_GROWTH_ONE_BOMB_MAX_BYTES, f"the node's peak memory grew by {growth / MiB:.0f} MiB"
