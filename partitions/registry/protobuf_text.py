"""What a .proto file's text says of its fields as written, which a FileDescriptorProto no longer holds.

Confluent's registry prints a schema given as text from Square Wire's syntax tree, where a field keeps
its type as written (``Status``, not protoc's ``.foo.TestMessage.Status``; ``map<string, int32>``, not
the synthetic ``MEntry`` message), its label as written (none in proto3 unless ``optional``) and an
extendee as written. protoc (protobuf_compile) has already checked the text, so this reader only walks
a valid file: a tokenizer and a walk of messages, oneofs, groups and extend blocks; every other
statement is skipped to its ``;`` or its closing brace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<word>\.?[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<number>[-+]?(?:0[xX][0-9A-Fa-f]+|\.?[0-9][0-9A-Za-z_.+-]*))
  | (?P<symbol>.)
    """,
    re.VERBOSE | re.DOTALL,
)

LABELS = frozenset({"optional", "required", "repeated"})


@dataclass(frozen=True, slots=True)
class WrittenField:
    label: str | None  # as written; None when the field has none (proto3, oneof members, maps)
    type: str  # as written: a scalar, a (relative or qualified) name, or "map<K, V>"
    extendee: str | None  # for an extension, the extended message as written


Written = dict[tuple[tuple[str, ...], str], WrittenField]  # (message scope, field name) -> field


def _tokens(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    tokens, spans = [], []
    for match in _TOKEN.finditer(text):
        if match.lastgroup == "space":
            continue
        tokens.append(match.group())
        spans.append(match.span())
    return tokens, spans


class _Walk:
    def __init__(self, text: str) -> None:
        self.tokens, self.spans = _tokens(text)
        self.at = 0
        self.fields: Written = {}
        self.map_entries: dict[tuple[str, ...], tuple[int, int]] = {}  # message -> its map_entry option

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
            if token in "{[(" and token:
                depth += 1
            elif token in "}])" and token:
                depth -= 1
                if depth == 0 and token == "}":
                    return
            elif token == ";" and depth == 0:
                return

    def file(self) -> Written:
        while self.at < len(self.tokens):
            token = self.peek()
            if token == "message":
                self.take()
                self.message((self.take(),))
            elif token == "extend":
                self.take()
                self.extend(())
            else:
                self.skip_statement()
        return self.fields

    def message(self, scope: tuple[str, ...]) -> None:
        self.take()  # {
        while self.at < len(self.tokens) and self.peek() != "}":
            if [self.peek(i) for i in range(5)] == ["option", "map_entry", "=", "true", ";"]:
                self.map_entries[scope] = (self.spans[self.at][0], self.spans[self.at + 4][1])
            self.member(scope, extendee=None)
        self.take()  # }

    def extend(self, scope: tuple[str, ...]) -> None:
        extendee = self.take()
        self.take()  # {
        while self.at < len(self.tokens) and self.peek() != "}":
            self.member(scope, extendee=extendee)
        self.take()

    def member(self, scope: tuple[str, ...], extendee: str | None, in_oneof: bool = False) -> None:
        token = self.peek()
        if token == "message":
            self.take()
            self.message((*scope, self.take()))
        elif token == "oneof":
            self.take()
            self.take()  # its name
            self.take()  # {
            while self.at < len(self.tokens) and self.peek() != "}":
                self.member(scope, extendee, in_oneof=True)
            self.take()
        elif token == "extend":
            self.take()
            self.extend(scope)
        elif token in ("enum", "option", "reserved", "extensions", ";", "service"):
            self.skip_statement()
        else:
            self.field(scope, extendee)

    def field(self, scope: tuple[str, ...], extendee: str | None) -> None:
        label = self.take() if self.peek() in LABELS else None
        if self.peek() == "group":
            self.take()
            name = self.take()
            self.fields[(scope, name.lower())] = WrittenField(label, name, extendee)
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
        self.fields[(scope, name)] = WrittenField(label, written, extendee)
        self.skip_statement()


def written_fields(text: str) -> Written:
    """Each field of a (valid) .proto file's messages and extend blocks, as written."""
    return _Walk(text).file()


def without_map_entry_options(text: str) -> tuple[str, list[tuple[str, ...]]]:
    """The text without its ``option map_entry = true;`` statements (blanked, so that lines and columns
    stay), and the messages that had one. Confluent prints a map given as a FileDescriptorProto as its
    synthetic entry message with that option, which protoc refuses in a text: such a text compiles
    without them, and the option is set back on the compiled messages."""
    walk = _Walk(text)
    walk.file()
    for start, end in sorted(walk.map_entries.values(), reverse=True):
        text = text[:start] + " " * (end - start) + text[end:]
    return text, list(walk.map_entries)
