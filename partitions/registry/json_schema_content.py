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


def _object_open(node: Node) -> bool:
    if not node.additional_properties or node.additional_properties_schema is not None:
        return False
    if node.pattern_properties:
        return False
    unevaluated = _unevaluated(node, "unevaluatedProperties")
    return unevaluated is None or unevaluated.kind in ("empty", "true")


def _unevaluated(node: Node, keyword: str) -> Node | None:
    value = node.unprocessed.get(keyword)
    return value if isinstance(value, Node) else None


def _object_partial(node: Node, name: str) -> Node | None:
    schema: Node | None
    for pattern, schema in node.pattern_properties.items():
        if patterns.search(pattern, name):
            return schema
    schema = node.additional_properties_schema
    if schema is not None:
        return schema
    if node.additional_properties:
        unevaluated = _unevaluated(node, "unevaluatedProperties")
        if unevaluated is not None and unevaluated.kind not in ("false", "empty", "true"):
            return unevaluated
    return None


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
    with context.scope("additionalProperties"):
        if original.additional_properties != update.additional_properties:
            context.add(
                "ADDITIONAL_PROPERTIES_ADDED"
                if update.additional_properties
                else "ADDITIONAL_PROPERTIES_REMOVED"
            )
        elif (
            original.additional_properties_schema is None and update.additional_properties_schema is not None
        ):
            context.add("ADDITIONAL_PROPERTIES_NARROWED")
        elif (
            update.additional_properties_schema is None and original.additional_properties_schema is not None
        ):
            context.add("ADDITIONAL_PROPERTIES_EXTENDED")
        else:
            context.compare(original.additional_properties_schema, update.additional_properties_schema)
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
        if _object_open(update):
            context.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL")
            return
        partial = _object_partial(update, name)
        if partial is not None:
            sub = context.subcontext()
            sub.compare(before, partial)
            context.extend(sub.differences)
            covered = "IS" if sub.compatible() else "NOT"
            context.add(f"PROPERTY_REMOVED_{covered}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
        elif before.kind == "false":
            context.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
        else:
            context.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")
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
            sub = context.subcontext()
            sub.compare(partial, after)
            context.extend(sub.differences)
            covered = "IS" if sub.compatible() else "NOT"
            context.add(f"PROPERTY_ADDED_{covered}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
        if required:
            with_default = "WITH_DEFAULT_" if after.has_default else ""
            context.add(f"REQUIRED_PROPERTY_{with_default}ADDED_TO_UNOPEN_CONTENT_MODEL")
        else:
            context.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
    else:
        context.compare(before, after)


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


def _array_open(node: Node) -> bool:
    if not node.additional_items or node.additional_items_schema is not None:
        return False
    unevaluated = _unevaluated(node, "unevaluatedItems")
    return unevaluated is None or unevaluated.kind in ("empty", "true")


def _array_partial(node: Node) -> Node | None:
    schema: Node | None = node.additional_items_schema
    if schema is not None:
        return schema
    if node.additional_items:
        unevaluated = _unevaluated(node, "unevaluatedItems")
        if unevaluated is not None and unevaluated.kind not in ("false", "empty", "true"):
            return unevaluated
    return None


def array_differences(context: Context, original: Node, update: Node) -> None:
    with context.scope("items"):
        context.compare(original.all_items, update.all_items)
    before, after = original.item_schemas or [], update.item_schemas or []
    for index in range(min(len(before), len(after))):
        with context.scope(f"items/{index}"):
            context.compare(before[index], after[index])
    for index in range(len(after), len(before)):
        with context.scope(f"items/{index}"):
            _item_removed(context, before[index], update)
    for index in range(len(before), len(after)):
        with context.scope(f"items/{index}"):
            _item_added(context, original, after[index])
    with context.scope("additionalItems"):
        if original.additional_items != update.additional_items:
            context.add("ADDITIONAL_ITEMS_REMOVED" if original.additional_items else "ADDITIONAL_ITEMS_ADDED")
        elif original.additional_items_schema is None and update.additional_items_schema is not None:
            context.add("ADDITIONAL_ITEMS_NARROWED")
        elif update.additional_items_schema is None and original.additional_items_schema is not None:
            context.add("ADDITIONAL_ITEMS_EXTENDED")
        else:
            context.compare(original.additional_items_schema, update.additional_items_schema)
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


def _item_removed(context: Context, before: Node, update: Node) -> None:
    if _array_open(update):
        context.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL")
        return
    partial = _array_partial(update)
    if partial is not None:
        sub = context.subcontext()
        sub.compare(before, partial)
        context.extend(sub.differences)
        covered = "IS" if sub.compatible() else "NOT"
        context.add(f"ITEM_REMOVED_{covered}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    elif before.kind == "false":
        context.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        context.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL")


def _item_added(context: Context, original: Node, after: Node) -> None:
    if _array_open(original):
        empty = after.kind in ("empty", "true")
        context.add(
            "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
            if empty
            else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL"
        )
        return
    partial = _array_partial(original)
    if partial is not None:
        sub = context.subcontext()
        sub.compare(partial, after)
        context.extend(sub.differences)
        covered = "IS" if sub.compatible() else "NOT"
        context.add(f"ITEM_ADDED_{covered}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    else:
        context.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL")
