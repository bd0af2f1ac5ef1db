"""The component schemas of the schema registry's routes (``api.registry_routes``), beside
``api.openapi_schemas``: Confluent's request bodies (a field it does not know is ignored, as Confluent's
registry ignores it)."""

from __future__ import annotations

from typing import Any

from api.openapi_parts import STR, obj
from partitions.registry.table import COMPATIBILITY_LEVELS, MODES

_VERSION = {"type": "integer", "minimum": 1, "maximum": 2**31 - 1}
_REFERENCE = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "subject": {"type": "string"}, "version": _VERSION},
    "required": ["name", "subject", "version"],
}
_LEVEL = {"type": "string", "enum": list(COMPATIBILITY_LEVELS)}
_BOOL = {"type": "boolean"}
_MODE = obj({"mode": {"type": "string", "enum": list(MODES)}}, ["mode"])

_ANSWERED_SCHEMA = {
    "type": "object",
    "properties": {
        "subject": STR,
        "version": _VERSION,
        "id": {"type": "integer", "minimum": 1},
        "guid": STR,
        "schemaType": {"type": "string", "enum": ["JSON", "PROTOBUF"]},
        "references": {"type": "array", "items": _REFERENCE},
        "metadata": {"type": "object"},
        "ruleSet": {"type": "object"},
        "schema": STR,
        "deleted": {"type": "boolean"},
    },
    "required": ["schema"],
}

REGISTRY_SCHEMAS: dict[str, dict[str, Any]] = {
    "RegistryNames": {"type": "array", "items": STR},
    "RegistryNumbers": {"type": "array", "items": {"type": "integer"}},
    "RegistryVersionNumber": _VERSION,
    "RegistrySchemaAnswer": _ANSWERED_SCHEMA,
    "RegistrySchemaAnswers": {"type": "array", "items": _ANSWERED_SCHEMA},
    "RegistryUsage": {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"subject": STR, "version": _VERSION},
            "required": ["subject", "version"],
        },
    },
    "RegistryCompatibility": {
        "type": "object",
        "properties": {"is_compatible": {"type": "boolean"}, "messages": {"type": "array", "items": STR}},
        "required": ["is_compatible"],
    },
    "RegistryConfigAnswer": obj({"compatibilityLevel": _LEVEL, "compatibility": _LEVEL, "normalize": _BOOL}),
    "RegistryModeAnswer": _MODE,
    "RegistrySchema": {
        "type": "object",
        "properties": {
            "schema": {"type": "string", "minLength": 1},
            "schemaType": {"type": "string", "enum": ["AVRO", "JSON", "PROTOBUF"]},
            "references": {"type": "array", "items": _REFERENCE, "maxItems": 1000},
            "metadata": {"type": "object"},
            "ruleSet": {"type": "object"},
            "id": {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
            "version": _VERSION,
        },
        "required": ["schema"],
    },
    "RegistryConfig": obj({"compatibility": _LEVEL, "normalize": _BOOL}),
    "RegistryMode": _MODE,
}
