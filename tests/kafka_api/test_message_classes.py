"""The message classes built from Apache Kafka's schemas (``kafka_api/message_classes.py``) against kio's
generator: every class kio 0.6.5 ships for a version Kafka 4.4 still serves, built again from Kafka 4.4's
own schema file, must be the class kio generated (names, types and nesting, defaults, tags and metadata,
the class variables its reader and our writer look for), but where Kafka changed the schema since kio's
release (``CHANGED``, each said). The schema files the door builds from are Kafka 4.4.0's, byte for byte.
(The built classes on the wire, with Kafka's own clients: test_newest_versions.py, test_streams_group_door.py,
test_delete_groups.py, test_exactly_once.py.)"""

from __future__ import annotations

import dataclasses
import importlib
import json
import pkgutil
import types
import typing
import zipfile
from collections.abc import Iterator, Mapping
from typing import Any

import kio.schema
import pytest

from kafka_api import message_classes, wire
from kafka_api.message_classes import SchemaUnsupported, build, snake_case
from raftlog_bench.kafka_peer import KAFKA_VERSION, kafka_libs

PREFIX = "common/message/"
# (message, version) -> what Kafka changed in its schema after the one kio 0.6.5 was generated from
CHANGED = {
    ("TxnOffsetCommitRequest", 3): "GenerationId renamed GenerationIdOrMemberEpoch (the wire is the same)",
    ("TxnOffsetCommitRequest", 4): "GenerationId renamed GenerationIdOrMemberEpoch (the wire is the same)",
    ("TxnOffsetCommitRequest", 5): "GenerationId renamed GenerationIdOrMemberEpoch (the wire is the same)",
    ("StreamsGroupHeartbeatRequest", 0): "UserEndpoint's Endpoint became a common struct (kio reads no "
    "default of one)",
    ("StreamsGroupHeartbeatResponse", 0): "AcceptableRecoveryLag renamed AcceptableRecoveryLagLegacy",
    ("StreamsGroupDescribeResponse", 0): "the member's UserEndpoint became a common struct (no default read)",
}


@pytest.fixture(scope="module")
def kafka_schemas() -> Mapping[str, bytes]:
    """Kafka's message schema files from its client jar (``make test`` installs Kafka's libraries)."""
    jar = kafka_libs() / f"kafka-clients-{KAFKA_VERSION}.jar"
    with zipfile.ZipFile(jar) as archive:
        return {
            name.removeprefix(PREFIX): archive.read(name)
            for name in archive.namelist()
            if name.startswith(PREFIX) and name.endswith(".json")
        }


def _parsed(text: bytes) -> Mapping[str, Any]:
    lines = text.decode().splitlines(True)
    parsed: Mapping[str, Any] = json.loads(
        "".join(line for line in lines if not line.lstrip().startswith("//"))
    )
    return parsed


def _shape(cls: type, seen: set[type]) -> Any:
    """A class as values to compare: its name, class variables and fields, nested classes by their shape."""
    if cls in seen:
        return ("again", cls.__name__)
    seen.add(cls)
    names = ("__type__", "__version__", "__flexible__", "__api_key__", "__header_schema__")
    fields = []
    for field in dataclasses.fields(cls):
        default = field.default
        if dataclasses.is_dataclass(default):
            default = (_shape(type(default), seen), repr(default))
        fields.append((field.name, _hint(field.type, seen), dict(field.metadata), default, field.kw_only))
    return cls.__name__, tuple((name, getattr(cls, name, None)) for name in names), tuple(fields)


def _hint(hint: Any, seen: set[type]) -> Any:
    if dataclasses.is_dataclass(hint):
        return _shape(hint, seen)  # type: ignore[arg-type]
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        return ("union", *sorted((_hint(arg, seen) for arg in typing.get_args(hint)), key=repr))
    if origin is tuple:
        return ("tuple", *(arg if arg is Ellipsis else _hint(arg, seen) for arg in typing.get_args(hint)))
    return hint


def _kio_modules() -> set[str]:
    """Every request and response module kio ships (``kio.schema.<api>.v<N>.request``)."""
    found = set()
    for api in pkgutil.iter_modules(kio.schema.__path__):
        for version in pkgutil.iter_modules([f"{kio.schema.__path__[0]}/{api.name}"]):
            for part in pkgutil.iter_modules([f"{kio.schema.__path__[0]}/{api.name}/{version.name}"]):
                if part.name in ("request", "response"):
                    found.add(f"kio.schema.{api.name}.{version.name}.{part.name}")
    return found


KIO_MODULES = _kio_modules()


