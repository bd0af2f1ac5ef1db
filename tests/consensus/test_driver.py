"""Driver: one thread ticks many groups; apply and callbacks run on it; a failing replica is dropped and
reported without stopping the others."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from acked_write_scenario import free_ports
from pysyncobj.transport import TCPTransport

from raftlog.consensus.config import CoreConfig
from raftlog.consensus.core import RaftCore
from raftlog.consensus.driver import Driver
from raftlog.errors import InvariantViolation

GROUPS = 4


class ThreadRecordingMachine:
    def __init__(self, fail_on: bytes | None = None) -> None:
        self.threads: set[str] = set()
        self.commands: list[bytes] = []
        self.fail_on = fail_on

    def apply(self, index: int, term: int, command: bytes | memoryview) -> object:
        self.threads.add(threading.current_thread().name)
        if command == self.fail_on:
            raise InvariantViolation(f"test state machine refuses {command!r} at index {index}")
        self.commands.append(bytes(command))
        return index

    def snapshot(self) -> bytes:
        return b""

    def restore(self, snapshot: bytes) -> None:
        raise AssertionError("no snapshots here")


@pytest.fixture
def driven() -> Iterator[tuple[Driver, list[list[RaftCore]], list[list[ThreadRecordingMachine]]]]:
    driver = Driver(name="the-driver")
    ports = free_ports(GROUPS * 3)
    groups: list[list[RaftCore]] = []
    machines: list[list[ThreadRecordingMachine]] = []
    for g in range(GROUPS):
        addresses = [f"127.0.0.1:{ports[g * 3 + n]}" for n in range(3)]
        members, group_machines = [], []
        for address in addresses:
            machine = ThreadRecordingMachine(fail_on=b"poison" if g == 0 else None)
            config = CoreConfig(
                bind_address=address,
                election_timeout_min_ms=400,
                election_timeout_max_ms=800,
                heartbeat_period_ms=50,
            )
            core = RaftCore(
                address, [a for a in addresses if a != address], machine, config,
                poller=driver.poller, transport_class=TCPTransport,  # stock pysyncobj's, named: loopback
            )  # fmt: skip
            members.append(core)
            group_machines.append(machine)
        groups.append(members)
        machines.append(group_machines)
    failures: list[tuple[str, BaseException]] = []
    for members in groups:
        for core in members:
            driver.add(core, lambda core, error: failures.append((core.node_id, error)))
    driver.failures = failures  # type: ignore[attr-defined]
    driver.start()
    yield driver, groups, machines
    destroyed = threading.Event()

    def destroy_all() -> None:
        for members in groups:
            for core in members:
                driver.remove(core)
                core.destroy()
        destroyed.set()

    driver.call(destroy_all)
    assert destroyed.wait(5)
    driver.stop()


def leader_of(members: list[RaftCore], timeout_s: float = 8.0) -> RaftCore:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        leaders = [core for core in members if core.role.value == "leader"]
        if len(leaders) == 1:
            return leaders[0]
        time.sleep(0.02)
    raise AssertionError(f"no single leader within {timeout_s} s")


def propose_and_wait(core: RaftCore, command: bytes, timeout_s: float = 5.0) -> tuple[object, int]:
    done = threading.Event()
    outcome: list[tuple[object, int]] = []

    def callback(result: object, error: int) -> None:
        outcome.append((result, error))
        done.set()

    core.submit(command, callback)
    if not done.wait(timeout_s):
        raise AssertionError(f"no answer for {command!r} within {timeout_s} s")
    return outcome[0]


def test_one_thread_drives_all_groups(
    driven: tuple[Driver, list[list[RaftCore]], list[list[ThreadRecordingMachine]]],
) -> None:
    _driver, groups, machines = driven
    for g, members in enumerate(groups):
        leader = leader_of(members)
        for i in range(10):
            _result, error = propose_and_wait(leader, b"g%d-%d" % (g, i))
            assert error == 0, f"group {g} proposal {i} failed with {error}"
    deadline = time.monotonic() + 60
    while any(len(m.commands) < 10 for group_machines in machines for m in group_machines):
        assert time.monotonic() < deadline, "followers did not apply within 60 s"
        time.sleep(0.02)
    threads = {name for group_machines in machines for m in group_machines for name in m.threads}
    assert threads == {"the-driver"}


def test_failing_replica_is_dropped_and_others_continue(
    driven: tuple[Driver, list[list[RaftCore]], list[list[ThreadRecordingMachine]]],
) -> None:
    driver, groups, _machines = driven
    poisoned = leader_of(groups[0])
    poisoned.submit(b"poison", None)
    deadline = time.monotonic() + 60
    failures: list[tuple[str, BaseException]] = driver.failures  # type: ignore[attr-defined]
    while poisoned.node_id not in {node for node, _ in failures}:
        assert time.monotonic() < deadline, f"expected the leader of group 0 to fail, got {failures}"
        time.sleep(0.02)
    # Followers fail too once they learn the commit index (the leader may stop before telling them).
    assert all(isinstance(error, InvariantViolation) for _, error in failures)
    assert {node for node, _ in failures} <= {core.node_id for core in groups[0]}
    assert poisoned.stopped_error is not None
    _result, error = propose_and_wait(leader_of(groups[1]), b"still fine")
    assert error == 0
