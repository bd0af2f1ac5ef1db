"""ReplicaGroup (the RaftGroup interface) on three in-process replicas, each with its own Driver thread,
talking TCP on 127.0.0.1 ephemeral ports."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from acked_write_scenario import free_ports
from pysyncobj.config import FAIL_REASON
from pysyncobj.transport import TCPTransport

from raftlog.consensus.config import CoreConfig
from raftlog.consensus.driver import Driver
from raftlog.consensus.errors import (
    GroupClosed,
    NoLeader,
    NotDone,
    NotLeader,
    OutcomeUnknown,
    ProposalRejected,
)
from raftlog.consensus.file_journal import FileJournal
from raftlog.consensus.group import ReplicaGroup, election_counts
from raftlog.consensus.interface import Role
from raftlog.errors import RaftlogError
from tests.waiting import wait_until

WAIT_S = 30.0  # a condition waited for on a busy 2-core machine


class ListStateMachine:
    def __init__(self) -> None:
        self.commands: list[bytes] = []
        self.indexes: list[int] = []

    def apply(self, index: int, term: int, command: bytes | memoryview) -> object:
        self.commands.append(bytes(command))
        self.indexes.append(index)
        return index

    def snapshot(self) -> bytes:
        return b"".join(self.commands)

    def restore(self, snapshot: bytes) -> None:
        raise AssertionError("no compaction configured in these tests")


@dataclass
class Replica:
    address: str
    driver: Driver
    machine: ListStateMachine
    group: ReplicaGroup


def config_for(address: str, election_ms: tuple[int, int] = (400, 800), fallback_ms: int = 600) -> CoreConfig:
    return CoreConfig(
        bind_address=address,
        election_timeout_min_ms=election_ms[0],
        election_timeout_max_ms=election_ms[1],
        heartbeat_period_ms=50,
        leader_fallback_timeout_ms=fallback_ms,
        connection_retry_ms=100,
        pre_vote=True,
    )


def slow_elections_for(address: str) -> CoreConfig:
    """No replica stands for election on its own within the first 5 s."""
    return config_for(address, election_ms=(5000, 8000), fallback_ms=5000)


class Cluster:
    def __init__(
        self, tmp_path: Path, sync_threads: int = 0, config: Callable[[str], CoreConfig] = config_for
    ) -> None:
        """``sync_threads``: the drivers run every journal sync on that many threads (0: in the tick)."""
        self.addresses = [f"127.0.0.1:{port}" for port in free_ports(3)]
        self.replicas: dict[str, Replica] = {}
        self.tmp_path = tmp_path
        self.sync_threads = sync_threads
        self.config = config

    async def start(self, address: str) -> Replica:
        driver = Driver(name=f"driver-{address}", sync_threads=self.sync_threads, sync_thread_min_bytes=0)
        driver.start()
        machine = ListStateMachine()
        journal = FileJournal(str(self.tmp_path / address.replace(":", "_")))
        group = await ReplicaGroup.open(
            "g1", address, self.addresses, machine, driver, self.config(address), journal,
            transport_class=TCPTransport,  # stock pysyncobj's (pickling), named: a test on loopback
        )  # fmt: skip
        replica = Replica(address, driver, machine, group)
        self.replicas[address] = replica
        return replica

    async def leader(self, among: list[str] | None = None) -> Replica:
        names = among or list(self.replicas)
        await wait_until(
            lambda: sum(self.replicas[n].group.status().role is Role.LEADER for n in names) == 1,
            "one leader",
            WAIT_S,
            every_s=0.02,
        )
        return next(self.replicas[n] for n in names if self.replicas[n].group.status().role is Role.LEADER)

    def stop(self, address: str) -> None:
        """Close the replica and stop its driver once the core is destroyed (calls run in order)."""
        replica = self.replicas.pop(address)
        replica.group.close()
        destroyed = threading.Event()
        replica.driver.call(destroyed.set)
        if not destroyed.wait(5):
            raise AssertionError(f"driver of {address} did not destroy the core within 5 s")
        replica.driver.stop()


@pytest.fixture(params=[0, 2], ids=["sync-in-tick", "sync-threads"])
async def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Cluster]:
    cluster = Cluster(tmp_path, request.param)
    for address in cluster.addresses:
        await cluster.start(address)
    yield cluster
    for address in list(cluster.replicas):
        cluster.stop(address)


async def test_proposals_commit_and_apply_in_order_everywhere(cluster: Cluster) -> None:
    """200 proposals at once to one leader commit in order on every replica. A leader deposed meanwhile
    (a loaded machine can stall one past its fallback timeout) acknowledges only some: then a new round
    goes to the new leader, and what the earlier rounds committed stays before it, the same everywhere."""
    for round_ in range(5):
        leader = await cluster.leader()
        commands = [b"r%d-c%d" % (round_, i) for i in range(200)]
        results = await asyncio.gather(
            *(leader.group.propose(command, timeout_ms=5000) for command in commands), return_exceptions=True
        )
        if not any(isinstance(result, RaftlogError) for result in results):
            break
    else:
        raise AssertionError("every round's leader was deposed before all 200 proposals committed")
    assert results == sorted(results) and len(set(results)) == 200, "apply results are the log indexes"
    assert leader.machine.commands[-200:] == commands
    await wait_until(
        lambda: all(r.machine.commands == leader.machine.commands for r in cluster.replicas.values()),
        "followers applied",
        WAIT_S,
        every_s=0.02,
    )
    status = leader.group.status()
    assert status.leader_ready
    assert status.commit_index == status.last_applied == status.durable_index == max(results)
    assert set(status.match_index) == set(cluster.addresses) - {leader.address}


async def test_follower_rejects_with_leader_hint(cluster: Cluster) -> None:
    leader = await cluster.leader()
    await leader.group.propose(b"x", timeout_ms=5000)
    follower = next(r for r in cluster.replicas.values() if r is not leader)
    # the entry committed with the other follower's vote: this one may not have heard from the leader yet
    # (on a loaded machine it had not, and refused with NoLeader): a follower that knows it names it
    await wait_until(
        lambda: follower.group.role_and_leader() == (Role.FOLLOWER, leader.address),
        "the follower to know the leader", WAIT_S, every_s=0.02,
    )  # fmt: skip
    with pytest.raises(NotLeader) as raised:
        await follower.group.propose(b"y", timeout_ms=5000)
    assert raised.value.leader_hint == leader.address
    assert isinstance(raised.value, NotDone)


async def test_new_leader_after_leader_stops_and_keeps_committed_writes(cluster: Cluster) -> None:
    old = await cluster.leader()
    for i in range(20):
        await old.group.propose(b"before%d" % i, timeout_ms=5000)
    cluster.stop(old.address)
    new = await cluster.leader()
    assert new.address != old.address
    await new.group.propose(b"after", timeout_ms=5000)
    assert [c for c in new.machine.commands if c.startswith(b"before")] == [
        b"before%d" % i for i in range(20)
    ]
    assert new.machine.commands[-1] == b"after"
    assert new.group.status().term > 1
    assert new.group.status().leader_ready


async def test_isolated_leader_gives_outcome_unknown_then_no_leader(cluster: Cluster) -> None:
    leader = await cluster.leader()
    await leader.group.propose(b"x", timeout_ms=5000)
    for address in [a for a in cluster.replicas if a != leader.address]:
        cluster.stop(address)
    with pytest.raises(OutcomeUnknown):
        await leader.group.propose(b"maybe", timeout_ms=200)  # appended, can never commit: unknown
    await wait_until(
        lambda: leader.group.status().role is not Role.LEADER,
        "leader steps down (fallback timeout)",
        WAIT_S,
        every_s=0.02,
    )
    with pytest.raises((NoLeader, NotLeader)):
        await leader.group.propose(b"no", timeout_ms=200)


async def test_close_fails_pending_and_later_calls(cluster: Cluster) -> None:
    leader = await cluster.leader()
    for address in [a for a in cluster.replicas if a != leader.address]:
        cluster.stop(address)  # nothing can commit any more
    pending = asyncio.ensure_future(leader.group.propose(b"stuck", timeout_ms=5000))
    await wait_until(
        lambda: len(leader.group._bridge._pending) == 1, "the proposal pending", WAIT_S, every_s=0.02
    )
    leader.group.close()
    with pytest.raises(OutcomeUnknown, match="closed with the proposal in flight"):
        await pending  # in its log: a leader elected from it would commit it, so not "not done"
    with pytest.raises(GroupClosed):
        await leader.group.propose(b"late", timeout_ms=100)


async def test_transfer_leadership_to_a_follower(cluster: Cluster) -> None:
    leader = await cluster.leader()
    await leader.group.propose(b"x", timeout_ms=5000)
    target = next(a for a in cluster.replicas if a != leader.address)
    await wait_until(
        lambda: leader.group.status().match_index.get(target) == leader.group.status().last_index,
        "target caught up",
        WAIT_S,
        every_s=0.02,
    )
    await leader.group.transfer_leadership(target, timeout_ms=5000)
    new = await cluster.leader()
    assert new.address == target
    await new.group.propose(b"y", timeout_ms=5000)


async def test_remove_and_add_back_a_replica(cluster: Cluster) -> None:
    leader = await cluster.leader()
    await leader.group.propose(b"x", timeout_ms=5000)
    victim = next(a for a in cluster.replicas if a != leader.address)
    await leader.group.remove_replica(victim, timeout_ms=5000)
    assert victim not in leader.group.status().match_index
    await leader.group.propose(b"without", timeout_ms=5000)
    await leader.group.add_replica(victim, timeout_ms=5000)
    await leader.group.propose(b"with", timeout_ms=5000)
    await wait_until(
        lambda: cluster.replicas[victim].machine.commands[-1:] == [b"with"],
        "re-added replica applies",
        WAIT_S,
        every_s=0.02,
    )


async def test_a_second_membership_change_waits_for_the_first_to_apply(cluster: Cluster) -> None:
    leader = await cluster.leader()
    await leader.group.propose(b"x", timeout_ms=5000)
    first, second = [a for a in cluster.replicas if a != leader.address]
    loop = asyncio.get_running_loop()
    outcomes: list[asyncio.Future[int]] = [loop.create_future(), loop.create_future()]

    def answer(future: asyncio.Future[int]) -> Callable[[object, int], None]:
        return lambda result, fail_reason: loop.call_soon_threadsafe(future.set_result, fail_reason)

    # both queued on the driver thread before its next round of ticks: the first cannot be committed (a
    # network round trip away) when the second is looked at
    def submit_both() -> None:
        leader.group.core.submit_membership("rem", first, answer(outcomes[0]))
        leader.group.core.submit_membership("rem", second, answer(outcomes[1]))

    leader.group._driver.call(submit_both)
    leader.group._driver.wake()
    done = await asyncio.wait_for(asyncio.gather(*outcomes), WAIT_S)
    assert done == [FAIL_REASON.SUCCESS, FAIL_REASON.REQUEST_DENIED]
    assert set(leader.group.status().match_index) == {second}
    await leader.group.propose(b"after", timeout_ms=5000)


async def test_leadership_transfer_succeeds_under_a_stream_of_proposals(cluster: Cluster) -> None:
    for _trial in range(3):  # a trial whose leader lost an election meanwhile (a busy machine) runs again
        leader = await cluster.leader()
        stop = asyncio.Event()

        async def write(leader: Replica = leader, stop: asyncio.Event = stop) -> None:
            while not stop.is_set():
                try:
                    await asyncio.gather(
                        *(leader.group.propose(b"w" * 200, timeout_ms=5000) for _ in range(50))
                    )
                except (NotDone, OutcomeUnknown, GroupClosed):
                    return  # leadership moved: the stream ends here

        applied = len(leader.machine.commands)
        writer = asyncio.create_task(write())
        await wait_until(
            lambda writer=writer, applied=applied, leader=leader: (
                writer.done() or len(leader.machine.commands) >= applied + 50
            ),
            "the stream of proposals flowing",
            WAIT_S,
            every_s=0.02,
        )
        target = next(a for a in cluster.replicas if a != leader.address)
        status = leader.group.status
        await wait_until(
            lambda status=status, target=target: (
                status().match_index.get(target, 0) >= status().last_index - 50
            ),
            "target nearly caught up",
            WAIT_S,
            every_s=0.02,
        )
        lost = False
        elections = election_counts()["elections_on_timeout"]
        for _ in range(20):  # TimeoutNow needs the target fully caught up at the instant it is sent
            try:
                await leader.group.transfer_leadership(target, timeout_ms=5000)
                break
            except ProposalRejected:
                await asyncio.sleep(0.01)
            except NotLeader:  # deposed by an election before the transfer began: not this test's case
                lost = True
                break
            except OutcomeUnknown:
                # Another replica won. Only a replica that stood for election on its own timer (a thread
                # starved past its election timeout on a busy machine) may have: the transfer's TimeoutNow
                # goes to the target alone, and its campaign is not counted as one on timeout.
                if election_counts()["elections_on_timeout"] == elections:
                    raise
                lost = True
                break
        stop.set()
        await writer
        if lost:
            continue
        assert (await cluster.leader()).address == target
        return
    raise AssertionError("every trial's leader lost an election to a replica's own timer")


async def test_a_new_group_elects_the_replica_that_campaigns_first_at_once(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, config=slow_elections_for)
    try:
        # no replica's election timer runs before this: only the campaign can elect within the shortest
        # election timeout (5 s) from here, the bound, with no margin taken from it (a loaded machine may
        # take seconds to start replicas and run a campaign)
        started = time.monotonic()
        for address in cluster.addresses:
            await cluster.start(address)
        preferred = cluster.replicas[cluster.addresses[2]]
        preferred.group.campaign_if_new(delay_ms=100, attempts=3)
        leads = lambda: preferred.group.status().role is Role.LEADER  # noqa: E731
        await wait_until(leads, "the preferred replica leads", 5, every_s=0.02)
        assert time.monotonic() - started < 5, "elected before any election timeout (5-8 s) could fire"
        assert preferred.group.status().term == 1
        await preferred.group.propose(b"x", timeout_ms=5000)
        replicas = list(cluster.replicas.values())
        await wait_until(
            lambda: all(r.machine.commands == [b"x"] for r in replicas),
            "applied everywhere",
            WAIT_S,
            every_s=0.02,
        )
    finally:
        for address in list(cluster.replicas):
            cluster.stop(address)


async def test_a_late_replica_campaigning_in_a_group_with_a_leader_disturbs_nobody(tmp_path: Path) -> None:
    """A replica opened after its group elected (its node was down when the partition was made) asks for
    term 1, which the others have voted in or passed; it retries only after a heartbeat interval without
    a message, and the leader's heartbeats reach it: the leader stays, in its term."""
    cluster = Cluster(tmp_path)
    try:
        late = cluster.addresses[0]
        for address in cluster.addresses[1:]:
            await cluster.start(address)
        leader = await cluster.leader()
        await leader.group.propose(b"x", timeout_ms=5000)
        term = leader.group.status().term
        replica = await cluster.start(late)
        replica.group.campaign_if_new(delay_ms=0, attempts=5)
        await wait_until(
            lambda: replica.machine.commands == [b"x"], "the late replica caught up", WAIT_S, every_s=0.02
        )
        await asyncio.sleep(1.0)  # 10 heartbeat intervals: room for every retry a deaf replica would make
        status = leader.group.status()
        assert (status.role, status.term) == (Role.LEADER, term)
        assert replica.group.status().leader == leader.address

        # a replica that has seen an election ignores the call
        replica.group.campaign_if_new(delay_ms=0, attempts=5)
        await asyncio.sleep(0.5)  # a negative window: room for a campaign that should not happen
        status = leader.group.status()
        assert (status.role, status.term) == (Role.LEADER, term)
    finally:
        for address in list(cluster.replicas):
            cluster.stop(address)


