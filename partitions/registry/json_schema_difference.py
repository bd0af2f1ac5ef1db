"""What Confluent's JSON Schema diff finds and how it words it, and the walk's context (pure).

``Difference``: one difference between two schemas, its type as Confluent's ``Difference.Type`` names it and
the JSON path where it is; ``message()`` is Confluent's text of it, with its two ``%s`` for the reader's and
the writer's names, which the registry fills as Confluent's ``SchemaValidatorBuilder`` does ("new"/"old",
or the other way round for FORWARD). ``COMPATIBLE_CHANGES`` is Confluent's STRICT policy (the registry's
default): the types that do not stop the new schema from reading data written with the earlier one.

``Context`` is Confluent's diff ``Context``: the path walked and the differences found, and, shared by every
subcontext of one comparison, the memo of compared pairs, the pairs in progress, the pairs known
incompatible from the previous pass and whether a cycle was assumed compatible. Where Confluent iterates a
Java ``HashMap`` or ``HashSet`` of names (properties, dependencies) or of tags (``protobuf_diff``),
``java_hash_order`` gives that order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeVar

from partitions.registry.json_schema_model import Node

Key = TypeVar("Key", bound=str | int)  # a Java HashMap's key: a String, or an Integer (protobuf_diff's tags)


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Difference types whose description says a keyword is in one schema and not the other, and so on:
# Confluent's Difference.error() groups them to word them.
_KEYWORD_ADDED_OR_REMOVED = _names(
    "MAXIMUM_ADDED MINIMUM_ADDED EXCLUSIVE_MAXIMUM_ADDED EXCLUSIVE_MINIMUM_ADDED MULTIPLE_OF_ADDED "
    "MAX_LENGTH_ADDED MIN_LENGTH_ADDED PATTERN_ADDED REQUIRED_ATTRIBUTE_ADDED MAX_PROPERTIES_ADDED "
    "MIN_PROPERTIES_ADDED DEPENDENCY_ARRAY_ADDED DEPENDENCY_SCHEMA_ADDED MAX_ITEMS_ADDED MIN_ITEMS_ADDED "
    "MAX_CONTAINS_ADDED MIN_CONTAINS_ADDED UNIQUE_ITEMS_ADDED ADDITIONAL_ITEMS_REMOVED "
    "ADDITIONAL_PROPERTIES_REMOVED UNEVALUATED_PROPERTIES_REMOVED UNEVALUATED_ITEMS_REMOVED"
)
_VALUE_INCREASED = _names(
    "MIN_LENGTH_INCREASED MINIMUM_INCREASED EXCLUSIVE_MINIMUM_INCREASED MIN_PROPERTIES_INCREASED "
    "MULTIPLE_OF_EXPANDED MIN_ITEMS_INCREASED MIN_CONTAINS_INCREASED"
)
_VALUE_DECREASED = _names(
    "MAX_LENGTH_DECREASED MAXIMUM_DECREASED MAX_ITEMS_DECREASED MAX_CONTAINS_DECREASED "
    "EXCLUSIVE_MAXIMUM_DECREASED MAX_PROPERTIES_DECREASED"
)
_TYPE_NARROWED = _names(
    "ADDITIONAL_ITEMS_NARROWED ENUM_ARRAY_NARROWED SUM_TYPE_NARROWED ADDITIONAL_PROPERTIES_NARROWED "
    "UNEVALUATED_PROPERTIES_NARROWED UNEVALUATED_ITEMS_NARROWED"
)
_VALUE_CHANGED = _names("PATTERN_CHANGED MULTIPLE_OF_CHANGED DEPENDENCY_ARRAY_CHANGED")
_TYPE_CHANGED = _names(
    "TYPE_CHANGED TYPE_NARROWED COMBINED_TYPE_CHANGED COMBINED_TYPE_SUBSCHEMAS_CHANGED ENUM_ARRAY_CHANGED"
)
_TYPE_EXTENDED = _names("DEPENDENCY_ARRAY_EXTENDED PRODUCT_TYPE_EXTENDED SUM_TYPE_EXTENDED NOT_TYPE_EXTENDED")
_ADDED_TO_OPEN = _names(
    "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL "
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL "
    "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL ITEM_ADDED_TO_OPEN_CONTENT_MODEL"
)

# Confluent's SchemaDiff.COMPATIBLE_CHANGES_STRICT.
COMPATIBLE_CHANGES = _names(
    "ID_CHANGED DESCRIPTION_CHANGED TITLE_CHANGED DEFAULT_CHANGED SCHEMA_REMOVED TYPE_EXTENDED "
    "MAX_LENGTH_INCREASED MAX_LENGTH_REMOVED MIN_LENGTH_DECREASED MIN_LENGTH_REMOVED PATTERN_REMOVED "
    "MAXIMUM_INCREASED MAXIMUM_REMOVED MINIMUM_DECREASED MINIMUM_REMOVED EXCLUSIVE_MAXIMUM_INCREASED "
    "EXCLUSIVE_MAXIMUM_REMOVED EXCLUSIVE_MINIMUM_DECREASED EXCLUSIVE_MINIMUM_REMOVED MULTIPLE_OF_REDUCED "
    "MULTIPLE_OF_REMOVED REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED REQUIRED_ATTRIBUTE_REMOVED "
    "DEPENDENCY_ARRAY_NARROWED DEPENDENCY_ARRAY_REMOVED DEPENDENCY_SCHEMA_REMOVED MAX_PROPERTIES_INCREASED "
    "MAX_PROPERTIES_REMOVED MIN_PROPERTIES_DECREASED MIN_PROPERTIES_REMOVED ADDITIONAL_PROPERTIES_ADDED "
    "ADDITIONAL_PROPERTIES_EXTENDED UNEVALUATED_PROPERTIES_ADDED UNEVALUATED_PROPERTIES_EXTENDED "
    "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL "
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL "
    "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL "
    "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL "
    "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL "
    "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL MAX_ITEMS_INCREASED MAX_ITEMS_REMOVED "
    "MIN_ITEMS_DECREASED MIN_ITEMS_REMOVED MAX_CONTAINS_INCREASED MAX_CONTAINS_REMOVED "
    "MIN_CONTAINS_DECREASED "
    "MIN_CONTAINS_REMOVED UNIQUE_ITEMS_REMOVED ADDITIONAL_ITEMS_ADDED ADDITIONAL_ITEMS_EXTENDED "
    "UNEVALUATED_ITEMS_ADDED UNEVALUATED_ITEMS_EXTENDED ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL "
    "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL "
    "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL "
    "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL ENUM_ARRAY_EXTENDED COMBINED_TYPE_EXTENDED "
    "PRODUCT_TYPE_NARROWED SUM_TYPE_EXTENDED NOT_TYPE_NARROWED"
)

_CONNECT_TYPE = "connect.type"


@dataclass(frozen=True, slots=True)
class Difference:
    type: str  # Confluent's Difference.Type
    path: str  # "#/properties/foo"

    def message(self) -> str:
        """Confluent's ``Difference.toString()``, quotes as it has them, ``%s`` for reader and writer."""
        return '{errorType:"' + self.type + '", description:"' + self._description() + "'}"

    def _description(self) -> str:
        path, kind = self.path, self.type
        if kind in _KEYWORD_ADDED_OR_REMOVED:
            return f"The keyword at path '{path}' in the %s schema is not present in the %s schema"
        if kind in _VALUE_INCREASED:
            return f"The value at path '{path}' in the %s schema is more than its value in the %s schema"
        if kind in _VALUE_DECREASED:
            return f"The value at path '{path}' in the %s schema is less than its value in the %s schema"
        if kind in _VALUE_CHANGED:
            return f"The value at path '{path}' is different between the %s and %s schema"
        if kind in _TYPE_NARROWED:
            return (
                f"An array or combined type at path '{path}' has fewer elements in the %s schema "
                "than the %s schema"
            )
        if kind in _TYPE_EXTENDED:
            return (
                f"An array or combined type at path '{path}' has more elements in the %s schema "
                "than the %s schema"
            )
        if kind in _TYPE_CHANGED:
            return f"A type at path '{path}' is different between the %s schema and the %s schema"
        if kind in _ADDED_TO_OPEN:
            return (
                f"The %s schema has an open content model and has a property or item at path '{path}' "
                "which is missing in the %s schema"
            )
        if kind == "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL":
            return (
                f"The %s schema has an unopen content model and has a required property at path '{path}' "
                "which is missing in the %s schema"
            )
        if kind in ("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"):
            return (
                "The %s has a closed content model and is missing a property or item present at "
                f"path '{path}' in the %s schema"
            )
        if kind.endswith("_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"):
            return (
                f"A property or item is missing in the %s schema but present at path '{path}' "
                "in the %s schema and is not covered by its partially open content model"
            )
        if kind.endswith("_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"):
            return (
                f"The %s schema has a property or item at path '{path}' which is missing in the %s schema "
                "and is not covered by its partially open content model"
            )
        return ""


