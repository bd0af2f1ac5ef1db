"""The component schemas of the operator's routes (``/v1``: transactions, topics' configs, moves, nodes,
the controller, feature levels, users, ACLs and tokens), beside ``api.openapi_schemas``."""

from __future__ import annotations

from typing import Any

from api.openapi_parts import INT, STR, STR_LIST, closed, nullable, obj
from api.openapi_schemas import TOPIC_CONFIGS
from partitions.security.acls import Operation, ResourceType
from partitions.security.tokens import TOKEN_DESCRIPTION_BYTES_MAX, TOKEN_LIFETIME_MS_MAX
from partitions.security.users import ITERATIONS_DEFAULT, MECHANISMS

_TXN_STATE = {
    "type": "string",
    "enum": ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"],
}
# a transactional id as listed; described, with more (the Transaction schema)
_TXN_SUMMARY = {
    "transactional_id": STR,
    "producer_id": INT,
    "producer_epoch": INT,
    "state": _TXN_STATE,
    "started_ms": INT,  # -1: no transaction open
    "timeout_ms": INT,
    "coordinator_partition": INT,
}

_MECHANISMS = {"type": "array", "items": {"type": "string", "enum": sorted(MECHANISMS)}}
_TOKEN_FIELDS: dict[str, Any] = {  # a user's API token as the admin API shows it: never its text again
    "id": {"type": "string", "pattern": "^[0-9a-f]{16}$"},
    "user": STR,
    "description": STR,
    "created_ms": INT,  # ms since the epoch, the clock of the node that made it
    "expires_ms": nullable(INT),  # null: until revoked (a token of 0.1.0: now every token expires)
    "expired": {"type": "boolean"},  # by the clock of the node that answers
}
_TOKEN = obj(_TOKEN_FIELDS, list(_TOKEN_FIELDS))
_ACL_FIELDS: dict[str, Any] = {
    "resource_type": {
        "type": "string",
        "enum": [kind.name.lower() for kind in ResourceType if kind is not ResourceType.ANY],
    },
    "name": {
        "type": "string",
        "minLength": 1,
        "description": "a topic, a group, a transactional id, a user as User:NAME, a registry subject, '*', "
        "kafka-cluster or schema-registry",
    },
    "pattern_type": {"type": "string", "enum": ["literal", "prefixed"]},
    "principal": {"type": "string", "pattern": "^User:.+$", "description": "User:NAME, or User:* for all"},
    "host": {"type": "string", "minLength": 1, "description": "a client's IP address, or * for any"},
    "operation": {
        "type": "string",
        "enum": [operation.name.lower() for operation in Operation if operation is not Operation.ANY],
    },
    "permission": {"type": "string", "enum": ["allow", "deny"]},
}  # fmt: skip
_ACL = obj(_ACL_FIELDS, list(_ACL_FIELDS))
_ACL_FILTER = closed(
    obj(
        {
            **{name: nullable(schema) for name, schema in _ACL_FIELDS.items()},
            "resource_type": nullable(
                {"type": "string", "enum": ["any", *_ACL_FIELDS["resource_type"]["enum"]]}
            ),
            "pattern_type": nullable({"type": "string", "enum": ["any", "match", "literal", "prefixed"]}),
            "operation": nullable({"type": "string", "enum": ["any", *_ACL_FIELDS["operation"]["enum"]]}),
            "permission": nullable({"type": "string", "enum": ["any", "allow", "deny"]}),
        }
    )
)

