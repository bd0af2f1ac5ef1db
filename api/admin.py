"""Operator endpoints: topic configs, replica moves, decommission, maintenance, the controller group's
members.

Requests that change cluster metadata, and reads of move and decommission progress, are served by the
controller leader: the cluster-wide admin service runs them there. Handlers only parse and call it;
``api.errors`` maps what it raises.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aiohttp import web

from api import state
from api.access import ALTER, ALTER_CONFIGS, DESCRIBE, DESCRIBE_CONFIGS, cluster, needs, topic
from api.errors import BadRequest
from api.openapi import Operation
from api.schemas import require_json_body
from partitions.controller.defaults import PARTITIONS_MAX
from partitions.controller.members import ControllerMembers
from partitions.controller.reconfigure import MoveProgress
from partitions.errors import UnknownPartition
from partitions.metadata.service import AdminService, MoveState
from partitions.peers.cluster import FrontDoor, Routed
from partitions.topic_configs import alterable
from raftlog.storage.config import LogConfig
from raftlog_contract import CONTROLLER_PATH, CONTROLLER_VOTERS_PATH, FEATURES_PATH, replicas_path

CONFIG_KEYS_MAX = 64


async def _object(request: web.Request, fields: set[str]) -> dict[str, Any]:
    require_json_body(request.content_type)
    body = await state.json_body(request)
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    unknown = sorted(set(body) - fields)
    if unknown:
        raise BadRequest(f"unknown field(s) {unknown}; expected {sorted(fields)}")
    return body


async def _topic_partition(request: web.Request) -> tuple[str, int]:
    topic = request.match_info["topic"]
    partition = state.partition(request)
    meta = await state.node(request).cluster.admin.call(AdminService.topic, topic)
    if not 0 <= partition < meta.partitions:
        raise UnknownPartition(topic, partition)
    return topic, partition


def _move_body(
    topic: str, partition: int, progress: MoveProgress | None, replicas: list[str]
) -> dict[str, Any]:
    return {
        "topic": topic,
        "partition": partition,
        "replicas": list(replicas),
        "move": None if progress is None else asdict(progress),  # MoveProgress is the answer's shape
    }


def _admin(request: web.Request) -> Routed[AdminService]:
    return state.node(request).cluster.admin


# -- topic configs -------------------------------------------------------------------------------------


async def get_configs(request: web.Request) -> web.Response:
    meta = await _admin(request).call(AdminService.topic, request.match_info["topic"], fresh=True)
    return web.json_response({"topic": meta.name, "configs": dict(meta.configs)})


async def alter_configs(request: web.Request) -> web.Response:
    """Merge the given properties into the topic's configs; every replica applies them live."""
    body = await _object(request, {"configs"})
    configs = body.get("configs")
    if not isinstance(configs, dict) or not configs or len(configs) > CONFIG_KEYS_MAX:
        raise BadRequest(f"configs must be a non-empty object of at most {CONFIG_KEYS_MAX} properties")
    LogConfig.from_properties(alterable(configs))  # read-only, unknown, a bad value: 400, nothing changed
    meta = await _admin(request).call(AdminService.alter_configs, request.match_info["topic"], configs)
    return web.json_response({"topic": meta.name, "configs": dict(meta.configs)})


async def add_partitions(request: web.Request) -> web.Response:
    """Grow a topic to ``partitions`` (placed as a new topic's are); ``validate_only`` checks and places
    without changing anything. Records keep their partitions; keys hash over the new count from now on."""
    body = await _object(request, {"partitions", "validate_only"})
    count, validate_only = body.get("partitions"), body.get("validate_only", False)
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= PARTITIONS_MAX:
        raise BadRequest(f"partitions must be an integer between 1 and {PARTITIONS_MAX}")
    if not isinstance(validate_only, bool):
        raise BadRequest("validate_only must be true or false")
    topic = request.match_info["topic"]
    meta = await _admin(request).call(AdminService.add_partitions, topic, count, validate_only)
    return web.json_response(
        {
            "name": meta.name,
            "partitions": meta.partitions,
            "replication_factor": len(meta.replicas[0]),
            "replicas": [list(r) for r in meta.replicas],
            "configs": dict(meta.configs),
        }
    )


# -- replica moves -------------------------------------------------------------------------------------


async def move_replicas(request: web.Request) -> web.Response:
    body = await _object(request, {"replicas"})
    if "replicas" not in body:
        raise BadRequest("field replicas is required: the node ids of the new replica set")
    topic, partition = await _topic_partition(request)
    progress = await _admin(request).call(AdminService.move_replicas, topic, partition, body["replicas"])
    return web.json_response(_move_body(topic, partition, progress, progress.replicas), status=202)


async def move_progress(request: web.Request) -> web.Response:
    topic, partition = await _topic_partition(request)
    moving: MoveState = await _admin(request).call(AdminService.move_state, topic, partition)
    return web.json_response(_move_body(topic, partition, moving.move, moving.replicas))


