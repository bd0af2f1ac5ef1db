"""The schema registry as the ``__schemas`` leader serves it: Confluent's rules checked before a change is
proposed (a schema parses with its references, is compatible as its subject's level says, the mode allows
the write), then the change replicated through the partition's Raft group (``registry.table``). Reads
answer from the leader's applied table. Event-loop only.

Where Confluent's registry words an answer or a refusal, these are its words (``RegistryError``'s codes:
40401 subject not found, 40402 version not found, 40403 schema not found, 409 incompatible, 42201 invalid
schema, 42202 invalid version, 42203 invalid compatibility level, 42204 invalid mode, 42205 operation not
permitted, 42206 reference exists, 40408/40409 no subject-level config/mode).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Protocol, TypeVar

from partitions import features
from partitions.errors import FeatureNotFinalized, RegistryError, UnknownTopic
from partitions.registry.schema_types import InvalidSchema, ParsedSchema, Reference, Resolved, SchemaType
from partitions.registry.service import (
    LATEST,
    Compatibility,
    ConfigView,
    Listing,
    SchemaInput,
    SchemaView,
)
from partitions.registry.table import (
    COMPATIBILITY_LEVELS,
    GLOBAL,
    MODES,
    STALE,
    Config,
    DeleteSubject,
    DeleteVersion,
    Done,
    Limits,
    Refusal,
    Register,
    RegistryCommand,
    Schema,
    SchemaTable,
    SetConfig,
    SetMode,
    Version,
)

WORKERS = 2  # threads parsing and comparing schemas
PARSED_KEPT = 256  # schemas kept parsed (a registration compares with its subject's earlier versions)
REGISTER_TRIES = 8  # a registration raced by another one under the same subject is checked again
SCHEMA_BYTES_MAX = 1024 * 1024  # one schema's text (Confluent's: a record of its _schemas topic)
REFERENCES_MAX = 1000  # references of one schema, transitively
DEFAULT_LIMITS = Limits(schemas_max=100_000, versions_max=200_000, bytes_max=256 * 1024 * 1024)
_T = TypeVar("_T")
_LEVELS_WORDS = "none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive"


class SchemaLog(Protocol):
    """What the coordinator needs of ``__schemas`` (``store.ReplicatedSchemaLog``, or a table in tests)."""

    async def ensure_topic(self) -> None: ...

    def table(self, partition: int) -> tuple[SchemaTable, int]: ...

    async def propose(self, command: RegistryCommand) -> Done | Refusal: ...


class SchemaRegistry:
    """Implements ``RegistryService`` on the node leading ``__schemas`` (NotLeader elsewhere)."""

    def __init__(
        self,
        log: SchemaLog,
        types: Mapping[str, SchemaType],
        finalized: Callable[[], Mapping[str, int]],
        limits: Limits = DEFAULT_LIMITS,
        make_guid: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self._log = log
        self._types = types
        self._features = features.Features(finalized)
        self._limits = limits
        self._make_guid = make_guid
        self._workers = concurrent.futures.ThreadPoolExecutor(WORKERS, thread_name_prefix="registry")
        self._parsed: OrderedDict[tuple[str, str, tuple[tuple[str, str], ...]], ParsedSchema] = OrderedDict()
        self._parsed_lock = threading.Lock()

    def _table(self) -> SchemaTable:
        try:
            table, _ = self._log.table(0)
        except UnknownTopic:  # nothing registered yet: the topic is made by the first write
            return SchemaTable()
        return table

    # reads -----------------------------------------------------------------------------------------------

    async def schema(
        self, schema_id: int, subject: str, format: str = "", with_references: bool = False
    ) -> SchemaView:
        table = self._table()
        registered = table.schemas.get(schema_id)
        holders = {held for held, _ in table.subjects_of(schema_id, deleted=True)}
        if registered is None or (subject and subject not in holders):
            raise RegistryError(40403, f"Schema {schema_id} not found")
        view = _view(registered.id, registered.guid, registered.schema)
        if with_references:
            view = replace(
                view, resolved=tuple(sorted(_resolve(table, registered.schema.references).items()))
            )
        return await self._formatted(table, view, format)

    async def schema_by_guid(self, guid: str) -> SchemaView:
        for registered in self._table().schemas.values():
            if registered.guid == guid:
                return _view(registered.id, registered.guid, registered.schema)
        raise RegistryError(40403, f"Schema {guid} not found")

    async def schemas(self, listing: Listing, latest_only: bool) -> list[SchemaView]:
        table = self._table()
        views = []
        for subject in sorted(table.subjects):
            if not subject.startswith(listing.prefix):
                continue
            chosen = _listed(table.subjects[subject], listing)
            if latest_only and chosen:
                chosen = chosen[-1:]
            views += [_version_view(table, subject, held) for held in chosen]
        return _page(views, listing)

    async def schema_usage(self, schema_id: int, deleted: bool) -> list[tuple[str, int]]:
        table = self._table()
        if schema_id not in table.schemas:
            raise RegistryError(40403, f"Schema {schema_id} not found")
        return table.subjects_of(schema_id, deleted)

    async def subjects(self, listing: Listing) -> list[str]:
        table = self._table()
        names = [
            subject
            for subject, versions in sorted(table.subjects.items())
            if subject.startswith(listing.prefix) and _listed(versions, listing)
        ]
        return _page(names, listing)

    async def versions(self, subject: str, listing: Listing) -> list[int]:
        chosen = _listed(self._table().subjects.get(subject, ()), listing)
        if not chosen:
            raise RegistryError(40401, f"Subject '{subject}' not found.")
        return _page([held.version for held in chosen], listing)

    async def subject_version(
        self, subject: str, version: int, deleted: bool, format: str = ""
    ) -> SchemaView:
        table = self._table()
        view = _version_view(table, subject, _version(table, subject, version, deleted))
        return await self._formatted(table, view, format)

    async def _formatted(self, table: SchemaTable, view: SchemaView, format: str) -> SchemaView:
        """``view`` with its text in ``format`` (``ParsedSchema.formatted``); as it is when none is named."""
        if not format:
            return view
        stored = SchemaInput(view.schema, view.schema_type, view.references)
        parsed = await self._off_loop(self._parse, table, stored)
        return replace(view, schema=parsed.formatted(format))

    async def latest_with_metadata(
        self, subject: str, properties: list[tuple[str, str]], deleted: bool
    ) -> SchemaView:
        table = self._table()
        versions = table.versions(subject, deleted)
        if not versions:
            raise RegistryError(40401, f"Subject '{subject}' not found.")
        for held in reversed(versions):
            metadata = table.schemas[held.id].schema.metadata
            held_properties = json.loads(metadata).get("properties") or {} if metadata else {}
            if all(held_properties.get(key) == value for key, value in properties):
                return _version_view(table, subject, held)
        raise RegistryError(40403, f"Schema with metadata {dict(properties)} not found")

    async def referenced_by(self, subject: str, version: int) -> list[int]:
        table = self._table()
        held = _version(table, subject, version, deleted=True)
        return table.referenced_by(subject, held.version)

    async def lookup(self, subject: str, schema: SchemaInput, normalize: bool, deleted: bool) -> SchemaView:
        table = self._table()
        if not table.versions(subject, deleted):
            raise RegistryError(40401, f"Subject '{subject}' not found.")
        parsed = await self._off_loop(self._parse, table, schema)
        wanted = {parsed.canonical()}
        if normalize or table.normalize(subject):
            wanted.add(parsed.normalized())
        for held in reversed(table.versions(subject, deleted)):
            stored = table.schemas[held.id].schema
            if (
                stored.schema_type == parsed.schema_type
                and stored.text in wanted
                and stored.references == schema.references
                and (not schema.metadata or stored.metadata == schema.metadata)
                and (not schema.rule_set or stored.rule_set == schema.rule_set)
            ):
                return _version_view(table, subject, held)
        raise RegistryError(40403, "Schema not found")

    async def compatibility(
        self, subject: str, version: int | None, schema: SchemaInput, normalize: bool
    ) -> Compatibility:
        table = self._table()
        level = table.compatibility(subject)
        if version is None:
            previous = _checked_against(table, subject, level)
        else:
            previous = [_version(table, subject, version, deleted=False)]
        parsed = await self._off_loop(self._parse, table, schema)
        messages = await self._off_loop(self._incompatibilities, table, parsed, previous, level)
        return Compatibility(not messages, tuple(messages))

    async def config(self, subject: str, default_to_global: bool) -> ConfigView:
        table = self._table()
        if subject == GLOBAL:
            held = table.global_config()
            return ConfigView(held.compatibility or "BACKWARD", held.normalize)
        own = table.configs.get(subject)
        if own is None and not default_to_global:
            raise RegistryError(
                40408, f"Subject '{subject}' does not have subject-level compatibility configured"
            )
        if own is None:
            return ConfigView(table.compatibility(subject), table.global_config().normalize)
        return ConfigView(own.compatibility, own.normalize)

    async def mode(self, subject: str, default_to_global: bool) -> str:
        table = self._table()
        if subject != GLOBAL and subject not in table.modes and not default_to_global:
            raise RegistryError(40409, f"Subject '{subject}' does not have subject-level mode configured")
        return table.mode(subject)

    # writes ----------------------------------------------------------------------------------------------

    async def register(
        self, subject: str, schema: SchemaInput, normalize: bool, schema_id: int, version: int
    ) -> SchemaView:
        self._check_writable()
        for _ in range(REGISTER_TRIES):
            table = self._table()
            mode = table.mode(subject)
            if mode in ("READONLY", "READONLY_OVERRIDE"):
                raise RegistryError(42205, f"Subject {subject} is in read-only mode")
            if (schema_id or version) and mode != "IMPORT":
                raise RegistryError(42205, f"Subject {subject} is not in import mode")
            parsed = await self._off_loop(self._parse, table, schema)
            text = parsed.normalized() if normalize or table.normalize(subject) else parsed.canonical()
            stored = Schema(parsed.schema_type, text, schema.references, schema.metadata, schema.rule_set)
            known = table.id_of(stored)
            for held in table.versions(subject):
                if held.id == known and not schema_id:
                    return _version_view(table, subject, held)
            if mode != "IMPORT":
                level = table.compatibility(subject)
                checked = _checked_against(table, subject, level)
                messages = await self._off_loop(self._incompatibilities, table, parsed, checked, level)
                if messages:
                    raise RegistryError(
                        409,
                        "Schema being registered is incompatible with an earlier schema for subject "
                        f'"{subject}", details: [{", ".join(messages)}]',
                    )
            latest = table.latest(subject)
            command = Register(
                subject, stored, self._make_guid(), latest.version if latest else 0, self._limits,
                schema_id, version,
            )  # fmt: skip
            done = await self._propose(command)
            if done is None:  # another registration under the subject landed first: check again
                continue
            return _version_view(self._table(), subject, Version(done.version, done.id))
        raise RegistryError(
            50001, f"subject {subject!r} kept changing while a schema was registered: try again"
        )

    async def delete_version(self, subject: str, version: int, permanent: bool) -> int:
        self._check_writable()
        table = self._table()
        self._check_mode_allows_delete(table, subject)
        held = _version(table, subject, version, deleted=True)
        done = await self._propose(DeleteVersion(subject, held.version, permanent))
        return held.version if done is None else done.version

    async def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        self._check_writable()
        self._check_mode_allows_delete(self._table(), subject)
        done = await self._propose(DeleteSubject(subject, permanent))
        return [] if done is None else list(done.versions)

    async def set_config(self, subject: str, config: ConfigView | None) -> ConfigView:
        self._check_writable()
        table = self._table()
        if config is None:
            previous = table.configs.get(subject)
            if previous is None and subject != GLOBAL:
                raise RegistryError(40401, f"Subject '{subject}' not found.")
            await self._propose(SetConfig(subject, None))
            held = previous or Config()
            return ConfigView(held.compatibility or "BACKWARD", held.normalize)
        if config.compatibility is not None and config.compatibility not in COMPATIBILITY_LEVELS:
            raise RegistryError(42203, f"Invalid compatibility level. Valid values are {_LEVELS_WORDS}")
        current = table.configs.get(subject) or Config()
        merged = Config(
            config.compatibility if config.compatibility is not None else current.compatibility,
            config.normalize if config.normalize is not None else current.normalize,
        )
        await self._propose(SetConfig(subject, merged))
        return ConfigView(config.compatibility, config.normalize)

    async def set_mode(self, subject: str, mode: str | None, force: bool) -> str:
        self._check_writable()
        table = self._table()
        if mode is None:
            if subject not in table.modes and subject != GLOBAL:
                raise RegistryError(40401, f"Subject '{subject}' not found.")
            previous = table.mode(subject)
            await self._propose(SetMode(subject, None))
            return previous
        if mode not in MODES:
            raise RegistryError(42204, f"Invalid mode. Valid values are {', '.join(MODES)}")
        holds = table.subjects if subject == GLOBAL else table.versions(subject, deleted=True)
        if mode == "IMPORT" and holds and not force and table.mode(subject) != "IMPORT":
            raise RegistryError(42205, "Cannot import since found existing subjects")
        await self._propose(SetMode(subject, mode))
        return mode

    # the rules -------------------------------------------------------------------------------------------

    def _check_writable(self) -> None:
        gate = features.SCHEMA_REGISTRY
        if not self._features.allows(gate):
            raise FeatureNotFinalized("a schema registry change", gate.feature, gate.level)

    def _check_mode_allows_delete(self, table: SchemaTable, subject: str) -> None:
        if table.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise RegistryError(42205, f"Subject {subject} is in read-only mode")

    async def _propose(self, command: RegistryCommand) -> Done | None:
        """What the command did; None when it was refused as stale (the caller checks again)."""
        await self._log.ensure_topic()
        result = await self._log.propose(command)
        if isinstance(result, Refusal):
            if result.error_code == STALE:
                return None
            raise RegistryError(result.error_code, result.message)
        return result

    async def _off_loop(self, work: Callable[..., _T], *args: object) -> _T:
        """Parsing and comparing schemas (milliseconds each, more for a large one) on the registry's own
        threads, never the event loop's; at most ``WORKERS`` at once, the rest queued."""
        return await asyncio.get_running_loop().run_in_executor(self._workers, work, *args)

    def _parse(self, table: SchemaTable, schema: SchemaInput) -> ParsedSchema:
        """The schema parsed with its references (42201 when it is none); the same input parsed once while
        it stays among the ``PARSED_KEPT`` most recently parsed (any thread)."""
        resolved = _resolve(table, schema.references)
        key = (schema.schema_type, schema.schema, tuple(sorted(resolved.items())))
        with self._parsed_lock:
            parsed = self._parsed.get(key)
            if parsed is not None:
                self._parsed.move_to_end(key)
                return parsed
        parsed = self._parse_anew(schema, resolved)
        with self._parsed_lock:
            self._parsed[key] = parsed
            while len(self._parsed) > PARSED_KEPT:
                self._parsed.popitem(last=False)
        return parsed

    def _parse_anew(self, schema: SchemaInput, resolved: Resolved) -> ParsedSchema:
        kind = self._types.get(schema.schema_type)
        if kind is None:
            raise RegistryError(42201, f"Invalid schema type {schema.schema_type}")
        if len(schema.schema.encode()) > SCHEMA_BYTES_MAX:
            raise RegistryError(42201, f"Invalid schema: it is larger than {SCHEMA_BYTES_MAX} bytes")
        for field, text in (("metadata", schema.metadata), ("ruleSet", schema.rule_set)):
            if text:
                try:
                    json.loads(text)
                except ValueError:
                    raise RegistryError(42201, f"Invalid schema: its {field} is not JSON") from None
        try:
            return kind.parse(schema.schema, resolved)
        except InvalidSchema as exc:
            raise RegistryError(
                42201,
                f"Invalid schema {_abbreviated(schema.schema)} of type {schema.schema_type}, details: {exc}",
            ) from None

    def _incompatibilities(
        self, table: SchemaTable, parsed: ParsedSchema, previous: list[Version], level: str
    ) -> list[str]:
        if level == "NONE":
            return []
        backward = level.startswith("BACKWARD") or level.startswith("FULL")
        forward = level.startswith("FORWARD") or level.startswith("FULL")
        for held in reversed(previous):  # the latest first, as Confluent's checker goes
            stored = table.schemas[held.id].schema
            if stored.schema_type != parsed.schema_type:
                messages = ["Incompatible because of different schema type"]
            else:
                earlier = self._parse(table, SchemaInput(stored.text, stored.schema_type, stored.references))
                messages = []
                if backward:  # the new schema reads what the old one wrote
                    messages += [_named(m, "new", "old") for m in parsed.backward_incompatibilities(earlier)]
                if forward:  # the old schema reads what the new one writes
                    messages += [_named(m, "old", "new") for m in earlier.backward_incompatibilities(parsed)]
            if messages:
                return [
                    *messages,
                    f"{{oldSchemaVersion: {held.version}}}",
                    f"{{oldSchema: '{stored.text}'}}",
                    f"{{validateFields: 'false', compatibility: '{level}'}}",
                ]
        return []


