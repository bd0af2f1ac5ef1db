"""The acknowledged-write-loss scenario of FINDINGS.md (repro_lost_ack.py / repro_truncate_acked.py),
runnable against stock pysyncobj SyncObj and against RaftCore.

Three replicas in one process on 127.0.0.1, each ticked by its own pysyncobj autoTick thread. A client
thread keeps ``window`` proposals in flight on the leader; a monitor thread samples, every ~0.5 ms:

* ``commit_beyond_majority``: the leader's commit index is held (same index, same term) by fewer than a
  majority of replicas. Stock pysyncobj gets there because a stale success ack moves nextIndex backwards
  and the follower then truncates entries it had acknowledged.
* ``acked_truncated``: a follower deletes an entry at or below the leader's matchIndex for it (checked
  synchronously inside the follower's journal, so a short-lived window cannot be missed).
* the crash window: an acknowledged write at an index no follower holds. The monitor then "crashes" the
  leader (stops all its sends, closes its sockets), waits for the two followers to elect a leader and
  counts acknowledged writes the new leader never applied.

If the window never opens (the patched core), the leader is crashed at ``crash_after_s`` with writes in
flight, which checks the same no-loss property at an arbitrary point.

Run as a script to show stock failing:  .venv/bin/python tests/consensus/acked_write_scenario.py stock 3
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from pysyncobj import SyncObj, SyncObjConf, replicated
from pysyncobj.transport import TCPTransport

from raftlog.consensus.config import CoreConfig
from raftlog.consensus.core import RaftCore
from raftlog_dev.layout import free_port


@dataclass
class TrialResult:
    kind: str
    acked: int = 0
    crashed_in_window: bool = False
    acked_truncated: int = 0  # a follower truncated an entry the leader already counted as held by it
    commit_beyond_majority: int = 0  # samples where the commit index was held by less than a majority
    max_commit_gap: int = 0  # commit index minus the highest index a majority holds
    lost: list[int] = field(default_factory=list)  # acknowledged sequence numbers the new leader lacks
    new_leader: str | None = None
    elapsed_s: float = 0.0

    def summary(self) -> str:
        return (
            f"{self.kind}: acked={self.acked} crashed_in_window={self.crashed_in_window} "
            f"acked_truncated={self.acked_truncated} "
            f"commit_beyond_majority_samples={self.commit_beyond_majority} max_gap={self.max_commit_gap} "
            f"lost={len(self.lost)} new_leader={self.new_leader} elapsed={self.elapsed_s:.1f}s"
        )


def free_ports(count: int) -> list[int]:
    """Ports below the ephemeral range (``raftlog_dev.layout.free_port``): an ephemeral one, free when
    checked, can become another process's source port before the node binds it."""
    return [free_port() for _ in range(count)]


class StockReplica(SyncObj):  # type: ignore[misc]
    def __init__(self, me: str, others: list[str], conf: Any) -> None:
        super().__init__(me, others, conf)
        self.applied: list[int] = []

    @replicated  # type: ignore[untyped-decorator]
    def append(self, sequence: int) -> int:
        self.applied.append(sequence)
        return int(self._SyncObj__raftLastApplied) + 1  # the index being applied


class CountingStateMachine:
    def __init__(self) -> None:
        self.applied: list[int] = []

    def apply(self, index: int, term: int, command: bytes | memoryview) -> object:
        self.applied.append(int.from_bytes(command, "big"))
        return index

    def snapshot(self) -> bytes:
        return b"".join(sequence.to_bytes(8, "big") for sequence in self.applied)

    def restore(self, snapshot: bytes) -> None:
        self.applied[:] = [int.from_bytes(snapshot[i : i + 8], "big") for i in range(0, len(snapshot), 8)]


def _start(kind: str, addresses: list[str]) -> tuple[list[Any], list[list[int]]]:
    nodes: list[Any] = []
    applied: list[list[int]] = []
    for address in addresses:
        others = [a for a in addresses if a != address]
        if kind == "stock":
            conf = SyncObjConf(
                bindAddress=address,
                connectionRetryTime=0.5,
                logCompactionMinEntries=10**9,
                logCompactionMinTime=10**9,
                leaderFallbackTimeout=1.5,
            )
            stock = StockReplica(address, others, conf)
            nodes.append(stock)
            applied.append(stock.applied)
        else:
            machine = CountingStateMachine()
            config = CoreConfig(
                auto_tick=True,
                bind_address=address,
                election_timeout_min_ms=400,
                election_timeout_max_ms=1400,
            )
            nodes.append(RaftCore(address, others, machine, config, transport_class=TCPTransport))
            applied.append(machine.applied)
    return nodes, applied


def _log(node: Any) -> Any:
    return node._SyncObj__raftLog


def _is_leader(node: Any) -> bool:
    return bool(node._isLeader())


def _propose(kind: str, node: Any, sequence: int, callback: Any) -> None:
    if kind == "stock":
        node.append(sequence, callback=callback)
    else:
        node.submit(sequence.to_bytes(8, "big"), callback)


def joined(nodes: list[Any], timeout_s: float = 60.0) -> None:
    """Until every destroyed node's tick thread has closed its sockets and ended (``destroy`` only asks it
    to)."""
    for node in nodes:
        thread = node._SyncObj__thread
        thread.join(timeout_s)
        if thread.is_alive():
            raise TimeoutError(f"{node.selfNode.id}: tick thread still running {timeout_s} s after destroy")


def _crash(node: Any) -> None:
    """Nothing leaves the node from now on; its own tick thread then closes its sockets and stops."""
    node._SyncObj__transport.send = lambda *args, **kwargs: False
    node.destroy()


