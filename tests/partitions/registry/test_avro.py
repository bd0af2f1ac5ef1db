"""The registry's Avro type (partitions/registry/avro.py) on its own: references, Confluent's normalized
form and messages, and records refused or read back. Avro's Java library judges the parsing, printing,
compatibility and encodings on a corpus in ``test_avro_java.py``; these are what it cannot judge (the
normalized form is Confluent's, not Avro's) or what a broker needs of the decoder (bounds)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partitions.registry import avro_datum
from partitions.registry.avro import AVRO_TYPE, AvroSchema
from partitions.registry.schema_types import AVRO, InvalidRecord, InvalidSchema

ADDRESS = (
    '{"type":"record","name":"Address","namespace":"com.example",'
    '"fields":[{"name":"street","type":"string"}]}'
)
USER = (
    '{"type":"record","name":"User","namespace":"com.example","fields":'
    '[{"name":"home","type":"Address"},{"name":"work","type":["null","com.example.Address"],"default":null}]}'
)


def parse(schema: Any, resolved: dict[str, str] | None = None) -> AvroSchema:
    return AVRO_TYPE.parse(schema if isinstance(schema, str) else json.dumps(schema), resolved or {})


def test_a_bare_primitive_is_a_schema() -> None:
    assert parse('"string"').canonical() == '"string"'
    assert parse(' {"type": "long"} ').canonical() == '"long"'
    assert parse('"string"').schema_type == AVRO == AVRO_TYPE.name


def test_references_are_written_by_name_and_resolved_in_any_order() -> None:
    schema = parse(USER, {"address": ADDRESS})
    assert schema.canonical() == (
        '{"type":"record","name":"User","namespace":"com.example","fields":[{"name":"home","type":"Address"},'
        '{"name":"work","type":["null","Address"],"default":null}]}'
    )
    assert schema.resolved_text().startswith(
        '{"type":"record","name":"User","namespace":"com.example","fields":[{"name":"home","type":'
        '{"type":"record","name":"Address"'
    )
    org = '{"type":"record","name":"Org","fields":[{"name":"boss","type":"com.example.User"}]}'
    # a reference that uses another is parsed after it, whatever order the map gives them in
    assert (
        parse(org, {"user": USER, "address": ADDRESS}).canonical()
        == parse(org, {"address": ADDRESS, "user": USER}).canonical()
    )
    with pytest.raises(InvalidSchema, match=r"Undefined schema: com\.example\.Address"):
        parse(org, {"user": USER})
    with pytest.raises(InvalidSchema, match=r"^reference address: No name in schema"):
        parse(USER, {"address": '{"type":"record","fields":[]}'})


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "Invalid JSON: Expecting value: line 1 column 1"),
        ('{"type": "record", "name": "R", "fields": [}', "Invalid JSON: Expecting value: line 1 column 44"),
        ('{"type": "int"} x', "dangling content after end of schema: x"),
        ('{"type": "double", "default": NaN}', "Invalid JSON: Non-standard token 'NaN'"),
        ('"Unknown"', "Undefined schema: Unknown"),
        ("[" * 100_000, "Invalid JSON: nested too deeply"),
        ('{"type":"array","items":' * 3000 + '"int"' + "}" * 3000, "Invalid JSON: nested too deeply"),
        ('{"type":"array","items":' * 201 + '"int"' + "}" * 201, "the schema's JSON is nested deeper than"),
        ('{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":"x"}]}',
         'Invalid default for field a: "x" not a "int"'),
    ],
)  # fmt: skip
def test_refusals_say_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(InvalidSchema) as refused:
        parse(text)
    assert str(refused.value).startswith(words)


NORMALIZE_INPUT = {
    "type": "record",
    "name": "R",
    "namespace": "n",
    "doc": "",
    "zeta": 1,
    "alpha": 2,
    "aliases": ["Z", "A"],
    "fields": [
        {
            "type": "double",
            "name": "d",
            "default": 1,
            "order": "ascending",
            "z": 1,
            "a": 2,
            "aliases": ["y", "x"],
        },
        {"name": "t", "type": {"type": "long", "connect.name": "c", "logicalType": "timestamp-millis"}},
        {"name": "u", "type": ["null", "int"], "default": None},
        {
            "name": "e",
            "type": {"type": "enum", "name": "E", "symbols": ["B", "A"], "doc": "", "y": 1, "x": 2},
        },
    ],
}


def test_normalized_as_confluent_builds_it() -> None:
    """Confluent's AvroSchemaUtils.toNormalizedString, printed by Avro: props and aliases sorted (a valid
    logical type first), an empty doc of a named type dropped, a default as its type holds it."""
    schema = parse(NORMALIZE_INPUT)
    assert schema.canonical() == (
        '{"type":"record","name":"R","namespace":"n","doc":"","fields":['
        '{"name":"d","type":"double","default":1,"aliases":["y","x"],"z":1,"a":2},'
        '{"name":"t","type":{"type":"long","connect.name":"c","logicalType":"timestamp-millis"}},'
        '{"name":"u","type":["null","int"],"default":null},'
        '{"name":"e","type":{"type":"enum","name":"E","doc":"","symbols":["B","A"],"y":1,"x":2}}],'
        '"zeta":1,"alpha":2,"aliases":["Z","A"]}'
    )
    assert schema.normalized() == (
        '{"type":"record","name":"R","namespace":"n","fields":['
        '{"name":"d","type":"double","default":1.0,"aliases":["x","y"],"a":2,"z":1},'
        '{"name":"t","type":{"type":"long","logicalType":"timestamp-millis","connect.name":"c"}},'
        '{"name":"u","type":["null","int"],"default":null},'
        '{"name":"e","type":{"type":"enum","name":"E","symbols":["B","A"],"x":2,"y":1}}],'
        '"alpha":2,"zeta":1,"aliases":["A","Z"]}'
    )
    assert parse(schema.normalized()).normalized() == schema.normalized()


def test_normalized_alike_when_only_order_of_props_differs() -> None:
    reordered = dict(reversed(list(NORMALIZE_INPUT.items())))
    reordered["fields"] = [dict(reversed(list(member.items()))) for member in NORMALIZE_INPUT["fields"]]
    assert parse(reordered).canonical() != parse(NORMALIZE_INPUT).canonical()
    assert parse(reordered).normalized() == parse(NORMALIZE_INPUT).normalized()


def test_normalized_keeps_references_by_name_and_converts_defaults() -> None:
    assert parse(USER, {"address": ADDRESS}).normalized() == parse(USER, {"address": ADDRESS}).canonical()
    floats = {"type": "record", "name": "F", "fields": [
        {"name": "f", "type": "float", "default": 0.1},
        {"name": "g", "type": ["null", "long"], "default": None},
        {"name": "h", "type": ["string", "null"], "default": "x"},
        {"name": "b", "type": "bytes", "default": "\u00ff"},
    ]}  # fmt: skip
    assert parse(floats).normalized() == (
        '{"type":"record","name":"F","fields":[{"name":"f","type":"float","default":0.1},'
        '{"name":"g","type":["null","long"],"default":null},{"name":"h","type":["string","null"],'
        '"default":"x"},{"name":"b","type":"bytes","default":"\u00ff"}]}'
    )
    # a record default naming no field of the record: Avro's conversion fails, so does Confluent's
    bad = {"type": "record", "name": "B", "fields": [
        {"name": "r", "type": {"type": "record", "name": "S", "fields": [
            {"name": "x", "type": "int", "default": 1}]}, "default": {"y": 1}}]}  # fmt: skip
    with pytest.raises(InvalidSchema, match="the default's member y is no field of S"):
        parse(bad).normalized()


def filled(message: str, reader: str = "new", writer: str = "old") -> str:
    """As Java's ``String.format(message, reader, writer)``: a message may have fewer ``%s`` than names."""
    return message.replace("%s", reader, 1).replace("%s", writer, 1)


