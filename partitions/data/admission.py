"""What a produced batch must meet before its partition's leader proposes it, by the topic's configs (pure).

The rules ``DataPlane.produce_batch`` applies, whichever door the batch came through, apart from where
they run: the data plane runs them on the event loop or on a reader thread, by the batch's size, and
checks the size again once the batch is recompressed or stamped. The checks of the batch's bytes
themselves (format, CRC, timestamps, inflated size) are ``raftlog.storage.batch.check_producer_batch``;
the producer's sequence is the replicas' rule (``partitions.replicas.dedup``), applied when the batch is
committed.
"""

from __future__ import annotations

from collections.abc import Iterable

from partitions.errors import InternalTopicWrite
from partitions.names import is_internal
from raftlog.storage.batch import Compression, Record
from raftlog.storage.config import LogConfig
from raftlog.storage.errors import InvalidRecord, RecordBatchTooLarge, RecordTooLarge

TIMESTAMP_AHEAD_MAX_MS = 3_600_000  # how far a producer's record timestamps may run ahead of the clock
NO_TIMESTAMP_LIMIT = 2**63 - 1
_KEYLESS = "compacted topic cannot accept a record without a key ({topic}-{partition})"
# the topic's compression.type -> the codec the leader stores batches with (None: as the producer sent it)
STORED_CODEC: dict[str, Compression | None] = {
    "producer": None,
    "uncompressed": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}


def check_topic(topic: str) -> None:
    """InternalTopicWrite for a topic the cluster keeps for itself: its partitions hold the groups',
    transactions' or schemas' commands, which their own services write, never a producer's records
    (Kafka refuses a client's append to an internal topic alike)."""
    if is_internal(topic):
        raise InternalTopicWrite(topic)


def check_size(batch_bytes: int, config: LogConfig) -> None:
    """A batch as sent, and again as it will be stored (recompressed or stamped): RecordTooLarge when
    larger than ``max.message.bytes`` (as Kafka measures it), RecordBatchTooLarge when no segment could
    hold it (Kafka's check at append)."""
    if batch_bytes > config.max_message_bytes:
        raise RecordTooLarge(batch_bytes, config.max_message_bytes)
    if batch_bytes > config.segment_bytes:
        raise RecordBatchTooLarge(batch_bytes, config.segment_bytes)


def appends_time(config: LogConfig) -> bool:
    """Whether the leader stamps each batch with its own clock (``message.timestamp.type=LogAppendTime``)."""
    return config.timestamp_type == "LogAppendTime"


def latest_timestamp_ms(config: LogConfig, now_ms: int) -> int:
    """The latest record timestamp a batch may carry: any when the leader stamps its own, else an hour
    ahead of the leader's clock at most."""
    return NO_TIMESTAMP_LIMIT if appends_time(config) else now_ms + TIMESTAMP_AHEAD_MAX_MS


def inflated_bound(config: LogConfig, inflated_bytes_max: int) -> int:
    """The most a compressed batch's records may inflate to: the node's bound or the topic's
    ``max.message.bytes``, whichever is larger."""
    return max(inflated_bytes_max, config.max_message_bytes)


def check_keys(config: LogConfig, records: Iterable[Record], topic: str, partition: int) -> None:
    """A compacted topic keeps each key's latest record: a record without a key is refused, as Kafka
    refuses it (INVALID_RECORD)."""
    if config.compacted and any(record.key is None for record in records):
        raise InvalidRecord(_KEYLESS.format(topic=topic, partition=partition))
