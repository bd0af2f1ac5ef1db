"""The schema registry's replicated table: schemas by id, subjects and their versions, compatibility
configs and modes, as Confluent's registry keeps them (pure, deterministic).

One ``SchemaTable`` lives in the one partition of the internal ``__schemas`` topic, inside that
partition's ``PartitionStateMachine``; commands are proposed by its leader (``registry.coordinator``),
after the checks that need a schema's parser (validity, compatibility), and applied on every replica.
``apply`` only records and refuses: an id is the lowest free one above every id ever given (or the one an
IMPORT gives), the same schema under two subjects has one id, a version is the subject's highest + 1. A
registration names the subject's latest version the leader checked compatibility against
(``checked_latest``); when another landed first it is refused (``Stale``) and the leader checks again, so
two racing registrations are never both unchecked against each other. The bounds ride in the command
(``Limits``), so every replica applies the same ones.

The table is immutable: ``apply`` returns a new one sharing what did not change, so the event loop reads
a table whole while the consensus thread applies the next command.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

import msgpack

from partitions.errors import InvalidCommand
from partitions.registry.schema_types import Reference

ID_MAX = 2**31 - 1
VERSION_MAX = 2**31 - 1
GLOBAL = ""  # the subject of the global config and mode
COMPATIBILITY_LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_COMPATIBILITY = "BACKWARD"
DEFAULT_MODE = "READWRITE"


@dataclass(frozen=True, slots=True)
class Schema:
    """A schema as registered: its type, the text stored (canonical, or normalized when asked), what it
    references, and Confluent's metadata and rule set (JSON text, compact, or "" for none)."""

    schema_type: str
    text: str
    references: tuple[Reference, ...] = ()
    metadata: str = ""
    rule_set: str = ""

    def size_bytes(self) -> int:
        refs = sum(len(r.name) + len(r.subject) + 8 for r in self.references)
        return len(self.text.encode()) + refs + len(self.metadata) + len(self.rule_set)


@dataclass(frozen=True, slots=True)
class Registered:
    """A schema's id and the guid its registration made (Confluent 8's ``guid``)."""

    id: int
    guid: str
    schema: Schema


@dataclass(frozen=True, slots=True)
class Version:
    version: int
    id: int
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class Config:
    """A subject's (or the global) config; None: not set at this level."""

    compatibility: str | None = None
    normalize: bool | None = None

    def to_row(self) -> list[Any]:
        return [self.compatibility, self.normalize]


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds stamped by the proposing leader: schemas (distinct ids), versions across subjects, and the
    bytes of every schema's text, references and metadata."""

    schemas_max: int
    versions_max: int
    bytes_max: int


# commands ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Register:
    subject: str
    schema: Schema
    guid: str  # made by the proposer (a fresh uuid4), used when the schema is new
    checked_latest: int  # the subject's latest live version the proposer checked against; 0: none
    limits: Limits
    id: int = 0  # IMPORT: the id to give it; 0: the table's next
    version: int = 0  # IMPORT: the version to give it; 0: the subject's next


@dataclass(frozen=True, slots=True)
class DeleteVersion:
    subject: str
    version: int
    permanent: bool


@dataclass(frozen=True, slots=True)
class DeleteSubject:
    subject: str
    permanent: bool


@dataclass(frozen=True, slots=True)
class SetConfig:
    subject: str  # GLOBAL: the registry's
    config: Config | None  # None: delete the subject's (the global goes back to its defaults)


@dataclass(frozen=True, slots=True)
class SetMode:
    subject: str  # GLOBAL: the registry's
    mode: str | None  # None: delete the subject's


RegistryCommand = Register | DeleteVersion | DeleteSubject | SetConfig | SetMode

# results ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Done:
    """What a command did: the id and version registered, the versions deleted."""

    id: int = 0
    version: int = 0
    versions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a command did nothing: Confluent's error code and message (``Stale``: check again)."""

    error_code: int
    message: str


STALE = 0  # a Refusal code: the subject's latest version moved since the proposer checked


