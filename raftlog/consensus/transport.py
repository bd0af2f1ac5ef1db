"""The pysyncobj ``Transport`` of one Raft group on the node's :class:`~raftlog.consensus.hub.MuxHub`.

:class:`MuxTransport` is given to SyncObj as ``transportClass=transport_class(hub, group_id)``. It never
touches a socket: ``send()`` (called on the group's tick thread) encodes with msgpack and enqueues on the
hub, whose I/O thread (or polling driver thread) writes it. The hub's ``GroupInbox`` pushes what arrives
for the group, and every peer connecting or disconnecting, into the transport's inbox (under the hub's
lock); that inbox is drained by an on-tick callback (RaftCore drains it first thing in its tick instead), so
``_onMessageReceived``, ``_onNodeConnected`` and ``_onNodeDisconnected`` always run on the group's tick
thread.

With ``autoTick=True`` each transport also registers a wake pipe in SyncObj's poller, so a tick blocked
in ``poll()`` wakes as soon as a message arrives.

Not supported: pysyncobj read-only nodes (``selfNode=None``) and its admin "utility" messages (they are
not Raft traffic and have no business on the Raft port).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
from typing import Any

from pysyncobj.node import TCPNode
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.transport import Transport

from raftlog.consensus import wire_messages
from raftlog.consensus.hub import MuxHub
from raftlog.consensus.hub_config import TransportError
from raftlog.consensus.hub_inbox import CONNECTED, nonblocking_pipe
from raftlog.consensus.messages import RaftMessage

_MESSAGE = "m"


class MuxTransport(Transport):  # type: ignore[misc]  # pysyncobj is untyped
    """The pysyncobj transport of one Raft group on a :class:`MuxHub`.

    Pass ``transportClass=functools.partial(MuxTransport, hub=hub, group="topic-a/0")`` and
    ``nodeClass=pysyncobj.Node`` (or TCPNode when node ids are ``host:port`` addresses) to SyncObj;
    ``selfNode.id`` must equal ``hub.node_id`` and every other node's id must be a hub peer
    (TCPNode peers unknown to the hub are added with their address). Destroying the SyncObj
    unregisters the group.
    """

    def __init__(self, syncObj: Any, selfNode: Any, otherNodes: Any, *, hub: MuxHub, group: str) -> None:
        super().__init__(syncObj, selfNode, otherNodes)
        if selfNode is None:
            raise TransportError("MuxTransport does not support pysyncobj read-only nodes (selfNode=None)")
        if selfNode.id != hub.node_id:
            raise TransportError(f"selfNode.id {selfNode.id!r} differs from hub.node_id {hub.node_id!r}")
        self._hub = hub
        self._group = wire_messages.check_group_id(group)
        self._syncObj = syncObj
        self._nodes: dict[str, Any] = {}
        self._inbox: collections.deque[tuple[str, str, Any]] = collections.deque()
        self._destroyed = False
        self._wake_fds: tuple[int, int] | None = None
        self._wake_pending = False
        # Entries arrived and not delivered yet (an append with entries: a write waits for this replica's
        # acknowledgement). Set as they arrive, cleared as the inbox is delivered; the driver ticks such a
        # group ahead of the rest of a round (``RaftCore.urgent``, ``driver.RoundOrder``). A hint: a race
        # with a threaded hub costs the order, never a message.
        self.entries_waiting = False
        for node in otherNodes:
            self._nodes[node.id] = node
        hub.register_group(self._group, self)  # raises DuplicateGroup before anything else is set up
        for node in otherNodes:
            self._remember(node)
        if syncObj.conf.autoTick:
            self._wake_fds = nonblocking_pipe()
            syncObj._poller.subscribe(self._wake_fds[0], self._on_wake_pipe, POLL_EVENT_TYPE.READ)
            self._kick()  # events queued at registration (peers already connected)
        syncObj.addOnTickCallback(self.receive)

    @property
    def group(self) -> str:
        return self._group

    def _remember(self, node: Any) -> None:
        self._nodes[node.id] = node
        if isinstance(node, TCPNode) and not self._hub.peers.knows(node.id):
            self._hub.peers.set(node.id, node.address)

    # hub thread side (called with the hub lock held)

    def push_event(self, kind: str, peer_id: str) -> None:
        self._inbox.append((kind, peer_id, None))
        self._kick()

    def push_messages(self, peer_id: str, messages: list[RaftMessage], inbox_max: int) -> int:
        room = inbox_max - len(self._inbox)
        if room <= 0:
            return 0
        accepted = messages if len(messages) <= room else messages[:room]
        self._inbox.extend((_MESSAGE, peer_id, m) for m in accepted)
        if not self.entries_waiting:
            self.entries_waiting = any(m["type"] == "append_entries" and m.get("entries") for m in accepted)
        self._kick()
        return len(accepted)

    def _kick(self) -> None:
        if self._wake_fds is not None and not self._wake_pending:
            self._wake_pending = True
            with contextlib.suppress(BlockingIOError):
                os.write(self._wake_fds[1], b"x")

    # tick thread side

    def _on_wake_pipe(self, descr: int, event_mask: int) -> None:
        if self._wake_fds is None:
            return
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_fds[0], 4096):
                pass
        self._wake_pending = False
        self.receive()

    def receive(self) -> None:
        """Deliver what was in the inbox when the call began (later arrivals wait for the next tick).
        Registered as an on-tick callback; a tick owner that delivers earlier in its tick (RaftCore does it
        first, so what arrived is acted on in the same tick) removes that callback and calls this."""
        inbox = self._inbox
        nodes = self._nodes
        self.entries_waiting = False
        for _ in range(len(inbox)):
            kind, peer_id, message = inbox.popleft()
            node = nodes.get(peer_id)
            if node is None:
                continue
            if kind == _MESSAGE:
                self._onMessageReceived(node, message)
            elif kind == CONNECTED:
                self._onNodeConnected(node)
            else:
                self._onNodeDisconnected(node)

    # pysyncobj Transport API (pysyncobj/transport.py:126-185)

    def last_heard(self, node: Any) -> float | None:
        """When this node's connection to ``node`` last received anything (see MuxHub.last_heard)."""
        return self._hub.peers.last_heard(node.id)

    def send(self, node: Any, message: Any) -> bool:
        if self._destroyed:
            return False
        return self._hub.enqueue(node.id, self._group, wire_messages.encode_message(message))

    def addNode(self, node: Any) -> None:
        self._remember(node)
        self._hub.replay_connection_state(self, node.id)

    def dropNode(self, node: Any) -> None:
        self._nodes.pop(node.id, None)

    def destroy(self) -> None:
        if self._destroyed:
            return
        self._destroyed = True
        self._hub.unregister_group(self._group, self)
        self._syncObj.removeOnTickCallback(self.receive)
        if self._wake_fds is not None:
            self._syncObj._poller.unsubscribe(self._wake_fds[0])
            for fd in self._wake_fds:
                os.close(fd)
            self._wake_fds = None
        self._inbox.clear()
        self.setOnMessageReceivedCallback(None)
        self.setOnNodeConnectedCallback(None)
        self.setOnNodeDisconnectedCallback(None)


def transport_class(hub: MuxHub, group: str) -> functools.partial[MuxTransport]:
    """``transportClass`` for SyncObj: ``SyncObj(..., transportClass=transport_class(hub, group))``."""
    return functools.partial(MuxTransport, hub=hub, group=group)
