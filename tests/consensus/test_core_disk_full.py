"""RaftCore with one replica's disk full (scripted SimNetwork, FileJournals; the refusals injected for that
replica's journal directory only; docs/decisions/0014):

* a follower that cannot sync acknowledges nothing beyond what is durable, and the others commit without
  it; once there is room it acknowledges and applies everything, and a restart keeps every write;
* a leader that cannot sync counts only what it fsynced, hands its leadership to the follower holding
  its whole log, and stands for no election while full;
* a term or vote it cannot persist is not acted on (no vote leaves), and the core goes on;
* an apply refused for want of room is applied again later, exactly once, in order.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from disk_refusal import Refusal, after_space_retry_time
from pysyncobj.config import FAIL_REASON
from sim_cluster import F, G, L, Script, assert_restart_keeps, file_journal_script

from raftlog.consensus.file_journal import FileJournal
from raftlog.consensus.journal_files import read_term_and_vote
from raftlog.storage.errors import DiskFull
from raftlog.storage.space import HOLD_S


def record_sends(script: Script, name: str, journal: FileJournal) -> list[tuple[str, Any, int]]:
    """(type, message, the sender's durable index then) of every message ``name`` sends from now on."""
    sent: list[tuple[str, Any, int]] = []
    original = script.network.enqueue

    def enqueue(source: str, destination: str, message: Any) -> bool:
        if source == name:
            sent.append((message["type"], message, journal.durable_index))
        return original(source, destination, message)

    script.network.enqueue = enqueue  # type: ignore[method-assign]
    return sent


def directory_of(journal: FileJournal) -> str:
    return journal.directory


def propose(script: Script, name: str, sequences: range, answered: list[int]) -> None:
    for sequence in sequences:
        script.nodes[name].propose(sequence, lambda r, e, s=sequence: answered.append(s) if e == 0 else None)
    script.tick(name)


def test_a_follower_that_cannot_sync_acknowledges_nothing_and_catches_up_once_there_is_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script, journals = file_journal_script(tmp_path)
    script.elect(L, [F, G])
    script.catch_up(L, [F, G])
    refusal = Refusal(monkeypatch, directory_of(journals[F]), ("write", "sync"))
    sent = record_sends(script, F, journals[F])
    answered: list[int] = []
    propose(script, L, range(1, 21), answered)
    script.settle([L, F, G])
    script.catch_up(L, [G])
    assert answered == list(range(1, 21))  # L and G committed without F
    assert refusal.refused and journals[F].durable_index < journals[L].durable_index
    acks = [(m["next_node_idx"] - 1, durable) for kind, m, durable in sent if kind == "next_node_idx"]
    assert all(index <= durable for index, durable in acks), acks
    assert script.nodes[F].stopped_error is None

    refusal.refusing = False
    after_space_retry_time(journals[F])
    script.force_send(L)
    script.settle([L, F, G])
    script.catch_up(L, [F, G])
    assert journals[F].durable_index == journals[L].durable_index
    assert script.nodes[F].applied[-20:] == list(range(1, 21))
    for journal in journals.values():
        journal.close()
    assert_restart_keeps(tmp_path, answered, G, [L, F])


def test_a_leader_that_cannot_sync_hands_over_and_stands_for_no_election(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script, journals = file_journal_script(tmp_path)
    script.elect(L, [F, G])
    script.catch_up(L, [F, G])
    leader = script.nodes[L]
    durable = journals[L].durable_index
    refusal = Refusal(monkeypatch, directory_of(journals[L]), ("write", "sync"))
    answered: list[int] = []
    reasons: list[int] = []
    for sequence in range(1, 6):
        leader.propose(sequence, lambda result, reason: reasons.append(reason))
    script.tick(L)
    script.settle([L, F, G])
    assert journals[L].durable_index == durable and journals[L].disk_full is not None
    # committed by F and G (the leader counts only what it fsynced), applied only where it is durable
    assert leader._SyncObj__raftCommitIndex >= durable + 5
    assert script.nodes[F].applied[-5:] == [1, 2, 3, 4, 5] and answered == [] and leader.applied == []
    for _ in range(5):  # the hand-over: TimeoutNow to the follower holding L's whole log, its election
        script.tick(L)
        script.settle([L, F, G])
    new_leaders = [name for name in (F, G) if script.nodes[name]._isLeader()]
    assert len(new_leaders) == 1 and not leader._isLeader()
    new_leader = new_leaders[0]
    # its proposers heard "outcome unknown" when it handed over, not at their timeouts (all were committed)
    assert reasons == [FAIL_REASON.LEADER_CHANGED] * 5
    # L could not persist the new term (its state file is on the full disk): it stood down all the same
    assert read_term_and_vote(directory_of(journals[L]))[0] == 1 and leader.stopped_error is None

    sent = record_sends(script, L, journals[L])
    leader._SyncObj__raftElectionDeadline = 0
    script.tick(L)
    assert not [kind for kind, _, _ in sent if kind == "request_vote"]  # full: no campaign
    assert not leader._isLeader()

    refusal.refusing = False
    after_space_retry_time(journals[L])
    time.sleep(HOLD_S)  # full until HOLD_S after the last refusal, on DiskSpace's own monotonic clock
    script.force_send(new_leader)
    script.settle([L, F, G])
    script.catch_up(new_leader, [L, F, G])
    assert journals[L].durable_index == journals[new_leader].durable_index
    assert leader.applied[-5:] == [1, 2, 3, 4, 5]
    assert leader._SyncObj__raftCurrentTerm == script.nodes[new_leader]._SyncObj__raftCurrentTerm == 2


def test_a_vote_that_cannot_be_persisted_is_not_sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script, journals = file_journal_script(tmp_path)
    script.elect(L, [F, G])
    script.catch_up(L, [F, G])
    Refusal(monkeypatch, directory_of(journals[G]), ("write", "sync"))
    sent = record_sends(script, G, journals[G])
    script.nodes[F]._SyncObj__raftElectionDeadline = 0
    script.tick(F)  # F stands in term 2: G cannot persist term 2 and its vote, and sends nothing
    script.deliver(F, G)
    script.tick(G)
    assert [kind for kind, _, _ in sent if kind == "response_vote"] == []
    assert read_term_and_vote(directory_of(journals[G])) == (1, L)
    assert script.nodes[G]._SyncObj__raftCurrentTerm == 1 and script.nodes[G].stopped_error is None


def test_an_apply_refused_for_want_of_room_is_applied_again_once_in_order(tmp_path: Path) -> None:
    script, _ = file_journal_script(tmp_path)
    script.elect(L, [F, G])
    script.catch_up(L, [F, G])
    machine = script.nodes[F].machine
    real_apply = machine.apply
    refusals: list[int] = []

    def apply(index: int, term: int, command: Any) -> Any:
        if len(refusals) < 2 and int.from_bytes(bytes(command), "big") == 3:
            refusals.append(index)
            raise DiskFull("log", "no room for the batch")
        return real_apply(index, term, command)

    machine.apply = apply  # type: ignore[method-assign]
    answered: list[int] = []
    propose(script, L, range(1, 6), answered)
    script.settle([L, F, G])
    script.catch_up(L, [G])
    script.force_send(L)  # F learns the commit index
    script.settle([L, F, G])
    assert script.nodes[F].applied[-2:] == [1, 2] and len(refusals) == 1  # 3 refused, nothing after it
    deadline = time.monotonic() + 30
    while script.nodes[F].applied[-1] != 5 and time.monotonic() < deadline:
        time.sleep(0.05)
        script.tick(F)
    assert script.nodes[F].applied[-5:] == [1, 2, 3, 4, 5] and len(refusals) == 2
    assert script.nodes[F].stopped_error is None and answered == [1, 2, 3, 4, 5]