class SchemaTable:
    """Read by the event loop, replaced whole by ``apply`` on the consensus thread."""

    def __init__(
        self,
        schemas: Mapping[int, Registered] | None = None,
        subjects: Mapping[str, tuple[Version, ...]] | None = None,
        configs: Mapping[str, Config] | None = None,
        modes: Mapping[str, str] | None = None,
        next_id: int = 1,
    ) -> None:
        self.schemas: Mapping[int, Registered] = MappingProxyType(dict(schemas or {}))
        self.subjects: Mapping[str, tuple[Version, ...]] = MappingProxyType(dict(subjects or {}))
        self.configs: Mapping[str, Config] = MappingProxyType(dict(configs or {}))
        self.modes: Mapping[str, str] = MappingProxyType(dict(modes or {}))
        self.next_id = next_id  # above every id ever given: an id is never given to another schema
        self._ids = {registered.schema: schema_id for schema_id, registered in self.schemas.items()}
        self._bytes = sum(registered.schema.size_bytes() for registered in self.schemas.values())

    # reads -------------------------------------------------------------------------------------------

    def id_of(self, schema: Schema) -> int | None:
        return self._ids.get(schema)

    def versions(self, subject: str, deleted: bool = False) -> tuple[Version, ...]:
        return tuple(v for v in self.subjects.get(subject, ()) if deleted or not v.deleted)

    def latest(self, subject: str) -> Version | None:
        live = self.versions(subject)
        return live[-1] if live else None

    def version(self, subject: str, version: int, deleted: bool = False) -> Version | None:
        for held in self.subjects.get(subject, ()):
            if held.version == version and (deleted or not held.deleted):
                return held
        return None

    def subjects_of(self, schema_id: int, deleted: bool = False) -> list[tuple[str, int]]:
        """(subject, version) pairs registered with ``schema_id``, by subject and version."""
        return sorted(
            (subject, v.version)
            for subject, versions in self.subjects.items()
            for v in versions
            if v.id == schema_id and (deleted or not v.deleted)
        )

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of the schemas (of live versions) that reference ``subject`` at ``version``."""
        live_ids = {v.id for versions in self.subjects.values() for v in versions if not v.deleted}
        return sorted(
            schema_id
            for schema_id, registered in self.schemas.items()
            if schema_id in live_ids
            and any(r.subject == subject and r.version == version for r in registered.schema.references)
        )

    def mode(self, subject: str) -> str:
        """The mode in force for ``subject``: its own, else the global."""
        return self.modes.get(subject) or self.modes.get(GLOBAL) or DEFAULT_MODE

    def compatibility(self, subject: str) -> str:
        own = self.configs.get(subject)
        if own is not None and own.compatibility is not None:
            return own.compatibility
        return self.global_config().compatibility or DEFAULT_COMPATIBILITY

    def normalize(self, subject: str) -> bool:
        own = self.configs.get(subject)
        if own is not None and own.normalize is not None:
            return own.normalize
        return bool(self.global_config().normalize)

    def global_config(self) -> Config:
        return self.configs.get(GLOBAL) or Config()

    # apply -------------------------------------------------------------------------------------------

    def apply(self, command: RegistryCommand) -> tuple[SchemaTable, Done | Refusal]:
        """The table after ``command`` (self when refused) and what it did."""
        if isinstance(command, Register):
            return self._register(command)
        if isinstance(command, DeleteVersion):
            return self._delete_version(command)
        if isinstance(command, DeleteSubject):
            return self._delete_subject(command)
        if isinstance(command, SetConfig):
            configs = dict(self.configs)
            if command.config is None:
                configs.pop(command.subject, None)
            else:
                configs[command.subject] = command.config
            return self._with(configs=configs), Done()
        modes = dict(self.modes)
        if command.mode is None:
            modes.pop(command.subject, None)
        else:
            modes[command.subject] = command.mode
        return self._with(modes=modes), Done()

    def _with(self, **changed: Any) -> SchemaTable:
        fields = {
            "schemas": self.schemas,
            "subjects": self.subjects,
            "configs": self.configs,
            "modes": self.modes,
            "next_id": self.next_id,
            **changed,
        }
        return SchemaTable(**fields)

    def _register(self, command: Register) -> tuple[SchemaTable, Done | Refusal]:
        versions = self.subjects.get(command.subject, ())
        latest = self.latest(command.subject)
        if (latest.version if latest else 0) != command.checked_latest:
            return self, Refusal(STALE, f"subject {command.subject!r} changed since it was checked")
        schema_id = self.id_of(command.schema)
        for held in versions:
            if not held.deleted and held.id == schema_id and not command.version:
                return self, Done(id=held.id, version=held.version)  # registered already
        schemas = self.schemas
        if schema_id is None or (command.id and command.id != schema_id):
            refused = self._new_id_refused(command, schema_id)
            if refused is not None:
                return self, refused
            schema_id = command.id or self.next_id
            schemas = {**self.schemas, schema_id: Registered(schema_id, command.guid, command.schema)}
        live_versions = sum(len(v) for v in self.subjects.values())
        if live_versions + 1 > command.limits.versions_max:
            return self, Refusal(50001, f"the registry holds {live_versions} versions, its most")
        version = command.version or (max((v.version for v in versions), default=0) + 1)
        if version > VERSION_MAX or any(v.version == version for v in versions):
            return self, Refusal(42202, f"version {version} of subject {command.subject!r} exists already")
        subjects = {**self.subjects, command.subject: (*versions, Version(version, schema_id))}
        subjects[command.subject] = tuple(sorted(subjects[command.subject], key=lambda v: v.version))
        next_id = max(self.next_id, schema_id + 1)
        return self._with(schemas=schemas, subjects=subjects, next_id=next_id), Done(schema_id, version)

    def _new_id_refused(self, command: Register, same_schema_id: int | None) -> Refusal | None:
        if command.id:
            held = self.schemas.get(command.id)
            if held is not None:
                return Refusal(
                    42205,
                    f"Overwrite new schema with id {command.id} is not permitted: "
                    "the id holds another schema",
                )
            if same_schema_id is not None:
                return Refusal(42205, f"the schema is registered already, with id {same_schema_id}")
        if len(self.schemas) + 1 > command.limits.schemas_max:
            return Refusal(50001, f"the registry holds {len(self.schemas)} schemas, its most")
        if self._bytes + command.schema.size_bytes() > command.limits.bytes_max:
            return Refusal(50001, f"the registry holds {self._bytes} bytes of schemas, its most")
        if not command.id and self.next_id > ID_MAX:
            return Refusal(50001, "the registry gave every schema id")
        return None

    def _delete_version(self, command: DeleteVersion) -> tuple[SchemaTable, Done | Refusal]:
        versions = self.subjects.get(command.subject, ())
        held = self.version(command.subject, command.version, deleted=True)
        if held is None:
            return self, Refusal(40402, f"Version {command.version} not found.")
        if command.permanent and not held.deleted:
            return self, Refusal(
                40407,
                f"Subject '{command.subject}' Version {command.version} was not deleted first before being "
                "permanently deleted",
            )
        if not command.permanent and held.deleted:
            return self, Refusal(
                40406,
                f"Subject '{command.subject}' Version {command.version} was soft deleted. "
                "Set permanent=true to delete permanently",
            )
        if self.referenced_by(command.subject, command.version):
            return self, Refusal(
                42206,
                _referenced(command.subject, command.version),
            )
        if command.permanent:
            kept = tuple(v for v in versions if v.version != command.version)
        else:
            kept = tuple(replace(v, deleted=True) if v.version == command.version else v for v in versions)
        return self._after_delete(command.subject, kept), Done(version=command.version)

    def _delete_subject(self, command: DeleteSubject) -> tuple[SchemaTable, Done | Refusal]:
        versions = self.subjects.get(command.subject, ())
        if not versions:
            return self, Refusal(40401, f"Subject '{command.subject}' not found.")
        live = [v for v in versions if not v.deleted]
        if command.permanent and live:
            return self, Refusal(
                40405, f"Subject '{command.subject}' was not deleted first before being permanently deleted"
            )
        if not command.permanent and not live:
            return self, Refusal(
                40404,
                f"Subject '{command.subject}' was soft deleted.Set permanent=true to delete permanently",
            )
        for held in versions:
            if self.referenced_by(command.subject, held.version):
                return self, Refusal(
                    42206,
                    _referenced(command.subject, held.version),
                )
        if command.permanent:
            deleted = tuple(v.version for v in versions)
            return self._after_delete(command.subject, ()), Done(versions=deleted)
        kept = tuple(replace(v, deleted=True) for v in versions)
        return self._after_delete(command.subject, kept), Done(versions=tuple(v.version for v in live))

    def _after_delete(self, subject: str, kept: tuple[Version, ...]) -> SchemaTable:
        """The table with ``subject``'s versions now ``kept``: a schema no version holds any more is gone
        (its id is never given again: ``next_id`` stays), and so are the subject's config and mode once it
        holds no version."""
        subjects = dict(self.subjects)
        configs, modes = self.configs, self.modes
        if kept:
            subjects[subject] = kept
        else:
            subjects.pop(subject, None)
            configs = {k: v for k, v in self.configs.items() if k != subject}
            modes = {k: v for k, v in self.modes.items() if k != subject}
        held_ids = {v.id for versions in subjects.values() for v in versions}
        schemas = {i: r for i, r in self.schemas.items() if i in held_ids}
        return self._with(schemas=schemas, subjects=subjects, configs=configs, modes=modes)

    # rows --------------------------------------------------------------------------------------------

    def to_rows(self) -> list[Any]:
        """The table as msgpack-able rows (a snapshot's)."""
        return [
            1,
            self.next_id,
            [[i, r.guid, *_schema_row(r.schema)] for i, r in sorted(self.schemas.items())],
            [[s, [[v.version, v.id, v.deleted] for v in vs]] for s, vs in sorted(self.subjects.items())],
            [[s, *c.to_row()] for s, c in sorted(self.configs.items())],
            sorted([s, m] for s, m in self.modes.items()),
        ]

    @classmethod
    def from_rows(cls, rows: Any) -> SchemaTable:
        if not rows:
            return cls()
        if not isinstance(rows, list) or rows[0] != 1 or len(rows) != 6:
            raise InvalidCommand(f"schema table rows of an unknown form: {str(rows)[:80]}")
        _, next_id, schemas, subjects, configs, modes = rows
        return cls(
            schemas={row[0]: Registered(row[0], row[1], _schema_of(row[2:])) for row in schemas},
            subjects={s: tuple(Version(*v) for v in vs) for s, vs in subjects},
            configs={row[0]: Config(*row[1:]) for row in configs},
            modes={s: m for s, m in modes},
            next_id=next_id,
        )


def _referenced(subject: str, version: int) -> str:
    return (
        f"One or more references exist to the schema {{magic=1,keytype=SCHEMA,subject={subject},"
        f"version={version}}}."
    )


def _schema_row(schema: Schema) -> list[Any]:
    refs = [[r.name, r.subject, r.version] for r in schema.references]
    return [schema.schema_type, schema.text, refs, schema.metadata, schema.rule_set]


def _schema_of(row: list[Any]) -> Schema:
    schema_type, text, refs, metadata, rule_set = row
    return Schema(schema_type, text, tuple(Reference(*r) for r in refs), metadata, rule_set)


# the command codec --------------------------------------------------------------------------------------

_REGISTER, _DELETE_VERSION, _DELETE_SUBJECT, _SET_CONFIG, _SET_MODE = 1, 2, 3, 4, 5


def encode(command: RegistryCommand) -> bytes:
    """The payload of a partition command ``SchemaCommand`` (``partitions.commands``)."""
    fields: list[Any]
    if isinstance(command, Register):
        limits = command.limits
        fields = [
            _REGISTER, command.subject, _schema_row(command.schema), command.guid, command.checked_latest,
            [limits.schemas_max, limits.versions_max, limits.bytes_max], command.id, command.version,
        ]  # fmt: skip
    elif isinstance(command, DeleteVersion):
        fields = [_DELETE_VERSION, command.subject, command.version, command.permanent]
    elif isinstance(command, DeleteSubject):
        fields = [_DELETE_SUBJECT, command.subject, command.permanent]
    elif isinstance(command, SetConfig):
        fields = [_SET_CONFIG, command.subject, None if command.config is None else command.config.to_row()]
    else:
        fields = [_SET_MODE, command.subject, command.mode]
    packed: bytes = msgpack.packb(fields, use_bin_type=True)
    return packed


def decode(payload: bytes | memoryview) -> RegistryCommand:
    try:
        fields = msgpack.unpackb(payload, raw=False, strict_map_key=False)
        kind = fields[0]
        if kind == _REGISTER:
            _, subject, schema, guid, checked, limits, schema_id, version = fields
            return Register(subject, _schema_of(schema), guid, checked, Limits(*limits), schema_id, version)
        if kind == _DELETE_VERSION:
            return DeleteVersion(fields[1], fields[2], fields[3])
        if kind == _DELETE_SUBJECT:
            return DeleteSubject(fields[1], fields[2])
        if kind == _SET_CONFIG:
            return SetConfig(fields[1], None if fields[2] is None else Config(*fields[2]))
        if kind == _SET_MODE:
            return SetMode(fields[1], fields[2])
    except (ValueError, TypeError, IndexError, msgpack.UnpackException) as exc:
        raise InvalidCommand(f"schema registry command does not decode: {exc}") from None
    raise InvalidCommand(f"schema registry command of unknown kind {fields[0]!r}")