MESSAGES = [
    (
        {"type": "record", "name": "R", "fields": [{"name": "a", "type": "string"}]},
        {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]},
        "{errorType:'TYPE_MISMATCH', description:'The type (path '/fields/0/type') of a field in the new "
        "schema does not match with the old schema', additionalInfo:'reader type: STRING not compatible with "
        "writer type: INT'}",
    ),
    (
        {"type": "record", "name": "S", "fields": []},
        {"type": "record", "name": "R", "fields": []},
        "{errorType:'NAME_MISMATCH', description:'The name of the schema has changed (path '/name')', "
        "additionalInfo:'expected: R'}",
    ),
    (
        {"type": "fixed", "name": "F", "size": 4},
        {"type": "fixed", "name": "F", "size": 8},
        "{errorType:'FIXED_SIZE_MISMATCH', description:'The size of FIXED type field at path '/size' in the "
        "new schema does not match with the old schema', additionalInfo:'expected: 8, found: 4'}",
    ),
    (
        {"type": "enum", "name": "E", "symbols": ["A"]},
        {"type": "enum", "name": "E", "symbols": ["A", "C", "B"]},
        "{errorType:'MISSING_ENUM_SYMBOLS', description:'The new schema is missing enum symbols '[B, C]' at "
        "path '/symbols' in the old schema', additionalInfo:'[B, C]'}",
    ),
    (
        ["null", "string"],
        ["null", "string", "int"],
        "{errorType:'MISSING_UNION_BRANCH', description:'The new schema is missing a type inside a union "
        "field at path '/2' in the old schema', additionalInfo:'reader union lacking writer type: INT'}",
    ),
]


