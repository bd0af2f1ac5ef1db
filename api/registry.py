"""The schema registry's REST API, as Confluent's clients call it, on the node's HTTP listener: a client's
registry URL is the node's HTTP URL (every node serves it; ``registry.coordinator`` holds the rules, and the
``__schemas`` leader answers, wherever the request entered).

Paths, parameters, bodies, answers and error bodies (``{"error_code": 40401, "message": ...}``) are
Confluent's; answers are ``application/vnd.schemaregistry.v1+json``. This module only translates.

With ACLs enforced each route asks what Redpanda's registry asks (``_ACCESS``, through ``api.access``): the
subject listing shows the subjects the caller may DESCRIBE, the schema listing the versions of those it may
READ (filtered before ``offset`` and ``limit`` page them), and a schema by id or guid needs READ on some
subject holding it; an id no subject holds is refused alike, so its existence is not told.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from aiohttp import web

from api import access, state
from api.access import (
    ALTER_CONFIGS,
    DELETE,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    READ,
    SUBJECT,
    WRITE,
    Access,
    needs,
    open_to_users,
    registry,
    subject,
)
from api.errors import BadRequest
from api.openapi import Operation, Param
from partitions.errors import RegistryError
from partitions.registry.schema_types import AVRO, JSON, PROTOBUF, Reference
from partitions.registry.service import (
    LATEST,
    ConfigView,
    Listing,
    RegistryService,
    SchemaInput,
    SchemaView,
)

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
BODY_TYPES = (MEDIA_TYPE, "application/vnd.schemaregistry+json", "application/json")
VERSION_MAX = 2**31 - 1
REFERENCES_MAX = 1000
LISTING_LIMIT_MAX = 100_000
FORMAT_CHARACTERS_MAX = 64
METADATA_PAIRS_MAX = 100


def _json(value: Any, status: int = 200) -> web.Response:
    return web.json_response(value, status=status, content_type=MEDIA_TYPE)


def _registry(request: web.Request) -> Any:
    return state.node(request).cluster.registry


async def _call(request: web.Request, method: Any, *args: Any) -> Any:
    return await _registry(request).call(method, *args)


# -- parameters ----------------------------------------------------------------------------------------


def _flag(request: web.Request, name: str) -> bool:
    value = request.query.get(name, "false").lower()
    if value not in ("true", "false"):
        raise BadRequest(f"query parameter {name}: true or false, not {value!r}")
    return value == "true"


def _version(request: web.Request) -> int:
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


def _schema_id(request: web.Request) -> int:
    given = request.match_info["id"]
    try:
        number = int(given)
    except ValueError:
        raise RegistryError(40403, f"Schema {given} not found") from None
    if not 0 < number <= VERSION_MAX:
        raise RegistryError(40403, f"Schema {given} not found")
    return number


def _format(request: web.Request) -> str:
    """``?format=``: a schema's text in another form (``ParsedSchema.formatted``); "" for none."""
    given = request.query.get("format", "")
    if len(given) > FORMAT_CHARACTERS_MAX:
        raise BadRequest(f"query parameter format: at most {FORMAT_CHARACTERS_MAX} characters")
    return given


def _natural(request: web.Request, name: str, default: int) -> int:
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


def _listing(request: web.Request, prefix_param: str = "subjectPrefix") -> Listing:
    return Listing(
        prefix=request.query.get(prefix_param, ""),
        deleted=_flag(request, "deleted"),
        deleted_only=_flag(request, "deletedOnly"),
        offset=max(0, _natural(request, "offset", 0)),
        limit=_natural(request, "limit", -1),
    )


async def _body(request: web.Request) -> dict[str, Any]:
    raw = await state.body(request)
    try:
        value = json.loads(raw) if raw else None
    except ValueError as exc:
        raise RegistryError(42201, f"Invalid JSON body: {exc}") from None
    if not isinstance(value, dict):
        raise RegistryError(42201, "The request body must be a JSON object")
    return value


def _text(value: Any, field: str) -> str:
    """A JSON object or string given for ``field`` (metadata, ruleSet) as compact JSON text."""
    if value is None:
        return ""
    if not isinstance(value, dict):
        raise RegistryError(42201, f"{field} must be a JSON object")
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _schema_input(body: dict[str, Any]) -> SchemaInput:
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
        _text(body.get("metadata"), "metadata"),
        _text(body.get("ruleSet"), "ruleSet"),
    )


