"""Whether data written with one Avro schema can be read with another: Avro's
``SchemaCompatibility.checkReaderWriterCompatibility(reader, writer)`` (1.12), each incompatibility in
the words of Confluent's ``Difference`` (its registry's ``AvroSchema.isBackwardCompatible``). Pure.

The walk is Avro's, quirks included, because clients compare the registry's answers with Confluent's:
results are memoized per pair of schema objects (a named type met again reports where it was met first),
a pair met again while its check is still running counts as compatible (recursive types), a union's
branch is checked afresh from the root (its own incompatibilities are not listed, only the branch's
MISSING_UNION_BRANCH), and a reader field that is missing from the writer but whose type is an enum
with a default is checked against the writer record itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from partitions.registry.avro_model import Field, Node, to_string

_NUMERIC_PROMOTIONS = {
    "long": ("int",),
    "float": ("int", "long"),
    "double": ("int", "long", "float"),
    "bytes": ("string",),
    "string": ("bytes",),
}


@dataclass(frozen=True)
class Incompatibility:
    kind: str  # Avro's SchemaIncompatibilityType
    message: str
    location: tuple[str, ...]  # from the root token "" down

    @property
    def path(self) -> str:
        """``Incompatibility.getLocation``: a JSON pointer without the root token."""
        return "/" + "/".join(token.replace("~", "~0").replace("/", "~1") for token in self.location[1:])


class CheckFailed(Exception):
    """Avro's checker threw (a reader field matching two writer fields through its aliases)."""


_Result = tuple[Incompatibility, ...]  # empty: compatible
_COMPATIBLE: _Result = ()


class _Checker:
    def __init__(self) -> None:
        self.memo: dict[tuple[int, int], _Result | None] = {}  # None: the pair's check is running
        self.keep: list[Node] = []  # the memo's keys are ids: the nodes stay alive while it does

    def check(self, token: str, reader: Node, writer: Node, location: list[str]) -> _Result:
        location.append(token)
        key = (id(reader), id(writer))
        if key in self.memo:
            result = self.memo[key] or _COMPATIBLE  # running: compatible unless proven otherwise
        else:
            self.keep += (reader, writer)
            self.memo[key] = None
            result = self._calculate(reader, writer, location)
            self.memo[key] = result
        location.pop()
        return result

    def check_fresh(self, reader: Node, writer: Node) -> _Result:
        return self.check("", reader, writer, [])

    def _incompatible(self, kind: str, message: str, location: list[str]) -> _Result:
        return (Incompatibility(kind, message, tuple(location)),)

    def _type_mismatch(self, reader: Node, writer: Node, location: list[str]) -> _Result:
        message = f"reader type: {reader.type.upper()} not compatible with writer type: {writer.type.upper()}"
        return self._incompatible("TYPE_MISMATCH", message, location)

    def _calculate(self, reader: Node, writer: Node, location: list[str]) -> _Result:
        result = _COMPATIBLE
        if reader.type == writer.type:
            kind = reader.type
            if kind == "array":
                assert reader.items is not None and writer.items is not None
                return self.check("items", reader.items, writer.items, location)
            if kind == "map":
                assert reader.values is not None and writer.values is not None
                return self.check("values", reader.values, writer.values, location)
            if kind == "fixed":
                result += self._names(reader, writer, location)
                return result + self._fixed_size(reader, writer, location)
            if kind == "enum":
                result += self._names(reader, writer, location)
                return result + self._enum_symbols(reader, writer, location)
            if kind == "record":
                result += self._names(reader, writer, location)
                return result + self._record_fields(reader, writer, location)
            if kind == "union":
                for index, branch in enumerate(writer.types):
                    location.append(str(index))
                    if self.check_fresh(reader, branch):
                        message = f"reader union lacking writer type: {branch.type.upper()}"
                        result += self._incompatible("MISSING_UNION_BRANCH", message, location)
                    location.pop()
                return result
            return result
        if writer.type == "union":
            for index, branch in enumerate(writer.types):
                result += self.check(str(index), reader, branch, location)
            return result
        if reader.type == "union":
            for branch in reader.types:
                if not self.check_fresh(branch, writer):
                    return result
            message = f"reader union lacking writer type: {writer.type.upper()}"
            return result + self._incompatible("MISSING_UNION_BRANCH", message, location)
        if writer.type in _NUMERIC_PROMOTIONS.get(reader.type, ()):
            return result
        return result + self._type_mismatch(reader, writer, location)

    def _record_fields(self, reader: Node, writer: Node, location: list[str]) -> _Result:
        result = _COMPATIBLE
        location.append("fields")
        for reader_field in reader.fields:
            location.append(str(reader_field.position))
            writer_field = _writer_field(writer, reader_field)
            if writer_field is None:
                if not reader_field.has_default:
                    schema = reader_field.schema
                    if schema.type == "enum" and schema.enum_default is not None:
                        result += self.check("type", schema, writer, location)
                    else:
                        kind = "READER_FIELD_MISSING_DEFAULT_VALUE"
                        result += self._incompatible(kind, reader_field.name, location)
            else:
                result += self.check("type", reader_field.schema, writer_field.schema, location)
            location.pop()
        location.pop()
        return result

    def _enum_symbols(self, reader: Node, writer: Node, location: list[str]) -> _Result:
        result = _COMPATIBLE
        location.append("symbols")
        missing = sorted(set(writer.symbols) - set(reader.symbols), key=lambda s: s.encode("utf-16-be"))
        if missing and not (reader.enum_default is not None and reader.enum_default in reader.symbols):
            result = self._incompatible("MISSING_ENUM_SYMBOLS", "[" + ", ".join(missing) + "]", location)
        location.pop()
        return result

    def _fixed_size(self, reader: Node, writer: Node, location: list[str]) -> _Result:
        result = _COMPATIBLE
        location.append("size")
        if reader.size != writer.size:
            message = f"expected: {writer.size}, found: {reader.size}"
            result = self._incompatible("FIXED_SIZE_MISMATCH", message, location)
        location.pop()
        return result

    def _names(self, reader: Node, writer: Node, location: list[str]) -> _Result:
        result = _COMPATIBLE
        location.append("name")
        assert reader.name is not None and writer.name is not None
        if reader.name.name != writer.name.name and writer.name.full not in reader.alias_names():
            result = self._incompatible("NAME_MISMATCH", f"expected: {writer.name.full}", location)
        location.pop()
        return result


