"""Confluent's JSON Schema compatibility: every difference between an earlier and a new schema (pure).

A port of Confluent's ``json-schema-provider`` ``diff`` package (``SchemaDiff`` and the ``*SchemaDiff``
classes) over the model of ``json_schema_model``: ``compare`` walks the earlier (``original``) and the new
(``update``) schema together and lists each ``Difference`` (``json_schema_difference``) in Confluent's
order; objects and arrays are compared in ``json_schema_content``, the rest here (types, strings, numbers,
enums, ``not``, and ``allOf``/``anyOf``/``oneOf`` matched subschema to subschema by a maximum matching of
the compatible pairs). Recursive schemas are compared with Confluent's memo of pairs, its optimistic
truncation of cycles and its fixpoint over the pairs found incompatible.
"""

from __future__ import annotations

import sys
import threading
from decimal import Decimal
from fractions import Fraction
from typing import Any

from partitions.registry.json_schema_content import array_differences, object_differences
from partitions.registry.json_schema_difference import (
    COMPATIBLE_CHANGES,
    Context,
    Difference,
    Shared,
    json_key,
    limit,
)
from partitions.registry.json_schema_model import Node

_CONNECT_TYPE = "connect.type"


# The walk recurses once per pair of subschemas in progress, a handful of frames each: a recursive schema
# of n definitions, each reaching the others through a oneOf, has up to n * n pairs in progress at once
# (Confluent's Java has the stack for it). These frames are Python's own, not the C stack's (3.11 on).
_RECURSION_LIMIT = 50_000


