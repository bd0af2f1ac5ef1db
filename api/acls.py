"""ACLs: ``GET /v1/acls`` (those a filter of query parameters matches), ``POST /v1/acls`` (bindings),
``DELETE /v1/acls`` (those a filter matches, from query parameters or a body of filters; answers what it
removed). Admin endpoints: the admin token, or with ACLs enforced a user who may ALTER (DESCRIBE, to
list) the cluster.

An ACL in JSON is Kafka's binding with names for its codes, in any case: ``{"resource_type": "topic" |
"group" | "cluster" | "transactional_id" | "delegation_token" | "user" | "subject" | "registry", "name",
"pattern_type": "literal" | "prefixed", "principal": "User:alice" | "User:*", "host", "operation": "read" |
"write" | ...,
"permission": "allow" | "deny"}`` (``pattern_type`` literal, ``host`` ``*`` and ``permission`` allow by
default; the cluster is named ``kafka-cluster`` and the registry ``schema-registry``, the name of either
may be left out). ``subject`` and ``registry`` are the schema registry's (as Redpanda's), which Kafka's
ACL APIs do not show; a change naming them, or a ``user`` (KIP-373: who may make or see that user's
delegation tokens, ``create_tokens`` and ``describe_tokens``), waits for ``raftlog.version`` 2 (409/40932
before). A filter
has the same fields, each optional (any), and ``pattern_type`` also ``any`` or
``match`` (every ACL that would apply to the name). Each change is one controller change: all of its ACLs
or none. The answers are read from this node's controller metadata (``GET``), or are what the controller
leader did.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from api import state
from api.access import ALTER, DESCRIBE, cluster, needs
from api.admin import _object
from api.errors import BadRequest
from api.openapi import Operation, Param
from api.schemas import query_str, require_object
from partitions.metadata.service import AdminService
from partitions.security.acls import ONE_NAME, AclBinding, AclFilter, InvalidAcl, select
from raftlog_contract import ACLS_PATH

FIELDS = ("resource_type", "name", "pattern_type", "principal", "host", "operation", "permission")
_DEFAULTS = {"pattern_type": "literal", "host": "*", "permission": "allow"}
_REQUIRED = ("resource_type", "name", "principal", "operation")
FILTERS_MAX = 1000


def binding(value: Any, field: str) -> AclBinding:
    entry = require_object(value, field)
    unknown = sorted(set(entry) - set(FIELDS))
    if unknown:
        raise BadRequest(f"{field}.{unknown[0]}: unknown field (allowed: {', '.join(FIELDS)})")
    entry = dict(entry)
    one = _one_name(entry.get("resource_type"))
    if one is not None and entry.get("name") is None:
        entry["name"] = one
    missing = [name for name in _REQUIRED if entry.get(name) is None]
    if missing:
        raise BadRequest(f"{field}.{missing[0]}: missing")
    fields = {**_DEFAULTS, **{name: value for name, value in entry.items() if value is not None}}
    try:
        return AclBinding.of(*(fields[name] for name in FIELDS))
    except InvalidAcl as exc:
        raise BadRequest(f"{field}: {exc}") from None


def _one_name(resource_type: Any) -> str | None:
    """The name of the one resource of a type that has one (the cluster, the registry), given by name."""
    if not isinstance(resource_type, str):
        return None
    return next((name for kind, name in ONE_NAME.items() if kind.name.lower() == resource_type.lower()), None)


def acl_filter(values: dict[str, Any], field: str) -> AclFilter:
    unknown = sorted(set(values) - set(FIELDS))
    if unknown:
        raise BadRequest(f"{field}{unknown[0]}: unknown (allowed: {', '.join(FIELDS)})")
    given = {name: value for name, value in values.items() if value is not None}
    try:
        return AclFilter.of(**given)
    except InvalidAcl as exc:
        raise BadRequest(f"{field.rstrip('.') or 'filter'}: {exc}") from None


def _query_filter(request: web.Request) -> AclFilter | None:
    """The filter of the query parameters; None when there is none."""
    unknown = sorted(set(request.query) - set(FIELDS))
    if unknown:
        raise BadRequest(f"query parameter {unknown[0]}: unknown (allowed: {', '.join(FIELDS)})")
    given = {name: query_str(request.query, name) for name in FIELDS if name in request.query}
    return acl_filter(given, "query parameter ") if given else None


async def list_acls(request: web.Request) -> web.Response:
    wanted = _query_filter(request) or AclFilter()
    held = state.node(request).metadata.acls()
    return web.json_response({"acls": [acl.to_json() for acl in select(held, [wanted])]})


async def create_acls(request: web.Request) -> web.Response:
    body = await _object(request, {"acls"})
    entries = body.get("acls")
    if not isinstance(entries, list) or not 1 <= len(entries) <= FILTERS_MAX:
        raise BadRequest(f"acls: a list of 1 to {FILTERS_MAX} ACLs")
    wanted = [binding(entry, f"acls[{i}]") for i, entry in enumerate(entries)]
    created = set(await state.node(request).cluster.admin.call(AdminService.create_acls, wanted))
    unique = sorted(set(wanted), key=AclBinding.to_row)
    return web.json_response(
        {
            "created": [acl.to_json() for acl in unique if acl in created],
            "existed": [acl.to_json() for acl in unique if acl not in created],
        }
    )


async def delete_acls(request: web.Request) -> web.Response:
    """A filter of query parameters, or ``{"filters": [...]}``; one of them is required (a filter of
    ``resource_type=any`` removes every ACL)."""
    from_query = _query_filter(request)
    raw = await state.body(request)
    if raw and from_query is not None:
        raise BadRequest("give the filter as query parameters or as a body of filters, not both")
    if from_query is not None:
        filters = [from_query]
    elif raw:
        body = await _object(request, {"filters"})
        entries = body.get("filters")
        if not isinstance(entries, list) or not 1 <= len(entries) <= FILTERS_MAX:
            raise BadRequest(f"filters: a list of 1 to {FILTERS_MAX} filters")
        filters = [
            acl_filter(require_object(entry, f"filters[{i}]"), f"filters[{i}].")
            for i, entry in enumerate(entries)
        ]
    else:
        raise BadRequest("which ACLs? give a filter (resource_type=any removes every ACL)")
    removed = await state.node(request).cluster.admin.call(AdminService.delete_acls, filters)
    deleted = sorted({acl for matched in removed for acl in matched}, key=AclBinding.to_row)
    return web.json_response({"deleted": [acl.to_json() for acl in deleted]})


_FILTER_QUERY = tuple(
    Param(name, "string", f"only ACLs of this {name.replace('_', ' ')} (default: any)") for name in FIELDS
)

ROUTES: tuple[Operation, ...] = (
    Operation(
        "GET", ACLS_PATH, list_acls, "listAcls", "ACLs, those a filter matches (pattern_type match: those "
        "that apply to the name)", "admin", query=_FILTER_QUERY, ok_schema="Acls", local=True,
        access=needs(cluster(DESCRIBE)),
    ),
    Operation(
        "POST", ACLS_PATH, create_acls, "createAcls",
        "Add ACLs in one controller change (one that exists already is no error)", "admin",
        body="CreateAclsRequest", ok_schema="CreatedAcls", errors=(415, 507), write=True,
        access=needs(cluster(ALTER)),
    ),
    Operation(
        "DELETE", ACLS_PATH, delete_acls, "deleteAcls",
        "Remove the ACLs a filter (query parameters) or filters (body) match, in one controller change",
        "admin", query=_FILTER_QUERY, body="DeleteAclsRequest", body_required=False, ok_schema="DeletedAcls",
        errors=(415, 507), write=True,
        access=needs(cluster(ALTER)),
    ),
)  # fmt: skip
