"""The schema registry door's reading of a request and writing of an answer (``api.registry``): its
parameters and bodies as Confluent's registry takes them (each bad one refused with Confluent's code), and
its answers' JSON, in ``application/vnd.schemaregistry.v1+json``."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from api import state
from api.errors import BadRequest
from partitions.errors import RegistryError
from partitions.registry.schema_types import AVRO, JSON, PROTOBUF, Reference
from partitions.registry.service import (
    LATEST,
    ConfigView,
    Listing,
    SchemaInput,
    SchemaView,
)
from raftlog_contract import REGISTRY_V1

MEDIA_TYPE = REGISTRY_V1  # declared once, in raftlog_contract
BODY_TYPES = (MEDIA_TYPE, "application/vnd.schemaregistry+json", "application/json")
VERSION_MAX = 2**31 - 1
REFERENCES_MAX = 1000
LISTING_LIMIT_MAX = 100_000
FORMAT_CHARACTERS_MAX = 64
METADATA_PAIRS_MAX = 100


def respond(value: Any, status: int = 200) -> web.Response:
    return web.json_response(value, status=status, content_type=MEDIA_TYPE)


def _registry(request: web.Request) -> Any:
    return state.node(request).cluster.registry


async def call(request: web.Request, method: Any, *args: Any) -> Any:
    return await _registry(request).call(method, *args)


# -- parameters ----------------------------------------------------------------------------------------


def flag(request: web.Request, name: str) -> bool:
    value = request.query.get(name, "false").lower()
    if value not in ("true", "false"):
        raise BadRequest(f"query parameter {name}: true or false, not {value!r}")
    return value == "true"


def version_param(request: web.Request) -> int:
    given = request.match_info["version"]
    if given == "latest":
        return LATEST
    try:
        number = int(given)
    except ValueError:
        number = 0
    if number == LATEST or 1 <= number <= VERSION_MAX:
        return number
    raise RegistryError(
        42202,
        f"The specified version '{given}' is not a valid version id. Allowed values are between "
        f'[1, 2^31-1] and the string "latest"',
    )


def schema_id_param(request: web.Request) -> int:
    given = request.match_info["id"]
    try:
        number = int(given)
    except ValueError:
        raise RegistryError(40403, f"Schema {given} not found") from None
    if not 0 < number <= VERSION_MAX:
        raise RegistryError(40403, f"Schema {given} not found")
    return number


def format_param(request: web.Request) -> str:
    """``?format=``: a schema's text in another form (``ParsedSchema.formatted``); "" for none."""
    given = request.query.get("format", "")
    if len(given) > FORMAT_CHARACTERS_MAX:
        raise BadRequest(f"query parameter format: at most {FORMAT_CHARACTERS_MAX} characters")
    return given


def natural(request: web.Request, name: str, default: int) -> int:
    given = request.query.get(name)
    if given is None:
        return default
    try:
        number = int(given)
    except ValueError:
        raise BadRequest(f"query parameter {name}: an integer, not {given!r}") from None
    if not -1 <= number <= LISTING_LIMIT_MAX:
        raise BadRequest(f"query parameter {name}: -1 to {LISTING_LIMIT_MAX}")
    return number


def listing_of(request: web.Request, prefix_param: str = "subjectPrefix") -> Listing:
    return Listing(
        prefix=request.query.get(prefix_param, ""),
        deleted=flag(request, "deleted"),
        deleted_only=flag(request, "deletedOnly"),
        offset=max(0, natural(request, "offset", 0)),
        limit=natural(request, "limit", -1),
    )


async def json_body(request: web.Request) -> dict[str, Any]:
    raw = await state.body(request)
    try:
        value = json.loads(raw) if raw else None
    except ValueError as exc:
        raise RegistryError(42201, f"Invalid JSON body: {exc}") from None
    if not isinstance(value, dict):
        raise RegistryError(42201, "The request body must be a JSON object")
    return value


def json_text(value: Any, field: str) -> str:
    """A JSON object or string given for ``field`` (metadata, ruleSet) as compact JSON text."""
    if value is None:
        return ""
    if not isinstance(value, dict):
        raise RegistryError(42201, f"{field} must be a JSON object")
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def schema_input(body: dict[str, Any]) -> SchemaInput:
    schema = body.get("schema")
    if not isinstance(schema, str) or not schema:
        raise RegistryError(42201, "Empty schema")
    schema_type = body.get("schemaType") or AVRO
    if schema_type not in (AVRO, JSON, PROTOBUF):
        raise RegistryError(42201, f"Invalid schema type {schema_type}")
    given = body.get("references") or []
    if not isinstance(given, list) or len(given) > REFERENCES_MAX:
        raise RegistryError(42201, f"references: a list of at most {REFERENCES_MAX} references")
    references = []
    for i, entry in enumerate(given):
        if not isinstance(entry, dict):
            raise RegistryError(42201, f"references[{i}]: an object with name, subject and version")
        name, subject, version = entry.get("name"), entry.get("subject"), entry.get("version")
        if not isinstance(name, str) or not isinstance(subject, str) or not name or not subject:
            raise RegistryError(42201, f"references[{i}]: name and subject are required strings")
        if type(version) is not int or not (version == LATEST or 1 <= version <= VERSION_MAX):
            raise RegistryError(42201, f"references[{i}].version: an integer from 1 to 2^31-1")
        references.append(Reference(name, subject, version))
    return SchemaInput(
        schema,
        schema_type,
        tuple(references),
        json_text(body.get("metadata"), "metadata"),
        json_text(body.get("ruleSet"), "ruleSet"),
    )


def subject_name(request: web.Request) -> str:
    return request.match_info["subject"]


# -- answers -------------------------------------------------------------------------------------------


def schema_json(view: SchemaView, *, with_subject: bool) -> dict[str, Any]:
    answer: dict[str, Any] = {}
    if with_subject:
        answer.update(subject=view.subject, version=view.version)
    answer["id"] = view.id
    if view.guid:
        answer["guid"] = view.guid
    if view.schema_type != AVRO:
        answer["schemaType"] = view.schema_type
    if view.references:
        answer["references"] = [
            {"name": ref.name, "subject": ref.subject, "version": ref.version} for ref in view.references
        ]
    if view.metadata:
        answer["metadata"] = json.loads(view.metadata)
    if view.rule_set:
        answer["ruleSet"] = json.loads(view.rule_set)
    answer["schema"] = view.schema
    if with_subject and view.deleted:
        answer["deleted"] = True
    return answer


def config_json(view: ConfigView, key: str) -> dict[str, Any]:
    answer: dict[str, Any] = {}
    if view.compatibility is not None:
        answer[key] = view.compatibility
    if view.normalize is not None:
        answer["normalize"] = view.normalize
    return answer
