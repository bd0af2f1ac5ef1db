"""The route table's shape (``Operation``) and the OpenAPI 3 document generated from it.

``api.app.ROUTES`` is the single list of endpoints: the app registers exactly those and ``/openapi.json``
describes exactly those, so the document cannot drift from what is served.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from api.access import Access
from api.errors import TABLE
from api.negotiation import error_type, offered
from partitions.groups.state import (
    AUTO_COMMIT_INTERVAL_MS_MAX,
    FETCH_MIN_BYTES_MAX,
    REQUEST_TIMEOUT_MS_MAX,
    SESSION_TIMEOUT_MS_MAX,
    SESSION_TIMEOUT_MS_MIN,
)
from partitions.peers.client import INTERNAL_PREFIX
from partitions.security.tokens import TOKEN_DESCRIPTION_BYTES_MAX, TOKEN_LIFETIME_MS_MAX
from partitions.security.users import ITERATIONS_DEFAULT, MECHANISMS
from raftlog_contract import BINARY_V2, JSON_V2, KAFKA_V2, PLAIN_JSON

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
RECORD_TYPES = (JSON_V2, BINARY_V2, PLAIN_JSON)
_PATH_PARAM = re.compile(r"\{([a-zA-Z_]+)\}")


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    type: str  # "integer" | "string" | "boolean"
    description: str
    required: bool = False
    minimum: int | None = None
    maximum: int | None = None
    enum: tuple[str, ...] = ()  # a string's only values


@dataclass(frozen=True, slots=True)
class Operation:
    method: str
    path: str
    handler: Handler
    operation_id: str
    summary: str
    tag: str  # "client" | "admin" | "operations"
    query: tuple[Param, ...] = ()
    body: str | None = None  # component schema of the request body
    body_types: tuple[str, ...] = (PLAIN_JSON,)
    body_required: bool = True  # False: the route also serves a request without a body
    # other media types of the request body: (media type, component schema or None for opaque bytes)
    body_alternatives: tuple[tuple[str, str | None], ...] = ()
    ok_status: int = 200
    ok_schema: str | None = None
    # the answer's media type; None: the client routes' Confluent v2 JSON type, else application/json
    ok_type: str | None = None
    # other media types of the 200 answer, chosen by the request's Accept header: (media type, component
    # schema or None for an opaque binary body)
    ok_alternatives: tuple[tuple[str, str | None], ...] = ()
    errors: tuple[int, ...] = ()
    local: bool = False  # answered by this node alone (never "no leader right now")
    write: bool = False  # counted against the node's writes in flight (admission)
    long_poll: bool = False  # may wait for records: counted against the node's long polls in flight
    quota: str | None = None  # the client quota its bytes count against (``api.client_quotas``)
    # what a client or admin route needs of the caller's ACLs (``api.access``; ``serve --enforce-acls``)
    access: Access | None = None

    @property
    def answer_type(self) -> str:
        if self.ok_type is not None:
            return self.ok_type
        return KAFKA_V2 if self.tag == "client" else PLAIN_JSON

    @property
    def offers(self) -> tuple[str, ...]:
        """Every media type the answer may take (``api.negotiation``), its own first."""
        return offered(self.answer_type, [media for media, _ in self.ok_alternatives])


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


_INT = {"type": "integer"}
_NATURAL = {"type": "integer", "minimum": 0}  # the server answers 400 to a negative value
_PARTITION_NUMBER = {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
_STR = {"type": "string"}
_STR_LIST = {"type": "array", "items": _STR}
_ANY: dict[str, Any] = {
    "description": "any JSON (JSON flavour) or a base64 string (binary flavour); null: no key, or no value "
    "(a tombstone)",
    "nullable": True,
}
_HEADER_VALUE = {"type": "string", "nullable": True}
_HEADERS = {
    "oneOf": [
        {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["key", "value"],
                "properties": {"key": _STR, "value": _HEADER_VALUE},
                "additionalProperties": False,
            },
        },
        {"type": "object", "additionalProperties": _HEADER_VALUE},
    ],
    "description": "list of {key, value} or an object; values are strings (JSON flavour), base64 (binary) "
    "or null",
}
_TIMESTAMP_TYPE = {"type": "string", "enum": ["CreateTime", "LogAppendTime"]}
_BOOL_CONFIG = {"oneOf": [{"type": "boolean"}, {"type": "string", "enum": ["true", "false"]}]}


def _int_config(minimum: int, maximum: int) -> dict[str, Any]:
    """A consumer config given as a number or as a string of digits (Confluent's clients send strings)."""
    number = {"type": "integer", "minimum": minimum, "maximum": maximum}
    return {"oneOf": [number, {"type": "string", "pattern": "^-?[0-9]+$"}]}


def _obj(props: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = list(required)
    return schema


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "nullable": True}


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    """A request object: the server answers 400 to a field it does not know."""
    return {**schema, "additionalProperties": False}


_TXN_STATE = {
    "type": "string",
    "enum": ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"],
}
# a transactional id as listed; described, with more (the Transaction schema)
_TXN_SUMMARY = {
    "transactional_id": _STR,
    "producer_id": _INT,
    "producer_epoch": _INT,
    "state": _TXN_STATE,
    "started_ms": _INT,  # -1: no transaction open
    "timeout_ms": _INT,
    "coordinator_partition": _INT,
}
_GROUP_PARTITION = _obj(
    {
        "topic": _STR,
        "partition": _INT,
        "position": _nullable(_INT),
        "committed_offset": _nullable(_INT),
        "end_offset": _INT,
        "lag": _nullable(_INT),
    }
)

_TOPIC_CONFIGS = _obj(  # open: these and the other properties of raftlog/storage/config.py
    {
        "retention.ms": _INT,
        "retention.bytes": _INT,
        "segment.bytes": _INT,
        "flush.policy": _STR,
        "max.message.bytes": _INT,
        "cleanup.policy": {"type": "string", "enum": ["delete", "compact", "compact,delete"]},
        "min.cleanable.dirty.ratio": {"type": "number", "minimum": 0, "maximum": 1},
    }
)
_MECHANISMS = {"type": "array", "items": {"type": "string", "enum": sorted(MECHANISMS)}}
_TOKEN_FIELDS: dict[str, Any] = {  # a user's API token as the admin API shows it: never its text again
    "id": {"type": "string", "pattern": "^[0-9a-f]{16}$"},
    "user": _STR,
    "description": _STR,
    "created_ms": _INT,  # ms since the epoch, the clock of the node that made it
    "expires_ms": _nullable(_INT),  # null: until revoked
    "expired": {"type": "boolean"},  # by the clock of the node that answers
}
_TOKEN = _obj(_TOKEN_FIELDS, list(_TOKEN_FIELDS))
_ACL_FIELDS: dict[str, Any] = {
    "resource_type": {"type": "string", "enum": ["topic", "group", "cluster", "transactional_id"]},
    "name": {
        "type": "string",
        "minLength": 1,
        "description": "a topic, a group, a transactional id, '*' or kafka-cluster",
    },
    "pattern_type": {"type": "string", "enum": ["literal", "prefixed"]},
    "principal": {"type": "string", "pattern": "^User:.+$", "description": "User:NAME, or User:* for all"},
    "host": {"type": "string", "minLength": 1, "description": "a client's IP address, or * for any"},
    "operation": {
        "type": "string",
        "enum": [
            "all", "read", "write", "create", "delete", "alter", "describe", "cluster_action",
            "describe_configs", "alter_configs", "idempotent_write",
        ],
    },
    "permission": {"type": "string", "enum": ["allow", "deny"]},
}  # fmt: skip
_ACL = _obj(_ACL_FIELDS, list(_ACL_FIELDS))
_ACL_FILTER = _closed(
    _obj(
        {
            **{name: _nullable(schema) for name, schema in _ACL_FIELDS.items()},
            "resource_type": _nullable(
                {"type": "string", "enum": ["any", "topic", "group", "cluster", "transactional_id"]}
            ),
            "pattern_type": _nullable({"type": "string", "enum": ["any", "match", "literal", "prefixed"]}),
            "operation": _nullable({"type": "string", "enum": ["any", *_ACL_FIELDS["operation"]["enum"]]}),
            "permission": _nullable({"type": "string", "enum": ["any", "allow", "deny"]}),
        }
    )
)

SCHEMAS: dict[str, dict[str, Any]] = {
    "Error": _obj(
        {
            "error_code": _INT,
            "message": _STR,
            "retriable": {"type": "boolean"},
            "log_start_offset": _INT,
            "end_offset": _INT,
            "leader_hint": _nullable(_STR),
            # 40909: the partitions a decommission could not move, and why
            "partitions": {
                "type": "array",
                "items": _obj({"topic": _STR, "partition": _INT, "reason": _STR}),
            },
            # 40910: a node holds at most replicas_max partition replicas; room: what each node has left
            "replicas_max": _INT,
            "room": {"type": "object", "additionalProperties": _INT},
        },
        ["error_code", "message"],
    ),
    "TopicNames": {"type": "array", "items": _STR},
    "Brokers": _obj({"brokers": {"type": "array", "items": _INT}}, ["brokers"]),
    "Replica": _obj(
        {
            "broker": {**_INT, "description": "the node's broker id, as Kafka clients see it"},
            "node": _STR,
            "leader": {"type": "boolean"},
            # as the partition's leader says; null: unknown (no leader known, or it could not be asked)
            "in_sync": _nullable({"type": "boolean"}),
            "error": _nullable(_STR),  # why the replica cannot open or replay; null unless it failed
        }
    ),
    "Partition": _obj(
        {
            "partition": _INT,
            "leader": _nullable(_STR),
            "replicas": {"type": "array", "items": _ref("Replica")},
        }
    ),
    "Partitions": {"type": "array", "items": _ref("Partition")},
    "Topic": _obj(
        {
            "name": _STR,
            "partitions": {"type": "array", "items": _ref("Partition")},
            "replication_factor": _INT,
            "configs": {"type": "object"},
        }
    ),
    "PartitionOffsets": {"oneOf": [_ref("OffsetRange"), _ref("OffsetForTimestamp")]},
    "OffsetRange": _obj({"beginning_offset": _INT, "end_offset": _INT}, ["beginning_offset", "end_offset"]),
    # ?timestamp=MS: the first record at or after it; null offset and record_timestamp when none is
    "OffsetForTimestamp": _obj(
        {"timestamp": _INT, "offset": _nullable(_INT), "record_timestamp": _nullable(_INT)},
        ["timestamp", "offset", "record_timestamp"],
    ),
    "ProduceRecord": _closed(
        _obj(
            {
                "key": _ANY,
                "value": _ANY,
                "partition": _PARTITION_NUMBER,
                "headers": _HEADERS,
                "timestamp": {**_NATURAL, "description": "ms since the epoch (CreateTime); default: now"},
            },
            ["value"],
        )
    ),
    "ProduceRequest": _closed(
        _obj(
            {
                "records": {"type": "array", "items": _ref("ProduceRecord"), "minItems": 1},
                "producer_id": _NATURAL,
                "sequence": _NATURAL,
            },
            ["records"],
        )
    ),
    "ProduceResponse": _obj(
        {
            "offsets": {
                "type": "array",
                "items": _obj(
                    {
                        "partition": _INT,
                        "offset": _nullable(_INT),
                        "error_code": _nullable(_INT),
                        "error": _nullable(_STR),
                    }
                ),
            }
        }
    ),
    "BatchProduced": _obj(
        {"partition": _INT, "base_offset": _NATURAL, "count": {"type": "integer", "minimum": 1}},
        required=("partition", "base_offset", "count"),
    ),
    # a JSON produce gets an offset per record; a record batch (application/vnd.raftlog.batch.v2) gets
    # its base offset and count: record i has offset base_offset + i
    "PartitionProduceResponse": {"oneOf": [_ref("ProduceResponse"), _ref("BatchProduced")]},
    "FetchedRecord": _obj(
        {
            "topic": _STR,
            "partition": _INT,
            "offset": _INT,
            "timestamp": _INT,
            "timestamp_type": _TIMESTAMP_TYPE,
            "key": _ANY,
            "value": _ANY,
            "headers": {"type": "array", "items": _obj({"key": _STR, "value": _HEADER_VALUE})},
            "format": {"type": "string", "enum": ["json", "binary"]},
        }
    ),
    "FetchResponse": {"type": "array", "items": _ref("FetchedRecord")},
    "ColumnarPage": _obj(
        {
            "topic": _STR,
            "partition": _INT,
            "offsets": {"type": "array", "items": _INT},
            "timestamps": {"type": "array", "items": _INT},
            "timestamp_types": {"type": "array", "items": {"type": "integer", "enum": [0, 1]}},
            "keys": {"type": "array", "items": _nullable(_STR)},
            "values": {"type": "array", "items": _nullable(_STR)},
            "headers": {
                "type": "array",
                "items": {
                    "type": "array",
                    "items": {"type": "array", "items": _nullable(_STR), "minItems": 2, "maxItems": 2},
                },
            },
        },
        ["topic", "partition", "offsets", "timestamps", "timestamp_types", "keys", "values", "headers"],
    ),
    "OffsetEntry": _closed(
        _obj(
            {"topic": _STR, "partition": _PARTITION_NUMBER, "offset": _NATURAL, "reset": {"type": "boolean"}},
            ["topic", "partition", "offset"],
        )
    ),
    "CommitOffsetsRequest": _closed(
        _obj(
            {
                "offsets": {"type": "array", "items": _ref("OffsetEntry"), "minItems": 1, "maxItems": 10_000},
                "reset": {"type": "boolean"},
            },
            ["offsets"],
        )
    ),
    "DeleteRecordsRequest": _closed(
        _obj({"offset": {"type": "integer", "minimum": -1, "maximum": 2**63 - 1}}, ["offset"])
    ),
    "RecordsDeleted": _obj({"beginning_offset": _INT}, ["beginning_offset"]),
    "CommittedOffsets": _obj({"offsets": {"type": "array", "items": _ref("OffsetEntry")}}),
    "Health": _obj(
        {
            "is_healthy": {"type": "boolean"},
            "controller": _nullable(_STR),
            "nodes": {"type": "array", "items": _STR},
            "nodes_down": {"type": "array", "items": _STR},
            "nodes_disk_full": {"type": "array", "items": _STR},  # refusing writes for want of room
            "leaderless_partitions": {"type": "array", "items": _obj({"topic": _STR, "partition": _INT})},
            "under_replicated_partitions": {
                "type": "array",
                "items": _obj({"topic": _STR, "partition": _INT}),
            },
            "failed_replicas": {"type": "array", "items": _ref("FailedReplica")},
        }
    ),
    # a partition replica that cannot open or replay, on any node
    "FailedReplica": _obj(
        {"node": _STR, "topic": _STR, "partition": _INT, "error": _STR, "attempts": _INT},
        ["node", "topic", "partition", "error", "attempts"],
    ),
    "ClusterMetrics": _obj(
        {
            "node_id": _STR,  # the node that answered
            "nodes": {
                "type": "array",
                "items": _obj(
                    {
                        "node_id": _STR,
                        "metrics": {**_nullable(_STR), "description": "its /metrics text (Prometheus 0.0.4)"},
                        "error": {**_nullable(_STR), "description": "why not: not alive, no answer, refused"},
                    },
                    ["node_id", "metrics", "error"],
                ),
            },
        },
        ["node_id", "nodes"],
    ),
    "Nodes": {
        "type": "array",
        "items": _obj(
            {
                "node_id": _STR,
                "http": _STR,
                "state": {"type": "string", "enum": ["alive", "suspect", "dead", "left"]},
                "incarnation": _INT,
                "leader_of": _INT,
                "version": _nullable(_STR),  # null: a node of release 0.1.0 (it gossips none) or unheard
                "features": _nullable({"type": "object", "additionalProperties": _INT}),
            }
        ),
    },
    "CreateTopicRequest": _closed(
        _obj(
            {
                # partitions/names.py: names starting with "__" are the cluster's own (40003)
                "name": {"type": "string", "pattern": "^(?!__)[A-Za-z0-9._-]{1,200}$"},
                "partitions": {"type": "integer", "minimum": 1, "maximum": 10_000},
                "replication_factor": {"type": "integer", "minimum": 1, "maximum": 100},
                "configs": _TOPIC_CONFIGS,
            },
            ["name"],
        )
    ),
    "CreatedTopic": _obj(
        {
            "name": _STR,
            "partitions": _INT,
            "replication_factor": _INT,
            "replicas": {"type": "array", "items": {"type": "array", "items": _STR}},
            "configs": {"type": "object"},
        },
        ["name", "partitions", "replication_factor", "replicas", "configs"],
    ),
    "PartitionState": _obj(
        {
            "topic": _STR,
            "partition": _INT,
            "leader": _nullable(_STR),
            # null with the offsets: asked of a replica that cannot open or replay while no leader is known
            "term": _nullable(_INT),
            "high_watermark": _nullable(_INT),
            "log_start_offset": _nullable(_INT),
            "replicas": {
                "type": "array",
                "items": _obj(
                    {
                        "node": _STR,
                        "role": {
                            "type": "string",
                            "enum": ["leader", "follower", "learner", "unknown", "failed"],
                        },
                        "match_index": {
                            **_nullable(_INT),
                            "description": "how far the replica's Raft log matches the leader's (a Raft "
                            "index, not a record offset; the leader's own last index)",
                        },
                        "match_offset": {
                            **_nullable(_INT),
                            "description": "match_index under the name of the API contract (a Raft index)",
                        },
                        "lag": {**_nullable(_INT), "description": "Raft entries behind the leader's last"},
                        "in_sync": _nullable({"type": "boolean"}),  # null: unknown (not asked of a leader)
                        "error": _nullable(_STR),  # why a failed replica cannot open or replay
                        "node_state": {
                            "type": "string",
                            "enum": ["alive", "suspect", "dead", "left"],
                            "description": "the replica's node as gossip sees it on the node answering",
                        },
                    }
                ),
            },
            "move": _nullable(_obj({"original": _STR_LIST, "target": _STR_LIST, "adding": _nullable(_STR)})),
            "log_bytes": {**_nullable(_INT), "description": "the leader's log on disk, in bytes"},
            "leader_error": {
                **_nullable(_STR),
                "description": "why the leader's view is missing: its node did not answer (leader, term and "
                "offsets null until another leads)",
            },
        }
    ),
    "TransferResult": _obj({"topic": _STR, "partition": _INT, "leader": _nullable(_STR)}),
    "ReplicasRequest": _closed(_obj({"replicas": {"type": "array", "items": _STR}}, ["replicas"])),
    "Status": _obj({"status": _STR, "node_id": _STR, "pid": _INT}),  # which node and process answered
    # consumer groups (api/consumers.py)
    "CreateConsumerRequest": _closed(
        _obj(
            {
                "name": _nullable(_STR),
                "id": _nullable({**_STR, "description": "Confluent's older name field; overrides name"}),
                "format": {"type": "string", "enum": ["binary", "json"], "default": "binary"},
                "auto.offset.reset": {"type": "string", "enum": ["earliest", "latest"]},
                "auto.commit.enable": _BOOL_CONFIG,
                "auto.commit.interval.ms": _int_config(0, AUTO_COMMIT_INTERVAL_MS_MAX),
                "fetch.min.bytes": _int_config(-1, FETCH_MIN_BYTES_MAX),
                "consumer.request.timeout.ms": _int_config(0, REQUEST_TIMEOUT_MS_MAX),
                "session.timeout.ms": _int_config(SESSION_TIMEOUT_MS_MIN, SESSION_TIMEOUT_MS_MAX),
                "partition.assignment.strategy": {"type": "string", "enum": ["range", "round_robin"]},
                "isolation.level": {"type": "string", "enum": ["read_uncommitted", "read_committed"]},
            }
        )
    ),
    "CreatedConsumer": _obj({"instance_id": _STR, "base_uri": _STR}, ["instance_id", "base_uri"]),
    "SubscriptionRequest": _closed(
        _obj({"topics": {"type": "array", "items": _STR, "minItems": 1, "maxItems": 1_000}}, ["topics"])
    ),
    "Subscription": _obj({"topics": {"type": "array", "items": _STR}}),
    "TopicPartition": _closed(_obj({"topic": _STR, "partition": _PARTITION_NUMBER}, ["topic", "partition"])),
    "Assignments": _obj(
        {"partitions": {"type": "array", "items": _ref("TopicPartition")}, "generation": _INT}
    ),
    "PartitionsRequest": _closed(
        _obj(
            {
                "partitions": {
                    "type": "array",
                    "items": _ref("TopicPartition"),
                    "minItems": 1,
                    "maxItems": 10_000,
                }
            },
            ["partitions"],
        )
    ),
    "CommitAnswer": {
        "type": "array",
        "maxItems": 0,
        "items": _obj({}),
        "description": "always empty (Confluent's answer to a commit)",
    },
    "SeekRequest": _closed(
        _obj(
            {
                "offsets": {"type": "array", "items": _ref("CommitEntry"), "minItems": 1, "maxItems": 10_000},
                "timestamps": {
                    "type": "array",
                    "items": _ref("TimestampEntry"),
                    "minItems": 1,
                    "maxItems": 10_000,
                },
            },
        )
    ),
    "TimestampEntry": _closed(
        _obj(
            {
                "topic": _STR,
                "partition": _PARTITION_NUMBER,
                "timestamp": {
                    "oneOf": [{"type": "string", "format": "date-time"}, _NATURAL],
                    "description": "ISO 8601 with a zone, or ms since the epoch",
                },
                "metadata": _STR,
            },
            ["topic", "partition", "timestamp"],
        )
    ),
    "CommitEntry": _closed(
        _obj(
            {"topic": _STR, "partition": _PARTITION_NUMBER, "offset": _NATURAL, "metadata": _STR},
            ["topic", "partition", "offset"],
        )
    ),
    "ConsumerCommitRequest": _closed(
        _obj(
            {
                "offsets": {"type": "array", "items": _ref("CommitEntry"), "maxItems": 10_000},
                "partitions": {
                    "type": "array",
                    "items": _ref("CommitEntry"),
                    "maxItems": 10_000,
                    "description": "Redpanda's name of offsets",
                },
                "generation": _nullable(_NATURAL),
            }
        )
    ),
    "ConsumerOffsets": _obj(
        {
            "offsets": {
                "type": "array",
                "items": _obj({"topic": _STR, "partition": _INT, "offset": _INT, "metadata": _STR}),
            }
        }
    ),
    "ConsumerGroups": _obj(
        {
            "groups": {
                "type": "array",
                "items": _obj(
                    {
                        "group": _STR,
                        "generation": _INT,
                        "assignor": _STR,
                        "members": _INT,
                        "coordinator_partition": _INT,
                        "state": _STR,
                        "protocol_type": _STR,
                        "door": _nullable(_STR),
                        "group_type": {"type": "string", "enum": ["classic", "consumer", "share"]},
                    }
                ),
            }
        }
    ),
    "ConsumerGroup": _obj(
        {
            "group": _STR,
            "generation": _INT,
            "assignor": _STR,
            "coordinator_partition": _INT,
            "state": _STR,
            "protocol_type": _STR,
            "door": _nullable(_STR),
            "group_type": {"type": "string", "enum": ["classic", "consumer", "share"]},
            "lag": _INT,
            "members": {
                "type": "array",
                "items": _obj(
                    {
                        "instance_id": _STR,
                        "client_id": _STR,
                        "client_host": _STR,
                        "topics": {"type": "array", "items": _STR},
                        "partitions": {"type": "array", "items": _GROUP_PARTITION},
                    }
                ),
            },
            "unassigned": {"type": "array", "items": _GROUP_PARTITION},
        }
    ),
    "Transactions": _obj(
        {
            "transactions": {
                "type": "array",
                "items": _obj(_TXN_SUMMARY),
            }
        }
    ),
    "Transaction": _obj(
        {
            **_TXN_SUMMARY,
            "partitions": {"type": "array", "items": _obj({"topic": _STR, "partition": _INT})},
            "offset_partitions": {"type": "array", "items": _obj({"topic": _STR, "partition": _INT})},
            "groups": {"type": "array", "items": _STR},
            "updated_ms": _INT,
            "coordinator_epoch": _INT,
            "coordinator": _STR,
        }
    ),
    "OpenTransactions": _obj(
        {
            "partitions": {
                "type": "array",
                "items": _obj(
                    {
                        "topic": _STR,
                        "partition": _INT,
                        "error": _STR,  # the partition could not be asked (its producers: unknown)
                        "producers": {
                            "type": "array",
                            "items": _obj(
                                {
                                    "producer_id": _INT,
                                    "producer_epoch": _INT,
                                    "coordinator_epoch": _INT,
                                    "first_offset": _INT,
                                    "started_ms": _INT,
                                    "age_ms": _INT,
                                }
                            ),
                        },
                    }
                ),
            }
        }
    ),
    "DeletedGroup": _obj({"group": _STR, "offsets_deleted": _INT}, ["group", "offsets_deleted"]),
    "TopicConfigs": _obj({"topic": _STR, "configs": {"type": "object"}}, ["topic", "configs"]),
    "AddPartitionsRequest": _closed(
        _obj(
            {
                "partitions": {"type": "integer", "minimum": 1, "maximum": 10_000},
                "validate_only": {"type": "boolean"},
            },
            ["partitions"],
        )
    ),
    "ConfigsRequest": _closed(
        _obj(
            {"configs": _TOPIC_CONFIGS},
            ["configs"],
        )
    ),
    "MoveState": _obj(
        {
            "topic": _STR,
            "partition": _INT,
            "replicas": {"type": "array", "items": _STR},
            "move": _nullable(
                _obj(
                    {
                        "original": {"type": "array", "items": _STR},
                        "target": {"type": "array", "items": _STR},
                        "replicas": {"type": "array", "items": _STR},
                        "adding": _nullable(_STR),
                        "cancelled": {"type": "boolean"},
                    }
                )
            ),
        },
        ["topic", "partition", "replicas", "move"],
    ),
    "Decommission": _obj(
        {
            "node_id": _STR,
            "decommissioning": {"type": "boolean"},
            "replicas_remaining": _INT,
            "partitions": {"type": "array", "items": _obj({"topic": _STR, "partition": _INT})},
            "moving": {"type": "array", "items": {"type": "object"}},
            "done": {"type": "boolean"},
            "controller_voter": {"type": "boolean"},
            # partitions that cannot move off the node now, and why (e.g. the node they move to is down)
            "blocked": {
                "type": "array",
                "items": _obj(
                    {"topic": _STR, "partition": _INT, "reason": _STR}, ["topic", "partition", "reason"]
                ),
            },
        },
        ["node_id", "decommissioning", "replicas_remaining", "done"],
    ),
    "Maintenance": _obj({"node_id": _STR, "maintenance": {"type": "boolean"}}, ["node_id", "maintenance"]),
    # the controller group as its leader sees it (api/admin.py)
    "Controller": _obj(
        {
            "leader": _STR,
            "term": _INT,
            "voters": _STR_LIST,
            "learners": _STR_LIST,  # joining: promoted once caught up
            "commit_index": _INT,
            "match_index": {"type": "object", "additionalProperties": _INT},
            "pending": _nullable(_STR),  # why no change may start now (a change not yet applied)
        },
        ["leader", "term", "voters", "learners", "commit_index", "match_index", "pending"],
    ),
    "ControllerVoterRequest": _closed(_obj({"node_id": _STR}, ["node_id"])),
    "FeatureUpdateRequest": _closed(_obj({"feature": _STR, "level": _INT}, ["feature", "level"])),
    "Features": _obj(
        {
            "finalized": {"type": "object", "additionalProperties": _INT},
            "supported": {"type": "object", "additionalProperties": _INT},
            "nodes": {
                "type": "object",
                "additionalProperties": _obj(
                    {
                        "version": _nullable(_STR),
                        "features": _nullable({"type": "object", "additionalProperties": _INT}),
                    }
                ),
            },
        },
        ["finalized", "supported", "nodes"],
    ),
    "User": _obj(
        {"name": _STR, "mechanisms": _MECHANISMS, "created": {"type": "boolean"}},
        ["name", "mechanisms", "created"],
    ),
    "Users": _obj(
        {"users": {"type": "array", "items": _obj({"name": _STR, "mechanisms": _MECHANISMS})}}, ["users"]
    ),
    "Acls": _obj({"acls": {"type": "array", "items": _ACL}}, ["acls"]),
    "CreateAclsRequest": _closed(
        _obj(
            {
                "acls": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 1000,
                    "items": _closed(_obj(_ACL_FIELDS, ["resource_type", "name", "principal", "operation"])),
                }
            },
            ["acls"],
        )
    ),
    "CreatedAcls": _obj(  # existed: asked for, and there before
        {"created": {"type": "array", "items": _ACL}, "existed": {"type": "array", "items": _ACL}},
        ["created", "existed"],
    ),
    "DeleteAclsRequest": _closed(
        _obj(
            {"filters": {"type": "array", "minItems": 1, "maxItems": 1000, "items": _ACL_FILTER}}, ["filters"]
        )
    ),
    "DeletedAcls": _obj({"deleted": {"type": "array", "items": _ACL}}, ["deleted"]),
    "TokenRequest": _closed(
        _obj(
            {
                "description": {"type": "string", "maxLength": TOKEN_DESCRIPTION_BYTES_MAX},
                "expires_ms": {"type": "integer", "description": "ms since the epoch (not with lifetime_ms)"},
                "lifetime_ms": {"type": "integer", "minimum": 1, "maximum": TOKEN_LIFETIME_MS_MAX},
            }
        )
    ),
    "CreatedToken": _obj(
        {"token": {"type": "string", "pattern": "^rlt_[0-9a-f]{16}_[0-9a-f]{64}$"}, **_TOKEN_FIELDS},
        ["token", *_TOKEN_FIELDS],
    ),
    "Tokens": _obj({"tokens": {"type": "array", "items": _TOKEN}}, ["tokens"]),
    "UserRequest": _closed(
        _obj(
            {
                "name": _STR,
                "password": {"type": "string", "minLength": 1},
                "mechanisms": _MECHANISMS,
                "iterations": {"type": "integer", "minimum": ITERATIONS_DEFAULT},
            },
            ["name", "password"],
        )
    ),
}

