"""Operator endpoints: topic configs, replica moves, decommission, maintenance, and the internal call the
controller leader uses to drive a move on a partition's leader.

Requests that change cluster metadata are served by the controller leader: the broker raises
``NotLeader`` elsewhere and the API's error middleware forwards them, as for topic creation. Handlers only
parse and call the broker; ``api.errors`` maps what the broker raises.
"""

from __future__ import annotations

import base64
from dataclasses import asdict, dataclass
from typing import Any

from aiohttp import web

from api.bodies import read_body
from api.errors import BadRequest
from api.openapi import Operation, Param
from api.schemas import parse_json, path_partition, query_int, require_json_body
from partitions.broker import Broker, NodeInfo
from partitions.controller import CONTROLLER_GROUP
from partitions.errors import UnknownPartition, UnknownTopic
from partitions.reconfigure import MoveProgress
from raftlog.consensus.errors import NoLeader, NotLeader
from raftlog.storage.config import LogConfig

CONFIG_KEYS_MAX = 64


@dataclass(frozen=True, slots=True)
class Context:
    broker: Broker
    admin_timeout_ms: int
    request_bytes_max: int


CONTEXT = web.AppKey("raftlog_admin", Context)


def _context(request: web.Request) -> Context:
    return request.app[CONTEXT]


async def _object(request: web.Request, fields: set[str]) -> dict[str, Any]:
    require_json_body(request.content_type)
    body = parse_json(await read_body(request, _context(request).request_bytes_max))
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    unknown = sorted(set(body) - fields)
    if unknown:
        raise BadRequest(f"unknown field(s) {unknown}; expected {sorted(fields)}")
    return body


def _on_controller(broker: Broker) -> None:
    """Reads of move and decommission progress are answered by the controller leader, which has applied
    every committed step (a follower of the controller group may be a heartbeat behind)."""
    controller = broker.controller()
    if controller is None:
        raise NoLeader(CONTROLLER_GROUP)
    if controller != broker.node_id:
        raise NotLeader(CONTROLLER_GROUP, controller)


def _topic_partition(request: web.Request) -> tuple[str, int]:
    broker = _context(request).broker
    topic = request.match_info["topic"]
    partition = path_partition(request.match_info["partition"])
    if not 0 <= partition < broker.topic(topic).partitions:
        raise UnknownPartition(topic, partition)
    return topic, partition


def _move_body(
    topic: str, partition: int, progress: MoveProgress | None, replicas: list[str]
) -> dict[str, Any]:
    return {
        "topic": topic,
        "partition": partition,
        "replicas": list(replicas),
        "move": None if progress is None else asdict(progress),
    }


def health_extras(broker: Broker, nodes: list[NodeInfo]) -> dict[str, Any]:
    """What ``GET /v1/cluster/health`` adds for operators: each node's disk use (as it last gossiped),
    nodes in maintenance or being decommissioned, and partitions moving."""
    moving = []
    for name in sorted(broker.topics()):
        try:
            partitions = broker.topic(name).partitions
        except UnknownTopic:
            continue  # deleted while we looked
        for partition in range(partitions):
            progress = broker.move_progress(name, partition)
            if progress is not None:
                moving.append({"topic": name, "partition": partition, "target": progress.target})
    return {
        "disk": {
            n.node_id: {"used_bytes": n.disk_used_bytes, "free_bytes": n.disk_free_bytes} for n in nodes
        },
        "nodes_maintenance": sorted(n.node_id for n in nodes if n.maintenance),
        "nodes_decommissioning": sorted(n.node_id for n in nodes if n.decommissioning),
        "moving_partitions": moving,
    }


def decommissioned(broker: Broker, nodes: list[NodeInfo]) -> set[str]:
    """Nodes being decommissioned that hold no replica any more: their absence is not a fault."""
    leaving = {n.node_id for n in nodes if n.decommissioning}
    if not leaving:
        return leaving
    for name in broker.topics():
        try:
            assignment = broker.topic(name).replicas
        except UnknownTopic:
            continue  # deleted while we looked
        for replicas in assignment:
            leaving -= set(replicas)
    return leaving


# -- topic configs -------------------------------------------------------------------------------------


async def get_configs(request: web.Request) -> web.Response:
    meta = _context(request).broker.topic(request.match_info["topic"])
    return web.json_response({"topic": meta.name, "configs": meta.configs})


