"""Kafka's sequence rule for a Kafka producer's batches (``Produce.contiguous``): a batch starts at its
producer's last sequence + 1, as Kafka's ``ProducerAppendInfo.checkSequence`` checks, while the HTTP
API's batches keep their rule (sequences per request, gaps allowed)."""

from __future__ import annotations

import pathlib

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from partitions import commands
from partitions.errors import OutOfOrderSequence, ProducerFenced, SequenceTooOld
from partitions.replicas.dedup import SEQUENCE_MAX, WINDOW, Appended, ProducerTable
from partitions.replicas.state_machine import PartitionStateMachine, Produced, Refused
from raftlog.storage import Log, LogConfig, ProducerRecord
from raftlog.storage.batch import encode_batch

CONFIG = LogConfig(segment_bytes=1 << 20, index_interval_bytes=128)


def produce(
    values: list[bytes], sequence: int, producer_id: int = 7, epoch: int = 0, contiguous: bool = True
) -> bytes:
    records = [ProducerRecord(v) for v in values]
    batch = encode_batch(0, records, 0, 1_000, producer_id, sequence, producer_epoch=epoch)
    return commands.encode(commands.Produce(batch, contiguous))


def marker(producer_id: int, epoch: int, transaction: int) -> bytes:
    return commands.encode(commands.TxnMarker(producer_id, epoch, True, 0, 1_000, True, transaction))


class Applier:
    def __init__(self, path: pathlib.Path) -> None:
        self.machine = PartitionStateMachine(Log.open(str(path), CONFIG))
        self.index = 0

    def __call__(self, command: bytes) -> object:
        self.index += 1
        return self.machine.apply(self.index, 1, command)

    def values(self) -> list[bytes]:
        return [r.value for r in self.machine.log.read(0, 1 << 30, self.machine.high_watermark)]


def test_a_gap_is_refused_and_the_batches_that_fill_it_are_appended(tmp_path: pathlib.Path) -> None:
    """The issue's sequence: 0 (two records), then 5, then 2 and 3. Kafka answers 5
    OUT_OF_ORDER_SEQUENCE_NUMBER and appends 2 and 3."""
    apply = Applier(tmp_path)
    assert apply(produce([b"s0", b"s1"], 0)) == Produced(0, 2)
    gap = apply(produce([b"s5"], 5))
    assert isinstance(gap, Refused) and isinstance(gap.error, OutOfOrderSequence)
    assert (gap.error.sequence, gap.error.expected) == (5, 2)
    assert apply(produce([b"s2"], 2)) == Produced(2, 3)
    assert apply(produce([b"s3"], 3)) == Produced(3, 4)
    assert apply.values() == [b"s0", b"s1", b"s2", b"s3"]


def test_the_http_apis_batches_keep_their_rule(tmp_path: pathlib.Path) -> None:
    """The same sequence from the HTTP API (sequences per request): 5 is fresh, 2 too old."""
    apply = Applier(tmp_path)
    assert apply(produce([b"s0", b"s1"], 0, contiguous=False)) == Produced(0, 2)
    assert apply(produce([b"s5"], 5, contiguous=False)) == Produced(2, 3)
    old = apply(produce([b"s2"], 2, contiguous=False))
    assert isinstance(old, Refused) and isinstance(old.error, SequenceTooOld)


def test_duplicates_of_the_last_batches_answer_their_offsets_and_a_changed_retry_is_out_of_order(
    tmp_path: pathlib.Path,
) -> None:
    apply = Applier(tmp_path)
    sequence = 0
    for batch in range(WINDOW + 1):
        assert apply(produce([b"a%d" % batch, b"b%d" % batch], sequence)) == Produced(
            2 * batch, 2 * batch + 2
        )
        sequence += 2
    for batch in range(1, WINDOW + 1):  # the last WINDOW batches, as Kafka keeps 5
        again = apply(produce([b"a%d" % batch, b"b%d" % batch], 2 * batch))
        assert again == Produced(2 * batch, 2 * batch + 2, duplicate=True)
    too_old = apply(produce([b"a0", b"b0"], 0))
    assert isinstance(too_old, Refused) and isinstance(too_old.error, OutOfOrderSequence)
    # same first sequence, another count: not the batch it retries (Kafka matches first and last)
    changed = apply(produce([b"a5"], 10))
    assert isinstance(changed, Refused) and isinstance(changed.error, OutOfOrderSequence)
    assert apply.machine.high_watermark == 2 * (WINDOW + 1)


def test_an_unknown_producer_starts_anywhere_and_sequences_wrap_past_int32_max(
    tmp_path: pathlib.Path,
) -> None:
    """Kafka 4 takes any sequence from a producer it holds no state of; after 2**31 - 1 comes 0."""
    apply = Applier(tmp_path)
    assert apply(produce([b"x", b"y"], SEQUENCE_MAX - 1)) == Produced(0, 2)
    assert apply(produce([b"z"], 0)) == Produced(2, 3)
    assert apply(produce([b"x", b"y"], SEQUENCE_MAX - 1)) == Produced(0, 2, duplicate=True)
    wrapped = apply(produce([b"w", b"v"], SEQUENCE_MAX))  # spans the wrap: last sequence 0
    assert isinstance(wrapped, Refused) and wrapped.error.expected == 1  # type: ignore[union-attr]
    assert apply(produce([b"w", b"v"], 1)) == Produced(3, 5)
    assert apply(produce([b"first"], 17, producer_id=8)) == Produced(5, 6)


