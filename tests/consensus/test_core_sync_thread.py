"""RaftCore with its journal syncs run elsewhere (``sync_runner``, as a Driver with sync threads does): a
tick ends without waiting for the disk, and still nothing that claims durability leaves before the disk
has it.

* A follower's acknowledgement waits for the sync job holding its entries; the core asks for no tick
  meanwhile (no busy loop) and for one when the job ends.
* A leader may commit on its followers' acknowledgements, but applies (and answers a proposal) only what
  its own journal holds durably.
* With jobs on real threads finishing at random times, every acknowledgement leaves at most at the
  durable index and a restart from the journals keeps every answered proposal.
"""

from __future__ import annotations

import concurrent.futures
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sim_cluster import F, G, L, Script, assert_restart_keeps, file_journal_script

from raftlog.consensus.file_journal import FileJournal
from raftlog.consensus.journal_files import SyncJob


class HeldSyncs:
    """A sync runner that keeps the jobs until the test runs them."""

    def __init__(self) -> None:
        self.jobs: list[tuple[SyncJob, Callable[[], None]]] = []

    def __call__(self, job: SyncJob, done: Callable[[], None]) -> None:
        self.jobs.append((job, done))

    def run_all(self) -> int:
        jobs, self.jobs = self.jobs, []
        for job, done in jobs:
            job.run()
            done()
        return len(jobs)


def settled(tmp_path: Path, holding: str | None = None) -> tuple[Script, dict[str, FileJournal], HeldSyncs]:
    """L leads F and G, everything applied; ``holding``'s journal syncs wait in the returned HeldSyncs."""
    script, journals = file_journal_script(tmp_path)
    script.elect(L, [F, G])
    script.catch_up(L, [F, G])
    held = HeldSyncs()
    if holding is not None:
        hand_syncs_to(script, holding, held)
    return script, journals, held


def hand_syncs_to(script: Script, name: str, runner: Callable[[SyncJob, Callable[[], None]], None]) -> None:
    node = script.nodes[name]
    node.sync_runner = runner
    node.sync_runner_min_bytes = 0


def acks_queued(script: Script, source: str, destination: str) -> list[int]:
    return [
        message["next_node_idx"] - 1
        for message in script.network.links.get((source, destination), [])
        if message["type"] == "next_node_idx" and message["success"]
    ]


def test_a_follower_acknowledges_only_when_its_sync_job_has_run(tmp_path: Path) -> None:
    script, journals, held = settled(tmp_path, holding=F)
    follower = script.nodes[F]
    durable_before = journals[F].durable_index
    for sequence in range(5):
        script.nodes[L].propose(sequence, None)
    script.tick(L)
    script.deliver(L, F)  # F appends and starts a sync job, which waits here
    last = journals[F].last_index
    assert last == durable_before + 5 and len(held.jobs) == 1
    assert acks_queued(script, F, L) == [], "acknowledged entries whose sync has not run"
    assert journals[F].durable_index == durable_before
    assert not follower.needs_tick(), "a core waiting only for its sync asks to be ticked (busy loop)"
    assert held.run_all() == 1
    assert follower.needs_tick(), "the end of the sync job did not ask for a tick"
    script.tick(F)
    assert journals[F].durable_index == last
    assert max(acks_queued(script, F, L)) == last
    reopened = FileJournal(str(tmp_path / F.replace(":", "_")))
    assert reopened.last_index == last


def test_a_leader_commits_on_its_followers_but_applies_only_its_durable_entries(tmp_path: Path) -> None:
    script, journals, held = settled(tmp_path, holding=L)
    leader = script.nodes[L]
    applied_before = leader._SyncObj__raftLastApplied
    answers: list[int] = []
    for sequence in range(3):
        leader.propose(sequence, lambda result, error, s=sequence: answers.append(s) if error == 0 else None)
    script.tick(L)
    assert len(held.jobs) == 1
    script.settle([L, F, G])  # both followers sync inline and acknowledge
    last = journals[L].last_index
    assert leader._SyncObj__raftCommitIndex == last, "two durable followers are a majority"
    assert leader._SyncObj__raftLastApplied == applied_before and answers == []
    assert journals[L].durable_index < last
    assert not leader.needs_tick()
    held.run_all()
    script.tick(L)
    assert leader._SyncObj__raftLastApplied == last and answers == [0, 1, 2]


