"""kio-style message classes built from Apache Kafka's own message schemas, for the API versions kio (0.6.5,
the newest on PyPI) has no class of.

``kafka_api/message_schemas/`` holds Kafka 4.4.0's schema files of those APIs as Kafka ships them
(``common/message/*.json`` of kafka-clients, comments and all); ``message_class`` reads one and makes the
frozen dataclasses kio's generator would have written for a version, by its rules (``codegen/parser.py``,
``codegen/generate_schema.py`` of kio's repository): field names in snake case, the ``...Ms`` durations and
times as kio's time types without the suffix, error codes as ``ErrorCode``, entity types as
``kio.schema.types``, defaults and tags as field metadata, the class variables kio's readers and writers
look for. kio's own reader and our writer (``encoding.py``) then treat them as any class of kio's.
``tests/kafka_api/test_message_classes.py`` holds the builder to kio's generator: every class kio ships for
a version that Kafka 4.4 still serves, built again from Kafka 4.4's schema, must come out alike.
"""

from __future__ import annotations

import builtins
import dataclasses
import datetime
import functools
import importlib
import json
import pathlib
import re
import sys
import threading
import types
import uuid
from collections.abc import Mapping
from typing import Any

import kio.schema.types as entity_types
from kio.schema.errors import ErrorCode
from kio.static import primitive as p
from kio.static.constants import EntityType

SCHEMAS = pathlib.Path(__file__).parent / "message_schemas"  # in the Kafka sides' keys: tests/kafka_side.py
_COMMENT = re.compile(r"^\s*//")

# kio's generator's names of duration and time fields (``parser.timedelta_names``, ``datetime_names``),
# with the durations Kafka added after it (kio's generator refuses to guess an unknown "...Ms" field)
DURATIONS = frozenset({
    "timeoutMs", "TimeoutMs", "ThrottleTimeMs", "MaxWaitMs", "SessionLifetimeMs", "TransactionTimeoutMs",
    "MaxLifetimeMs", "SessionTimeoutMs", "RebalanceTimeoutMs", "ExpiryTimePeriodMs", "RenewPeriodMs",
    "RetentionTimeMs", "HeartbeatIntervalMs", "PushIntervalMs", "AcquisitionLockTimeoutMs",
    "TaskOffsetIntervalMs",
})  # fmt: skip
TIMES = frozenset({
    "IssueTimestampMs", "ExpiryTimestampMs", "MaxTimestampMs", "TransactionStartTimeMs", "LogAppendTimeMs",
})  # fmt: skip
ERROR_CODES = frozenset({"ErrorCode", "PartitionErrorCode"})
_NUMBERS: dict[str, Any] = {
    "int8": p.i8, "int16": p.i16, "int32": p.i32, "int64": p.i64,
    "uint16": p.u16, "uint32": p.u32, "uint64": p.u64, "float64": p.f64,
}  # fmt: skip
_OTHERS: dict[str, Any] = {
    "bool": bool, "string": str, "bytes": bytes, "uuid": uuid.UUID, "records": p.Records,
    "error_code": ErrorCode, "timedelta_i32": p.i32Timedelta, "timedelta_i64": p.i64Timedelta,
    "datetime_i64": p.TZAware,
}  # fmt: skip
PRIMITIVES = {**_NUMBERS, **_OTHERS}


class SchemaUnsupported(ValueError):
    """A schema holds something kio's generator has no rule for (it refuses the same)."""


def snake_case(name: str) -> str:
    """kio's ``to_snake_case``, step for step: ``ISRReplicas`` -> ``isr_replicas``, ``V3AndBelow`` ->
    ``v3_and_below``, a builtin's name with a trailing underscore (``Type`` -> ``type_``)."""
    groups, current = [], name[0]
    for offset in range(1, len(name)):
        previous, char = current[-1], name[offset]
        after = name[offset + 1] if offset + 1 < len(name) else None
        if after is None:
            splits = previous.islower() and char.isupper()
        else:
            splits = (
                (previous.isupper() and char.isupper() and after.islower())
                or (previous.islower() and char.isupper())
                or (previous.isdigit() and char.isupper() and after.islower())
            )
        if splits:
            groups.append(current)
            current = char
        else:
            current += char
    lower = "_".join([*groups, current]).lower()
    return lower + "_" if lower in _BUILTINS else lower


