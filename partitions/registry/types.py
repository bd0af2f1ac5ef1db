"""The schema types by Confluent's name (``AVRO``, ``JSON``, ``PROTOBUF``): each type's module defines
its ``SchemaType`` (``schema_types``), imported on first use (protobuf's compiler is not loaded by a node
that never sees a Protobuf schema)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from partitions.registry.schema_types import AVRO, JSON, PROTOBUF, SchemaType

_MODULES = {
    AVRO: ("partitions.registry.avro", "AVRO_TYPE"),
    JSON: ("partitions.registry.json_schema", "JSON_TYPE"),
    PROTOBUF: ("partitions.registry.protobuf", "PROTOBUF_TYPE"),
}


class _Types(Mapping[str, SchemaType]):
    def __init__(self) -> None:
        self._loaded: dict[str, SchemaType] = {}

    def __getitem__(self, name: str) -> SchemaType:
        loaded = self._loaded.get(name)
        if loaded is None:
            module, attribute = _MODULES[name]
            loaded = self._loaded[name] = getattr(importlib.import_module(module), attribute)
        return loaded

    def __iter__(self) -> Iterator[str]:
        return iter(_MODULES)

    def __len__(self) -> int:
        return len(_MODULES)


TYPES: Mapping[str, SchemaType] = _Types()
