"""What the registry needs of a schema type (Avro, JSON Schema, Protobuf), whichever it is (pure).

Each type's module (``avro.py``, ``json_schema.py``, ``protobuf.py``) defines a ``SchemaType``; the
registry looks them up by Confluent's name (``TYPES``). A schema is parsed from the text a client gave,
with the schemas it references already resolved (``Resolved``: each reference's name, as the schema
names it, to the referenced schema's text, transitively); the parsed schema gives the text the registry
stores and answers (``canonical``; ``normalized`` when a client asks ``normalize=true``) and says why data
written with an earlier schema could not be read with it (``backward_incompatibilities``: Confluent's
words, empty when compatible). FORWARD is the earlier schema's backward check of the new one, FULL both.

Records: ``decode`` reads a payload (what follows Confluent's wire header: magic byte, schema id and,
for Protobuf, message indexes) into a JSON value as Confluent's REST Proxy answers it, ``encode`` makes a
payload of such a value; both raise ``InvalidRecord`` for data the schema does not describe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"


class InvalidSchema(ValueError):
    """The text is not a schema of its type, or a reference does not resolve (Confluent's 42201
    "Invalid schema"); the message says what and where."""


class InvalidRecord(ValueError):
    """A record's payload or JSON value is not data of the schema (REST Proxy's 42203 / a broker's
    INVALID_RECORD); the message says what and where."""


@dataclass(frozen=True, slots=True)
class Reference:
    """A schema's reference to another, as Confluent's API carries it: ``name`` as the schema refers to it
    (an Avro full name, a Protobuf import path, a JSON Schema ``$ref`` URL), the ``subject`` and
    ``version`` registered under."""

    name: str
    subject: str
    version: int


Resolved = Mapping[str, str]  # a reference's name -> the referenced schema's text, transitively


class ParsedSchema(Protocol):
    """A schema of one type, parsed with its references."""

    @property
    def schema_type(self) -> str:
        """``AVRO``, ``JSON`` or ``PROTOBUF``."""
        ...

    def canonical(self) -> str:
        """The text the registry stores and answers: the same for two texts of the same schema that
        differ only in what Confluent's registry does not keep (JSON whitespace; Protobuf: the schema as
        Confluent prints it, also when the client sent a base64 ``FileDescriptorProto``)."""
        ...

    def normalized(self) -> str:
        """The canonical text normalized as Confluent's ``normalize=true`` does (Avro: Confluent's
        normalized form; Protobuf: options and imports sorted, ...), used for lookups and registration
        when a client asks for it or the subject's config says so."""
        ...

    def formatted(self, format: str) -> str:
        """The text Confluent answers for ``?format=`` (Avro ``resolved``: every type written out;
        Protobuf ``serialized``: the base64 FileDescriptorProto confluent-kafka's deserializers ask for,
        ``ignore_extensions``); the canonical text for a format the type does not know, as Confluent."""
        ...

    def backward_incompatibilities(self, previous: ParsedSchema) -> list[str]:
        """Why data written with ``previous`` could not be read with this schema, as Confluent's registry
        words each message (``{errorType:'...', description:'...', additionalInfo:'...'}``); empty when it
        could. ``previous`` is of the same type (the registry never compares two types). A message may
        hold two ``%s``, the reader's and the writer's names, which the registry fills ("new"/"old" or
        the other way round, by the direction it checks), as Confluent's checker fills them."""
        ...

    def decode(self, payload: bytes | memoryview, message_indexes: Sequence[int] = ()) -> Any:
        """The JSON value of a record's payload as Confluent's REST Proxy v2 answers it (Avro: its JSON
        encoding of the datum, unions as ``{"type": value}``; Protobuf: the message at
        ``message_indexes`` as protobuf's JSON mapping; JSON Schema: the document, validated)."""
        ...

    def encode(self, value: Any) -> tuple[tuple[int, ...], bytes]:
        """The payload of a JSON value (the inverse of ``decode``) and the Protobuf message indexes it
        was encoded with (its first message: ``()``; always ``()`` for the other types)."""
        ...


class SchemaType(Protocol):
    name: str  # Confluent's: AVRO, JSON, PROTOBUF

    def parse(self, text: str, resolved: Resolved) -> ParsedSchema:
        """The schema of ``text`` with its references resolved (InvalidSchema when it is none)."""
        ...
