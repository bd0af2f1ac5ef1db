"""The JSON Schema type of the registry (Confluent's ``JSON``): parse, canonical text, compatibility,
records (pure).

A schema is a JSON object or boolean that its draft's metaschema accepts (the draft its ``$schema``
names: 4, 6, 7, 2019-09 or 2020-12; Confluent's default, 7, when it names none or another), each of its
``$ref``s resolving against the schema itself and the referenced schemas the registry resolved for it
(``Resolved``: a reference's name, the ``$ref`` URL, to its text); nothing is ever fetched. The text the
registry keeps is Confluent's ``canonicalString()``: Jackson's compact JSON, keys in the order given, a
decimal number written as Java's ``BigDecimal`` writes it; ``normalized()`` sorts every object's keys, as
Confluent's ``normalize=true``. Compatibility is Confluent's JSON Schema diff (``json_schema_diff``)
with its words (``json_schema_difference``). A record is the JSON document itself, in UTF-8: ``decode``
parses and validates it, ``encode`` validates and writes it compactly; a document the schema refuses
raises ``InvalidRecord`` with the validator's message and the path where it failed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from typing import Any
from urllib.parse import urljoin

import jsonschema  # type: ignore[import-untyped]
import jsonschema.exceptions  # type: ignore[import-untyped]
import jsonschema.validators  # type: ignore[import-untyped]
import jsonschema_specifications  # type: ignore[import-untyped]
import referencing.exceptions
from referencing import Registry, Resource, Specification
from referencing.jsonschema import DRAFT4, DRAFT6, DRAFT7, DRAFT201909, DRAFT202012, specification_with

from partitions.registry import patterns
from partitions.registry.avro_json import dumps as jackson_dumps  # Jackson's writer, one copy
from partitions.registry.json_schema_diff import compare
from partitions.registry.json_schema_difference import COMPATIBLE_CHANGES, Difference
from partitions.registry.json_schema_model import Loader, Node
from partitions.registry.json_schema_modern import ModernLoader
from partitions.registry.schema_types import JSON, InvalidRecord, InvalidSchema, ParsedSchema, Resolved

# Confluent's SpecificationVersion: the $schema URLs it knows (a trailing "#" dropped), each draft's
# number, validator and referencing specification.
_DRAFTS: dict[str, tuple[int, type[Any], Specification[Any]]] = {}
for _urls, _draft in (
    (("http://json-schema.org/draft-04/schema", "https://json-schema.org/draft-04/schema"), 4),
    (("http://json-schema.org/schema", "https://json-schema.org/schema"), 4),
    (("http://json-schema.org/draft-06/schema", "https://json-schema.org/draft-06/schema"), 6),
    (("http://json-schema.org/draft-07/schema", "https://json-schema.org/draft-07/schema"), 7),
    (("http://json-schema.org/draft/2019-09/schema", "https://json-schema.org/draft/2019-09/schema"), 2019),
    (("http://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2020-12/schema"), 2020),
):
    for _url in _urls:
        _DRAFTS[_url] = {
            4: (4, jsonschema.Draft4Validator, DRAFT4),
            6: (6, jsonschema.Draft6Validator, DRAFT6),
            7: (7, jsonschema.Draft7Validator, DRAFT7),
            2019: (2019, jsonschema.Draft201909Validator, DRAFT201909),
            2020: (2020, jsonschema.Draft202012Validator, DRAFT202012),
        }[_draft]
_DEFAULT_DRAFT = _DRAFTS["http://json-schema.org/draft-07/schema"]


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    """jsonschema's ``pattern`` keyword, matched with RE2 (``patterns``)."""
    if validator.is_type(instance, "string") and not patterns.search(pattern, instance):
        yield jsonschema.exceptions.ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, named: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """jsonschema's ``patternProperties`` keyword, matched with RE2 (``patterns``)."""
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in named.items():
        for key, value in instance.items():
            if patterns.search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


# each draft's validator with its patterns matched in linear time
_LINEAR_VALIDATORS: dict[Any, Any] = {
    kind: jsonschema.validators.extend(kind, {"pattern": _pattern, "patternProperties": _pattern_properties})
    for kind in (
        jsonschema.Draft4Validator,
        jsonschema.Draft6Validator,
        jsonschema.Draft7Validator,
        jsonschema.Draft201909Validator,
        jsonschema.Draft202012Validator,
    )
}


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _loads_exact(text: str) -> Any:
    """JSON as Confluent's Jackson reads a schema: a number with a fraction or exponent kept exact."""
    return json.loads(text, parse_float=Decimal, parse_constant=_refuse_constant)