async def alter_configs(request: web.Request) -> web.Response:
    """Merge the given properties into the topic's configs; every replica applies them live."""
    body = await _object(request, {"configs"})
    configs = body.get("configs")
    if not isinstance(configs, dict) or not configs or len(configs) > CONFIG_KEYS_MAX:
        raise BadRequest(f"configs must be a non-empty object of at most {CONFIG_KEYS_MAX} properties")
    LogConfig.from_properties(configs)  # an unknown property or a bad value: 400 before anything changes
    meta = await _context(request).broker.alter_configs(request.match_info["topic"], configs)
    return web.json_response({"topic": meta.name, "configs": meta.configs})


# -- replica moves -------------------------------------------------------------------------------------


async def move_replicas(request: web.Request) -> web.Response:
    body = await _object(request, {"replicas"})
    if "replicas" not in body:
        raise BadRequest("field replicas is required: the node ids of the new replica set")
    topic, partition = _topic_partition(request)
    broker = _context(request).broker
    progress = await broker.move_replicas(topic, partition, body["replicas"])
    return web.json_response(_move_body(topic, partition, progress, progress.replicas), status=202)


async def move_progress(request: web.Request) -> web.Response:
    topic, partition = _topic_partition(request)
    broker = _context(request).broker
    _on_controller(broker)
    progress = broker.move_progress(topic, partition)
    return web.json_response(
        _move_body(topic, partition, progress, list(broker.topic(topic).replicas[partition]))
    )


async def cancel_move(request: web.Request) -> web.Response:
    topic, partition = _topic_partition(request)
    progress = await _context(request).broker.cancel_move(topic, partition)
    return web.json_response(_move_body(topic, partition, progress, progress.replicas), status=202)


# -- nodes ---------------------------------------------------------------------------------------------


async def decommission(request: web.Request) -> web.Response:
    broker = _context(request).broker
    node_id = request.match_info["node_id"]
    await broker.set_node_flag(node_id, "decommissioning", True)
    return web.json_response(broker.decommission_status(node_id), status=202)


async def decommission_progress(request: web.Request) -> web.Response:
    broker = _context(request).broker
    _on_controller(broker)
    return web.json_response(broker.decommission_status(request.match_info["node_id"]))


async def recommission(request: web.Request) -> web.Response:
    broker = _context(request).broker
    node_id = request.match_info["node_id"]
    await broker.set_node_flag(node_id, "decommissioning", False)
    return web.json_response(broker.decommission_status(node_id))


async def maintenance_on(request: web.Request) -> web.Response:
    node_id = request.match_info["node_id"]
    await _context(request).broker.set_node_flag(node_id, "maintenance", True)
    return web.json_response({"node_id": node_id, "maintenance": True})


async def maintenance_off(request: web.Request) -> web.Response:
    node_id = request.match_info["node_id"]
    await _context(request).broker.set_node_flag(node_id, "maintenance", False)
    return web.json_response({"node_id": node_id, "maintenance": False})


# -- internal (cluster credential, checked by the app for every INTERNAL_PREFIX path): the controller
# leader driving a move on the partition leader ------------------------------------------------------


async def member_view(request: web.Request) -> web.Response:
    topic, partition = _topic_partition(request)
    view = _context(request).broker.member_view(topic, partition)
    return web.json_response(
        {
            "leader": view.leader,
            "voters": sorted(view.voters),
            "commit_index": view.commit_index,
            "match_index": dict(view.match_index),
        }
    )


async def change_membership(request: web.Request) -> web.Response:
    body = await _object(request, {"change", "node"})
    change, node = body.get("change"), body.get("node")
    if change not in ("add", "remove", "transfer") or not isinstance(node, str) or not node:
        raise BadRequest('expected {"change": "add" | "remove" | "transfer", "node": "<node id>"}')
    topic, partition = _topic_partition(request)
    context = _context(request)
    await context.broker.change_membership(topic, partition, change, node, context.admin_timeout_ms)
    return web.json_response({"topic": topic, "partition": partition, "change": change, "node": node})


async def controller_metadata(request: web.Request) -> web.Response:
    """The snapshot is left out (null) when the caller already holds ``applied_index``."""
    known = query_int(request.query, "applied_index", None, 0, 2**63 - 1)
    broker = _context(request).broker
    leader, leader_http, applied_index, snapshot = await broker.controller_snapshot(known)
    return web.json_response(
        {
            "leader": leader,
            "leader_http": leader_http,
            "applied_index": applied_index,
            "snapshot": None if snapshot is None else base64.b64encode(snapshot).decode("ascii"),
        }
    )