def _subject(request: web.Request) -> str:
    return request.match_info["subject"]


# -- answers -------------------------------------------------------------------------------------------


def _schema_json(view: SchemaView, *, with_subject: bool) -> dict[str, Any]:
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


def _config_json(view: ConfigView, key: str) -> dict[str, Any]:
    answer: dict[str, Any] = {}
    if view.compatibility is not None:
        answer[key] = view.compatibility
    if view.normalize is not None:
        answer["normalize"] = view.normalize
    return answer


# -- handlers ------------------------------------------------------------------------------------------


async def schema_types(request: web.Request) -> web.Response:
    return _json([JSON, PROTOBUF, AVRO])


async def contexts(request: web.Request) -> web.Response:
    return _json(["."])


async def _authorize_schema(request: web.Request, schema_id: int | None, shown: str) -> None:
    """READ on some subject holding the schema (None: no schema has the guid), when ACLs are checked."""
    if not access.enforced(request):
        return
    holders: list[tuple[str, int]] = []
    if schema_id is not None:
        try:
            holders = await _call(request, RegistryService.schema_usage, schema_id, True)
        except RegistryError as exc:
            if exc.error_code != 40403:
                raise
    what = f"<any holding schema {shown}>"
    access.authorize_any(request, SUBJECT, READ, (name for name, _ in holders), what)


async def _schema(request: web.Request) -> SchemaView:
    schema_id = _schema_id(request)
    await _authorize_schema(request, schema_id, str(schema_id))
    view: SchemaView = await _call(
        request, RegistryService.schema, schema_id, request.query.get("subject", ""), _format(request)
    )
    return view


async def schema_by_id(request: web.Request) -> web.Response:
    view = await _schema(request)
    answer = _schema_json(view, with_subject=False)
    del answer["id"], answer["guid"]  # Confluent's SchemaString: the schema and what describes it
    return _json(answer)


async def schema_text_by_id(request: web.Request) -> web.Response:
    view = await _schema(request)
    return web.Response(text=view.schema, content_type="text/plain")


async def schema_by_guid(request: web.Request) -> web.Response:
    guid = request.match_info["guid"]
    try:
        view = await _call(request, RegistryService.schema_by_guid, guid)
    except RegistryError as exc:
        if exc.error_code == 40403:
            await _authorize_schema(request, None, guid)
        raise
    await _authorize_schema(request, view.id, guid)
    answer = _schema_json(view, with_subject=False)
    return _json(answer)


async def schema_subjects(request: web.Request) -> web.Response:
    usage = await _call(request, RegistryService.schema_usage, _schema_id(request), _flag(request, "deleted"))
    return _json(sorted({subject for subject, _ in usage}))


async def schema_versions(request: web.Request) -> web.Response:
    usage = await _call(request, RegistryService.schema_usage, _schema_id(request), _flag(request, "deleted"))
    return _json([{"subject": subject, "version": version} for subject, version in usage])


def _unpaged(request: web.Request, listing: Listing) -> Listing:
    """The listing to ask for: all of it when the caller's ACLs filter it before it is paged."""
    return replace(listing, offset=0, limit=-1) if access.enforced(request) else listing


def _shown(request: web.Request, items: list[Any], listing: Listing, operation: Any, name: Any) -> list[Any]:
    """The items the caller may see, paged (they came unpaged, ``_unpaged``, when ACLs are checked)."""
    if not access.enforced(request):
        return items
    shown = [item for item in items if access.allowed(request, SUBJECT, operation, name(item))]
    end = None if listing.limit < 0 else listing.offset + listing.limit
    return shown[listing.offset : end]


async def list_schemas(request: web.Request) -> web.Response:
    listing = _listing(request)
    asked = _unpaged(request, listing)
    views = await _call(request, RegistryService.schemas, asked, _flag(request, "latestOnly"))
    views = _shown(request, views, listing, READ, lambda view: view.subject)
    return _json([_schema_json(view, with_subject=True) for view in views])


async def list_subjects(request: web.Request) -> web.Response:
    listing = _listing(request)
    names = await _call(request, RegistryService.subjects, _unpaged(request, listing))
    return _json(_shown(request, names, listing, DESCRIBE, lambda name: name))


