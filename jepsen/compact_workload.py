"""The compaction workload: keyed records overwritten and deleted on a compacted topic, through the same
doors as the queue workload (``workload.Operations`` over HTTP, ``kafka_workload.KafkaOperations``).

Each partition of the topic holds ``RECORD_KEYS`` record keys, ``k0`` .. ``k4``. A send writes one of
them, chosen at random: a new value, or (one send in ``TOMBSTONE_ONE_IN``) a tombstone that deletes the
key. The record is a pure function of the number the history names it by, so a read checks all of it:

    value = (count * 2 + tombstone) * RECORD_KEYS + key index      (count: 1, 2, ... across the run)

key ``k<value % RECORD_KEYS>`` (JSON text, as the queue's keys), value the number or null for a tombstone,
headers ``v`` (the number) and ``n`` (null), CreateTime the run's start plus ``count`` milliseconds (so
never ahead of the nodes' clocks, which would keep its segment from being cleaned). A send's invoke also
names its ``record_key`` and whether it is a ``tombstone`` (docs/jepsen-history.md), which is all the
checker knows of the encoding.

Workers send (70%) and poll (30%; one poll in four starts again from offset 0, so reads go through what
the cleaner rewrote while the run goes on). Sends retry as the queue's do. After the faults heal, the
runner reads every partition from offset 0 twice: once at once, once after every node's cleaner has caught
up (``cleaned``: each node's ``raftlog_cleaner_dirty_bytes`` is 0), and the checker requires each complete
read to end every record key with its last acknowledged write, or with a write of unknown outcome after it.

The topic (``TOPIC_CONFIGS``): ``cleanup.policy`` compact, 1 KiB segments (a dozen records each), any
dirty share cleanable (``min.cleanable.dirty.ratio`` 0.01), no compaction lag, and ``delete.retention.ms``
one day: a tombstone is never removed during a run, so a deleted key's last acknowledged tombstone must be
read like any value. The nodes run their cleaner every ``CLEANER_INTERVAL_MS``.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from typing import Any

from jepsen.workload import (
    ClientOperations,
    Http,
    RecordModel,
    Stats,
    Values,
    Worker,
    poll_once,
    send_with_retries,
)
from raftlog_contract import METRICS_PATH

RECORD_KEYS = 5
TOMBSTONE_ONE_IN = 5
REWIND_ONE_IN = 4
WRITE_SHARE = 0.7  # of the workers' steps, the sends (the others poll)
TOPIC = "c0"
PARTITIONS = 3
TOPIC_CONFIGS: dict[str, Any] = {
    "cleanup.policy": "compact",
    "internal.segment.bytes": 1024,
    "min.cleanable.dirty.ratio": 0.01,
    "min.compaction.lag.ms": 0,
    "delete.retention.ms": 24 * 3600 * 1000,
}
CLEANER_INTERVAL_MS = 200
CLEANED_TIMEOUT_S = 30.0
METRICS_TIMEOUT_S = 3.0
CLEANER_METRICS = (
    "raftlog_cleaner_dirty_bytes",
    "raftlog_cleaner_passes_total",
    "raftlog_cleaner_failures_total",
    "raftlog_cleaner_records_removed_total",
)


def value_of(count: int, key_index: int, tombstone: bool) -> int:
    if not (count >= 1 and 0 <= key_index < RECORD_KEYS):
        raise ValueError(f"count {count} (>= 1), key index {key_index} (0..{RECORD_KEYS - 1})")
    return (count * 2 + int(tombstone)) * RECORD_KEYS + key_index


def record_key_of(value: int) -> str:
    return f"k{value % RECORD_KEYS}"


def tombstone_of(value: int) -> bool:
    return (value // RECORD_KEYS) % 2 == 1


def record_of(value: int, base_ms: int) -> dict[str, Any]:
    """The record a send of ``value`` produces (JSON flavour), in a run that started at ``base_ms``."""
    return {
        "key": record_key_of(value),
        "value": None if tombstone_of(value) else value,
        "headers": [{"key": "v", "value": str(value)}, {"key": "n", "value": None}],
        "timestamp": base_ms + value // (2 * RECORD_KEYS),
    }


def number_of(row: dict[str, Any]) -> int | None:
    """The number a fetched record claims: its ``v`` header."""
    headers = row.get("headers")
    if isinstance(headers, list) and headers and isinstance(headers[0], dict):
        text = headers[0].get("value")
        if headers[0].get("key") == "v" and isinstance(text, str) and text.isdigit():
            return int(text)
    return None


def describe(value: int) -> dict[str, Any]:
    return {"record_key": record_key_of(value), "tombstone": tombstone_of(value)}


MODEL = RecordModel("compact", record_of, number_of, describe)


async def step(ops: ClientOperations, worker: Worker, values: Values, stats: Stats) -> None:
    """One operation: a send to a random record key of a random partition, or a poll."""
    key = worker.rng.choice(worker.keys)
    if worker.rng.random() < WRITE_SHARE:
        tombstone = worker.rng.randrange(TOMBSTONE_ONE_IN) == 0
        value = value_of(values.take(), worker.rng.randrange(RECORD_KEYS), tombstone)
        await send_with_retries(ops, worker, key, value, stats)
        return
    if worker.rng.randrange(REWIND_ONE_IN) == 0:
        worker.positions[key] = 0
    await poll_once(ops, worker, key, stats)


_METRIC_LINE = re.compile(r"^([a-z_]+)(?:\{[^}]*\})? ([0-9.eE+-]+|NaN)$")


def parse_metrics(text: str, names: Sequence[str] = CLEANER_METRICS) -> dict[str, float]:
    """The values of ``names`` in Prometheus text (summed over labels, should a family carry any)."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        match = _METRIC_LINE.match(line.strip())
        if match and match.group(1) in names:
            found[match.group(1)] = found.get(match.group(1), 0.0) + float(match.group(2))
    return found


