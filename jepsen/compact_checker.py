"""The checks of a compacted log (the compaction workload: every send names its record key,
jepsen/compact_workload.py). Records overwritten by a later one of their key may be gone, so every
complete final read must end each record key with its last acknowledged write or a later one of unknown
outcome (``final-value``), and a poll during the run may pass over an acknowledged record only when a
later record of its key is known (``lost-latest``). ``jepsen.checker.check`` runs them in place of the
queue's lost-write, unseen, poll-skip and dense-offset checks."""

from __future__ import annotations

import bisect
import collections
import dataclasses
from collections.abc import Iterable, Sequence
from typing import Final

from jepsen.analysis import Analysis
from jepsen.history import JsonDict, Operation, Process
from jepsen.results import LISTED_MAX, Anomaly, Value, freeze, key_of, records_of

FINAL_VALUE: Final = "final-value"
LOST_LATEST: Final = "lost-latest"


def is_compacted(analysis: Analysis) -> bool:
    return any("record_key" in op.invoke.raw for op in analysis.sends)


@dataclasses.dataclass(frozen=True)
class _Write:
    """An acknowledged send of a compacted topic: `value` for `record_key` at `offset` of `key`."""

    key: str
    record_key: str
    offset: int
    value: Value
    op: Operation

    def to_json(self) -> JsonDict:
        return {"offset": self.offset, "value": self.value, "tombstone": self.op.invoke.get("tombstone")}


class Compacted:
    """What the compaction checks share: each value's record key (from its sends), the acknowledged
    writes of each (key, record key) in offset order, the highest offset at which a record of each is
    known to exist (acknowledged or read), and the final read passes."""

    def __init__(self, analysis: Analysis) -> None:
        self.analysis = analysis
        self.record_key: dict[Value, str] = {}
        for value, attempts in analysis.attempts.items():
            named = attempts[0].invoke.get("record_key")
            if isinstance(named, str):
                self.record_key[value] = named
        self.acked: dict[tuple[str, str], list[_Write]] = collections.defaultdict(list)
        self.latest_known: dict[tuple[str, str], int] = {}
        for op in analysis.acked:
            value = freeze(op.invoke.get("value"))
            record_key = self.record_key.get(value)
            if record_key is None:
                continue
            write = _Write(key_of(op), record_key, int(op.result("offset")), value, op)
            self.acked[(write.key, record_key)].append(write)
            self._known(write.key, record_key, write.offset)
        for writes in self.acked.values():
            writes.sort(key=lambda w: w.offset)
        for op in analysis.polls:
            for offset, value in records_of(op):
                if value in self.record_key:
                    self._known(key_of(op), self.record_key[value], offset)
        self.passes = _final_passes(analysis.polls)

    def _known(self, key: str, record_key: str, offset: int) -> None:
        self.latest_known[(key, record_key)] = max(offset, self.latest_known.get((key, record_key), -1))

    def complete_keys(self) -> set[str]:
        return {key for (_, key), polls in self.passes.items() if _pass_end(polls) is not None}

    def unknown_outcome(self, key: str, record_key: str) -> list[Value]:
        """Values of sends of the record key with no acknowledgement and no definite failure."""
        return sorted(
            (
                value
                for value, attempts in self.analysis.attempts.items()
                if self.record_key.get(value) == record_key
                and all(key_of(a) == key for a in attempts)
                and not any(a.type in ("ok", "fail") for a in attempts)
            ),
            key=repr,
        )


def _final_passes(polls: Sequence[Operation]) -> dict[tuple[Process, str], list[Operation]]:
    """The ok final polls of each reader of each key: one pass of the log from its start, in order."""
    passes: dict[tuple[Process, str], list[Operation]] = collections.defaultdict(list)
    for op in polls:
        if op.invoke.get("final") is True:
            passes[(op.process, key_of(op))].append(op)
    return passes