def _writer_field(writer: Node, reader_field: Field) -> Field | None:
    """``lookupWriterField``: the writer's field of the reader field's name or one of its aliases."""
    found = [f for f in [writer.field_named(reader_field.name)] if f is not None]
    found += [f for alias in reader_field.aliases if (f := writer.field_named(alias)) is not None]
    if len(found) > 1:
        raise CheckFailed(
            f"Reader record field {reader_field.name} type:{reader_field.schema.type.upper()}"
            f" pos:{reader_field.position}"
            f" matches multiple fields in writer record schema {to_string(writer)}"
        )
    return found[0] if found else None


def incompatibilities(reader: Node, writer: Node) -> list[Incompatibility]:
    """Avro's incompatibilities of reading data written with ``writer`` using ``reader``."""
    return list(_Checker().check_fresh(reader, writer))


_DESCRIPTIONS = {
    "FIXED_SIZE_MISMATCH": (
        "The size of FIXED type field at path '{path}' in the {reader} schema does not match with the"
        " {writer} schema"
    ),
    "TYPE_MISMATCH": (
        "The type (path '{path}') of a field in the {reader} schema does not match with the {writer} schema"
    ),
    "NAME_MISMATCH": "The name of the schema has changed (path '{path}')",
    "MISSING_ENUM_SYMBOLS": (
        "The {reader} schema is missing enum symbols '{info}' at path '{path}' in the {writer} schema"
    ),
    "MISSING_UNION_BRANCH": (
        "The {reader} schema is missing a type inside a union field at path '{path}' in the {writer} schema"
    ),
    "READER_FIELD_MISSING_DEFAULT_VALUE": (
        "The field '{info}' at path '{path}' in the {reader} schema has no default value and is missing in"
        " the {writer} schema"
    ),
}


def difference(incompatibility: Incompatibility) -> str:
    """Confluent's ``Difference.toString()``: its two ``%s`` left for the registry to fill with the
    reader's and the writer's names, as Confluent's ``SchemaValidatorBuilder`` does ("new", "old" for a
    BACKWARD check; "old", "new" for a FORWARD one), as the other schema types leave theirs."""
    description = _DESCRIPTIONS[incompatibility.kind].format(
        path=incompatibility.path, info=incompatibility.message, reader="%s", writer="%s"
    )
    return (
        f"{{errorType:'{incompatibility.kind}', description:'{description}',"
        f" additionalInfo:'{incompatibility.message}'}}"
    )
