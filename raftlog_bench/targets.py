"""What ``raftlog bench perf`` drives: one interface over raftlog (HTTP), NATS JetStream and RabbitMQ
streams, so that the same load loops run unchanged against each system.

A ``Target`` knows how to reach a running cluster of its system: create the partitions (raftlog topic
partitions, or one R3 stream per partition for the peers), send a batch of records and wait until every
record is acknowledged by a quorum, send one record, and read a partition back from its start. Load loops,
timing and statistics live in ``perf_phases.py``; starting and stopping servers lives in ``perf_systems.py``
(raftlog) and ``peers.py`` (the peers). raftlog's own target, its HTTP client, is ``raftlog_target.py``:
no Kafka side reaches it (``tests/kafka_side.py``), so a change to how the bench talks to raftlog does not
make every recorded Kafka answer run again."""

from __future__ import annotations

import json
import random
from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol

from raftlog.storage.batch import Compression


def check_choice(name: str, value: str, choices: Collection[str]) -> None:
    """A target's option must be one of ``choices``: ValueError naming them otherwise."""
    if value not in choices:
        raise ValueError(f"{name} {value!r}: one of {', '.join(choices)}")


class SendFailed(Exception):
    """A request that was not acknowledged; ``key`` says how, for the error counts."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


@dataclass(frozen=True, slots=True)
class Layout:
    """Where a phase writes: ``partitions`` partitions of a topic (or streams) named from ``name``."""

    name: str
    partitions: int
    record_bytes: int
    batch_records: int


COMPRESSIONS: dict[str, Compression] = {
    "none": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}
_WORDS = (
    "GET", "POST", "PUT", "DELETE", "/api/v1/orders", "/api/v1/users", "/health", "/metrics", "200", "201",
    "204", "404", "500", "eu-west-1", "us-east-2", "checkout", "payment", "inventory", "shipping", "user_id",
    "order_id", "session", "trace", "span", "latency_ms", "status", "region", "service", "info", "error",
)  # fmt: skip


def sample_values(size: int, count: int, seed: int = 7) -> list[bytes]:
    """``count`` different log-line-like JSON records of exactly ``size`` bytes: what a compressed topic
    typically carries (field names repeat, values vary), seeded so that runs compare."""
    rng = random.Random(seed)
    values = []
    for i in range(count):
        line = json.dumps(
            {
                "ts": 1_700_000_000_000 + i * 17 + rng.randrange(1000),
                "level": rng.choice(("info", "warn", "error", "debug")),
                "service": rng.choice(_WORDS),
                "request_id": f"{rng.getrandbits(64):016x}",
                "msg": " ".join(rng.choice(_WORDS) for _ in range(size // 6)),
            }
        ).encode()
        values.append(line[:size].ljust(size, b" "))
    return values


class Target(Protocol):
    """A running cluster of one system, reached from this process."""

    system: str

    async def connect(self) -> None: ...

    async def create(self, layout: Layout) -> None: ...

    async def send_batch(self, worker: int, partition: int) -> int:
        """Send one batch of ``layout.batch_records`` records to ``partition`` and wait until the system
        acknowledged every one; the count acknowledged. Raises ``SendFailed``."""
        ...

    async def send_one(self, worker: int, partition: int) -> None:
        """Send one record and wait for its acknowledgement. Raises ``SendFailed``."""
        ...

    async def consume(self, partition: int, records: int, deadline: float) -> tuple[int, int]:
        """Read ``partition`` from its first record until ``records`` were read or ``deadline``
        (``time.perf_counter()``) passed; (records read, payload bytes read)."""
        ...

    async def delete(self) -> None: ...

    async def close(self) -> None: ...
