"""Offsets: the ranges a query reads, their JSON form, and the decisions made on them (pure, no I/O).

Internally offsets are ``{(topic, partition): offset}``. Spark stores a streaming query's offsets as JSON
text and compares them as text, so the JSON form (Kafka's: ``{"topic": {"0": 42}}``) always has sorted
topics and numerically sorted partitions: the same offsets give the same text.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pyspark.sql.datasource import InputPartition

from raftlog_spark.errors import OptionError

EARLIEST = -2  # Kafka's sentinels inside an offsets JSON
LATEST = -1

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]
Timestamps = dict[TopicPartition, int]  # ms since the epoch, per partition
NoneLateEnough = Literal["error", "latest"]  # a partition with no record that late: fail, or its end


@dataclass(frozen=True, slots=True)
class Bounds:
    """What a partition holds right now: offsets ``[log_start_offset, end_offset)``."""

    log_start_offset: int
    end_offset: int


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One Spark partition: offsets ``[start, end)`` of one topic-partition. Pickled to a Python worker,
    so it holds plain values only."""

    topic: str
    partition: int
    start: int
    end: int

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise ValueError(f"{self.topic}-{self.partition}: bad offset range [{self.start}, {self.end})")

    @property
    def count(self) -> int:
        return self.end - self.start


def to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    """Kafka's JSON form with a deterministic key order (``json.dumps`` keeps insertion order)."""
    out: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = offsets[(topic, partition)]
    return out


def from_json(value: Mapping[str, Any], option: str = "offsets") -> Offsets:
    """``{"topic": {"0": 42, "1": -2}}`` (partition keys as strings or ints) to ``{(topic, 0): 42, ...}``."""
    return _per_partition(value, option, "offset", EARLIEST)


def _per_partition(value: Any, option: str, what: str, minimum: int) -> dict[TopicPartition, int]:
    if not isinstance(value, Mapping):
        raise OptionError(option, f'expected a JSON object like {{"topic": {{"0": 42}}}}, got {value!r}')
    out: dict[TopicPartition, int] = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, Mapping):
            raise OptionError(option, f"topic {topic!r}: expected an object of partition -> {what}")
        for key, number in partitions.items():
            try:
                partition = int(key)
            except (TypeError, ValueError):
                raise OptionError(option, f"topic {topic!r}: partition {key!r} is not an integer") from None
            if type(number) is not int or number < minimum or partition < 0:
                raise OptionError(option, f"{topic}-{partition}: {what} {number!r} is not >= {minimum}")
            out[(str(topic), partition)] = number
    return out


def parse_spec(text: str, option: str) -> int | Offsets:
    """``earliest`` -> EARLIEST, ``latest`` -> LATEST, or a JSON object of explicit offsets."""
    stripped = text.strip()
    if stripped.lower() == "earliest":
        return EARLIEST
    if stripped.lower() == "latest":
        return LATEST
    try:
        value = json.loads(stripped)
    except ValueError:
        raise OptionError(option, f"{text!r} is neither 'earliest', 'latest' nor JSON") from None
    return from_json(value, option)


def parse_timestamp(text: str, option: str) -> int:
    """``startingTimestamp`` / ``endingTimestamp``: one time in ms since the epoch, for every partition."""
    try:
        value = int(text.strip())
    except ValueError:
        raise OptionError(
            option, f"{text!r} is not a time in ms since the epoch, e.g. 1700000000000"
        ) from None
    if value < 0:
        raise OptionError(option, f"{value} is before 1970: a time in ms since the epoch is >= 0")
    return value


def parse_timestamps(text: str, option: str) -> Timestamps:
    """``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp``: ``{"topic": {"0": ms, ...}}``."""
    try:
        value = json.loads(text)
    except ValueError:
        raise OptionError(option, f'{text!r} is not JSON like {{"topic": {{"0": 1700000000000}}}}') from None
    return _per_partition(value, option, "timestamp (ms since the epoch)", 0)


