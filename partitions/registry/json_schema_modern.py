"""A draft 2019-09 or 2020-12 JSON Schema in the model Confluent's diff compares (pure).

Confluent loads these drafts with json-sKema, where each keyword is a schema of its own, and translates
them into everit's model (``SchemaTranslator``): each keyword becomes an everit schema (``maxLength`` a
string schema with that limit, ``required`` an object schema with those properties, ``items: false`` an
array schema closed to additional items), and the keywords of one schema object are joined in their
order: two of the same kind (array, number, object, string) merge into one, a keyword of a ``type`` list
merges into the type it constrains, anything else is collected into an ``allOf`` the translator calls
generated, unwrapped when it holds one schema and empty (``{}``) when it holds none. ``allOf``, ``anyOf``
and ``oneOf`` keep their subschemas, a generated ``allOf`` among them spliced in. ``ModernLoader`` builds
the same ``json_schema_model.Node``s, so the one diff compares schemas of every draft.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from partitions.registry.json_schema_model import Node, SchemaLoader

if TYPE_CHECKING:
    from referencing._core import Resolver

# Keywords json-sKema keeps on the schema object itself, or ignores: not translated into a schema.
_ANNOTATIONS = frozenset(
    (
        *("$schema", "$id", "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$vocabulary", "$comment"),
        *("title", "description", "default", "readOnly", "writeOnly", "deprecated", "examples", "format"),
        *(
            "then",
            "else",
            "minContains",
            "maxContains",
            "contentMediaType",
            "contentEncoding",
            "contentSchema",
        ),
    )
)
_MERGED_KINDS = ("array", "number", "object", "string")
_COMBINERS = ("allOf", "anyOf", "oneOf")


def _object(**fields: Any) -> Node:
    node = Node(
        "object",
        min_properties=None,
        max_properties=None,
        properties={},
        required=[],
        additional_properties=True,
        additional_properties_schema=None,
        pattern_properties={},
        property_dependencies={},
        schema_dependencies={},
    )
    node.__dict__.update(fields)
    return node


def _array(**fields: Any) -> Node:
    node = Node(
        "array",
        min_items=None,
        max_items=None,
        unique_items=False,
        additional_items=True,
        additional_items_schema=None,
        all_items=None,
        item_schemas=None,
    )
    node.__dict__.update(fields)
    return node


def _string(**fields: Any) -> Node:
    node = Node("string", min_length=None, max_length=None, pattern=None)
    node.__dict__.update(fields)
    return node


def _number(**fields: Any) -> Node:
    node = Node(
        "number",
        minimum=None,
        maximum=None,
        exclusive_minimum=None,
        exclusive_maximum=None,
        multiple_of=None,
        integer=False,
    )
    node.__dict__.update(fields)
    return node


def _typed(name: str) -> Node:
    if name == "string":
        return _string()
    if name in ("integer", "number"):
        return _number(integer=name == "integer")
    if name in ("boolean", "null"):
        return Node(name)
    if name == "array":
        return _array()
    if name == "object":
        return _object()
    raise ValueError(f"unknown type: [{name}]")


def _generated(criterion: str, subschemas: list[Node]) -> Node:
    return Node("combined", criterion=criterion, subschemas=subschemas, synthetic=True, generated=True)


def _is_generated(node: Node, criterion: str) -> bool:
    return node.kind == "combined" and node.criterion == criterion and node.__dict__.get("generated", False)


def _copy(node: Node) -> Node:
    copied = Node(node.kind)
    copied.__dict__.update(node.__dict__)
    for name, value in copied.__dict__.items():  # a merge changes these in place
        if isinstance(value, dict | list | set):
            copied.__dict__[name] = type(value)(value)
    for name, value in copied.property_dependencies.items() if node.kind == "object" else ():
        copied.property_dependencies[name] = set(value)
    return copied


def _merge(into: Node, other: Node) -> Node:
    """SchemaUtils.merge: ``other``'s keywords added to a copy of ``into`` (both of one kind)."""
    merged = _copy(into)
    for name in ("title", "description", "id"):
        if getattr(other, name) is not None:
            setattr(merged, name, getattr(other, name))
    if other.has_default:
        merged.default = other.default
    merged.unprocessed.update(other.unprocessed)
    if into.kind == "array":
        for name in ("min_items", "max_items", "all_items", "additional_items_schema"):
            if getattr(other, name) is not None:
                setattr(merged, name, getattr(other, name))
        merged.unique_items = merged.unique_items or other.unique_items
        if other.item_schemas is not None:
            merged.item_schemas = [*(merged.item_schemas or []), *other.item_schemas]
        if not other.additional_items:
            merged.additional_items = False
    elif into.kind == "number":
        for name in ("minimum", "maximum", "exclusive_minimum", "exclusive_maximum", "multiple_of"):
            if getattr(other, name) is not None:
                setattr(merged, name, getattr(other, name))
        merged.integer = merged.integer or other.integer
    elif into.kind == "object":
        merged.pattern_properties.update(other.pattern_properties)
        merged.properties.update(other.properties)
        if not other.additional_properties:
            merged.additional_properties = False
        if other.additional_properties_schema is not None:
            merged.additional_properties_schema = other.additional_properties_schema
        merged.required.extend(other.required)
        for name in ("min_properties", "max_properties"):
            if getattr(other, name) is not None:
                setattr(merged, name, getattr(other, name))
        for name, dependencies in other.property_dependencies.items():
            merged.property_dependencies.setdefault(name, set()).update(dependencies)
        merged.schema_dependencies.update(other.schema_dependencies)
    elif into.kind == "string":
        for name in ("min_length", "max_length", "pattern"):
            if getattr(other, name) is not None:
                setattr(merged, name, getattr(other, name))
    return merged


