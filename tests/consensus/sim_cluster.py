"""Replicas (stock SyncObj or RaftCore; three unless told) on a scripted SimNetwork, and the Script that
drives them."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from acked_write_scenario import CountingStateMachine
from pysyncobj import SyncObj, SyncObjConf, replicated
from simnet import SimNetwork, SimTransport

from raftlog.consensus.config import CoreConfig
from raftlog.consensus.core import RaftCore
from raftlog.consensus.file_journal import FileJournal
from raftlog.consensus.journal import RaftJournal

L, F, G = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"  # never bound: the simulated network carries all
X = "127.0.0.1:4"  # a fourth node, joining a group of the three


class FakeClock:
    """A monotonic clock a test moves by hand (``clock.now += 1``), for replicas' ``clock`` option."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class StockSimReplica(SyncObj):  # type: ignore[misc]
    def __init__(self, me: str, others: list[str], network: SimNetwork) -> None:
        conf = SyncObjConf(
            autoTick=False,
            appendEntriesBatchSizeBytes=2**16,  # lowered by two_entries_per_message
            appendEntriesPeriod=1.0,
            raftMinTimeout=20.0,  # no spontaneous elections: the script forces them
            raftMaxTimeout=30.0,
            connectionTimeout=30.0,
            leaderFallbackTimeout=30.0,
            commandsWaitLeader=False,
        )
        super().__init__(me, others, conf, transportClass=functools.partial(SimTransport, network=network))
        self.applied: list[int] = []

    @replicated  # type: ignore[untyped-decorator]
    def append(self, sequence: int) -> int:
        self.applied.append(sequence)
        return sequence

    def propose(self, sequence: int, callback: Any) -> None:
        self.append(sequence, callback=callback)

    def two_entries_per_message(self) -> None:
        # Stock sends an entry >= the batch size as pickled chunks (buggy in 0.3.17); stay below it.
        entry_bytes = len(self._SyncObj__raftLog[-1][0])
        self._SyncObj__conf.appendEntriesBatchSizeBytes = entry_bytes + 1