ADMIN_SCHEMAS: dict[str, dict[str, Any]] = {
    "Transactions": obj(
        {
            "transactions": {
                "type": "array",
                "items": obj(_TXN_SUMMARY),
            }
        }
    ),
    "Transaction": obj(
        {
            **_TXN_SUMMARY,
            "partitions": {"type": "array", "items": obj({"topic": STR, "partition": INT})},
            "offset_partitions": {"type": "array", "items": obj({"topic": STR, "partition": INT})},
            "groups": {"type": "array", "items": STR},
            "updated_ms": INT,
            "coordinator_epoch": INT,
            "coordinator": STR,
        }
    ),
    "OpenTransactions": obj(
        {
            "partitions": {
                "type": "array",
                "items": obj(
                    {
                        "topic": STR,
                        "partition": INT,
                        "error": STR,  # the partition could not be asked (its producers: unknown)
                        "producers": {
                            "type": "array",
                            "items": obj(
                                {
                                    "producer_id": INT,
                                    "producer_epoch": INT,
                                    "coordinator_epoch": INT,
                                    "first_offset": INT,
                                    "started_ms": INT,
                                    "age_ms": INT,
                                }
                            ),
                        },
                    }
                ),
            }
        }
    ),
    "DeletedGroup": obj({"group": STR, "offsets_deleted": INT}, ["group", "offsets_deleted"]),
    "TopicConfigs": obj({"topic": STR, "configs": {"type": "object"}}, ["topic", "configs"]),
    "AddPartitionsRequest": closed(
        obj(
            {
                "partitions": {"type": "integer", "minimum": 1, "maximum": 10_000},
                "validate_only": {"type": "boolean"},
            },
            ["partitions"],
        )
    ),
    "ConfigsRequest": closed(
        obj(
            {"configs": TOPIC_CONFIGS},
            ["configs"],
        )
    ),
    "MoveState": obj(
        {
            "topic": STR,
            "partition": INT,
            "replicas": {"type": "array", "items": STR},
            "move": nullable(
                obj(
                    {
                        "original": {"type": "array", "items": STR},
                        "target": {"type": "array", "items": STR},
                        "replicas": {"type": "array", "items": STR},
                        "adding": nullable(STR),
                        "cancelled": {"type": "boolean"},
                    }
                )
            ),
        },
        ["topic", "partition", "replicas", "move"],
    ),
    "Decommission": obj(
        {
            "node_id": STR,
            "decommissioning": {"type": "boolean"},
            "replicas_remaining": INT,
            "partitions": {"type": "array", "items": obj({"topic": STR, "partition": INT})},
            "moving": {"type": "array", "items": {"type": "object"}},
            "done": {"type": "boolean"},
            "controller_voter": {"type": "boolean"},
            # partitions that cannot move off the node now, and why (e.g. the node they move to is down)
            "blocked": {
                "type": "array",
                "items": obj(
                    {"topic": STR, "partition": INT, "reason": STR}, ["topic", "partition", "reason"]
                ),
            },
        },
        ["node_id", "decommissioning", "replicas_remaining", "done"],
    ),
    "Maintenance": obj({"node_id": STR, "maintenance": {"type": "boolean"}}, ["node_id", "maintenance"]),
    # the controller group as its leader sees it (api/admin.py)
    "Controller": obj(
        {
            "leader": STR,
            "term": INT,
            "voters": STR_LIST,
            "learners": STR_LIST,  # joining: promoted once caught up
            "commit_index": INT,
            "match_index": {"type": "object", "additionalProperties": INT},
            "pending": nullable(STR),  # why no change may start now (a change not yet applied)
            "last_heard_ms": {"type": "object", "additionalProperties": INT},  # wall-clock ms, per member
            "caught_up_at_ms": {"type": "object", "additionalProperties": INT},
        },
        [
            "leader",
            "term",
            "voters",
            "learners",
            "commit_index",
            "match_index",
            "pending",
            "last_heard_ms",
            "caught_up_at_ms",
        ],
    ),
    "ControllerVoterRequest": closed(obj({"node_id": STR}, ["node_id"])),
    "FeatureUpdateRequest": closed(obj({"feature": STR, "level": INT}, ["feature", "level"])),
    "Features": obj(
        {
            "finalized": {"type": "object", "additionalProperties": INT},
            "supported": {"type": "object", "additionalProperties": INT},
            "nodes": {
                "type": "object",
                "additionalProperties": obj(
                    {
                        "version": nullable(STR),
                        "features": nullable({"type": "object", "additionalProperties": INT}),
                    }
                ),
            },
        },
        ["finalized", "supported", "nodes"],
    ),
    "User": obj(
        {"name": STR, "mechanisms": _MECHANISMS, "created": {"type": "boolean"}},
        ["name", "mechanisms", "created"],
    ),
    "Users": obj(
        {"users": {"type": "array", "items": obj({"name": STR, "mechanisms": _MECHANISMS})}}, ["users"]
    ),
    "Acls": obj({"acls": {"type": "array", "items": _ACL}}, ["acls"]),
    "CreateAclsRequest": closed(
        obj(
            {
                "acls": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 1000,
                    "items": closed(obj(_ACL_FIELDS, ["resource_type", "name", "principal", "operation"])),
                }
            },
            ["acls"],
        )
    ),
    "CreatedAcls": obj(  # existed: asked for, and there before
        {"created": {"type": "array", "items": _ACL}, "existed": {"type": "array", "items": _ACL}},
        ["created", "existed"],
    ),
    "DeleteAclsRequest": closed(
        obj(
            {"filters": {"type": "array", "minItems": 1, "maxItems": 1000, "items": _ACL_FILTER}}, ["filters"]
        )
    ),
    "DeletedAcls": obj({"deleted": {"type": "array", "items": _ACL}}, ["deleted"]),
    "TokenRequest": closed(
        obj(
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
    "CreatedToken": obj(
        {"token": {"type": "string", "pattern": "^rlt_[0-9a-f]{16}_[0-9a-f]{64}$"}, **_TOKEN_FIELDS},
        ["token", *_TOKEN_FIELDS],
    ),
    "Tokens": obj({"tokens": {"type": "array", "items": _TOKEN}}, ["tokens"]),
    "UserRequest": closed(
        obj(
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