def java_hash_code(key: str | int) -> int:
    """Java's ``hashCode`` of a ``String`` or an ``Integer`` key (a protobuf tag), unsigned 32 bits."""
    if isinstance(key, int):
        return key & 0xFFFFFFFF
    code = 0
    encoded = key.encode("utf-16-be", "surrogatepass")
    for index in range(0, len(encoded), 2):
        code = (31 * code + (encoded[index] << 8 | encoded[index + 1])) & 0xFFFFFFFF
    return code


def java_hash_order(names: Iterable[Key], capacity: int) -> list[Key]:
    """The order a Java ``HashMap``/``HashSet`` of ``capacity`` buckets iterates these keys inserted in
    this order: by bucket (``java_hash_code`` spread as ``HashMap.hash``), then as inserted (a resize
    keeps each bucket's order, so the order is the final table's whatever the resizes)."""

    def bucket(key: Key) -> int:
        code = java_hash_code(key)
        return (code ^ (code >> 16)) & (capacity - 1)

    return sorted(names, key=bucket)  # sorted() is stable


def _table_size_for(wanted: int) -> int:
    size = 1
    while size < wanted:
        size *= 2
    return size


def _grown(capacity: int, size: int) -> int:
    """The capacity a Java HashMap of ``capacity`` reaches once it holds ``size`` entries."""
    while size > capacity * 0.75:
        capacity *= 2
    return capacity