async def list_versions(request: web.Request) -> web.Response:
    return _json(await _call(request, RegistryService.versions, _subject(request), _listing(request)))


async def get_version(request: web.Request) -> web.Response:
    view = await _call(
        request,
        RegistryService.subject_version,
        _subject(request),
        _version(request),
        _flag(request, "deleted"),
        _format(request),
    )
    return _json(_schema_json(view, with_subject=True))


async def get_version_schema(request: web.Request) -> web.Response:
    view = await _call(
        request,
        RegistryService.subject_version,
        _subject(request),
        _version(request),
        _flag(request, "deleted"),
        _format(request),
    )
    return web.Response(text=view.schema, content_type="text/plain")


async def latest_with_metadata(request: web.Request) -> web.Response:
    """Confluent's getLatestWithMetadata: ``?key=K&value=V`` pairs (repeated, in order), the subject's
    latest version whose metadata properties hold them all."""
    keys, values = request.query.getall("key", []), request.query.getall("value", [])
    if len(keys) != len(values) or len(keys) > METADATA_PAIRS_MAX:
        raise BadRequest(f"key and value: as many of each, at most {METADATA_PAIRS_MAX}")
    view = await _call(
        request,
        RegistryService.latest_with_metadata,
        _subject(request),
        list(zip(keys, values, strict=True)),
        _flag(request, "deleted"),
    )
    return _json(_schema_json(view, with_subject=True))


async def referenced_by(request: web.Request) -> web.Response:
    return _json(await _call(request, RegistryService.referenced_by, _subject(request), _version(request)))


async def register(request: web.Request) -> web.Response:
    body = await _body(request)
    schema_id, version = body.get("id", 0) or 0, body.get("version", 0) or 0
    if type(schema_id) is not int or not 0 <= schema_id <= VERSION_MAX:
        raise RegistryError(42201, "id: an integer from 1 to 2^31-1")
    if type(version) is not int or not 0 <= version <= VERSION_MAX:
        raise RegistryError(42202, "version: an integer from 1 to 2^31-1")
    view = await _call(
        request,
        RegistryService.register,
        _subject(request),
        _schema_input(body),
        _flag(request, "normalize"),
        schema_id,
        version,
    )
    return _json(_schema_json(view, with_subject=True))


async def lookup(request: web.Request) -> web.Response:
    body = await _body(request)
    view = await _call(
        request,
        RegistryService.lookup,
        _subject(request),
        _schema_input(body),
        _flag(request, "normalize"),
        _flag(request, "deleted"),
    )
    return _json(_schema_json(view, with_subject=True))


async def delete_subject(request: web.Request) -> web.Response:
    deleted = await _call(
        request, RegistryService.delete_subject, _subject(request), _flag(request, "permanent")
    )
    return _json(deleted)


async def delete_version(request: web.Request) -> web.Response:
    deleted = await _call(
        request,
        RegistryService.delete_version,
        _subject(request),
        _version(request),
        _flag(request, "permanent"),
    )
    return _json(deleted)


async def _compatibility(request: web.Request, version: int | None) -> web.Response:
    body = await _body(request)
    answer = await _call(
        request,
        RegistryService.compatibility,
        _subject(request),
        version,
        _schema_input(body),
        _flag(request, "normalize"),
    )
    result: dict[str, Any] = {"is_compatible": answer.is_compatible}
    if _flag(request, "verbose"):
        result["messages"] = list(answer.messages)
    return _json(result)


async def compatibility_with_version(request: web.Request) -> web.Response:
    return await _compatibility(request, _version(request))


async def compatibility_with_versions(request: web.Request) -> web.Response:
    return await _compatibility(request, None)


def _config_subject(request: web.Request) -> str:
    return request.match_info.get("subject", "")


async def get_config(request: web.Request) -> web.Response:
    subject = _config_subject(request)
    view = await _call(request, RegistryService.config, subject, _flag(request, "defaultToGlobal"))
    return _json(_config_json(view, "compatibilityLevel"))


async def put_config(request: web.Request) -> web.Response:
    body = await _body(request)
    level = body.get("compatibility", body.get("compatibilityLevel"))
    normalize = body.get("normalize")
    if level is not None and not isinstance(level, str):
        raise RegistryError(42203, "Invalid compatibility level")
    if normalize is not None and not isinstance(normalize, bool):
        raise RegistryError(42203, "normalize: true or false")
    wanted = ConfigView(level.upper() if isinstance(level, str) else None, normalize)
    view = await _call(request, RegistryService.set_config, _config_subject(request), wanted)
    return _json(_config_json(view, "compatibility"))


