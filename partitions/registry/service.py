"""The schema registry's protocol, as the doors ask it, and the types of its answers (pure).

``RegistryService``: Confluent's schema registry (subjects, versions, ids, compatibility, configs, modes),
every call served by the leader of the ``__schemas`` partition, which holds the table
(``registry.coordinator``); a node that is not raises ``NotLeader`` naming the one it knows, and the call
runs there (``partitions.peers.cluster``). So a read never answers from a table behind a write another node
acknowledged. Refusals are ``RegistryError`` with Confluent's error code and words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from partitions.peer_ops import peer
from partitions.registry.schema_types import Reference

LATEST = -1  # a version: the subject's latest live one (Confluent's "latest" and -1)


@dataclass(frozen=True, slots=True)
class SchemaInput:
    """A schema as a client sends it (Confluent's RegisterSchemaRequest): its text, type, references,
    and metadata and rule set as compact JSON text ("": none)."""

    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    metadata: str = ""
    rule_set: str = ""


@dataclass(frozen=True, slots=True)
class SchemaView:
    """A registered schema as the registry answers it; ``subject`` and ``version`` when it is answered as a
    subject's version (0 / "" otherwise)."""

    id: int
    guid: str
    schema: str
    schema_type: str
    references: tuple[Reference, ...] = ()
    metadata: str = ""
    rule_set: str = ""
    subject: str = ""
    version: int = 0
    deleted: bool = False
    # asked for (``RegistryService.schema``'s ``with_references``): every schema its references reach,
    # transitively, by reference name, as the registry resolves them to parse it
    resolved: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ConfigView:
    """A config as answered: ``compatibility`` (one of the seven levels) and ``normalize`` (None: unset)."""

    compatibility: str | None = None
    normalize: bool | None = None


@dataclass(frozen=True, slots=True)
class Compatibility:
    is_compatible: bool
    messages: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Listing:
    """Which entries a listing answers: those whose subject starts with ``prefix``; deleted ones too, or
    deleted ones only; ``offset`` and ``limit`` (-1: all) over the sorted answer."""

    prefix: str = ""
    deleted: bool = False
    deleted_only: bool = False
    offset: int = 0
    limit: int = -1


class RegistryService(Protocol):
    """Confluent's schema registry, served by the ``__schemas`` leader."""

    @peer("A registered schema by its id")
    async def schema(
        self, schema_id: int, subject: str, format: str = "", with_references: bool = False
    ) -> SchemaView:
        """40403 when no schema has the id (or ``subject``, when given, holds no version of it); its text
        in ``format`` when one is named (``ParsedSchema.formatted``); ``with_references``: the texts its
        references reach, in ``resolved`` (what a node needs to parse it, in one call)."""
        ...

    @peer("A registered schema by its guid")
    async def schema_by_guid(self, guid: str) -> SchemaView: ...

    @peer("Subjects' versions, each with its schema")
    async def schemas(self, listing: Listing, latest_only: bool) -> list[SchemaView]: ...

    @peer("The subjects and versions registered with a schema id")
    async def schema_usage(self, schema_id: int, deleted: bool) -> list[tuple[str, int]]: ...

    @peer("The subjects")
    async def subjects(self, listing: Listing) -> list[str]: ...

    @peer("A subject's versions")
    async def versions(self, subject: str, listing: Listing) -> list[int]: ...

    @peer("A subject's version, with its schema")
    async def subject_version(
        self, subject: str, version: int, deleted: bool, format: str = ""
    ) -> SchemaView:
        """Its text in ``format`` when one is named (``ParsedSchema.formatted``)."""
        ...

    @peer("A subject's latest version whose metadata holds given properties")
    async def latest_with_metadata(
        self, subject: str, properties: list[tuple[str, str]], deleted: bool
    ) -> SchemaView:
        """Confluent's getLatestWithMetadata: the latest version whose metadata's ``properties`` hold
        every (key, value) given; 40401 no subject, 40403 no such version."""
        ...

    @peer("Ids of the schemas referencing a subject's version")
    async def referenced_by(self, subject: str, version: int) -> list[int]: ...

    @peer("A subject's version holding a schema")
    async def lookup(self, subject: str, schema: SchemaInput, normalize: bool, deleted: bool) -> SchemaView:
        """40401 subject not found, 40403 schema not found (under it)."""
        ...

    @peer("Whether a schema is compatible with a subject's version, or with those its level says")
    async def compatibility(
        self, subject: str, version: int | None, schema: SchemaInput, normalize: bool
    ) -> Compatibility:
        """``version`` None: against the versions the subject's compatibility level names (all of them
        for a transitive level, its latest otherwise)."""
        ...

    @peer("A subject's config, or the global one")
    async def config(self, subject: str, default_to_global: bool) -> ConfigView:
        """``subject`` "": the global config. 40408 when a subject has none of its own and
        ``default_to_global`` is false."""
        ...

    @peer("A subject's mode, or the global one")
    async def mode(self, subject: str, default_to_global: bool) -> str: ...

    @peer("Register a schema under a subject", write=True)
    async def register(
        self, subject: str, schema: SchemaInput, normalize: bool, schema_id: int, version: int
    ) -> SchemaView:
        """The subject's version holding it (an existing one when it is registered already). In IMPORT
        mode ``schema_id`` and ``version`` (0: the next) are kept."""
        ...

    @peer("Delete a subject's version", write=True)
    async def delete_version(self, subject: str, version: int, permanent: bool) -> int: ...

    @peer("Delete a subject", write=True)
    async def delete_subject(self, subject: str, permanent: bool) -> list[int]: ...

    @peer("Set or delete a subject's config, or the global one", write=True)
    async def set_config(self, subject: str, config: ConfigView | None) -> ConfigView:
        """None deletes it; answers the config now in force at that level (deleted: the previous)."""
        ...

    @peer("Set or delete a subject's mode, or the global one", write=True)
    async def set_mode(self, subject: str, mode: str | None, force: bool) -> str: ...
