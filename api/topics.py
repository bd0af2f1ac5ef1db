"""Topics, partitions, nodes and the cluster's health: what they are and who leads them.

A partition's leader is named only when it is known (``known_leader``, never the routing guess), and only
the leader knows which replicas are in sync, so a partition's view is asked of its leader through the
cluster-wide admin service; a leader that cannot be asked is still named, with ``in_sync`` unknown. A
replica that cannot open or replay carries its error and is never in sync.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict, dataclass
from typing import Any

from aiohttp import web

from api import access, state
from api.access import DESCRIBE
from api.errors import BadRequest
from api.schemas import parse_create_topic, query_str, require_json_body
from partitions.controller.state import TopicMetadata
from partitions.errors import InvalidTopic, PeerUnreachable, UnknownPartition
from partitions.metadata.service import AdminService, NodeInfo, PartitionState, ReplicaState
from partitions.names import broker_id, is_internal
from partitions.peers.cluster import FrontDoor
from partitions.replicas.failures import ReplicaFailure
from partitions.security.acls import CLUSTER_NAME
from raftlog.consensus.errors import ConsensusError, NoLeader
from raftlog.errors import RaftlogError

log = logging.getLogger(__name__)

REPLICATION_FACTOR_DEFAULT_MAX = 3
VIEW_CALLS_MAX = 16  # partitions of one topic asked of their leaders at once
Failures = dict[tuple[str, int], dict[str, str]]  # (topic, partition) -> node -> why it cannot open or replay


def _failures(node: FrontDoor) -> Failures:
    table: Failures = {}
    for failure in node.metadata.failed_replicas():
        table.setdefault((failure.topic, failure.partition), {})[failure.node] = failure.error
    return table


def _replica_views(
    meta: TopicMetadata,
    partition: int,
    leader: str | None,
    detail: PartitionState | None,
    failed: dict[str, str],
) -> list[dict[str, Any]]:
    """The replicas of one partition: ``in_sync`` from the leader's view (``detail``), unknown (None)
    without it; a replica that cannot open or replay is never in sync and carries its error."""
    states = {} if detail is None else {r.node: r for r in detail.replicas}
    views = []
    for replica in meta.replicas[partition]:
        known = states.get(replica)
        error = known.error if known is not None and known.error is not None else failed.get(replica)
        in_sync = False if error is not None else (None if known is None else known.in_sync)
        views.append(
            {
                "broker": broker_id(replica),
                "node": replica,
                "leader": replica == leader,
                "in_sync": in_sync,
                "error": error,
            }
        )
    return views


async def _view(node: FrontDoor, meta: TopicMetadata, partition: int, failures: Failures) -> dict[str, Any]:
    """One partition as its leader tells it (no leader known: leader null, ``in_sync`` unknown)."""
    leader = node.metadata.known_leader(meta.name, partition)  # never a routing guess
    detail = None
    if leader is not None:
        try:
            detail = (await node.cluster.admin.run(AdminService.partition_state, meta.name, partition)).value
        except NoLeader:
            leader = None  # lost it this moment, no successor known
        except RaftlogError as exc:
            log.info("%s/%d: leader %s not asked for its view (%s)", meta.name, partition, leader, exc)
        else:
            leader = detail.leader
    failed = failures.get((meta.name, partition), {})
    return {
        "partition": partition,
        "leader": leader,
        "replicas": _replica_views(meta, partition, leader, detail, failed),
    }


async def _partition_views(node: FrontDoor, meta: TopicMetadata) -> list[dict[str, Any]]:
    failures = _failures(node)
    semaphore = asyncio.Semaphore(VIEW_CALLS_MAX)

    async def one(partition: int) -> dict[str, Any]:
        async with semaphore:
            return await _view(node, meta, partition, failures)

    return list(await asyncio.gather(*(one(p) for p in range(meta.partitions))))


async def _topic_partition(node: FrontDoor, topic: str, partition: int) -> TopicMetadata:
    meta = await node.cluster.admin.call(AdminService.topic, topic)
    if not 0 <= partition < meta.partitions:
        raise UnknownPartition(topic, partition)
    return meta


async def list_topics(request: web.Request) -> web.Response:
    """The topics the caller may DESCRIBE (every one when ACLs are not enforced), as Kafka's Metadata of
    every topic leaves out the others."""
    names = (t for t in state.node(request).metadata.topics() if not is_internal(t))
    return web.json_response(sorted(t for t in names if access.allowed(request, access.TOPIC, DESCRIBE, t)))


async def get_topic(request: web.Request) -> web.Response:
    """The topic as the controller leader has it now (a change just answered is in it), its partitions
    as their leaders see them."""
    node = state.node(request)
    meta = await node.cluster.admin.call(AdminService.topic, request.match_info["topic"], fresh=True)
    return web.json_response(
        {
            "name": meta.name,
            "partitions": await _partition_views(node, meta),
            "replication_factor": len(meta.replicas[0]) if meta.replicas else 0,
            "configs": dict(meta.configs),
        }
    )


async def get_partitions(request: web.Request) -> web.Response:
    node = state.node(request)
    meta = await node.cluster.admin.call(AdminService.topic, request.match_info["topic"])
    return web.json_response(await _partition_views(node, meta))


async def get_partition(request: web.Request) -> web.Response:
    node = state.node(request)
    partition = state.partition(request)
    meta = await _topic_partition(node, request.match_info["topic"], partition)
    return web.json_response(await _view(node, meta, partition, _failures(node)))


CREATE_TOPIC_NEEDS = "CREATE cluster, or CREATE topic: the topic of the body"  # Kafka's CreateTopics


async def create_topic(request: web.Request) -> web.Response:
    node = state.node(request)
    require_json_body(request.content_type)
    wanted = parse_create_topic(await state.json_body(request))
    if not access.allowed(request, access.CLUSTER, access.CREATE, CLUSTER_NAME):
        access.authorize(request, access.TOPIC, access.CREATE, wanted.name)
    factor = wanted.replication_factor
    if factor is None:
        alive = sum(1 for n in node.metadata.nodes() if n.state == "alive")
        factor = min(REPLICATION_FACTOR_DEFAULT_MAX, max(1, alive))
    meta = await node.cluster.admin.call(
        AdminService.create_topic, wanted.name, wanted.partitions, factor, wanted.configs
    )
    return web.json_response(
        {
            "name": meta.name,
            "partitions": meta.partitions,
            "replication_factor": len(meta.replicas[0]) if meta.replicas else factor,
            "replicas": [list(r) for r in meta.replicas],
            "configs": dict(meta.configs),
        },
        status=201,
    )


async def delete_topic(request: web.Request) -> web.Response:
    topic = request.match_info["topic"]
    if is_internal(topic):
        raise InvalidTopic(f"topic {topic!r} is internal (consumer groups, transactions): not deleted")
    await state.node(request).cluster.admin.call(AdminService.delete_topic, topic)
    return web.Response(status=204)


async def partition_state(request: web.Request) -> web.Response:
    """The partition's leader's view (only it knows how far each replica's Raft log matches its own and
    how many entries behind it is). ``match_index`` is that Raft index; ``match_offset`` is the same
    number under the name the API contract gave it (it is not a record offset: a Raft log also holds
    entries that append no record). Each replica carries ``node_state``, its node as gossip sees it here
    (a replica on a dead node is down, not merely lagging). A leader that cannot be reached (its node just
    died, no successor known yet) is answered with what this node knows: the replicas, no offsets, and
    ``leader_error`` saying why."""
    node = state.node(request)
    topic, partition = request.match_info["topic"], state.partition(request)
    leader_error = None
    try:
        served = await node.cluster.admin.run(AdminService.partition_state, topic, partition)
    except PeerUnreachable as exc:
        detail = await _unreached_state(node, topic, partition)
        leader_error = (
            f"its leader {exc.node_id} did not answer (node {_liveness(node, exc.node_id)}): {exc.reason}"
        )
    else:
        detail = served.value
    state.served_by(request, detail.leader or "")
    liveness = {n.node_id: n.state for n in node.metadata.nodes()}
    body = asdict(detail)
    body["leader_error"] = leader_error
    for replica in body["replicas"]:
        replica["match_index"] = replica["match_offset"]
        replica["node_state"] = liveness.get(replica["node"], "dead")  # gossip has not heard of it: dead
    return web.json_response(body)


def _liveness(node: FrontDoor, node_id: str) -> str:
    return next((n.state for n in node.metadata.nodes() if n.node_id == node_id), "dead")


async def _unreached_state(node: FrontDoor, topic: str, partition: int) -> PartitionState:
    """What this node knows of a partition whose leader it could not reach: its replicas (those that
    cannot open or replay failed, the others unknown), its move, and no leader, term or offsets."""
    meta = await _topic_partition(node, topic, partition)
    failed = _failures(node).get((topic, partition), {})
    replicas = [
        ReplicaState(n, "failed", in_sync=False, error=failed[n])
        if n in failed
        else ReplicaState(n, "unknown")
        for n in meta.replicas[partition]
    ]
    move = next((m.move for m in node.metadata.moves() if (m.topic, m.partition) == (topic, partition)), None)
    return PartitionState(topic, partition, None, None, None, None, replicas, move)


async def transfer_leadership(request: web.Request) -> web.Response:
    node = state.node(request)
    partition = state.partition(request)
    target = query_str(request.query, "target")
    meta = await _topic_partition(node, request.match_info["topic"], partition)
    if target is not None and target not in meta.replicas[partition]:
        raise BadRequest(f"query parameter target: {target!r} is not a replica of {meta.name}/{partition}")
    timeout_ms = state.state(request).settings.admin_timeout_ms
    served = await node.cluster.admin.run(
        AdminService.transfer_leadership, meta.name, partition, target, timeout_ms
    )
    state.served_by(request, served.node)
    return web.json_response({"topic": meta.name, "partition": partition, "leader": served.value})


# -- the cluster -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionHealth:
    controller: str | None
    down: list[str]
    failed: list[ReplicaFailure]
    leaderless: list[dict[str, Any]]
    under_replicated: list[dict[str, Any]]
    disk_full: list[str]  # nodes refusing writes for want of room (not down)
    kept_out: dict[str, str]  # node -> why it takes no part (its code below the finalized feature levels)
    doors_missing: dict[str, list[str]]  # alive node -> the doors the others serve that it lacks

    @property
    def healthy(self) -> bool:
        problems = (
            self.down
            or self.failed
            or self.leaderless
            or self.under_replicated
            or self.disk_full
            or self.kept_out
            or self.doors_missing
        )
        return self.controller is not None and not problems


async def partition_health(node: FrontDoor) -> PartitionHealth:
    """From this node's view. A partition is leaderless when no leader is known (this node's replica, or
    gossiped claims: never a routing guess, never a replica that cannot open or replay); under-replicated
    when a replica's node is not alive, a replica cannot open or replay (on any node: each gossips its
    own), or this node leads it and a replica is not in sync. A node whose disk is full (as it gossips)
    is listed apart: it serves reads and refuses writes, and leads nothing another replica can lead. So is
    a node kept out (its code cannot read the cluster's finalized formats: ``features.kept_out``): its
    replicas count as missing. And a node lacking a door the others serve (no Kafka listener): it leads
    nothing (``Routing.may_lead``), and health is not healthy until it is started with one."""
    view = node.metadata
    nodes = view.nodes()
    failed = view.failed_replicas()
    failed_partitions = {(f.topic, f.partition) for f in failed}
    states = {n.node_id: n.state for n in nodes}
    retired = {n.node_id for n in nodes if n.decommissioned}  # emptied by a decommission: may be gone
    kept_out = {n.node_id: n.kept_out for n in nodes if n.kept_out is not None}
    alive = {n.node_id for n in nodes if n.state == "alive"}
    doors_missing = {
        n.node_id: list(n.doors_missing) for n in nodes if n.doors_missing and n.node_id in alive
    }
    down = sorted(n for n, s in states.items() if s in ("dead", "left") and n not in retired)
    leaderless = []
    under_replicated = []
    for name in sorted(view.topics()):
        try:
            meta = view.topic(name)
        except RaftlogError:
            continue  # deleted while we looked
        for partition, replicas in enumerate(meta.replicas):
            where = {"topic": name, "partition": partition}
            if view.known_leader(name, partition) is None:
                leaderless.append(where)
            lagging = (name, partition) in failed_partitions or any(
                states.get(n) != "alive" or n in kept_out for n in replicas
            )
            if not lagging and node.node_id in replicas:
                try:
                    detail = await node.local.admin.partition_state(name, partition)
                except ConsensusError:
                    pass  # not led here: the membership view above is what this node knows
                else:
                    led_here = detail.leader == node.node_id
                    lagging = led_here and not all(r.in_sync for r in detail.replicas)
            if lagging:
                under_replicated.append(where)
    full = sorted(n.node_id for n in nodes if n.disk_full and n.node_id not in down)
    return PartitionHealth(
        view.controller(), down, failed, leaderless, under_replicated, full, kept_out, doors_missing
    )


async def partition_health_metrics(node: FrontDoor) -> dict[str, float]:
    health = await partition_health(node)
    return {
        "partitions_leaderless": len(health.leaderless),
        "partitions_under_replicated": len(health.under_replicated),
        "nodes_down": len(health.down),
    }


async def cluster_health(request: web.Request) -> web.Response:
    """Redpanda's shape, from this node's view (``partition_health``). Healthy needs a controller, no node
    down, kept out, lacking a door or with a full disk, no failed replica, and no leaderless or
    under-replicated partition."""
    node = state.node(request)
    health = await partition_health(node)
    nodes = node.metadata.nodes()
    return web.json_response(
        {
            "is_healthy": health.healthy,
            "controller": health.controller,
            "nodes": sorted(n.node_id for n in nodes),
            "nodes_down": health.down,
            "nodes_disk_full": health.disk_full,
            "nodes_kept_out": health.kept_out,
            "nodes_missing_doors": health.doors_missing,
            "leaderless_partitions": health.leaderless,
            "under_replicated_partitions": health.under_replicated,
            "failed_replicas": [asdict(f) for f in health.failed],
            **health_extras(node, nodes),
        }
    )


def health_extras(node: FrontDoor, nodes: list[NodeInfo]) -> dict[str, Any]:
    """What health adds for operators: each node's disk use and whether it is full (as it last gossiped),
    nodes in maintenance, being decommissioned or decommissioned, and partitions moving."""
    moving = [
        {"topic": m.topic, "partition": m.partition, "target": m.move.target}
        for m in node.metadata.moves()
        if m.move is not None
    ]
    return {
        "disk": {
            n.node_id: {"used_bytes": n.disk_used_bytes, "free_bytes": n.disk_free_bytes, "full": n.disk_full}
            for n in nodes
        },
        "nodes_maintenance": sorted(n.node_id for n in nodes if n.maintenance),
        # still moving replicas off; then decommissioned: none left (``decommission.finished``), may stop
        "nodes_decommissioning": sorted(
            n.node_id for n in nodes if n.decommissioning and not n.decommissioned
        ),
        "nodes_decommissioned": sorted(n.node_id for n in nodes if n.decommissioned),
        "moving_partitions": moving,
    }


async def list_brokers(request: web.Request) -> web.Response:
    """Confluent's ``{"brokers": [id, ...]}``: the broker id (``partitions.names.broker_id``, the one
    Kafka clients see) of every node this node knows, whatever its state."""
    ids = sorted({broker_id(n.node_id) for n in state.node(request).metadata.nodes()})
    return web.json_response({"brokers": ids})


async def list_nodes(request: web.Request) -> web.Response:
    nodes = state.node(request).metadata.nodes()
    return web.json_response([asdict(n) for n in sorted(nodes, key=lambda n: n.node_id)])