_REASONS = {
    200: "OK",
    201: "Created",
    202: "Accepted: the operation goes on in the background",
    204: "No Content",
    400: (
        "Bad request (error_code 40001; an unusable replica set 40002; a topic name reserved for the "
        "cluster's own topics 40003)"
    ),
    401: (
        "Missing or wrong credential (40101): the admin token (or, with ACLs enforced, a user's password or "
        "API token) on /v1, the cluster credential on an internal endpoint"
    ),
    403: "The caller's ACLs do not allow it (40301, naming the resource and operation); nothing was done",
    404: (
        "Topic (40401), partition (40402), consumer instance (40403), group (40404), node (40405), "
        "move (40406), user (40407) or token (40408) does not exist"
    ),
    409: (
        "Conflict: topic exists (40901), sequence too old (40913), request rejected (40903), consumer "
        "instance exists (40902), stale generation (40905), partition not assigned to the instance (40906), "
        "group full (40907), partition already moving (40908), too many tokens (40915)"
    ),
    406: (
        "Not acceptable (40601): the Accept header names none of the endpoint's media types, or a consumer "
        "instance's records in the other format than its own"
    ),
    413: "Record or request too large (41301)",
    415: "Unsupported content type (41501)",
    416: "Offset out of range (41601)",
    422: "Invalid record (42201) or consumer configuration (42204)",
    429: "The caller is past a client quota (42902): retry after the seconds Retry-After gives",
    503: "No leader or quorum right now; retriable, see Retry-After (50301..50306)",
    504: "Outcome unknown (50401): retry with the same producer_id/sequence",
    507: "The leader's data disk is full (50701): refused before it was proposed, nothing written",
}
ANY_ERRORS = (400, 406, 500)  # a malformed request (duplicate query parameter, bad header); Accept; a bug
COMMON_ERRORS = (503,)  # no leader / quorum right now, for requests served by a partition's leader


