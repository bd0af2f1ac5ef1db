"""The public HTTP API's wire contract, named once: media types, header names, the error codes a client
acts on and the paths. The server (``api/``) imports these names rather than spelling them again, and
every client builds its requests from them (no module outside this package and the server spells a path
of the API: ``tests/test_architecture.py``), so the two sides cannot drift apart. ``api/README.md`` and
``GET /openapi.json`` describe them."""

from __future__ import annotations

import functools
import urllib.parse

# -- media types -----------------------------------------------------------------------------------------

JSON_V2 = "application/vnd.kafka.json.v2+json"  # records whose key and value are any JSON
BINARY_V2 = "application/vnd.kafka.binary.v2+json"  # records whose key, value and header values are base64
PLAIN_JSON = "application/json"  # JSON records, and every admin body
KAFKA_V2 = "application/vnd.kafka.v2+json"  # Confluent's content type of consumer-instance requests
RECORD_BATCH = "application/vnd.raftlog.batch.v2"  # one Kafka RecordBatch v2, as stored (ADR 0007, 0011)
LEGACY_RECORD_BATCH = "application/vnd.raftlog.batch.v1"  # the format before v2: refused, naming the new one
COLUMNAR_MSGPACK = "application/vnd.raftlog.columnar.v1+msgpack"  # a fetch page as parallel arrays
COLUMNAR_JSON = "application/vnd.raftlog.columnar.v1+json"  # the same page as JSON, bytes as base64

# -- headers ---------------------------------------------------------------------------------------------

LEADER_HEADER = "X-Raftlog-Leader"  # the node that served the request (comma-separated over several)
HIGH_WATERMARK_HEADER = "X-Raftlog-High-Watermark"  # a fetch's partition end
GENERATION_HEADER = "X-Raftlog-Generation"  # a consumer group's generation, on its records and assignments

# -- error codes a client acts on (the whole table: api/errors.py) ----------------------------------------

NOT_AUTHORIZED = 40301  # 403 (serve --acls): the caller's ACLs do not allow it; nothing was done
UNKNOWN_TOPIC = 40401
UNKNOWN_INSTANCE = 40403  # the consumer instance is gone (evicted, deleted): join again
INSTANCE_EXISTS = 40902  # an earlier attempt whose answer was lost created the instance (Confluent's code)
SEQUENCE_TOO_OLD = 40913  # an idempotent produce the partition already holds: it was written
RECORD_TOO_LARGE = 41301  # a batch (or request) above the topic's max.message.bytes: send less at once
STALE_GENERATION = 40905  # the group rebalanced: read the assignment again
PARTITION_NOT_ASSIGNED = 40906  # not this member's partition (any more)
FENCED_CODES = frozenset({STALE_GENERATION, PARTITION_NOT_ASSIGNED})  # a commit refused after a rebalance
OFFSET_OUT_OF_RANGE = 41601  # the body adds log_start_offset and end_offset
NOT_DONE_CODES = range(50300, 50400)  # 503xx: nothing was done (no leader, overloaded, ...): retry
OUTCOME_UNKNOWN_CODES = range(50400, 50500)  # 504xx: done or not; repeat only what is idempotent
DISK_FULL = 50701  # 507: the leader's disk is full; nothing was done (later, or another leader, may take it)


def retriable(error_code: int | None) -> bool:
    """Whether an error is worth repeating (the server marks the same answers ``"retriable": true``):
    503xx and 50701 always (not done), 504xx where repeating is safe (reads, idempotent produce)."""
    return error_code is not None and (
        error_code in NOT_DONE_CODES or error_code == DISK_FULL or error_code in OUTCOME_UNKNOWN_CODES
    )


# -- paths (the server's routes: ``api/app.py``'s ``ROUTES``; a test matches each against them) ------------
# Builders of a partition's paths are cached: a load generator asks for the same few paths over and over.

READY_PATH = "/status/ready"  # 200 once the node serves, 503 before
LIVE_PATH = "/status/live"
METRICS_PATH = "/metrics"  # Prometheus text
TOPICS_PATH = "/topics"
ADMIN_PREFIX = "/v1/"  # the admin API: with ``serve --admin-token``, every path under it needs the token
ADMIN_TOPICS_PATH = "/v1/topics"
NODES_PATH = "/v1/nodes"
HEALTH_PATH = "/v1/cluster/health"
CONTROLLER_PATH = "/v1/controller"  # GET: the controller group's leader, voters and learners
CONTROLLER_VOTERS_PATH = "/v1/controller/voters"  # POST {"node_id"}: add a node to the controller group
CONSUMER_GROUPS_PATH = "/v1/consumer-groups"
USERS_PATH = "/v1/users"
ACLS_PATH = "/v1/acls"  # GET (a filter's query), POST {"acls"}, DELETE (a filter's query, or {"filters"})


