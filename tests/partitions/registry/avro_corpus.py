"""Avro schemas and pairs of them that the registry's Avro type is checked on against Apache Avro's Java
library (``test_avro_java.py``): each ``Case`` is a reader schema, a writer schema (None: the reader is
only parsed and printed) and the references' texts both may use. Written here, for the rules each
exercises: type promotions, unions, enums and their defaults, fixed sizes, names and aliases, fields and
their defaults, recursive types, references, and how Avro prints (namespaces, numbers, escapes)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Case:
    id: str
    reader: str
    writer: str | None = None
    references: tuple[str, ...] = field(default=())
    datum: str | None = None  # a value of the reader in Avro's JSON encoding


def text(schema: Any) -> str:
    """A schema as JSON text (a primitive's name too: `"string"`)."""
    return json.dumps(schema)


def record(name: str, *fields: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def f(name: str, kind: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, **extra}


def enum(name: str, *symbols: str, **extra: Any) -> dict[str, Any]:
    return {"type": "enum", "name": name, "symbols": list(symbols), **extra}


PRIMITIVES = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
# every primitive read from every primitive: the promotions and the mismatches
PAIRS = [Case(f"prim-{r}-from-{w}", text(r), text(w)) for r in PRIMITIVES for w in PRIMITIVES]

LINKED = record("Node", f("value", "int"), f("next", ["null", "Node"], default=None), namespace="list")
LINKED_LONG = record("Node", f("value", "long"), f("next", ["null", "Node"], default=None), namespace="list")
LINKED_STRING = record(
    "Node", f("value", "string"), f("next", ["null", "Node"], default=None), namespace="list"
)
TREE = record("Tree", f("label", "string"), f("children", {"type": "array", "items": "Tree"}))
MUTUAL = record(
    "A",
    f("b", ["null", record("B", f("a", ["null", "A"], default=None), f("n", "int"))], default=None),
)
MUTUAL_CHANGED = record(
    "A",
    f("b", ["null", record("B", f("a", ["null", "A"], default=None), f("n", "string"))], default=None),
)
SUIT = enum("Suit", "SPADES", "HEARTS", "DIAMONDS", "CLUBS")
SUIT_SHORT = enum("Suit", "SPADES", "HEARTS")
SUIT_DEFAULT = enum("Suit", "SPADES", "HEARTS", "UNKNOWN", default="UNKNOWN")
ADDRESS = record("Address", f("street", "string"), namespace="com.example")
ADDRESS_ZIP = record("Address", f("street", "string"), f("zip", "string"), namespace="com.example")
USES_ADDRESS = record("User", f("name", "string"), f("home", "com.example.Address"), namespace="com.example")
TWICE = record("R", f("a", SUIT), f("b", "Suit"))
TWICE_SHORT = record("R", f("a", SUIT_SHORT), f("b", "Suit"))

PAIRS += [
    Case(
        "add-field-no-default",
        text(record("R", f("a", "int"), f("b", "string"))),
        text(record("R", f("a", "int"))),
    ),
    Case(
        "add-field-default",
        text(record("R", f("a", "int"), f("b", "string", default="x"))),
        text(record("R", f("a", "int"))),
    ),
    Case(
        "remove-field", text(record("R", f("a", "int"))), text(record("R", f("a", "int"), f("b", "string")))
    ),
    Case("field-promoted", text(record("R", f("a", "double"))), text(record("R", f("a", "int")))),
    Case("field-demoted", text(record("R", f("a", "int"))), text(record("R", f("a", "long")))),
    Case("record-renamed", text(record("S", f("a", "int"))), text(record("R", f("a", "int")))),
    Case(
        "record-renamed-alias",
        text(record("S", f("a", "int"), aliases=["R"])),
        text(record("R", f("a", "int"))),
    ),
    Case(
        "record-namespace-changed",
        text(record("R", f("a", "int"), namespace="x")),
        text(record("R", f("a", "int"), namespace="y")),
    ),
    Case(
        "record-alias-namespaced",
        text(record("S", f("a", "int"), namespace="n", aliases=["m.R"])),
        text(record("R", f("a", "int"), namespace="m")),
    ),
    Case(
        "record-alias-other-space",
        text(record("S", f("a", "int"), namespace="n", aliases=["R"])),
        text(record("R", f("a", "int"), namespace="m")),
    ),
    Case("field-alias", text(record("R", f("b", "int", aliases=["a"]))), text(record("R", f("a", "int")))),
    Case(
        "field-alias-two-matches",
        text(record("R", f("a", "int", aliases=["b"]))),
        text(record("R", f("a", "int"), f("b", "int"))),
    ),
    Case("enum-symbol-added", text(SUIT), text(SUIT_SHORT)),
    Case("enum-symbol-removed", text(SUIT_SHORT), text(SUIT)),
    Case("enum-symbol-removed-reader-default", text(SUIT_DEFAULT), text(SUIT)),
    Case("enum-renamed", text(enum("Colour", "SPADES")), text(enum("Suit", "SPADES"))),
    Case(
        "enum-field-missing-with-enum-default",
        text(record("R", f("a", "int"), f("s", SUIT_DEFAULT))),
        text(record("R", f("a", "int"))),
    ),
    Case("enum-twice-memo", text(TWICE_SHORT), text(TWICE)),
    Case(
        "fixed-size",
        text({"type": "fixed", "name": "F", "size": 16}),
        text({"type": "fixed", "name": "F", "size": 8}),
    ),
    Case(
        "fixed-renamed",
        text({"type": "fixed", "name": "G", "size": 8}),
        text({"type": "fixed", "name": "F", "size": 8}),
    ),
    Case("fixed-as-bytes", text("bytes"), text({"type": "fixed", "name": "F", "size": 8})),
    Case("union-reader-has-writer", text(["null", "string"]), text("string")),
    Case("union-reader-promotes-writer", text(["null", "long"]), text("int")),
    Case("union-reader-lacks-writer", text(["null", "string"]), text("int")),
    Case("union-writer-branch-added", text(["null", "string"]), text(["null", "string", "int"])),
    Case("union-writer-branch-removed", text(["null", "string", "int"]), text(["null", "string"])),
    Case("union-to-single", text("string"), text(["null", "string"])),
    Case("union-to-single-promoted", text("double"), text(["int", "long", "float"])),
    Case(
        "union-field-branch-added",
        text(record("R", f("u", ["null", "int"]))),
        text(record("R", f("u", ["null", "int", "string"]))),
    ),
    Case(
        "union-of-records",
        text(["null", record("A", f("x", "int")), record("B", f("y", "int"))]),
        text(["null", record("A", f("x", "int"), f("z", "int"))]),
    ),
    Case(
        "union-of-records-field-added",
        text([record("A", f("x", "int"), f("n", "int"))]),
        text([record("A", f("x", "int"))]),
    ),
    Case(
        "union-array-branch",
        text(["null", {"type": "array", "items": "long"}]),
        text({"type": "array", "items": "int"}),
    ),
    Case(
        "array-items-promoted",
        text({"type": "array", "items": "long"}),
        text({"type": "array", "items": "int"}),
    ),
    Case(
        "array-items-mismatch",
        text({"type": "array", "items": "int"}),
        text({"type": "array", "items": "string"}),
    ),
    Case(
        "map-values-mismatch",
        text({"type": "map", "values": "int"}),
        text({"type": "map", "values": "string"}),
    ),
    Case(
        "map-of-records",
        text({"type": "map", "values": record("V", f("a", "int"), f("b", "int"))}),
        text({"type": "map", "values": record("V", f("a", "int"))}),
    ),
    Case("array-vs-map", text({"type": "array", "items": "int"}), text({"type": "map", "values": "int"})),
    Case("recursive-same", text(LINKED), text(LINKED)),
    Case("recursive-promoted", text(LINKED_LONG), text(LINKED)),
    Case("recursive-mismatch", text(LINKED_STRING), text(LINKED)),
    Case("tree-same", text(TREE), text(TREE)),
    Case("mutual-recursion-changed", text(MUTUAL_CHANGED), text(MUTUAL)),
    Case(
        "error-type",
        text({"type": "error", "name": "E", "fields": [f("m", "string")]}),
        text(record("E", f("m", "string"))),
    ),
    Case(
        "nested-records",
        text(record("O", f("i", record("I", f("a", "int"), f("b", "int"))))),
        text(record("O", f("i", record("I", f("a", "int"))))),
    ),
    Case(
        "many-errors",
        text(record("R", f("a", "string"), f("b", "int"), f("c", SUIT_SHORT))),
        text(record("R", f("a", "int"), f("c", SUIT))),
    ),
    Case("reference-same", text(USES_ADDRESS), text(USES_ADDRESS), (text(ADDRESS),)),
    Case(
        "reference-field-type",
        text(record("User", f("home", "com.example.Address"))),
        text(record("User", f("home", "string"))),
        (text(ADDRESS),),
    ),
    Case(
        "references-chained",
        text(record("Org", f("boss", "com.example.User"))),
        text(record("Org", f("boss", "com.example.User"))),
        (text(ADDRESS), text(USES_ADDRESS)),
    ),
    Case(
        "record-to-union-of-it", text(["null", record("R", f("a", "int"))]), text(record("R", f("a", "int")))
    ),
    Case("string-to-enum", text(SUIT), text("string")),
    Case(
        "order-and-doc",
        text(record("R", f("a", "int", order="descending", doc="d"), doc="r")),
        text(record("R", f("a", "int"))),
    ),
]

# Avro's walk where it is least obvious: a pair met first inside a union's check (from the root) and
# again in a field, unions against unions, aliases of enums and fixed, deep recursion
R_OLD = record("R", f("a", "int"))
R_NEW = record("R", f("a", "int"), f("b", "int"))
PAIRS += [
    Case(
        "memo-union-then-field",
        text(record("O", f("x", ["null", R_NEW]), f("y", "R"))),
        text(record("O", f("x", R_OLD), f("y", "R"))),
    ),
    Case(
        "memo-field-then-union",
        text(record("O", f("y", R_NEW), f("x", ["null", "R"]))),
        text(record("O", f("y", R_OLD), f("x", "R"))),
    ),
    Case("union-vs-union-records", text(["null", R_NEW]), text(["null", R_OLD])),
    Case("union-branch-order", text(["string", "null", "int"]), text(["int", "string", "null"])),
    Case("union-enum-short", text(["null", SUIT_SHORT]), text(SUIT)),
    Case("enum-alias", text(enum("Colour", "SPADES", aliases=["Suit"])), text(enum("Suit", "SPADES"))),
    Case(
        "fixed-alias",
        text({"type": "fixed", "name": "G", "size": 8, "aliases": ["F"]}),
        text({"type": "fixed", "name": "F", "size": 8}),
    ),
    Case(
        "field-alias-type-changed",
        text(record("R", f("b", "string", aliases=["a"]))),
        text(record("R", f("a", "int"))),
    ),
    Case(
        "array-of-unions",
        text({"type": "array", "items": ["null", "long"]}),
        text({"type": "array", "items": ["null", "int", "string"]}),
    ),
    Case("map-of-enums", text({"type": "map", "values": SUIT_SHORT}), text({"type": "map", "values": SUIT})),
    Case(
        "tree-label-changed",
        text(record("Tree", f("label", "int"), f("children", {"type": "array", "items": "Tree"}))),
        text(TREE),
    ),
    Case(
        "writer-union-reader-renamed-alias",
        text(record("S", f("a", "int"), aliases=["R"])),
        text(["null", R_OLD]),
    ),
    Case(
        "enum-default-field-missing-writer-has-enum",
        text(record("R", f("s", SUIT_DEFAULT))),
        text(record("R", f("t", SUIT))),
    ),
    Case(
        "reference-enum-changed",
        text(record("U", f("s", "Suit"))),
        text(record("U", f("s", "string"))),
        (text(SUIT),),
    ),
]

# Double.toString's digits; not 1e23: Java 17's (installed) prints 9.999999999999999E22, not the shortest
# digits Java 19 and later print (1.0E23), which ours are (JDK-4511638)
DOUBLES = [1, 1.0, 1e10, 0.001, 1e-4, -0.0, 123456789.0, 1e7, 9999999.0, 1.5e300, 2.5e-300, 0.1, 5e-324]
DOUBLES += [1.7976931348623157e308, 0.0009999, 2e-323]

# printing: namespaces, names written by reference, defaults' numbers and strings, props and aliases
PRINTED = [
    Case(
        "print-nested-null-namespace",
        text(record("R", f("i", record("I", f("a", "int"), namespace="")), namespace="n")),
    ),
    Case(
        "print-nested-namespace",
        text(record("R", f("i", record("I", f("a", "int"), namespace="m")), f("j", "m.I"), namespace="n")),
    ),
    Case(
        "print-dotted-names",
        text(
            record(
                "a.b.R",
                f("i", record("c.I", f("a", "int"))),
                f("j", {"type": "enum", "name": "E", "symbols": ["X"]}),
            )
        ),
    ),
    Case(
        "print-name-is-type-name",
        text(record("R", f("i", record("record", f("a", "int"))), f("j", "n.record"), namespace="n")),
    ),
    Case(
        "print-doubles",
        text(
            record(
                "R",
                *[f(f"d{i}", "double", default=v) for i, v in enumerate(DOUBLES)],
            )
        ),
    ),
    Case(
        "print-floats",
        text(
            record(
                "R",
                f("a", "float", default=0.1),
                f("b", "float", default="1.5"),
                f("c", "double", default="NaN"),
                f("d", "float", default="-Infinity"),
            )
        ),
    ),
    Case(
        "print-longs",
        text(record("R", f("a", "long", default=9223372036854775807), f("b", "int", default=-2147483648))),
    ),
    Case(
        "print-strings",
        text(record("R", f("a", "string", default='q"b\\s/\n\t\b\f\r\x01\x1f\x7f é \u2028 ☃'), doc="d\x00c")),
    ),
    Case(
        "print-bytes-default",
        text(
            record(
                "R",
                f("a", "bytes", default="\u00ff\u0000"),
                f("b", {"type": "fixed", "name": "F", "size": 2}, default="ab"),
            )
        ),
    ),
    Case(
        "print-complex-defaults",
        text(
            record(
                "R",
                f("a", {"type": "array", "items": "int"}, default=[1, 2]),
                f("m", {"type": "map", "values": ["null", "string"]}, default={"k": None}),
                f("r", record("S", f("x", "int", default=3)), default={}),
            )
        ),
    ),
    Case(
        "print-props",
        text(
            {
                "type": "record",
                "name": "R",
                "zeta": 1,
                "alpha": {"b": [True, None]},
                "fields": [
                    f("a", {"type": "string", "logicalType": "uuid", "connect.name": "x"}, custom=[1])
                ],
            }
        ),
    ),
    Case("print-primitive-props", text({"type": "long", "logicalType": "timestamp-millis"})),
    Case("print-primitive-doc-dropped", text({"type": "int", "doc": "dropped"})),
    Case(
        "print-aliases",
        text(record("R", f("a", "int", aliases=["x", "y", "x"]), namespace="n", aliases=["S", "m.T", "n.U"])),
    ),
    Case("print-enum", text(enum("E", "A", "B", default="B", doc="e", namespace="n", aliases=["F"]))),
    Case("print-bare-primitive", text("string")),
    Case("print-union-top", text(["null", "int", record("R", f("a", "int"))])),
    Case("print-reference-by-name", text(USES_ADDRESS), references=(text(ADDRESS),)),
    Case(
        "print-reference-nested-inlined",
        text(record("Z", f("i", "I"))),
        references=(text(record("O", f("i", record("I", f("a", "int"))))),),
    ),
    Case("print-forward-reference", text(record("R", f("a", "E"), f("b", enum("E", "X"))))),
    Case(
        "print-same-record-twice",
        text(record("R", f("a", record("S", f("x", "int"))), f("b", record("S", f("x", "int"))))),
    ),
    Case(
        "print-order-values",
        text(
            record(
                "R",
                f("a", "int", order="DESCENDING"),
                f("b", "int", order="ignore"),
                f("c", "int", order="ascending"),
            )
        ),
    ),
    Case("print-error-record", text({"type": "error", "name": "E", "fields": []})),
    Case("print-union-default-second-branch", text(record("R", f("a", ["null", "int"], default=5)))),
    Case("print-record-default-prop", text(record("R", f("a", SUIT), default=5))),
    Case("print-enum-default-not-a-symbol", text(record("R", f("a", SUIT, default="JOKER")))),
    Case("print-whitespace", '  { "type" : "record" ,\n "name" : "R" , "fields" : [ ] }  '),
]

# texts Avro refuses (a schema registered anew): the error must be the same, its words too
INVALID = [
    Case("bad-json", '{"type": "record",'),
    Case("bad-json-trailing", '"string" "int"'),
    Case("not-a-type", text("strin")),
    Case("unknown-kind", text({"type": "structure", "name": "R"})),
    Case("no-type", text({"name": "R"})),
    Case("number", "5"),
    Case("record-no-fields", text({"type": "record", "name": "R"})),
    Case("record-no-name", text({"type": "record", "fields": []})),
    Case("bad-record-name", text(record("1R"))),
    Case("bad-record-name-char", text(record("R-1"))),
    Case("bad-namespace", text(record("R", namespace="a.1b"))),
    Case("empty-namespace-part", text(record("R", namespace="a..b"))),
    Case("bad-field-name", text(record("R", f("a b", "int")))),
    Case("duplicate-field", text(record("R", f("a", "int"), f("a", "string")))),
    Case("field-no-type", text(record("R", {"name": "a"}))),
    Case("bad-default-int", text(record("R", f("a", "int", default="x")))),
    Case("bad-default-int-range", text(record("R", f("a", "int", default=2147483648)))),
    Case("bad-default-union", text(record("R", f("a", ["null", "int"], default="x")))),
    Case("bad-default-record", text(record("R", f("a", record("S", f("x", "int")), default={"y": 1})))),
    Case("bad-default-float-text", text(record("R", f("a", "float", default="abc")))),
    Case("bad-default-enum", text(record("R", f("a", SUIT, default=5)))),
    Case("named-after-primitive", text(record("int"))),
    Case(
        "redefined", text(record("R", f("a", record("S", f("x", "int"))), f("b", record("S", f("y", "int")))))
    ),
    Case("nested-union", text(["null", ["int", "string"]])),
    Case("duplicate-in-union", text(["null", "int", "int"])),
    Case("duplicate-record-in-union", text([record("R", f("a", "int")), "R"])),
    Case("enum-duplicate-symbol", text(enum("E", "A", "A"))),
    Case("enum-bad-symbol", text(enum("E", "A", "1B"))),
    Case("enum-default-unknown", text(enum("E", "A", default="B"))),
    Case("enum-no-symbols", text({"type": "enum", "name": "E"})),
    Case("fixed-no-size", text({"type": "fixed", "name": "F"})),
    Case("fixed-negative", text({"type": "fixed", "name": "F", "size": -1})),
    Case("fixed-size-text", text({"type": "fixed", "name": "F", "size": "8"})),
    Case("array-no-items", text({"type": "array"})),
    Case("map-no-values", text({"type": "map"})),
    Case("undefined-name", text(record("R", f("a", "Missing")))),
    Case("aliases-not-array", text(record("R", aliases="S"))),
    Case("bad-alias", text(record("R", aliases=["1S"]))),
    Case("bad-order", text(record("R", f("a", "int", order="sideways")))),
    Case(
        "reference-redefined",
        text(record("com.example.Address", f("city", "string"))),
        references=(text(ADDRESS),),
    ),
]

RICH = record(
    "Rich",
    f("i", "int"),
    f("l", "long"),
    f("fl", "float"),
    f("d", "double"),
    f("b", "boolean"),
    f("s", "string"),
    f("by", "bytes"),
    f("fx", {"type": "fixed", "name": "Four", "size": 4}),
    f("e", SUIT),
    f("a", {"type": "array", "items": "int"}),
    f("m", {"type": "map", "values": ["null", "string"]}),
    f(
        "u",
        [
            "null",
            "int",
            "long",
            "string",
            "Suit",
            "Four",
            {"type": "array", "items": "int"},
            record("In", f("x", "int")),
        ],
    ),
    namespace="com.example",
)
RICH_VALUE = {
    "i": -2147483648, "l": 9223372036854775807, "fl": 0.1, "d": 1e-300, "b": True, "s": "é☃𝄞\n\"",
    "by": "\u00ff\u0000a", "fx": "\u0001\u0002\u0003\u00fe", "e": "CLUBS", "a": [1, -1, 0],
    "m": {"k": None}, "u": None,  # one entry: Avro writes a map in its hash map's order
}  # fmt: skip
UNION_VALUES = [
    {"int": 1}, {"long": -5}, {"string": ""}, {"com.example.Suit": "HEARTS"}, {"com.example.Four": "abcd"},
    {"array": [7]}, {"com.example.In": {"x": 3}},
]  # fmt: skip
FLOATS = [0.1, 1e10, 3.4028234663852886e38, 1.401298464324817e-45, 123.456, -2.5, 0, 16777217, 5e-324, 1e23]

# values: Avro's JsonDecoder reads them, its binary encoder writes them, its JsonEncoder writes them back
DATA = [
    Case("datum-rich", text(RICH), datum=json.dumps(RICH_VALUE)),
    *[
        Case(f"datum-union-{i}", text(RICH), datum=json.dumps({**RICH_VALUE, "u": value}))
        for i, value in enumerate(UNION_VALUES)
    ],
    *[Case(f"datum-float-{i}", text("float"), datum=json.dumps(value)) for i, value in enumerate(FLOATS)],
    *[Case(f"datum-double-{i}", text("double"), datum=json.dumps(value)) for i, value in enumerate(FLOATS)],
    Case(
        "datum-list",
        text(LINKED),
        datum=json.dumps({"value": 1, "next": {"list.Node": {"value": 2, "next": None}}}),
    ),
    Case(
        "datum-tree",
        text(TREE),
        datum=json.dumps({"label": "r", "children": [{"label": "c", "children": []}]}),
    ),
    Case("datum-top-union", text(["null", "string"]), datum=json.dumps({"string": "x"})),
    Case(
        "datum-map",
        text({"type": "map", "values": ["null", "string"]}),
        datum=json.dumps({"v": {"string": "x"}}),
    ),
    Case("datum-top-null", text(["null", "string"]), datum="null"),
    Case("datum-empty-record", text(record("E")), datum="{}"),
    Case("datum-array-of-null", text({"type": "array", "items": "null"}), datum="[null, null, null]"),
    Case("datum-long-min", text("long"), datum=str(-(2**63))),
    Case("datum-float-overflow", text("float"), datum="1e300"),  # read as a float: Infinity
    Case("datum-double-special", text(["null", "double"]), datum='{"double": "NaN"}'),
    # values Avro's JsonDecoder refuses
    Case("datum-bad-wrong-type", text(record("R", f("a", "int"))), datum='{"a": "x"}'),
    Case("datum-bad-union-bare", text(["null", "string"]), datum='"x"'),
    Case("datum-bad-union-branch", text(["null", "string"]), datum='{"int": 1}'),
    Case("datum-bad-enum", text(SUIT), datum='"JOKER"'),
    Case("datum-bad-fixed-size", text({"type": "fixed", "name": "F", "size": 2}), datum='"abc"'),
    Case("datum-bad-int-range", text("int"), datum="2147483648"),
    Case("datum-bad-missing-field", text(record("R", f("a", "int"), f("b", "int"))), datum='{"a": 1}'),
    Case(
        "datum-bad-missing-field-default",
        text(record("R", f("a", "int"), f("b", "int", default=2))),
        datum='{"a": 1}',
    ),
]

CASES = PAIRS + PRINTED + INVALID + DATA
