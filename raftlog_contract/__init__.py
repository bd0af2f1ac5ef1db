"""The public HTTP API's wire contract, named once: media types, header names, the error codes a client
acts on and the paths. A leaf package (it imports nothing of the project): the server (``api/``) imports
these names rather than spelling them again, and every client builds its requests from them (no module
outside the client package and the server spells a path of the API: ``tests/test_architecture.py``), so
the two sides cannot drift apart and neither imports the other. ``api/README.md`` and
``GET /openapi.json`` describe them."""

from __future__ import annotations

import functools
import re
import urllib.parse

# -- media types -----------------------------------------------------------------------------------------

JSON_V2 = "application/vnd.kafka.json.v2+json"  # records whose key and value are any JSON
BINARY_V2 = "application/vnd.kafka.binary.v2+json"  # records whose key, value and header values are base64
# records whose key and value are JSON, stored framed in Confluent's wire format under a registered schema
AVRO_V2 = "application/vnd.kafka.avro.v2+json"
JSONSCHEMA_V2 = "application/vnd.kafka.jsonschema.v2+json"
PROTOBUF_V2 = "application/vnd.kafka.protobuf.v2+json"
SCHEMA_FORMATS = {"avro": AVRO_V2, "jsonschema": JSONSCHEMA_V2, "protobuf": PROTOBUF_V2}  # format -> type
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
UNSTABLE_OFFSET = 40919  # an offset of the group is pending in an open transaction: ask again once it ends
UNKNOWN_MEMBER = 40410  # the share group member is gone (its session ended, it left): join again
INVALID_RECORD_STATE = 40931  # a share acknowledgement of a record not held (lock expired, acknowledged)


def retriable(error_code: int | None) -> bool:
    """Whether an error is worth repeating (the server marks the same answers ``"retriable": true``):
    503xx, 50701 and 40919 always (not done), 504xx where repeating is safe (reads, idempotent produce)."""
    return error_code is not None and (
        error_code in NOT_DONE_CODES
        or error_code in (DISK_FULL, UNSTABLE_OFFSET)
        or error_code in OUTCOME_UNKNOWN_CODES
    )


# the whole answer to an HTTP connection over the node's or its address's bound, sent before any request
# is read, and the connection closed: the door holding, not a server error
CONNECTIONS_FULL_ANSWER = (
    b"HTTP/1.1 503 Service Unavailable\r\nServer: raftlog\r\nConnection: close\r\nRetry-After: 1\r\n"
    b"Content-Length: 0\r\n\r\n"
)


# -- paths (the server's routes: ``api/app.py``'s ``ROUTES``; a test matches each against them) ------------

READY_PATH = "/status/ready"  # 200 once the node serves, 503 before
LIVE_PATH = "/status/live"
METRICS_PATH = "/metrics"  # Prometheus text
TOPICS_PATH = "/topics"
ADMIN_PREFIX = "/v1/"  # the admin API: with ``serve --admin-token``, every path under it needs the token
ADMIN_TOPICS_PATH = "/v1/topics"
NODES_PATH = "/v1/nodes"
HEALTH_PATH = "/v1/cluster/health"
FEATURES_PATH = "/v1/features"
CONTROLLER_PATH = "/v1/controller"  # GET: the controller group's leader, voters and learners
CONTROLLER_VOTERS_PATH = "/v1/controller/voters"  # POST {"node_id"}: add a node to the controller group
CONSUMER_GROUPS_PATH = "/v1/consumer-groups"
USERS_PATH = "/v1/users"
ACLS_PATH = "/v1/acls"  # GET (a filter's query), POST {"acls"}, DELETE (a filter's query, or {"filters"})
TRANSACTIONS_PATH = "/v1/transactions"  # GET: the transactional ids of Kafka's transactional producers
OPEN_TRANSACTIONS_PATH = "/v1/open-transactions"  # GET: the producers with a transaction open, per partition


def segment(name: str) -> str:
    """A name (topic, group, instance, node, user) as one path segment, every reserved character escaped."""
    return urllib.parse.quote(name, safe="")


class PathTemplate:
    """A path of the API with names in it, declared once as its route spells it (``/topics/{topic}``):
    called with one value per ``{name}``, in order, it gives the path, each name as one escaped segment
    (``segment``) and each number as its digits. Paths are cached: a load generator asks for the same
    few over and over."""

    __slots__ = ("names", "template")

    def __init__(self, template: str) -> None:
        self.template = template
        self.names = tuple(re.findall(r"\{(\w+)\}", template))

    def __call__(self, *values: str | int) -> str:
        if len(values) != len(self.names):
            raise TypeError(f"{self.template}: takes {', '.join(self.names)}, given {values!r}")
        return _filled(self.template, self.names, values)

    def __repr__(self) -> str:
        return f"PathTemplate({self.template!r})"


