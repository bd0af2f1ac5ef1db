"""Share groups' records (KIP-932) as the pure state machine holds them: acquisition, locks and their
expiry, delivery counts and the delivery limit, ACCEPT / RELEASE / REJECT, and replay: no node process."""

from __future__ import annotations

import pathlib

import msgpack
import pytest

from partitions import commands
from partitions.data.share_records import reset_start
from partitions.errors import InvalidCommand
from partitions.features import RAFTLOG_VERSION, SHARE_GROUPS, SUPPORTED, Features
from partitions.groups.errors import InvalidRecordState
from partitions.groups.share.partition import (
    ACCEPT,
    ACQUIRED,
    AVAILABLE,
    GAP,
    RECORD_LOCKS_MAX,
    REJECT,
    RELEASE,
    RENEW,
    Acknowledge,
    Acquire,
    Acquired,
    DeleteState,
    ExpireLocks,
    ReleaseMember,
    ResetOffset,
    ShareApplied,
    ShareCommand,
    ShareTable,
    decode,
    encode,
)
from partitions.replicas.state_machine import PartitionStateMachine, Refused
from raftlog.storage import Log, LogConfig

LOCK_MS, LIMIT = 30_000, 3


def acquire(
    table: ShareTable,
    member: str,
    ranges: tuple[tuple[int, int], ...],
    now_ms: int = 0,
    max_records: int = 500,
    through: int | None = None,
    initial: int = 0,
) -> tuple[tuple[int, int, int], ...]:
    end = ranges[-1][1] + 1 if ranges else 0
    command = Acquire("g", member, ranges, end if through is None else through, max_records, now_ms, LOCK_MS,
                      LIMIT, initial)  # fmt: skip
    result = table.apply(encode(command))
    assert isinstance(result, Acquired)
    return result.ranges


def ack(table: ShareTable, member: str, first: int, last: int, kind: int, now_ms: int = 1) -> ShareApplied:
    result = table.apply(encode(Acknowledge("g", member, ((first, last, (kind,)),), now_ms, LIMIT)))
    assert isinstance(result, ShareApplied)
    return result


def test_a_fetch_acquires_available_records_once_and_another_member_gets_the_rest() -> None:
    table = ShareTable()
    assert acquire(table, "a", ((0, 4), (5, 9)), max_records=3) == ((0, 4, 1),)  # whole batches
    assert acquire(table, "b", ((0, 4), (5, 9))) == ((5, 9, 1),)  # 0..4 are a's
    assert acquire(table, "c", ((0, 4), (5, 9))) == ()
    state = table.groups["g"]
    assert (state.start, state.end) == (0, 10)
    assert {r.member for r in state.records.values()} == {"a", "b"}


def test_accept_and_reject_are_done_with_and_the_start_moves_past_them() -> None:
    table = ShareTable()
    acquire(table, "a", ((0, 9),))
    assert ack(table, "a", 0, 3, ACCEPT).error is None
    assert ack(table, "a", 4, 4, REJECT).error is None
    state = table.groups["g"]
    assert (state.start, state.end) == (5, 10)
    assert acquire(table, "b", ((0, 9),)) == ()  # done with, or still a's


def test_release_makes_a_record_available_again_with_its_delivery_count() -> None:
    table = ShareTable()
    acquire(table, "a", ((0, 1),))
    assert ack(table, "a", 1, 1, RELEASE).error is None
    assert table.groups["g"].records[1].state == AVAILABLE
    assert acquire(table, "b", ((0, 1),)) == ((1, 1, 2),)  # the second delivery


