"""Idempotent produce: remember each producer's epoch and recent sequences and where they landed (pure).

Kafka's producer epochs: a producer that bumps its epoch (librdkafka does so itself after a request
whose outcome it cannot know, KIP-360) starts its sequences again at 0, and the table forgets the old
epoch's window; a batch of an epoch older than the producer's newest is fenced (a zombie); a new epoch
that does not start at sequence 0 is out of order.

Within an epoch, two rules, chosen by the batch's command (``partitions.commands.Produce.contiguous``):
- Kafka's (a Kafka producer's batch, ``contiguous``): as Kafka's ``ProducerAppendInfo.checkSequence``, a
  batch must start at the producer's last sequence + 1 (after ``SEQUENCE_MAX`` comes 0); a batch whose
  first and last sequences are those of one of its last ``WINDOW`` batches is a duplicate; anything else
  is out of order, nothing appended, so a gap is refused and the batches that fill it are taken. A
  producer the table does not know (never seen here, or forgotten as the least recently used) may start
  at any sequence, as Kafka 4 takes a producer it holds no state of; an epoch that came with a
  transaction marker starts at 0.
- raftlog's HTTP API (``contiguous`` false): a producer numbers its requests, not its records, across
  every partition of a topic, so a partition sees its sequences grow with gaps: one seen is a duplicate,
  one above the newest is fresh, one below the window is too old to tell apart.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from partitions.errors import OutOfOrderSequence, ProducerFenced, SequenceTooOld
from raftlog.errors import InvariantViolation, check

WINDOW = 5  # sequences remembered per producer, as Kafka keeps 5 batches
SEQUENCE_MAX = 2**31 - 1  # Kafka's sequences are int32: 0 follows this one


def last_sequence(sequence: int, span: int) -> int:
    """The sequence of the last record of a batch of ``span`` records from ``sequence``, wrapped past
    ``SEQUENCE_MAX`` as Kafka's ``DefaultRecordBatch.incrementSequence`` wraps it."""
    return (sequence + span - 1) % (SEQUENCE_MAX + 1)


def next_sequence(last: int) -> int:
    return 0 if last == SEQUENCE_MAX else last + 1


PRODUCERS_MAX = 10_000  # producers remembered per partition; the least recently used is forgotten


@dataclass(frozen=True, slots=True)
class Appended:
    """A sequence applied in the producer's epoch, and the offsets its batch took."""

    sequence: int
    base_offset: int
    end_offset: int

    @property
    def last_sequence(self) -> int:
        """Its batch's last record's sequence (a producer's batch holds one record per offset)."""
        return last_sequence(self.sequence, self.end_offset - self.base_offset)


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

    def decide(
        self, producer_id: int, epoch: int, sequence: int, span: int = 1, contiguous: bool = False
    ) -> Appended | Refusal | None:
        """None: not seen, append it. An ``Appended``: applied before, so answer with its offsets and
        append nothing. A refusal: the error every replica answers alike, nothing appended. ``span``: the
        batch's records; ``contiguous``: Kafka's rule (the module's docstring)."""
        known = self._producers.get(producer_id)
        if known is None:
            return None
        if epoch < known.epoch:
            return ProducerFenced(producer_id, epoch, known.epoch)
        if epoch > known.epoch:
            return None if sequence == 0 else OutOfOrderSequence(producer_id, epoch, sequence, 0)
        window = known.window
        if contiguous:
            last = last_sequence(sequence, span)
            for entry in window:
                if entry.sequence == sequence and entry.last_sequence == last:
                    return entry
            expected = next_sequence(window[-1].last_sequence) if window else 0
            return (
                None if sequence == expected else OutOfOrderSequence(producer_id, epoch, sequence, expected)
            )
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
        newest = known.window[-1] if known.window else None
        if epoch != known.epoch or (  # on every idempotent apply: not check(), which formats its message
            newest is not None
            and sequence <= newest.sequence
            and sequence != next_sequence(newest.last_sequence)  # Kafka's sequences wrap to 0
        ):
            raise InvariantViolation(
                f"producer {producer_id}: epoch {epoch} sequence {sequence} recorded after epoch "
                f"{known.epoch} sequence {None if newest is None else newest.sequence}"
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

    def states(self) -> list[tuple[int, int, int, int, int]]:
        """(producer id, epoch, its last batch's last sequence or -1, coordinator epoch or -1, its last
        batch's base offset or -1) of each producer remembered, in use order (Kafka's DescribeProducers);
        on the thread that applies."""
        return [
            (
                pid,
                p.epoch,
                p.window[-1].last_sequence if p.window else -1,
                p.coordinator_epoch,
                p.window[-1].base_offset if p.window else -1,
            )
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
