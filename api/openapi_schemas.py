"""The component schemas of the OpenAPI 3 document (``api.openapi.document``): every request and answer
body the routes of ``api.app.ROUTES`` name (``Operation.body``, ``ok_schema``), with the bounds the server
checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from partitions.groups.group_model import (
    AUTO_COMMIT_INTERVAL_MS_MAX,
    FETCH_MIN_BYTES_MAX,
    REQUEST_TIMEOUT_MS_MAX,
    SESSION_TIMEOUT_MS_MAX,
    SESSION_TIMEOUT_MS_MIN,
)
from partitions.security.tokens import TOKEN_DESCRIPTION_BYTES_MAX, TOKEN_LIFETIME_MS_MAX
from partitions.security.users import ITERATIONS_DEFAULT, MECHANISMS


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


_INT = {"type": "integer"}
_NATURAL = {"type": "integer", "minimum": 0}  # the server answers 400 to a negative value
PARTITION_NUMBER = {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
STR = {"type": "string"}
_STR_LIST = {"type": "array", "items": STR}
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
                "properties": {"key": STR, "value": _HEADER_VALUE},
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
    "transactional_id": STR,
    "producer_id": _INT,
    "producer_epoch": _INT,
    "state": _TXN_STATE,
    "started_ms": _INT,  # -1: no transaction open
    "timeout_ms": _INT,
    "coordinator_partition": _INT,
}
_GROUP_PARTITION = _obj(
    {
        "topic": STR,
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
        "flush.policy": STR,
        "max.message.bytes": _INT,
        "cleanup.policy": {"type": "string", "enum": ["delete", "compact", "compact,delete"]},
        "min.cleanable.dirty.ratio": {"type": "number", "minimum": 0, "maximum": 1},
    }
)
_MECHANISMS = {"type": "array", "items": {"type": "string", "enum": sorted(MECHANISMS)}}
_TOKEN_FIELDS: dict[str, Any] = {  # a user's API token as the admin API shows it: never its text again
    "id": {"type": "string", "pattern": "^[0-9a-f]{16}$"},
    "user": STR,
    "description": STR,
    "created_ms": _INT,  # ms since the epoch, the clock of the node that made it
    "expires_ms": _nullable(_INT),  # null: until revoked (a token of 0.1.0: now every token expires)
    "expired": {"type": "boolean"},  # by the clock of the node that answers
}
_TOKEN = _obj(_TOKEN_FIELDS, list(_TOKEN_FIELDS))
_ACL_FIELDS: dict[str, Any] = {
    "resource_type": {
        "type": "string",
        "enum": ["topic", "group", "cluster", "transactional_id", "subject", "registry"],
    },
    "name": {
        "type": "string",
        "minLength": 1,
        "description": "a topic, a group, a transactional id, a registry subject, '*', kafka-cluster or "
        "schema-registry",
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
                {"type": "string", "enum": ["any", *_ACL_FIELDS["resource_type"]["enum"]]}
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
            "message": STR,
            "retriable": {"type": "boolean"},
            "log_start_offset": _INT,
            "end_offset": _INT,
            "leader_hint": _nullable(STR),
            # 40909: the partitions a decommission could not move, and why
            "partitions": {
                "type": "array",
                "items": _obj({"topic": STR, "partition": _INT, "reason": STR}),
            },
            # 40910: a node holds at most replicas_max partition replicas; room: what each node has left
            "replicas_max": _INT,
            "room": {"type": "object", "additionalProperties": _INT},
        },
        ["error_code", "message"],
    ),
    "TopicNames": {"type": "array", "items": STR},
    "Brokers": _obj({"brokers": {"type": "array", "items": _INT}}, ["brokers"]),
    "Replica": _obj(
        {
            "broker": {**_INT, "description": "the node's broker id, as Kafka clients see it"},
            "node": STR,
            "leader": {"type": "boolean"},
            # as the partition's leader says; null: unknown (no leader known, or it could not be asked)
            "in_sync": _nullable({"type": "boolean"}),
            "error": _nullable(STR),  # why the replica cannot open or replay; null unless it failed
        }
    ),
    "Partition": _obj(
        {
            "partition": _INT,
            "leader": _nullable(STR),
            "replicas": {"type": "array", "items": ref("Replica")},
        }
    ),
    "Partitions": {"type": "array", "items": ref("Partition")},
    "Topic": _obj(
        {
            "name": STR,
            "partitions": {"type": "array", "items": ref("Partition")},
            "replication_factor": _INT,
            "configs": {"type": "object"},
        }
    ),
    "PartitionOffsets": {"oneOf": [ref("OffsetRange"), ref("OffsetForTimestamp")]},
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
                "partition": PARTITION_NUMBER,
                "headers": _HEADERS,
                "timestamp": {**_NATURAL, "description": "ms since the epoch (CreateTime); default: now"},
            },
            ["value"],
        )
    ),
    "ProduceRequest": _closed(
        _obj(
            {
                "records": {"type": "array", "items": ref("ProduceRecord"), "minItems": 1},
                "producer_id": _NATURAL,
                "sequence": _NATURAL,
            },
            ["records"],
        )
    ),
    # a schema format's (application/vnd.kafka.avro.v2+json, .jsonschema., .protobuf.): key and value as
    # JSON data of their schema, named by text (registered under {topic}-key / {topic}-value) or by id
    "SchemaProduceRecord": _closed(
        _obj(
            {
                "key": _ANY,
                "value": {**_ANY, "description": "left out: null (a tombstone)"},
                "partition": PARTITION_NUMBER,
                "headers": _HEADERS,
                "timestamp": {**_NATURAL, "description": "ms since the epoch (CreateTime); default: now"},
            }
        )
    ),
    "SchemaProduceRequest": _closed(
        _obj(
            {
                "records": {"type": "array", "items": ref("SchemaProduceRecord"), "minItems": 1},
                "key_schema": STR,
                "key_schema_id": _NATURAL,
                "value_schema": STR,
                "value_schema_id": _NATURAL,
                "producer_id": _NATURAL,
                "sequence": _NATURAL,
            },
            ["records"],
        )
    ),
    "ProduceResponse": _obj(
        {
            "key_schema_id": _nullable({**_INT, "description": "a schema format's: the key's schema id"}),
            "value_schema_id": _nullable({**_INT, "description": "a schema format's: the value's schema id"}),
            "offsets": {
                "type": "array",
                "items": _obj(
                    {
                        "partition": _INT,
                        "offset": _nullable(_INT),
                        "error_code": _nullable(_INT),
                        "error": _nullable(STR),
                    }
                ),
            },
        }
    ),
    "BatchProduced": _obj(
        {"partition": _INT, "base_offset": _NATURAL, "count": {"type": "integer", "minimum": 1}},
        required=("partition", "base_offset", "count"),
    ),
    # a JSON produce gets an offset per record; a record batch (application/vnd.raftlog.batch.v2) gets
    # its base offset and count: record i has offset base_offset + i
    "PartitionProduceResponse": {"oneOf": [ref("ProduceResponse"), ref("BatchProduced")]},
    "FetchedRecord": _obj(
        {
            "topic": STR,
            "partition": _INT,
            "offset": _INT,
            "timestamp": _INT,
            "timestamp_type": _TIMESTAMP_TYPE,
            "key": _ANY,
            "value": _ANY,
            "headers": {"type": "array", "items": _obj({"key": STR, "value": _HEADER_VALUE})},
            "format": {"type": "string", "enum": ["json", "binary", "avro", "jsonschema", "protobuf"]},
        }
    ),
    "FetchResponse": {"type": "array", "items": ref("FetchedRecord")},
    "ColumnarPage": _obj(
        {
            "topic": STR,
            "partition": _INT,
            "offsets": {"type": "array", "items": _INT},
            "timestamps": {"type": "array", "items": _INT},
            "timestamp_types": {"type": "array", "items": {"type": "integer", "enum": [0, 1]}},
            "keys": {"type": "array", "items": _nullable(STR)},
            "values": {"type": "array", "items": _nullable(STR)},
            "headers": {
                "type": "array",
                "items": {
                    "type": "array",
                    "items": {"type": "array", "items": _nullable(STR), "minItems": 2, "maxItems": 2},
                },
            },
        },
        ["topic", "partition", "offsets", "timestamps", "timestamp_types", "keys", "values", "headers"],
    ),
    "OffsetEntry": _closed(
        _obj(
            {
                "topic": STR,
                "partition": PARTITION_NUMBER,
                "offset": _NATURAL,
                "reset": {"type": "boolean"},
            },
            ["topic", "partition", "offset"],
        )
    ),
    "CommitOffsetsRequest": _closed(
        _obj(
            {
                "offsets": {"type": "array", "items": ref("OffsetEntry"), "minItems": 1, "maxItems": 10_000},
                "reset": {"type": "boolean"},
            },
            ["offsets"],
        )
    ),
    "DeleteRecordsRequest": _closed(
        _obj({"offset": {"type": "integer", "minimum": -1, "maximum": 2**63 - 1}}, ["offset"])
    ),
    "RecordsDeleted": _obj({"beginning_offset": _INT}, ["beginning_offset"]),
    "CommittedOffsets": _obj({"offsets": {"type": "array", "items": ref("OffsetEntry")}}),
    "Health": _obj(
        {
            "is_healthy": {"type": "boolean"},
            "controller": _nullable(STR),
            "nodes": {"type": "array", "items": STR},
            "nodes_down": {"type": "array", "items": STR},
            "nodes_disk_full": {"type": "array", "items": STR},  # refusing writes for want of room
            "nodes_kept_out": {
                "type": "object",
                "additionalProperties": STR,
                "description": "node -> why it takes no part in the cluster: its code is below the cluster's "
                "finalized feature levels (a node of an earlier release started again)",
            },
            "nodes_missing_doors": {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "string", "enum": ["kafka"]}},
                "description": "alive node -> the doors the other nodes serve that it lacks (no Kafka "
                "listener): it leads no partition until it is started with one",
            },
            "leaderless_partitions": {"type": "array", "items": _obj({"topic": STR, "partition": _INT})},
            "under_replicated_partitions": {
                "type": "array",
                "items": _obj({"topic": STR, "partition": _INT}),
            },
            "failed_replicas": {"type": "array", "items": ref("FailedReplica")},
        }
    ),
    # a partition replica that cannot open or replay, on any node
    "FailedReplica": _obj(
        {"node": STR, "topic": STR, "partition": _INT, "error": STR, "attempts": _INT},
        ["node", "topic", "partition", "error", "attempts"],
    ),
    "ClusterMetrics": _obj(
        {
            "node_id": STR,  # the node that answered
            "nodes": {
                "type": "array",
                "items": _obj(
                    {
                        "node_id": STR,
                        "metrics": {
                            **_nullable(STR),
                            "description": "its /metrics text (Prometheus 0.0.4)",
                        },
                        "error": {
                            **_nullable(STR),
                            "description": "why not: not alive, no answer, refused",
                        },
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
                "node_id": STR,
                "http": STR,
                "state": {"type": "string", "enum": ["alive", "suspect", "dead", "left"]},
                "incarnation": _INT,
                "leader_of": _INT,
                "version": _nullable(STR),  # null: a node of release 0.1.0 (it gossips none) or unheard
                "features": _nullable({"type": "object", "additionalProperties": _INT}),
                "kept_out": {
                    **_nullable(STR),
                    "description": "why it takes no part in the cluster (its code is below the finalized "
                    "feature levels): no Raft, peer call or routing reaches it; null: it takes part",
                },
                "doors_missing": {
                    "type": "array",
                    "items": {"type": "string", "enum": ["kafka"]},
                    "description": "the doors the other nodes serve that it lacks: it leads no partition",
                },
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
            "name": STR,
            "partitions": _INT,
            "replication_factor": _INT,
            "replicas": {"type": "array", "items": {"type": "array", "items": STR}},
            "configs": {"type": "object"},
        },
        ["name", "partitions", "replication_factor", "replicas", "configs"],
    ),
    "PartitionState": _obj(
        {
            "topic": STR,
            "partition": _INT,
            "leader": _nullable(STR),
            # null with the offsets: asked of a replica that cannot open or replay while no leader is known
            "term": _nullable(_INT),
            "high_watermark": _nullable(_INT),
            "log_start_offset": _nullable(_INT),
            "replicas": {
                "type": "array",
                "items": _obj(
                    {
                        "node": STR,
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
                        "error": _nullable(STR),  # why a failed replica cannot open or replay
                        "node_state": {
                            "type": "string",
                            "enum": ["alive", "suspect", "dead", "left"],
                            "description": "the replica's node as gossip sees it on the node answering",
                        },
                    }
                ),
            },
            "move": _nullable(_obj({"original": _STR_LIST, "target": _STR_LIST, "adding": _nullable(STR)})),
            "log_bytes": {**_nullable(_INT), "description": "the leader's log on disk, in bytes"},
            "leader_error": {
                **_nullable(STR),
                "description": "why the leader's view is missing: its node did not answer (leader, term and "
                "offsets null until another leads)",
            },
        }
    ),
    "TransferResult": _obj({"topic": STR, "partition": _INT, "leader": _nullable(STR)}),
    "ReplicasRequest": _closed(_obj({"replicas": {"type": "array", "items": STR}}, ["replicas"])),
    "Status": _obj({"status": STR, "node_id": STR, "pid": _INT}),  # which node and process answered
    # consumer groups (api/consumers.py)
    "CreateConsumerRequest": _closed(
        _obj(
            {
                "name": _nullable(STR),
                "id": _nullable({**STR, "description": "Confluent's older name field; overrides name"}),
                "format": {
                    "type": "string",
                    "enum": ["binary", "json", "avro", "jsonschema", "protobuf"],
                    "default": "binary",
                },
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
    "CreatedConsumer": _obj({"instance_id": STR, "base_uri": STR}, ["instance_id", "base_uri"]),
    "SubscriptionRequest": _closed(
        _obj({"topics": {"type": "array", "items": STR, "minItems": 1, "maxItems": 1_000}}, ["topics"])
    ),
    "Subscription": _obj({"topics": {"type": "array", "items": STR}}),
    "TopicPartition": _closed(_obj({"topic": STR, "partition": PARTITION_NUMBER}, ["topic", "partition"])),
    "Assignments": _obj(
        {"partitions": {"type": "array", "items": ref("TopicPartition")}, "generation": _INT}
    ),
    "PartitionsRequest": _closed(
        _obj(
            {
                "partitions": {
                    "type": "array",
                    "items": ref("TopicPartition"),
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
                "offsets": {"type": "array", "items": ref("CommitEntry"), "minItems": 1, "maxItems": 10_000},
                "timestamps": {
                    "type": "array",
                    "items": ref("TimestampEntry"),
                    "minItems": 1,
                    "maxItems": 10_000,
                },
            },
        )
    ),
    "TimestampEntry": _closed(
        _obj(
            {
                "topic": STR,
                "partition": PARTITION_NUMBER,
                "timestamp": {
                    "oneOf": [{"type": "string", "format": "date-time"}, _NATURAL],
                    "description": "ISO 8601 with a zone, or ms since the epoch",
                },
                "metadata": STR,
            },
            ["topic", "partition", "timestamp"],
        )
    ),
    "CommitEntry": _closed(
        _obj(
            {"topic": STR, "partition": PARTITION_NUMBER, "offset": _NATURAL, "metadata": STR},
            ["topic", "partition", "offset"],
        )
    ),
    "ConsumerCommitRequest": _closed(
        _obj(
            {
                "offsets": {"type": "array", "items": ref("CommitEntry"), "maxItems": 10_000},
                "partitions": {
                    "type": "array",
                    "items": ref("CommitEntry"),
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
                "items": _obj({"topic": STR, "partition": _INT, "offset": _INT, "metadata": STR}),
            }
        }
    ),
    "ConsumerGroups": _obj(
        {
            "groups": {
                "type": "array",
                "items": _obj(
                    {
                        "group": STR,
                        "generation": _INT,
                        "assignor": STR,
                        "members": _INT,
                        "coordinator_partition": _INT,
                        "state": STR,
                        "protocol_type": STR,
                        "door": _nullable(STR),
                        "group_type": {"type": "string", "enum": ["classic", "consumer", "share"]},
                    }
                ),
            }
        }
    ),
    "ConsumerGroup": _obj(
        {
            "group": STR,
            "generation": _INT,
            "assignor": STR,
            "coordinator_partition": _INT,
            "state": STR,
            "protocol_type": STR,
            "door": _nullable(STR),
            "group_type": {"type": "string", "enum": ["classic", "consumer", "share"]},
            "lag": _INT,
            "members": {
                "type": "array",
                "items": _obj(
                    {
                        "instance_id": STR,
                        "client_id": STR,
                        "client_host": STR,
                        "topics": {"type": "array", "items": STR},
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
            "partitions": {"type": "array", "items": _obj({"topic": STR, "partition": _INT})},
            "offset_partitions": {"type": "array", "items": _obj({"topic": STR, "partition": _INT})},
            "groups": {"type": "array", "items": STR},
            "updated_ms": _INT,
            "coordinator_epoch": _INT,
            "coordinator": STR,
        }
    ),
    "OpenTransactions": _obj(
        {
            "partitions": {
                "type": "array",
                "items": _obj(
                    {
                        "topic": STR,
                        "partition": _INT,
                        "error": STR,  # the partition could not be asked (its producers: unknown)
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
    "DeletedGroup": _obj({"group": STR, "offsets_deleted": _INT}, ["group", "offsets_deleted"]),
    "TopicConfigs": _obj({"topic": STR, "configs": {"type": "object"}}, ["topic", "configs"]),
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
            "topic": STR,
            "partition": _INT,
            "replicas": {"type": "array", "items": STR},
            "move": _nullable(
                _obj(
                    {
                        "original": {"type": "array", "items": STR},
                        "target": {"type": "array", "items": STR},
                        "replicas": {"type": "array", "items": STR},
                        "adding": _nullable(STR),
                        "cancelled": {"type": "boolean"},
                    }
                )
            ),
        },
        ["topic", "partition", "replicas", "move"],
    ),
    "Decommission": _obj(
        {
            "node_id": STR,
            "decommissioning": {"type": "boolean"},
            "replicas_remaining": _INT,
            "partitions": {"type": "array", "items": _obj({"topic": STR, "partition": _INT})},
            "moving": {"type": "array", "items": {"type": "object"}},
            "done": {"type": "boolean"},
            "controller_voter": {"type": "boolean"},
            # partitions that cannot move off the node now, and why (e.g. the node they move to is down)
            "blocked": {
                "type": "array",
                "items": _obj(
                    {"topic": STR, "partition": _INT, "reason": STR}, ["topic", "partition", "reason"]
                ),
            },
        },
        ["node_id", "decommissioning", "replicas_remaining", "done"],
    ),
    "Maintenance": _obj({"node_id": STR, "maintenance": {"type": "boolean"}}, ["node_id", "maintenance"]),
    # the controller group as its leader sees it (api/admin.py)
    "Controller": _obj(
        {
            "leader": STR,
            "term": _INT,
            "voters": _STR_LIST,
            "learners": _STR_LIST,  # joining: promoted once caught up
            "commit_index": _INT,
            "match_index": {"type": "object", "additionalProperties": _INT},
            "pending": _nullable(STR),  # why no change may start now (a change not yet applied)
        },
        ["leader", "term", "voters", "learners", "commit_index", "match_index", "pending"],
    ),
    "ControllerVoterRequest": _closed(_obj({"node_id": STR}, ["node_id"])),
    "FeatureUpdateRequest": _closed(_obj({"feature": STR, "level": _INT}, ["feature", "level"])),
    "Features": _obj(
        {
            "finalized": {"type": "object", "additionalProperties": _INT},
            "supported": {"type": "object", "additionalProperties": _INT},
            "nodes": {
                "type": "object",
                "additionalProperties": _obj(
                    {
                        "version": _nullable(STR),
                        "features": _nullable({"type": "object", "additionalProperties": _INT}),
                    }
                ),
            },
        },
        ["finalized", "supported", "nodes"],
    ),
    "User": _obj(
        {"name": STR, "mechanisms": _MECHANISMS, "created": {"type": "boolean"}},
        ["name", "mechanisms", "created"],
    ),
    "Users": _obj(
        {"users": {"type": "array", "items": _obj({"name": STR, "mechanisms": _MECHANISMS})}}, ["users"]
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
                "lifetime_ms": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": TOKEN_LIFETIME_MS_MAX,
                    "description": "ms from now; with neither, the node's --api-token-lifetime-ms (7 days)",
                },
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
                "name": STR,
                "password": {"type": "string", "minLength": 1},
                "mechanisms": _MECHANISMS,
                "iterations": {"type": "integer", "minimum": ITERATIONS_DEFAULT},
            },
            ["name", "password"],
        )
    ),
}