def _pass_end(polls: Sequence[Operation]) -> Operation | None:
    """The poll where a pass found the log's end: an empty one past every record it returned, when the
    pass began at offset 0; None for a pass that did not complete."""
    if not polls or int(polls[0].invoke.get("offset")) != 0:
        return None
    last = max((offset for op in polls for offset, _ in records_of(op)), default=-1)
    ends = [op for op in polls if not records_of(op) and int(op.invoke.get("offset")) > last]
    return ends[-1] if ends else None


def final_values(compacted: Compacted) -> Iterable[Anomaly]:
    """Each complete final pass ends every record key with its last acknowledged write (acknowledged
    before the pass began), or with a record at a later offset: a write of unknown outcome (one with an
    acknowledgement at another offset, or a failed one, is inconsistent-offsets' or G1a's business)."""
    for (process, key), polls in sorted(compacted.passes.items(), key=lambda item: repr(item[0])):
        end = _pass_end(polls)
        if end is None:
            continue
        began = polls[0].invoke_index
        latest: dict[str, tuple[int, Value, Operation]] = {}
        for op in polls:
            for offset, value in records_of(op):
                record_key = compacted.record_key.get(value)
                if record_key is not None and offset > latest.get(record_key, (-1, 0, op))[0]:
                    latest[record_key] = (offset, value, op)
        record_keys = {rk for (k, rk) in compacted.acked if k == key} | set(latest)
        for record_key in sorted(record_keys):
            before = [w for w in compacted.acked.get((key, record_key), []) if _acked_before(w.op, began)]
            last = before[-1] if before else None
            read = latest.get(record_key)
            if last is None or (read is not None and _at_or_after(read[0], read[1], last)):
                continue
            yield Anomaly(
                FINAL_VALUE,
                {
                    "key": key,
                    "record_key": record_key,
                    "final_read_by": process,
                    "read": None if read is None else {"offset": read[0], "value": read[1]},
                    "last_acknowledged": last.to_json(),
                    "unknown_outcome_writes": compacted.unknown_outcome(key, record_key)[:LISTED_MAX],
                },
                [last.op, *([read[2]] if read is not None else []), end],
            )


def _at_or_after(offset: int, value: Value, write: _Write) -> bool:
    """A record read at ``offset`` is ``write`` itself or a later one."""
    return offset > write.offset or (offset == write.offset and value == write.value)


def _acked_before(op: Operation, index: int) -> bool:
    return op.complete_index is not None and op.complete_index < index


def lost_latest(compacted: Compacted) -> Iterable[Anomaly]:
    """A poll during the run that passes over an acknowledged record (its offset between the poll's
    start and its last record) without returning it: compaction removed it, so a later record of its
    key must exist. Judged only for keys a complete final read covered, which would have returned such a
    later record (or one later still)."""
    complete = compacted.complete_keys()
    offsets: dict[str, list[int]] = {}
    writes: dict[str, list[_Write]] = {}
    for (key, _), each in compacted.acked.items():
        writes.setdefault(key, []).extend(each)
    for key in writes:
        writes[key].sort(key=lambda w: w.offset)
        offsets[key] = [w.offset for w in writes[key]]
    for op in compacted.analysis.polls:
        key = key_of(op)
        records = records_of(op)
        if op.invoke.get("final") is True or not records or key not in complete or key not in offsets:
            continue
        start, returned = int(op.invoke.get("offset")), dict(records)
        low = bisect.bisect_left(offsets[key], start)
        high = bisect.bisect_right(offsets[key], max(offset for offset, _ in records))
        for write in writes[key][low:high]:
            if returned.get(write.offset) == write.value:
                continue
            if compacted.latest_known.get((key, write.record_key), -1) > write.offset:
                continue
            yield Anomaly(
                LOST_LATEST,
                {
                    "key": key,
                    "record_key": write.record_key,
                    "poll_offset": start,
                    "missing": write.to_json(),
                    "returned_at_offset": returned.get(write.offset),
                },
                [write.op, op],
            )
