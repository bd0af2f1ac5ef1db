"""Records checked against their registered schema before their partition's leader proposes them, as
Confluent Server's broker-side schema validation does (topic configs ``confluent.key.schema.validation``
and ``confluent.value.schema.validation``; the subject by ``confluent.*.subject.name.strategy``), and
further: not only the id.

For each record of a produced batch, the checked part (its key or its value; a null one passes, as a
tombstone must) must be in Confluent's wire format (``registry.framing``), its schema id known to the
registry, registered under the topic's subject (``{topic}-key`` / ``{topic}-value``: the
TopicNameStrategy, the only strategy built), and its payload must decode under that schema
(``ParsedSchema.decode``). Otherwise the whole batch is refused (``InvalidRecord``: Kafka's INVALID_RECORD,
HTTP 422), nothing written, the first bad record named.

An id's schema never changes, so what the registry answers of it is kept (``CACHED_SCHEMAS_MAX`` ids, the
least recently used forgotten first); whether an id is registered under a subject is asked again until
it is (a registration may come after the first refusal), and once it is, kept too.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

from partitions.errors import RegistryError
from partitions.registry.framing import NotFramed, message_indexes, unframe
from partitions.registry.schema_types import PROTOBUF, InvalidSchema, ParsedSchema, SchemaType
from partitions.registry.schema_types import InvalidRecord as SchemaInvalidRecord
from partitions.registry.service import SchemaView
from raftlog.storage.batch import Record
from raftlog.storage.config import LogConfig
from raftlog.storage.errors import InvalidRecord

CACHED_SCHEMAS_MAX = 1000
TOPIC_NAME_STRATEGY = "io.confluent.kafka.serializers.subject.TopicNameStrategy"

SchemaLookup = Callable[[int], Awaitable[SchemaView]]  # an id's schema, from the registry (RegistryError)
UsageLookup = Callable[[int], Awaitable[list[tuple[str, int]]]]  # the live (subject, version) pairs of an id
VersionLookup = Callable[[str, int], Awaitable[SchemaView]]  # a subject's version (a reference's schema)
REFERENCES_MAX = 1000


@dataclass(frozen=True, slots=True)
class _Known:
    parsed: ParsedSchema
    subjects: frozenset[str]  # those it was found registered under


def checks_asked(config: LogConfig) -> tuple[bool, bool]:
    """Whether the topic's configs ask its keys, its values checked."""
    return config.key_schema_validation, config.value_schema_validation


class SchemaChecks:
    """``check`` a batch's records; event loop (lookups) plus a decode function run where the caller says."""

    def __init__(
        self,
        schema_of: SchemaLookup,
        usage_of: UsageLookup,
        version_of: VersionLookup,
        types: Mapping[str, SchemaType],
    ) -> None:
        self._schema_of = schema_of
        self._usage_of = usage_of
        self._version_of = version_of
        self._types = types
        self._known: OrderedDict[int, _Known] = OrderedDict()

    async def prepare(self, topic: str, records: Iterable[Record], config: LogConfig) -> Plan | None:
        """What decoding the batch's checked parts needs (their schemas), looked up on the event loop;
        InvalidRecord for a record whose header or id fails; None when the topic checks nothing."""
        keys, values = checks_asked(config)
        if not keys and not values:
            return None
        wanted: list[tuple[str, str]] = [("key", f"{topic}-key")] if keys else []
        wanted += [("value", f"{topic}-value")] if values else []
        plan = Plan({})
        for offset_delta, record in enumerate(records):
            for part, subject in wanted:
                data = record.key if part == "key" else record.value
                if data is None:
                    continue
                try:
                    schema_id = unframe(data).schema_id
                except NotFramed as exc:
                    raise InvalidRecord(_refusal(topic, offset_delta, part, str(exc))) from None
                if (schema_id, subject) not in plan.schemas:
                    known = await self._known_under(schema_id, subject, topic, offset_delta, part)
                    plan.schemas[(schema_id, subject)] = known.parsed
        return plan

    async def _known_under(self, schema_id: int, subject: str, topic: str, at: int, part: str) -> _Known:
        known = self._known.get(schema_id)
        if known is None:
            try:
                view = await self._schema_of(schema_id)
            except RegistryError as exc:
                if exc.error_code == 40403:
                    raise InvalidRecord(
                        _refusal(topic, at, part, f"schema id {schema_id} is unknown")
                    ) from None
                raise
            try:
                parsed = self._types[view.schema_type].parse(view.schema, await self._resolved(view))
            except (InvalidSchema, RegistryError) as exc:
                why = f"schema id {schema_id} cannot be read: {exc}"
                raise InvalidRecord(_refusal(topic, at, part, why)) from None
            known = _Known(parsed, frozenset())
        if subject not in known.subjects:
            subjects = frozenset(s for s, _ in await self._usage_of(schema_id))
            known = _Known(known.parsed, subjects)
        self._known[schema_id] = known
        self._known.move_to_end(schema_id)
        while len(self._known) > CACHED_SCHEMAS_MAX:
            self._known.popitem(last=False)
        if subject not in known.subjects:
            raise InvalidRecord(
                _refusal(topic, at, part, f"schema id {schema_id} is not registered under subject {subject}")
            )
        return known

    async def _resolved(self, view: SchemaView) -> dict[str, str]:
        """The texts of the schemas ``view`` references, transitively, by reference name."""
        resolved: dict[str, str] = {}
        pending = list(view.references)
        while pending and len(resolved) < REFERENCES_MAX:
            reference = pending.pop()
            if reference.name not in resolved:
                referenced = await self._version_of(reference.subject, reference.version)
                resolved[reference.name] = referenced.schema
                pending += referenced.references
        return resolved


@dataclass(frozen=True, slots=True)
class Plan:
    schemas: dict[tuple[int, str], ParsedSchema]  # (id, subject) -> the parsed schema

    def decode_all(self, topic: str, records: Iterable[Record], keys: bool, values: bool) -> int:
        """Decodes every checked part (any thread: pure); InvalidRecord naming the first that fails.
        Returns how many parts were decoded."""
        decoded = 0
        for at, record in enumerate(records):
            for part, wanted, subject in (("key", keys, f"{topic}-key"), ("value", values, f"{topic}-value")):
                data = record.key if part == "key" else record.value
                if not wanted or data is None:
                    continue
                framed = unframe(data)
                parsed = self.schemas[(framed.schema_id, subject)]
                try:
                    if parsed.schema_type == PROTOBUF:
                        indexes, payload = message_indexes(framed.body)
                        parsed.decode(payload, indexes)
                    else:
                        parsed.decode(framed.body)
                except (SchemaInvalidRecord, NotFramed) as exc:
                    raise InvalidRecord(
                        _refusal(
                            topic, at, part, f"does not decode under schema id {framed.schema_id}: {exc}"
                        )
                    ) from None
                decoded += 1
        return decoded


def _refusal(topic: str, at: int, part: str, why: str) -> str:
    return f"record {at} of the batch to {topic}: its {part} {why}"