def segment(name: str) -> str:
    """A name (topic, group, instance, node, user) as one path segment, every reserved character escaped."""
    return urllib.parse.quote(name, safe="")


@functools.lru_cache(maxsize=1024)
def topic_path(topic: str) -> str:
    """A topic: its description (GET), a produce that partitions the records (POST)."""
    return f"{TOPICS_PATH}/{segment(topic)}"


def partitions_path(topic: str) -> str:
    """Every partition of a topic, each with its leader and replicas."""
    return f"{topic_path(topic)}/partitions"


@functools.lru_cache(maxsize=4096)
def partition_path(topic: str, partition: int) -> str:
    """One partition: its view (GET), a produce to it (POST: records, or one record batch)."""
    return f"{partitions_path(topic)}/{partition}"


@functools.lru_cache(maxsize=4096)
def records_path(topic: str, partition: int) -> str:
    """A fetch (GET, ``offset``, ``max_bytes``, ``timeout``)."""
    return f"{partition_path(topic, partition)}/records"


def offsets_path(topic: str, partition: int) -> str:
    """A partition's beginning and end offsets (GET), or the first offset at a time (``timestamp``)."""
    return f"{partition_path(topic, partition)}/offsets"


def group_path(group: str) -> str:
    """A consumer group: POST makes an instance in it."""
    return f"/consumers/{segment(group)}"


def group_offsets_path(group: str) -> str:
    """A group's committed offsets, outside any instance (POST commits, GET reads)."""
    return f"{group_path(group)}/offsets"


def instance_path(group: str, instance: str) -> str:
    """A consumer instance; its resources (``/subscription``, ``/assignments``, ``/positions``,
    ``/records``, ``/offsets``) are below it."""
    return f"{group_path(group)}/instances/{segment(instance)}"


def admin_topic_path(topic: str) -> str:
    """DELETE removes a topic."""
    return f"{ADMIN_TOPICS_PATH}/{segment(topic)}"


def topic_configs_path(topic: str) -> str:
    return f"{admin_topic_path(topic)}/configs"


def topic_partitions_path(topic: str) -> str:
    return f"{admin_topic_path(topic)}/partitions"


def partition_state_path(topic: str, partition: int) -> str:
    """A partition as its leader sees it: replicas, lag, in sync."""
    return f"/v1/partitions/{segment(topic)}/{partition}"


def transfer_leadership_path(topic: str, partition: int) -> str:
    return f"{partition_state_path(topic, partition)}/transfer_leadership"


def replicas_path(topic: str, partition: int) -> str:
    """A partition's replica move: POST starts one, GET follows it, DELETE turns it back."""
    return f"{partition_state_path(topic, partition)}/replicas"


def decommission_path(node_id: str) -> str:
    """PUT decommissions a node, GET follows it, DELETE recommissions."""
    return f"{NODES_PATH}/{segment(node_id)}/decommission"


def controller_voter_path(node_id: str) -> str:
    """DELETE removes a node from the controller group."""
    return f"{CONTROLLER_VOTERS_PATH}/{segment(node_id)}"


def maintenance_path(node_id: str) -> str:
    """PUT puts a node in maintenance (its leaderships leave), DELETE ends it."""
    return f"{NODES_PATH}/{segment(node_id)}/maintenance"


def consumer_group_path(group: str) -> str:
    """The admin view of a group: members, assignments, lag."""
    return f"{CONSUMER_GROUPS_PATH}/{segment(group)}"


def user_path(name: str) -> str:
    return f"{USERS_PATH}/{segment(name)}"


def user_tokens_path(name: str) -> str:
    """POST makes one of the user's API tokens (answered once), GET lists them (never their text)."""
    return f"{user_path(name)}/tokens"


def user_token_path(name: str, token_id: str) -> str:
    """DELETE revokes one of the user's API tokens."""
    return f"{user_tokens_path(name)}/{segment(token_id)}"