async def delete_config(request: web.Request) -> web.Response:
    view = await _call(request, RegistryService.set_config, _config_subject(request), None)
    return _json(_config_json(view, "compatibilityLevel"))


async def get_mode(request: web.Request) -> web.Response:
    subject = _config_subject(request)
    mode = await _call(request, RegistryService.mode, subject, _flag(request, "defaultToGlobal"))
    return _json({"mode": mode})


async def put_mode(request: web.Request) -> web.Response:
    body = await _body(request)
    mode = body.get("mode")
    if not isinstance(mode, str):
        raise RegistryError(42204, "Invalid mode")
    subject, force = _config_subject(request), _flag(request, "force")
    set_to = await _call(request, RegistryService.set_mode, subject, mode.upper(), force)
    return _json({"mode": set_to})


async def delete_mode(request: web.Request) -> web.Response:
    previous = await _call(request, RegistryService.set_mode, _config_subject(request), None, False)
    return _json({"mode": previous})


# -- routes --------------------------------------------------------------------------------------------

_BY_ID = "READ subject: some subject holding the schema"
_ACCESS: dict[str, Access] = {
    "registrySchemaTypes": open_to_users("the schema types, the same for everyone"),
    "registryContexts": open_to_users("the default context only, which names no subject"),
    "registrySchemas": needs(in_handler="lists only the versions of subjects the caller may READ"),
    "registrySchemaById": needs(in_handler=_BY_ID), "registrySchemaTextById": needs(in_handler=_BY_ID),
    "registrySchemaByGuid": needs(in_handler=_BY_ID),
    "registrySchemaSubjects": needs(registry(DESCRIBE)), "registrySchemaVersions": needs(registry(DESCRIBE)),
    "registrySubjects": needs(in_handler="lists only the subjects the caller may DESCRIBE"),
    "lookupSchema": needs(subject(READ)), "registryDeleteSubject": needs(subject(DELETE)),
    "registryVersions": needs(subject(DESCRIBE)), "registerSchema": needs(subject(WRITE)),
    "registryVersion": needs(subject(READ)), "registryVersionSchema": needs(subject(READ)),
    "registryLatestWithMetadata": needs(subject(READ)),
    "registryReferencedBy": needs(registry(DESCRIBE)), "registryDeleteVersion": needs(subject(DELETE)),
    "checkCompatibilityWithVersion": needs(subject(READ)), "checkCompatibility": needs(subject(READ)),
    "registryGlobalConfig": needs(registry(DESCRIBE_CONFIGS)),
    "registrySetGlobalConfig": needs(registry(ALTER_CONFIGS)),
    "registryDeleteGlobalConfig": needs(registry(ALTER_CONFIGS)),
    "registrySubjectConfig": needs(subject(DESCRIBE_CONFIGS)),
    "registrySetSubjectConfig": needs(subject(ALTER_CONFIGS)),
    "registryDeleteSubjectConfig": needs(subject(ALTER_CONFIGS)),
    "registryGlobalMode": needs(registry(DESCRIBE_CONFIGS)),
    "registrySetGlobalMode": needs(registry(ALTER_CONFIGS)),
    "registrySubjectMode": needs(subject(DESCRIBE_CONFIGS)),
    "registrySetSubjectMode": needs(subject(ALTER_CONFIGS)),
    "registryDeleteSubjectMode": needs(subject(ALTER_CONFIGS)),
}  # fmt: skip
"""What each route asks of the caller's ACLs: Redpanda's table (docs/security.md says where it departs)."""
_BOOL = "boolean"
_DELETED = Param("deleted", _BOOL, "deleted (soft) ones too")
_SUBJECT_PREFIX = Param("subjectPrefix", "string", "only subjects starting with it")
_LISTING = (
    _SUBJECT_PREFIX,
    _DELETED,
    Param("deletedOnly", _BOOL, "deleted ones only"),
    Param("offset", "integer", "entries skipped", minimum=0, maximum=LISTING_LIMIT_MAX),
    Param("limit", "integer", "at most this many (-1: all)", minimum=-1, maximum=LISTING_LIMIT_MAX),
)
_NORMALIZE = Param("normalize", _BOOL, "normalize the schema first (Confluent's normalize=true)")
_SUBJECT_Q = Param("subject", "string", "only when this subject holds it")
_FORMAT = Param(
    "format", "string", "the text in another form: Avro resolved, Protobuf serialized or ignore_extensions"
)
_S = "/subjects/{subject}"
_V = "/subjects/{subject}/versions/{version}"