def map_order(names: list[Key]) -> list[Key]:
    """A ``new HashMap<>()`` into which these names were put in this order."""
    return java_hash_order(names, _grown(16, len(names)))


def copied_map_order(names: list[str]) -> list[str]:
    """``new HashMap<>(map)`` of a HashMap iterating these names in this order (everit's ``copyMap``)."""
    return java_hash_order(names, _table_size_for(int(len(names) / 0.75 + 1))) if names else []


def union_order(first: list[Key], second: list[Key]) -> list[Key]:
    """``new HashSet<>(first)`` then ``addAll(second)``, each list in its own iteration order."""
    inserted = list(dict.fromkeys([*first, *second]))
    capacity = _table_size_for(max(int(len(first) / 0.75) + 1, 16))
    return java_hash_order(inserted, _grown(capacity, len(inserted)))


class Context:
    """Confluent's diff ``Context``: the path walked, the differences found, and (shared by every
    subcontext of one comparison) the memo of compared pairs, the pairs in progress, the pairs known
    incompatible from the previous pass and whether a cycle was assumed compatible."""

    def __init__(self, shared: Shared, path: list[str] | None = None) -> None:
        self.shared = shared
        self.path: list[str] = list(path or [])
        self.differences: list[Difference] = []

    def subcontext(self) -> Context:
        return Context(self.shared, self.path)

    def _path_text(self, extra: str | None = None) -> str:
        return "#/" + "/".join([*self.path, extra] if extra is not None else self.path)

    def add(self, kind: str, attribute: str | None = None) -> None:
        self.differences.append(Difference(kind, self._path_text(attribute)))

    def extend(self, differences: list[Difference]) -> None:
        self.differences.extend(differences)

    def compare(self, original: Node | None, update: Node | None) -> None:
        """The two schemas compared here, their differences added (Confluent's SchemaDiff.compare)."""
        self.shared.compare(self, original, update)

    @contextmanager
    def scope(self, name: str) -> Iterator[None]:
        self.path.append(name)
        try:
            yield
        finally:
            self.path.pop()

    def compatible(self) -> bool:
        return all(difference.type in COMPATIBLE_CHANGES for difference in self.differences)

    def add_rebased(self, differences: list[Difference]) -> None:
        """Differences found relative to a pair of subschemas, added at this context's path."""
        if not differences:
            return
        if not self.path:
            self.differences.extend(differences)
            return
        prefix = self._path_text()
        for difference in differences:
            tail = difference.path[2:]
            self.differences.append(Difference(difference.type, prefix + "/" + tail if tail else prefix))


class Shared:
    def __init__(
        self,
        seed: dict[tuple[int, int], list[Difference]],
        compare: Callable[[Context, Node | None, Node | None], None],
    ) -> None:
        self.compare = compare
        self.memo: dict[tuple[int, int], list[Difference]] = {}
        self.in_progress: set[tuple[int, int]] = set()
        self.seed = seed
        self.optimistic = False


def json_key(value: Any) -> Any:
    """A JSON value as Java's equals sees it: a boolean is not a number, 1 is not 1.0."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float | Decimal):
        return ("decimal", Decimal(value))
    if isinstance(value, list):
        return ("list", tuple(json_key(item) for item in value))
    return ("object", frozenset((name, json_key(item)) for name, item in value.items()))


def limit(
    context: Context, attribute: str, original: Any, update: Any, kinds: tuple[str, str, str, str]
) -> None:
    """A numeric keyword compared: ``kinds`` are its ADDED, REMOVED, INCREASED, DECREASED types."""
    added, removed, increased, decreased = kinds
    if original is None and update is None:
        return
    if original is None:
        context.add(added, attribute)
    elif update is None:
        context.add(removed, attribute)
    elif original < update:
        context.add(increased, attribute)
    elif original > update:
        context.add(decreased, attribute)