@functools.lru_cache(maxsize=8192)
def _filled(template: str, names: tuple[str, ...], values: tuple[str | int, ...]) -> str:
    return template.format_map(
        {name: segment(v) if isinstance(v, str) else str(v) for name, v in zip(names, values, strict=True)}
    )


topic_path = PathTemplate("/topics/{topic}")  # a topic: its description (GET), a partitioning produce (POST)
partitions_path = PathTemplate("/topics/{topic}/partitions")  # every partition, its leader and replicas
# one partition: its view (GET), a produce to it (POST: records, or one record batch)
partition_path = PathTemplate("/topics/{topic}/partitions/{partition}")
# a fetch (GET, ``offset``, ``max_bytes``, ``timeout``)
records_path = PathTemplate("/topics/{topic}/partitions/{partition}/records")
# a partition's beginning and end offsets (GET), or the first offset at a time (``timestamp``)
offsets_path = PathTemplate("/topics/{topic}/partitions/{partition}/offsets")
# Kafka's DeleteRecords (POST ``{"offset": N}``): the partition's log start offset moves up to N
delete_records_path = PathTemplate("/topics/{topic}/partitions/{partition}/delete_records")
group_path = PathTemplate("/consumers/{group}")  # a consumer group: POST makes an instance in it
# a group's committed offsets, outside any instance (POST commits, GET reads)
group_offsets_path = PathTemplate("/consumers/{group}/offsets")
# a consumer instance; its resources (``/subscription``, ``/assignments``, ``/positions``, ``/records``,
# ``/offsets``) are below it
instance_path = PathTemplate("/consumers/{group}/instances/{instance}")
share_group_path = PathTemplate("/share-groups/{group}")  # a share group (KIP-932): POST joins a member
# a share group member: GET heartbeats, DELETE leaves; ``/records`` (POST acquires) and
# ``/acknowledgements`` (POST) are below it
share_member_path = PathTemplate("/share-groups/{group}/members/{member}")
admin_topic_path = PathTemplate("/v1/topics/{topic}")  # DELETE removes a topic
topic_configs_path = PathTemplate("/v1/topics/{topic}/configs")
topic_partitions_path = PathTemplate("/v1/topics/{topic}/partitions")
# a partition as its leader sees it: replicas, lag, in sync
partition_state_path = PathTemplate("/v1/partitions/{topic}/{partition}")
transfer_leadership_path = PathTemplate("/v1/partitions/{topic}/{partition}/transfer_leadership")
# a partition's replica move: POST starts one, GET follows it, DELETE turns it back
replicas_path = PathTemplate("/v1/partitions/{topic}/{partition}/replicas")
# PUT decommissions a node, GET follows it, DELETE recommissions
decommission_path = PathTemplate("/v1/nodes/{node_id}/decommission")
controller_voter_path = PathTemplate("/v1/controller/voters/{node_id}")  # DELETE: out of the controller group
# PUT puts a node in maintenance (its leaderships leave), DELETE ends it
maintenance_path = PathTemplate("/v1/nodes/{node_id}/maintenance")
consumer_group_path = PathTemplate("/v1/consumer-groups/{group}")  # the admin view: members, assignments, lag
# a transactional id: its producer, its transaction's state and partitions
transaction_path = PathTemplate("/v1/transactions/{transactional_id}")
user_path = PathTemplate("/v1/users/{user}")
# POST makes one of the user's API tokens (answered once), GET lists them (never their text)
user_tokens_path = PathTemplate("/v1/users/{user}/tokens")
user_token_path = PathTemplate("/v1/users/{user}/tokens/{token_id}")  # DELETE revokes one of them
# the schema registry (Confluent's API, on every node's HTTP listener): a subject's versions (POST registers
# a schema), one version (a number or "latest"), and a schema by its id
subject_versions_path = PathTemplate("/subjects/{subject}/versions")
subject_version_path = PathTemplate("/subjects/{subject}/versions/{version}")
schema_id_path = PathTemplate("/schemas/ids/{id}")
REGISTRY_V1 = "application/vnd.schemaregistry.v1+json"  # the registry's answers and bodies