async def cancel_move(request: web.Request) -> web.Response:
    topic, partition = await _topic_partition(request)
    progress = await _admin(request).call(AdminService.cancel_move, topic, partition)
    return web.json_response(_move_body(topic, partition, progress, progress.replicas), status=202)


# -- nodes ---------------------------------------------------------------------------------------------


async def decommission(request: web.Request) -> web.Response:
    admin = _admin(request)
    node_id = request.match_info["node_id"]
    await admin.call(AdminService.set_node_flag, node_id, "decommissioning", True)
    return web.json_response(await admin.call(AdminService.decommission_status, node_id), status=202)


async def decommission_progress(request: web.Request) -> web.Response:
    return web.json_response(
        await _admin(request).call(AdminService.decommission_status, request.match_info["node_id"])
    )


async def recommission(request: web.Request) -> web.Response:
    admin = _admin(request)
    node_id = request.match_info["node_id"]
    await admin.call(AdminService.set_node_flag, node_id, "decommissioning", False)
    return web.json_response(await admin.call(AdminService.decommission_status, node_id))


async def maintenance_on(request: web.Request) -> web.Response:
    node_id = request.match_info["node_id"]
    await _admin(request).call(AdminService.set_node_flag, node_id, "maintenance", True)
    return web.json_response({"node_id": node_id, "maintenance": True})


async def maintenance_off(request: web.Request) -> web.Response:
    node_id = request.match_info["node_id"]
    await _admin(request).call(AdminService.set_node_flag, node_id, "maintenance", False)
    return web.json_response({"node_id": node_id, "maintenance": False})


# -- feature levels ------------------------------------------------------------------------------------


def features_body(node: FrontDoor) -> dict[str, Any]:
    """The cluster's finalized levels (as this node applied them) and each node's version and supported
    levels (as gossiped: null for a node of release 0.1.0, which gossips neither, or one unheard)."""
    return {
        "finalized": node.metadata.features().levels(),
        "supported": node.metadata.features().supported(),
        "nodes": {n.node_id: {"version": n.version, "features": n.features} for n in node.metadata.nodes()},
    }


async def describe_features(request: web.Request) -> web.Response:
    return web.json_response(features_body(state.node(request)))


async def update_feature(request: web.Request) -> web.Response:
    """Raise a feature's finalized level (409 naming the nodes whose code does not support it, or for a
    downgrade); the levels once applied."""
    body = await _object(request, {"feature", "level"})
    feature, level = body.get("feature"), body.get("level")
    if not isinstance(feature, str) or not isinstance(level, int) or isinstance(level, bool):
        raise BadRequest("fields feature (a name) and level (an integer) are required")
    finalized = await _admin(request).call(AdminService.update_feature, feature, level)
    answer = features_body(state.node(request))
    answer["finalized"] = finalized  # the controller's, which this node may not have applied yet
    return web.json_response(answer)


# -- the controller group -------------------------------------------------------------------------------


def _controller_body(members: ControllerMembers) -> dict[str, Any]:
    return {
        "leader": members.leader,
        "term": members.term,
        "voters": list(members.voters),
        "learners": list(members.learners),
        "commit_index": members.commit_index,
        "match_index": dict(members.match_index),
        "pending": members.pending,
        # wall-clock ms, as Kafka's DescribeQuorum: when the leader last heard from each member and when
        # each last held its whole log (empty below raftlog.version 2: a 0.1.0 leader keeps neither)
        "last_heard_ms": dict(members.heard_at_ms),
        "caught_up_at_ms": dict(members.caught_up_at_ms),
    }


async def describe_controller(request: web.Request) -> web.Response:
    return web.json_response(_controller_body(await _admin(request).call(AdminService.controller_members)))


async def add_controller_voter(request: web.Request) -> web.Response:
    """202: the node is a learner of the controller group; the controller leader promotes it once it
    has caught up (GET /v1/controller shows it among the voters then)."""
    body = await _object(request, {"node_id"})
    node_id = body.get("node_id")
    if not isinstance(node_id, str) or not node_id:
        raise BadRequest("field node_id is required: the id of the node to add to the controller group")
    members = await _admin(request).call(AdminService.add_controller_voter, node_id)
    return web.json_response(_controller_body(members), status=202)


async def remove_controller_voter(request: web.Request) -> web.Response:
    members = await _admin(request).call(AdminService.remove_controller_voter, request.match_info["node_id"])
    return web.json_response(_controller_body(members))


_MOVES = replicas_path.template  # as the clients build it (raftlog_contract)
_NODE = "/v1/nodes/{node_id}"

