"""Whether this node's controller metadata has caught up since the node (re)started: its fence.

A Kafka broker opens its listeners to clients only once it has read the cluster's metadata up to what
the controller had committed (KRaft's ``BrokerServer`` waits for the controller to call it caught up,
and defers opening the socket "so that systems which assume that the socket being open indicates
readiness are not confused"). A raftlog node just restarted holds its controller replica's last
snapshot, and applies what its journal holds beyond it only once a leader tells it what is committed:
until then it would answer for topics from an old view (a client caches "unknown topic or partition").
So the node counts as caught up, and its Kafka listener opens and ``/status/ready`` says ready, once:

- it leads the controller group and has applied what was committed before its election; or
- it holds a controller replica, and has applied up to the controller leader's applied index as the
  leader answered it after this node started (asked once, with the peer call a node outside the
  group follows the controller with); or
- it holds none, and its follower has restored the controller leader's snapshot once.

A node that forms a new cluster holding a controller replica is caught up only once its controller log
holds the cluster's formation (``FormCluster``, the first command, which the leader's operator proposes
within a tick of its election): before that the cluster's levels are the base ones, and a client told
ready was refused a change the cluster's own levels allow (a schema registration: 409/40932).

Peer calls are served meanwhile (the node's replicas answer for themselves), but one about a topic or
partition the node does not know is answered ``NoLeader``, which every caller asks again, not
``UnknownTopic`` (``api/internal.py``): a node of the previous release follows a stale leader hint to it.

The fence is lifted once and stays lifted: a node that later loses the controller goes on serving what
it knows, as a Kafka broker stays unfenced while it can no longer reach the controller.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from partitions.metadata.follower import FetchSnapshot
from partitions.worker import Worker
from raftlog.consensus.errors import NotLeader
from raftlog.errors import RaftlogError

log = logging.getLogger("raftlog.node")

POLL_S = 0.1


class CatchUp(Worker):
    """``start()`` on the event loop; ``caught_up`` once the fence is lifted (``await wait()``)."""

    def __init__(
        self,
        node_id: str,
        applied_index: Callable[[], int],
        controller: Callable[[], str | None],
        holds_replica: Callable[[], bool],
        followed: Callable[[], bool],
        fetch: FetchSnapshot,
        formed: Callable[[], bool] = lambda: True,
    ) -> None:
        """``controller()``: the controller leader, None while unknown or while this node leads but has
        not applied what was committed before its election; ``followed()``: the follower of a node
        without a replica restored the leader's snapshot; ``fetch(node, known_index)``: the peer call
        answering the controller's applied index (and its snapshot, when the index is not
        ``known_index``); ``formed()``: this node's controller log holds the cluster's formation, or the
        node does not form one (see the module docstring)."""
        super().__init__()
        self.node_id = node_id
        self._applied_index = applied_index
        self._controller = controller
        self._holds_replica = holds_replica
        self._followed = followed
        self._fetch = fetch
        self._formed = formed
        self._target: int | None = None  # the controller leader's applied index, as it answered
        self._done = asyncio.Event()

    @property
    def caught_up(self) -> bool:
        return self._done.is_set()

    async def wait(self) -> None:
        await self._done.wait()

    def _reached(self) -> bool:
        if not self._holds_replica():
            return self._followed()
        if not self._formed():
            return False
        leader = self._controller()
        if leader is None:
            return False
        if leader == self.node_id:
            return True
        return self._target is not None and self._applied_index() >= self._target

    async def _run(self) -> None:
        while not self._reached():
            leader = self._controller()
            if self._holds_replica() and leader not in (None, self.node_id) and self._target is None:
                try:
                    answer = await self._fetch(leader, self._applied_index())
                    self._target = answer.applied_index
                except (NotLeader, RaftlogError, OSError) as exc:  # asked again at the next turn
                    log.info("node %s: the controller's applied index not known yet: %s", self.node_id, exc)
            if not self._reached():
                await asyncio.sleep(POLL_S)
        log.info("node %s: controller metadata caught up at index %d", self.node_id, self._applied_index())
        self._done.set()