def _named(message: str, reader: str, writer: str) -> str:
    """A type's message with its ``%s`` placeholders filled, as Confluent's ``SchemaValidatorBuilder``
    fills them: the reader's name, then the writer's."""
    return message.replace("%s", reader, 1).replace("%s", writer, 1)


def _checked_against(table: SchemaTable, subject: str, level: str) -> list[Version]:
    live = list(table.versions(subject))
    return live if level.endswith("_TRANSITIVE") else live[-1:]


def _resolve(table: SchemaTable, references: tuple[Reference, ...]) -> Resolved:
    """Every schema reachable from ``references``, by its reference name (42201 for one not found)."""
    resolved: dict[str, str] = {}
    pending = list(references)
    while pending:
        reference = pending.pop()
        if reference.name in resolved:
            continue
        if len(resolved) >= REFERENCES_MAX:
            raise RegistryError(42201, f"Invalid schema: more than {REFERENCES_MAX} references")
        held = table.version(reference.subject, reference.version)
        if held is None:
            raise RegistryError(
                42201,
                f"Invalid schema: reference {reference.name} names subject {reference.subject} version "
                f"{reference.version}, which is not registered",
            )
        stored = table.schemas[held.id].schema
        resolved[reference.name] = stored.text
        pending += stored.references
    return resolved


