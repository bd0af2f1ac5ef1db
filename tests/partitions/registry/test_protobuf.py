"""PROTOBUF, the schema type (partitions/registry/protobuf.py), judged by Confluent's own examples and by
the schemas confluent-kafka's ProtobufSerializer registers.

- Confluent's compatibility examples (confluent_protobuf/diff-schema-examples*.json, which Confluent's
  SchemaDiffTest runs): every difference at its path, and the verdict.
- Confluent's printing examples (confluent_protobuf/canonical-examples.json, from Confluent's
  ProtobufSchemaTest): the canonical and normalized text, where protoc accepts the schema.
- confluent-kafka's ProtobufSerializer: the base64 FileDescriptorProto it registers (with a reference)
  parses, a record it wrote decodes as REST Proxy prints it, and a record encoded here is read by its
  ProtobufDeserializer.
"""

from __future__ import annotations

import base64
import importlib
import json
import pathlib
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, json_format
from hypothesis import given, settings
from hypothesis import strategies as st

from partitions.registry.protobuf import PROTOBUF_TYPE, ProtobufSchema
from partitions.registry.schema_types import InvalidRecord, InvalidSchema

CORPUS = pathlib.Path(__file__).parent / "confluent_protobuf"


def _diff_examples() -> list[Any]:
    examples = []
    for name in ("diff-schema-examples.json", "diff-schema-examples-with-meta.json"):
        examples += [pytest.param(e, id=e["description"]) for e in json.loads((CORPUS / name).read_text())]
    return examples


def _schema_text(text: str) -> str:
    # an example names a resource file instead of giving the text (Confluent's getSchema does the same)
    return (CORPUS / pathlib.Path(text).name).read_text() if text.endswith(".proto") else text


def _dependencies(example: dict[str, Any], side: str) -> dict[str, str]:
    # a dependency without text is one of Google's or Confluent's files, which the registry knows
    return {d["name"]: d["dependency"] for d in example.get(f"{side}_dependencies", []) if "dependency" in d}


@pytest.mark.parametrize("example", _diff_examples())
def test_confluent_compatibility_examples(example: dict[str, Any]) -> None:
    from partitions.registry.protobuf_diff import COMPATIBLE_CHANGES, compare

    original = PROTOBUF_TYPE.parse(
        _schema_text(example["original_schema"]), _dependencies(example, "original")
    )
    update = PROTOBUF_TYPE.parse(_schema_text(example["update_schema"]), _dependencies(example, "update"))
    differences = compare(original.element, update.element, original.names, update.names)
    # in Confluent's order too: its registry answers the incompatible ones in this order
    assert [f"{d.type} {d.path}" for d in differences] == example["changes"]
    incompatible = [d.message() for d in differences if d.type not in COMPATIBLE_CHANGES]
    assert (not incompatible) == example["compatible"]
    assert update.backward_incompatibilities(original) == incompatible


def test_incompatibility_is_worded_as_confluent_words_it() -> None:
    original = PROTOBUF_TYPE.parse('syntax = "proto3";\nmessage M {\n  int32 a = 1;\n}\n', {})
    update = PROTOBUF_TYPE.parse('syntax = "proto3";\nmessage M {\n  string a = 1;\n}\n', {})
    assert update.backward_incompatibilities(original) == [
        '{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at path '
        "'#/M/1' in the %s schema does not match its kind in the %s schema\"}"
    ]
    assert original.backward_incompatibilities(original) == []


def _printing_examples() -> Iterator[Any]:
    for example in json.loads((CORPUS / "canonical-examples.json").read_text()):
        if not example.get("protoc_rejects"):
            for form in ("canonical", "normalized"):
                if example[form] is not None:
                    yield pytest.param(example, form, id=f"{example['test']}-{form}")


@pytest.mark.parametrize(("example", "form"), list(_printing_examples()))
def test_confluent_printing_examples(example: dict[str, Any], form: str) -> None:
    schema = PROTOBUF_TYPE.parse(example["schema"], {})
    assert (schema.canonical() if form == "canonical" else schema.normalized()) == example[form]


