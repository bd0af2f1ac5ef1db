"""The groups of a ``MuxHub`` and what arrives for them: messages handed to each group's transport,
connection events told to every group, and which groups have something new, signalled to the thread that
ticks them (a condition, and a pipe for a driver that sleeps in its own poller).

It shares the hub's lock, so registrations, connection events and deliveries are one order with the
hub's peer changes; the methods marked "lock held" are called by the hub inside it.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable
from typing import Protocol

from raftlog.consensus.messages import RaftMessage

CONNECTED = "c"  # connection events, as a group's transport queues them
DISCONNECTED = "d"


class GroupTransport(Protocol):
    """What the inbox needs of a group's transport (``MuxTransport``)."""

    def push_event(self, kind: str, node_id: str) -> None: ...

    def push_messages(self, peer_id: str, messages: list[RaftMessage], inbox_max: int) -> int: ...


def nonblocking_pipe() -> tuple[int, int]:
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    return read, write


class GroupInbox:
    def __init__(self, lock: threading.Lock, quiet: Callable[[], bool]) -> None:
        """``quiet``: True on the thread that takes the ready groups right after it polls the hub
        (nothing needs to wake it)."""
        self._lock = lock
        self._inbound = threading.Condition(lock)
        self._quiet = quiet
        self.transports: dict[str, GroupTransport] = {}  # (lock)
        self._ready: set[str] = set()  # (lock)
        self._signalled = False  # (lock) a byte is (or would be) in the pipe
        self._fds: tuple[int, int] | None = None  # (lock) see fd()

    # -- the hub's side (lock held) ----------------------------------------------------------------

    def register(self, group: str, transport: GroupTransport, connected: Iterable[str]) -> None:
        """Lock held: a new group, told of the peers connected now."""
        self.transports[group] = transport
        for node_id in connected:
            transport.push_event(CONNECTED, node_id)
        self._ready.add(group)
        self._signal()

    def unregister(self, group: str, transport: GroupTransport) -> None:
        """Lock held."""
        if self.transports.get(group) is transport:
            del self.transports[group]
        self._ready.discard(group)

    def broadcast(self, kind: str, peer_id: str) -> None:
        """Lock held: a connection event, told to every group."""
        for group, transport in self.transports.items():
            transport.push_event(kind, peer_id)
            self._ready.add(group)
        self._signal()

    def deliver(
        self, peer_id: str, delivered: dict[str, list[RaftMessage]], inbox_max: int
    ) -> tuple[int, int, int]:
        """Hand each group its messages from ``peer_id`` (takes the lock): how many were (accepted, for
        no group registered here, refused by a full inbox)."""
        unknown = full = count = 0
        with self._lock:
            for group, messages in delivered.items():
                transport = self.transports.get(group)
                if transport is None:
                    unknown += len(messages)
                    continue
                accepted = transport.push_messages(peer_id, messages, inbox_max)
                full += len(messages) - accepted
                count += accepted
                self._ready.add(group)
            self._signal()
        return count, unknown, full

    def close(self) -> None:
        """Lock held: forget every group and close the pipe."""
        self.transports.clear()
        for fd in self._fds or ():
            os.close(fd)
        self._fds = None

    def _signal(self) -> None:
        """Lock held, just after adding to the ready groups."""
        self._inbound.notify_all()
        if self._quiet():
            return  # the polling (driver) thread takes the ready groups right after its poll
        if not self._signalled:
            self._signalled = True
            if self._fds is not None:
                with contextlib.suppress(BlockingIOError):
                    os.write(self._fds[1], b"x")

    # -- the driver's side ---------------------------------------------------------------------------

    def wait(self, timeout_s: float) -> bool:
        """Block until some group has inbound messages or events (or the timeout)."""
        with self._inbound:
            if not self._ready:
                self._inbound.wait(timeout_s)
            return bool(self._ready)

    def take_ready(self) -> set[str]:
        """The groups that received messages or connection events since the last call."""
        with self._lock:
            ready, self._ready = self._ready, set()
            if self._signalled and self._fds is not None:
                with contextlib.suppress(BlockingIOError):
                    while os.read(self._fds[0], 4096):
                        pass
            self._signalled = False
            return ready

    def fd(self) -> int:
        """Lock held: a file descriptor that turns readable when some group has inbound messages or events;
        :meth:`take_ready` rearms it."""
        if self._fds is None:
            self._fds = nonblocking_pipe()
            if self._ready:
                self._signalled = False
                self._signal()
        return self._fds[0]