def _version(table: SchemaTable, subject: str, version: int, deleted: bool) -> Version:
    if not table.subjects.get(subject):
        raise RegistryError(40401, f"Subject '{subject}' not found.")
    held = table.latest(subject) if version == LATEST else table.version(subject, version, deleted)
    if held is None:
        raise RegistryError(40402, f"Version {'latest' if version == LATEST else version} not found.")
    return held


def _listed(versions: tuple[Version, ...], listing: Listing) -> tuple[Version, ...]:
    if listing.deleted_only:
        return tuple(v for v in versions if v.deleted)
    return tuple(v for v in versions if listing.deleted or not v.deleted)


def _page(items: list[_T], listing: Listing) -> list[_T]:
    end = None if listing.limit < 0 else listing.offset + listing.limit
    return items[listing.offset : end]


def _view(schema_id: int, guid: str, schema: Schema) -> SchemaView:
    return SchemaView(
        schema_id, guid, schema.text, schema.schema_type, schema.references, schema.metadata, schema.rule_set
    )


def _version_view(table: SchemaTable, subject: str, held: Version) -> SchemaView:
    registered = table.schemas[held.id]
    schema = registered.schema
    return SchemaView(
        held.id, registered.guid, schema.text, schema.schema_type, schema.references, schema.metadata,
        schema.rule_set, subject, held.version, held.deleted,
    )  # fmt: skip


def _abbreviated(text: str) -> str:
    return text if len(text) <= 200 else text[:200] + "..."