@pytest.mark.parametrize(("new", "old", "message"), MESSAGES, ids=lambda m: str(m)[:20])
def test_incompatibilities_in_confluents_words(new: Any, old: Any, message: str) -> None:
    """Confluent's words once its registry fills the reader's and writer's names (BACKWARD: new, old)."""
    assert [filled(m) for m in parse(new).backward_incompatibilities(parse(old))] == [message]
    assert parse(new).backward_incompatibilities(parse(new)) == []


def test_the_deepest_schema_taken_is_checked_printed_and_normalized() -> None:
    def nested(depth: int, leaf: str) -> str:
        return '{"type":"array","items":' * depth + f'"{leaf}"' + "}" * depth

    ints, strings = parse(nested(200, "int")), parse(nested(200, "string"))
    (message,) = ints.backward_incompatibilities(strings)
    assert message.startswith("{errorType:'TYPE_MISMATCH'") and "/items" * 200 in message
    assert ints.normalized() == ints.canonical() == nested(200, "int").replace(" ", "")


def test_a_check_avro_cannot_make_is_reported_as_confluent_reports_it() -> None:
    new = parse({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int", "aliases": ["b"]}]})
    old = parse(
        {
            "type": "record",
            "name": "R",
            "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "int"}],
        }
    )
    (message,) = new.backward_incompatibilities(old)
    assert message.startswith(
        "Unexpected exception during compatibility check: Reader record field a type:INT pos:0 matches"
        " multiple"
    )


class _OtherType:
    schema_type = "JSON"


def test_a_schema_of_another_type_is_incompatible() -> None:
    other: Any = _OtherType()
    assert parse('"string"').backward_incompatibilities(other) == [
        "Incompatible because of different schema type"
    ]


RECORD = {
    "type": "record",
    "name": "R",
    "fields": [
        {"name": "i", "type": "int"},
        {"name": "s", "type": "string"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        {"name": "u", "type": ["null", "long", "E"]},
        {"name": "a", "type": {"type": "array", "items": "bytes"}},
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}},
    ],
}
VALUE = {"i": 1, "s": "é", "e": "B", "u": {"E": "A"}, "a": ["\u00ff"], "f": "ab"}


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        (b"", r"the record ends early \(at byte 0, 1 more wanted\)"),
        (bytes.fromhex("02 04c3a9 02 04 02"), r"the record ends early \(at byte 7, 1 more wanted\)"),
        (bytes.fromhex("02 04c3a9 02 06 00 00 6162"), "union index 3 of 3 branches"),
        (bytes.fromhex("02 04c3a9 04 00 00 00 6162"), "enum index 2 of 2 symbols"),
        (bytes.fromhex("02 04c3a9 01 00 00 6162"), "enum index -1 of 2 symbols"),  # fastavro: symbols[-1]
        (bytes.fromhex("02 04c3ff 02 00 00 6162"), "a string that is not UTF-8"),
        (
            bytes.fromhex("02 04c3a9 02 00 7f 6162"),
            "a block of 64 values in 1 bytes",
        ),  # -64: a count, then its size
        (bytes.fromhex("02 04c3a9 02 00 00 6162 00"), "1 bytes after the record's 9"),
    ],
)
def test_payloads_the_schema_does_not_describe_are_refused(payload: bytes, words: str) -> None:
    schema = parse(RECORD)
    assert schema.decode(bytes.fromhex("02 04c3a9 02 00 00 6162")) == {**VALUE, "u": None, "a": []}
    with pytest.raises(InvalidRecord, match=words):
        schema.decode(payload)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({**VALUE, "z": 1}, "no field 'z' in R"),
        ({k: v for k, v in VALUE.items() if k != "i"}, "missing field 'i'"),
        ({**VALUE, "i": 2**31}, r"\$.i: 2147483648 is out of an int's range"),
        ({**VALUE, "i": True}, r"\$.i: bool is not a int"),
        ({**VALUE, "u": 5}, r"\$.u: a union's value is null or"),
        ({**VALUE, "u": {"int": 5}}, r"\$.u: 'int' is not a branch of the union"),
        ({**VALUE, "e": "C"}, r"\$.e: 'C' is not a symbol of E"),
        ({**VALUE, "a": ["\u0100"]}, r"\$.a\[0\]: bytes are characters U\+0000..U\+00FF"),
        ({**VALUE, "f": "abc"}, r"\$.f: 3 bytes for a fixed of 2"),
        ([], r"\$: a record is a JSON object"),
    ],
)
def test_values_the_schema_does_not_describe_are_refused(value: Any, words: str) -> None:
    with pytest.raises(InvalidRecord, match=words):
        parse(RECORD).encode(value)
    assert parse(RECORD).decode(parse(RECORD).encode(VALUE)[1]) == VALUE