_ANSWERS = {
    "registrySchemaTypes": "RegistryNames", "registryContexts": "RegistryNames",
    "registrySchemas": "RegistrySchemaAnswers", "registrySchemaById": "RegistrySchemaAnswer",
    "registrySchemaByGuid": "RegistrySchemaAnswer", "registrySchemaSubjects": "RegistryNames",
    "registrySchemaVersions": "RegistryUsage", "registrySubjects": "RegistryNames",
    "lookupSchema": "RegistrySchemaAnswer", "registryDeleteSubject": "RegistryNumbers",
    "registryVersions": "RegistryNumbers", "registerSchema": "RegistrySchemaAnswer",
    "registryVersion": "RegistrySchemaAnswer", "registryReferencedBy": "RegistryNumbers",
    "registryLatestWithMetadata": "RegistrySchemaAnswer",
    "registryDeleteVersion": "RegistryVersionNumber",
    "checkCompatibilityWithVersion": "RegistryCompatibility", "checkCompatibility": "RegistryCompatibility",
}  # fmt: skip
_TEXT_ANSWERS = ("registrySchemaTextById", "registryVersionSchema")  # the schema's text alone


def _op(method: str, path: str, handler: Any, op_id: str, summary: str, **extra: Any) -> Operation:
    write = method != "GET" and not op_id.startswith(("lookup", "checkCompat"))
    if "Config" in op_id:
        answer: str | None = "RegistryConfigAnswer"
    elif "Mode" in op_id:
        answer = "RegistryModeAnswer"
    else:
        answer = _ANSWERS.get(op_id)
    return Operation(
        method,
        path,
        handler,
        op_id,
        summary,
        "registry",
        ok_type="text/plain" if op_id in _TEXT_ANSWERS else MEDIA_TYPE,
        ok_schema=answer,
        body_types=BODY_TYPES,
        errors=(404, 409, 422),
        access=_ACCESS[op_id],
        write=write,
        **extra,
    )