class _DeepRecursion:
    """The interpreter's recursion limit raised while any thread compares, restored by the last."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._comparing = 0
        self._saved = 0

    def __enter__(self) -> None:
        with self._lock:
            if self._comparing == 0:
                self._saved = sys.getrecursionlimit()
                sys.setrecursionlimit(max(self._saved, _RECURSION_LIMIT))
            self._comparing += 1

    def __exit__(self, *_: object) -> None:
        with self._lock:
            self._comparing -= 1
            if self._comparing == 0:
                sys.setrecursionlimit(self._saved)


_DEEP_RECURSION = _DeepRecursion()


def compare(original: Node, update: Node) -> list[Difference]:
    """Every difference between ``original`` and ``update``, in Confluent's order (SchemaDiff.compare);
    ``RecursionError`` for schemas nested beyond ``_RECURSION_LIMIT`` frames."""
    with _DEEP_RECURSION:
        return _fixpoint(original, update)


def _fixpoint(original: Node, update: Node) -> list[Difference]:
    seed: dict[tuple[int, int], list[Difference]] = {}
    while True:
        shared = Shared(seed, _compare)
        context = Context(shared)
        _compare(context, original, update)
        incompatible = {
            pair: differences
            for pair, differences in shared.memo.items()
            if any(difference.type not in COMPATIBLE_CHANGES for difference in differences)
        }
        if not shared.optimistic or incompatible.keys() == seed.keys():
            return context.differences
        seed = incompatible


def _referred(node: Node) -> Node:
    seen = 0
    while node.kind == "reference":
        if not node.cell:
            raise ValueError("a $ref that was never resolved")
        node = node.cell[0]
        seen += 1
        if seen > 64:
            raise ValueError("a $ref that refers only to itself")
    return node


def _compare(context: Context, original: Node | None, update: Node | None) -> None:
    if original is None and update is None:
        return
    if original is None:
        context.add("SCHEMA_ADDED")
        return
    if update is None:
        context.add("SCHEMA_REMOVED")
        return
    original, update = _referred(original), _referred(update)
    pair = (id(original), id(update))
    shared = context.shared
    differences = shared.memo.get(pair)
    if differences is None:
        if pair in shared.in_progress:
            seeded = shared.seed.get(pair)
            if seeded is None:
                shared.optimistic = True
                seeded = []
            context.add_rebased(seeded)
            return
        shared.in_progress.add(pair)
        try:
            pair_context = Context(shared)
            _compare_types(pair_context, original, update)
            differences = list(pair_context.differences)
            shared.memo[pair] = differences
        finally:
            shared.in_progress.discard(pair)
    context.add_rebased(differences)


def _same_class(original: Node, update: Node) -> bool:
    return original.kind == update.kind


def _one_compatible(context: Context, pairs: list[tuple[Node, Node]], change: str | None) -> bool:
    """Whether one of ``pairs`` (original, update) compares compatibly: the first that does has its
    differences added to ``context``, then ``change`` (if any)."""
    for original, update in pairs:
        sub = context.subcontext()
        _compare(sub, original, update)
        if sub.compatible():
            context.extend(sub.differences)
            if change is not None:
                context.add(change)
            return True
    return False


def _compare_types(context: Context, original: Node, update: Node) -> None:
    if original.kind != "combined" and update.kind == "combined":
        if len(update.subschemas) == 1:
            if _one_compatible(context, [(original, update.subschemas[0])], None):
                return
        elif update.criterion in ("anyOf", "oneOf"):
            pairs = [(original, subschema) for subschema in update.subschemas]
            if _one_compatible(context, pairs, "SUM_TYPE_EXTENDED"):
                return
    elif original.kind == "combined" and update.kind != "combined":
        if len(original.subschemas) == 1:
            if _one_compatible(context, [(original.subschemas[0], update)], None):
                return
        elif original.criterion == "allOf":
            pairs = [(subschema, update) for subschema in original.subschemas]
            if _one_compatible(context, pairs, "PRODUCT_TYPE_NARROWED"):
                return
    if not _same_class(original, update):
        # everit's TrueSchema is an EmptySchema
        if original.kind == "false" or update.kind in ("empty", "true"):
            return
        if (
            original.unprocessed.get(_CONNECT_TYPE) == "bytes"
            and update.unprocessed.get(_CONNECT_TYPE) == "bytes"
        ):
            return
        context.add("TYPE_CHANGED")
        return
    if original.id != update.id:
        context.add("ID_CHANGED")
    if original.title != update.title:
        context.add("TITLE_CHANGED")
    if original.description != update.description:
        context.add("DESCRIPTION_CHANGED")
    if not _defaults_equal(original, update):
        context.add("DEFAULT_CHANGED")
    compare_kind = _BY_KIND.get(original.kind)
    if compare_kind is not None:
        compare_kind(context, original, update)


def _connect_bytes(node: Node) -> bool:
    return node.unprocessed.get(_CONNECT_TYPE) == "bytes"


def _defaults_equal(original: Node, update: Node) -> bool:
    if not original.has_default or not update.has_default:
        return original.has_default == update.has_default
    # everit keeps an object or array default as an org.json object, whose equals is identity
    if isinstance(original.default, dict | list) or isinstance(update.default, dict | list):
        return bool(original.default is update.default)
    return bool(json_key(original.default) == json_key(update.default))


def _string(context: Context, original: Node, update: Node) -> None:
    limit(
        context,
        "maxLength",
        original.max_length,
        update.max_length,
        ("MAX_LENGTH_ADDED", "MAX_LENGTH_REMOVED", "MAX_LENGTH_INCREASED", "MAX_LENGTH_DECREASED"),
    )
    limit(
        context,
        "minLength",
        original.min_length,
        update.min_length,
        ("MIN_LENGTH_ADDED", "MIN_LENGTH_REMOVED", "MIN_LENGTH_INCREASED", "MIN_LENGTH_DECREASED"),
    )
    if original.pattern is None and update.pattern is not None:
        context.add("PATTERN_ADDED", "pattern")
    elif original.pattern is not None and update.pattern is None:
        context.add("PATTERN_REMOVED", "pattern")
    elif original.pattern != update.pattern:
        context.add("PATTERN_CHANGED", "pattern")


def _number(context: Context, original: Node, update: Node) -> None:
    for attribute, name, prefix in (
        ("maximum", "maximum", "MAXIMUM"),
        ("minimum", "minimum", "MINIMUM"),
        ("exclusive_maximum", "exclusiveMaximum", "EXCLUSIVE_MAXIMUM"),
        ("exclusive_minimum", "exclusiveMinimum", "EXCLUSIVE_MINIMUM"),
    ):
        kinds = (f"{prefix}_ADDED", f"{prefix}_REMOVED", f"{prefix}_INCREASED", f"{prefix}_DECREASED")
        limit(context, name, getattr(original, attribute), getattr(update, attribute), kinds)
    before, after = original.multiple_of, update.multiple_of
    if before is not None or after is not None:
        # exact, as Java's BigDecimal.remainder (a Decimal remainder fails past its precision)
        before = None if before is None else Fraction(Decimal(str(before)))
        after = None if after is None else Fraction(Decimal(str(after)))
        if before is None:
            context.add("MULTIPLE_OF_ADDED", "multipleOf")
        elif after is None:
            context.add("MULTIPLE_OF_REMOVED", "multipleOf")
        elif before == after:
            pass
        elif before != 0 and after % before == 0:
            context.add("MULTIPLE_OF_EXPANDED", "multipleOf")
        elif after != 0 and before % after == 0:
            context.add("MULTIPLE_OF_REDUCED", "multipleOf")
        else:
            context.add("MULTIPLE_OF_CHANGED", "multipleOf")
    if original.integer != update.integer:
        context.add("TYPE_EXTENDED" if original.integer else "TYPE_NARROWED")


def _const(context: Context, original: Node, update: Node) -> None:
    if json_key(original.value) != json_key(update.value):
        context.add("ENUM_ARRAY_CHANGED", "const")


def _enum(context: Context, original: Node, update: Node) -> None:
    before = [json_key(value) for value in original.values]
    after = [json_key(value) for value in update.values]
    if before == after:
        return
    if all(value in after for value in before):
        context.add("ENUM_ARRAY_EXTENDED", "enum")
    elif all(value in before for value in after):
        context.add("ENUM_ARRAY_NARROWED", "enum")
    else:
        context.add("ENUM_ARRAY_CHANGED", "enum")


def _not(context: Context, original: Node, update: Node) -> None:
    with context.scope("not"):
        sub = context.subcontext()
        _compare(sub, update.must_not_match, original.must_not_match)  # reversed: not narrows what it allows
        context.add("NOT_TYPE_NARROWED" if sub.compatible() else "NOT_TYPE_EXTENDED")


def _distinct(subschemas: list[Node]) -> list[Node]:
    """Confluent collapses equal subschemas (a LinkedHashSet of JsonSchema, equal by their JSON)."""
    kept: dict[Any, Node] = {}
    for subschema in subschemas:
        kept.setdefault(_node_key(subschema), subschema)
    return list(kept.values())


def _node_key(node: Node) -> Any:
    """A subschema as Confluent's JsonSchema equality sees it: its JSON, as everit writes it."""
    return _structure(node)


