"""The registry's AVRO schema type (``AVRO_TYPE``), as Confluent's ``AvroSchemaProvider`` and
``AvroSchema`` behave. Pure.

- ``parse``: the references' texts first (each a named type the schema may use by name), then the
  schema's, as Avro's Java parser reads them for a schema registered anew (``avro_schema``).
- ``canonical``: Avro's ``Schema.toString`` with the references' types written by name;
  ``normalized``: Confluent's ``normalize=true`` form (``avro_normalize``).
- ``backward_incompatibilities``: Avro's reader/writer check, this schema the reader, each
  incompatibility as Confluent's ``AvroSchema.isBackwardCompatible`` gives it (``avro_compat``: its
  ``%s`` for the registry to fill with "new" and "old").
- ``decode`` / ``encode``: a record between Avro's binary encoding (fastavro) and Avro's JSON encoding
  as Confluent's REST Proxy v2 answers and takes it (``avro_datum``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from partitions.registry import avro_compat, avro_datum, avro_model, avro_normalize, avro_schema
from partitions.registry.schema_types import AVRO, InvalidSchema, ParsedSchema, Resolved, SchemaType


class AvroSchema:
    """One parsed Avro schema (``ParsedSchema``)."""

    def __init__(self, root: avro_model.Node, references: dict[str, str], reference_names: list[str]) -> None:
        self.root = root
        self.references = references  # a reference's name -> its text, as given
        self.reference_names = reference_names  # the full names of the references' own types
        self._canonical: str | None = None
        self._datum: avro_datum.Codec | None = None

    @property
    def schema_type(self) -> str:
        return AVRO

    def canonical(self) -> str:
        if self._canonical is None:
            self._canonical = avro_model.to_string(self.root, self.reference_names)
        return self._canonical

    def resolved_text(self) -> str:
        """The schema with every type written out, references' types too (Confluent's
        ``format=resolved``)."""
        return avro_model.to_string(self.root)

    def formatted(self, format: str) -> str:
        return self.resolved_text() if format.lower() == "resolved" else self.canonical()

    def normalized(self) -> str:
        text = avro_normalize.normalized_text(self.root, self.reference_names)
        return AVRO_TYPE.parse(text, self.references).canonical()

    def backward_incompatibilities(self, previous: ParsedSchema) -> list[str]:
        if not isinstance(previous, AvroSchema):
            return ["Incompatible because of different schema type"]
        try:
            found = avro_compat.incompatibilities(self.root, previous.root)
        except avro_compat.CheckFailed as error:
            return [f"Unexpected exception during compatibility check: {error}"]
        except RecursionError:
            return ["Unexpected exception during compatibility check: the schemas are nested too deeply"]
        return [avro_compat.difference(incompatibility) for incompatibility in found]

    def _codec(self) -> avro_datum.Codec:
        if self._datum is None:
            self._datum = avro_datum.Codec(self.root)
        return self._datum

    def decode(self, payload: bytes | memoryview, message_indexes: Sequence[int] = ()) -> Any:
        return self._codec().decode(bytes(payload))

    def encode(self, value: Any) -> tuple[tuple[int, ...], bytes]:
        return (), self._codec().encode(value)


class AvroType:
    name = AVRO

    def parse(self, text: str, resolved: Resolved) -> AvroSchema:
        """The schema of ``text``, each of ``resolved`` parsed first (in the order given; one that uses a
        type another defines waits for it). ``InvalidSchema`` carries Avro's words."""
        context = avro_schema.Context()
        reference_names: list[str] = []
        pending = list(resolved.items())
        while pending:
            waiting: list[tuple[str, str]] = []
            failure: InvalidSchema | None = None
            for name, reference in pending:
                known = dict(context.named)
                try:
                    node = avro_schema.parse_text(reference, context)
                except InvalidSchema as error:
                    context.named = known
                    if not str(error).startswith("Undefined schema: "):
                        raise InvalidSchema(f"reference {name}: {error}") from None
                    waiting.append((name, reference))
                    failure = error
                    continue
                reference_names.append(node.full_name)
            if len(waiting) == len(pending):
                raise InvalidSchema(f"reference {waiting[0][0]}: {failure}")
            pending = waiting
        root = avro_schema.parse_text(text, context)
        return AvroSchema(root, dict(resolved), reference_names)


AVRO_TYPE: SchemaType = AvroType()
