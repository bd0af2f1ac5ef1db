"""RaftCore on FileJournals (scripted SimNetwork): nothing that claims durability leaves a replica before
the disk has it.

* A follower's AppendEntries acknowledgement for index i is sent only after the tick's group-commit fsync
  made i durable.
* A vote (and a candidate's vote request) is sent only after the new term and vote are on disk.
* The leader counts itself toward the commit majority only up to its own durable index.
* The whole cluster restarts from its journals with every acknowledged write.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

from sim_cluster import F, G, L, Script, assert_restart_keeps, file_journal_script

from raftlog.consensus.file_journal import _RELEASED, FileJournal
from raftlog.consensus.journal_files import read_term_and_vote


def record_sends(script: Script, name: str, journal: FileJournal, log: list[tuple[str, Any, Any]]) -> None:
    """Record (type, message, what the disk held at that moment) for every message ``name`` sends: the
    durable index for acknowledgements, the persisted (term, voted_for) for everything else."""
    network = script.network
    original = network.enqueue

    def enqueue(source: str, destination: str, message: Any) -> bool:
        if source == name:
            if message["type"] == "next_node_idx":
                log.append(("ack", message, journal.durable_index))
            else:
                log.append((message["type"], message, read_term_and_vote(journal.directory)))
        return original(source, destination, message)

    network.enqueue = enqueue  # type: ignore[method-assign]


def test_acknowledgements_leave_only_after_fsync(tmp_path: Path) -> None:
    script, journals = file_journal_script(tmp_path)
    sent: list[tuple[str, Any, int]] = []
    record_sends(script, F, journals[F], sent)
    syncs: list[int] = []
    real_sync = journals[F].sync

    def sync() -> None:
        real_sync()
        syncs.append(journals[F].durable_index)

    journals[F].sync = sync  # type: ignore[method-assign]

    script.elect(L, [F, G])
    script.catch_up(L, [F, G])
    leader = script.nodes[L]
    for sequence in range(20):
        leader.propose(sequence, None)
    script.tick(L)
    script.settle([L, F, G])
    successful = [
        (message["next_node_idx"] - 1, durable)
        for kind, message, durable in sent
        if kind == "ack" and message["success"]
    ]
    assert max(index for index, _ in successful) == leader._SyncObj__raftLog[-1][1]
    early = [(index, durable) for index, durable in successful if index > durable]
    assert early == [], f"acknowledged before durable (index, durable index at send): {early}"
    assert syncs, "the follower never synced its journal"


def test_votes_and_vote_requests_leave_only_after_term_and_vote_are_on_disk(tmp_path: Path) -> None:
    script, journals = file_journal_script(tmp_path)
    sent_by_g: list[tuple[str, Any, int]] = []
    sent_by_l: list[tuple[str, Any, int]] = []
    record_sends(script, G, journals[G], sent_by_g)
    record_sends(script, L, journals[L], sent_by_l)
    script.elect(L, [F, G])

    vote_states = [on_disk for kind, _, on_disk in sent_by_g if kind == "response_vote"]
    assert vote_states == [(1, L)], f"(term, voted_for) on G's disk when its vote left: {vote_states}"
    request_states = [on_disk for kind, _, on_disk in sent_by_l if kind == "request_vote"]
    assert request_states == [(1, L), (1, L)], f"L's disk state when its vote requests left: {request_states}"


def test_leader_counts_only_its_durable_entries(tmp_path: Path) -> None:
    script, journals = file_journal_script(tmp_path)
    script.elect(L, [F, G])
    script.catch_up(L, [F, G])
    leader = script.nodes[L]
    committed = leader._SyncObj__raftCommitIndex
    stalled = {"on": True}
    real_sync = journals[L].sync

    def sync() -> None:
        if not stalled["on"]:
            real_sync()

    journals[L].sync = sync  # type: ignore[method-assign]
    script.network.crash(G)  # commit now needs both L (durably) and F
    for sequence in range(5):
        leader.propose(sequence, None)
    script.tick(L)
    script.settle([L, F])
    script.tick(L)
    assert journals[F].durable_index == committed + 5
    assert leader._SyncObj__raftCommitIndex == committed, "committed entries the leader has not fsynced"
    stalled["on"] = False
    script.tick(L)
    script.tick(L)
    assert leader._SyncObj__raftCommitIndex == committed + 5


def test_cluster_restarts_from_journals_with_every_acknowledged_write(tmp_path: Path) -> None:
    script, journals = file_journal_script(tmp_path)
    script.elect(L, [F, G])
    script.catch_up(L, [F, G])
    acked: list[int] = []
    for sequence in range(1, 31):
        script.nodes[L].propose(sequence, lambda r, e, s=sequence: acked.append(s) if e == 0 else None)
    script.tick(L)
    script.settle([L, F, G])
    script.catch_up(L, [F, G])
    assert acked == list(range(1, 31))
    for journal in journals.values():
        journal.close()

    restarted = assert_restart_keeps(tmp_path, acked, F, [L, G])
    for name in (L, F, G):
        assert restarted.nodes[name]._SyncObj__raftCurrentTerm == 2


def test_a_leader_keeps_what_a_follower_lacks_and_a_new_leader_reads_released_entries_back(
    tmp_path: Path,
) -> None:
    """Commands leave memory once applied and held by every follower: the leader keeps in memory what
    a lagging follower still needs; a follower that becomes leader catches that follower up from
    records it reads back from its journal on disk."""
    script, journals = file_journal_script(tmp_path)
    script.elect(L, [F, G])
    script.catch_up(L, [F, G])
    before = script.nodes[G]._SyncObj__raftLastApplied
    leader = script.nodes[L]
    for sequence in range(30):
        leader.propose(sequence, None)
    script.tick(L)
    script.catch_up(L, [F])  # G hears nothing of the 30
    script.network.links.get((L, G), deque()).clear()
    last = leader._SyncObj__raftLastApplied
    assert script.nodes[F]._SyncObj__raftLastApplied == last > before + 30 - 1

    def released(name: str) -> set[int]:
        return {entry[1] for entry in journals[name]._entries if entry[0] is _RELEASED}

    assert max(released(L)) == before and not released(L) & set(range(before + 1, last + 1))
    assert set(range(before + 1, last + 1)) <= released(F)

    script.elect(F, [L])  # F leads; G must get every entry from F's journal
    script.catch_up(F, [L, G])
    assert script.nodes[G].applied == script.nodes[F].applied == script.nodes[L].applied
    assert len(script.nodes[G].applied) >= 30