def _structure(value: Any) -> Any:
    if isinstance(value, Node):
        if value.kind == "reference":  # everit writes a reference as its "$ref"
            return ("$ref", value.ref)
        return tuple(sorted((name, _structure(item)) for name, item in vars(value).items()))
    if isinstance(value, list):
        return tuple(_structure(item) for item in value)
    if isinstance(value, dict):
        return tuple(sorted((name, _structure(item)) for name, item in value.items()))
    if isinstance(value, set):
        return tuple(sorted(value))
    if value is None or isinstance(value, str | bool | int | float | Decimal):
        return json_key(value)
    return repr(value)  # the absent default's marker


def _combined(context: Context, original: Node, update: Node) -> None:
    if original.criterion == update.criterion:
        changed = None
    elif (
        update.criterion == "anyOf"
        or (len(original.subschemas) == 1 and len(update.subschemas) == 1)
        or (len(original.subschemas) == 1 and update.criterion == "oneOf")
        or (len(update.subschemas) == 1 and original.criterion == "allOf")
    ):
        changed = "COMBINED_TYPE_EXTENDED"
    else:
        changed = "COMBINED_TYPE_CHANGED"
    if changed is not None:
        context.add(changed)
        if changed == "COMBINED_TYPE_CHANGED":
            return
    before, after = _distinct(original.subschemas), _distinct(update.subschemas)
    if len(before) < len(after):
        context.add("PRODUCT_TYPE_EXTENDED" if update.criterion == "allOf" else "SUM_TYPE_EXTENDED")
    elif len(before) > len(after):
        context.add(
            "SUM_TYPE_NARROWED" if original.criterion in ("anyOf", "oneOf") else "PRODUCT_TYPE_NARROWED"
        )
    edges: dict[tuple[int, int], list[Difference]] = {}
    for index, original_subschema in enumerate(before):
        with context.scope(f"{original.criterion}/{index}"):
            for update_index, update_subschema in enumerate(after):
                sub = context.subcontext()
                _compare(sub, original_subschema, update_subschema)
                if sub.compatible():
                    edges[(index, update_index)] = sub.differences
    matching = _maximum_matching(edges, len(before), len(after))
    for edge in matching:
        context.extend(edges[edge])
    if len(matching) < min(len(before), len(after)):
        context.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")


def _maximum_matching(edges: dict[tuple[int, int], Any], left: int, right: int) -> list[tuple[int, int]]:
    """A maximum matching of the bipartite graph (augmenting paths), as (left, right) edges by left."""
    neighbours: dict[int, list[int]] = {index: [] for index in range(left)}
    for first, second in edges:
        neighbours[first].append(second)
    matched_right: dict[int, int] = {}

    def augment(vertex: int, seen: set[int]) -> bool:
        for other in neighbours[vertex]:
            if other in seen:
                continue
            seen.add(other)
            if other not in matched_right or augment(matched_right[other], seen):
                matched_right[other] = vertex
                return True
        return False

    for vertex in range(left):
        augment(vertex, set())
    return sorted((vertex, other) for other, vertex in matched_right.items())


_BY_KIND = {
    "string": _string,
    "number": _number,
    "const": _const,
    "enum": _enum,
    "combined": _combined,
    "not": _not,
    "object": object_differences,
    "array": array_differences,
}
