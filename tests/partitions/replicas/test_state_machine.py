"""The partition state machine: dense offsets, idempotent produce, consumer offsets, replay and snapshots."""

from __future__ import annotations

import pathlib
import random

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partitions import commands
from partitions.errors import InvalidCommand, OutOfOrderSequence, ProducerFenced, SequenceTooOld
from partitions.replicas.dedup import WINDOW, Appended, ProducerTable
from partitions.replicas.state_machine import (
    OffsetCommitted,
    PartitionStateMachine,
    Produced,
    Refused,
)
from raftlog.errors import InvariantViolation
from raftlog.storage import Log, LogConfig, ProducerRecord
from raftlog.storage import batch as batch_codec
from raftlog.storage.batch import encode_batch

CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=128)


def produce(
    values: list[bytes], producer_id: int | None = None, sequence: int | None = None, epoch: int | None = None
) -> bytes:
    batch = encode_batch(
        0, [ProducerRecord(v) for v in values], 0, 1_000, producer_id, sequence, producer_epoch=epoch
    )
    return commands.encode(commands.Produce(batch))


def open_machine(path: pathlib.Path) -> PartitionStateMachine:
    return PartitionStateMachine(Log.open(str(path), CONFIG))


def values_in(machine: PartitionStateMachine) -> list[bytes]:
    return [r.value for r in machine.log.read(0, 1 << 30, machine.high_watermark)]


def test_produce_assigns_dense_offsets_in_commit_order(tmp_path: pathlib.Path) -> None:
    machine = open_machine(tmp_path)
    assert machine.apply(1, 1, produce([b"a", b"b"])) == Produced(0, 2)
    assert machine.apply(2, 1, commands.encode(commands.Barrier())) is None
    assert machine.apply(3, 2, produce([b"c"])) == Produced(2, 3)
    assert machine.high_watermark == 3
    assert values_in(machine) == [b"a", b"b", b"c"]
    assert [b.header.term for b in machine.log.read_batches(0, 1 << 20)] == [1, 2]


def test_retried_producer_sequence_appends_once_and_returns_the_original_offsets(
    tmp_path: pathlib.Path,
) -> None:
    machine = open_machine(tmp_path)
    first = machine.apply(1, 1, produce([b"a"], producer_id=7, sequence=0))
    machine.apply(2, 1, produce([b"x"]))
    retry = machine.apply(3, 1, produce([b"a"], producer_id=7, sequence=0))
    assert first == Produced(0, 1)
    assert retry == Produced(0, 1, duplicate=True)
    assert values_in(machine) == [b"a", b"x"]


def test_a_sequence_older_than_the_window_is_refused_not_appended(tmp_path: pathlib.Path) -> None:
    machine = open_machine(tmp_path)
    for sequence in range(WINDOW + 1):
        machine.apply(sequence + 1, 1, produce([b"v%d" % sequence], producer_id=1, sequence=sequence))
    result = machine.apply(99, 1, produce([b"v0"], producer_id=1, sequence=0))
    assert isinstance(result, Refused) and isinstance(result.error, SequenceTooOld)
    assert machine.high_watermark == WINDOW + 1


def test_a_new_producer_epoch_starts_at_zero_and_fences_the_old_one(tmp_path: pathlib.Path) -> None:
    """librdkafka bumps its epoch itself after a request whose outcome it cannot know (KIP-360) and starts
    its sequences again at 0: that is fresh, not too old; the old epoch is then a zombie's."""
    machine = open_machine(tmp_path)
    for sequence in range(3):
        machine.apply(sequence + 1, 1, produce([b"e0-%d" % sequence], producer_id=9, sequence=sequence))
    assert machine.apply(4, 1, produce([b"e1-0"], producer_id=9, sequence=0, epoch=1)) == Produced(3, 4)
    assert machine.apply(5, 1, produce([b"e1-0"], producer_id=9, sequence=0, epoch=1)) == Produced(
        3, 4, duplicate=True
    )
    zombie = machine.apply(6, 1, produce([b"e0-3"], producer_id=9, sequence=3, epoch=0))
    assert isinstance(zombie, Refused) and isinstance(zombie.error, ProducerFenced)
    skipped = machine.apply(7, 1, produce([b"e2-5"], producer_id=9, sequence=5, epoch=2))
    assert isinstance(skipped, Refused) and isinstance(skipped.error, OutOfOrderSequence)
    assert values_in(machine) == [b"e0-0", b"e0-1", b"e0-2", b"e1-0"]
    snapshot = machine.producers.to_rows()
    fenced = ProducerTable.from_rows(snapshot).decide(9, 0, 4)
    assert isinstance(fenced, ProducerFenced) and fenced.current_epoch == 1


