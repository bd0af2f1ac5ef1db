"""The bench's own processes and ports, shared by every peer (NATS, RabbitMQ, Apache Kafka) and by the
tests that start Kafka: a peer that is not installed, ports free to give a server, and stopping servers
by PID. Kept apart from ``peers.py``'s NATS and RabbitMQ clusters because each recorded Kafka side reaches
this module (``tests/kafka_side.py``) and none reaches those."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Iterable

from raftlog_client.local_cluster import alive

STOP_TIMEOUT_S = 30.0


class PeerMissing(RuntimeError):
    """A peer's server or client is not installed; the message names the set-up command."""


# Where free_ports chooses: below the kernel's ephemeral range (32768-60999), which every outgoing
# connection on the machine draws its own port from, so a port chosen here is not taken by one in the
# seconds before a JVM binds it; RAFTLOG_FREE_PORTS=LOW-HIGH narrows it, as for ``raftlog dev``'s ports
# (the test workers each set their own part).
FREE_PORTS = range(10_000, 32_000)
FREE_PORTS_ENV = "RAFTLOG_FREE_PORTS"


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 right now, chosen at random in FREE_PORTS (or
    FREE_PORTS_ENV's range)."""
    low, _, high = os.environ.get(FREE_PORTS_ENV, "").partition("-")
    ports = range(int(low), int(high)) if low.isdigit() and high.isdigit() else FREE_PORTS
    sockets: list[socket.socket] = []
    try:
        for port in random.sample(ports, min(len(ports), 50 * count + 100)):
            if len(sockets) == count:
                break
            probe = socket.socket()
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                probe.close()
                continue
            sockets.append(probe)
        if len(sockets) < count:
            raise RuntimeError(f"not {count} free ports in {ports.start}-{ports.stop - 1}")
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for probe in sockets:
            probe.close()


def stop_pids(pids: list[int], timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM each pid, wait for it, SIGKILL what is left."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + timeout_s
    for pid in pids:
        while time.monotonic() < deadline and alive(pid):
            time.sleep(0.1)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def stop_processes(processes: Iterable[subprocess.Popen[bytes]], timeout_s: float = STOP_TIMEOUT_S) -> None:
    """``stop_pids`` for processes started here, then reap them; one that already ended is left alone."""
    running = [process for process in processes if process.poll() is None]
    stop_pids([process.pid for process in running], timeout_s)
    for process in running:
        process.wait(timeout_s)
