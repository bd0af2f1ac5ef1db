"""The benchmark peers' ports (Apache Kafka's, the tests' reference cluster among them) come from below the
ephemeral range, as ``raftlog dev``'s do, and from a test worker's own part of it."""

from __future__ import annotations

import socket

import pytest

from raftlog_bench import processes
from raftlog_dev import layout


def test_the_range_and_its_variable_are_raftlog_devs() -> None:
    assert processes.FREE_PORTS == layout.UNEPHEMERAL_PORTS
    assert processes.FREE_PORTS_ENV == layout.PORTS_ENV


def test_ports_are_distinct_free_and_in_the_workers_part(monkeypatch: pytest.MonkeyPatch) -> None:
    # The range starts at a port this test holds (the system's choice, so no other test's server can be
    # on it, as one was on a fixed port in CI): that port is never handed out, every other is in range.
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    low = int(held.getsockname()[1])
    monkeypatch.setenv(processes.FREE_PORTS_ENV, f"{low}-{low + 50}")
    try:
        for _ in range(20):
            ports = processes.free_ports(9)
            assert len(set(ports)) == 9 and all(low < port < low + 50 for port in ports), ports
    finally:
        held.close()


def test_without_the_variable_no_port_is_ephemeral(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(processes.FREE_PORTS_ENV, raising=False)
    assert all(10_000 <= port < 32_000 for port in processes.free_ports(30))


def test_a_range_too_small_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(processes.FREE_PORTS_ENV, "20000-20003")
    with pytest.raises(RuntimeError, match="not 9 free ports in 20000-20002"):
        processes.free_ports(9)