def test_what_protoc_rejects_is_an_invalid_schema_though_confluents_parser_takes_it() -> None:
    rejected = [
        e for e in json.loads((CORPUS / "canonical-examples.json").read_text()) if e.get("protoc_rejects")
    ]
    assert rejected
    for example in rejected:
        with pytest.raises(InvalidSchema, match=example["protoc_rejects"]):
            PROTOBUF_TYPE.parse(example["schema"], {})


def _googles_files() -> list[Any]:
    from importlib import resources

    well_known = resources.files("grpc_tools") / "_proto" / "google" / "protobuf"
    common = resources.files("google.type")
    found = [f for root in (well_known, well_known / "compiler", common) for f in root.iterdir()]
    return [
        pytest.param(f.read_text(), id=f.name) for f in sorted(found, key=str) if f.name.endswith(".proto")
    ]


@pytest.mark.parametrize("text", _googles_files())
def test_googles_own_files_print_to_a_fixed_point_and_their_descriptors_normalize_alike(text: str) -> None:
    """Google's .proto files (options, extensions, reserved names, maps, oneofs, nested types): the
    canonical text parses back to itself, as Confluent's does, and the file given as text and as its
    base64 descriptor (a serializer's way) normalize to the same text, as Confluent's do."""
    schema = PROTOBUF_TYPE.parse(text, {})
    canonical = schema.canonical()
    assert PROTOBUF_TYPE.parse(canonical, {}).canonical() == canonical
    assert PROTOBUF_TYPE.parse(schema.serialized(), {}).normalized() == schema.normalized()


def test_invalid_text_is_refused_with_protocs_words_line_and_column() -> None:
    text = 'syntax = "proto3";\npackage shop;\n\nmessage Order {\n  Missing item = 1;\n}\n'
    with pytest.raises(InvalidSchema, match=r'^schema\.proto:5:3: "Missing" is not defined\.$'):
        PROTOBUF_TYPE.parse(text, {})
    with pytest.raises(InvalidSchema, match=r"schema\.proto:1:1: Expected top-level statement"):
        PROTOBUF_TYPE.parse("not a schema", {})
    with pytest.raises(InvalidSchema, match=r'schema\.proto:2:1: Import "shop/missing\.proto" was not found'):
        PROTOBUF_TYPE.parse('syntax = "proto3";\nimport "shop/missing.proto";\n', {})


def test_a_descriptor_nests_no_deeper_than_a_text_may_and_a_refusal_shows_the_first_errors() -> None:
    text = 'syntax = "proto3";\n' + "".join(f"message M{i} {{\n" for i in range(40)) + "}\n" * 40
    with pytest.raises(
        InvalidSchema, match=r"schema\.proto:33:1: Reached maximum recursion limit for nested messages"
    ):
        PROTOBUF_TYPE.parse(text, {})
    deep = descriptor_pb2.FileDescriptorProto(name="deep.proto", syntax="proto3")
    message = deep.message_type.add(name="M0")
    for index in range(1, 40):
        message = message.nested_type.add(name=f"M{index}")
    encoded = base64.b64encode(deep.SerializeToString()).decode()
    with pytest.raises(InvalidSchema, match=r"deep\.proto: message M32 is nested deeper than 32 levels"):
        PROTOBUF_TYPE.parse(encoded, {})
    many = (
        'syntax = "proto3";\nmessage A {\n'
        + "".join(f"  Missing{i} f{i} = {i};\n" for i in range(1, 20))
        + "}\n"
    )
    with pytest.raises(InvalidSchema) as refused:
        PROTOBUF_TYPE.parse(many, {})
    assert str(refused.value).count("is not defined") == 5 and str(refused.value).endswith(
        "and 14 more errors"
    )


def test_a_descriptors_import_that_no_reference_names_is_refused_naming_it() -> None:
    file = descriptor_pb2.FileDescriptorProto(
        name="order.proto", syntax="proto3", dependency=["shop/money.proto"]
    )
    encoded = base64.b64encode(file.SerializeToString()).decode()
    with pytest.raises(
        InvalidSchema, match=r'^The imports of order\.proto do not resolve: .*"shop/money\.proto"'
    ):
        PROTOBUF_TYPE.parse(encoded, {})


