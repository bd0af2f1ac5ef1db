"""Idempotent produce: remember each producer's epoch and recent sequences and where they landed (pure).

Kafka's producer epochs: a producer that bumps its epoch (librdkafka does so itself after a request
whose outcome it cannot know, KIP-360) starts its sequences again at 0, and the table forgets the old
epoch's window; a batch of an epoch older than the producer's newest is fenced (a zombie); a new epoch
that does not start at sequence 0 is out of order. Within an epoch, sequences grow: one seen is a
duplicate, one above the newest is fresh (raftlog's HTTP producers may skip sequences), one below the
window is too old to tell apart.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from partitions.errors import OutOfOrderSequence, ProducerFenced, SequenceTooOld
from raftlog.errors import InvariantViolation, check

WINDOW = 5  # sequences remembered per producer, as Kafka keeps 5 batches
PRODUCERS_MAX = 10_000  # producers remembered per partition; the least recently used is forgotten


@dataclass(frozen=True, slots=True)
class Appended:
    """A sequence applied in the producer's epoch, and the offsets its batch took."""

    sequence: int
    base_offset: int
    end_offset: int


Refusal = SequenceTooOld | ProducerFenced | OutOfOrderSequence


@dataclass(slots=True)
class _Producer:
    epoch: int
    window: list[Appended]
    coordinator_epoch: int = -1  # of the last transaction marker applied for the producer (-1: none)


class ProducerTable:
    """Per producer, its newest epoch and the window of its last ``WINDOW`` applied sequences in that
    epoch. Deterministic: the same applies in the same order give the same table on every replica
    (eviction is by order of use, not by clock)."""

    def __init__(self, producers_max: int = PRODUCERS_MAX) -> None:
        check(producers_max >= 1, f"producers_max {producers_max} must be >= 1")
        self._producers_max = producers_max
        self._producers: OrderedDict[int, _Producer] = OrderedDict()

    def decide(self, producer_id: int, epoch: int, sequence: int) -> Appended | Refusal | None:
        """None: not seen, append it. An ``Appended``: applied before, so answer with its offsets and
        append nothing. A refusal: the error every replica answers alike, nothing appended."""
        known = self._producers.get(producer_id)
        if known is None:
            return None
        if epoch < known.epoch:
            return ProducerFenced(producer_id, epoch, known.epoch)
        if epoch > known.epoch:
            return None if sequence == 0 else OutOfOrderSequence(producer_id, epoch, sequence)
        window = known.window
        if not window:  # the epoch came with a transaction marker (``bump``): its producer starts anew
            return None
        for entry in window:
            if entry.sequence == sequence:
                return entry
        if sequence > window[-1].sequence:
            return None
        return SequenceTooOld(producer_id, sequence, window[0].sequence)

    def record(self, producer_id: int, epoch: int, sequence: int, base_offset: int, end_offset: int) -> None:
        known = self._producers.pop(producer_id, None)
        if known is None or epoch > known.epoch:
            known = _Producer(epoch, [], -1 if known is None else known.coordinator_epoch)
        last = known.window[-1].sequence if known.window else None
        if epoch != known.epoch or (last is not None and sequence <= last):  # on every idempotent apply:
            raise InvariantViolation(  # not check(), which would format its message every time
                f"producer {producer_id}: epoch {epoch} sequence {sequence} recorded after epoch "
                f"{known.epoch} sequence {last}"
            )
        known.window.append(Appended(sequence, base_offset, end_offset))
        del known.window[:-WINDOW]
        self._producers[producer_id] = known  # most recently used last
        while len(self._producers) > self._producers_max:
            self._producers.popitem(last=False)

    def epoch_of(self, producer_id: int) -> int | None:
        known = self._producers.get(producer_id)
        return None if known is None else known.epoch

    def coordinator_epoch_of(self, producer_id: int) -> int:
        known = self._producers.get(producer_id)
        return -1 if known is None else known.coordinator_epoch

    def bump(self, producer_id: int, epoch: int, coordinator_epoch: int = -1) -> None:
        """A transaction marker of ``epoch`` from a coordinator of ``coordinator_epoch`` was applied: an
        epoch newer than the producer's becomes its own (its window empty), so that batches of older epochs
        are fenced from now on (a zombie's writes after its transaction was aborted for it); the coordinator
        epoch is remembered, so that an older coordinator's marker is refused. Older epochs are the
        caller's to refuse."""
        known = self._producers.get(producer_id)
        if known is not None and epoch <= known.epoch:
            known.coordinator_epoch = max(known.coordinator_epoch, coordinator_epoch)
            self._producers.move_to_end(producer_id)
            return
        coordinator_epoch = max(coordinator_epoch, -1 if known is None else known.coordinator_epoch)
        self._producers.pop(producer_id, None)
        self._producers[producer_id] = _Producer(epoch, [], coordinator_epoch)
        while len(self._producers) > self._producers_max:
            self._producers.popitem(last=False)

    def __len__(self) -> int:
        return len(self._producers)

    def states(self) -> list[tuple[int, int, int, int]]:
        """(producer id, epoch, last sequence or -1, coordinator epoch or -1) of each producer remembered,
        in use order (Kafka's DescribeProducers); on the thread that applies."""
        return [
            (pid, p.epoch, p.window[-1].sequence if p.window else -1, p.coordinator_epoch)
            for pid, p in self._producers.items()
        ]

    def to_rows(self) -> list[list[int]]:
        """Flat rows ``[producer_id, epoch, sequence, base, end]`` in use order, for snapshots, each
        producer's led by ``[producer_id, epoch, coordinator_epoch]`` when a transaction marker was applied
        for it or its window is empty (its epoch came with a marker)."""
        rows: list[list[int]] = []
        for pid, p in self._producers.items():
            if p.coordinator_epoch >= 0 or not p.window:
                rows.append([pid, p.epoch, p.coordinator_epoch])
            rows.extend([pid, p.epoch, e.sequence, e.base_offset, e.end_offset] for e in p.window)
        return rows

    @classmethod
    def from_rows(cls, rows: list[list[int]], producers_max: int = PRODUCERS_MAX) -> ProducerTable:
        """Rows of ``to_rows``; a snapshot written before epochs were kept has rows without one, which
        were all epoch 0 (the HTTP API's producers have no other)."""
        table = cls(producers_max)
        for row in rows:
            if len(row) in (2, 3):  # a producer's marker row (``to_rows``)
                table.bump(row[0], row[1], row[2] if len(row) == 3 else -1)
                continue
            producer_id, epoch, sequence, base_offset, end_offset = (
                row if len(row) == 5 else [row[0], 0, *row[1:]]
            )
            table.record(producer_id, epoch, sequence, base_offset, end_offset)
        return table
