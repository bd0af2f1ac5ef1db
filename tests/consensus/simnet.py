"""A scripted in-process network for pysyncobj replicas: the test decides which message arrives when.

``SimTransport`` is a pysyncobj ``Transport`` (built with ``functools.partial(SimTransport, network=net)``);
``send`` only appends to a FIFO queue per (source, destination) link. Nothing is delivered until the test
calls :meth:`SimNetwork.deliver`, so interleavings that need precise timing on real sockets (a stale
acknowledgement overtaking a resend, a crash between two messages) become deterministic steps.
"""

from __future__ import annotations

import copy
from collections import deque
from typing import Any

from pysyncobj.transport import Transport


class SimTransport(Transport):  # type: ignore[misc]  # pysyncobj is untyped
    def __init__(self, syncObj: Any, selfNode: Any, otherNodes: Any, network: SimNetwork) -> None:
        super().__init__(syncObj, selfNode, otherNodes)
        self.node_id = str(selfNode.id)
        self.nodes = {str(node.id): node for node in otherNodes}
        self.network = network
        network.transports[self.node_id] = self

    def send(self, node: Any, message: Any) -> bool:
        return self.network.enqueue(self.node_id, str(node.id), message)

    def addNode(self, node: Any) -> None:
        """A member joins the group: connected at once unless it is down (as a hub that already has a
        connection to its node replays it)."""
        self.nodes[str(node.id)] = node
        if str(node.id) not in self.network.crashed and str(node.id) in self.network.transports:
            self._onNodeConnected(node)

    def dropNode(self, node: Any) -> None:
        self.nodes.pop(str(node.id), None)


class SimNetwork:
    def __init__(self) -> None:
        self.transports: dict[str, SimTransport] = {}
        self.links: dict[tuple[str, str], deque[Any]] = {}
        self.crashed: set[str] = set()

    def connect_all(self) -> None:
        for transport in self.transports.values():
            for node in transport.nodes.values():
                transport._onNodeConnected(node)

    def enqueue(self, source: str, destination: str, message: Any) -> bool:
        if source in self.crashed:
            return False
        # A deep copy, as a real transport would serialize: the receiver must not share the sender's lists.
        self.links.setdefault((source, destination), deque()).append(copy.deepcopy(message))
        return True

    def pending(self, source: str, destination: str) -> list[str]:
        return [m["type"] for m in self.links.get((source, destination), ())]

    def deliver(self, source: str, destination: str, count: int | None = None) -> int:
        """Deliver the oldest ``count`` (default: all) queued messages on one link; returns how many."""
        link = self.links.get((source, destination), deque())
        delivered = 0
        while link and (count is None or delivered < count):
            message = link.popleft()
            if destination in self.crashed:
                continue
            receiver = self.transports[destination]
            node = receiver.nodes.get(source)
            if node is not None:  # (a member dropped from the receiver's group is not heard, as on a hub)
                receiver._onMessageReceived(node, message)
            delivered += 1
        return delivered

    def crash(self, node_id: str) -> None:
        """The node sends nothing more and everything it had in flight is lost."""
        self.crashed.add(node_id)
        for (source, destination), link in self.links.items():
            if node_id in (source, destination):
                link.clear()

    def queued(self) -> int:
        return sum(len(link) for link in self.links.values())