def _watch_truncations(leader: Any, follower: Any, result: TrialResult) -> None:
    """Wrap the follower journal's deleteEntriesFrom (runs on the follower's tick thread)."""
    log = _log(follower)
    original = log.deleteEntriesFrom

    def delete_entries_from(position: int) -> None:
        index = log[0][1] + position
        if index <= leader._SyncObj__raftMatchIndex.get(follower.selfNode, 0) and _is_leader(leader):
            result.acked_truncated += 1
        original(position)

    log.deleteEntriesFrom = delete_entries_from


def _describe(nodes: list[Any]) -> str:
    parts = []
    for node in nodes:
        parts.append(
            f"{node.selfNode.id}: state={node._SyncObj__raftState} term={node._SyncObj__raftCurrentTerm} "
            f"voted={node._SyncObj__votedForNodeId} leader={node._SyncObj__raftLeader} "
            f"commit={node._SyncObj__raftCommitIndex} applied={node._SyncObj__raftLastApplied} "
            f"last={_log(node)[-1][1:]} connected={sorted(n.id for n in node._SyncObj__connectedNodes)} "
            f"stopped={getattr(node, 'stopped_error', None)!r}"
        )
    return "; ".join(parts)


def _term_at(log: Any, index: int) -> int | None:
    first = log[0][1]
    position = index - first
    if position < 0 or position >= len(log):
        return None
    entry = log[position]
    return int(entry[2]) if entry[1] == index else None


MIN_ACKED_WAIT_S = 20.0


def run_trial(
    kind: str,
    window: int = 20_000,
    crash_after_s: float = 4.0,
    election_wait_s: float = 10.0,
    min_acked: int = 0,
) -> TrialResult:
    """One bounded trial: at most ~crash_after_s + election_wait_s + 3 s, and up to ``MIN_ACKED_WAIT_S``
    more while fewer than ``min_acked`` writes are acknowledged (a loaded machine is slow to start)."""
    if kind not in ("stock", "patched"):
        raise ValueError(f"kind must be 'stock' or 'patched', got {kind!r}")
    logging.getLogger("pysyncobj").setLevel(
        logging.CRITICAL if os.environ.get("QUIET_PYSYNCOBJ", "1") == "1" else logging.ERROR
    )
    result = TrialResult(kind)
    started = time.monotonic()
    addresses = [f"127.0.0.1:{port}" for port in free_ports(3)]
    nodes, applied = _start(kind, addresses)
    try:
        deadline = time.monotonic() + 10
        while not any(_is_leader(n) for n in nodes):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{kind}: no leader elected within 10 s")
            time.sleep(0.02)
        leader = next(n for n in nodes if _is_leader(n))
        followers = [n for n in nodes if n is not leader]
        leader_log = _log(leader)
        follower_logs = [_log(f) for f in followers]
        for follower in followers:
            _watch_truncations(leader, follower, result)

        semaphore = threading.Semaphore(window)
        stop = threading.Event()
        crashed = threading.Event()
        acked: list[int] = []  # sequence numbers
        acked_index = [0]

        def client() -> None:
            sequence = 0
            while not stop.is_set():
                if not semaphore.acquire(timeout=0.05):
                    continue
                sequence += 1

                def callback(index: Any, error: int, sequence: int = sequence) -> None:
                    semaphore.release()
                    if error == 0 and not crashed.is_set():
                        acked.append(sequence)
                        if index > acked_index[0]:
                            acked_index[0] = index

                _propose(kind, leader, sequence, callback)

        client_thread = threading.Thread(target=client, name="client", daemon=True)
        client_thread.start()
        crash_at = time.monotonic() + crash_after_s
        give_up_at = crash_at + MIN_ACKED_WAIT_S
        while (now := time.monotonic()) < crash_at or (len(acked) < min_acked and now < give_up_at):
            commit = leader._SyncObj__raftCommitIndex  # read first: followers only grow past it
            commit_term = _term_at(leader_log, commit)
            holders = 1 + sum(1 for log in follower_logs if _term_at(log, commit) == commit_term)
            if holders < 2:
                result.commit_beyond_majority += 1
                majority_index = max(log[-1][1] for log in follower_logs)
                result.max_commit_gap = max(result.max_commit_gap, commit - majority_index)
            if acked_index[0] > max(log[-1][1] for log in follower_logs):
                result.crashed_in_window = True
                break
            time.sleep(0.0005)
        crashed.set()
        _crash(leader)
        stop.set()
        client_thread.join(timeout=5)
        result.acked = len(acked)

        deadline = time.monotonic() + election_wait_s
        new_leader = None
        while time.monotonic() < deadline:
            candidates = [f for f in followers if _is_leader(f)]
            if candidates and candidates[0]._SyncObj__raftLastApplied >= _log(candidates[0])[-1][1]:
                new_leader = candidates[0]
                break
            time.sleep(0.05)
        if new_leader is None:
            raise TimeoutError(
                f"{kind}: followers elected no leader within {election_wait_s} s: {_describe(followers)}"
            )
        result.new_leader = str(new_leader.selfNode.id)
        present = set(applied[nodes.index(new_leader)])
        result.lost = sorted(set(acked) - present)
    finally:
        for node in nodes:
            node.destroy()
        joined(nodes)
    result.elapsed_s = time.monotonic() - started
    return result


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "stock"
    trials = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    for number in range(trials):
        print(f"trial {number}: {run_trial(which).summary()}", flush=True)