_BUILTINS = frozenset(dir(builtins))


def versions(text: str | None) -> range:
    """A schema's version range (``"none"``, ``"3"``, ``"1-4"``, ``"2+"``) as a range; ``None``: none."""
    if text is None or text == "none":
        return range(0)
    if text.endswith("+"):
        return range(int(text[:-1]), 1 << 15)
    low, _, high = text.partition("-")
    return range(int(low), int(high or low) + 1)


@functools.cache
def schema(name: str) -> Mapping[str, Any]:
    """Kafka's schema file ``name`` (``"TxnOffsetCommitRequest"``), its comment lines dropped."""
    text = (SCHEMAS / f"{name}.json").read_text()
    parsed: Mapping[str, Any] = json.loads(
        "".join(line for line in text.splitlines(True) if not _COMMENT.match(line))
    )
    return parsed


@functools.cache
def message_class(name: str, version: int) -> type:
    """The class of Kafka's message ``name`` (``"TxnOffsetCommitRequest"``, a file of ``SCHEMAS``) at
    ``version``, made once. Its classes are the attributes of a module of their own,
    ``kafka_api.message_classes.<message>_v<version>``, as kio's generated classes are of theirs
    (``wire.sibling`` finds a message's parts there)."""
    document = schema(name)
    with _REGISTERING:  # two threads asking at once get the same classes (wire.sibling reads the module)
        module = sys.modules.get(_module_name(document, version))
        if module is None:
            _, module = build(document, version)
            sys.modules[module.__name__] = module
        made: type = getattr(module, document["name"])
        return made


def build(document: Mapping[str, Any], version: int) -> tuple[type, types.ModuleType]:
    """The top-level class (request or response) of a parsed schema at ``version``, and the module that
    holds it with its parts (not registered: ``message_class`` does that for the door's)."""
    if version not in versions(document["validVersions"]):
        raise SchemaUnsupported(f"{document['name']} has no version {version}")
    builder = _Builder(document, version)
    return builder.entity(document["name"], document["fields"], top=True), builder.module


_REGISTERING = threading.Lock()


def _module_name(document: Mapping[str, Any], version: int) -> str:
    return f"{__name__}.{snake_case(document['name'])}_v{version}"