def test_editions_are_refused_as_confluents_registry_knows_only_proto2_and_proto3() -> None:
    with pytest.raises(InvalidSchema, match="Protobuf editions are not supported"):
        PROTOBUF_TYPE.parse('edition = "2023";\nmessage A {\n  int32 a = 1;\n}\n', {})


def test_a_text_without_syntax_is_proto2_and_protoc_writes_nothing_to_the_nodes_stderr(
    capfd: pytest.CaptureFixture[str],
) -> None:
    schema = PROTOBUF_TYPE.parse("message A {\n  optional int32 a = 1;\n}\n", {})
    assert schema.canonical() == "\nmessage A {\n  optional int32 a = 1;\n}\n"  # no syntax line, as written
    with pytest.raises(
        InvalidSchema, match=r'^schema\.proto:1:13: Expected "required", "optional", or "repeated"\.'
    ):
        PROTOBUF_TYPE.parse("message A { int32 a = 1; }", {})
    assert capfd.readouterr().err == ""


def test_well_known_and_confluent_types_resolve_without_a_reference() -> None:
    text = (
        'syntax = "proto3";\nimport "google/protobuf/timestamp.proto";\nimport "confluent/meta.proto";\n'
        'import "confluent/type/decimal.proto";\nimport "google/type/date.proto";\n\nmessage Payment {\n'
        "  google.protobuf.Timestamp at = 1;\n"
        "  google.type.Date due = 3;\n"
        "  confluent.type.Decimal amount = 2\n"
        '    [(confluent.field_meta) = { params: [{ key: "precision", value: "8" }] }];\n'
        "}\n"
    )
    schema = PROTOBUF_TYPE.parse(text, {})
    value = {
        "at": "2026-11-28T17:00:00Z",
        "amount": {"value": "AQI=", "precision": 8, "scale": 0},
        "due": {"year": 2026, "month": 12, "day": 1},
    }
    indexes, payload = schema.encode(value)
    assert indexes == ()
    assert schema.decode(payload) == value


def test_imports_resolve_transitively_from_the_references() -> None:
    resolved = {
        "shop/money.proto": 'syntax = "proto3";\npackage shop;\nmessage Money {\n  int64 cents = 1;\n}\n',
        "shop/line.proto": 'syntax = "proto3";\npackage shop;\nimport "shop/money.proto";\n'
        "message Line {\n  string sku = 1;\n  Money price = 2;\n}\n",
    }
    text = (
        'syntax = "proto3";\npackage shop;\nimport "shop/line.proto";\n'
        "message Order {\n  repeated Line lines = 1;\n}\n"
    )
    schema = PROTOBUF_TYPE.parse(text, resolved)
    assert schema.canonical() == (
        'syntax = "proto3";\npackage shop;\n\nimport "shop/line.proto";\n\n'
        "message Order {\n  repeated Line lines = 1;\n}\n"
    )
    assert schema.normalized().endswith("message Order {\n  repeated .shop.Line lines = 1;\n}\n")
    value = {"lines": [{"sku": "A-1", "price": {"cents": "250"}}]}
    assert schema.decode(schema.encode(value)[1]) == value


def test_the_formats_confluent_answers() -> None:
    text = (
        'syntax = "proto3";\nimport "google/protobuf/descriptor.proto";\nimport "confluent/meta.proto";\n\n'
        "extend google.protobuf.FieldOptions {\n  string unit = 50000;\n}\n\n"
        "message Reading {\n"
        '  double value = 1 [(unit) = "kPa", (confluent.field_meta).doc = "pressure"];\n'
        "}\n"
    )
    schema = PROTOBUF_TYPE.parse(text, {})
    assert schema.formatted("") == schema.formatted("default") == schema.canonical()
    assert '(unit) = "kPa"' in schema.canonical()
    assert schema.formatted("IGNORE_EXTENSIONS") == (
        'syntax = "proto3";\n\nimport "google/protobuf/descriptor.proto";\nimport "confluent/meta.proto";\n\n'
        'message Reading {\n  double value = 1 [(confluent.field_meta).doc = "pressure"];\n}\n'
    )
    served = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.formatted("serialized")))
    assert served == schema.file and served.message_type[0].name == "Reading"


