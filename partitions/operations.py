"""The controller leader's background work: replica moves, decommissions and the leader balancer.

Every node runs one ``Operator`` task; it acts only while its node leads the controller group and has
applied the metadata committed before its election. Each tick it:

1. advances every recorded replica move by one step (``reconfigure.next_step``), talking to the
   partition leader directly when it is local, else over HTTP
   (``/replication/partitions/{topic}/{partition}/membership``, authenticated with a credential derived
   from the cluster secret); forwarding in the API delivers the call to the leader wherever it is;
2. starts moves off decommissioning nodes, a few at a time (``reconfigure.replacement_for``);
3. every ``BALANCE_INTERVAL_S`` (at once while a node in maintenance still leads something), performs one
   leadership transfer from ``balancer.plan``.

All decisions are made from fresh state each tick, so a failed step, a lost answer or a new controller
leader only repeats work: each step is idempotent (see ``reconfigure``).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import aiohttp

from partitions import balancer, reconfigure
from partitions.controller import CancelMove, MoveReplicas, Reassignment, StepMove
from partitions.http_worker import HttpWorker
from partitions.reconfigure import Add, MemberView, Record, Remove, Wait
from raftlog.errors import RaftlogError

if TYPE_CHECKING:
    from partitions.node import Node

log = logging.getLogger("raftlog.operations")

TICK_S = 0.2
BALANCE_INTERVAL_S = 3.0
DECOMMISSION_MOVES_MAX = 4  # moves a decommission keeps in flight at once
MEMBERSHIP_TIMEOUT_MS = 10_000
RPC_TIMEOUT_S = 15.0
INTERNAL_CREDENTIAL_CONTEXT = b"raftlog internal admin v1"


def internal_credential(cluster_secret: bytes) -> str:
    """The bearer token nodes present to each other's internal admin endpoints."""
    return hmac.new(cluster_secret, INTERNAL_CREDENTIAL_CONTEXT, hashlib.sha256).hexdigest()


