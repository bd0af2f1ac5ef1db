"""What a .proto file's text says as written, which a FileDescriptorProto no longer holds.

Confluent's registry prints a schema given as text from Square Wire's syntax tree, which keeps the text's
own words: a field's type as written (``Status``, not protoc's ``.foo.TestMessage.Status``;
``map<string, int32>``, not the synthetic ``MEntry`` message), its label as written (none in proto3
unless ``optional``), an extendee, an rpc's types, a range (``20 to 20``), the syntax statement, and each
option as Wire's ``OptionReader`` reads it (``(meta).owner.value = "x"`` stays that, not the aggregate
protoc makes of it). protoc (protobuf_compile) has already checked the text, so this reader only walks a
valid file: a tokenizer and a walk of its statements.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from partitions.registry.protobuf_elements import (
    MAX_TAG,
    SCALAR_KINDS,
    Extensions,
    Kind,
    Option,
    Primitive,
    Reserved,
)

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<word>\.?[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<number>[-+]?(?:0[xX][0-9A-Fa-f]+|\.?[0-9][0-9A-Za-z_.]*(?:[eE][-+]?[0-9]+)?))
  | (?P<symbol>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_ESCAPE = re.compile(r"\\(x[0-9A-Fa-f]{1,2}|[0-7]{1,3}|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)", re.DOTALL)

LABELS = frozenset({"optional", "required", "repeated"})
Scope = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class WrittenField:
    label: str | None  # as written; None when the field has none (proto3, oneof members, maps)
    type: str  # as written: a scalar, a (relative or qualified) name, or "map<K, V>"
    extendee: str | None  # for an extension, the extended message as written
    options: list[Option]  # as written, without default and json_name
    default: str | None
    group: bool = False  # a proto2 group: ``type`` is its name


@dataclass(slots=True)
class Written:
    """A file's text as written. ``options`` by element: ("file",), ("message", *path),
    ("enum", *path), ("value", *enum path, name), ("oneof", *path, name), ("service", name),
    ("rpc", service, name); ``reserveds`` by ("message" | "enum", *path); ``extensions`` by path."""

    syntax: str | None = None
    fields: dict[tuple[Scope, str], WrittenField] = field(default_factory=dict)
    options: dict[tuple[str, ...], list[Option]] = field(default_factory=dict)
    reserveds: dict[tuple[str, ...], list[Reserved]] = field(default_factory=dict)
    extensions: dict[Scope, list[Extensions]] = field(default_factory=dict)
    rpc_types: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    map_entries: dict[Scope, tuple[int, int]] = field(default_factory=dict)  # message -> its option's span


def _unescape(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        escape = match.group(1)
        if escape[0] in "xX":
            return chr(int(escape[1:], 16))
        if escape[0] in "uU":
            return chr(int(escape[1:], 16))
        if escape[0].isdigit():
            return chr(int(escape, 8))
        return _ESCAPES.get(escape, escape)

    return _ESCAPE.sub(one, text)


class _Walk:
    def __init__(self, text: str) -> None:
        self.tokens: list[str] = []
        self.spans: list[tuple[int, int]] = []
        for match in _TOKEN.finditer(text):
            if match.lastgroup != "space":
                self.tokens.append(match.group())
                self.spans.append(match.span())
        self.at = 0
        self.written = Written()

    def peek(self, ahead: int = 0) -> str:
        index = self.at + ahead
        return self.tokens[index] if index < len(self.tokens) else ""

    def take(self) -> str:
        token = self.peek()
        self.at += 1
        return token

    def skip_statement(self) -> None:
        """To the end of the statement: its ``;`` or its balanced ``{ ... }`` block."""
        depth = 0
        while self.at < len(self.tokens):
            token = self.take()
            if token in ("{", "[", "("):
                depth += 1
            elif token in ("}", "]", ")"):
                depth -= 1
                if depth == 0 and token == "}":
                    return
            elif token == ";" and depth == 0:
                return

    def file(self) -> Written:
        while self.at < len(self.tokens):
            token = self.peek()
            if token == "syntax" and self.peek(1) == "=":
                self.written.syntax = _unescape(self.peek(2)[1:-1])
                self.skip_statement()
            elif token == "message":
                self.take()
                self.message((self.take(),))
            elif token == "enum":
                self.take()
                self.enum((self.take(),))
            elif token == "extend":
                self.take()
                self.extend(())
            elif token == "service":
                self.take()
                self.service(self.take())
            elif token == "option":
                self.option_statement(("file",))
            else:
                self.skip_statement()
        return self.written

    def option_statement(self, key: tuple[str, ...]) -> None:
        self.take()  # option
        self.written.options.setdefault(key, []).append(self.option("="))
        self.skip_statement()

    def message(self, scope: Scope) -> None:
        self.written.options.setdefault(("message", *scope), [])
        self.take()  # {
        while self.at < len(self.tokens) and self.peek() != "}":
            if [self.peek(i) for i in range(5)] == ["option", "map_entry", "=", "true", ";"]:
                self.written.map_entries[scope] = (self.spans[self.at][0], self.spans[self.at + 4][1])
            self.member(scope, extendee=None)
        self.take()  # }

    def extend(self, scope: Scope) -> None:
        extendee = self.take()
        self.take()  # {
        while self.at < len(self.tokens) and self.peek() != "}":
            self.member(scope, extendee=extendee)
        self.take()

    def enum(self, path: Scope) -> None:
        self.written.options.setdefault(("enum", *path), [])
        self.take()  # {
        while self.at < len(self.tokens) and self.peek() != "}":
            token = self.peek()
            if token == "option":
                self.option_statement(("enum", *path))
            elif token == "reserved":
                self.reserved(("enum", *path), enum=True)
            elif token == ";":
                self.take()
            else:
                name = self.take()
                options: list[Option] = []
                while self.peek() not in ("[", ";", ""):
                    self.take()
                if self.peek() == "[":
                    options = self.option_list()
                self.written.options[("value", *path, name)] = options
                self.skip_statement()
        self.take()

    def service(self, name: str) -> None:
        self.written.options.setdefault(("service", name), [])
        self.take()  # {
        while self.at < len(self.tokens) and self.peek() != "}":
            token = self.peek()
            if token == "option":
                self.option_statement(("service", name))
            elif token == "rpc":
                self.take()
                rpc = self.take()
                self.take()  # (
                request = self.take()
                if request == "stream" and self.peek() != ")":
                    request = self.take()
                self.take()  # )
                self.take()  # returns
                self.take()  # (
                response = self.take()
                if response == "stream" and self.peek() != ")":
                    response = self.take()
                self.take()  # )
                self.written.rpc_types[(name, rpc)] = (request, response)
                self.written.options[("rpc", name, rpc)] = []
                if self.peek() == "{":
                    self.take()
                    while self.at < len(self.tokens) and self.peek() != "}":
                        if self.peek() == "option":
                            self.option_statement(("rpc", name, rpc))
                        else:
                            self.skip_statement()
                    self.take()
                if self.peek() == ";":
                    self.take()
            else:
                self.skip_statement()
        self.take()

    def member(self, scope: Scope, extendee: str | None, oneof: str | None = None) -> None:
        token = self.peek()
        if token == "message":
            self.take()
            self.message((*scope, self.take()))
        elif token == "enum":
            self.take()
            self.enum((*scope, self.take()))
        elif token == "oneof":
            self.take()
            name = self.take()
            self.written.options.setdefault(("oneof", *scope, name), [])
            self.take()  # {
            while self.at < len(self.tokens) and self.peek() != "}":
                if self.peek() == "option":
                    self.option_statement(("oneof", *scope, name))
                else:
                    self.member(scope, extendee, oneof=name)
            self.take()
        elif token == "extend":
            self.take()
            self.extend(scope)
        elif token == "option":
            self.option_statement(("message", *scope))
        elif token == "reserved":
            self.reserved(("message", *scope), enum=False)
        elif token == "extensions":
            self.take()
            values = self.ranges()
            options = self.option_list() if self.peek() == "[" else []
            self.written.extensions.setdefault(scope, []).append(Extensions(values, options))  # type: ignore[arg-type]
            self.skip_statement()
        elif token == ";":
            self.take()
        else:
            self.field(scope, extendee)

    def reserved(self, key: tuple[str, ...], enum: bool) -> None:
        self.take()  # reserved
        self.written.reserveds.setdefault(key, []).append(Reserved(self.ranges(enum)))
        self.skip_statement()

    def ranges(self, enum: bool = False) -> list[int | tuple[int, int] | str]:
        values: list[int | tuple[int, int] | str] = []
        while self.peek() not in (";", "[", ""):
            token = self.take()
            if token == ",":
                continue
            if token[0] in "\"'":
                values.append(_unescape(token[1:-1]))
            elif self.peek() == "to":
                self.take()
                end = self.take()
                if end == "max":
                    values.append((int(token, 0), 2**31 - 1 if enum else MAX_TAG))
                else:
                    values.append((int(token, 0), int(end, 0)))
            else:
                values.append(int(token, 0))
        return values

    def field(self, scope: Scope, extendee: str | None) -> None:
        label = self.take() if self.peek() in LABELS else None
        if self.peek() == "group":
            self.take()
            name = self.take()
            self.written.fields[(scope, name.lower())] = WrittenField(
                label, name, extendee, [], None, group=True
            )
            while self.peek() not in ("{", ""):
                self.take()
            self.message((*scope, name))
            return
        if self.peek() == "map" and self.peek(1) == "<":
            self.at += 2
            key = self.take()
            self.take()  # ,
            value = self.take()
            self.take()  # >
            written = f"map<{key}, {value}>"
        else:
            written = self.take()
        name = self.take()
        while self.peek() not in ("[", ";", ""):
            self.take()
        options = self.option_list() if self.peek() == "[" else []
        default = next((str(o.value) for o in options if o.name == "default" and not o.parenthesized), None)
        kept = [o for o in options if o.parenthesized or o.name not in ("default", "json_name")]
        self.written.fields[(scope, name)] = WrittenField(label, written, extendee, kept, default)
        self.skip_statement()

    # --- Wire's OptionReader ------------------------------------------------------------------------

    def option_list(self) -> list[Option]:
        self.take()  # [
        options = []
        while self.peek() not in ("]", ""):
            options.append(self.option("="))
            if self.peek() == ",":
                self.take()
        self.take()  # ]
        return options

    def option(self, separator: str) -> Option:
        parenthesized = extension = False
        if self.peek() == "(":
            self.take()
            name = self.take()
            self.take()  # )
            parenthesized = True
        elif self.peek() == "[":
            self.take()
            name = "[" + self.take() + "]"
            self.take()  # ]
            extension = True
        else:
            name = self.take()
        sub_name = None
        if not extension and not parenthesized and "." in name and separator == "=":
            name, sub_name = name.split(".", 1)
        elif self.peek().startswith("."):
            sub_name = self.take()[1:]
        if self.peek() == separator:
            self.take()
        elif not (separator == ":" and self.peek() == "{"):
            raise ValueError(f"expected {separator!r} in option {name}")
        kind, value = self.kind_and_value()
        if sub_name is not None:
            value, kind = Option(sub_name, kind, value), Kind.OPTION
        return Option(name, kind, value, parenthesized)

    def kind_and_value(self) -> tuple[Kind, Any]:
        token = self.peek()
        if token == "{":
            return Kind.MAP, self.option_map()
        if token == "[":
            return Kind.LIST, self.option_list_value()
        if token[:1] in ("'", '"'):
            text = ""
            while self.peek()[:1] in ("'", '"'):
                text += _unescape(self.take()[1:-1])
            return Kind.STRING, text
        if token == "-" and self.peek(1):
            self.take()
            return Kind.NUMBER, "-" + self.take()
        self.take()
        if token[:1].isdigit() or token[:1] in "-+." or token in ("inf", "nan"):
            return Kind.NUMBER, token
        if token in ("true", "false"):
            return Kind.BOOLEAN, token
        return Kind.ENUM, token

    def option_map(self) -> dict[str, Any]:
        self.take()  # {
        found: dict[str, Any] = {}
        while self.peek() not in ("}", ""):
            option = self.option(":")
            value: Any = option.value
            if isinstance(value, Option):
                nested = found.setdefault(option.name, {})
                nested[value.name] = value.value
            else:
                if option.kind in SCALAR_KINDS:
                    value = Primitive(option.kind, value)
                previous = found.get(option.name)
                if previous is None:
                    found[option.name] = value
                elif isinstance(previous, list):
                    previous.extend(value if isinstance(value, list) else [value])
                else:
                    found[option.name] = [previous, *(value if isinstance(value, list) else [value])]
            if self.peek() in (",", ";"):
                self.take()
        self.take()  # }
        return found

    def option_list_value(self) -> list[Any]:
        self.take()  # [
        values = []
        while self.peek() not in ("]", ""):
            kind, value = self.kind_and_value()
            values.append(Primitive(kind, value) if kind in SCALAR_KINDS else value)
            if self.peek() == ",":
                self.take()
        self.take()  # ]
        return values


def written_file(text: str) -> Written:
    """A (valid) .proto file's text as written."""
    return _Walk(text).file()


def without_map_entry_options(text: str, written: Written) -> tuple[str, list[Scope]]:
    """The text without its ``option map_entry = true;`` statements (blanked, so that lines and columns
    stay), and the messages that had one. Confluent prints a map given as a FileDescriptorProto as its
    synthetic entry message with that option, which protoc refuses in a text: such a text compiles
    without them, and the option is set back on the compiled messages."""
    for start, end in sorted(written.map_entries.values(), reverse=True):
        text = text[:start] + " " * (end - start) + text[end:]
    return text, list(written.map_entries)
