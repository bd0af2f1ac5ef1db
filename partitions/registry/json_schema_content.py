"""Confluent's JSON Schema diff of objects and arrays: properties and items added to or removed from
open, partially open and closed content models, required properties, dependencies, additional and
unevaluated properties and items, and the limits on counts (pure; ObjectSchemaDiff and ArraySchemaDiff
of Confluent's json-schema-provider). A subschema is compared through ``Context.compare``."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from partitions.registry import patterns
from partitions.registry.json_schema_difference import (
    Context,
    copied_map_order,
    limit,
    map_order,
    union_order,
)
from partitions.registry.json_schema_model import Node


def _unevaluated(node: Node, keyword: str) -> Node | None:
    value = node.unprocessed.get(keyword)
    return value if isinstance(value, Node) else None


def _beyond(node: Node, kind: str) -> tuple[bool, Node | None, Node | None]:
    """What an object's properties (``kind`` "properties") or an array's items ("items") may be beyond
    those it declares: whether more are allowed (additionalProperties, additionalItems), the schema they
    are held to, and the schema of unevaluatedProperties or unevaluatedItems."""
    allowed, schema = getattr(node, f"additional_{kind}"), getattr(node, f"additional_{kind}_schema")
    return allowed, schema, _unevaluated(node, f"unevaluated{kind.title()}")


def _open(node: Node, kind: str) -> bool:
    """An open content model: more allowed, held to no schema."""
    allowed, schema, unevaluated = _beyond(node, kind)
    return allowed and schema is None and (unevaluated is None or unevaluated.kind in ("empty", "true"))


def _partial(node: Node, kind: str) -> Node | None:
    """The schema a partially open content model holds what it does not declare to (None: not partial)."""
    allowed, schema, unevaluated = _beyond(node, kind)
    if schema is not None:
        return schema
    if allowed and unevaluated is not None and unevaluated.kind not in ("false", "empty", "true"):
        return unevaluated
    return None


def _beyond_differences(context: Context, original: Node, update: Node, kind: str) -> None:
    """additionalProperties or additionalItems compared."""
    original_allowed, original_schema, _ = _beyond(original, kind)
    update_allowed, update_schema, _ = _beyond(update, kind)
    prefix = f"ADDITIONAL_{kind.upper()}"
    with context.scope(f"additional{kind.title()}"):
        if original_allowed != update_allowed:
            context.add(f"{prefix}_ADDED" if update_allowed else f"{prefix}_REMOVED")
        elif original_schema is None and update_schema is not None:
            context.add(f"{prefix}_NARROWED")
        elif update_schema is None and original_schema is not None:
            context.add(f"{prefix}_EXTENDED")
        else:
            context.compare(original_schema, update_schema)


def _object_open(node: Node) -> bool:
    return not node.pattern_properties and _open(node, "properties")


def _object_partial(node: Node, name: str) -> Node | None:
    schema: Node
    for pattern, schema in node.pattern_properties.items():
        if patterns.search(pattern, name):
            return schema
    return _partial(node, "properties")


def object_differences(context: Context, original: Node, update: Node) -> None:
    original_names = map_order(list(original.properties))
    update_names = map_order(list(update.properties))
    with context.scope("required"):
        for name in original_names:
            if name in update.properties:
                before, after = name in original.required, name in update.required
                if before and not after:
                    context.add("REQUIRED_ATTRIBUTE_REMOVED", name)
                elif after and not before:
                    with_default = update.properties[name].has_default
                    context.add(
                        "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED"
                        if with_default
                        else "REQUIRED_ATTRIBUTE_ADDED",
                        name,
                    )
    with context.scope("properties"):
        for name in union_order(original_names, update_names):
            with context.scope(name):
                _property(context, original, update, name)
    _dependencies(context, original, update)
    _beyond_differences(context, original, update, "properties")
    _unevaluated_diff(context, original, update, "unevaluatedProperties", "UNEVALUATED_PROPERTIES")
    limit(
        context,
        "maxProperties",
        original.max_properties,
        update.max_properties,
        (
            "MAX_PROPERTIES_ADDED",
            "MAX_PROPERTIES_REMOVED",
            "MAX_PROPERTIES_INCREASED",
            "MAX_PROPERTIES_DECREASED",
        ),
    )
    limit(
        context,
        "minProperties",
        original.min_properties,
        update.min_properties,
        (
            "MIN_PROPERTIES_ADDED",
            "MIN_PROPERTIES_REMOVED",
            "MIN_PROPERTIES_INCREASED",
            "MIN_PROPERTIES_DECREASED",
        ),
    )


def _property(context: Context, original: Node, update: Node, name: str) -> None:
    before, after = original.properties.get(name), update.properties.get(name)
    if after is None:
        assert before is not None
        _removed(context, "PROPERTY", before, _object_open(update), _object_partial(update, name))
    elif before is None:
        required = name in update.required
        if _object_open(original):
            if after.kind == "empty" or after.kind == "true":
                context.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL")
            elif required:
                with_default = "WITH_DEFAULT_" if after.has_default else ""
                context.add(f"REQUIRED_PROPERTY_{with_default}ADDED_TO_OPEN_CONTENT_MODEL")
            else:
                context.add("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
            return
        partial = _object_partial(original, name)
        if partial is not None:
            covered = _covered(context, partial, after)
            context.add(f"PROPERTY_ADDED_{covered}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
        if required:
            with_default = "WITH_DEFAULT_" if after.has_default else ""
            context.add(f"REQUIRED_PROPERTY_{with_default}ADDED_TO_UNOPEN_CONTENT_MODEL")
        else:
            context.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
    else:
        context.compare(before, after)


def _removed(context: Context, subject: str, before: Node, open_: bool, partial: Node | None) -> None:
    """A property (``subject`` PROPERTY) or an item (ITEM) the update no longer declares, whose content
    model is ``open_`` or ``partial``ly open (to that schema) or else closed."""
    if open_:
        context.add(f"{subject}_REMOVED_FROM_OPEN_CONTENT_MODEL")
    elif partial is not None:
        covered = _covered(context, before, partial)
        context.add(f"{subject}_REMOVED_{covered}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    elif before.kind == "false":
        context.add(f"{subject}_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        context.add(f"{subject}_REMOVED_FROM_CLOSED_CONTENT_MODEL")


def _covered(context: Context, original: Node, update: Node) -> str:
    """IS when ``update`` covers ``original`` (compares compatibly), else NOT; the differences added."""
    sub = context.subcontext()
    sub.compare(original, update)
    context.extend(sub.differences)
    return "IS" if sub.compatible() else "NOT"


def _dependencies(context: Context, original: Node, update: Node) -> None:
    with context.scope("dependencies"):
        for before, after in _both_have(
            context,
            original.property_dependencies,
            update.property_dependencies,
            ("DEPENDENCY_ARRAY_REMOVED", "DEPENDENCY_ARRAY_ADDED"),
        ):
            if before != after:
                if after >= before:
                    context.add("DEPENDENCY_ARRAY_EXTENDED")
                elif before >= after:
                    context.add("DEPENDENCY_ARRAY_NARROWED")
                else:
                    context.add("DEPENDENCY_ARRAY_CHANGED")
        for before_schema, after_schema in _both_have(
            context,
            original.schema_dependencies,
            update.schema_dependencies,
            ("DEPENDENCY_SCHEMA_REMOVED", "DEPENDENCY_SCHEMA_ADDED"),
        ):
            context.compare(before_schema, after_schema)


def _both_have(
    context: Context, original: dict[str, Any], update: dict[str, Any], removed_added: tuple[str, str]
) -> Iterator[tuple[Any, Any]]:
    """Each name of either map, in the order everit's copies of Java HashMaps give them and in its scope:
    (before, after) where both maps have it, else the change ``removed_added`` names added."""
    removed, added = removed_added
    names = union_order(
        copied_map_order(map_order(list(original))), copied_map_order(map_order(list(update)))
    )
    for name in names:
        with context.scope(name):
            before, after = original.get(name), update.get(name)
            if after is None:
                context.add(removed)
            elif before is None:
                context.add(added)
            else:
                yield before, after


def _unevaluated_diff(context: Context, original: Node, update: Node, keyword: str, prefix: str) -> None:
    before, after = _unevaluated(original, keyword), _unevaluated(update, keyword)
    if before is None and after is None:
        return

    def closed(node: Node) -> bool:
        return node.kind == "false"

    def open_(node: Node) -> bool:
        return node.kind in ("empty", "true")

    with context.scope(keyword):
        if before is None:
            context.add(f"{prefix}_REMOVED" if closed(after) else f"{prefix}_NARROWED")  # type: ignore[arg-type]
        elif after is None:
            context.add(f"{prefix}_ADDED" if closed(before) else f"{prefix}_EXTENDED")
        elif closed(before) and not closed(after):
            context.add(f"{prefix}_ADDED")
        elif not closed(before) and closed(after):
            context.add(f"{prefix}_REMOVED")
        elif open_(before) and not open_(after):
            context.add(f"{prefix}_NARROWED")
        elif not open_(before) and open_(after):
            context.add(f"{prefix}_EXTENDED")
        else:
            context.compare(before, after)


def array_differences(context: Context, original: Node, update: Node) -> None:
    with context.scope("items"):
        context.compare(original.all_items, update.all_items)
    before, after = original.item_schemas or [], update.item_schemas or []
    for index in range(min(len(before), len(after))):
        with context.scope(f"items/{index}"):
            context.compare(before[index], after[index])
    for index in range(len(after), len(before)):
        with context.scope(f"items/{index}"):
            _removed(context, "ITEM", before[index], _open(update, "items"), _partial(update, "items"))
    for index in range(len(before), len(after)):
        with context.scope(f"items/{index}"):
            _item_added(context, original, after[index])
    _beyond_differences(context, original, update, "items")
    _unevaluated_diff(context, original, update, "unevaluatedItems", "UNEVALUATED_ITEMS")
    for attribute, name, prefix in (
        ("max_items", "maxItems", "MAX_ITEMS"),
        ("min_items", "minItems", "MIN_ITEMS"),
    ):
        kinds = (f"{prefix}_ADDED", f"{prefix}_REMOVED", f"{prefix}_INCREASED", f"{prefix}_DECREASED")
        limit(context, name, getattr(original, attribute), getattr(update, attribute), kinds)
    if original.unique_items != update.unique_items:
        context.add("UNIQUE_ITEMS_REMOVED" if original.unique_items else "UNIQUE_ITEMS_ADDED", "uniqueItems")
    for name, prefix in (("maxContains", "MAX_CONTAINS"), ("minContains", "MIN_CONTAINS")):
        kinds = (f"{prefix}_ADDED", f"{prefix}_REMOVED", f"{prefix}_INCREASED", f"{prefix}_DECREASED")
        limit(context, name, _count(original, name), _count(update, name), kinds)


def _count(node: Node, keyword: str) -> int | None:
    value = node.unprocessed.get(keyword)
    return int(value) if isinstance(value, int | float | Decimal) and not isinstance(value, bool) else None


def _item_added(context: Context, original: Node, after: Node) -> None:
    if _open(original, "items"):
        empty = after.kind in ("empty", "true")
        context.add(
            "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
            if empty
            else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL"
        )
        return
    partial = _partial(original, "items")
    if partial is not None:
        covered = _covered(context, partial, after)
        context.add(f"ITEM_ADDED_{covered}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    else:
        context.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL")
