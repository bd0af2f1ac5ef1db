"""A state machine may answer None to ``snapshot()`` ("not now": e.g. a partition replica whose log is
still recovering records its metadata claims): the core then compacts nothing, writes no snapshot, and
compacts at a later tick once the state machine can answer."""

from __future__ import annotations

from pathlib import Path

from sim_cluster import F, G, L, PatchedSimReplica, Script

from raftlog.consensus.journal import FileJournal
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