def _path_params(path: str) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "in": "path",
            "required": True,
            "schema": _PARTITION_NUMBER if name == "partition" else _STR,
        }
        for name in _PATH_PARAM.findall(path)
    ]


def _param_schema(param: Param) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": param.type}
    if param.minimum is not None:
        schema["minimum"] = param.minimum
    if param.maximum is not None:
        schema["maximum"] = param.maximum
    if param.enum:
        schema["enum"] = list(param.enum)
    return schema


def _operation(op: Operation, admin_token: bool, acls: bool) -> dict[str, Any]:
    params = _path_params(op.path) + [
        {
            "name": p.name,
            "in": "query",
            "required": p.required,
            "description": p.description,
            "schema": _param_schema(p),
        }
        for p in op.query
    ]
    ok: dict[str, Any] = {"description": _REASONS.get(op.ok_status, "OK")}
    if op.ok_schema is not None:
        ok["content"] = {op.answer_type: {"schema": _ref(op.ok_schema)}}
    elif op.answer_type != PLAIN_JSON and op.ok_status != 204:
        ok["content"] = {op.answer_type: {"schema": _STR}}
    for media, schema in op.ok_alternatives:
        binary = {"type": "string", "format": "binary"}
        ok.setdefault("content", {})[media] = {"schema": _ref(schema) if schema else binary}
    responses: dict[str, Any] = {str(op.ok_status): ok}
    error_content = {error_type(op.answer_type): {"schema": _ref("Error")}}
    statuses = set(op.errors) | set(ANY_ERRORS) | (set() if op.local else set(COMMON_ERRORS))
    internal = op.path.startswith(INTERNAL_PREFIX)  # the cluster credential, always
    if internal or (admin_token and op.path.startswith("/v1/")):
        statuses.add(401)
    checks = [] if op.access is None else op.access.describe()
    if acls and checks:
        statuses.add(403)
    for status in sorted(statuses):
        responses[str(status)] = {
            "description": _REASONS.get(status, "Internal error (50000..50002)"),
            "content": error_content,
        }
    doc: dict[str, Any] = {
        "operationId": op.operation_id,
        "summary": op.summary,
        "tags": [op.tag],
        "responses": responses,
    }
    if params:
        doc["parameters"] = params
    if op.access is not None:  # what ACLs it asks (serve --enforce-acls), or why it asks none
        doc["x-raftlog-acls"] = checks or [f"none: {op.access.open}"]
    if op.body is not None or op.body_alternatives:
        content = {} if op.body is None else {media: {"schema": _ref(op.body)} for media in op.body_types}
        doc["requestBody"] = {"required": op.body_required, "content": content}
        for media, schema in op.body_alternatives:
            opaque = {"type": "string", "format": "binary"}
            doc["requestBody"]["content"][media] = {"schema": _ref(schema) if schema else opaque}
    if internal or (admin_token and op.path.startswith("/v1/")):
        # with ACLs enforced a user may call /v1 too: HTTP Basic, or its API token as a bearer token
        doc["security"] = [{"bearer": []}, {"basic": []}] if acls and not internal else [{"bearer": []}]
    return doc


def document(operations: Sequence[Operation], *, admin_token: bool, acls: bool = False) -> dict[str, Any]:
    """The document of a node: with ``admin_token``, 401 on ``/v1``; with ``acls`` (``serve
    --enforce-acls``), 403 on the routes that check ACLs, and users' HTTP Basic on ``/v1``."""
    paths: dict[str, dict[str, Any]] = {}
    for op in operations:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op, admin_token, acls)
    codes = sorted({mapped.error_code for _, mapped in TABLE})
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "raftlog",
            "version": "0.1.0",
            "description": (
                "A Raft-replicated, Kafka-style log. Client API in the Confluent REST Proxy v2 style, admin "
                "API in the Redpanda style. Any node answers any request (run on the partition's leader, the "
                "controller leader or the group's coordinator; header X-Raftlog-Leader). "
                f"Error codes: {codes}. Paths under /internal/v1/ are node-to-node calls (msgpack, the "
                "cluster credential)."
            ),
        },
        "servers": [{"url": "/"}],
        "tags": [{"name": "client"}, {"name": "admin"}, {"name": "operations"}, {"name": "internal"}],
        "paths": paths,
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "basic": {"type": "http", "scheme": "basic"},
            },
        },
    }