class Operator(HttpWorker):
    """Create with the node, ``start()`` on its event loop, ``await close()``."""

    def __init__(self, node: Node) -> None:
        super().__init__(RPC_TIMEOUT_S)
        self._node = node
        self._credential = internal_credential(node.config.cluster_secret)
        self._goals: dict[tuple[str, int, str], int] = {}  # (topic, partition, joining node) -> commit index
        self._balanced_at = 0.0
        self.steps_taken = 0
        self.leadership_transfers = 0

    def credential_ok(self, presented: str) -> bool:
        return hmac.compare_digest(presented.encode("utf-8"), self._credential.encode("utf-8"))

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            if not self._node.leads_controller():
                self._goals.clear()
                continue
            try:
                await self._tick()
            except (RaftlogError, aiohttp.ClientError, TimeoutError, OSError, ValueError, KeyError) as exc:
                log.warning("node %s: admin operations tick failed, retrying: %s", self._node.node_id, exc)
            except Exception:  # a bug: logged loudly with its traceback; the next tick starts afresh
                log.exception("node %s: admin operations tick failed", self._node.node_id)
                await asyncio.sleep(1)

    async def _tick(self) -> None:
        """The three duties, each on its own: a move that keeps failing does not stall the others."""
        machine = self._node.controller_state()
        moves = dict(machine.reassignments)
        duties: list[Callable[[], Awaitable[None]]] = [
            lambda: _bounded([self._advance(t, p, move) for (t, p), move in sorted(moves.items())]),
            lambda: self._decommission(len(moves)),
            lambda: self._balance(bool(moves)),
        ]
        for duty in duties:
            try:
                await duty()
            except (RaftlogError, aiohttp.ClientError, TimeoutError, OSError, ValueError, KeyError) as exc:
                log.warning("node %s: admin operations: %s", self._node.node_id, exc)

    # -- moves ---------------------------------------------------------------------------------------

    async def _advance(self, topic: str, partition: int, move: Reassignment) -> None:
        metadata = self._node.controller_state().topics.get(topic)
        if metadata is None:
            return
        recorded = metadata.replicas[partition]
        view = await self._member_view(topic, partition)
        if view is None:
            return
        unrecorded = sorted(view.voters - set(recorded))
        goal = None
        if unrecorded:
            goal = self._goals.setdefault((topic, partition, unrecorded[0]), view.commit_index)
        step = reconfigure.next_step(move, recorded, view, goal)
        if isinstance(step, Wait):
            log.debug("move of %s/%d waits: %s", topic, partition, step.reason)
            return
        log.info("node %s: move of %s/%d: %s", self._node.node_id, topic, partition, step)
        self.steps_taken += 1
        if isinstance(step, Record):
            for key in [k for k in self._goals if k[:2] == (topic, partition)]:
                del self._goals[key]
            await self._node.propose_controller(StepMove(topic, partition, list(step.replicas), step.adding))
        elif isinstance(step, Add):
            await self._change(topic, partition, "add", step.node)
        elif isinstance(step, Remove):
            await self._change(topic, partition, "remove", step.node)
        else:
            await self._change(topic, partition, "transfer", step.node)

    async def _member_view(self, topic: str, partition: int) -> MemberView | None:
        local = self._node.local_member_view(topic, partition)
        if local is not None:
            return local
        body = await self._call(topic, partition, "GET", None)
        if body is None:
            return None
        return MemberView(
            str(body["leader"]),
            frozenset(str(n) for n in body["voters"]),
            int(body["commit_index"]),
            {str(n): int(i) for n, i in body["match_index"].items()},
        )

    async def _change(self, topic: str, partition: int, change: str, node: str) -> None:
        if self._node.local_member_view(topic, partition) is not None:
            await self._node.change_membership(topic, partition, change, node, MEMBERSHIP_TIMEOUT_MS)
            return
        await self._call(topic, partition, "POST", {"change": change, "node": node})

    async def _call(
        self, topic: str, partition: int, method: str, body: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """One internal membership call to the partition's leader (or any replica: the API forwards it).
        None when no node to ask is known or it answered with a retriable error."""
        target = self._node.leader_hint(topic, partition)
        url = None if target is None else self._node.http_address(target)
        if url is None:
            return None
        path = f"/replication/partitions/{urllib.parse.quote(topic, safe='')}/{partition}/membership"
        headers = {"Authorization": f"Bearer {self._credential}"}
        async with self.http.request(method, url + path, json=body, headers=headers) as answer:
            if answer.status == 200:
                payload: dict[str, Any] = await answer.json()
                return payload
            text = await answer.text()
        log.info(
            "membership %s on %s/%d via %s answered %d: %s",
            method, topic, partition, target, answer.status, text[:200],
        )  # fmt: skip
        return None

    # -- decommission --------------------------------------------------------------------------------

    async def _decommission(self, moving: int) -> None:
        machine = self._node.controller_state()
        leaving = machine.node_flags["decommissioning"]
        if not leaving or moving >= DECOMMISSION_MOVES_MAX:
            return
        candidates = [n for n in self._node.alive_nodes() if n not in leaving]
        load: dict[str, int] = {}
        for metadata in list(machine.topics.values()):
            for replicas in metadata.replicas:
                for node in replicas:
                    load[node] = load.get(node, 0) + 1
        for metadata in sorted(list(machine.topics.values()), key=lambda m: m.name):
            for partition, replicas in enumerate(metadata.replicas):
                if moving >= DECOMMISSION_MOVES_MAX:
                    return
                if (metadata.name, partition) in machine.reassignments:
                    continue
                node = next((n for n in replicas if n in leaving), "")
                if not node:
                    continue
                target = reconfigure.replacement_for(node, replicas, candidates, load)
                if target is None:
                    continue
                await self._node.propose_controller(MoveReplicas(metadata.name, partition, target))
                newcomer = target[replicas.index(node)]
                load[newcomer] = load.get(newcomer, 0) + 1
                moving += 1

    async def cancel_moves_off(self, node: str) -> None:
        """Recommission: turn around every move that takes a replica off ``node``."""
        machine = self._node.controller_state()
        for (topic, partition), move in sorted(dict(machine.reassignments).items()):
            if node in move.original and node not in move.target and not move.cancelled:
                await self._node.propose_controller(CancelMove(topic, partition))

    # -- leader balance ------------------------------------------------------------------------------

    async def _balance(self, moving: bool) -> None:
        machine = self._node.controller_state()
        maintenance = machine.node_flags["maintenance"]
        now = time.monotonic()
        due = not moving and now - self._balanced_at >= BALANCE_INTERVAL_S
        if not due and not maintenance:
            return  # nothing to drain, not yet time to even out: no walk over every partition
        partitions = []
        for metadata in list(machine.topics.values()):
            for partition, replicas in enumerate(metadata.replicas):
                leader = self._node.known_leader(metadata.name, partition)
                partitions.append(balancer.Led(metadata.name, partition, replicas, leader))
        draining = any(p.leader in maintenance for p in partitions)
        if not draining and not due:
            return
        self._balanced_at = now
        leaving = machine.node_flags["decommissioning"]
        eligible = [n for n in self._node.alive_nodes() if n not in maintenance and n not in leaving]
        for move in balancer.plan(partitions, eligible, moves_max=1):
            log.info(
                "node %s: leader balance: %s/%d from %s to %s",
                self._node.node_id, move.topic, move.partition, move.source, move.target,
            )  # fmt: skip
            self.leadership_transfers += 1
            await self._change(move.topic, move.partition, "transfer", move.target)


async def _bounded(work: list[Awaitable[None]], at_once: int = 8) -> None:
    """Run the coroutines with at most ``at_once`` in flight; the first failure is raised after all end."""
    semaphore = asyncio.Semaphore(at_once)

    async def one(item: Awaitable[None]) -> None:
        async with semaphore:
            await item

    results = await asyncio.gather(*(one(w) for w in work), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
