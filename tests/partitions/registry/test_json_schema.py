"""The JSON Schema type (partitions/registry/json_schema.py): Confluent's own compatibility corpus as the
judge of its diff, its canonical and normalized text, what it refuses as a schema, and records checked
against a schema."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from partitions.registry.json_schema import JSON_TYPE, ParsedJsonSchema
from partitions.registry.json_schema_difference import COMPATIBLE_CHANGES, java_hash_order
from partitions.registry.schema_types import InvalidRecord, InvalidSchema

CORPUS = Path(__file__).parent / "confluent_json_schema"
CORPUS_FILES = (
    "diff-schema-examples.json",
    "diff-combined-schema-examples.json",
    "diff-schema-examples-2020-12.json",
    "diff-combined-schema-examples-2020-12.json",
)


def _examples(name: str) -> list[dict[str, Any]]:
    # Confluent reads these with org.json, which takes a trailing comma: one of them has one.
    return list(json.loads(re.sub(r",(\s*[}\]])", r"\1", (CORPUS / name).read_text())))


EXAMPLES = [(name, index, case) for name in CORPUS_FILES for index, case in enumerate(_examples(name))]


def parse(schema: Any, resolved: dict[str, str] | None = None) -> ParsedJsonSchema:
    return JSON_TYPE.parse(schema if isinstance(schema, str) else json.dumps(schema), resolved or {})


def test_the_corpus_is_confluent_s_whole() -> None:
    # Confluent's files at the commit the README names: 104, 28, 113 and 18 examples.
    assert [sum(1 for example in EXAMPLES if example[0] == name) for name in CORPUS_FILES] == [
        104,
        28,
        113,
        18,
    ]


@pytest.mark.parametrize(("name", "index", "case"), EXAMPLES, ids=[f"{e[0][5:-5]}-{e[1]}" for e in EXAMPLES])
def test_confluent_s_compatibility_examples(name: str, index: int, case: dict[str, Any]) -> None:
    # As Confluent's SchemaDiffTest checks each: every difference (type and path) in Confluent's order,
    # and whether they are all compatible; the registry's answer says the same.
    original, update = parse(case["original_schema"]), parse(case["update_schema"])
    differences = update.differences(original)
    assert [f"{d.type} {d.path}" for d in differences] == case["changes"], case["description"]
    incompatible = [d for d in differences if d.type not in COMPATIBLE_CHANGES]
    assert (not incompatible) == case["compatible"], case["description"]
    assert update.backward_incompatibilities(original) == [d.message() for d in incompatible]


def test_an_incompatibility_is_worded_as_confluent_words_it() -> None:
    # Difference.toString(): its quotes as Confluent has them, %s for the reader's and writer's names,
    # which the registry fills as Confluent's SchemaValidatorBuilder does.
    earlier = parse({"properties": {"foo": {"type": "string"}}})
    later = parse({"properties": {"foo": {"type": "number"}, "bar": {"type": "string"}}, "required": ["bar"]})
    assert later.backward_incompatibilities(earlier) == [
        '{errorType:"REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", description:"The %s schema has an open '
        "content model and has a property or item at path '#/properties/bar' which is missing in the %s "
        "schema'}",
        '{errorType:"TYPE_CHANGED", description:"A type at path \'#/properties/foo\' is different between '
        "the %s schema and the %s schema'}",
    ]
    assert earlier.backward_incompatibilities(earlier) == []


def test_property_names_come_in_java_s_hash_order() -> None:
    # "bar" before "foo" in Confluent's corpus: a HashSet's buckets, not the schema's order.
    assert java_hash_order(["foo", "bar"], 16) == ["bar", "foo"]
    earlier = parse({"properties": {"zeta": {}, "alpha": {}, "mid": {}}})
    later = parse({"properties": {}, "additionalProperties": False})
    paths = [d.path for d in later.differences(earlier)]
    names = [path.rsplit("/", 1)[1] for path in paths if path.startswith("#/properties/")]
    assert names == java_hash_order(["zeta", "alpha", "mid"], 16)


def _recursive_object(id_type: str, target: str) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": True,
        "properties": {"id": {"type": id_type}, "ref": {"oneOf": [{"$ref": f"#/definitions/{target}"}]}},
    }


def _masking_schema(t0_id: str, t1_id: str) -> dict[str, Any]:
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "additionalProperties": True,
        "definitions": {
            "T0": _recursive_object(t0_id, "T2"),
            "T1": _recursive_object(t1_id, "T2"),
            "T2": _recursive_object("integer", "T0"),
        },
        "properties": {"root": {"oneOf": [{"$ref": "#/definitions/T0"}, {"$ref": "#/definitions/T1"}]}},
    }


def _trade_schema(asset_id_type: str = "string") -> dict[str, Any]:
    types = [
        "Asset",
        "Basket",
        "Swap",
        "Bond",
        "Option",
        "Future",
        "Forward",
        "Loan",
        "Repo",
        "Equity",
        "Index",
        "CommodityLeg",
    ]
    union = {"oneOf": [{"$ref": f"#/definitions/{name}"} for name in types]}
    definitions: dict[str, Any] = {
        name: {
            "type": "object",
            "properties": {"id": {"type": "string"}, "underlying": union, "referenceProduct": union},
        }
        for name in types
    }
    definitions["Asset"]["properties"]["id"] = {"type": asset_id_type}
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Trade",
        "type": "object",
        "additionalProperties": True,
        "definitions": definitions,
        "properties": {"tradeId": {"type": "string"}, "product": union},
    }


def test_recursive_schemas_as_confluent_s_tests_compare_them() -> None:
    # SchemaDiffTest's recursive cases: a recursive oneOf compared with itself terminates with no
    # difference; a change deep in it is found; and a cycle assumed compatible in one branch does not
    # hide an incompatibility another branch finds (Confluent's fixpoint).
    trade = parse(_trade_schema())
    assert trade.differences(parse(_trade_schema())) == []
    assert parse(_trade_schema("number")).differences(trade) != []
    masked = parse(_masking_schema("boolean", "number")).differences(
        parse(_masking_schema("integer", "boolean"))
    )
    assert [d for d in masked if d.type not in COMPATIBLE_CHANGES]


def test_connect_s_bytes_stay_compatible_across_types() -> None:
    # SchemaDiffTest.testConnectTypeAsBytes: a Connect decimal moved from string to number.
    common = {"title": "org.apache.kafka.connect.data.Decimal", "connect.version": 1, "connect.type": "bytes"}
    earlier, later = parse({"type": "string", **common}), parse({"type": "number", **common})
    assert later.differences(earlier) == []
    assert parse({"properties": {}}).differences(parse({})) != []  # testSchemaAddsProperties


def test_multiple_of_is_compared_exactly() -> None:
    # SchemaDiffTest: 0.5 to 10 expands (every multiple of 10 is one of 0.5), 0.5 and 0.50 are equal;
    # and far apart values are still divided exactly, as Java's BigDecimal divides them.
    def change(before: str, after: str) -> list[str]:
        earlier, later = (
            parse(f'{{"type": "number", "multipleOf": {before}}}'),
            parse(f'{{"type": "number", "multipleOf": {after}}}'),
        )
        return [d.type for d in later.differences(earlier)]

    assert change("0.5", "10") == ["MULTIPLE_OF_EXPANDED"]
    assert change("0.5", "0.50") == []
    assert change("1E-30", "1E+30") == ["MULTIPLE_OF_EXPANDED"]
    assert change("3E+30", "7E-30") == ["MULTIPLE_OF_CHANGED"]


def test_canonical_text_is_jackson_s_compact_json() -> None:
    text = '{ "type" : "object",\n "properties": {"b": {"type": "number", "maximum": 1e2, "minimum": -0.0,'
    text += ' "multipleOf": 0.50, "default": 12345678901234567890}, "a": {"const": "é\\u001f\\n/"}}}'
    schema = parse(text)
    assert schema.canonical() == (
        '{"type":"object","properties":{"b":{"type":"number","maximum":1E+2,"minimum":0.0,"multipleOf":0.50,'
        '"default":12345678901234567890},"a":{"const":"é\\u001F\\n/"}}}'
    )
    assert schema.normalized() == (
        '{"properties":{"a":{"const":"é\\u001F\\n/"},"b":{"default":12345678901234567890,"maximum":1E+2,'
        '"minimum":0.0,"multipleOf":0.50,"type":"number"}},"type":"object"}'
    )
    assert parse(schema.canonical()).canonical() == schema.canonical()
    assert parse("true").canonical() == "true"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"type": "string"', "Invalid JSON schema: Expecting"),
        ("[1, 2]", "expected an object or boolean at the root, found ARRAY"),
        ('"string"', "found STRING"),
        ('{"type": 5}', "Invalid JSON schema: #/type: 5 is not valid"),
        ('{"type": "object", "properties": {"a": {"minLength": -1}}}', "#/properties/a/minLength: -1"),
        (
            '{"$schema": "http://json-schema.org/draft-04/schema#", "exclusiveMinimum": 3}',
            "#/exclusiveMinimum",
        ),
        ('{"pattern": "(unclosed"}', "#/pattern"),
        (
            '{"$schema": "http://json-schema.org/draft-04/schema#", "patternProperties": {"(x": {}}}',
            "#/patternProperties: '(x' is not a 'regex'",
        ),
        ('{"$ref": "#/definitions/missing"}', "$ref '#/definitions/missing' does not resolve"),
        ('{"$ref": "#"}', "$ref '#' refers only to $refs back to itself"),
        (
            '{"definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"$ref": "#/definitions/a"}},'
            ' "$ref": "#/definitions/a"}',
            "refers only to $refs back to itself",
        ),
        ('{"properties": {"a": {"$ref": "other.json"}}}', "$ref 'other.json' does not resolve"),
    ],
)
def test_what_is_no_schema_is_refused_with_the_reason(text: str, words: str) -> None:
    with pytest.raises(InvalidSchema) as refused:
        parse(text)
    assert words in str(refused.value)


def test_each_draft_is_checked_by_its_own_metaschema() -> None:
    # exclusiveMinimum is a flag in draft 4 and a number from draft 6 on; prefixItems is 2020-12's.
    parse({"$schema": "http://json-schema.org/draft-04/schema#", "minimum": 3, "exclusiveMinimum": True})
    parse({"$schema": "http://json-schema.org/draft-06/schema#", "exclusiveMinimum": 3})
    with pytest.raises(InvalidSchema):
        parse({"$schema": "http://json-schema.org/draft-07/schema#", "exclusiveMinimum": True})
    tuple_schema = parse(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "prefixItems": [{"type": "string"}],
            "items": False,
        }
    )
    assert tuple_schema.decode(b'["a"]') == ["a"]
    with pytest.raises(InvalidRecord):
        tuple_schema.decode(b'["a", 1]')
    with pytest.raises(InvalidSchema):
        parse({"$schema": "https://json-schema.org/draft/2020-12/schema", "prefixItems": {"type": "string"}})


def test_references_resolve_against_the_resolved_schemas_and_nothing_is_fetched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"the network was asked: {args}")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    address = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    resolved = {"address.json": json.dumps(address)}
    customer = {
        "$id": "https://example.com/customer.json",
        "type": "object",
        "properties": {"home": {"$ref": "address.json"}},
    }
    schema = parse(customer, resolved)
    assert schema.decode(b'{"home":{"city":"Lyon"}}') == {"home": {"city": "Lyon"}}
    with pytest.raises(InvalidRecord, match="#/home: 'city' is a required property"):
        schema.decode(b'{"home":{}}')
    with pytest.raises(InvalidSchema, match=r"https://example\.com/elsewhere\.json"):
        parse({"properties": {"a": {"$ref": "https://example.com/elsewhere.json"}}}, resolved)
    changed = parse(
        customer, {"address.json": json.dumps({**address, "properties": {"city": {"type": "integer"}}})}
    )
    assert [d.type for d in changed.differences(schema)] == ["TYPE_CHANGED"]


@pytest.mark.parametrize(
    "draft", ["http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2020-12/schema"]
)
def test_a_ref_into_defs_finds_a_body_under_definitions(draft: str) -> None:
    # Confluent copies the top-level definitions into $defs before it loads a schema, of every draft.
    schema = parse(
        {
            "$schema": draft,
            "definitions": {"id": {"type": "integer"}},
            "properties": {"id": {"$ref": "#/$defs/id"}},
        }
    )
    assert schema.decode(b'{"id": 3}') == {"id": 3}
    with pytest.raises(InvalidRecord, match="#/id: 'x' is not of type 'integer'"):
        schema.decode(b'{"id": "x"}')
    assert '"$defs"' not in schema.canonical()


def test_a_record_is_its_json_document_checked_against_the_schema() -> None:
    schema = parse(
        {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "integer"}},
            },
            "required": ["name"],
            "additionalProperties": False,
        }
    )
    value = {"name": "Zoë", "tags": [1, 2]}
    assert schema.encode(value) == ((), '{"name":"Zoë","tags":[1,2]}'.encode())
    assert schema.decode(memoryview(schema.encode(value)[1])) == value
    refused = [
        (b'{"name": "a", "tags": [1, "x"]}', "#/tags/1: 'x' is not of type 'integer'"),
        (b'{"tags": []}', "#/: 'name' is a required property"),
        (b'{"name": "a", "other": 1}', "Additional properties are not allowed ('other' was unexpected)"),
        (b'{"name": ', "the record is not JSON"),
        (b'{"name": NaN}', "the record is not JSON"),
        (b'{"name": "\xff"}', "the record is not UTF-8"),
    ]
    for payload, words in refused:
        with pytest.raises(InvalidRecord) as failure:
            schema.decode(payload)
        assert words in str(failure.value), payload
    with pytest.raises(InvalidRecord, match="#/name: 3 is not of type 'string'"):
        schema.encode({"name": 3})
    with pytest.raises(InvalidRecord, match="message indexes"):
        schema.decode(b'{"name": "a"}', [0])


def test_confluent_kafka_s_json_serde_and_this_type_read_each_other_s_records() -> None:
    # confluent-kafka's JSONSerializer registers its schema text and frames the document it validated
    # (magic byte, schema id, then the JSON); this type reads that JSON, and its records are read by
    # JSONDeserializer. A document the schema refuses is refused by both.
    schema_text = json.dumps(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Order",
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "items": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["id"],
        }
    )
    client = SchemaRegistryClient.new_client({"url": "mock://"})  # confluent-kafka's own in-memory registry
    context = SerializationContext("orders", MessageField.VALUE)
    serializer = JSONSerializer(schema_text, client, conf={"auto.register.schemas": True})
    framed = serializer({"id": 7, "items": ["pen"]}, context)
    assert framed is not None and framed[0] == 0
    registered = client.get_schema(int.from_bytes(framed[1:5], "big"))
    schema = parse(registered.schema_str)
    assert schema.decode(framed[5:]) == {"id": 7, "items": ["pen"]}

    _, payload = schema.encode({"id": 8, "items": []})
    deserializer = JSONDeserializer(None, schema_registry_client=client)
    assert deserializer(framed[:5] + payload, context) == {"id": 8, "items": []}

    with pytest.raises(SerializationError):
        serializer({"items": ["pen"]}, context)
    with pytest.raises(InvalidRecord, match="'id' is a required property"):
        schema.encode({"items": ["pen"]})


_NAMES = st.sampled_from(["a", "b", "$id", "x y"])
_TYPES = st.sampled_from(["string", "object", "array", "number", "integer", "null", "boolean"])
_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["a", "b"])),
    lambda inner: st.one_of(st.lists(inner, max_size=2), st.dictionaries(_NAMES, inner, max_size=2)),
    max_leaves=4,
)


def _schema_keywords(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    counts = st.integers(0, 3)
    keywords: dict[str, st.SearchStrategy[Any]] = {
        "type": st.one_of(_TYPES, st.lists(_TYPES, min_size=1, max_size=3, unique=True)),
        "properties": st.dictionaries(_NAMES, children, max_size=3),
        "required": st.lists(_NAMES, min_size=1, max_size=2, unique=True),
        "additionalProperties": st.one_of(st.booleans(), children),
        "patternProperties": st.dictionaries(st.sampled_from(["^a", "b"]), children, max_size=2),
        "dependencies": st.dictionaries(
            _NAMES, st.one_of(st.lists(_NAMES, max_size=2, unique=True), children)
        ),
        "items": st.one_of(children, st.lists(children, min_size=1, max_size=2)),
        "prefixItems": st.lists(children, min_size=1, max_size=2),
        "additionalItems": st.one_of(st.booleans(), children),
        "unevaluatedProperties": children,
        "unevaluatedItems": children,
        "contains": children,
        "minContains": counts,
        "enum": st.lists(_VALUES, min_size=1, max_size=3),
        "const": _VALUES,
        "allOf": st.lists(children, min_size=1, max_size=3),
        "anyOf": st.lists(children, min_size=1, max_size=3),
        "oneOf": st.lists(children, min_size=1, max_size=3),
        "not": children,
        "if": children,
        "then": children,
        "$ref": st.sampled_from(["#", "#/definitions/a", "#/$defs/a"]),
        "minimum": st.integers(-3, 3),
        "multipleOf": st.sampled_from([1, 0.5, 3]),
        "maxLength": counts,
        "pattern": st.sampled_from(["^a", ".*"]),
        "minItems": counts,
        "uniqueItems": st.booleans(),
        "maxProperties": counts,
        "title": st.sampled_from(["t", "u"]),
        "default": _VALUES,
        "connect.type": st.just("bytes"),
    }
    chosen = st.lists(st.sampled_from(sorted(keywords)), max_size=4, unique=True)
    return chosen.flatmap(lambda names: st.fixed_dictionaries({name: keywords[name] for name in names}))


_SCHEMAS = st.recursive(
    st.one_of(st.booleans(), st.fixed_dictionaries({"type": _TYPES})), _schema_keywords, max_leaves=8
)
_DRAFTS = st.sampled_from(
    [
        None,
        "http://json-schema.org/draft-04/schema#",
        "http://json-schema.org/draft-06/schema#",
        "http://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    ]
)


@st.composite
def _documents(draw: st.DrawFn) -> Any:
    draft, schema, definition = draw(_DRAFTS), draw(_SCHEMAS), draw(_SCHEMAS)
    if not isinstance(schema, dict):
        return schema
    return {**schema, "definitions": {"a": definition}, "$defs": {"a": definition}} | (
        {"$schema": draft} if draft else {}
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_documents(), _documents(), _VALUES)
def test_any_schema_is_refused_with_a_reason_or_handled_whole(earlier: Any, later: Any, value: Any) -> None:
    # Every schema of every draft: refused as InvalidSchema, or its canonical text parses to itself, it is
    # compared either way with another, and a value is a record of it or an InvalidRecord.
    try:
        first, second = parse(earlier), parse(later)
    except InvalidSchema:
        return
    assert parse(first.canonical()).canonical() == first.canonical()
    assert parse(first.normalized()).normalized() == first.normalized()
    assert isinstance(
        second.backward_incompatibilities(first) + first.backward_incompatibilities(second), list
    )
    try:
        _, payload = first.encode(value)
    except InvalidRecord:
        with pytest.raises(InvalidRecord):
            first.decode(json.dumps(value).encode())
    else:
        assert first.decode(payload) == value


def test_a_record_jsonschema_itself_fails_to_check_is_refused_not_a_crash() -> None:
    """Draft 2019-09's unevaluatedItems beside a boolean items makes jsonschema's own keyword raise
    TypeError (found by the property run above on a loaded machine): the record is refused, saying so."""
    schema = JSON_TYPE.parse(
        json.dumps(
            {
                "$schema": "https://json-schema.org/draft/2019-09/schema",
                "items": True,
                "unevaluatedItems": False,
            }
        ),
        {},
    )
    with pytest.raises(InvalidRecord, match="cannot check this record"):
        schema.encode([1, 2])
