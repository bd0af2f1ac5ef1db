"""A JSON Schema as Confluent's registry models it to compare two of them (pure).

Confluent's JSON Schema compatibility (``JsonSchemaDiff``) does not compare JSON texts: it compares the
schemas as everit-json-schema's ``SchemaLoader`` loads them, whose model decides what a difference is.
``load`` builds that model: a schema object becomes a ``Node`` of one ``kind`` (``{}`` is ``empty``;
``{"type": "string", "enum": [...]}`` an ``allOf`` of an ``enum`` and a ``string`` schema, which everit
calls synthetic; a ``type`` array an ``anyOf`` of one schema per type; a ``$ref`` a ``reference`` to the
node of its target, cycles included). The keywords each kind keeps are everit's; keywords no extractor
takes stay in ``unprocessed`` as their JSON values (``connect.type`` is read from there). This is how
Confluent loads drafts 4, 6 and 7; ``json_schema_modern`` builds the same nodes for 2019-09 and 2020-12.

``$ref`` targets come from a ``referencing`` resolver (the registry's resolved references, never the
network); an unresolvable one raises ``referencing.exceptions.Unresolvable``.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from referencing import Specification
from referencing.jsonschema import specification_with

from partitions.registry import patterns

if TYPE_CHECKING:
    from referencing._core import Resolver

DRAFT4, DRAFT6, DRAFT7 = 4, 6, 7

_ARRAY_KEYWORDS = ("items", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains")
_OBJECT_KEYWORDS = (
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "dependencies",
    "patternProperties",
    "additionalProperties",
    "propertyNames",
)
_NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_STRING_KEYWORDS = ("minLength", "maxLength", "pattern", "format")
_CONDITIONAL_KEYWORDS = ("if", "then", "else")
# The order Java's HashSet in everit's CombinedSchemaLoader iterates these three keys.
_COMBINED_KEYWORDS = ("allOf", "oneOf", "anyOf")

_ABSENT = object()


class Node:
    """One schema of everit's model: ``kind`` is everit's class (``empty``, ``true``, ``false``,
    ``string``, ``number``, ``boolean``, ``null``, ``array``, ``object``, ``enum``, ``const``, ``not``,
    ``combined``, ``conditional``, ``reference``) and the other attributes those everit keeps."""

    def __init__(self, kind: str, **attributes: Any) -> None:
        self.kind = kind
        self.id: str | None = None
        self.title: str | None = None
        self.description: str | None = None
        self.default: Any = _ABSENT
        self.unprocessed: dict[str, Any] = {}
        self.__dict__.update(attributes)

    def __getattr__(self, name: str) -> Any:  # the kind's own attributes, set in __init__
        raise AttributeError(f"a {self.kind} schema has no {name}")

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)

    @property
    def has_default(self) -> bool:
        return self.default is not _ABSENT

    def __repr__(self) -> str:
        return f"Node({self.kind})"


def refuse_reference_loops(cell: list[Node]) -> None:
    """A ``$ref`` target that is only ``$ref``s leading back to itself (``{"$ref": "#"}``) is no
    schema: refused (ValueError) rather than compared or validated forever."""
    node = cell[0]
    while node.kind == "reference" and node.cell:
        if node.cell is cell:
            raise ValueError(f"$ref '{node.ref}' refers only to $refs back to itself")
        node = node.cell[0]


def _regex(pattern: str) -> str:
    """A pattern the validator can use (draft 4's metaschema does not check patternProperties' names)."""
    try:
        re.compile(pattern)
    except re.error:
        raise ValueError(f"#/patternProperties: {pattern!r} is not a 'regex'") from None
    try:
        patterns.compiled(pattern)
    except patterns.UnsupportedPattern as exc:
        raise ValueError(f"#/patternProperties: {exc}") from None
    return pattern


def _array_keywords(draft: int) -> tuple[str, ...]:
    return _ARRAY_KEYWORDS[:-1] if draft == DRAFT4 else _ARRAY_KEYWORDS  # contains: draft 6 on


def _object_keywords(draft: int) -> tuple[str, ...]:
    return _OBJECT_KEYWORDS[:-1] if draft == DRAFT4 else _OBJECT_KEYWORDS  # propertyNames: draft 6 on


class SchemaLoader(abc.ABC):
    """What the loaders of every draft share: a boolean schema, the resolver entering each schema
    object, and one node per ``$ref`` target; ``_load_object`` builds a schema object's node."""

    def __init__(self, specification: Specification[Any]) -> None:
        self._specification = specification
        self._targets: dict[int, list[Node]] = {}  # id() of a $ref target's JSON -> its node's cell
        self._keep: list[Any] = []  # the targets' JSON, alive while their id() keys the map

    def load(self, value: Any, resolver: Resolver[Any]) -> Node:
        if isinstance(value, bool):
            return Node("true" if value else "false")
        if not isinstance(value, dict):
            raise ValueError(f"a schema is an object or a boolean, not {type(value).__name__}")
        specification = specification_with(value.get("$schema", ""), default=self._specification)
        resolver = resolver.in_subresource(specification.create_resource(value))
        return self._load_object(value, resolver, lambda sub: self.load(sub, resolver))

    @abc.abstractmethod
    def _load_object(
        self, value: dict[str, Any], resolver: Resolver[Any], child: Callable[[Any], Node]
    ) -> Node:
        """The node of a schema object; ``child`` loads a subschema of it."""

    def _reference(self, ref: str, resolver: Resolver[Any]) -> Node:
        """A node for this ``$ref``, whose ``cell`` holds its target's node: one node per target, set
        once it is loaded, so a reference met while its target loads (a cycle) shares it too."""
        resolved = resolver.lookup(ref)
        key = id(resolved.contents)
        cell = self._targets.get(key)
        if cell is None:
            cell = []
            self._targets[key] = cell
            self._keep.append(resolved.contents)
            cell.append(self.load(resolved.contents, resolved.resolver))
            refuse_reference_loops(cell)
        return Node("reference", cell=cell, ref=ref)