def timestamps_for(spec: int | Timestamps, partitions: Collection[TopicPartition], option: str) -> Timestamps:
    """The timestamp each of ``partitions`` starts or ends at: one for all, or those the JSON names (each
    of which must be one of them)."""
    if isinstance(spec, int):
        return dict.fromkeys(partitions, spec)
    unknown = sorted(set(spec) - set(partitions))
    if unknown:
        names = ", ".join(f"{topic}-{partition}" for topic, partition in unknown)
        raise OptionError(option, f"{names}: no such partition")
    return dict(spec)


def at_timestamps(
    timestamps: Timestamps,
    found: Mapping[TopicPartition, int | None],
    bounds: Mapping[TopicPartition, Bounds],
    option: str,
    none_late_enough: NoneLateEnough,
) -> Offsets:
    """Offsets from record timestamps: for each partition the first record whose timestamp is at or after
    its time (``found``, Kafka's ``offsetsForTimes``); a partition with no record that late takes its
    end offset (``latest``) or fails the query naming it (``error``)."""
    out: Offsets = {}
    for tp, timestamp_ms in sorted(timestamps.items()):
        offset = found[tp]
        if offset is None and none_late_enough == "error":
            raise OptionError(
                option,
                f"no record of {tp[0]}-{tp[1]} has a timestamp at or after {timestamp_ms} (it ends at offset "
                f"{bounds[tp].end_offset}); set startingOffsetsByTimestampStrategy=latest to start such "
                "partitions at their end",
            )
        out[tp] = bounds[tp].end_offset if offset is None else offset
    return out


def resolve(spec: int | Offsets, bounds: Mapping[TopicPartition, Bounds], default: int) -> Offsets:
    """Concrete offsets for every partition in ``bounds``: a sentinel spec applies to all of them; an
    explicit spec gives some (-2/-1 allowed) and ``default`` covers the others."""
    out: Offsets = {}
    for tp, bound in bounds.items():
        wanted = spec if isinstance(spec, int) else spec.get(tp, default)
        if wanted == EARLIEST:
            out[tp] = bound.log_start_offset
        elif wanted == LATEST:
            out[tp] = bound.end_offset
        else:
            out[tp] = wanted
    return out


def ranges(start: Offsets, end: Offsets) -> list[OffsetRange]:
    """One range per partition with something to read; partitions new since ``start`` start at 0."""
    out = []
    for (topic, partition), stop in sorted(end.items()):
        first = start.get((topic, partition), 0)
        if stop > first:
            out.append(OffsetRange(topic, partition, first, stop))
    return out


def split(parts: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Kafka's ``minPartitions``: cut big ranges so that there are at least ``min_partitions`` Spark
    partitions, each range in pieces proportional to its share of all offsets. Covers every offset once."""
    total = sum(r.count for r in parts)
    if min_partitions is None or min_partitions <= len(parts) or total == 0:
        return parts
    out = []
    for r in parts:
        pieces = min(r.count, max(1, math.ceil(r.count * min_partitions / total)))
        cuts = [r.start + i * r.count // pieces for i in range(pieces + 1)]
        out += [OffsetRange(r.topic, r.partition, a, b) for a, b in itertools.pairwise(cuts)]
    return out


def rate_limit(start: Offsets, latest: Offsets, max_rows: int) -> Offsets:
    """The end offsets of a micro-batch of at most ``max_rows`` records (Kafka's maxOffsetsPerTrigger):
    each partition gets its share of ``max_rows`` in proportion to what it has waiting, rounded down, but
    at least one record when it has any, so that no partition starves."""
    if max_rows < 1:
        raise ValueError(f"max_rows {max_rows} must be >= 1")
    waiting = {tp: max(0, end - start.get(tp, 0)) for tp, end in latest.items()}
    total = sum(waiting.values())
    if total <= max_rows:
        return dict(latest)
    out: Offsets = {}
    for tp, end in latest.items():
        first = start.get(tp, 0)
        share = waiting[tp] * max_rows / total
        take = math.floor(share) if share >= 1 else math.ceil(share)
        out[tp] = end if end <= first else min(end, first + take)
    return out