def test_an_any_holds_a_message_of_the_schema() -> None:
    text = (
        'syntax = "proto3";\npackage ev;\nimport "google/protobuf/any.proto";\n'
        "message Envelope {\n  google.protobuf.Any body = 1;\n}\nmessage Click {\n  string button = 1;\n}\n"
    )
    schema = PROTOBUF_TYPE.parse(text, {})
    value = {"body": {"@type": "type.googleapis.com/ev.Click", "button": "buy"}}
    assert schema.decode(schema.encode(value)[1]) == value
    with pytest.raises(InvalidRecord):
        schema.encode({"body": {"@type": "type.googleapis.com/ev.Unknown"}})


def test_a_texts_groups_print_as_wire_keeps_them_and_a_descriptors_as_confluent_converts_them() -> None:
    text = (
        'syntax = "proto2";\nmessage Response {\n'
        "  repeated group Result = 1 {\n    required string url = 1;\n  }\n"
        "  optional int32 total = 2;\n  oneof pick {\n    string name = 3;\n"
        "    group Choice = 4 {\n      optional int32 n = 1;\n    }\n  }\n}\n"
    )
    schema = PROTOBUF_TYPE.parse(text, {})
    assert schema.canonical() == (
        'syntax = "proto2";\n\nmessage Response {\n  optional int32 total = 2;\n\n'
        "  oneof pick {\n    string name = 3;\n  \n"
        "    group Choice = 4 {\n      optional int32 n = 1;\n    }\n  }\n\n"
        "  repeated group Result = 1 {\n    required string url = 1;\n  }\n}\n"
    )
    assert PROTOBUF_TYPE.parse(schema.canonical(), {}).canonical() == schema.canonical()
    assert schema.decode(schema.encode({"result": [{"url": "u"}], "total": 2})[1]) == {
        "result": [{"url": "u"}],
        "total": 2,
    }
    # given as a descriptor, a group is its message and a field of it (Confluent's toProtoFile skips groups)
    assert (
        "  repeated .Response.Result result = 1;\n"
        in PROTOBUF_TYPE.parse(schema.serialized(), {}).canonical()
    )
    # and Confluent's diff, which compares fields and oneofs, does not see a text's groups
    fewer = PROTOBUF_TYPE.parse(text.replace("    required string url = 1;\n", ""), {})
    assert fewer.backward_incompatibilities(schema) == []


def test_an_import_may_have_the_name_the_schema_compiles_under() -> None:
    resolved = {"schema.proto": 'syntax = "proto3";\nmessage Base {\n  int32 id = 1;\n}\n'}
    schema = PROTOBUF_TYPE.parse(
        'syntax = "proto3";\nimport "schema.proto";\nmessage Top {\n  Base base = 1;\n}\n', resolved
    )
    assert schema.decode(schema.encode({"base": {"id": 7}})[1]) == {"base": {"id": 7}}


def test_records_decode_at_their_message_indexes_and_bad_ones_are_invalid_records() -> None:
    text = (
        'syntax = "proto3";\nmessage First {\n  string a = 1;\n}\n'
        "message Second {\n  int32 b = 1;\n  message Inner {\n    bool c = 1;\n  }\n}\n"
    )
    schema = PROTOBUF_TYPE.parse(text, {})
    inner = schema.message_class([1, 0])(c=True).SerializeToString()
    assert schema.decode(inner, [1, 0]) == {"c": True}
    assert schema.decode(b"", [1]) == {"b": 0}  # defaults are printed, as REST Proxy prints them
    with pytest.raises(InvalidRecord):
        schema.decode(b"\xff\xff\xff", [1])
    with pytest.raises(InvalidRecord):
        schema.decode(b"", [2])
    with pytest.raises(InvalidRecord, match="Value is not a First message"):
        schema.encode({"a": 1, "unknown": 2})
    with pytest.raises(InvalidRecord, match="a JSON object is, not list"):
        schema.encode(["a"])


# --- confluent-kafka's ProtobufSerializer -----------------------------------------------------------