class _Builder:
    """One message at one version: each nested class made once, by name, as kio's generator's ``seen``."""

    def __init__(self, document: Mapping[str, Any], version: int) -> None:
        self.version = version
        self.structs = {struct["name"]: struct for struct in document.get("commonStructs", ())}
        self.module = types.ModuleType(_module_name(document, version))
        self.made: dict[str, type] = {}
        flexible = version in versions(document["flexibleVersions"])
        self.kind = document["type"]
        self.class_vars: dict[str, Any] = {"__version__": p.i16(version), "__flexible__": flexible}
        if self.kind in ("request", "response"):
            self.class_vars["__api_key__"] = p.i16(document["apiKey"])
            self.class_vars["__header_schema__"] = _header(self.kind, document["apiKey"], version, flexible)

    def entity(self, name: str, fields: list[Mapping[str, Any]], top: bool = False) -> type:
        if name in self.made:
            return self.made[name]
        made = [self.field(spec) for spec in fields if self.version in versions(_versions_of(spec))]
        kind = getattr(EntityType, self.kind) if top else EntityType.nested
        cls = dataclasses.make_dataclass(
            name,
            made,
            namespace={"__type__": kind, "__module__": self.module.__name__, **self.class_vars},
            frozen=True,
            slots=True,
            kw_only=True,
        )
        self.made[name] = cls
        setattr(self.module, name, cls)
        return cls

    def field(self, spec: Mapping[str, Any]) -> tuple[str, Any, Any]:
        type_name: str = spec["type"]
        inner = type_name.removeprefix("[]")
        tag = spec.get("tag") if self.version in versions(spec.get("taggedVersions")) else None
        nullable = self.version in versions(spec.get("nullableVersions"))
        if type_name.startswith("[]"):
            if inner in PRIMITIVES:
                return self._primitive_array(spec, inner, tag, nullable)
            item = self._struct(spec, inner)
            metadata = {"metadata": {"tag": tag}, "default": ()} if tag is not None else {}
            return _named(spec["name"], _array(item, nullable), metadata)
        if inner in PRIMITIVES:
            return self._primitive(spec, tag)
        item = self._struct(spec, inner)
        options: dict[str, Any] = {"metadata": {"tag": tag}} if tag is not None else {}
        default = None if inner in self.structs else spec.get("default")  # kio reads no common struct's
        if default is not None:
            options["default"] = _default(inner, str(default), nullable, None)
        elif tag is not None and inner not in self.structs and _only_defaults(spec["fields"], self.structs):
            options["default"] = item()
        elif tag is not None and spec.get("ignorable", False):
            options["default"] = None
        return _named(spec["name"], item | None if nullable else item, options)

    def _struct(self, spec: Mapping[str, Any], name: str) -> type:
        if name in self.structs:
            return self.entity(name, self.structs[name]["fields"])
        if "fields" not in spec:
            raise SchemaUnsupported(f"field {spec['name']}: no struct {name!r} in the schema")
        return self.entity(name, spec["fields"])

    def _primitive(self, spec: Mapping[str, Any], tag: int | None) -> tuple[str, Any, Any]:
        name, kafka_type = _time_renamed(spec)
        default = spec.get("default")
        text = None if default is None else str(default)
        optional = kafka_type not in _NUMBERS and (
            (tag is not None and spec.get("ignorable", False) and text is None)
            or self.version in versions(spec.get("nullableVersions"))
            or (kafka_type == "datetime_i64" and text == "-1")
        )
        custom = _custom(spec)
        options: dict[str, Any] = {
            "metadata": {"kafka_type": kafka_type, **({"tag": tag} if tag is not None else {})}
        }
        if text is not None:
            options["default"] = _default(kafka_type, text, optional, custom)
        elif tag is not None and spec.get("ignorable", False):
            options["default"] = (
                _NUMBERS[kafka_type](0) if kafka_type in _NUMBERS else _tagged_default(kafka_type)
            )
        return _named(name, _hint(kafka_type, custom, optional), options)

    def _primitive_array(
        self, spec: Mapping[str, Any], inner: str, tag: int | None, nullable: bool
    ) -> tuple[str, Any, Any]:
        item = _hint(inner, _custom(spec), optional=False)
        options: dict[str, Any] = {
            "metadata": {"kafka_type": inner, **({"tag": tag} if tag is not None else {})}
        }
        options["default"] = None if spec.get("default") == "null" else ()
        return _named(spec["name"], _array(item, nullable), options)


def _versions_of(spec: Mapping[str, Any]) -> str | None:
    """A field's versions; a tagged field may name only its tagged versions (kio's parser does the same)."""
    found: str | None = spec.get("versions", spec.get("taggedVersions"))
    return found


def _array(item: Any, nullable: bool) -> Any:
    array = tuple[item, ...]
    return array | None if nullable else array


def _named(name: str, hint: Any, options: Mapping[str, Any]) -> tuple[str, Any, Any]:
    return (snake_case(name), hint, dataclasses.field(**options)) if options else (snake_case(name), hint)  # type: ignore[return-value]