async def replica_failures(request: web.Request) -> web.Response:
    """This node's replicas that cannot open or replay, for a peer whose gossip carried only their digest
    (the list did not fit the gossip metadata)."""
    broker = _context(request).broker
    digest, failures = broker.replica_failures()
    rows = [
        {"topic": f.topic, "partition": f.partition, "error": f.error, "attempts": f.attempts}
        for f in failures
    ]
    return web.json_response({"node": broker.node_id, "digest": digest, "failures": rows})


_MOVES = "/v1/partitions/{topic}/{partition}/replicas"
_NODE = "/v1/nodes/{node_id}"
_MEMBERSHIP = "/replication/partitions/{topic}/{partition}/membership"

ROUTES: tuple[Operation, ...] = (
    Operation(
        "GET", "/v1/topics/{topic}/configs", get_configs, "getTopicConfigs", "A topic's configs", "admin",
        ok_schema="TopicConfigs", errors=(404,),
    ),
    Operation(
        "PATCH", "/v1/topics/{topic}/configs", alter_configs, "alterTopicConfigs",
        "Change some of a topic's configs; every replica applies them live", "admin",
        body="ConfigsRequest", ok_schema="TopicConfigs", errors=(404, 415), write=True,
    ),
    Operation(
        "POST", _MOVES, move_replicas, "moveReplicas",
        "Move a partition's replicas, one Raft membership change at a time (202: started)", "admin",
        body="ReplicasRequest", ok_status=202, ok_schema="MoveState", errors=(404, 409, 415), write=True,
    ),
    Operation(
        "GET", _MOVES, move_progress, "moveProgress", "A partition's replicas and its move in progress",
        "admin", ok_schema="MoveState", errors=(404,),
    ),
    Operation(
        "DELETE", _MOVES, cancel_move, "cancelMove",
        "Cancel a move: its replicas go back to the original set (202)", "admin",
        ok_status=202, ok_schema="MoveState", errors=(404,), write=True,
    ),
    Operation(
        "PUT", f"{_NODE}/decommission", decommission, "decommissionNode",
        "Move every replica off a node (202: started; 409 when some replica has no node to go to); GET the "
        "same path for progress", "admin",
        ok_status=202, ok_schema="Decommission", errors=(404, 409), write=True,
    ),
    Operation(
        "GET", f"{_NODE}/decommission", decommission_progress, "decommissionProgress",
        "Progress of a decommission", "admin", ok_schema="Decommission", errors=(404,),
    ),
    Operation(
        "DELETE", f"{_NODE}/decommission", recommission, "recommissionNode",
        "Recommission: stop a decommission and turn its moves around", "admin",
        ok_schema="Decommission", errors=(404,), write=True,
    ),
    Operation(
        "PUT", f"{_NODE}/maintenance", maintenance_on, "startMaintenance",
        "Drain a node's leadership and keep it away until cleared", "admin",
        ok_schema="Maintenance", errors=(404,), write=True,
    ),
    Operation(
        "DELETE", f"{_NODE}/maintenance", maintenance_off, "endMaintenance",
        "Let a node lead again", "admin", ok_schema="Maintenance", errors=(404,), write=True,
    ),
    Operation(
        "GET", _MEMBERSHIP, member_view, "memberView",
        "Internal: the partition leader's Raft voters and progress (cluster credential)", "operations",
        ok_schema="MemberView", errors=(401, 404),
    ),
    Operation(
        "POST", _MEMBERSHIP, change_membership, "changeMembership",
        "Internal: add or remove a voter, or transfer leadership (cluster credential)", "operations",
        body="MembershipChange", ok_schema="MembershipChanged", errors=(401, 404, 409, 415), write=True,
    ),
    Operation(
        "GET", "/replication/controller", controller_metadata, "controllerMetadata",
        "Internal: the controller's applied metadata, for nodes outside the controller group "
        "(cluster credential)", "operations",
        query=(Param("applied_index", "integer", "the caller's: no snapshot when unchanged", minimum=0),),
        ok_schema="ControllerMetadata", errors=(401, 503),
    ),
    Operation(
        "GET", "/replication/failures", replica_failures, "replicaFailures",
        "Internal: this node's partition replicas that cannot open or replay (cluster credential)",
        "operations", ok_schema="ReplicaFailures", errors=(401,), forward=False,
    ),
)  # fmt: skip