SHOP_COMMON = """syntax = "proto3";
package raftlog.test.shop;

message Money {
  string currency = 1;
  int64 units = 2;
}
"""

SHOP_ORDER = """syntax = "proto3";
package raftlog.test.shop;

import "google/protobuf/timestamp.proto";
import "raftlog_test_shop/common.proto";

message Order {
  string id = 1;
  repeated Line lines = 2;
  map<string, string> labels = 3;
  google.protobuf.Timestamp placed_at = 4;
  Status status = 5;
  oneof payment {
    string card = 6;
    Money voucher = 7;
  }
  optional int32 priority = 8;

  message Line {
    string sku = 1;
    uint32 quantity = 2;
    Money price = 3;
  }
  enum Status {
    NEW = 0;
    PAID = 1;
  }
}
"""


@pytest.fixture(scope="module")
def order_class(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The message class protoc generates for SHOP_ORDER, as a user's ``_pb2`` module holds it."""
    from grpc_tools import protoc

    root = tmp_path_factory.mktemp("shop")
    (root / "raftlog_test_shop").mkdir()
    (root / "raftlog_test_shop" / "common.proto").write_text(SHOP_COMMON)
    (root / "raftlog_test_shop" / "order.proto").write_text(SHOP_ORDER)
    well_known = str(pathlib.Path(protoc.__file__).parent / "_proto")
    files = ["raftlog_test_shop/common.proto", "raftlog_test_shop/order.proto"]
    assert protoc.main(["protoc", f"-I{root}", f"-I{well_known}", f"--python_out={root}", *files]) == 0
    sys.path.insert(0, str(root))
    try:
        return importlib.import_module("raftlog_test_shop.order_pb2").Order
    finally:
        sys.path.remove(str(root))


def _message_indexes(framed: bytes) -> tuple[list[int], bytes]:
    """Confluent's wire header (magic byte, schema id), then the zigzag varint message indexes."""
    assert framed[0] == 0
    at = 5

    def varint() -> int:
        nonlocal at
        shift = result = 0
        while True:
            byte = framed[at]
            at += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)

    count = varint()
    return [varint() for _ in range(count)], framed[at:]


def test_the_schema_confluent_kafkas_serializer_registers(order_class: Any) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    registry = SchemaRegistryClient.new_client({"url": "mock://raftlog-protobuf-test"})  # in memory
    serializer = ProtobufSerializer(order_class, registry, {"use.deprecated.format": False})
    context = SerializationContext("orders", MessageField.VALUE)
    order = order_class(id="o-1", status=1, card="4111", priority=3)
    line = order.lines.add(sku="A-1", quantity=2)
    line.price.currency, line.price.units = "EUR", 5
    order.labels["channel"] = "web"
    order.placed_at.seconds = 1_795_000_000
    framed = serializer(order, context)

    registered = registry.get_latest_version("orders-value").schema
    assert registered.schema_type == "PROTOBUF"
    resolved = {
        reference.name: registry.get_version(reference.subject, reference.version).schema.schema_str
        for reference in registered.references
    }
    # what the serializer sends is a base64 FileDescriptorProto, its import registered the same way
    assert list(resolved) == ["raftlog_test_shop/common.proto"]
    sent = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(registered.schema_str))
    assert sent.name == "raftlog_test_shop/order.proto"

    schema = PROTOBUF_TYPE.parse(registered.schema_str, resolved)
    assert isinstance(schema, ProtobufSchema)
    assert descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.serialized())) == sent
    canonical = schema.canonical()
    assert canonical.startswith('syntax = "proto3";\npackage raftlog.test.shop;\n\n')
    assert "  repeated .raftlog.test.shop.Order.Line lines = 2;\n" in canonical
    # the canonical text is itself a schema that prints the same (Confluent's text is a fixed point)
    imports = {name: PROTOBUF_TYPE.parse(text, {}).canonical() for name, text in resolved.items()}
    assert PROTOBUF_TYPE.parse(canonical, imports).canonical() == canonical
    # and its normalized text is that of the .proto file the class was generated from
    assert (
        schema.normalized()
        == PROTOBUF_TYPE.parse(SHOP_ORDER, {"raftlog_test_shop/common.proto": SHOP_COMMON}).normalized()
    )

    indexes, payload = _message_indexes(framed)
    expected = json_format.MessageToDict(order, always_print_fields_with_no_presence=True)
    assert schema.decode(payload, indexes) == expected
    assert expected["lines"][0]["price"] == {"currency": "EUR", "units": "5"}

    # a record encoded here, framed as the registry frames it, is read by confluent-kafka's deserializer
    encoded_indexes, encoded = schema.encode(expected)
    assert encoded_indexes == ()
    schema_id = int.from_bytes(framed[1:5], "big")
    deserializer = ProtobufDeserializer(order_class, {"use.deprecated.format": False}, registry)
    read = deserializer(b"\x00" + schema_id.to_bytes(4, "big") + b"\x00" + encoded, context)
    assert read == order