def _time_renamed(spec: Mapping[str, Any]) -> tuple[str, str]:
    name, kafka_type = spec["name"], spec["type"]
    if name in ERROR_CODES:
        return name, "error_code"
    if name in DURATIONS:
        if kafka_type not in ("int32", "int64"):
            raise SchemaUnsupported(f"duration {name} of type {kafka_type}")
        return name.removesuffix("Ms"), f"timedelta_i{kafka_type[3:]}"
    if name in TIMES:
        if kafka_type != "int64":
            raise SchemaUnsupported(f"time {name} of type {kafka_type}")
        return name.removesuffix("Ms"), "datetime_i64"
    if name.endswith("Ms"):
        raise SchemaUnsupported(f"{name} looks like a time field; name it in DURATIONS or TIMES")
    return name, kafka_type


def _custom(spec: Mapping[str, Any]) -> Any:
    """The field's entity type from ``kio.schema.types`` (one kio does not have stays its primitive)."""
    entity = spec.get("entityType")
    return None if entity is None else getattr(entity_types, entity[0].upper() + entity[1:], None)


def _default(kafka_type: str, text: str, optional: bool, custom: Any) -> Any:
    """kio's ``format_default``: a schema's default as the field's value."""
    if text == "null":
        if not optional:
            raise SchemaUnsupported(f"a {kafka_type} that may not be null defaults to null")
        return None
    wrap = custom or (lambda value: value)
    if kafka_type == "string":
        return wrap(text)
    if kafka_type in _NUMBERS and kafka_type != "float64":
        return (custom or _NUMBERS[kafka_type])(int(text, 0))
    if kafka_type == "bool":
        if text.capitalize() not in ("True", "False"):
            raise SchemaUnsupported(f"bool default {text!r}")
        return wrap(text.capitalize() == "True")
    if kafka_type == "float64":
        return wrap(float(text))
    if kafka_type == "error_code":
        return ErrorCode(int(text))
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return PRIMITIVES[kafka_type].parse(datetime.timedelta(milliseconds=int(text)))
    if kafka_type == "datetime_i64" and text == "-1" and optional:
        return None
    raise SchemaUnsupported(f"default {text!r} of a {kafka_type}")


def _tagged_default(kafka_type: str) -> Any:
    """kio's default of an ignorable tagged field with none in the schema (numbers: zero, above)."""
    if kafka_type == "error_code":
        return ErrorCode.none
    if kafka_type == "bool":
        raise SchemaUnsupported("an ignorable tagged bool with no default (kio's generator writes no value)")
    return None


def _only_defaults(fields: list[Mapping[str, Any]], structs: Mapping[str, Any]) -> bool:
    """kio's ``nested_entity_has_only_defaults``: a tagged struct whose fields are all primitives or structs
    with a default is left out when all are defaults, so its default is the struct made of its defaults."""
    return all(
        not field["type"].startswith("[]")
        and (field["type"] in PRIMITIVES or field["type"] not in structs)
        and field.get("default") is not None
        for field in fields
    )


def _hint(kafka_type: str, custom: Any, optional: bool) -> Any:
    """kio's annotation of a primitive: its entity type or primitive type, ``| None`` when optional (a
    uuid's always, unless it has an entity type)."""
    if custom is not None:
        return custom | None if optional else custom
    hint = PRIMITIVES[kafka_type]
    return hint | None if optional or kafka_type == "uuid" else hint


def _header(kind: str, api_key: int, version: int, flexible: bool) -> type:
    """kio's header class of a message (``codegen/header_schema.py``, after Kafka's
    ``ApiMessageTypeGenerator``)."""
    if kind == "request":
        header = "v0" if (api_key, version) == (7, 0) else "v2" if flexible else "v1"
        return importlib.import_module(f"kio.schema.request_header.{header}.header").RequestHeader  # type: ignore[no-any-return]
    header = "v0" if api_key == 18 or not flexible else "v1"
    return importlib.import_module(f"kio.schema.response_header.{header}.header").ResponseHeader  # type: ignore[no-any-return]
