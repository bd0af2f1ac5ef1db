"""The route table's shape (``Operation``) and the OpenAPI 3 document generated from it.

``api.app.ROUTES`` is the single list of endpoints: the app registers exactly those and ``/openapi.json``
describes exactly those, so the document cannot drift from what is served. The component schemas the
routes name are ``api.openapi_schemas``.
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
from api.openapi_admin_schemas import ADMIN_SCHEMAS
from api.openapi_parts import PARTITION_NUMBER, STR, ref
from api.openapi_registry_schemas import REGISTRY_SCHEMAS
from api.openapi_schemas import SCHEMAS
from api.openapi_share_schemas import SHARE_SCHEMAS
from partitions.peers.client import INTERNAL_PREFIX
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
    tag: str  # "client" | "admin" | "operations" | "registry"
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
        "group full (40907), partition already moving (40908), too many tokens (40915), a peer node kept out "
        "of the cluster (40934)"
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
            "schema": PARTITION_NUMBER if name == "partition" else STR,
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
        ok["content"] = {op.answer_type: {"schema": ref(op.ok_schema)}}
    elif op.answer_type != PLAIN_JSON and op.ok_status != 204:
        ok["content"] = {op.answer_type: {"schema": STR}}
    for media, schema in op.ok_alternatives:
        binary = {"type": "string", "format": "binary"}
        ok.setdefault("content", {})[media] = {"schema": ref(schema) if schema else binary}
    responses: dict[str, Any] = {str(op.ok_status): ok}
    error_content = {error_type(op.answer_type): {"schema": ref("Error")}}
    statuses = set(op.errors) | set(ANY_ERRORS) | (set() if op.local else set(COMMON_ERRORS))
    internal = op.path.startswith(INTERNAL_PREFIX)  # the cluster credential, always
    if internal or (admin_token and op.path.startswith("/v1/")):
        statuses.add(401)
    if internal:  # a caller whose code is below the cluster's finalized levels (NodeKeptOut)
        statuses.add(409)
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
        content = {} if op.body is None else {media: {"schema": ref(op.body)} for media in op.body_types}
        doc["requestBody"] = {"required": op.body_required, "content": content}
        for media, schema in op.body_alternatives:
            opaque = {"type": "string", "format": "binary"}
            doc["requestBody"]["content"][media] = {"schema": ref(schema) if schema else opaque}
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
        "tags": [
            {"name": "client"},
            {"name": "admin"},
            {"name": "operations"},
            {"name": "registry"},
            {"name": "internal"},
        ],
        "paths": paths,
        "components": {
            "schemas": {**SCHEMAS, **ADMIN_SCHEMAS, **SHARE_SCHEMAS, **REGISTRY_SCHEMAS},
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "basic": {"type": "http", "scheme": "basic"},
            },
        },
    }
