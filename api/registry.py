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

from dataclasses import replace
from typing import Any

from aiohttp import web

from api import access
from api.access import (
    DESCRIBE,
    READ,
    SUBJECT,
)
from api.errors import BadRequest
from api.registry_requests import (
    METADATA_PAIRS_MAX,
    VERSION_MAX,
    call,
    config_json,
    flag,
    format_param,
    json_body,
    listing_of,
    respond,
    schema_id_param,
    schema_input,
    schema_json,
    subject_name,
    version_param,
)
from partitions.errors import RegistryError
from partitions.registry.schema_types import AVRO, JSON, PROTOBUF
from partitions.registry.service import (
    ConfigView,
    Listing,
    RegistryService,
    SchemaView,
)

# -- handlers ------------------------------------------------------------------------------------------


async def schema_types(request: web.Request) -> web.Response:
    return respond([JSON, PROTOBUF, AVRO])


async def contexts(request: web.Request) -> web.Response:
    return respond(["."])


async def _authorize_schema(request: web.Request, schema_id: int | None, shown: str) -> None:
    """READ on some subject holding the schema (None: no schema has the guid), when ACLs are checked."""
    if not access.enforced(request):
        return
    holders: list[tuple[str, int]] = []
    if schema_id is not None:
        try:
            holders = await call(request, RegistryService.schema_usage, schema_id, True)
        except RegistryError as exc:
            if exc.error_code != 40403:
                raise
    what = f"<any holding schema {shown}>"
    access.authorize_any(request, SUBJECT, READ, (name for name, _ in holders), what)


async def _schema(request: web.Request) -> SchemaView:
    schema_id = schema_id_param(request)
    await _authorize_schema(request, schema_id, str(schema_id))
    view: SchemaView = await call(
        request, RegistryService.schema, schema_id, request.query.get("subject", ""), format_param(request)
    )
    return view


async def schema_by_id(request: web.Request) -> web.Response:
    view = await _schema(request)
    answer = schema_json(view, with_subject=False)
    del answer["id"], answer["guid"]  # Confluent's SchemaString: the schema and what describes it
    return respond(answer)


async def schema_text_by_id(request: web.Request) -> web.Response:
    view = await _schema(request)
    return web.Response(text=view.schema, content_type="text/plain")


async def schema_by_guid(request: web.Request) -> web.Response:
    guid = request.match_info["guid"]
    try:
        view = await call(request, RegistryService.schema_by_guid, guid)
    except RegistryError as exc:
        if exc.error_code == 40403:
            await _authorize_schema(request, None, guid)
        raise
    await _authorize_schema(request, view.id, guid)
    answer = schema_json(view, with_subject=False)
    return respond(answer)


async def schema_subjects(request: web.Request) -> web.Response:
    usage = await call(
        request, RegistryService.schema_usage, schema_id_param(request), flag(request, "deleted")
    )
    return respond(sorted({subject for subject, _ in usage}))


async def schema_versions(request: web.Request) -> web.Response:
    usage = await call(
        request, RegistryService.schema_usage, schema_id_param(request), flag(request, "deleted")
    )
    return respond([{"subject": subject, "version": version} for subject, version in usage])


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
    listing = listing_of(request)
    asked = _unpaged(request, listing)
    views = await call(request, RegistryService.schemas, asked, flag(request, "latestOnly"))
    views = _shown(request, views, listing, READ, lambda view: view.subject)
    return respond([schema_json(view, with_subject=True) for view in views])


async def list_subjects(request: web.Request) -> web.Response:
    listing = listing_of(request)
    names = await call(request, RegistryService.subjects, _unpaged(request, listing))
    return respond(_shown(request, names, listing, DESCRIBE, lambda name: name))


async def list_versions(request: web.Request) -> web.Response:
    return respond(await call(request, RegistryService.versions, subject_name(request), listing_of(request)))


async def _subject_version(request: web.Request) -> SchemaView:
    """The subject's version the path names, as the query asks (``deleted``, ``format``)."""
    view: SchemaView = await call(
        request,
        RegistryService.subject_version,
        subject_name(request),
        version_param(request),
        flag(request, "deleted"),
        format_param(request),
    )
    return view


async def get_version(request: web.Request) -> web.Response:
    return respond(schema_json(await _subject_version(request), with_subject=True))


async def get_version_schema(request: web.Request) -> web.Response:
    view = await _subject_version(request)
    return web.Response(text=view.schema, content_type="text/plain")


