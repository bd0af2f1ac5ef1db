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

An id's schema never changes, so it is parsed once per node (``registry.schema_cache``); whether an id is
registered under a subject is asked again until it is (a registration may come after the first refusal),
and once it is, kept (``SUBJECTS_KEPT`` ids).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from partitions.errors import RegistryError
from partitions.registry.framing import NotFramed, message_indexes, unframe
from partitions.registry.schema_cache import SchemaCache
from partitions.registry.schema_types import PROTOBUF, ParsedSchema
from partitions.registry.schema_types import InvalidRecord as SchemaInvalidRecord
from raftlog.storage.batch import Record
from raftlog.storage.config import LogConfig
from raftlog.storage.errors import InvalidRecord

SUBJECTS_KEPT = 1000  # ids whose subjects are kept (an id registered under a subject stays so)
TOPIC_NAME_STRATEGY = "io.confluent.kafka.serializers.subject.TopicNameStrategy"

UsageLookup = Callable[[int], Awaitable[list[tuple[str, int]]]]  # the live (subject, version) pairs of an id


def checks_asked(config: LogConfig) -> tuple[bool, bool]:
    """Whether the topic's configs ask its keys, its values checked."""
    return config.key_schema_validation, config.value_schema_validation


class SchemaChecks:
    """``prepare`` a batch's check on the event loop (its schemas, parsed once per node by a
    ``SchemaCache``), then ``Plan.decode_all`` its records on any thread."""

    def __init__(self, schemas: SchemaCache, usage_of: UsageLookup) -> None:
        self._schemas = schemas
        self._usage_of = usage_of
        self._subjects: OrderedDict[int, frozenset[str]] = OrderedDict()  # id -> subjects found holding it

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
                    parsed = await self._parsed_under(schema_id, subject, topic, offset_delta, part)
                    plan.schemas[(schema_id, subject)] = parsed
        return plan

    async def _parsed_under(
        self, schema_id: int, subject: str, topic: str, at: int, part: str
    ) -> ParsedSchema:
        try:
            registered = await self._schemas.registered(schema_id)
        except RegistryError as exc:
            why = (
                f"schema id {schema_id} is unknown"
                if exc.error_code == 40403
                else f"schema id {schema_id}: {exc}"
            )
            raise InvalidRecord(_refusal(topic, at, part, why)) from None
        subjects = self._subjects.get(schema_id, frozenset())
        if subject not in subjects:  # asked again until it is (a registration may follow a refusal)
            subjects = frozenset(s for s, _ in await self._usage_of(schema_id))
        self._subjects[schema_id] = subjects
        self._subjects.move_to_end(schema_id)
        while len(self._subjects) > SUBJECTS_KEPT:
            self._subjects.popitem(last=False)
        if subject not in subjects:
            why = f"schema id {schema_id} is not registered under subject {subject}"
            raise InvalidRecord(_refusal(topic, at, part, why))
        return registered.parsed


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
