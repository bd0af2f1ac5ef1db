"""Idempotent produce: remember each producer's recent sequences and where they landed (pure)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from raftlog.errors import check

WINDOW = 5  # sequences remembered per producer, as Kafka keeps 5 batches
PRODUCERS_MAX = 10_000  # producers remembered per partition; the least recently used is forgotten


@dataclass(frozen=True, slots=True)
class Appended:
    sequence: int
    base_offset: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class Duplicate:
    """The pair was applied before: answer with the original offsets, append nothing."""

    base_offset: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class Fresh:
    """Not seen: append it."""


@dataclass(frozen=True, slots=True)
class TooOld:
    oldest_known: int


Decision = Duplicate | Fresh | TooOld


class ProducerTable:
    """Per-producer windows of the last ``WINDOW`` applied sequences. Deterministic: the same applies in
    the same order give the same table on every replica (eviction is by order of use, not by clock)."""

    def __init__(self, producers_max: int = PRODUCERS_MAX) -> None:
        check(producers_max >= 1, f"producers_max {producers_max} must be >= 1")
        self._producers_max = producers_max
        self._windows: OrderedDict[int, list[Appended]] = OrderedDict()

    def decide(self, producer_id: int, sequence: int) -> Decision:
        window = self._windows.get(producer_id)
        if not window:
            return Fresh()
        for entry in window:
            if entry.sequence == sequence:
                return Duplicate(entry.base_offset, entry.end_offset)
        if sequence > window[-1].sequence:
            return Fresh()
        return TooOld(window[0].sequence)

    def record(self, producer_id: int, sequence: int, base_offset: int, end_offset: int) -> None:
        window = self._windows.pop(producer_id, [])
        last = window[-1].sequence if window else None
        check(
            last is None or sequence > last,
            f"producer {producer_id}: sequence {sequence} recorded after {last}",
        )
        window.append(Appended(sequence, base_offset, end_offset))
        del window[:-WINDOW]
        self._windows[producer_id] = window  # most recently used last
        while len(self._windows) > self._producers_max:
            self._windows.popitem(last=False)

    def __len__(self) -> int:
        return len(self._windows)

    def to_rows(self) -> list[list[int]]:
        """Flat rows ``[producer_id, sequence, base, end]`` in use order, for snapshots."""
        return [[pid, e.sequence, e.base_offset, e.end_offset] for pid, w in self._windows.items() for e in w]

    @classmethod
    def from_rows(cls, rows: list[list[int]], producers_max: int = PRODUCERS_MAX) -> ProducerTable:
        table = cls(producers_max)
        for producer_id, sequence, base_offset, end_offset in rows:
            table.record(producer_id, sequence, base_offset, end_offset)
        return table