def test_a_member_acknowledges_only_what_it_holds_and_a_refusal_changes_nothing() -> None:
    table = ShareTable()
    acquire(table, "a", ((0, 4),))
    before = table.groups["g"]
    refused = table.apply(encode(Acknowledge("g", "b", ((0, 0, (ACCEPT,)),), 1, LIMIT)))
    assert isinstance(refused, ShareApplied) and isinstance(refused.error, InvalidRecordState)
    # one good batch and one beyond what was acquired: all or nothing
    both = ((0, 1, (ACCEPT,)), (7, 7, (ACCEPT,)))
    refused = table.apply(encode(Acknowledge("g", "a", both, 1, LIMIT)))
    assert isinstance(refused, ShareApplied) and isinstance(refused.error, InvalidRecordState)
    assert table.groups["g"] == before
    assert ack(table, "a", 0, 4, ACCEPT).error is None
    assert isinstance(ack(table, "a", 0, 0, ACCEPT).error, InvalidRecordState)  # not twice


def test_a_lock_expires_and_the_record_is_delivered_again_and_a_late_acknowledgement_is_refused() -> None:
    table = ShareTable()
    acquire(table, "a", ((0, 2),), now_ms=1_000)
    assert acquire(table, "b", ((0, 2),), now_ms=1_000 + LOCK_MS - 1) == ()  # still locked
    assert acquire(table, "b", ((0, 2),), now_ms=1_000 + LOCK_MS) == ((0, 2, 2),)
    assert isinstance(ack(table, "a", 0, 0, ACCEPT, now_ms=1_000 + LOCK_MS).error, InvalidRecordState)
    assert ack(table, "b", 0, 2, ACCEPT, now_ms=1_000 + LOCK_MS).error is None


def test_expire_locks_releases_every_lock_due() -> None:
    table = ShareTable()
    acquire(table, "a", ((0, 0),), now_ms=0)
    acquire(table, "a", ((1, 1),), now_ms=10_000)
    table.apply(encode(ExpireLocks("g", LOCK_MS, LIMIT)))
    records = table.groups["g"].records
    assert (records[0].state, records[1].state) == (AVAILABLE, ACQUIRED)
    assert table.groups["g"].next_deadline() == 10_000 + LOCK_MS


def test_at_the_delivery_limit_a_released_or_expired_record_is_archived() -> None:
    table = ShareTable()
    now = 0
    for delivery in range(1, LIMIT + 1):
        assert acquire(table, "a", ((0, 0),), now_ms=now) == ((0, 0, delivery),)
        now += LOCK_MS  # its lock expires
    assert acquire(table, "a", ((0, 0), (1, 1)), now_ms=now) == ((1, 1, 1),)  # 0 archived
    assert 0 not in table.groups["g"].records
    acquire_and_release = table.groups["g"]
    assert acquire_and_release.start == 1
    for _ in range(LIMIT - 1):
        ack(table, "a", 1, 1, RELEASE, now_ms=now)
        acquire(table, "a", ((1, 1),), now_ms=now)
    assert ack(table, "a", 1, 1, RELEASE, now_ms=now).error is None
    assert table.groups["g"].records == {} and table.groups["g"].start == 2


def test_a_member_gone_has_its_records_released() -> None:
    table = ShareTable()
    acquire(table, "a", ((0, 1),))
    acquire(table, "b", ((2, 3),))
    table.apply(encode(ReleaseMember("g", "a", LIMIT)))
    records = table.groups["g"].records
    assert [records[o].state for o in range(4)] == [AVAILABLE, AVAILABLE, ACQUIRED, ACQUIRED]


def test_control_records_and_gaps_between_batches_are_never_delivered() -> None:
    table = ShareTable()
    # data 0..4, a control record at 5, data 6..8, a control record at 9: read through 10
    assert acquire(table, "a", ((0, 4), (6, 8)), through=10) == ((0, 4, 1), (6, 8, 1))
    assert table.groups["g"].end == 10
    assert ack(table, "a", 0, 8, ACCEPT).error is not None  # 5 was never acquired: all or nothing
    table.apply(encode(Acknowledge("g", "a", ((0, 4, (ACCEPT,)), (6, 8, (ACCEPT,))), 1, LIMIT)))
    assert table.groups["g"].start == 10
    assert acquire(table, "a", (), through=11) == ()  # a control batch alone
    assert table.groups["g"].start == 11


