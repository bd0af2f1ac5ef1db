"""The building blocks of the OpenAPI document's component schemas (``api.openapi_schemas`` and its
siblings): a reference, the common scalar schemas, objects, nullable and closed ones."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


INT = {"type": "integer"}
NATURAL = {"type": "integer", "minimum": 0}  # the server answers 400 to a negative value
PARTITION_NUMBER = {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
STR = {"type": "string"}
STR_LIST = {"type": "array", "items": STR}


def obj(props: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = list(required)
    return schema


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "nullable": True}


def closed(schema: dict[str, Any]) -> dict[str, Any]:
    """A request object: the server answers 400 to a field it does not know."""
    return {**schema, "additionalProperties": False}