class Loader(SchemaLoader):
    """Loads one schema document of draft 4, 6 or 7 (and the documents its ``$ref``s reach) into
    ``Node``s."""

    def __init__(self, draft: int, specification: Specification[Any]) -> None:
        super().__init__(specification)
        self.draft = draft

    def _load_object(
        self, value: dict[str, Any], resolver: Resolver[Any], child: Callable[[Any], Node]
    ) -> Node:
        remaining = dict(value)
        extracted: list[Node] = []
        if "$ref" in value:  # beside it, the other keywords are ignored
            extracted.append(self._reference(remaining.pop("$ref"), resolver))
        else:
            extracted.extend(self._extract(remaining, child))
        if not extracted:
            node = Node("empty")
        elif len(extracted) == 1:
            node = extracted[0]
        else:
            node = Node("combined", criterion="allOf", subschemas=extracted, synthetic=True)
        self._common(node, remaining)
        node.unprocessed = remaining
        return node

    def _common(self, node: Node, remaining: dict[str, Any]) -> None:
        id_keyword = "id" if self.draft == DRAFT4 else "$id"
        if id_keyword in remaining:
            node.id = remaining.pop(id_keyword)
        if "title" in remaining:
            node.title = remaining.pop("title")
        if "description" in remaining:
            node.description = remaining.pop("description")
        if self.draft == DRAFT7:
            remaining.pop("readOnly", None)
            remaining.pop("writeOnly", None)
        if "default" in remaining:
            node.default = remaining.pop("default")

    def _extract(self, remaining: dict[str, Any], child: Callable[[Any], Node]) -> list[Node]:
        full = dict(remaining)
        extracted: list[Node] = []
        if "enum" in remaining:
            extracted.append(Node("enum", values=list(remaining.pop("enum"))))
        for keyword in _COMBINED_KEYWORDS:
            if keyword in remaining:
                subschemas = [child(sub) for sub in remaining.pop(keyword)]
                extracted.append(Node("combined", criterion=keyword, subschemas=subschemas, synthetic=False))
        if "not" in remaining:
            extracted.append(Node("not", must_not_match=child(remaining.pop("not"))))
        if self.draft != DRAFT4 and "const" in remaining:
            extracted.append(Node("const", value=remaining.pop("const")))
        if "type" in remaining:
            types = remaining.pop("type")
            if isinstance(types, list):
                subschemas = [self._typed(name, full, remaining, child) for name in types]
                extracted.append(Node("combined", criterion="anyOf", subschemas=subschemas, synthetic=False))
            else:
                extracted.append(self._typed(types, full, remaining, child))
        if any(keyword in remaining for keyword in _array_keywords(self.draft)):
            extracted.append(self._array(full, remaining, child))
        if any(keyword in remaining for keyword in _object_keywords(self.draft)):
            extracted.append(self._object(full, remaining, child))
        if any(keyword in remaining for keyword in _NUMBER_KEYWORDS):
            extracted.append(self._number(full, remaining, integer=False))
        if any(keyword in remaining for keyword in _STRING_KEYWORDS):
            extracted.append(self._string(full, remaining))
        if self.draft >= DRAFT7 and any(keyword in remaining for keyword in _CONDITIONAL_KEYWORDS):
            parts = {
                keyword: child(remaining.pop(keyword))
                for keyword in _CONDITIONAL_KEYWORDS
                if keyword in remaining
            }
            extracted.append(Node("conditional", **parts))
        return extracted

    def _typed(
        self, name: str, full: dict[str, Any], remaining: dict[str, Any], child: Callable[[Any], Node]
    ) -> Node:
        if name == "string":
            return self._string(full, remaining)
        if name in ("integer", "number"):
            return self._number(full, remaining, integer=name == "integer")
        if name in ("boolean", "null"):
            return Node(name)
        if name == "array":
            return self._array(full, remaining, child)
        if name == "object":
            return self._object(full, remaining, child)
        raise ValueError(f"unknown type: [{name}]")

    @staticmethod
    def _consume(remaining: dict[str, Any], keywords: tuple[str, ...]) -> None:
        for keyword in keywords:
            remaining.pop(keyword, None)

    def _string(self, full: dict[str, Any], remaining: dict[str, Any]) -> Node:
        self._consume(remaining, _STRING_KEYWORDS)
        return Node(
            "string",
            min_length=full.get("minLength"),
            max_length=full.get("maxLength"),
            pattern=full.get("pattern"),
        )

    def _number(self, full: dict[str, Any], remaining: dict[str, Any], integer: bool) -> Node:
        self._consume(remaining, _NUMBER_KEYWORDS)
        exclusive_minimum = full.get("exclusiveMinimum")
        exclusive_maximum = full.get("exclusiveMaximum")
        if isinstance(exclusive_minimum, bool):  # draft 4: a flag on minimum, not a limit
            exclusive_minimum = None
        if isinstance(exclusive_maximum, bool):
            exclusive_maximum = None
        return Node(
            "number",
            minimum=full.get("minimum"),
            maximum=full.get("maximum"),
            exclusive_minimum=exclusive_minimum,
            exclusive_maximum=exclusive_maximum,
            multiple_of=full.get("multipleOf"),
            integer=integer,
        )

    def _array(self, full: dict[str, Any], remaining: dict[str, Any], child: Callable[[Any], Node]) -> Node:
        self._consume(remaining, _array_keywords(self.draft))
        node = Node(
            "array",
            min_items=full.get("minItems"),
            max_items=full.get("maxItems"),
            unique_items=full.get("uniqueItems") is True,
            additional_items=True,
            additional_items_schema=None,
            all_items=None,
            item_schemas=None,
        )
        items = full.get("items", _ABSENT)
        if isinstance(items, list):
            node.item_schemas = [child(sub) for sub in items]
        elif items is not _ABSENT:
            node.all_items = child(items)
        additional = full.get("additionalItems", _ABSENT)
        if isinstance(additional, bool):
            node.additional_items = additional
        elif additional is not _ABSENT:
            node.additional_items_schema = child(additional)
        return node

    def _object(self, full: dict[str, Any], remaining: dict[str, Any], child: Callable[[Any], Node]) -> Node:
        self._consume(remaining, _object_keywords(self.draft))
        id_keyword = "id" if self.draft == DRAFT4 else "$id"
        properties = {
            name: child(sub)
            for name, sub in full.get("properties", {}).items()
            if name != id_keyword or isinstance(sub, dict)
        }
        node = Node(
            "object",
            min_properties=full.get("minProperties"),
            max_properties=full.get("maxProperties"),
            properties=properties,
            required=list(full.get("required", [])),
            additional_properties=True,
            additional_properties_schema=None,
            pattern_properties={
                _regex(pattern): child(sub) for pattern, sub in full.get("patternProperties", {}).items()
            },
            property_dependencies={},
            schema_dependencies={},
        )
        additional = full.get("additionalProperties", _ABSENT)
        if isinstance(additional, bool):
            node.additional_properties = additional
        elif additional is not _ABSENT:
            node.additional_properties_schema = child(additional)
        for name, dependency in full.get("dependencies", {}).items():
            if isinstance(dependency, list):
                node.property_dependencies[name] = set(dependency)
            else:
                node.schema_dependencies[name] = child(dependency)
        return node