def test_per_record_types_and_gap() -> None:
    table = ShareTable()
    acquire(table, "a", ((0, 3),))
    kinds = (ACCEPT, RELEASE, REJECT, GAP)
    assert table.apply(encode(Acknowledge("g", "a", ((0, 3, kinds),), 1, LIMIT))) == ShareApplied("g")
    assert list(table.groups["g"].records) == [1]


def test_a_new_group_starts_at_its_initial_offset_and_a_reset_moves_it() -> None:
    table = ShareTable()
    assert acquire(table, "a", ((0, 9),), initial=7) == ((7, 9, 1),)
    table.apply(encode(ResetOffset("g", 3)))
    assert (table.groups["g"].start, table.groups["g"].end, dict(table.groups["g"].records)) == (3, 3, {})
    assert table.apply(encode(DeleteState("g"))) == ShareApplied("g", existed=True)
    assert "g" not in table.groups


def test_record_limit_mode_acquires_exactly_max_records_splitting_a_batch() -> None:
    table = ShareTable()
    command = Acquire("g", "a", ((0, 4), (5, 9)), 10, 3, 0, LOCK_MS, LIMIT, 0, record_limit=True)
    assert table.apply(encode(command)) == Acquired("g", ((0, 2, 1),))
    assert table.groups["g"].end == 3  # 3..4 were not acquired: the next fetch reads from there
    assert acquire(table, "b", ((3, 4), (5, 9)), max_records=1) == ((3, 4, 1),)  # batch-optimized: whole


def test_renew_keeps_a_record_the_members_past_its_first_lock_with_the_same_delivery_count() -> None:
    table = ShareTable()
    acquire(table, "a", ((0, 1),), now_ms=0)  # locked until LOCK_MS
    renewed = table.apply(encode(Acknowledge("g", "a", ((0, 0, (RENEW,)),), LOCK_MS - 1, LIMIT, LOCK_MS)))
    assert renewed == ShareApplied("g")
    held = table.groups["g"].records[0]
    assert (held.state, held.member, held.deliveries, held.deadline_ms) == (ACQUIRED, "a", 1, 2 * LOCK_MS - 1)
    assert acquire(table, "b", ((0, 1),), now_ms=LOCK_MS + 1) == ((1, 1, 2),)  # only 1's lock expired
    assert ack(table, "a", 0, 0, ACCEPT, now_ms=LOCK_MS + 2).error is None  # past its first lock
    assert isinstance(ack(table, "b", 1, 1, RENEW, now_ms=3 * LOCK_MS).error, InvalidRecordState)  # expired


def test_commands_written_before_renew_and_record_limit_decode_with_their_defaults() -> None:
    acquire_row = msgpack.packb([1, 1, "g", "m", [[0, 4]], 5, 3, 0, LOCK_MS, LIMIT, 0])
    assert decode(acquire_row) == Acquire("g", "m", ((0, 4),), 5, 3, 0, LOCK_MS, LIMIT, 0, False)
    acknowledge_row = msgpack.packb([1, 2, "g", "m", [[0, 4, [ACCEPT]]], 9, LIMIT])
    assert decode(acknowledge_row) == Acknowledge("g", "m", ((0, 4, (ACCEPT,)),), 9, LIMIT, 0)


def test_no_more_records_are_in_flight_than_the_bound() -> None:
    table = ShareTable()
    got = acquire(table, "a", ((0, RECORD_LOCKS_MAX + 99),), max_records=10**6)
    assert got == ((0, RECORD_LOCKS_MAX - 1, 1),)