def test_values_of_no_bytes_are_bounded_per_record() -> None:
    """An array of nulls takes no bytes per item: a block count alone could make a reader build billions
    of them. Such a schema is read here, counting them (fastavro's reader has no such bound)."""
    schema = parse({"type": "array", "items": "null"})
    huge = bytes.fromhex("80808080808001 00")  # a block of 2**40 nulls
    with pytest.raises(
        InvalidRecord, match=f"more than {avro_datum.ZERO_BYTE_VALUES_MAX} values of no bytes"
    ):
        schema.decode(huge)
    assert schema.decode(schema.encode([None] * 3)[1]) == [None, None, None]
    empty = parse(
        {"type": "map", "values": {"type": "array", "items": {"type": "record", "name": "E", "fields": []}}}
    )
    assert empty.decode(empty.encode({"k": [{}, {}]})[1]) == {"k": [{}, {}]}


FUZZED = [
    RECORD,
    {"type": "record", "name": "N", "fields": [
        {"name": "v", "type": ["null", "int", "string", {"type": "map", "values": "double"}]},
        {"name": "next", "type": ["null", "N"]}, {"name": "fl", "type": "float"},
        {"name": "b", "type": "boolean"}]},
]  # fmt: skip


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        (
            bytes.fromhex("03 00 0000803f 01"),
            "union index -2 of 4 branches",
        ),  # fastavro reads it as types[-2]
        (bytes.fromhex("00 00 0000803f 02"), "a boolean of byte 2"),
        (bytes.fromhex("00 00 0000803f 01"), ""),
    ],
)
def test_indexes_and_booleans_out_of_range_are_refused(payload: bytes, words: str) -> None:
    schema = parse(FUZZED[1])
    if not words:
        assert schema.decode(payload) == {"v": None, "next": None, "fl": 1.0, "b": True}
        return
    with pytest.raises(InvalidRecord, match=words):
        schema.decode(payload)