ROUTES: tuple[Operation, ...] = (
    Operation(
        "GET", "/v1/topics/{topic}/configs", get_configs, "getTopicConfigs", "A topic's configs", "admin",
        ok_schema="TopicConfigs", errors=(404,),
        access=needs(topic(DESCRIBE_CONFIGS)),
    ),
    Operation(
        "PATCH", "/v1/topics/{topic}/configs", alter_configs, "alterTopicConfigs",
        "Change some of a topic's configs; every replica applies them live", "admin",
        body="ConfigsRequest", ok_schema="TopicConfigs", errors=(404, 415), write=True,
        access=needs(topic(ALTER_CONFIGS)),
    ),
    Operation(
        "POST", "/v1/topics/{topic}/partitions", add_partitions, "addPartitions",
        "Grow a topic to more partitions, placed as a new topic's are", "admin",
        body="AddPartitionsRequest", ok_schema="CreatedTopic", errors=(404, 409, 415, 507), write=True,
        access=needs(topic(ALTER)),
    ),
    Operation(
        "POST", _MOVES, move_replicas, "moveReplicas",
        "Move a partition's replicas, one Raft membership change at a time (202: started)", "admin",
        body="ReplicasRequest", ok_status=202, ok_schema="MoveState", errors=(404, 409, 415), write=True,
        access=needs(cluster(ALTER)),
    ),
    Operation(
        "GET", _MOVES, move_progress, "moveProgress", "A partition's replicas and its move in progress",
        "admin", ok_schema="MoveState", errors=(404,),
        access=needs(cluster(DESCRIBE)),
    ),
    Operation(
        "DELETE", _MOVES, cancel_move, "cancelMove",
        "Cancel a move: its replicas go back to the original set (202)", "admin",
        ok_status=202, ok_schema="MoveState", errors=(404,), write=True,
        access=needs(cluster(ALTER)),
    ),
    Operation(
        "PUT", f"{_NODE}/decommission", decommission, "decommissionNode",
        "Move every replica off a node (202: started; 409 when some replica has no node to go to); GET the "
        "same path for progress", "admin",
        ok_status=202, ok_schema="Decommission", errors=(404, 409), write=True,
        access=needs(cluster(ALTER)),
    ),
    Operation(
        "GET", f"{_NODE}/decommission", decommission_progress, "decommissionProgress",
        "Progress of a decommission", "admin", ok_schema="Decommission", errors=(404,),
        access=needs(cluster(DESCRIBE)),
    ),
    Operation(
        "DELETE", f"{_NODE}/decommission", recommission, "recommissionNode",
        "Recommission: stop a decommission and turn its moves around", "admin",
        ok_schema="Decommission", errors=(404,), write=True,
        access=needs(cluster(ALTER)),
    ),
    Operation(
        "PUT", f"{_NODE}/maintenance", maintenance_on, "startMaintenance",
        "Drain a node's leadership and keep it away until cleared", "admin",
        ok_schema="Maintenance", errors=(404,), write=True,
        access=needs(cluster(ALTER)),
    ),
    Operation(
        "DELETE", f"{_NODE}/maintenance", maintenance_off, "endMaintenance",
        "Let a node lead again", "admin", ok_schema="Maintenance", errors=(404,), write=True,
        access=needs(cluster(ALTER)),
    ),
    Operation(
        "GET", FEATURES_PATH, describe_features, "describeFeatures",
        "The cluster's finalized feature levels and each node's version and supported levels", "admin",
        ok_schema="Features", local=True, access=needs(cluster(DESCRIBE)),
    ),
    Operation(
        "POST", FEATURES_PATH, update_feature, "updateFeature",
        "Finalize a feature at a higher level once every node supports it (409 naming those that do not, "
        "or for a downgrade)", "admin",
        body="FeatureUpdateRequest", ok_schema="Features", errors=(409, 415), write=True,
        access=needs(cluster(ALTER)),
    ),
    Operation(
        "GET", CONTROLLER_PATH, describe_controller, "describeController",
        "The controller group: its leader, voters, learners joining and how far each is", "admin",
        ok_schema="Controller",
        access=needs(cluster(DESCRIBE)),
    ),
    Operation(
        "POST", CONTROLLER_VOTERS_PATH, add_controller_voter, "addControllerVoter",
        "Add a node to the controller group: a learner now, a voter once caught up (202: started; 409 "
        "while another change is in progress)", "admin",
        body="ControllerVoterRequest", ok_status=202, ok_schema="Controller", errors=(404, 409, 415),
        write=True,
        access=needs(cluster(ALTER)),
    ),
    Operation(
        "DELETE", "/v1/controller/voters/{node_id}", remove_controller_voter, "removeControllerVoter",
        "Remove a node from the controller group (a leader hands over first; 409 when it would leave no "
        "live majority, or while another change is in progress)", "admin",
        ok_schema="Controller", errors=(404, 409), write=True,
        access=needs(cluster(ALTER)),
    ),
)  # fmt: skip
