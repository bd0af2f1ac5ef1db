"""Compaction: the leader snapshots the state machine's small snapshot, drops journal entries before it,
and brings a replica that missed those entries up to date by installing the snapshot (StateMachine.restore)
and then replicating the rest."""

from __future__ import annotations

from pathlib import Path

from sim_cluster import F, G, L, PatchedSimReplica, Script

from raftlog.consensus.file_journal import FileJournal
from raftlog.consensus.snapshot import decode_snapshot


def test_lagging_replica_catches_up_through_a_snapshot(tmp_path: Path) -> None:
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
    for sequence in range(1, 41):
        leader.propose(sequence, None)
    script.tick(L)
    script.settle([L, F])  # G is partitioned away
    script.catch_up(L, [F])
    script.network.links[(L, G)].clear()
    script.tick(L)  # compaction runs in the tick
    assert journals[L].first_index > 10, f"leader journal starts at {journals[L].first_index}"
    with open(tmp_path / "snapshot0", "rb") as file:
        snapshot = decode_snapshot("snapshot0", file.read())
    assert (
        snapshot["last"][1] == leader._SyncObj__raftLastApplied
        or snapshot["last"][1] >= journals[L].first_index
    )

    for sequence in range(41, 46):
        leader.propose(sequence, None)
    script.tick(L)
    script.catch_up(L, [F, G])  # heartbeats find G behind the journal start: snapshot, then entries
    assert script.nodes[G].applied == list(range(1, 46))
    assert script.nodes[G]._SyncObj__raftLastApplied == leader._SyncObj__raftLastApplied
    assert journals[G].first_index > 1, "G's journal should restart at the snapshot"


def test_restart_after_compaction_restores_the_snapshot_then_replays_the_journal(tmp_path: Path) -> None:
    names = (L, F, G)

    def start() -> tuple[Script, dict[str, FileJournal]]:
        journals = {
            name: FileJournal(str(tmp_path / f"j{i}"), segment_bytes_max=4096) for i, name in enumerate(names)
        }
        options = {
            name: {"snapshot_path": str(tmp_path / f"snapshot{i}"), "compaction_min_entries": 30}
            for i, name in enumerate(names)
        }
        return Script(PatchedSimReplica, dict(journals), options), journals

    script, journals = start()
    script.elect(L, [F, G])
    script.catch_up(L, [F, G])
    for sequence in range(1, 201):
        script.nodes[L].propose(sequence, None)
    script.tick(L)
    script.settle([L, F, G])
    script.catch_up(L, [F, G])
    for name in names:
        script.tick(name)  # compaction runs in the tick
        assert journals[name].first_index > 100, f"{name} journal starts at {journals[name].first_index}"
    for journal in journals.values():
        journal.close()

    restarted, _ = start()
    for name in names:
        assert restarted.nodes[name].applied == [], "nothing is applied before the first tick"
    restarted.tick(*names)  # loads the snapshot: StateMachine.restore
    for name in names:
        assert restarted.nodes[name].applied[:100] == list(range(1, 101)), name
    restarted.elect(G, [L, F])
    restarted.catch_up(G, [L, F])
    for name in names:
        assert restarted.nodes[name].applied == list(range(1, 201)), name