async def cleaner_metrics(http: Http, urls: Sequence[str]) -> dict[str, dict[str, float] | str]:
    """Each node's cleaner metrics (by URL), or why they could not be had."""
    answers: dict[str, dict[str, float] | str] = {}
    for url in urls:
        kind, status, payload, _ = await http.call(
            "GET", METRICS_PATH, url=url, timeout_s=METRICS_TIMEOUT_S, accept="text/plain"
        )
        if kind == "ok" and isinstance(payload, str):
            answers[url] = parse_metrics(payload)
        else:
            answers[url] = f"{kind} {status}: {str(payload)[:100]}"
    return answers


async def cleaned(http: Http, urls: Sequence[str], timeout_s: float = CLEANED_TIMEOUT_S) -> dict[str, Any]:
    """Wait until every node's cleaner has nothing cleanable left (``raftlog_cleaner_dirty_bytes`` 0 on
    every node, seen twice a cleaner interval apart, so that a node just restarted has looked at its logs
    once); the last metrics seen, and whether that happened within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    streak = 0
    while True:
        metrics = await cleaner_metrics(http, urls)
        quiet = all(
            isinstance(m, dict) and m.get("raftlog_cleaner_dirty_bytes", 1.0) == 0.0 for m in metrics.values()
        )
        streak = streak + 1 if quiet else 0
        if streak >= 2 or time.monotonic() > deadline:
            return {"cleaned": streak >= 2, "metrics": metrics}
        await asyncio.sleep(2 * CLEANER_INTERVAL_MS / 1000)


def failures(metrics: dict[str, dict[str, float] | str]) -> dict[str, float]:
    """The nodes (by URL) whose cleaner counted failed passes."""
    return {
        url: m["raftlog_cleaner_failures_total"]
        for url, m in metrics.items()
        if isinstance(m, dict) and m.get("raftlog_cleaner_failures_total")
    }
