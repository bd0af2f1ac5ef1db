"""RaftCore over the multiplexed msgpack+HMAC transport (raftlog.consensus.transport): the patched core's
messages (a term on every append reply, entries as msgpack lists) pass the wire schema, proposals commit,
a new leader takes over when the leader stops, and ReplicaGroups on Drivers work over hubs."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import pathlib
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from acked_write_scenario import joined
from list_machine import ListMachine
from pysyncobj import FAIL_REASON
from pysyncobj.node import Node

from raftlog.consensus.config import CoreConfig
from raftlog.consensus.core import RaftCore
from raftlog.consensus.driver import Driver
from raftlog.consensus.errors import NotDone, OutcomeUnknown
from raftlog.consensus.file_journal import FileJournal
from raftlog.consensus.group import ReplicaGroup
from raftlog.consensus.hub import MuxHub
from raftlog.consensus.interface import Role
from raftlog.consensus.transport import transport_class

SECRET = b"consensus-core-test-secret-0123456789"


@pytest.fixture
def mux_cluster() -> Iterator[tuple[list[RaftCore], list[ListMachine]]]:
    hubs = [MuxHub(f"n{i}", "127.0.0.1:0", SECRET) for i in range(3)]
    for hub in hubs:
        for other in hubs:
            if other is not hub:
                hub.peers.set(other.node_id, other.address)
        hub.start()
    machines = [ListMachine() for _ in hubs]
    cores = []
    for hub, machine in zip(hubs, machines, strict=True):
        others = [Node(other.node_id) for other in hubs if other is not hub]
        config = CoreConfig(
            auto_tick=True,
            election_timeout_min_ms=400,
            election_timeout_max_ms=800,
            heartbeat_period_ms=50,
            leader_fallback_timeout_ms=600,
        )
        cores.append(
            RaftCore(
                Node(hub.node_id),
                others,
                machine,
                config,
                transport_class=transport_class(hub, "topic-a/0"),
                node_class=Node,
            )
        )
    yield cores, machines
    for core in cores:
        core.destroy()
    joined(cores)  # each core's tick thread has let go of its transport before the hubs close
    for hub in hubs:
        hub.close()


def wait_leader(cores: list[RaftCore], timeout_s: float = 60.0) -> RaftCore:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        leaders = [core for core in cores if core.role.value == "leader"]
        if len(leaders) == 1:
            return leaders[0]
        time.sleep(0.02)
    raise AssertionError(f"no single leader within {timeout_s} s")


class Answers:
    """Proposals submitted, in order, to one core, and the answers it gives them."""

    def __init__(self, core: RaftCore, commands: list[bytes]) -> None:
        self._done = threading.Semaphore(0)
        self._count = len(commands)
        self._refused: list[tuple[bytes, int]] = []
        for command in commands:
            core.submit(command, self._answer(command))

    def _answer(self, command: bytes) -> Callable[[object, int], None]:
        def answered(result: object, error: int) -> None:
            if error:
                self._refused.append((command, error))
            self._done.release()

        return answered

    def refused(self, timeout_s: float = 60.0) -> list[tuple[bytes, int]]:
        """Each refused command with its fail reason, once every proposal is answered."""
        for _ in range(self._count):
            if not self._done.acquire(timeout=timeout_s):
                raise AssertionError(f"proposals not answered within {timeout_s} s")
        return self._refused


NEVER_APPENDED = {FAIL_REASON.MISSING_LEADER, FAIL_REASON.NOT_LEADER, FAIL_REASON.QUEUE_FULL}


def settle(cores: list[RaftCore], refused: list[tuple[bytes, int]], timeout_s: float = 120.0) -> set[bytes]:
    """What a client does with refusals: proposes again, on whichever core leads, what was refused without
    being appended. Returns the commands whose outcome is unknown (appended, then the leader changed):
    applied once or never, never proposed again."""
    deadline = time.monotonic() + timeout_s
    unknown: set[bytes] = set()
    while True:
        unknown |= {command for command, reason in refused if reason not in NEVER_APPENDED}
        again = [command for command, reason in refused if reason in NEVER_APPENDED]
        if not again:
            return unknown
        assert time.monotonic() < deadline, f"{len(again)} commands not committed within {timeout_s} s"
        refused = Answers(wait_leader(cores), again).refused()


def commit_all(cores: list[RaftCore], commands: list[bytes]) -> set[bytes]:
    """Proposes ``commands`` on the leader and settles the refusals; returns those of unknown outcome."""
    return settle(cores, Answers(wait_leader(cores), commands).refused())


def applied_as_proposed(applied: list[bytes], commands: list[bytes], unknown: set[bytes]) -> bool:
    """Every command applied once, in proposal order; those of unknown outcome at most once."""
    if len(set(applied)) != len(applied) or not set(applied) <= set(commands):
        return False
    position = {command: i for i, command in enumerate(commands)}
    in_order = all(position[a] < position[b] for a, b in itertools.pairwise(applied))
    return in_order and set(commands) - set(applied) <= unknown


def test_core_commits_over_mux_and_survives_leader_stop(
    mux_cluster: tuple[list[RaftCore], list[ListMachine]],
) -> None:
    """Commands committed on a majority are applied by every replica, each once and in the order the leader
    took them, through a leadership change mid-burst, and stay there when the leader stops and another is
    elected."""
    cores, machines = mux_cluster
    commands = [b"m%d" % i for i in range(2000)]
    # leadership moves mid-burst, as a loaded machine's late heartbeats or the leader balancer move it: the
    # leader holds what it has not appended, then refuses it (NOT_LEADER) when the target takes over
    leader = wait_leader(cores)
    target = next(core for core in cores if core is not leader)
    first = Answers(leader, commands[:1000])
    transferred = threading.Event()
    leader.request_transfer(target.node_id, lambda result, error: transferred.set())
    assert transferred.wait(60), "the transfer was not answered within 60 s"  # TimeoutNow sent, or denied
    second = Answers(leader, commands[1000:])
    unknown = settle(cores, first.refused() + second.refused())
    deadline = time.monotonic() + 60  # 2000 commands to every replica: long on a loaded machine
    while any(machine.commands != machines[0].commands for machine in machines) or not applied_as_proposed(
        machines[0].commands, commands, unknown
    ):
        assert time.monotonic() < deadline, [len(m.commands) for m in machines]
        time.sleep(0.02)
    applied = list(machines[0].commands)

    leader = wait_leader(cores)
    leader._SyncObj__transport.send = lambda *args, **kwargs: False
    leader.destroy()
    survivors = [core for core in cores if core is not leader]
    new_leader = wait_leader(survivors)
    assert commit_all(survivors, [b"after"]) == set()
    assert machines[cores.index(new_leader)].commands == [*applied, b"after"]


class WatchedJournal(FileJournal):
    """Records, at every fsync that waits for the disk, the bytes its hub still held for peers."""

    def __init__(self, directory: str, hub: MuxHub) -> None:
        super().__init__(directory)
        self._hub = hub
        self.queued_at_sync: list[int] = []

    def sync(self) -> None:
        if self.sync_pending and self._hub.peers.addresses():
            self.queued_at_sync.append(self._hub.stats()["queued_bytes"])
        super().sync()


def leader_of(groups: list[ReplicaGroup]) -> ReplicaGroup | None:
    leaders = [g for g in groups if g.status().role is Role.LEADER]
    return leaders[0] if len(leaders) == 1 else None


async def propose_on_leader(groups: list[ReplicaGroup], command: bytes, timeout_s: float = 60.0) -> object:
    """What a client of the group does: propose on whichever replica leads, and again while the answer is
    "not done" (never applied: no leader, or it was deposed, as a loaded machine's late heartbeats do).
    ``OutcomeUnknown`` is the caller's to judge: the command may be applied or not."""
    deadline = time.monotonic() + timeout_s
    while True:
        leader = leader_of(groups)
        if leader is not None:
            try:
                return await leader.propose(command, timeout_ms=5000)
            except NotDone as exc:
                refusal: NotDone | None = exc
        else:
            refusal = None
        assert time.monotonic() < deadline, f"{command!r} not committed within {timeout_s} s: {refusal!r}"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("hub_io", ["driver", "thread"])
async def test_replica_groups_on_drivers_over_mux(hub_io: str, tmp_path: pathlib.Path) -> None:
    """The product's wiring: per node one MuxHub and one Driver watching the hub's inbound; the hub's I/O
    on the driver thread (as nodes run) or on its own thread. With file journals.

    The leader's driver is starved for longer than an election timeout while proposals are in flight, as
    on a loaded machine: leadership may move. What must hold under any scheduling is asserted: every
    replica applies the same commands in the same order, every acknowledged command exactly once, none
    twice, and the sequential ones in the order they were proposed."""
    hubs = [MuxHub(f"n{i}", "127.0.0.1:0", SECRET) for i in range(3)]
    drivers = [Driver(name=f"driver-n{i}") for i in range(3)]
    for hub, driver in zip(hubs, drivers, strict=True):
        for other in hubs:
            if other is not hub:
                hub.peers.set(other.node_id, other.address)
        driver.watch_inbound(hub.inbox.take_ready, wake_fd=hub.inbound_fd())
        if hub_io == "driver":
            driver.drive_hub(hub)
        else:
            hub.start()
        driver.start()
    machines = [ListMachine() for _ in hubs]
    voters = [hub.node_id for hub in hubs]
    groups: list[ReplicaGroup] = []
    journals = [WatchedJournal(str(tmp_path / hub.node_id), hub) for hub in hubs]
    try:
        for hub, driver, machine, journal in zip(hubs, drivers, machines, journals, strict=True):
            config = CoreConfig(
                election_timeout_min_ms=400, election_timeout_max_ms=800, heartbeat_period_ms=50
            )
            groups.append(
                await ReplicaGroup.open(
                    "topic-b/0",
                    hub.node_id,
                    voters,
                    machine,
                    driver,
                    config,
                    journal=journal,
                    transport_class=transport_class(hub, "topic-b/0"),
                    node_class=Node,
                )
            )
        deadline = time.monotonic() + 60
        while (leader := leader_of(groups)) is None:
            assert time.monotonic() < deadline, "no leader within 60 s"
            await asyncio.sleep(0.02)
        # the leader's driver stops for longer than election_timeout_max_ms amid the proposals
        starved = machines[groups.index(leader)]
        starved.stall_at, starved.stall_s = b"seq25", 2.0
        acknowledged: dict[bytes, object] = {}  # command -> what its apply returned (its index)
        for i in range(50):
            command = b"seq%d" % i
            with contextlib.suppress(OutcomeUnknown):  # applied or not: only checked for duplicates below
                acknowledged[command] = await propose_on_leader(groups, command)
        parallel = [b"par%d" % i for i in range(500)]
        answers = await asyncio.gather(
            *(propose_on_leader(groups, c) for c in parallel), return_exceptions=True
        )
        for command, answer in zip(parallel, answers, strict=True):
            if isinstance(answer, BaseException):
                if not isinstance(answer, OutcomeUnknown):
                    raise answer
            else:
                acknowledged[command] = answer
        assert len(set(acknowledged.values())) == len(acknowledged)  # one log position each
        proposed = {b"seq%d" % i for i in range(50)} | set(parallel)
        deadline = time.monotonic() + 60
        while any(m.commands != machines[0].commands for m in machines) or not acknowledged.keys() <= set(
            machines[0].commands
        ):
            assert time.monotonic() < deadline, [len(m.commands) for m in machines]
            await asyncio.sleep(0.02)
        applied = machines[0].commands
        assert len(applied) == len(set(applied)) and set(applied) <= proposed, "a command applied twice"
        sequential = [c for c in applied if c.startswith(b"seq") and c in acknowledged]
        assert sequential == [c for c in (b"seq%d" % i for i in range(50)) if c in acknowledged]
        terms = sorted({g.status().term for g in groups})
        print(f"{len(acknowledged)} of {len(proposed)} acknowledged, {len(applied)} applied, terms {terms}")
        if hub_io == "driver":
            assert all(not hub._thread.is_alive() for hub in hubs), "polled hubs started a thread"
            # the leader wrote its appends to the sockets before each fsync, so followers wrote meanwhile
            held = journals[groups.index(leader)].queued_at_sync
            assert len(held) > 10 and all(queued == 0 for queued in held), held
    finally:
        for group in groups:
            group.close()
        for driver in drivers:
            done = threading.Event()
            driver.call(done.set)
            assert done.wait(5)
            driver.stop()
        for hub in hubs:
            hub.close()


async def test_a_driver_running_its_hub_waits_in_the_hub_only(tmp_path: pathlib.Path) -> None:
    """A node's driver (``drive_hub``) sleeps between rounds in the hub's selector, one blocking call per
    round, never in its own poller as well; proposals made on another thread (the event loop) still wake
    it at once and commit (a group of one voter: the wake-up path alone, no peer)."""
    hub = MuxHub("n0", "127.0.0.1:0", SECRET)
    driver = Driver(name="driver-n0")
    driver.watch_inbound(hub.inbox.take_ready, wake_fd=hub.inbound_fd())
    driver.drive_hub(hub)
    own_polls = itertools.count()
    poll = driver.poller.poll

    def counted_poll(timeout: float) -> None:
        next(own_polls)
        poll(timeout)

    driver.poller.poll = counted_poll
    driver.start()
    group = None
    try:
        group = await ReplicaGroup.open(
            "topic-w/0",
            hub.node_id,
            [hub.node_id],
            ListMachine(),
            driver,
            CoreConfig(election_timeout_min_ms=400, election_timeout_max_ms=800, heartbeat_period_ms=50),
            journal=FileJournal(str(tmp_path / hub.node_id)),
            transport_class=transport_class(hub, "topic-w/0"),
            node_class=Node,
        )
        deadline = time.monotonic() + 30
        while group.core.role is not Role.LEADER:
            assert time.monotonic() < deadline, "a group of one voter elected no leader within 30 s"
            await asyncio.sleep(0.02)
        for i in range(20):
            await group.propose(b"w%d" % i, timeout_ms=10_000)
        assert driver.loops > 20
        assert next(own_polls) == 0, "the driver also waited in its own poller while the hub ran"
    finally:
        if group is not None:
            group.close()
        driver.stop()
        hub.close()
