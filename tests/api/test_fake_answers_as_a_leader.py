"""The HTTP tests' node (``fake_node``) answers as a real one: the same batches and calls, sent to
``FakeData`` and to a real node's data plane (one node in this process, a real Raft group and log), get the
same offsets or the same refusal, word for word, and read back the same records. The fake runs the real
data plane over real logs with Raft left out (``fake_partition``); this test is what tells when the part
it stands in for (a replica's group, its log's configs, the node's routing) answers otherwise."""

from __future__ import annotations

import pathlib
import re
import struct
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import crc32c
from fake_node import FakeCluster, FakeData

from partitions.data.service import HIGH_WATERMARK, DataService, ProduceResult
from raftlog.errors import InvariantViolation, RaftlogError
from raftlog.storage.batch import ProducerRecord, Record, TimestampType, encode_batch
from raftlog.storage.batch_reads import records_from

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "partitions"))  # in_process
from in_process import Served, configs, controller_leader, partition_leader, until

TOPICS: dict[str, dict[str, Any]] = {
    "plain": {"max.message.bytes": 300},
    "compacted": {"cleanup.policy": "compact"},
    "stamped": {"message.timestamp.type": "LogAppendTime"},
}
HOUR_MS = 3_600_000


def batch(
    values: Sequence[bytes | None] = (b"v",),
    key: bytes | None = None,
    ahead_ms: int = 0,
    producer: tuple[int, int, int] | None = None,  # (producer id, epoch, sequence)
) -> bytes:
    now = int(time.time() * 1000)
    records = [ProducerRecord(v, key, (), now + ahead_ms) for v in values]
    if producer is None:
        return encode_batch(0, records, 0, now)
    pid, epoch, sequence = producer
    return encode_batch(0, records, 0, now, pid, sequence, producer_epoch=epoch)


def transactional(produced: bytes) -> bytes:
    """The batch with its transactional bit (attribute 0x10) set and its CRC computed again (RecordBatch
    v2: the CRC at byte 17 covers everything from the attributes at byte 21)."""
    flipped = bytearray(produced)
    struct.pack_into(">h", flipped, 21, struct.unpack_from(">h", flipped, 21)[0] | 0x10)
    struct.pack_into(">I", flipped, 17, crc32c.crc32c(bytes(flipped[21:])))
    return bytes(flipped)


def corrupt(produced: bytes) -> bytes:
    return produced[:-1] + bytes([produced[-1] ^ 0xFF])


def cases() -> list[tuple[str, str, bytes]]:
    """(what, topic, batch), sent in this order to both."""
    listed = [
        ("a small batch", "plain", batch()),
        ("two records", "plain", batch([b"a", b"b"])),
        ("past max.message.bytes", "plain", batch([b"x" * 300])),
        ("two hours ahead", "plain", batch(ahead_ms=2 * HOUR_MS)),
        ("a CRC that does not match", "plain", corrupt(batch())),
        ("transactional without a transactional id", "plain", transactional(batch(producer=(5, 0, 0)))),
        ("keyless on a compacted topic", "compacted", batch()),
        ("keyed on a compacted topic", "compacted", batch(key=b"k")),
        ("two hours ahead, stamped by the leader", "stamped", batch(ahead_ms=2 * HOUR_MS)),
        ("an idempotent batch, stamped", "stamped", batch(producer=(9, 0, 0))),
        ("its retry, stamped", "stamped", batch(producer=(9, 0, 0))),
    ]
    listed += [(f"sequence {s}", "plain", batch(producer=(7, 0, s))) for s in (0, 0, 1, 2, 3, 4, 5, 6)]
    listed += [
        ("a sequence older than the window", "plain", batch(producer=(7, 0, 0))),
        ("a new epoch not from 0", "plain", batch(producer=(7, 1, 3))),
        ("a new epoch from 0", "plain", batch(producer=(7, 1, 0))),
        ("the old epoch again", "plain", batch(producer=(7, 0, 7))),
    ]
    return listed


def refusal(exc: RaftlogError) -> tuple[str, str]:
    """A refusal as compared: its class and message, a bound read off the clock (a timestamp's ``<= now +
    1 h``) shown as such, since each side reads its clock a moment apart."""
    if isinstance(exc, InvariantViolation):  # a bug: fails the test
        raise exc
    now_ms = int(time.time() * 1000)

    def unclocked(number: re.Match[str]) -> str:
        near = abs(int(number.group()) - (now_ms + HOUR_MS)) < 60_000
        return "<now + 1 h>" if near else number.group()

    return (type(exc).__name__, re.sub(r"\b\d{13}\b", unclocked, str(exc)))


async def outcome(data: DataService | FakeData, topic: str, produced: bytes) -> tuple[Any, ...]:
    try:
        result: ProduceResult = await data.produce_batch(topic, 0, produced, 30_000)
    except RaftlogError as exc:  # a refusal is the answer compared; a bug (any other error) fails the test
        return refusal(exc)
    stamped = result.log_append_time_ms is not None
    return (result.base_offset, result.end_offset, result.duplicate, stamped, result.log_start_offset)