@pytest.mark.parametrize("schema_json", FUZZED, ids=["record", "recursive"])
@settings(max_examples=300, deadline=None)
@given(payload=st.binary(max_size=40))
def test_a_payload_read_is_the_value_it_encodes(schema_json: dict[str, Any], payload: bytes) -> None:
    """Any payload is refused or read as a value that encodes to a payload read as the same value."""
    schema = parse(schema_json)
    try:
        value = schema.decode(payload)
    except InvalidRecord:
        return
    assert schema.decode(schema.encode(value)[1]) == value


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(value=json_values)
def test_any_json_value_is_encoded_and_read_back_or_refused(value: Any) -> None:
    schema = parse(FUZZED[1])
    record = {"v": value, "next": None, "fl": 1.5, "b": True}
    try:
        _, payload = schema.encode(record)
    except InvalidRecord:
        return
    assert schema.decode(payload) == record


def test_records_of_confluent_kafkas_avro_serializer_and_for_its_deserializer() -> None:
    """confluent-kafka's AvroSerializer (fastavro) frames a record (magic byte, schema id, Avro binary);
    this type reads the binary into REST Proxy's JSON, and the records it writes are read by
    AvroDeserializer. A value the schema refuses is refused by both."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError

    schema_text = json.dumps({
        "type": "record", "name": "Order", "namespace": "shop", "fields": [
            {"name": "id", "type": "long"}, {"name": "amount", "type": "double"},
            {"name": "note", "type": ["null", "string"], "default": None},
            {"name": "currency", "type": {"type": "enum", "name": "Currency", "symbols": ["EUR", "USD"]}},
            {"name": "blob", "type": "bytes"}, {"name": "tags", "type": {"type": "map", "values": "string"}},
            {"name": "items", "type": {"type": "array", "items": {"type": "record", "name": "Item",
                "fields": [{"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
        ],
    })  # fmt: skip
    client = SchemaRegistryClient.new_client({"url": "mock://"})  # confluent-kafka's own in-memory registry
    context = SerializationContext("orders", MessageField.VALUE)
    serializer = AvroSerializer(client, schema_text, conf={"auto.register.schemas": True})
    order = {
        "id": 7, "amount": 9.5, "note": "gift", "currency": "USD", "blob": b"\x00\xff",
        "tags": {"channel": "web"}, "items": [{"sku": "A-1", "qty": 2}],
    }  # fmt: skip
    framed = serializer(order, context)
    assert framed is not None and framed[0] == 0
    schema = parse(client.get_schema(int.from_bytes(framed[1:5], "big")).schema_str)
    as_json = {**order, "note": {"string": "gift"}, "blob": "\u0000\u00ff"}
    assert schema.decode(framed[5:]) == as_json

    _, payload = schema.encode({**as_json, "note": None, "items": []})
    deserializer = AvroDeserializer(client)
    assert deserializer(framed[:5] + payload, context) == {**order, "note": None, "items": []}

    with pytest.raises((SerializationError, ValueError)):  # fastavro's ValueError comes through as is
        serializer({**order, "currency": "GBP"}, context)
    with pytest.raises(InvalidRecord, match=r"'GBP' is not a symbol of shop\.Currency"):
        schema.encode({**as_json, "currency": "GBP"})


def test_values_nested_too_deeply_are_refused_not_a_crash() -> None:
    """A recursive type's payload or value nested deeper than Python's stack is an invalid record."""
    schema = parse(
        {
            "type": "record",
            "name": "L",
            "fields": [{"name": "v", "type": "int"}, {"name": "n", "type": ["null", "L"]}],
        }
    )
    assert schema.decode(bytes.fromhex("00 02 02 00")) == {"v": 0, "n": {"L": {"v": 1, "n": None}}}
    with pytest.raises(InvalidRecord, match="a record nested too deeply"):
        schema.decode(bytes.fromhex("0002") * 100_000 + bytes.fromhex("0000"))
    value: Any = None
    for _ in range(100_000):
        value = {"L": {"v": 0, "n": value}}
    with pytest.raises(InvalidRecord, match="a value nested too deeply"):
        schema.encode(value["L"])


def test_numbers_as_avros_json_decoder_reads_them() -> None:
    assert parse('"float"').decode(parse('"float"').encode(1e300)[1]) == "Infinity"
    assert parse('"double"').decode(parse('"double"').encode("-Infinity")[1]) == "-Infinity"
    with pytest.raises(InvalidRecord, match=r"\$: 1000000000\d+ is out of a double's range"):
        parse('"double"').encode(10**400)