async def test_a_replica_whose_apply_raises_stops_leading_and_says_why(cluster: Cluster) -> None:
    leader = await cluster.leader()
    broken = RuntimeError("replayed entry differs from the batch on disk")

    def failing_apply(index: int, term: int, command: bytes | memoryview) -> object:
        raise broken

    stopped = threading.Event()
    leader.group.on_stop(stopped.set)
    assert leader.group.stopped_error is None and leader.group.leader_term() is not None
    leader.machine.apply = failing_apply  # type: ignore[method-assign]
    with pytest.raises((GroupClosed, OutcomeUnknown)):
        await leader.group.propose(b"x", timeout_ms=2000)
    assert await asyncio.to_thread(stopped.wait, WAIT_S), "on_stop was not called"
    assert leader.group.stopped_error is broken
    assert leader.group.leader_term() is None, "a stopped core claims no leadership"
    late = threading.Event()
    leader.group.on_stop(late.set)  # registered after the stop: called at once
    assert late.is_set()
    with pytest.raises(GroupClosed):
        await leader.group.propose(b"y", timeout_ms=200)


async def test_a_cancel_that_meets_a_proposals_result_still_cancels_the_waiter() -> None:
    """A background loop proposing when its node closes: the result lands in the same loop iteration as
    the close's cancel. The cancel must win, or the loop runs on and the close waits for it forever
    (``asyncio.wait_for`` on Python 3.11 returns the result and drops the cancel)."""
    future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    waiting = asyncio.get_running_loop().create_task(ReplicaGroup._wait(None, future, 5_000, "proposal"))  # type: ignore[arg-type]
    await asyncio.sleep(0)  # the waiter is suspended on the proposal's future
    future.set_result("applied")
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