def calls() -> list[tuple[str, Callable[[Any], Awaitable[Any]]]]:
    """(what, call of a ``DataService``), made in this order on both after the batches above."""
    t = 30_000
    return [
        ("offsets", lambda d: d.offsets("plain", 0)),
        ("producers", lambda d: d.producers("plain", 0)),
        ("the first record at or after 0", lambda d: d.offset_for_timestamp("plain", 0, 0)),
        (
            "none an hour ahead",
            lambda d: d.offset_for_timestamp("plain", 0, int(time.time() * 1000) + HOUR_MS),
        ),
        ("a first commit", lambda d: d.commit_offset("g", "plain", 0, 5, False, t)),
        ("a commit backwards", lambda d: d.commit_offset("g", "plain", 0, 3, False, t)),
        ("the same offset with its epoch", lambda d: d.commit_offset("g", "plain", 0, 5, False, t, 1)),
        ("the group's offset", lambda d: d.group_offset("g", "plain", 0, True)),
        ("a reset backwards", lambda d: d.commit_offset("g", "plain", 0, 2, True, t)),
        ("its offset and epoch", lambda d: d.group_offset("g", "plain", 0, False)),
        ("committed", lambda d: d.committed_offset("g", "plain", 0)),
        ("no group's", lambda d: d.committed_offset("h", "plain", 0)),
        ("stable committed", lambda d: d.stable_committed_offset("g", "plain", 0)),
        ("delete the offset", lambda d: d.delete_offset("g", "plain", 0, t)),
        ("delete it again", lambda d: d.delete_offset("g", "plain", 0, t)),
        ("delete records below 2", lambda d: d.delete_records("plain", 0, 2, t)),
        ("delete records below 1", lambda d: d.delete_records("plain", 0, 1, t)),
        ("delete records past the end", lambda d: d.delete_records("plain", 0, 1000, t)),
        ("offsets after the deletes", lambda d: d.offsets("plain", 0)),
        ("a fetch below the start", lambda d: d.fetch_batches("plain", 0, 0, 1 << 20, 0)),
        ("a fetch past the end", lambda d: d.fetch_batches("plain", 0, 1000, 1 << 20, 0)),
        ("delete every record", lambda d: d.delete_records("plain", 0, HIGH_WATERMARK, t)),
        ("open transaction", lambda d: d.open_transaction("plain", 0, 7)),
        ("an unknown partition", lambda d: d.offsets("plain", 1)),
        ("an unknown topic", lambda d: d.offsets("nothing", 0)),
    ]


async def answer(call: Awaitable[Any]) -> Any:
    try:
        return await call
    except RaftlogError as exc:  # a refusal is the answer compared; a bug (any other error) fails the test
        return refusal(exc)


async def stored(data: DataService | FakeData, topic: str) -> list[tuple[Any, ...]]:
    """The partition's records as a fetch from offset 0 reads them; a leader's stamp is its own clock's,
    so only that it is one is compared."""
    fetched = await data.fetch_batches(topic, 0, 0, 1 << 20, 0)
    return [shown(r) for r in records_from(fetched.data, 0)]


def shown(r: Record) -> tuple[Any, ...]:
    stamped = r.timestamp_type is TimestampType.LOG_APPEND_TIME
    return (r.offset, r.key, r.value, r.headers, r.timestamp_type, None if stamped else r.timestamp_ms)


async def test_the_fake_answers_every_batch_as_a_real_leader(tmp_path: pathlib.Path) -> None:
    fake = FakeData(FakeCluster(["n1"]), "n1")
    for topic, topic_configs in TOPICS.items():
        fake.cluster.add_topic(topic, 1, configs=topic_configs)
    served = Served(configs(tmp_path, 1)[0])
    await served.start()
    try:
        node = served.node
        controller = await until(lambda: controller_leader([node]), 60, "controller leader")
        for topic, topic_configs in TOPICS.items():
            await controller.topic_changes.create_topic(topic, 1, 1, topic_configs)
            await until(lambda t=topic: partition_leader([node], t), 60, f"{topic}'s leader")
        answers = []
        for what, topic, produced in cases():
            real, faked = await outcome(node.data, topic, produced), await outcome(fake, topic, produced)
            answers.append((what, real))
            assert faked == real, f"{what}: the fake answered {faked}, a real leader {real}"
        for topic in TOPICS:
            assert await stored(fake, topic) == await stored(node.data, topic), topic
        for what, call in calls():
            real, faked = await answer(call(node.data)), await answer(call(fake))
            assert faked == real, f"{what}: the fake answered {faked}, a real leader {real}"
    finally:
        await served.stop()
    kinds = {answer[0] for _, answer in answers if isinstance(answer[0], str)}
    assert kinds >= {"RecordTooLarge", "InvalidRecord", "SequenceTooOld", "OutOfOrderSequence"}, answers
    assert any(answer[2] for _, answer in answers if isinstance(answer[0], int)), "a duplicate answered"
