"""Registered schemas by id, parsed once per node, for what reads and writes framed records (``framing``):
the HTTP door's schema formats, and the broker's record check.

An id's schema never changes (the registry never gives an id twice, and a schema deleted and registered
again keeps it), so a node keeps what it parsed (``SchemaCache``, the ``SCHEMAS_MAX`` used last) and asks the
registry only for an id it has not seen, with the texts of what its references reach, resolved by the
registry itself (``RegistryService.schema`` ``with_references``: one call, one resolution rule). The
lookup is given as a call of the node's cluster-wide ``RegistryService`` (served by the ``__schemas``
leader), so this module asks nothing of a network itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from partitions.errors import RegistryError
from partitions.registry.schema_types import InvalidSchema, ParsedSchema, SchemaType
from partitions.registry.service import SchemaView
from partitions.registry.types import TYPES

SCHEMAS_MAX = 1024  # parsed schemas a node keeps
PARSE_THREADS = 2

ById = Callable[[int], Awaitable[SchemaView]]  # RegistryService.schema(id, "", with_references=True)


@dataclass(frozen=True, slots=True)
class Registered:
    """A registered schema: its id, its view as the registry answers it, and the schema parsed."""

    id: int
    view: SchemaView
    parsed: ParsedSchema


class SchemaCache:
    """Event-loop only; a schema is parsed on the cache's own threads (a 1 MiB schema takes up to a
    second, and a node's event loop must never be held by a client's schema)."""

    def __init__(self, by_id: ById, size_max: int = SCHEMAS_MAX) -> None:
        self._by_id = by_id
        self._size_max = size_max
        self._workers: concurrent.futures.ThreadPoolExecutor | None = None
        self._held: OrderedDict[int, Registered] = OrderedDict()
        self._texts: OrderedDict[tuple[str, str], ParsedSchema] = OrderedDict()

    def held(self, schema_id: int) -> Registered | None:
        """The schema of ``schema_id`` when this node parsed it already (no call)."""
        found = self._held.get(schema_id)
        if found is not None:
            self._held.move_to_end(schema_id)
        return found

    async def registered(self, schema_id: int) -> Registered:
        """The schema of ``schema_id``, parsed; ``RegistryError`` 40403 when no schema has it."""
        found = self.held(schema_id)
        if found is not None:
            return found
        view = await self._by_id(schema_id)
        found = Registered(schema_id, view, await self.parse(view))
        self._held[schema_id] = found
        while len(self._held) > self._size_max:
            self._held.popitem(last=False)
        return found

    async def _parsed(self, kind: SchemaType, text: str, resolved: Mapping[str, str]) -> ParsedSchema:
        if self._workers is None:
            self._workers = concurrent.futures.ThreadPoolExecutor(
                PARSE_THREADS, thread_name_prefix="schema-parse"
            )
        return await asyncio.get_running_loop().run_in_executor(self._workers, kind.parse, text, resolved)

    async def parse_text(self, schema_type: str, text: str) -> ParsedSchema:
        """A schema's text as a client gives it, without references, parsed (``InvalidSchema`` when it is
        none); the ``SCHEMAS_MAX`` texts parsed last are kept, so a producer naming its schema by text at
        every request has it parsed once."""
        key = (schema_type, text)
        found = self._texts.get(key)
        if found is not None:
            self._texts.move_to_end(key)
            return found
        kind = TYPES.get(schema_type)
        if kind is None:
            raise InvalidSchema(f"unknown schema type {schema_type}")
        found = self._texts[key] = await self._parsed(kind, text, {})
        while len(self._texts) > self._size_max:
            self._texts.popitem(last=False)
        return found

    async def parse(self, view: SchemaView) -> ParsedSchema:
        """A registered schema parsed with its references, as the registry resolved them (``view`` asked
        ``with_references``)."""
        kind = TYPES.get(view.schema_type)
        if kind is None:
            raise RegistryError(42201, f"Invalid schema type {view.schema_type}")
        resolved = dict(view.resolved)
        try:
            return await self._parsed(kind, view.schema, resolved)
        except InvalidSchema as exc:
            raise RegistryError(42201, f"Invalid schema of id {view.id}: {exc}") from None
