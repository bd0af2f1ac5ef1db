"""The types a schema and its imports declare, and how a name written in it resolves (Confluent's
``diff/Context.java``): what the normalizer (protobuf_format) and the compatibility check
(protobuf_diff) look names up in. One table for the original schema and one for the update."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from partitions.registry.protobuf_elements import Enum, Extend, Field, Message, ProtoFile


@dataclass(frozen=True, slots=True)
class TypeInfo:
    package: str
    reference: str  # the import path the type came from; "" for the schema's own file
    type: Message | Enum
    is_map: bool
    key: Field | None
    value: Field | None

    def map_type(self) -> str | None:
        if not self.is_map or self.key is None or self.value is None:
            return None
        return f"map<{self.key.type}, {self.value.type}>"


@dataclass(frozen=True, slots=True)
class ExtendInfo:
    package: str
    reference: str
    field: Field


class Names:
    """One schema's types and extension fields by full name (no leading dot), and the scope a
    relative name is resolved in (its package and the enclosing message names)."""

    def __init__(self) -> None:
        self.types: dict[str, TypeInfo] = {}
        self.extend_fields: dict[str, ExtendInfo] = {}
        self.package = ""
        self.scope: list[str] = []

    def collect(self, files: Iterable[tuple[str, ProtoFile]]) -> None:
        """``files``: (import path, file), the dependencies first and the schema's own file ("") last."""
        for reference, file in files:
            self.package = file.package or ""
            self._extends(reference, file.extends, ())
            self._types(reference, file.types, ())

    def _qualified(self, path: tuple[str, ...]) -> str:
        name = ".".join(path)
        return f"{self.package}.{name}" if self.package else name

    def _types(self, reference: str, types: Iterable[Message | Enum], path: tuple[str, ...]) -> None:
        for element in types:
            here = (*path, element.name)
            key = value = None
            is_map = False
            if isinstance(element, Message):
                self._extends(reference, element.extends, here)
                is_map = element.is_map_entry
                if is_map:
                    key = next((f for f in element.fields if f.name == "key"), None)
                    value = next((f for f in element.fields if f.name == "value"), None)
            self.types[self._qualified(here)] = TypeInfo(self.package, reference, element, is_map, key, value)
            if isinstance(element, Message):
                self._types(reference, element.nested, here)

    def _extends(self, reference: str, extends: Iterable[Extend], path: tuple[str, ...]) -> None:
        for extend in extends:
            for field in extend.fields:
                name = self._qualified((*path, field.name))
                self.extend_fields[name] = ExtendInfo(self.package, reference, field)

    @contextmanager
    def enter(self, name: str) -> Iterator[None]:
        self.scope.append(name)
        try:
            yield
        finally:
            self.scope.pop()

    def resolve(self, name: str, table: str = "types") -> str | None:
        """The full name ``name`` refers to from the current scope, as protobuf scopes names."""
        if not self.types:
            return None
        known = self.types if table == "types" else self.extend_fields
        return resolve_in(known, self.package, self.scope, name)

    def get(self, name: str) -> TypeInfo | None:
        full = self.resolve(name)
        return self.types.get(full) if full is not None else None


def resolve_in(known: Mapping[str, object], package: str, scope: list[str], name: str) -> str | None:
    """Confluent's ``Context.resolveFull``: a leading dot is a full name; otherwise the innermost of
    package + enclosing names + ``name``, out to ``name`` alone."""
    if name.startswith("."):
        return name[1:] if name[1:] in known else None
    prefix = (package.split(".") if package else []) + list(scope)
    while prefix:
        candidate = ".".join(prefix) + "." + name
        if candidate in known:
            return candidate
        prefix.pop()
    return name if name in known else None
