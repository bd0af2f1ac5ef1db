"""The component schemas of the OpenAPI 3 document (``api.openapi.document``): every request and answer
body the routes of ``api.app.ROUTES`` name (``Operation.body``, ``ok_schema``), with the bounds the server
checks."""

from __future__ import annotations

from typing import Any

from api.openapi_parts import INT, NATURAL, PARTITION_NUMBER, STR, STR_LIST, closed, nullable, obj, ref
from partitions.groups.group_model import (
    AUTO_COMMIT_INTERVAL_MS_MAX,
    FETCH_MIN_BYTES_MAX,
    REQUEST_TIMEOUT_MS_MAX,
    SESSION_TIMEOUT_MS_MAX,
    SESSION_TIMEOUT_MS_MIN,
)

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


TOPIC_CONFIGS = obj(  # open: these and the other properties of raftlog/storage/config.py
    {
        "retention.ms": INT,
        "retention.bytes": INT,
        "segment.bytes": INT,
        "flush.policy": STR,
        "max.message.bytes": INT,
        "cleanup.policy": {"type": "string", "enum": ["delete", "compact", "compact,delete"]},
        "min.cleanable.dirty.ratio": {"type": "number", "minimum": 0, "maximum": 1},
    }
)


GROUP_PARTITION = obj(
    {
        "topic": STR,
        "partition": INT,
        "position": nullable(INT),
        "committed_offset": nullable(INT),
        "end_offset": INT,
        "lag": nullable(INT),
    }
)