# --- properties over generated schemas -------------------------------------------------------------

_SCALARS = (
    "double",
    "float",
    "int32",
    "int64",
    "uint32",
    "sint64",
    "fixed32",
    "sfixed64",
    "bool",
    "string",
    "bytes",
)


@st.composite
def _proto3_files(draw: st.DrawFn) -> str:
    """A proto3 file: messages with scalar, repeated, map, enum, nested-message and oneof fields,
    optional ones, reserved numbers, and options, each message's fields on their own numbers."""
    names = draw(
        st.lists(
            st.sampled_from(["Order", "Line", "Money", "Event", "Item"]), min_size=1, max_size=3, unique=True
        )
    )
    lines = ['syntax = "proto3";', f"package {draw(st.sampled_from(['shop', 'a.b.c']))};", ""]
    lines.append("enum Kind {\n  KIND_UNSPECIFIED = 0;\n  KIND_A = 1;\n}")
    for name in names:
        body, number = [], 1
        for _ in range(draw(st.integers(1, 5))):
            shape = draw(
                st.sampled_from(["scalar", "repeated", "map", "enum", "message", "optional", "oneof"])
            )
            scalar = draw(st.sampled_from(_SCALARS))
            other = draw(st.sampled_from(names))
            if shape == "scalar":
                body.append(f"  {scalar} f{number} = {number};")
            elif shape == "repeated":
                body.append(f"  repeated {scalar} f{number} = {number};")
            elif shape == "map":
                body.append(
                    f"  map<string, {draw(st.sampled_from(['int64', 'Kind', other]))}> f{number} = {number};"
                )
            elif shape == "enum":
                body.append(f"  Kind f{number} = {number} [deprecated = true];")
            elif shape == "message":
                body.append(f"  {other} f{number} = {number};")
            elif shape == "optional":
                body.append(f'  optional {scalar} f{number} = {number} [json_name = "j{number}"];')
            else:
                members = f"    {scalar} f{number} = {number};\n    Kind g{number} = {number + 1};"
                body.append(f"  oneof o{number} {{\n{members}\n  }}")
                number += 1
            number += 1
        if draw(st.booleans()):
            body.append(f'  reserved {number + 1} to {number + 3}, {number + 10};\n  reserved "gone";')
        if draw(st.booleans()):
            body.append(f"  message Inner{name} {{\n    string note = 1;\n  }}")
        lines.append(f"message {name} {{\n" + "\n".join(body) + "\n}")
    return "\n".join(lines) + "\n"


@settings(max_examples=40, deadline=None)
@given(_proto3_files())
def test_generated_schemas_print_to_a_fixed_point_and_normalize_alike_as_descriptors(text: str) -> None:
    schema = PROTOBUF_TYPE.parse(text, {})
    canonical = schema.canonical()
    again = PROTOBUF_TYPE.parse(canonical, {})
    assert again.canonical() == canonical
    assert again.normalized() == schema.normalized()
    assert PROTOBUF_TYPE.parse(schema.serialized(), {}).normalized() == schema.normalized()
    assert PROTOBUF_TYPE.parse(schema.normalized(), {}).normalized() == schema.normalized()
    assert schema.backward_incompatibilities(again) == []
    empty = schema.message_class(())()
    assert schema.decode(empty.SerializeToString()) == json_format.MessageToDict(
        empty, always_print_fields_with_no_presence=True
    )
