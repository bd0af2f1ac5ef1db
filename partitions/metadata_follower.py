"""Controller metadata for a node outside the controller group (a node that joined by gossip).

The controller group's voters are fixed at start (the first nodes of the static peer list). A node that
joins later holds partition replicas like any other but no controller replica, and pysyncobj has no
learners, so it copies the controller's applied state over HTTP instead: every ``POLL_S`` it asks the
controller leader (learned from the previous answer; any live node at first, which forwards the call) for
``GET /replication/controller`` and, when the applied index moved forward, restores the snapshot into its
local ``ControllerStateMachine`` and reconciles its replicas. Writes to the controller from this node are
forwarded by the API to the controller leader, as from any controller follower.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Callable

import aiohttp

from partitions.controller import ControllerStateMachine
from partitions.http_worker import HttpWorker

log = logging.getLogger("raftlog.metadata_follower")

POLL_S = 0.25
FETCH_TIMEOUT_S = 5.0


class MetadataFollower(HttpWorker):
    """Create with the machine to fill, ``start()`` on the event loop, ``await close()``."""

    def __init__(
        self,
        node_id: str,
        machine: ControllerStateMachine,
        credential: str,
        sources: Callable[[], list[str]],
        on_change: Callable[[], None],
    ) -> None:
        """``sources``: base URLs of live nodes to ask (any of them forwards to the controller leader)."""
        super().__init__(FETCH_TIMEOUT_S)
        self.node_id = node_id
        self._machine = machine
        self._credential = credential
        self._sources = sources
        self._on_change = on_change
        self.leader: str | None = None  # the controller leader named by the last answer
        self.leader_url: str | None = None
        self.synced = False  # a snapshot has been applied at least once

    async def _run(self) -> None:
        http = self.http
        turn = 0
        while True:
            candidates = ([self.leader_url] if self.leader_url else []) + self._sources()
            if candidates:
                url = candidates[turn % len(candidates)] if self.leader_url is None else candidates[0]
                try:
                    await self._fetch(http, url)
                except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError) as exc:
                    log.info("node %s: controller metadata from %s failed: %s", self.node_id, url, exc)
                    self.leader_url = None
                    turn += 1
            await asyncio.sleep(POLL_S)

    async def _fetch(self, http: aiohttp.ClientSession, url: str) -> None:
        headers = {"Authorization": f"Bearer {self._credential}"}
        params = {"applied_index": str(self._machine.applied_index)} if self.synced else None
        async with http.get(url + "/replication/controller", headers=headers, params=params) as answer:
            if answer.status != 200:
                raise ValueError(f"answered {answer.status}: {(await answer.text())[:200]}")
            body = await answer.json()
        self.leader = body["leader"]
        self.leader_url = body["leader_http"]
        snapshot = body["snapshot"]
        if snapshot is not None and (
            int(body["applied_index"]) > self._machine.applied_index or not self.synced
        ):
            self._machine.restore(base64.b64decode(snapshot))
            self.synced = True
            self._on_change()
