"""Indexes over one history of the queue or the compaction workload, built once and shared by the checks
(``jepsen.checker``, ``jepsen.compact_checker``): every key's version order (offset -> value -> the
operations that placed it there), the send attempts of each value, and each key's final read."""

from __future__ import annotations

import bisect
import collections
import dataclasses
from collections.abc import Sequence

from jepsen.history import History, Operation
from jepsen.results import Value, freeze, key_of, records_of


@dataclasses.dataclass(frozen=True)
class Witness:
    """An operation that placed `value` at `offset` of a key: an ok send or an ok poll."""

    offset: int
    value: Value
    op: Operation


class Analysis:
    """Indexes over one history, built once and shared by the checks."""

    def __init__(self, history: History) -> None:
        self.history = history
        self.sends = [op for op in history.operations if op.f == "send"]
        self.polls = [op for op in history.operations if op.f == "poll" and op.type == "ok"]
        self.attempts: dict[Value, list[Operation]] = collections.defaultdict(list)
        for op in self.sends:
            self.attempts[freeze(op.invoke.get("value"))].append(op)
        self.acked = [op for op in self.sends if op.type == "ok"]
        # key -> offset -> value -> witnesses: the version order of every key.
        self.log: dict[str, dict[int, dict[Value, list[Witness]]]] = collections.defaultdict(
            lambda: collections.defaultdict(lambda: collections.defaultdict(list))
        )
        self.read_values: dict[str, dict[Value, list[Operation]]] = collections.defaultdict(
            lambda: collections.defaultdict(list)
        )
        self.max_read: dict[str, Witness] = {}
        for op in self.acked:
            key = key_of(op)
            witness = Witness(int(op.result("offset")), freeze(op.invoke.get("value")), op)
            self.log[key][witness.offset][witness.value].append(witness)
        for op in self.polls:
            key = key_of(op)
            for offset, value in records_of(op):
                witness = Witness(offset, value, op)
                self.log[key][offset][value].append(witness)
                self.read_values[key][value].append(op)
                best = self.max_read.get(key)
                if best is None or offset > best.offset:
                    self.max_read[key] = witness
        self.known_offsets: dict[str, list[int]] = {key: sorted(log) for key, log in self.log.items()}
        self.final_reads = final_reads_of(self.polls)
        self.retry_duplicates = 0  # values legitimately appended twice by non-idempotent retries

    def known_between(self, key: str, low: int, high: int) -> list[int]:
        """Offsets of `key` known to exist (some send or poll saw them) with low <= offset < high."""
        offsets = self.known_offsets.get(key, [])
        return offsets[bisect.bisect_left(offsets, low) : bisect.bisect_left(offsets, high)]

    def witness_ops(self, key: str, offset: int) -> list[Operation]:
        return [w.op for ws in self.log[key][offset].values() for w in ws[:1]]


@dataclasses.dataclass
class FinalRead:
    """The final read phase of one key: the ok final polls, what they returned, and where the log ended."""

    polls: list[Operation]
    records: dict[int, set[Value]]
    values: set[Value]
    start: int
    end_poll: Operation | None  # the final poll that returned nothing at the highest offset: the log's end

    def covers(self, offset: int, acked_at: int) -> bool:
        """Must this read have returned `offset`, acknowledged at history index `acked_at`?"""
        return self.end_poll is not None and self.end_poll.invoke_index > acked_at and self.start <= offset


def final_reads_of(polls: Sequence[Operation]) -> dict[str, FinalRead]:
    reads: dict[str, FinalRead] = {}
    for op in polls:
        if op.invoke.get("final") is not True:
            continue
        key = key_of(op)
        start = int(op.invoke.get("offset"))
        read = reads.setdefault(key, FinalRead([], {}, set(), start, None))
        read.polls.append(op)
        read.start = min(read.start, start)
        records = records_of(op)
        for offset, value in records:
            read.records.setdefault(offset, set()).add(value)
            read.values.add(value)
        if not records and (read.end_poll is None or start >= int(read.end_poll.invoke.get("offset"))):
            read.end_poll = op  # the furthest empty final poll: where the final read found the log's end
    return reads