def _accumulate(product: list[Node], current: Node) -> list[Node]:
    for index, node in enumerate(product):
        if node.kind == current.kind and node.kind in _MERGED_KINDS:
            product[index] = _merge(node, current)
            return product
    product.append(current)
    return product


def _flatten(node: Node) -> list[Node]:
    return list(node.subschemas) if _is_generated(node, "allOf") else [node]


def _contains_type(combined: Node, node: Node) -> bool:
    return any(sub.kind == node.kind for sub in combined.subschemas)


def _join(schema: Node, current: Node) -> Node:
    """SchemaContext.join of two keywords' schemas of one schema object."""
    if schema.kind == current.kind and schema.kind in _MERGED_KINDS:
        return _merge(schema, current)
    if _is_generated(schema, "anyOf") and _contains_type(schema, current):
        return _generated("anyOf", _accumulate(list(schema.subschemas), current))
    if _is_generated(current, "anyOf") and _contains_type(current, schema):
        return _generated("anyOf", _accumulate(list(current.subschemas), schema))
    product: list[Node] = []
    for node in [*_flatten(schema), *_flatten(current)]:
        product = _accumulate(product, node)
    return _generated("allOf", product)


class ModernLoader(SchemaLoader):
    """Loads a draft 2019-09 or 2020-12 schema (and what its ``$ref``s reach) into ``Node``s."""

    def _load_object(
        self, value: dict[str, Any], resolver: Resolver[Any], child: Callable[[Any], Node]
    ) -> Node:
        result: Node | None = None
        unprocessed: dict[str, Any] = {}
        for keyword, argument in value.items():
            if keyword in _ANNOTATIONS:
                continue
            translated = self._keyword(keyword, argument, value, child, resolver)
            if translated is None:
                unprocessed[keyword] = argument
                continue
            for node in translated:
                result = node if result is None else _join(result, node)
        if result is None or (_is_generated(result, "allOf") and not result.subschemas):
            result = Node("empty")
        elif _is_generated(result, "allOf") and len(result.subschemas) == 1:
            result = _copy(result.subschemas[0])
        else:
            result = _copy(result)
        if isinstance(value.get("title"), str):
            result.title = value["title"]
        if isinstance(value.get("description"), str):
            result.description = value["description"]
        if "default" in value and value["default"] is not None:
            result.default = value["default"]
        if unprocessed:  # the translator sets these in place of the builder's own
            result.unprocessed = unprocessed
        return result

    def _keyword(
        self,
        keyword: str,
        argument: Any,
        schema: dict[str, Any],
        child: Callable[[Any], Node],
        resolver: Resolver[Any],
    ) -> list[Node] | None:
        """The everit schemas one keyword translates to, joined in order; None for a keyword json-sKema
        does not know (kept among the unprocessed ones)."""
        if keyword == "type":
            if isinstance(argument, list):
                return [_generated("anyOf", [_typed(name) for name in argument])]
            return [_typed(argument)]
        if keyword in ("$ref", "$dynamicRef", "$recursiveRef"):
            return [self._reference(argument, resolver)]
        if keyword == "$defs":
            return None
        if keyword in _COMBINERS:
            subschemas: list[Node] = []
            for sub in argument:
                subschemas.extend(_flatten(child(sub)))
            return [
                Node("combined", criterion=keyword, subschemas=subschemas, synthetic=False, generated=False)
            ]
        if keyword == "not":
            return [Node("not", must_not_match=child(argument))]
        if keyword == "enum":
            return [Node("enum", values=list(argument))]
        if keyword == "const":
            return [Node("const", value=argument)]
        if keyword == "if":
            parts = {name: child(schema[name]) for name in ("if", "then", "else") if name in schema}
            return [Node("conditional", **parts)]
        return self._typed_keyword(keyword, argument, schema, child)

    def _typed_keyword(
        self, keyword: str, argument: Any, schema: dict[str, Any], child: Callable[[Any], Node]
    ) -> list[Node] | None:
        if keyword in ("minLength", "maxLength", "pattern"):
            name = {"minLength": "min_length", "maxLength": "max_length", "pattern": "pattern"}[keyword]
            return [_string(**{name: argument})]
        numbers = {
            "minimum": "minimum",
            "maximum": "maximum",
            "exclusiveMinimum": "exclusive_minimum",
            "exclusiveMaximum": "exclusive_maximum",
            "multipleOf": "multiple_of",
        }
        if keyword in numbers:
            return [_number(**{numbers[keyword]: argument})]
        if keyword == "properties":
            return [_object(properties={name: child(sub)}) for name, sub in argument.items()]
        if keyword == "patternProperties":
            return [_object(pattern_properties={pattern: child(sub)}) for pattern, sub in argument.items()]
        if keyword == "additionalProperties":
            if argument is False:
                return [_object(additional_properties=False)]
            return [_object() if argument is True else _object(additional_properties_schema=child(argument))]
        if keyword == "required":
            return [_object(required=list(argument))]
        if keyword in ("minProperties", "maxProperties"):
            return [
                _object(**{"min_properties" if keyword == "minProperties" else "max_properties": argument})
            ]
        if keyword == "dependentRequired":
            return [_object(property_dependencies={name: set(names) for name, names in argument.items()})]
        if keyword == "dependentSchemas":
            return [_object(schema_dependencies={name: child(sub) for name, sub in argument.items()})]
        if keyword == "propertyNames":
            return [_object()]
        if keyword == "unevaluatedProperties":
            node = _object()
            node.unprocessed = {"unevaluatedProperties": child(argument)}
            return [node]
        return self._array_keyword(keyword, argument, schema, child)

    def _array_keyword(
        self, keyword: str, argument: Any, schema: dict[str, Any], child: Callable[[Any], Node]
    ) -> list[Node] | None:
        if keyword == "items":
            if argument is False:
                return [_array(additional_items=False)]
            if argument is True:
                return [_array()]
            if isinstance(argument, list):  # draft 2019-09's tuple
                return [_array(item_schemas=[child(sub) for sub in argument])]
            if schema.get("prefixItems"):
                return [_array(additional_items_schema=child(argument))]
            return [_array(all_items=child(argument))]
        if keyword == "additionalItems" and isinstance(schema.get("items"), list):
            if argument is False:
                return [_array(additional_items=False)]
            return [_array() if argument is True else _array(additional_items_schema=child(argument))]
        if keyword == "prefixItems":
            return [_array(item_schemas=[child(sub) for sub in argument])]
        if keyword == "contains":
            node = _array()
            node.unprocessed = {"minContains": schema.get("minContains", 1)}
            if "maxContains" in schema:
                node.unprocessed["maxContains"] = schema["maxContains"]
            return [node]
        if keyword in ("minItems", "maxItems"):
            return [_array(**{"min_items" if keyword == "minItems" else "max_items": argument})]
        if keyword == "uniqueItems":
            return [_array(unique_items=argument is True)]
        if keyword == "unevaluatedItems":
            node = _array()
            node.unprocessed = {"unevaluatedItems": child(argument)}
            return [node]
        return None
