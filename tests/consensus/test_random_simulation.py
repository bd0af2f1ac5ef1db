"""Seeded random simulation of three RaftCore replicas on the scripted network ("fuzzy" suite).

Each step is one of: deliver the next message on a random link, drop it (a lost connection), tick a
replica, force a heartbeat, start an election somewhere, propose on whoever thinks it leads, or crash a
replica and restart it from its FileJournal (losing whatever the last group commit did not cover). After
every step: at most one leader per term, the applied sequences are prefixes of each other, and the
leader's commit index is held by a majority. At the end the network heals, a leader is elected and every
acknowledged proposal must be applied everywhere, in the same order.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest
from sim_cluster import F, G, L, PatchedSimReplica, Script

from raftlog.consensus.journal import FileJournal

NAMES = [L, F, G]
STEPS = 600


def check_safety(script: Script, leaders_by_term: dict[int, str], seed: int, step: int) -> None:
    for name, node in script.nodes.items():
        if node._isLeader():
            term = node._SyncObj__raftCurrentTerm
            holder = leaders_by_term.setdefault(term, name)
            assert holder == name, f"seed {seed} step {step}: two leaders in term {term}: {holder}, {name}"
    applied = sorted((script.nodes[name].applied for name in NAMES), key=len)
    for shorter, longer in itertools.pairwise(applied):
        assert longer[: len(shorter)] == shorter, f"seed {seed} step {step}: applied sequences diverge"
    assert script.commit_held_by_minority == [], f"seed {seed} step {step}: {script.commit_held_by_minority}"


def crash_and_restart(script: Script, name: str, directories: dict[str, str]) -> None:
    """The process dies: unsynced journal data and everything in flight to or from it are lost; then it
    restarts from its journal directory with an empty state machine (which replays committed entries)."""
    network = script.network
    script.nodes[name].journal.close(flush=False)
    network.crash(name)
    network.crashed.discard(name)
    others = [n for n in NAMES if n != name]
    script.nodes[name] = PatchedSimReplica(name, others, network, journal=FileJournal(directories[name]))
    for other in others:
        network.transports[other]._onNodeConnected(network.transports[other].nodes[name])
    for node in network.transports[name].nodes.values():
        network.transports[name]._onNodeConnected(node)


def heal_and_elect(script: Script, seed: int) -> str:
    script.settle(NAMES)

    def freshness(name: str) -> tuple[int, int]:
        last = script.nodes[name]._SyncObj__raftLog[-1]
        return int(last[2]), int(last[1])

    for name in sorted(NAMES, key=freshness, reverse=True):
        script.nodes[name]._SyncObj__raftElectionDeadline = 0
        script.tick(name)
        script.settle(NAMES)
        if script.nodes[name]._isLeader():
            script.catch_up(name, [n for n in NAMES if n != name])
            return name
    raise AssertionError(f"seed {seed}: no replica could be elected after healing")


@pytest.mark.parametrize("seed", range(20))
def test_random_schedules_keep_raft_safety_and_acknowledged_writes(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    directories = {name: str(tmp_path / f"journal{i}") for i, name in enumerate(NAMES)}
    script = Script(PatchedSimReplica, {name: FileJournal(directories[name]) for name in NAMES})
    network = script.network
    acked: list[int] = []
    leaders_by_term: dict[int, str] = {}
    sequence = 0
    for step in range(STEPS):
        action = rng.random()
        links = [link for link, queue in network.links.items() if queue]
        if action < 0.45 and links:
            source, destination = rng.choice(links)
            script.deliver(source, destination, count=1)
        elif action < 0.52 and links:
            network.links[rng.choice(links)].popleft()  # lost with its connection
        elif action < 0.70:
            script.tick(rng.choice(NAMES))
        elif action < 0.78:
            script.force_send(rng.choice(NAMES))  # a heartbeat is due (leaders only act on it)
        elif action < 0.81:
            candidate = rng.choice(NAMES)
            script.nodes[candidate]._SyncObj__raftElectionDeadline = 0
            script.tick(candidate)
        elif action < 0.83:
            crash_and_restart(script, rng.choice(NAMES), directories)
        else:
            for name in NAMES:
                if script.nodes[name]._isLeader():
                    sequence += 1
                    script.nodes[name].propose(
                        sequence, lambda result, error, s=sequence: acked.append(s) if error == 0 else None
                    )
                    break
        check_safety(script, leaders_by_term, seed, step)

    leader = heal_and_elect(script, seed)
    check_safety(script, leaders_by_term, seed, STEPS)
    final = script.nodes[leader].applied
    assert not set(acked) - set(final), (
        f"seed {seed}: acknowledged but lost: {sorted(set(acked) - set(final))}"
    )
    for name in NAMES:
        assert script.nodes[name].applied == final, f"seed {seed}: {name} differs from the leader {leader}"
    assert acked, f"seed {seed}: no proposal was acknowledged: the schedule tested nothing"