ROUTES: tuple[Operation, ...] = (
    _op("GET", "/schemas/types", schema_types, "registrySchemaTypes", "The schema types", local=True),
    _op(
        "GET",
        "/contexts",
        contexts,
        "registryContexts",
        "The registry's contexts (only the default)",
        local=True,
    ),
    _op(
        "GET",
        "/schemas",
        list_schemas,
        "registrySchemas",
        "Subjects' versions with their schemas",
        query=(*_LISTING, Param("latestOnly", _BOOL, "each subject's latest version only")),
    ),
    _op(
        "GET",
        "/schemas/ids/{id}",
        schema_by_id,
        "registrySchemaById",
        "A schema by its id",
        query=(_SUBJECT_Q, _FORMAT),
    ),
    _op(
        "GET",
        "/schemas/ids/{id}/schema",
        schema_text_by_id,
        "registrySchemaTextById",
        "A schema's text by its id",
        query=(_SUBJECT_Q, _FORMAT),
    ),
    _op("GET", "/schemas/guids/{guid}", schema_by_guid, "registrySchemaByGuid", "A schema by its guid"),
    _op(
        "GET",
        "/schemas/ids/{id}/subjects",
        schema_subjects,
        "registrySchemaSubjects",
        "The subjects registered with a schema id",
        query=(_DELETED,),
    ),
    _op(
        "GET",
        "/schemas/ids/{id}/versions",
        schema_versions,
        "registrySchemaVersions",
        "The subjects' versions registered with a schema id",
        query=(_DELETED,),
    ),
    _op("GET", "/subjects", list_subjects, "registrySubjects", "The subjects", query=_LISTING),
    _op(
        "POST",
        _S,
        lookup,
        "lookupSchema",
        "A subject's version holding a schema",
        query=(_NORMALIZE, _DELETED),
        body="RegistrySchema",
    ),
    _op(
        "DELETE",
        _S,
        delete_subject,
        "registryDeleteSubject",
        "Delete a subject (soft, or permanent)",
        query=(Param("permanent", _BOOL, "permanently (after a soft delete)"),),
    ),
    _op("GET", f"{_S}/versions", list_versions, "registryVersions", "A subject's versions", query=_LISTING),
    _op(
        "POST",
        f"{_S}/versions",
        register,
        "registerSchema",
        "Register a schema under a subject",
        query=(_NORMALIZE,),
        body="RegistrySchema",
    ),
    _op(
        "GET",
        _V,
        get_version,
        "registryVersion",
        "A subject's version (a number, -1 or latest)",
        query=(_DELETED, _FORMAT),
    ),
    _op(
        "GET",
        f"{_V}/schema",
        get_version_schema,
        "registryVersionSchema",
        "A subject's version's schema text",
        query=(_DELETED, _FORMAT),
    ),
    _op(
        "GET",
        f"{_S}/metadata",
        latest_with_metadata,
        "registryLatestWithMetadata",
        "A subject's latest version whose metadata properties hold the key=value pairs given",
        query=(
            Param("key", "string", "a property's name (repeated, paired in order with value)"),
            Param("value", "string", "its value"),
            _DELETED,
        ),
    ),
    _op(
        "GET",
        f"{_V}/referencedby",
        referenced_by,
        "registryReferencedBy",
        "Ids of the schemas referencing a subject's version",
    ),
    _op(
        "DELETE",
        _V,
        delete_version,
        "registryDeleteVersion",
        "Delete a subject's version (soft, or permanent)",
        query=(Param("permanent", _BOOL, "permanently (after a soft delete)"),),
    ),
    _op(
        "POST",
        f"/compatibility{_V}",
        compatibility_with_version,
        "checkCompatibilityWithVersion",
        "Whether a schema is compatible with a subject's version",
        query=(_NORMALIZE, Param("verbose", _BOOL, "with the reasons")),
        body="RegistrySchema",
    ),
    _op(
        "POST",
        f"/compatibility{_S}/versions",
        compatibility_with_versions,
        "checkCompatibility",
        "Whether a schema is compatible with the versions its subject's level names",
        query=(_NORMALIZE, Param("verbose", _BOOL, "with the reasons")),
        body="RegistrySchema",
    ),
    _op("GET", "/config", get_config, "registryGlobalConfig", "The global compatibility config"),
    _op(
        "PUT",
        "/config",
        put_config,
        "registrySetGlobalConfig",
        "Set the global compatibility config",
        body="RegistryConfig",
    ),
    _op(
        "DELETE",
        "/config",
        delete_config,
        "registryDeleteGlobalConfig",
        "The global config back to its defaults",
    ),
    _op(
        "GET",
        "/config/{subject}",
        get_config,
        "registrySubjectConfig",
        "A subject's compatibility config",
        query=(Param("defaultToGlobal", _BOOL, "the global one when the subject has none"),),
    ),
    _op(
        "PUT",
        "/config/{subject}",
        put_config,
        "registrySetSubjectConfig",
        "Set a subject's compatibility config",
        body="RegistryConfig",
    ),
    _op(
        "DELETE",
        "/config/{subject}",
        delete_config,
        "registryDeleteSubjectConfig",
        "Delete a subject's config",
    ),
    _op("GET", "/mode", get_mode, "registryGlobalMode", "The global mode"),
    _op(
        "PUT",
        "/mode",
        put_mode,
        "registrySetGlobalMode",
        "Set the global mode",
        query=(Param("force", _BOOL, "IMPORT even with subjects registered"),),
        body="RegistryMode",
    ),
    _op(
        "GET",
        "/mode/{subject}",
        get_mode,
        "registrySubjectMode",
        "A subject's mode",
        query=(Param("defaultToGlobal", _BOOL, "the global one when the subject has none"),),
    ),
    _op(
        "PUT",
        "/mode/{subject}",
        put_mode,
        "registrySetSubjectMode",
        "Set a subject's mode",
        query=(Param("force", _BOOL, "IMPORT even with versions registered"),),
        body="RegistryMode",
    ),
    _op("DELETE", "/mode/{subject}", delete_mode, "registryDeleteSubjectMode", "Delete a subject's mode"),
)