def test_replay_of_the_same_commands_gives_the_same_state_and_a_snapshot_round_trips() -> None:
    log: list[ShareCommand] = [
        Acquire("g", "a", ((0, 4),), 5, 100, 0, LOCK_MS, LIMIT, 0),
        Acquire("g", "b", ((0, 4), (5, 9)), 10, 100, 5, LOCK_MS, LIMIT, 0),
        Acknowledge("g", "a", ((0, 1, (ACCEPT,)), (2, 2, (RELEASE,))), 6, LIMIT),
        ExpireLocks("g", LOCK_MS + 5, LIMIT),
        Acquire("h", "c", ((3, 9),), 10, 2, LOCK_MS + 6, LOCK_MS, LIMIT, 3),
        ReleaseMember("h", "c", LIMIT),
    ]
    first, second = ShareTable(), ShareTable()
    results = [first.apply(encode(c)) for c in log]
    assert [second.apply(encode(c)) for c in log] == results
    assert first.groups == second.groups
    restored = ShareTable.from_rows(msgpack.unpackb(msgpack.packb(first.to_rows()), raw=False))
    assert restored.groups == first.groups


def test_commands_round_trip_and_malformed_ones_are_refused() -> None:
    for command in (
        Acquire("g", "m", ((1, 2), (4, 4)), 5, 10, 7, 30_000, 5, 0),
        Acknowledge("g", "m", ((1, 2, (1, 2)), (4, 4, (3,))), 9, 5),
        ExpireLocks("g", 3, 5),
        ReleaseMember("g", "m", 5),
        Acquire("g", "m", ((1, 9),), 10, 3, 7, 30_000, 5, 0, True),
        Acknowledge("g", "m", ((1, 2, (RENEW,)),), 9, 5, 30_000),
        ResetOffset("g", 8),
        DeleteState("g"),
    ):
        assert decode(encode(command)) == command
        wrapped = commands.decode(commands.encode(commands.ShareCommand(encode(command))))
        assert wrapped == commands.ShareCommand(encode(command))
    for bad in (b"\xc1", msgpack.packb([1, 1, "g"]), msgpack.packb([2, 6, "g"]), msgpack.packb([1, 99, "g"])):
        with pytest.raises(InvalidCommand):
            decode(bad)


def test_the_partition_applies_share_commands_keeps_them_in_its_snapshot_and_reads_an_older_one(
    tmp_path: pathlib.Path,
) -> None:
    machine = PartitionStateMachine(Log.open(str(tmp_path), LogConfig(segment_bytes=4096)))
    plain = machine.snapshot() or b""
    assert "shares" not in msgpack.unpackb(plain, raw=False)  # none held: the previous release's bytes
    entry = commands.ShareCommand(encode(Acquire("g", "a", ((0, 4),), 5, 10, 0, LOCK_MS, LIMIT, 0)))
    assert machine.apply(1, 1, commands.encode(entry)) == Acquired("g", ((0, 4, 1),))
    malformed = commands.ShareCommand(msgpack.packb([1, 99, "g"]))
    assert isinstance(machine.apply(2, 1, commands.encode(malformed)), Refused)
    again = PartitionStateMachine(machine.log)
    again.restore(machine.snapshot() or b"")
    assert again.shares.groups == machine.shares.groups
    again.restore(plain)  # a snapshot of the release before share groups
    assert dict(again.shares.groups) == {}


def test_a_cluster_formed_by_this_code_allows_share_groups() -> None:
    assert Features(lambda: dict(SUPPORTED)).allows(SHARE_GROUPS)
    assert not Features(lambda: {RAFTLOG_VERSION: 1}).allows(SHARE_GROUPS)  # a cluster still of 0.1.0


@pytest.mark.parametrize(
    ("kind", "found", "start"),
    [
        ("latest", None, 90),
        ("earliest", None, 10),
        ("by_duration", 42, 42),  # the first record at or after now minus the duration
        ("by_duration", None, 90),  # none that recent: the next record written
        ("by_duration", 95, 90),  # found past the committed log: kept within it
        ("by_duration", 3, 10),  # below the log's start (deleted since): its start
    ],
)
def test_where_a_share_group_new_to_a_partition_starts(kind: str, found: int | None, start: int) -> None:
    assert reset_start(kind, 10, 90, found) == start