def _loads(text: str) -> Any:
    return json.loads(text, parse_constant=_refuse_constant)


def _draft_of(schema: Any) -> tuple[int, type[Any], Specification[Any]]:
    url = schema.get("$schema") if isinstance(schema, dict) else None
    if isinstance(url, str):
        return _DRAFTS.get(url.removesuffix("#"), _DEFAULT_DRAFT)
    return _DEFAULT_DRAFT


def _bridged(schema: Any) -> Any:
    """As Confluent loads a schema: its top-level ``definitions`` also under ``$defs`` (those of
    ``$defs`` first), so a ``$ref`` to ``#/$defs/X`` finds a body under either."""
    if not isinstance(schema, dict):
        return schema
    definitions, defs = schema.get("definitions"), schema.get("$defs", {})
    if not isinstance(definitions, dict) or not definitions or not isinstance(defs, dict):
        return schema
    return {**schema, "$defs": {**definitions, **defs}}


def _registry(
    root: Any, resolved: Resolved, loads: Callable[[str], Any], specification: Specification[Any]
) -> tuple[Registry[Any], dict[str, Any]]:
    """The registry of every referenced schema, under its name and its name resolved against the
    root's ``$id`` (where Confluent registers it), with the metaschemas; and each name's contents."""
    base = root.get("$id", root.get("id", "")) if isinstance(root, dict) else ""
    base = base if isinstance(base, str) else ""
    resources: list[tuple[str, Resource[Any]]] = []
    documents: dict[str, Any] = {}
    for name, text in resolved.items():
        try:
            contents = loads(text)
        except (ValueError, RecursionError) as error:
            raise InvalidSchema(
                f"Invalid JSON schema: the referenced schema {name!r} is not JSON: {error}"
            ) from None
        contents = documents[name] = _bridged(contents)
        dialect = contents.get("$schema", "") if isinstance(contents, dict) else ""
        resource = specification_with(dialect, default=specification).create_resource(contents)
        resources.append((name, resource))
        if urljoin(base, name) != name:
            resources.append((urljoin(base, name), resource))
    return jsonschema_specifications.REGISTRY.with_resources(resources).crawl(), documents


def _check_references(contents: Any, resolver: Any, specification: Specification[Any]) -> None:
    """Every ``$ref`` in this schema resolves (``InvalidSchema`` otherwise), nothing fetched."""
    pending = [(contents, resolver)]
    while pending:
        contents, resolver = pending.pop()
        if not isinstance(contents, dict):
            continue
        dialect = contents.get("$schema", "")
        resource = specification_with(
            dialect if isinstance(dialect, str) else "", default=specification
        ).create_resource(contents)
        resolver = resolver.in_subresource(resource)
        reference = contents.get("$ref")
        if isinstance(reference, str):
            try:
                resolver.lookup(reference)
            except referencing.exceptions.Unresolvable:
                raise InvalidSchema(f"Invalid JSON schema: $ref '{reference}' does not resolve") from None
        pending.extend((sub.contents, resolver) for sub in resource.subresources())


