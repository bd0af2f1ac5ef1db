"""A state machine may answer None to ``snapshot()`` ("not now": e.g. a partition replica whose log is
still recovering records its metadata claims): the core then compacts nothing, writes no snapshot, and
compacts at a later tick once the state machine can answer."""

from __future__ import annotations

from pathlib import Path

from pysyncobj.config import FAIL_REASON
from sim_cluster import F, G, L, PatchedSimReplica, Script

from raftlog.consensus.file_journal import FileJournal
from raftlog.consensus.snapshot import decode_snapshot


def test_a_snapshot_answered_none_keeps_the_journal_until_the_state_machine_can_answer(
    tmp_path: Path,
) -> None:
    names = (L, F, G)
    journals = {name: FileJournal(str(tmp_path / f"j{i}")) for i, name in enumerate(names)}
    options = {
        name: {"snapshot_path": str(tmp_path / f"snapshot{i}"), "compaction_min_entries": 10}
        for i, name in enumerate(names)
    }
    script = Script(PatchedSimReplica, dict(journals), options)
    script.elect(L, [F, G])
    script.catch_up(L, [F, G])
    leader = script.nodes[L]
    answer = leader.machine.snapshot
    asked: list[int] = []

    def not_now() -> None:
        asked.append(leader._SyncObj__raftLastApplied)
        return None

    leader.machine.snapshot = not_now  # type: ignore[method-assign]
    for sequence in range(1, 41):
        leader.propose(sequence, None)
    script.tick(L)
    script.settle([L, F, G])
    script.catch_up(L, [F, G])
    script.tick(L)
    assert asked, "compaction was due: the state machine was asked"
    assert journals[L].first_index <= 1, "nothing compacted while the state machine said not now"
    assert not (tmp_path / "snapshot0").exists(), "no snapshot written for a None answer"
    assert leader.applied == list(range(1, 41))

    leader.machine.snapshot = answer  # type: ignore[method-assign]
    script.tick(L)
    assert journals[L].first_index > 10, f"leader journal starts at {journals[L].first_index}"
    with open(tmp_path / "snapshot0", "rb") as file:
        snapshot = decode_snapshot("snapshot0", file.read())
    assert snapshot["last"][1] == leader._SyncObj__raftLastApplied


def test_a_requested_compaction_ignores_the_settings_and_waits_out_a_not_now(tmp_path: Path) -> None:
    """``request_compaction`` (a throttled member joins next): the journal is compacted up to what is
    applied although the settings (default: 50,000 entries, 5 minutes) would not; while the state
    machine says "not now" it asks again at later ticks, and is denied past its time."""
    names = (L, F, G)
    journals = {name: FileJournal(str(tmp_path / f"j{i}")) for i, name in enumerate(names)}
    options = {name: {"snapshot_path": str(tmp_path / f"snapshot{i}")} for i, name in enumerate(names)}
    script = Script(PatchedSimReplica, dict(journals), options)
    script.elect(L, [F, G])
    script.catch_up(L, [F, G])
    leader = script.nodes[L]
    for sequence in range(1, 41):
        leader.propose(sequence, None)
    script.tick(L)
    script.settle([L, F, G])
    script.catch_up(L, [F, G])
    script.tick(L)
    assert journals[L].first_index <= 1, "the settings compact nothing"
    answer = leader.machine.snapshot
    leader.machine.snapshot = lambda: None  # type: ignore[method-assign]
    answers: list[int] = []
    leader.request_compaction(0.0, lambda _result, reason: answers.append(reason))
    script.tick(L)
    script.tick(L)
    assert answers == [FAIL_REASON.REQUEST_DENIED], "not now until its time passed"
    assert journals[L].first_index <= 1

    leader.machine.snapshot = answer  # type: ignore[method-assign]
    leader.request_compaction(60.0, lambda _result, reason: answers.append(reason))
    script.tick(L)
    assert answers[1:] == [FAIL_REASON.SUCCESS]
    applied = leader._SyncObj__raftLastApplied
    assert journals[L].first_index == applied - 1, "two entries kept"
    with open(tmp_path / "snapshot0", "rb") as file:
        assert decode_snapshot("snapshot0", file.read())["last"][1] == applied
    leader.request_compaction(60.0, lambda _result, reason: answers.append(reason))
    script.tick(L)
    assert answers[2:] == [FAIL_REASON.SUCCESS], "already compacted up to what is applied"
