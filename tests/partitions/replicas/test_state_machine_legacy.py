"""A partition's Raft journal written before the upgrade replays: its ``Produce`` entries carry batches of
format v1, which apply converts (``legacy_batch.convert``) before it checks, dedups, compares and appends
them. The entries are the committed fixture's, as the old node wrote them
(tests/fixtures/legacy-v1-datadir)."""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest

from partitions import commands
from partitions.replicas.state_machine import PartitionStateMachine, Produced
from raftlog.consensus.core_base import COMMAND_USER
from raftlog.consensus.file_journal import FileJournal
from raftlog.consensus.snapshot import decode_snapshot
from raftlog.storage import Log, ProducerRecord, legacy_batch
from raftlog.storage.batch import encode_batch
from raftlog.storage.migrate import migrate_log, plan_log

FIXTURE = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "legacy-v1-datadir"
GROUP = "orders-0.3"  # topic orders, partition 0
RETRIED_GROUP = "orders-1.3"  # partition 1: its journal keeps an idempotent request and its retry
Entry = tuple[int, int, bytes]  # index, term, the state machine's command


def _expected() -> dict:  # type: ignore[type-arg]
    return json.loads((FIXTURE / "expected.json").read_text(encoding="utf-8"))


def _journal_after_snapshot(node: pathlib.Path, group: str = GROUP) -> tuple[bytes, list[Entry]]:
    """The partition's snapshot state and the user entries its journal holds after it."""
    snapshot_path = node / "raft" / group / "snapshot"
    snapshot = decode_snapshot(str(snapshot_path), snapshot_path.read_bytes())
    last_index = int(snapshot["last"][1])
    journal = FileJournal(str(node / "raft" / group / "journal"), direct_io=False)
    try:
        entries = [
            (index, term, bytes(command[1:]))
            for command, index, term in (journal[position] for position in range(len(journal)))
            if index > last_index and command[0] == COMMAND_USER
        ]
    finally:
        journal.close()
    return snapshot["state"], entries


def _legacy_produces(entries: list[Entry]) -> list[Entry]:
    out = []
    for index, term, command in entries:
        decoded = commands.decode(command)
        if isinstance(decoded, commands.Produce) and legacy_batch.is_legacy(decoded.batch):
            out.append((index, term, command))
    return out


@pytest.fixture
def node(tmp_path: pathlib.Path) -> pathlib.Path:
    """A copy of the fixture's node directory (the journal reader may write its state file)."""
    return pathlib.Path(shutil.copytree(FIXTURE / "n1", tmp_path / "n1"))


def test_a_journal_tail_of_format_v1_replays_over_the_migrated_log(node: pathlib.Path) -> None:
    directory = str(node / "logs" / GROUP)
    migrate_log(plan_log(directory))
    state, entries = _journal_after_snapshot(node)
    assert _legacy_produces(entries), "the fixture's journal keeps produce entries after its snapshot"
    before = {p.name: p.read_bytes() for p in sorted(pathlib.Path(directory).glob("*.log"))}
    machine = PartitionStateMachine(Log.open(directory))
    machine.restore(state)
    snapshot_end = machine.high_watermark
    results = [machine.apply(index, term, command) for index, term, command in entries]
    produced = [r for r in results if isinstance(r, Produced)]
    expected = _expected()
    assert snapshot_end == expected["snapshot_high_watermarks"]["orders/0"]
    assert machine.high_watermark == expected["end_offsets"]["orders/0"] == machine.log.end_offset
    assert [r.duplicate for r in produced].count(False) >= 4 and not any(r is None for r in results)
    assert dict(machine.consumer_offsets) == {"billing": expected["committed_offsets"]["billing"]["orders/0"]}
    machine.log.flush()
    assert {p.name: p.read_bytes() for p in sorted(pathlib.Path(directory).glob("*.log"))} == before
    # the log goes on at the next dense offset with a batch of the new format
    batch = encode_batch(0, [ProducerRecord(b"after the upgrade")], 0, 1_000)
    end = machine.high_watermark
    assert machine.apply(entries[-1][0] + 1, 9, commands.encode(commands.Produce(batch))) == Produced(
        end, end + 1
    )
    machine.log.close()


def test_legacy_produces_append_converted_records_deduplicated_and_the_same_bytes_everywhere(
    node: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    _, entries = _journal_after_snapshot(node, RETRIED_GROUP)
    legacy = _legacy_produces(entries)
    logs = []
    for replica in ("a", "b"):
        machine = PartitionStateMachine(Log.open(str(tmp_path / replica)))
        results = [machine.apply(i, term, command) for i, (_, term, command) in enumerate(legacy, start=1)]
        assert all(isinstance(r, Produced) for r in results)
        batches = machine.log.read_batches(0, 1 << 30)
        logs.append([b.data for b in batches])
        machine.log.close()
    assert logs[0] == logs[1]  # every replica converts to the same bytes
    sent = []
    for _, term, command in legacy:
        decoded = commands.decode(command)
        assert isinstance(decoded, commands.Produce)
        sent.append((term, legacy_batch.decode(decoded.batch)))
    duplicates = [r.duplicate for r in results if isinstance(r, Produced)]
    stored = [b for b in Log.open(str(tmp_path / "a")).read_batches(0, 1 << 30)]
    assert (
        len(stored) == duplicates.count(False) and duplicates.count(True) == 1
    )  # the retry after the snapshot
    fresh = [
        (term, batch) for (term, batch), duplicate in zip(sent, duplicates, strict=True) if not duplicate
    ]
    for read, (term, batch) in zip(stored, fresh, strict=True):
        assert (read.header.term, read.header.producer_id, read.header.sequence) == (
            term,
            batch.producer_id,
            batch.sequence,
        )
        assert [(r.key, r.value, r.headers, r.timestamp_ms) for r in read.records()] == [
            (r.key, r.value, r.headers, r.timestamp_ms) for r in batch.records
        ]