SCHEMAS: dict[str, dict[str, Any]] = {
    "Error": obj(
        {
            "error_code": INT,
            "message": STR,
            "retriable": {"type": "boolean"},
            "log_start_offset": INT,
            "end_offset": INT,
            "leader_hint": nullable(STR),
            # 40909: the partitions a decommission could not move, and why
            "partitions": {
                "type": "array",
                "items": obj({"topic": STR, "partition": INT, "reason": STR}),
            },
            # 40910: a node holds at most replicas_max partition replicas; room: what each node has left
            "replicas_max": INT,
            "room": {"type": "object", "additionalProperties": INT},
        },
        ["error_code", "message"],
    ),
    "TopicNames": {"type": "array", "items": STR},
    "Brokers": obj({"brokers": {"type": "array", "items": INT}}, ["brokers"]),
    "Replica": obj(
        {
            "broker": {**INT, "description": "the node's broker id, as Kafka clients see it"},
            "node": STR,
            "leader": {"type": "boolean"},
            # as the partition's leader says; null: unknown (no leader known, or it could not be asked)
            "in_sync": nullable({"type": "boolean"}),
            "error": nullable(STR),  # why the replica cannot open or replay; null unless it failed
        }
    ),
    "Partition": obj(
        {
            "partition": INT,
            "leader": nullable(STR),
            "replicas": {"type": "array", "items": ref("Replica")},
        }
    ),
    "Partitions": {"type": "array", "items": ref("Partition")},
    "Topic": obj(
        {
            "name": STR,
            "partitions": {"type": "array", "items": ref("Partition")},
            "replication_factor": INT,
            "configs": {"type": "object"},
        }
    ),
    "PartitionOffsets": {"oneOf": [ref("OffsetRange"), ref("OffsetForTimestamp")]},
    "OffsetRange": obj({"beginning_offset": INT, "end_offset": INT}, ["beginning_offset", "end_offset"]),
    # ?timestamp=MS: the first record at or after it; null offset and record_timestamp when none is
    "OffsetForTimestamp": obj(
        {"timestamp": INT, "offset": nullable(INT), "record_timestamp": nullable(INT)},
        ["timestamp", "offset", "record_timestamp"],
    ),
    "ProduceRecord": closed(
        obj(
            {
                "key": _ANY,
                "value": _ANY,
                "partition": PARTITION_NUMBER,
                "headers": _HEADERS,
                "timestamp": {**NATURAL, "description": "ms since the epoch (CreateTime); default: now"},
            },
            ["value"],
        )
    ),
    "ProduceRequest": closed(
        obj(
            {
                "records": {"type": "array", "items": ref("ProduceRecord"), "minItems": 1},
                "producer_id": NATURAL,
                "sequence": NATURAL,
            },
            ["records"],
        )
    ),
    # a schema format's (application/vnd.kafka.avro.v2+json, .jsonschema., .protobuf.): key and value as
    # JSON data of their schema, named by text (registered under {topic}-key / {topic}-value) or by id
    "SchemaProduceRecord": closed(
        obj(
            {
                "key": _ANY,
                "value": {**_ANY, "description": "left out: null (a tombstone)"},
                "partition": PARTITION_NUMBER,
                "headers": _HEADERS,
                "timestamp": {**NATURAL, "description": "ms since the epoch (CreateTime); default: now"},
            }
        )
    ),
    "SchemaProduceRequest": closed(
        obj(
            {
                "records": {"type": "array", "items": ref("SchemaProduceRecord"), "minItems": 1},
                "key_schema": STR,
                "key_schema_id": NATURAL,
                "value_schema": STR,
                "value_schema_id": NATURAL,
                "producer_id": NATURAL,
                "sequence": NATURAL,
            },
            ["records"],
        )
    ),
    "ProduceResponse": obj(
        {
            "key_schema_id": nullable({**INT, "description": "a schema format's: the key's schema id"}),
            "value_schema_id": nullable({**INT, "description": "a schema format's: the value's schema id"}),
            "offsets": {
                "type": "array",
                "items": obj(
                    {
                        "partition": INT,
                        "offset": nullable(INT),
                        "error_code": nullable(INT),
                        "error": nullable(STR),
                    }
                ),
            },
        }
    ),
    "BatchProduced": obj(
        {"partition": INT, "base_offset": NATURAL, "count": {"type": "integer", "minimum": 1}},
        required=("partition", "base_offset", "count"),
    ),
    # a JSON produce gets an offset per record; a record batch (application/vnd.raftlog.batch.v2) gets
    # its base offset and count: record i has offset base_offset + i
    "PartitionProduceResponse": {"oneOf": [ref("ProduceResponse"), ref("BatchProduced")]},
    "FetchedRecord": obj(
        {
            "topic": STR,
            "partition": INT,
            "offset": INT,
            "timestamp": INT,
            "timestamp_type": _TIMESTAMP_TYPE,
            "key": _ANY,
            "value": _ANY,
            "headers": {"type": "array", "items": obj({"key": STR, "value": _HEADER_VALUE})},
            "format": {"type": "string", "enum": ["json", "binary", "avro", "jsonschema", "protobuf"]},
        }
    ),
    "FetchResponse": {"type": "array", "items": ref("FetchedRecord")},
    "ColumnarPage": obj(
        {
            "topic": STR,
            "partition": INT,
            "offsets": {"type": "array", "items": INT},
            "timestamps": {"type": "array", "items": INT},
            "timestamp_types": {"type": "array", "items": {"type": "integer", "enum": [0, 1]}},
            "keys": {"type": "array", "items": nullable(STR)},
            "values": {"type": "array", "items": nullable(STR)},
            "headers": {
                "type": "array",
                "items": {
                    "type": "array",
                    "items": {"type": "array", "items": nullable(STR), "minItems": 2, "maxItems": 2},
                },
            },
        },
        ["topic", "partition", "offsets", "timestamps", "timestamp_types", "keys", "values", "headers"],
    ),
    "OffsetEntry": closed(
        obj(
            {
                "topic": STR,
                "partition": PARTITION_NUMBER,
                "offset": NATURAL,
                "reset": {"type": "boolean"},
                "metadata": STR,
            },
            ["topic", "partition", "offset"],
        )
    ),
    "CommitOffsetsRequest": closed(
        obj(
            {
                "offsets": {"type": "array", "items": ref("OffsetEntry"), "minItems": 1, "maxItems": 10_000},
                "reset": {"type": "boolean"},
            },
            ["offsets"],
        )
    ),
    "DeleteRecordsRequest": closed(
        obj({"offset": {"type": "integer", "minimum": -1, "maximum": 2**63 - 1}}, ["offset"])
    ),
    "RecordsDeleted": obj({"beginning_offset": INT}, ["beginning_offset"]),
    "CommittedOffsets": obj({"offsets": {"type": "array", "items": ref("OffsetEntry")}}),
    "Health": obj(
        {
            "is_healthy": {"type": "boolean"},
            "controller": nullable(STR),
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
            "leaderless_partitions": {"type": "array", "items": obj({"topic": STR, "partition": INT})},
            "under_replicated_partitions": {
                "type": "array",
                "items": obj({"topic": STR, "partition": INT}),
            },
            "failed_replicas": {"type": "array", "items": ref("FailedReplica")},
        }
    ),
    # a partition replica that cannot open or replay, on any node
    "FailedReplica": obj(
        {"node": STR, "topic": STR, "partition": INT, "error": STR, "attempts": INT},
        ["node", "topic", "partition", "error", "attempts"],
    ),
    "ClusterMetrics": obj(
        {
            "node_id": STR,  # the node that answered
            "nodes": {
                "type": "array",
                "items": obj(
                    {
                        "node_id": STR,
                        "metrics": {
                            **nullable(STR),
                            "description": "its /metrics text (Prometheus 0.0.4)",
                        },
                        "error": {
                            **nullable(STR),
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
        "items": obj(
            {
                "node_id": STR,
                "http": STR,
                "state": {"type": "string", "enum": ["alive", "suspect", "dead", "left"]},
                "incarnation": INT,
                "leader_of": INT,
                "version": nullable(STR),  # null: a node of release 0.1.0 (it gossips none) or unheard
                "features": nullable({"type": "object", "additionalProperties": INT}),
                "kept_out": {
                    **nullable(STR),
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
    "CreateTopicRequest": closed(
        obj(
            {
                # partitions/names.py: names starting with "__" are the cluster's own (40003)
                "name": {"type": "string", "pattern": "^(?!__)[A-Za-z0-9._-]{1,200}$"},
                "partitions": {"type": "integer", "minimum": 1, "maximum": 10_000},
                "replication_factor": {"type": "integer", "minimum": 1, "maximum": 100},
                "configs": TOPIC_CONFIGS,
            },
            ["name"],
        )
    ),
    "CreatedTopic": obj(
        {
            "name": STR,
            "partitions": INT,
            "replication_factor": INT,
            "replicas": {"type": "array", "items": {"type": "array", "items": STR}},
            "configs": {"type": "object"},
        },
        ["name", "partitions", "replication_factor", "replicas", "configs"],
    ),
    "PartitionState": obj(
        {
            "topic": STR,
            "partition": INT,
            "leader": nullable(STR),
            # null with the offsets: asked of a replica that cannot open or replay while no leader is known
            "term": nullable(INT),
            "high_watermark": nullable(INT),
            "log_start_offset": nullable(INT),
            "replicas": {
                "type": "array",
                "items": obj(
                    {
                        "node": STR,
                        "role": {
                            "type": "string",
                            "enum": ["leader", "follower", "learner", "unknown", "failed"],
                        },
                        "match_index": {
                            **nullable(INT),
                            "description": "how far the replica's Raft log matches the leader's (a Raft "
                            "index, not a record offset; the leader's own last index)",
                        },
                        "match_offset": {
                            **nullable(INT),
                            "description": "match_index under the name of the API contract (a Raft index)",
                        },
                        "lag": {**nullable(INT), "description": "Raft entries behind the leader's last"},
                        "in_sync": nullable({"type": "boolean"}),  # null: unknown (not asked of a leader)
                        "error": nullable(STR),  # why a failed replica cannot open or replay
                        "node_state": {
                            "type": "string",
                            "enum": ["alive", "suspect", "dead", "left"],
                            "description": "the replica's node as gossip sees it on the node answering",
                        },
                    }
                ),
            },
            "move": nullable(obj({"original": STR_LIST, "target": STR_LIST, "adding": nullable(STR)})),
            "log_bytes": {**nullable(INT), "description": "the leader's log on disk, in bytes"},
            "leader_error": {
                **nullable(STR),
                "description": "why the leader's view is missing: its node did not answer (leader, term and "
                "offsets null until another leads)",
            },
        }
    ),
    "TransferResult": obj({"topic": STR, "partition": INT, "leader": nullable(STR)}),
    "ReplicasRequest": closed(obj({"replicas": {"type": "array", "items": STR}}, ["replicas"])),
    "Status": obj({"status": STR, "node_id": STR, "pid": INT}),  # which node and process answered
    # consumer groups (api/consumers.py)
    "CreateConsumerRequest": closed(
        obj(
            {
                "name": nullable(STR),
                "id": nullable({**STR, "description": "Confluent's older name field; overrides name"}),
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
    "CreatedConsumer": obj({"instance_id": STR, "base_uri": STR}, ["instance_id", "base_uri"]),
    "SubscriptionRequest": closed(
        obj({"topics": {"type": "array", "items": STR, "minItems": 1, "maxItems": 1_000}}, ["topics"])
    ),
    "Subscription": obj({"topics": {"type": "array", "items": STR}}),
    "TopicPartition": closed(obj({"topic": STR, "partition": PARTITION_NUMBER}, ["topic", "partition"])),
    "Assignments": obj({"partitions": {"type": "array", "items": ref("TopicPartition")}, "generation": INT}),
    "PartitionsRequest": closed(
        obj(
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
        "items": obj({}),
        "description": "always empty (Confluent's answer to a commit)",
    },
    "SeekRequest": closed(
        obj(
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
    "TimestampEntry": closed(
        obj(
            {
                "topic": STR,
                "partition": PARTITION_NUMBER,
                "timestamp": {
                    "oneOf": [{"type": "string", "format": "date-time"}, NATURAL],
                    "description": "ISO 8601 with a zone, or ms since the epoch",
                },
                "metadata": STR,
            },
            ["topic", "partition", "timestamp"],
        )
    ),
    "CommitEntry": closed(
        obj(
            {"topic": STR, "partition": PARTITION_NUMBER, "offset": NATURAL, "metadata": STR},
            ["topic", "partition", "offset"],
        )
    ),
    "ConsumerCommitRequest": closed(
        obj(
            {
                "offsets": {"type": "array", "items": ref("CommitEntry"), "maxItems": 10_000},
                "partitions": {
                    "type": "array",
                    "items": ref("CommitEntry"),
                    "maxItems": 10_000,
                    "description": "Redpanda's name of offsets",
                },
                "generation": nullable(NATURAL),
            }
        )
    ),
    "ConsumerOffsets": obj(
        {
            "offsets": {
                "type": "array",
                "items": obj({"topic": STR, "partition": INT, "offset": INT, "metadata": STR}),
            }
        }
    ),
    "ConsumerGroups": obj(
        {
            "groups": {
                "type": "array",
                "items": obj(
                    {
                        "group": STR,
                        "generation": INT,
                        "assignor": STR,
                        "members": INT,
                        "coordinator_partition": INT,
                        "state": STR,
                        "protocol_type": STR,
                        "door": nullable(STR),
                        "group_type": {"type": "string", "enum": ["classic", "consumer", "share", "streams"]},
                    }
                ),
            }
        }
    ),
    "ConsumerGroup": obj(
        {
            "group": STR,
            "generation": INT,
            "assignor": STR,
            "coordinator_partition": INT,
            "state": STR,
            "protocol_type": STR,
            "door": nullable(STR),
            "group_type": {"type": "string", "enum": ["classic", "consumer", "share", "streams"]},
            "lag": INT,
            "members": {
                "type": "array",
                "items": obj(
                    {
                        "instance_id": STR,
                        "client_id": STR,
                        "client_host": STR,
                        "topics": {"type": "array", "items": STR},
                        "partitions": {"type": "array", "items": GROUP_PARTITION},
                    }
                ),
            },
            "unassigned": {"type": "array", "items": GROUP_PARTITION},
        }
    ),
}
