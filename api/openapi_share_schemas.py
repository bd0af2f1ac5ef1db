"""The component schemas of the share group routes (``api.share_groups``), beside ``api.openapi_schemas``."""

from __future__ import annotations

from typing import Any

from api import openapi_parts
from api.openapi_parts import INT, NATURAL, PARTITION_NUMBER, STR, obj, ref
from partitions.groups.share.partition import RECORD_LOCKS_MAX

_ACK_TYPE = {"type": "string", "enum": ["accept", "release", "reject", "renew"]}
_ERROR_CODE = {"type": "integer", "nullable": True}
_ERROR = {"type": "string", "nullable": True}


def _obj(props: dict[str, Any], required: list[str] | None = None, closed: bool = False) -> dict[str, Any]:
    schema = obj(props, required or ())
    return openapi_parts.closed(schema) if closed else schema


SHARE_SCHEMAS: dict[str, dict[str, Any]] = {
    "ShareJoinRequest": _obj(
        {"topics": {"type": "array", "items": STR, "minItems": 1, "maxItems": 1_000}}, ["topics"], closed=True
    ),
    "ShareMembership": _obj(
        {
            "member_id": STR,
            "member_epoch": INT,
            "assignment": {"type": "array", "items": ref("TopicPartition")},
            "heartbeat_interval_ms": INT,
            "session_timeout_ms": INT,
            "base_uri": {"type": "string", "description": "the member's path (join only)"},
        },
        ["member_id", "member_epoch", "assignment"],
    ),
    "ShareRecord": {
        "allOf": [
            ref("FetchedRecord"),
            _obj({"delivery_count": {"type": "integer", "minimum": 1}}, ["delivery_count"]),
        ]
    },
    "SharePartitionError": _obj(
        {"topic": STR, "partition": INT, "error_code": INT, "error": STR},
        ["topic", "partition", "error_code", "error"],
    ),
    "ShareRecords": _obj(
        {
            "member_epoch": INT,
            "lock_ms": {"type": "integer", "description": "how long an acquired record stays locked"},
            "records": {"type": "array", "items": ref("ShareRecord")},
            "errors": {"type": "array", "items": ref("SharePartitionError")},
        },
        ["member_epoch", "records", "errors"],
    ),
    "ShareAcknowledgement": _obj(
        {
            "topic": STR,
            "partition": PARTITION_NUMBER,
            "offset": NATURAL,
            "first_offset": NATURAL,
            "last_offset": {
                "type": "integer",
                "minimum": 0,
                "description": f"at most first_offset + {RECORD_LOCKS_MAX - 1}",
            },
            "type": _ACK_TYPE,
        },
        ["topic", "partition", "type"],
        closed=True,
    ),
    "ShareAcknowledgeRequest": _obj(
        {
            "acknowledgements": {
                "type": "array",
                "items": ref("ShareAcknowledgement"),
                "minItems": 1,
                "maxItems": 10_000,
            }
        },
        ["acknowledgements"],
        closed=True,
    ),
    "ShareAcknowledged": _obj(
        {
            "partitions": {
                "type": "array",
                "items": _obj(
                    {
                        "topic": STR,
                        "partition": INT,
                        "acknowledged": INT,
                        "error_code": _ERROR_CODE,
                        "error": _ERROR,
                    }
                ),
            }
        },
        ["partitions"],
    ),
}