def test_epochs_a_new_one_starts_at_zero_an_old_one_is_fenced(tmp_path: pathlib.Path) -> None:
    apply = Applier(tmp_path)
    apply(produce([b"e0"], 0))
    late = apply(produce([b"e1"], 1, epoch=1))
    assert isinstance(late, Refused) and isinstance(late.error, OutOfOrderSequence)
    assert late.error.expected == 0
    assert apply(produce([b"e1"], 0, epoch=1)) == Produced(1, 2)
    zombie = apply(produce([b"z"], 1, epoch=0))
    assert isinstance(zombie, Refused) and isinstance(zombie.error, ProducerFenced)


def test_a_transaction_marker_keeps_the_epochs_sequences_and_a_newer_epochs_starts_at_zero(
    tmp_path: pathlib.Path,
) -> None:
    """Kafka: a marker of the producer's epoch leaves its batches' sequences in place; one of a newer
    epoch (a coordinator that fenced the producer) empties them, and that epoch starts at 0."""
    apply = Applier(tmp_path)
    apply(produce([b"t0", b"t1"], 0, producer_id=3))
    apply(marker(3, 0, transaction=1))
    skipped = apply(produce([b"t2"], 0, producer_id=3))
    assert isinstance(skipped, Refused) and skipped.error.expected == 2  # type: ignore[union-attr]
    assert apply(produce([b"t2"], 2, producer_id=3)) == Produced(3, 4)
    apply(marker(3, 1, transaction=2))
    resumed = apply(produce([b"u"], 3, producer_id=3, epoch=1))
    assert isinstance(resumed, Refused) and resumed.error.expected == 0  # type: ignore[union-attr]
    assert apply(produce([b"u"], 0, producer_id=3, epoch=1)) == Produced(5, 6)


def test_a_restored_snapshot_expects_the_same_next_sequence(tmp_path: pathlib.Path) -> None:
    apply = Applier(tmp_path / "a")
    apply(produce([b"s0", b"s1", b"s2"], SEQUENCE_MAX - 1))
    snapshot = apply.machine.snapshot()
    assert snapshot is not None
    other = Applier(tmp_path / "b")
    other.machine.restore(snapshot)
    other.index = apply.index
    gap = other(produce([b"n"], 2))
    assert isinstance(gap, Refused) and gap.error.expected == 1  # type: ignore[union-attr]


def test_produce_commands_of_either_rule_round_trip_and_the_old_form_keeps_the_http_rule() -> None:
    batch = encode_batch(0, [ProducerRecord(b"v")], 0, 1_000, 7, 0)
    old = msgpack.packb([1, 1, batch], use_bin_type=True)  # every produce journaled before kind 10
    assert commands.encode(commands.Produce(batch)) == old
    decoded = commands.decode(old)
    assert isinstance(decoded, commands.Produce) and decoded.contiguous is False
    new = commands.encode(commands.Produce(batch, contiguous=True))
    assert new == msgpack.packb([1, 10, batch], use_bin_type=True)
    decoded = commands.decode(new)
    assert isinstance(decoded, commands.Produce) and decoded.contiguous is True
    assert bytes(decoded.batch) == batch and isinstance(decoded.batch, memoryview)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 1), st.integers(0, 1), st.integers(0, 9), st.integers(1, 3)), max_size=50
    )
)
def test_kafkas_rule_matches_a_model(ops: list[tuple[int, int, int, int]]) -> None:
    """Per producer: its epoch and the (first, last) sequences of its batches in that epoch; a batch is
    a duplicate of one of the last WINDOW, else appended only when it starts at the last + 1."""
    table = ProducerTable()
    model: dict[int, tuple[int, list[tuple[int, int]]]] = {}
    offset = 0
    for producer_id, epoch, sequence, span in ops:
        decision = table.decide(producer_id, epoch, sequence, span, contiguous=True)
        last = sequence + span - 1
        known = model.get(producer_id)
        if known is not None and epoch < known[0]:
            assert isinstance(decision, ProducerFenced)
            continue
        batches = known[1] if known is not None and epoch == known[0] else []
        if known is not None and (sequence, last) in batches[-WINDOW:]:
            assert isinstance(decision, Appended) and decision.sequence == sequence
            continue
        expected = batches[-1][1] + 1 if batches else 0
        if known is None or sequence == expected:
            assert decision is None
            table.record(producer_id, epoch, sequence, offset, offset + span)
            offset += span
            model[producer_id] = (epoch, [*batches, (sequence, last)])
        else:
            assert isinstance(decision, OutOfOrderSequence) and decision.expected == expected
