"""The schema registry's routes (``api.registry``'s handlers): Confluent's paths, what each asks of the
caller's ACLs (Redpanda's registry ACLs, through ``api.access``) and each answer's schema."""

from __future__ import annotations

from typing import Any

from api.access import (
    ALTER_CONFIGS,
    DELETE,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    READ,
    WRITE,
    Access,
    needs,
    open_to_users,
    registry,
    subject,
)
from api.openapi import Operation, Param
from api.registry import (
    compatibility_with_version,
    compatibility_with_versions,
    contexts,
    delete_config,
    delete_mode,
    delete_subject,
    delete_version,
    get_config,
    get_mode,
    get_version,
    get_version_schema,
    latest_with_metadata,
    list_schemas,
    list_subjects,
    list_versions,
    lookup,
    put_config,
    put_mode,
    referenced_by,
    register,
    schema_by_guid,
    schema_by_id,
    schema_subjects,
    schema_text_by_id,
    schema_types,
    schema_versions,
)
from api.registry_requests import BODY_TYPES, LISTING_LIMIT_MAX, MEDIA_TYPE

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
_PERMANENT = Param("permanent", _BOOL, "permanently (after a soft delete)")
_VERBOSE = Param("verbose", _BOOL, "with the reasons")
_DEFAULT_TO_GLOBAL = Param("defaultToGlobal", _BOOL, "the global one when the subject has none")
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
        query=(_PERMANENT,),
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
        query=(_PERMANENT,),
    ),
    _op(
        "POST",
        f"/compatibility{_V}",
        compatibility_with_version,
        "checkCompatibilityWithVersion",
        "Whether a schema is compatible with a subject's version",
        query=(_NORMALIZE, _VERBOSE),
        body="RegistrySchema",
    ),
    _op(
        "POST",
        f"/compatibility{_S}/versions",
        compatibility_with_versions,
        "checkCompatibility",
        "Whether a schema is compatible with the versions its subject's level names",
        query=(_NORMALIZE, _VERBOSE),
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
        query=(_DEFAULT_TO_GLOBAL,),
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
        query=(_DEFAULT_TO_GLOBAL,),
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