class ParsedJsonSchema:
    """A JSON Schema with its references resolved."""

    def __init__(self, exact: Any, plain: Any, resolved: Resolved) -> None:
        self._exact = exact  # numbers as Decimal: the text and the compatibility model
        draft, validator_class, specification = _draft_of(plain)
        exact, plain = _bridged(exact), _bridged(plain)
        registry, _ = _registry(plain, resolved, _loads, specification)
        format_checker = validator_class.FORMAT_CHECKER if draft <= 7 else None  # everit asserts formats
        linear = _LINEAR_VALIDATORS[validator_class]
        self._validator = linear(plain, registry=registry, format_checker=format_checker)
        exact_registry, documents = _registry(exact, resolved, _loads_exact, specification)
        root = exact_registry.resolver_with_root(specification.create_resource(exact))
        try:
            _check_references(exact, root, specification)
            for name, document in documents.items():
                _check_references(document, exact_registry.resolver(base_uri=name), specification)
            loader = ModernLoader(specification) if draft >= 2019 else Loader(draft, specification)
            self._model: Node = loader.load(exact, root)
        except InvalidSchema:
            raise
        except referencing.exceptions.Unresolvable as error:
            raise InvalidSchema(f"Invalid JSON schema: a $ref does not resolve: {error}") from None
        except (ValueError, TypeError, RecursionError) as error:
            raise InvalidSchema(f"Invalid JSON schema: {error}") from None

    @property
    def schema_type(self) -> str:
        return JSON

    def formatted(self, format: str) -> str:
        """Confluent's JSON Schema knows no format: the canonical text for any."""
        return self.canonical()

    def canonical(self) -> str:
        return jackson_dumps(self._exact)

    def normalized(self) -> str:
        return jackson_dumps(_sorted(self._exact))

    def differences(self, previous: ParsedJsonSchema) -> list[Difference]:
        """Every difference from ``previous`` to this schema, compatible or not, in Confluent's order."""
        return compare(previous._model, self._model)

    def backward_incompatibilities(self, previous: ParsedSchema) -> list[str]:
        if not isinstance(previous, ParsedJsonSchema):
            return ["Incompatible because of different schema type"]
        try:
            differences = self.differences(previous)
        except RecursionError:
            return ["Unexpected exception during compatibility check: the schemas nest too deeply to compare"]
        except (IndexError, KeyError, TypeError, ValueError) as failure:
            # as Confluent's checker answers an exception: incompatible, saying so (a registration is then
            # refused 409, never a 500); found by the property run of random schemas
            return [f"Unexpected exception during compatibility check: {failure!r}"]
        return [
            difference.message() for difference in differences if difference.type not in COMPATIBLE_CHANGES
        ]

    def decode(self, payload: bytes | memoryview, message_indexes: Sequence[int] = ()) -> Any:
        if message_indexes:
            raise InvalidRecord(f"a JSON Schema record has no message indexes, got {list(message_indexes)}")
        try:
            value = _loads(bytes(payload).decode("utf-8"))
        except UnicodeDecodeError as error:
            raise InvalidRecord(f"the record is not UTF-8: {error}") from None
        except (ValueError, RecursionError) as error:
            raise InvalidRecord(f"the record is not JSON: {error}") from None
        self._validate(value)
        return value

    def encode(self, value: Any) -> tuple[tuple[int, ...], bytes]:
        self._validate(value)
        try:
            text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise InvalidRecord(f"the value is not JSON: {error}") from None
        return (), text.encode("utf-8")

    def _validate(self, value: Any) -> None:
        try:
            error = jsonschema.exceptions.best_match(self._validator.iter_errors(value))
        except (referencing.exceptions.Unresolvable, RecursionError) as failure:
            raise InvalidRecord(f"the record could not be validated: {failure}") from None
        except (TypeError, KeyError, AttributeError) as failure:
            # jsonschema's own keywords fail on a few schemas its metaschema lets through (draft 2019-09's
            # unevaluatedItems beside a boolean items: len(True)); a clear refusal, never a crash of the
            # node checking the record
            raise InvalidRecord(f"the schema cannot check this record (jsonschema: {failure!r})") from None
        if error is not None:
            path = "/".join(str(part) for part in error.absolute_path)
            raise InvalidRecord(f"#/{path}: {error.message}")


class JsonSchemaType:
    name = JSON

    def parse(self, text: str, resolved: Resolved) -> ParsedJsonSchema:
        try:
            exact, plain = _loads_exact(text), _loads(text)
        except (ValueError, RecursionError) as error:
            raise InvalidSchema(f"Invalid JSON schema: {error}") from None
        if not isinstance(exact, dict | bool):
            raise InvalidSchema(
                f"Invalid JSON schema: expected an object or boolean at the root, found {_node_type(exact)}"
            )
        _, validator_class, _ = _draft_of(plain)
        try:
            validator_class.check_schema(plain)
        except jsonschema.exceptions.SchemaError as error:
            path = "/".join(str(part) for part in error.absolute_path)
            raise InvalidSchema(f"Invalid JSON schema: #/{path}: {error.message}") from None
        except RecursionError:
            raise InvalidSchema("Invalid JSON schema: it nests too deeply to be checked") from None
        try:  # a pattern that is no regex at all is refused below, in the words of its keyword's check
            for pattern in patterns.schema_patterns(plain):
                if patterns.is_regex(pattern):
                    patterns.compiled(pattern)
        except patterns.UnsupportedPattern as error:
            raise InvalidSchema(f"Invalid JSON schema: {error}") from None
        return ParsedJsonSchema(exact, plain, resolved)


JSON_TYPE = JsonSchemaType()


def _node_type(value: Any) -> str:
    """Jackson's JsonNodeType of a JSON value."""
    if isinstance(value, list):
        return "ARRAY"
    if isinstance(value, str):
        return "STRING"
    if value is None:
        return "NULL"
    return "NUMBER"


def _sorted(value: Any) -> Any:
    """Every object's keys in Java's String order (UTF-16 code units), as a TreeMap keeps them."""
    if isinstance(value, dict):
        keys = sorted(value, key=lambda key: key.encode("utf-16-be", "surrogatepass"))
        return {key: _sorted(value[key]) for key in keys}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value