def test_syncs_on_threads_ending_at_random_times_lose_no_answered_proposal(tmp_path: Path) -> None:
    script, journals, _ = settled(tmp_path)
    rng = random.Random(7)
    pool = concurrent.futures.ThreadPoolExecutor(3)
    early: list[tuple[str, int, int]] = []
    for name in (L, F, G):

        def run_late(job: SyncJob, done: Callable[[], None]) -> None:
            delay = rng.uniform(0, 0.004)
            job.hand_off(done)

            def run() -> None:
                time.sleep(delay)
                job.run()

            pool.submit(run)

        hand_syncs_to(script, name, run_late)
        journal = journals[name]
        original = script.network.enqueue

        def enqueue(
            source: str, destination: str, message: Any, name: str = name, journal: FileJournal = journal,
            original: Callable[[str, str, Any], bool] = original,
        ) -> bool:  # fmt: skip
            acked = message["next_node_idx"] - 1 if message["type"] == "next_node_idx" else 0
            if source == name and acked > journal.durable_index and message["success"]:
                early.append((name, acked, journal.durable_index))
            return original(source, destination, message)

        script.network.enqueue = enqueue  # type: ignore[method-assign]
    answered: list[int] = []
    leader = script.nodes[L]
    deadline = time.monotonic() + 20

    def round_trip() -> None:
        """Everything queued between the three is delivered (no tick in between), then all tick."""
        for source in (L, F, G):
            for destination in (L, F, G):
                if source != destination:
                    script.network.deliver(source, destination)
        script.tick(L, F, G)

    for sequence in range(200):
        leader.propose(sequence, lambda result, error, s=sequence: answered.append(s) if error == 0 else None)
        if sequence % 7 == 0:
            script.tick(L)
        round_trip()
    while len(answered) < 200:
        assert time.monotonic() < deadline, f"{len(answered)} of 200 answered"
        script.force_send(L)
        round_trip()
        time.sleep(0.001)
    pool.shutdown(wait=True)
    assert early == [], f"acknowledged above the durable index (node, index, durable): {early[:5]}"
    assert answered == list(range(200))
    for journal in journals.values():
        journal.close()
    assert_restart_keeps(tmp_path, answered, G, [L, F])


def test_on_a_slow_disk_a_small_sync_goes_to_the_sync_thread_and_on_a_fast_one_stays(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A small append's sync stays in the tick while syncs are fast (a hand-off costs what it saves); once
    this process's syncs are slow (``SYNC_LATENCY``, as measured), the same append's sync is handed to the
    sync thread, so the Raft thread does not wait for the disk while other groups wait for it."""
    from raftlog.consensus import journal_files

    script, journals, held = settled(tmp_path, holding=F)
    script.nodes[F].sync_runner_min_bytes = 1 << 20  # a node's threshold: far above one small append
    latency = journal_files.SyncLatency()
    monkeypatch.setattr(journal_files, "SYNC_LATENCY", latency)

    def one_small_append() -> None:
        script.nodes[L].propose(1, None)
        script.tick(L)
        script.deliver(L, F)

    one_small_append()
    assert held.jobs == [] and journals[F].durable_index == journals[F].last_index, "fast disk: handed off"
    while latency.mean_s < 0.009:  # what a 10 ms disk's syncs measure, near their steady mean: the test's
        latency.observe(0.01)  # own real syncs on the way (fast ones) must not undo it, as 3 did at 2 ms
    one_small_append()
    assert len(held.jobs) == 1 and journals[F].durable_index < journals[F].last_index, "slow disk: not handed"
    held.run_all()
    script.tick(F)
    assert journals[F].durable_index == journals[F].last_index
    for _ in range(64):
        latency.observe(0.0002)  # the disk is fast again
    assert not latency.slow
    one_small_append()
    assert held.jobs == [], "a fast disk again: the sync still handed off"


def test_only_a_small_syncs_time_tells_whether_the_disk_is_slow(tmp_path: Path, monkeypatch: Any) -> None:
    """A large append's sync takes long for its bytes (a 1 MiB one 11 ms in batched produce): it must not
    send every small sync to the threads. A small one's time is what the decision is about."""
    import os as os_module

    from raftlog.consensus import journal_files

    latency = journal_files.SyncLatency()
    monkeypatch.setattr(journal_files, "SYNC_LATENCY", latency)
    real_fdatasync = os_module.fdatasync

    def slow_fdatasync(fd: int) -> None:
        time.sleep(0.005)
        real_fdatasync(fd)

    monkeypatch.setattr(journal_files.os, "fdatasync", slow_fdatasync)
    journal = FileJournal(str(tmp_path))
    journal.add(b"x" * journal_files.SMALL_SYNC_BYTES, 1, 1)
    journal.sync()
    assert latency.mean_s == 0.0, "a large sync's time was counted"
    journal.add(b"x" * 100, 2, 1)
    journal.sync()
    assert latency.mean_s >= 0.005 / 16, "a small sync's time was not counted"