def test_a_snapshot_table_without_epochs_reads_as_epoch_0() -> None:
    table = ProducerTable.from_rows([[5, 0, 0, 1], [5, 1, 1, 3]])
    assert table.to_rows() == [[5, 0, 0, 0, 1], [5, 0, 1, 1, 3]]
    assert table.decide(5, 0, 1) == Appended(1, 1, 3)


def test_malformed_commands_are_refused_deterministically(tmp_path: pathlib.Path) -> None:
    machine = open_machine(tmp_path)
    bad = machine.apply(1, 1, b"\x93\x01\x02\x03")
    assert isinstance(bad, Refused) and isinstance(bad.error, InvalidCommand)
    truncated = encode_batch(0, [ProducerRecord(b"v")], 0, 1)[:-1]  # its header frames one more byte
    refused = machine.apply(2, 1, commands.encode(commands.Produce(truncated)))
    assert isinstance(refused, Refused)
    assert machine.high_watermark == 0 and machine.log.end_offset == 0


def test_a_committed_batch_is_written_as_committed_its_crc_checked_where_it_entered(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Apply trusts a committed entry (checked once where it entered, carried under the Raft frame's
    authentication and the journal's CRC): it computes no CRC, and the log holds the batch's bytes with
    the offset and term stamped, the records as they came."""
    crcs: list[int] = []
    real = batch_codec.crc_ok
    monkeypatch.setattr(batch_codec, "crc_ok", lambda *a: crcs.append(1) or real(*a))
    machine = open_machine(tmp_path)
    sent = encode_batch(0, [ProducerRecord(b"v" * 1000), ProducerRecord(b"w")], 0, 1)
    assert machine.apply(1, 7, commands.encode(commands.Produce(sent))) == Produced(0, 2)
    assert crcs == []
    stored = machine.log.read_batches(0, max_bytes=1 << 20)
    assert [b.data for b in stored] == [batch_codec.rebase(sent, 0, 7)]  # read back CRC-checked


def test_consumer_offsets_never_move_backwards_unless_reset(tmp_path: pathlib.Path) -> None:
    machine = open_machine(tmp_path)
    commit = commands.CommitOffset
    assert machine.apply(1, 1, commands.encode(commit("g", 10))) == OffsetCommitted("g", 10)
    assert machine.apply(2, 1, commands.encode(commit("g", 4))) == OffsetCommitted("g", 10)
    assert machine.apply(3, 1, commands.encode(commit("g", 4, reset=True))) == OffsetCommitted("g", 4)


def test_committed_offsets_are_published_whole_never_changed_in_place(tmp_path: pathlib.Path) -> None:
    """The event loop reads ``consumer_offsets`` while the driver thread applies commits: a mapping read
    before a commit stays as it was, and none can be written through."""
    machine = open_machine(tmp_path)
    machine.apply(1, 1, commands.encode(commands.CommitOffset("g", 10)))
    held = machine.consumer_offsets
    machine.apply(2, 1, commands.encode(commands.CommitOffset("g", 20)))
    machine.apply(3, 1, commands.encode(commands.CommitOffset("h", 1)))
    assert dict(held) == {"g": 10} and dict(machine.consumer_offsets) == {"g": 20, "h": 1}
    with pytest.raises(TypeError):
        machine.consumer_offsets["g"] = 0  # type: ignore[index]


def test_apply_out_of_order_is_a_loud_bug(tmp_path: pathlib.Path) -> None:
    machine = open_machine(tmp_path)
    machine.apply(5, 1, produce([b"a"]))
    with pytest.raises(InvariantViolation):
        machine.apply(5, 1, produce([b"a"]))


def test_replay_after_restart_skips_batches_already_on_disk(tmp_path: pathlib.Path) -> None:
    entries = [(i + 1, 1 + i // 4, produce([b"r%d" % i] * (1 + i % 3), 3, i)) for i in range(30)]
    machine = open_machine(tmp_path)
    snapshot_at = 12
    snapshot = b""
    for index, term, command in entries:
        machine.apply(index, term, command)
        if index == snapshot_at:
            snapshot = machine.snapshot()
    expected = values_in(machine)
    size = machine.log.size_bytes
    machine.log.close()

    # restart: restore the snapshot, replay the journal after it
    again = open_machine(tmp_path)
    again.restore(snapshot)
    for index, term, command in entries[snapshot_at:]:
        again.apply(index, term, command)
    assert values_in(again) == expected
    assert again.log.size_bytes == size, "a replayed entry must not be written twice"
    # and with no snapshot at all, the whole journal replays over the full log
    again.log.close()
    fresh = open_machine(tmp_path)
    for index, term, command in entries:
        fresh.apply(index, term, command)
    assert values_in(fresh) == expected and fresh.log.size_bytes == size
    # the producer table came back too: a retry of the last sequence is still a duplicate
    retry = fresh.apply(100, 9, entries[-1][2])
    assert isinstance(retry, Produced) and retry.duplicate


def test_replay_that_differs_from_disk_stops_loudly(tmp_path: pathlib.Path) -> None:
    machine = open_machine(tmp_path)
    machine.apply(1, 1, produce([b"a"]))
    machine.log.close()
    again = open_machine(tmp_path)
    with pytest.raises(InvariantViolation):
        again.apply(1, 1, produce([b"not a"]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(0, 12)), max_size=60))
def test_producer_table_matches_a_brute_force_model(ops: list[tuple[int, int, int]]) -> None:
    table = ProducerTable(producers_max=3)
    history: dict[int, tuple[int, list[int]]] = {}  # producer -> (newest epoch, its sequences)
    order: list[int] = []
    offset = 0
    for producer_id, epoch, sequence in ops:
        decision = table.decide(producer_id, epoch, sequence)
        known_epoch, seen = history.get(producer_id, (-1, []))
        if producer_id in history and epoch < known_epoch:
            assert isinstance(decision, ProducerFenced) and decision.current_epoch == known_epoch
            continue
        if producer_id in history and epoch > known_epoch and sequence != 0:
            assert isinstance(decision, OutOfOrderSequence) and (decision.epoch, decision.sequence) == (
                epoch,
                sequence,
            )
            continue
        if epoch > known_epoch:
            seen = []
        if sequence in seen[-WINDOW:]:
            assert isinstance(decision, Appended) and decision.sequence == sequence
        elif not seen or sequence > seen[-1]:
            assert decision is None
            table.record(producer_id, epoch, sequence, offset, offset + 1)
            offset += 1
            history[producer_id] = (epoch, [*seen, sequence])
            if producer_id in order:
                order.remove(producer_id)
            order.append(producer_id)
            for evicted in order[:-3]:
                history.pop(evicted, None)
            order = order[-3:]
        else:
            assert isinstance(decision, SequenceTooOld) and decision.oldest_known == seen[-WINDOW:][0]
    restored = ProducerTable.from_rows(table.to_rows(), producers_max=3)
    assert restored.to_rows() == table.to_rows()


def test_commands_round_trip_and_reject_garbage() -> None:
    rng = random.Random(4)
    for command in (commands.Produce(b"xyz"), commands.CommitOffset("g", 3, True), commands.Barrier()):
        assert commands.decode(commands.encode(command)) == command
    for _ in range(200):
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(12)))
        try:
            decoded = commands.decode(junk)
        except InvalidCommand:
            continue
        assert commands.encode(decoded) == junk, f"{junk!r} decoded to {decoded!r} but is not its encoding"


@pytest.mark.parametrize("size", [0, 1, 255, 256, 65_535, 65_536, 1 << 20])
def test_a_produce_command_encodes_to_the_bytes_msgpack_would_give(size: int) -> None:
    batch = bytes(range(256)) * (size // 256) + bytes(size % 256)
    encoded = commands.encode(commands.Produce(batch))
    assert encoded == msgpack.packb([commands.VERSION, 1, batch], use_bin_type=True)
    assert b"".join(commands.encode_parts(commands.Produce(batch))) == encoded  # what a proposal joins
    assert commands.decode(encoded) == commands.Produce(batch)
