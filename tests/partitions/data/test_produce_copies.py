"""What a produce costs the leader, counted on a real node for both doors: its batch's CRC is computed once,
where the batch entered (``check_producer_batch``; apply trusts the committed entry), and at most three
copies of its bytes are alive at once on the leader's path from the request to the log.

The copies are counted with ``tracemalloc``: the peak of traced memory while one 4 MiB batch goes from the
request to the partition's log, in batch sizes. The request's own bytes are not counted as a copy (for
Kafka the test holds the frame; over HTTP the body arrives from a client in another process and its
chunks are counted as the arrival, not as a copy). What remains on the path today: the door's copy (kio's
decoding of the Kafka frame; the HTTP body's chunks joined) and the Raft entry, its pieces joined once. The
log is written from the entry itself, only its header stamped; a single-node cluster, so no Raft frame to
a follower is in the count (one encrypted frame per follower is, by its nature, new bytes)."""

from __future__ import annotations

import asyncio
import datetime
import gc
import io
import os
import pathlib
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from in_process import Served, configs, controller_leader, http_of, partition_leader, until
from kio.schema.produce.v9 import request as produce_request
from kio.schema.types import TopicName
from kio.serial import entity_writer
from kio.static.primitive import i16, i32, i32Timedelta

from kafka_api import wire
from raftlog.storage import ProducerRecord
from raftlog.storage import batch as batch_codec
from raftlog.storage.batch import encode_batch
from raftlog_contract import RECORD_BATCH

BATCH_BYTES = 4 << 20
COPIES_MAX = 3


def _batch() -> bytes:
    records = [ProducerRecord(os.urandom(64 << 10)) for _ in range(BATCH_BYTES // (64 << 10))]
    return encode_batch(0, records, 0, int(time.time() * 1000), None, None)


def _kafka_frame(batch: bytes) -> bytes:
    """A Produce v9 request frame without its size prefix, as the Kafka door reads it."""
    body = produce_request.ProduceRequest(
        transactional_id=None,
        acks=i16(-1),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        topic_data=(
            produce_request.TopicProduceData(
                name=TopicName("t"),
                partition_data=(produce_request.PartitionProduceData(index=i32(0), records=batch),),
            ),
        ),
    )
    cls = produce_request.ProduceRequest
    buffer = io.BytesIO()
    header = cls.__header_schema__(
        request_api_key=i16(0), request_api_version=i16(9), correlation_id=i32(1), client_id="copies"
    )
    entity_writer(cls.__header_schema__)(buffer, header)
    entity_writer(cls)(buffer, body)
    return buffer.getvalue()


async def _measured(work: Callable[[], Awaitable[object]]) -> tuple[float, int]:
    """(the peak of traced memory above where it stood, in batch sizes; CRCs computed) while ``work`` runs."""
    crcs = 0
    real = batch_codec.crc_ok

    def counted(*args: Any) -> bool:
        nonlocal crcs
        crcs += 1
        return real(*args)

    batch_codec.crc_ok = counted  # type: ignore[assignment]
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        await work()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        batch_codec.crc_ok = real  # type: ignore[assignment]
    return (peak - base) / BATCH_BYTES, crcs


@pytest.fixture
async def leader(tmp_path: pathlib.Path) -> Any:
    """One node serving its HTTP API, leading topic ``t`` (one partition, batches up to 8 MiB)."""
    served = Served(configs(tmp_path, count=1)[0])
    await served.start()
    try:
        node = served.node
        controller = await until(lambda: controller_leader([node]), what="controller leader")
        await controller.topic_changes.create_topic("t", 1, 1, {"max.message.bytes": str(8 << 20)})
        await until(lambda: partition_leader([node], "t"), what="partition leader")
        await node.data.produce_batch("t", 0, _batch(), 10_000)  # everything made once per partition
        yield served
    finally:
        await served.stop()


async def test_a_kafka_produce_is_checked_once_and_copied_at_most_three_times(leader: Served) -> None:
    frame = _kafka_frame(_batch())

    async def produce() -> object:
        request = wire.parse(frame)  # what the Kafka door does with a frame, then its produce handler
        records = request.body.topic_data[0].partition_data[0].records
        return await leader.node.data.produce_batch("t", 0, records, 10_000)

    copies, crcs = await _measured(produce)
    print(f"Kafka door: {copies:.2f} copies of the batch at the peak, {crcs} CRC pass(es)")
    assert crcs == 1
    assert copies <= COPIES_MAX


async def test_an_http_batch_produce_is_checked_once_and_copied_at_most_three_times(
    leader: Served, tmp_path: pathlib.Path
) -> None:
    path = tmp_path / "batch"
    path.write_bytes(_batch())
    url = http_of(leader.config) + "/topics/t/partitions/0"
    post = (
        "import sys, urllib.request\n"
        "data = open(sys.argv[2], 'rb').read()\n"
        "request = urllib.request.Request(sys.argv[1], data=data, headers={'Content-Type': sys.argv[3]})\n"
        "print(urllib.request.urlopen(request, timeout=30).status)\n"
    )

    async def produce() -> object:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", post, url, str(path), RECORD_BATCH, stdout=subprocess.PIPE
        )
        out, _ = await process.communicate()
        assert process.returncode == 0 and out.strip() == b"200"
        return out

    copies, crcs = await _measured(produce)
    arrival = 1  # the body's chunks as they came off the socket
    print(
        f"HTTP door: {copies - arrival:.2f} copies of the batch at the peak besides its arrival, {crcs} CRC"
    )
    assert crcs == 1
    assert copies - arrival <= COPIES_MAX