async def latest_with_metadata(request: web.Request) -> web.Response:
    """Confluent's getLatestWithMetadata: ``?key=K&value=V`` pairs (repeated, in order), the subject's
    latest version whose metadata properties hold them all."""
    keys, values = request.query.getall("key", []), request.query.getall("value", [])
    if len(keys) != len(values) or len(keys) > METADATA_PAIRS_MAX:
        raise BadRequest(f"key and value: as many of each, at most {METADATA_PAIRS_MAX}")
    view = await call(
        request,
        RegistryService.latest_with_metadata,
        subject_name(request),
        list(zip(keys, values, strict=True)),
        flag(request, "deleted"),
    )
    return respond(schema_json(view, with_subject=True))


async def referenced_by(request: web.Request) -> web.Response:
    return respond(
        await call(request, RegistryService.referenced_by, subject_name(request), version_param(request))
    )


async def register(request: web.Request) -> web.Response:
    body = await json_body(request)
    schema_id, version = body.get("id", 0) or 0, body.get("version", 0) or 0
    if type(schema_id) is not int or not 0 <= schema_id <= VERSION_MAX:
        raise RegistryError(42201, "id: an integer from 1 to 2^31-1")
    if type(version) is not int or not 0 <= version <= VERSION_MAX:
        raise RegistryError(42202, "version: an integer from 1 to 2^31-1")
    view = await call(
        request,
        RegistryService.register,
        subject_name(request),
        schema_input(body),
        flag(request, "normalize"),
        schema_id,
        version,
    )
    return respond(schema_json(view, with_subject=True))


async def lookup(request: web.Request) -> web.Response:
    body = await json_body(request)
    view = await call(
        request,
        RegistryService.lookup,
        subject_name(request),
        schema_input(body),
        flag(request, "normalize"),
        flag(request, "deleted"),
    )
    return respond(schema_json(view, with_subject=True))


async def delete_subject(request: web.Request) -> web.Response:
    deleted = await call(
        request, RegistryService.delete_subject, subject_name(request), flag(request, "permanent")
    )
    return respond(deleted)


async def delete_version(request: web.Request) -> web.Response:
    deleted = await call(
        request,
        RegistryService.delete_version,
        subject_name(request),
        version_param(request),
        flag(request, "permanent"),
    )
    return respond(deleted)


async def _compatibility(request: web.Request, version: int | None) -> web.Response:
    body = await json_body(request)
    answer = await call(
        request,
        RegistryService.compatibility,
        subject_name(request),
        version,
        schema_input(body),
        flag(request, "normalize"),
    )
    result: dict[str, Any] = {"is_compatible": answer.is_compatible}
    if flag(request, "verbose"):
        result["messages"] = list(answer.messages)
    return respond(result)


async def compatibility_with_version(request: web.Request) -> web.Response:
    return await _compatibility(request, version_param(request))


async def compatibility_with_versions(request: web.Request) -> web.Response:
    return await _compatibility(request, None)


def _config_subject(request: web.Request) -> str:
    return request.match_info.get("subject", "")


async def get_config(request: web.Request) -> web.Response:
    subject = _config_subject(request)
    view = await call(request, RegistryService.config, subject, flag(request, "defaultToGlobal"))
    return respond(config_json(view, "compatibilityLevel"))


async def put_config(request: web.Request) -> web.Response:
    body = await json_body(request)
    level = body.get("compatibility", body.get("compatibilityLevel"))
    normalize = body.get("normalize")
    if level is not None and not isinstance(level, str):
        raise RegistryError(42203, "Invalid compatibility level")
    if normalize is not None and not isinstance(normalize, bool):
        raise RegistryError(42203, "normalize: true or false")
    wanted = ConfigView(level.upper() if isinstance(level, str) else None, normalize)
    view = await call(request, RegistryService.set_config, _config_subject(request), wanted)
    return respond(config_json(view, "compatibility"))


async def delete_config(request: web.Request) -> web.Response:
    view = await call(request, RegistryService.set_config, _config_subject(request), None)
    return respond(config_json(view, "compatibilityLevel"))


async def get_mode(request: web.Request) -> web.Response:
    subject = _config_subject(request)
    mode = await call(request, RegistryService.mode, subject, flag(request, "defaultToGlobal"))
    return respond({"mode": mode})


async def put_mode(request: web.Request) -> web.Response:
    body = await json_body(request)
    mode = body.get("mode")
    if not isinstance(mode, str):
        raise RegistryError(42204, "Invalid mode")
    subject, force = _config_subject(request), flag(request, "force")
    set_to = await call(request, RegistryService.set_mode, subject, mode.upper(), force)
    return respond({"mode": set_to})


async def delete_mode(request: web.Request) -> web.Response:
    previous = await call(request, RegistryService.set_mode, _config_subject(request), None, False)
    return respond({"mode": previous})