class PatchedSimReplica(RaftCore):
    def __init__(
        self,
        me: str,
        others: list[str],
        network: SimNetwork,
        journal: RaftJournal | None = None,
        snapshot_path: str | None = None,
        compaction_min_entries: int = 50_000,
        in_flight_entries_max: int = 20_000,
        compaction_min_bytes: int = 256 * 1024 * 1024,
        announce_commits: bool = False,
        quiesce: bool = False,
        pre_vote: bool = False,
        learners: tuple[str, ...] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.machine = CountingStateMachine()
        config = CoreConfig(
            message_bytes_max=10,  # commands are 9 bytes: two entries per AppendEntries message
            heartbeat_period_ms=1000,
            election_timeout_min_ms=20_000,
            election_timeout_max_ms=30_000,
            leader_fallback_timeout_ms=30_000,
            snapshot_path=snapshot_path,
            compaction_min_entries=compaction_min_entries,
            compaction_min_bytes=compaction_min_bytes,
            in_flight_entries_max=in_flight_entries_max,
            announce_commits=announce_commits,
            quiesce=quiesce,
            pre_vote=pre_vote,
        )
        super().__init__(
            me,
            others,
            self.machine,
            config,
            journal=journal,
            transport_class=functools.partial(SimTransport, network=network),
            learners=learners,
            clock=clock,
        )
        self.applied = self.machine.applied
        # Started long ago: the scripts play time by putting deadlines in the past and forgetting when a
        # leader was heard, and every replica has lived as long (a test of a replica just started, which
        # grants no pre-vote in its first election timeout, sets this itself).
        self._started_at = float("-inf")

    def propose(self, sequence: int, callback: Any) -> None:
        self.submit(sequence.to_bytes(8, "big"), callback)

    def two_entries_per_message(self) -> None:
        """Configured in __init__."""


def _log_term(node: Any, index: int) -> int | None:
    log = node._SyncObj__raftLog
    position = index - log[0][1]
    return int(log[position][2]) if 0 <= position < len(log) else None


def _voter_sets(node: Any, commit: int, everyone: list[str]) -> list[list[str]]:
    """Whose majority must hold the leader's commit index: its voters now, or those of the configuration at
    the commit index (a change appended since, e.g. a promotion, counts only for later entries). A stock
    replica: every replica."""
    memberships = getattr(node, "_memberships", None)
    if memberships is None:
        return [everyone]
    return [sorted(memberships.current.voters), sorted(memberships.at(commit).voters)]


class Script:
    """Drives replicas on a SimNetwork; checks after every step that the leader's commit index is held
    (same index and term) by a majority of its voters."""

    def __init__(
        self,
        replica_class: type,
        journals: dict[str, RaftJournal] | None = None,
        options: dict[str, dict[str, Any]] | None = None,
        peers: dict[str, list[str]] | None = None,
    ) -> None:
        """``options``: extra constructor arguments per replica name. ``peers``: the replicas and the other
        members each starts with (default: L, F and G, each with the other two)."""
        self.network = SimNetwork()
        if peers is None:
            peers = {a: [b for b in (L, F, G) if b != a] for a in (L, F, G)}
        addresses = list(peers)
        extra: dict[str, dict[str, Any]] = {a: dict((options or {}).get(a, {})) for a in addresses}
        for address, journal in (journals or {}).items():
            extra[address]["journal"] = journal
        self.nodes = {a: replica_class(a, list(peers[a]), self.network, **extra[a]) for a in addresses}
        self.network.connect_all()
        self.commit_held_by_minority: list[tuple[str, int]] = []

    def tick(self, *names: str) -> None:
        for name in names:
            if name not in self.network.crashed:
                self.nodes[name].doTick(0.0)
        self.check_assigned()

    def deliver(self, source: str, destination: str, count: int | None = None) -> int:
        delivered = self.network.deliver(source, destination, count)
        self.tick(destination)  # RaftCore releases acknowledgements after the tick's fsync
        return delivered

    def settle(self, names: list[str]) -> None:
        """Deliver and tick among ``names`` until nothing is queued between them (at most 50 rounds)."""
        for _ in range(50):
            moved = 0
            for source in names:
                for destination in names:
                    if source != destination:
                        moved += self.deliver(source, destination)
            self.tick(*names)
            if moved == 0:
                return
        raise AssertionError(f"network among {names} did not settle in 50 rounds")

    def catch_up(self, name: str, others: list[str]) -> None:
        """Heartbeat rounds (time passing) until the leader ``name`` applied its whole log and the live
        ``others`` applied up to its commit index (at most 20 rounds)."""
        node = self.nodes[name]
        live = [self.nodes[other] for other in others if other not in self.network.crashed]
        for _ in range(20):
            commit = node._SyncObj__raftCommitIndex
            if node._SyncObj__raftLastApplied == node._SyncObj__raftLog[-1][1] and all(
                other._SyncObj__raftLastApplied == commit for other in live
            ):
                return
            self.force_send(name)
            self.settle([name, *others])
        raise AssertionError(f"{name} did not apply its log in 20 heartbeat rounds")

    def force_send(self, name: str) -> None:
        self.nodes[name]._SyncObj__newAppendEntriesTime = 0
        self.tick(name)

    def elect(self, name: str, voters: list[str]) -> None:
        self.nodes[name]._SyncObj__raftElectionDeadline = 0
        self.tick(name)
        self.settle([name, *voters])
        if not self.nodes[name]._isLeader():
            raise AssertionError(f"{name} was not elected by {voters}")

    def check_assigned(self) -> None:
        for name, node in self.nodes.items():
            if name in self.network.crashed or not node._isLeader():
                continue
            commit = node._SyncObj__raftCommitIndex
            term = _log_term(node, commit)
            if not any(
                sum(1 for voter in voters if _log_term(self.nodes[voter], commit) == term) * 2 > len(voters)
                for voters in _voter_sets(node, commit, list(self.nodes))
            ):
                self.commit_held_by_minority.append((name, commit))


def disconnect(script: Script, a: str, b: str) -> None:
    """The connection between a and b breaks: both sides hear of it, what was in flight is lost."""
    network = script.network
    for source, destination in ((a, b), (b, a)):
        network.links.pop((source, destination), None)
        transport = network.transports[source]
        transport._onNodeDisconnected(transport.nodes[destination])


def connect(script: Script, a: str, b: str) -> None:
    """The connection between a and b is (re)established: both sides hear of it."""
    for source, destination in ((a, b), (b, a)):
        transport = script.network.transports[source]
        transport._onNodeConnected(transport.nodes[destination])


def file_journal_script(tmp_path: Path) -> tuple[Script, dict[str, FileJournal]]:
    """Three patched replicas on FileJournals under ``tmp_path`` (reopened if they exist: a restart)."""
    journals = {name: FileJournal(str(tmp_path / name.replace(":", "_"))) for name in (L, F, G)}
    return Script(PatchedSimReplica, dict(journals)), journals


def assert_restart_keeps(tmp_path: Path, answered: list[int], leader: str, voters: list[str]) -> Script:
    """Restart all three from their journals, elect ``leader`` and check that every replica applied
    ``answered`` last, in order."""
    restarted, _ = file_journal_script(tmp_path)
    restarted.elect(leader, voters)
    restarted.catch_up(leader, voters)
    for name in (L, F, G):
        assert restarted.nodes[name].applied[-len(answered) :] == answered, name
    return restarted