def _kio_classes(schemas: Mapping[str, bytes]) -> Iterator[tuple[str, int, Mapping[str, Any], type]]:
    """(message, version, Kafka's schema, kio's class) for every version of Kafka's kio has a class of."""
    for name, text in sorted(schemas.items()):
        document = _parsed(text)
        if document["type"] not in ("request", "response"):
            continue
        package = snake_case(document["name"]).removesuffix("_response").removesuffix("_request")
        for version in message_classes.versions(document["validVersions"]):
            module = f"kio.schema.{package}.v{version}.{document['type']}"
            if module in KIO_MODULES:  # else a version newer than kio
                yield (
                    name.removesuffix(".json"),
                    version,
                    document,
                    importlib.import_module(module).__dict__[document["name"]],
                )


def test_every_class_kio_generated_is_built_alike_from_kafkas_own_schema(
    kafka_schemas: Mapping[str, bytes],
) -> None:
    changed, compared = {}, set()
    for name, version, document, kio_class in _kio_classes(kafka_schemas):
        compared.add(kio_class.__module__)
        built, _ = build(document, version)
        if _shape(built, set()) != _shape(kio_class, set()):
            changed[name, version] = (_shape(built, set()), _shape(kio_class, set()))
    assert set(changed) == set(CHANGED), {key: changed.get(key) for key in set(changed) ^ set(CHANGED)}
    # every request and response class kio ships was compared (kio 0.6.5: 604, each of a version Kafka 4.4
    # serves), and all but the six of CHANGED are alike
    assert compared == KIO_MODULES, sorted(KIO_MODULES - compared)[:20]


def test_the_door_builds_from_kafkas_own_schema_files_byte_for_byte(
    kafka_schemas: Mapping[str, bytes],
) -> None:
    ours = sorted(message_classes.SCHEMAS.glob("*.json"))
    needed = {f"{name}{part}.json" for name in wire._EXTRA.values() for part in ("Request", "Response")}
    assert {path.name for path in ours} == needed
    for path in ours:
        assert path.read_bytes() == kafka_schemas[path.name], (
            f"{path} is not kafka-clients {KAFKA_VERSION}'s: copy {PREFIX}{path.name} from its jar"
        )


@pytest.mark.parametrize(("api_key", "version"), sorted(wire._EXTRA))
def test_each_version_kio_lacks_is_a_class_of_that_api_and_version(api_key: int, version: int) -> None:
    for cls, kind in (
        (wire.request_class(api_key, version), "request"),
        (wire.response_class(api_key, version), "response"),
    ):
        assert (cls.__api_key__, cls.__version__, cls.__type__.name) == (api_key, version, kind)
        assert cls is (wire.request_class if kind == "request" else wire.response_class)(api_key, version)
        parts = _parts(cls)
        assert all(wire.sibling(cls, part.__name__) is part for part in parts), parts  # as kio's modules


def _parts(cls: type) -> set[type]:
    """The nested classes a message class reaches through its fields."""
    found: set[type] = set()
    todo = [cls]
    while todo:
        for field in dataclasses.fields(todo.pop()):
            for hint in (field.type, *typing.get_args(field.type), *_inner(field.type)):
                if dataclasses.is_dataclass(hint) and hint not in found:
                    found.add(hint)  # type: ignore[arg-type]
                    todo.append(hint)  # type: ignore[arg-type]
    return found


def _inner(hint: Any) -> tuple[Any, ...]:
    return tuple(inner for arg in typing.get_args(hint) for inner in typing.get_args(arg))


def test_what_kios_generator_has_no_rule_for_is_refused_by_name() -> None:
    base = {
        "apiKey": 1000,
        "type": "request",
        "name": "SomeRequest",
        "validVersions": "0-1",
        "flexibleVersions": "1+",
    }
    with pytest.raises(SchemaUnsupported, match="has no version 2"):
        build({**base, "fields": []}, 2)
    unknown_time = {"name": "LingerMs", "type": "int32", "versions": "0+"}
    with pytest.raises(SchemaUnsupported, match="LingerMs looks like a time field"):
        build({**base, "fields": [unknown_time]}, 0)
    null_default = {"name": "Count", "type": "int32", "versions": "0+", "default": "null"}
    with pytest.raises(SchemaUnsupported, match="defaults to null"):
        build({**base, "fields": [null_default]}, 0)
    missing_struct = {"name": "Thing", "type": "Thing", "versions": "0+"}
    with pytest.raises(SchemaUnsupported, match="no struct 'Thing'"):
        build({**base, "fields": [missing_struct]}, 0)


@pytest.mark.parametrize(
    ("name", "snake"),
    [("ISRReplicas", "isr_replicas"), ("ISR", "isr"), ("InSyncReplicas", "in_sync_replicas"),
     ("WhatIsQ", "what_is_q"), ("V3AndBelow", "v3_and_below"), ("Type", "type_"), ("TopicId", "topic_id")],
)  # fmt: skip
def test_field_names_are_kios_snake_case(name: str, snake: str) -> None:
    assert snake_case(name) == snake
