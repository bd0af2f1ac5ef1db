"""A .proto file's text compiled into FileDescriptorProtos by protoc itself, in this process.

Why protoc (grpcio-tools' bundled copy, Google's own compiler, run in-process): it is the reference for
what a .proto file means (name resolution, proto2/proto3 rules, maps, groups, extensions, custom
options), its errors name the file, line and column as every Protobuf user knows them, and a file
compiles in about a millisecond. The pure-Python parsers (proto-schema-parser) give a syntax tree only:
every rule protoc checks would be ours to rewrite. grpcio-tools costs about 10 MB installed.

``get_protos`` is the one entry of grpc_tools that returns errors as values (``run_main`` prints them to
the process's stderr); it answers the Python modules protoc generates, each of which carries its file's
serialized FileDescriptorProto as the literal argument of ``AddSerializedFile``: that literal is read
with ``ast.literal_eval`` (nothing generated is executed). A schema's text and the imports it references
(``resolved``) are written into a private temporary directory per compilation; the files Confluent's
registry resolves without a reference are found after them: Google's well-known types (shipped with
grpc_tools), Google's common types (google/type/*.proto, from googleapis-common-protos) and Confluent's
own (below).
"""

from __future__ import annotations

import ast
import atexit
import concurrent.futures
import multiprocessing
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

from google.protobuf import descriptor_pb2

from partitions.registry.schema_types import InvalidSchema

# Confluent's own types, which its registry (and its serializers) resolve without a reference: the
# files of Confluent's kafka-protobuf-types (Apache License 2.0), as its schema-registry repository
# holds them in protobuf-types/src/main/proto/confluent/.
CONFLUENT_FILES: Mapping[str, str] = {
    "confluent/meta.proto": """syntax = "proto3";
package confluent;

import "google/protobuf/descriptor.proto";

option java_package = "io.confluent.protobuf";
option java_outer_classname = "MetaProto";

message Meta {
  string doc = 1;
  map<string, string> params = 2;
  repeated string tags = 3;
  repeated Rule rules = 4;
}
message Rule {
  string name = 1;
  string doc = 2;
  string expr = 3;
  string sql = 4;
}

extend google.protobuf.FileOptions {
  Meta file_meta = 1088;
}
extend google.protobuf.MessageOptions {
  Meta message_meta = 1088;
}
extend google.protobuf.FieldOptions {
  Meta field_meta = 1088;
}
extend google.protobuf.EnumOptions {
  Meta enum_meta = 1088;
}
extend google.protobuf.EnumValueOptions {
  Meta enum_value_meta = 1088;
}
""",
    "confluent/type/decimal.proto": """syntax = "proto3";

package confluent.type;

option java_package = "io.confluent.protobuf.type";
option java_multiple_files = true;
option java_outer_classname = "DecimalProto";

message Decimal {
  bytes value = 1;
  uint32 precision = 2;
  int32 scale = 3;
}
""",
    "confluent/type/variant.proto": """syntax = "proto3";

package confluent.type;

option java_package = "io.confluent.protobuf.type";
option java_multiple_files = true;
option java_outer_classname = "VariantProto";

message Variant {
  bytes metadata = 1;
  bytes value = 2;
}
""",
}
# Google's common types Confluent's registry resolves too, as googleapis-common-protos ships them.
GOOGLE_TYPES = (
    "calendar_period",
    "color",
    "date",
    "datetime",
    "dayofweek",
    "decimal",
    "expr",
    "fraction",
    "interval",
    "latlng",
    "money",
    "month",
    "phone_number",
    "postal_address",
    "quaternion",
    "timeofday",
)

MAIN_FILE = "schema.proto"
ERRORS_SHOWN = 5  # of protoc's errors, in a refusal
_PROTO2 = 'syntax = "proto2";'
_STATES_SYNTAX = re.compile(
    r"(?:\s|//[^\n]*|/\*.*?\*/)*(?:syntax|edition)\s*=", re.DOTALL
)  # the name the schema's own file compiles under (not an import path)


_known_root: str | None = None
_known_root_lock = threading.Lock()


def _include_roots() -> list[bytes]:
    """Where protoc finds the files a schema may import without a reference, after the schema's own
    directory: Confluent's files and Google's common types (written once per process into a private
    directory, removed at exit), then Google's well-known types as grpc_tools ships them."""
    global _known_root
    with _known_root_lock:
        if _known_root is None:
            root = tempfile.mkdtemp(prefix="raftlog-proto-known-")
            atexit.register(shutil.rmtree, root, True)
            google_type = resources.files("google.type")
            files = {**CONFLUENT_FILES}
            files.update(
                {
                    f"google/type/{name}.proto": (google_type / f"{name}.proto").read_text()
                    for name in GOOGLE_TYPES
                }
            )
            for name, text in files.items():
                os.makedirs(os.path.join(root, os.path.dirname(name)), exist_ok=True)
                with open(os.path.join(root, name), "w", encoding="utf-8") as file:
                    file.write(text)
            _known_root = root
    return [_known_root.encode(), str(resources.files("grpc_tools") / "_proto").encode()]


_SERIALIZED_FILE = re.compile(rb"""AddSerializedFile\((b'(?:[^'\\]|\\.)*'|b"(?:[^"\\]|\\.)*")\)""")


def _serialized_file(code: bytes) -> bytes:
    """The FileDescriptorProto that a module generated by protoc's Python generator registers: the
    bytes literal it passes to ``AddSerializedFile``, read as a literal (nothing generated is run)."""
    match = _SERIALIZED_FILE.search(code)
    if match is not None:
        value = ast.literal_eval(match.group(1).decode("ascii"))
        if isinstance(value, bytes):
            return value
    raise RuntimeError(
        "protoc's generated module registers no serialized file: grpcio-tools changed its output"
    )


_work_root: str | None = None
_work_lock = threading.Lock()  # one compilation at a time writes into the work directory


def compile_files(
    main_text: str, imports: Mapping[str, str]
) -> tuple[descriptor_pb2.FileDescriptorProto, dict[str, descriptor_pb2.FileDescriptorProto]]:
    """``main_text`` compiled with ``imports`` (import path -> text) and Confluent's and Google's files:
    the main file's descriptor and every file it imports transitively, by name.

    The files are written into a private directory of this process (created once, removed at exit) and
    removed again after each compilation: a temporary directory per schema cost more than protoc itself
    (removing directories is slow on an overlay file system)."""
    global _work_root
    include_roots = _include_roots()
    main_name = MAIN_FILE if MAIN_FILE not in imports else "raftlog-schema.proto"  # an import's name wins
    files = {**imports, main_name: main_text}
    with _work_lock:
        if _work_root is None:
            _work_root = tempfile.mkdtemp(prefix="raftlog-proto-")
            atexit.register(shutil.rmtree, _work_root, True)
        root = _work_root
        shifted: set[str] = set()
        written: list[str] = []
        try:
            for name, text in files.items():
                if not _STATES_SYNTAX.match(text):
                    # proto2 as protoc defaults to it, said on the first line, so that protoc does not log
                    # a warning to the process's stderr for each such file (its columns are given back)
                    text = _PROTO2 + text
                    shifted.add(name)
                path = os.path.normpath(os.path.join(root, name))
                if not path.startswith(root + os.sep):
                    raise InvalidSchema(f"Invalid import path {name!r}")
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as file:
                    written.append(path)
                    file.write(text)
            size = sum(len(text) for text in files.values())
            generated, errors = _protoc(main_name.encode(), [root.encode(), *include_roots], size)
            if errors:
                messages = [_error_text(error, root, shifted) for error in errors]
                if len(messages) > ERRORS_SHOWN:  # the first errors say what is wrong; the rest follow
                    messages[ERRORS_SHOWN:] = [f"and {len(messages) - ERRORS_SHOWN} more errors"]
                raise InvalidSchema("; ".join(messages))
        finally:
            for path in written:
                os.unlink(path)
    descriptors: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for _module, code in generated:
        proto = descriptor_pb2.FileDescriptorProto.FromString(_serialized_file(code))
        descriptors[proto.name] = proto
    main = descriptors.pop(main_name)
    return main, descriptors


# protoc holds the GIL while it compiles (about 4 us a byte of schema): a file this large or smaller is
# compiled in this process (a few tens of ms at most), a larger one in a child process, so that the
# node's event loop is never held by it (a 550 KB schema held it 2.3 s)
INLINE_TEXT_CHARACTERS_MAX = 16 * 1024
_child: concurrent.futures.ProcessPoolExecutor | None = None
_child_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class _Error:
    """A protoc error as it crosses from the child process (``_error_text`` reads it)."""

    filename: bytes | str
    line: int
    column: int
    message: bytes | str


def _protoc(
    main_name: bytes, roots: list[bytes], size: int
) -> tuple[list[tuple[bytes, bytes]], list[_Error]]:
    """protoc's generated modules of ``main_name`` and its errors: here when the files are small, else in
    the child process (started on first use, one compilation at a time, as the work directory is)."""
    if size <= INLINE_TEXT_CHARACTERS_MAX:
        return _get_protos(main_name, roots)
    global _child
    with _child_lock:
        if _child is None:
            _child = concurrent.futures.ProcessPoolExecutor(1, multiprocessing.get_context("spawn"))
        child = _child
    return child.submit(_get_protos, main_name, roots).result()


def _get_protos(main_name: bytes, roots: list[bytes]) -> tuple[list[tuple[bytes, bytes]], list[_Error]]:
    from grpc_tools import _protoc_compiler  # grpc_tools imports nothing else; loaded on first use

    try:
        return list(_protoc_compiler.get_protos(main_name, roots)), []
    except _protoc_compiler.ProtocErrors as errors:
        return [], [
            _Error(
                getattr(error, "filename", ""),
                int(getattr(error, "line", -1)),
                int(getattr(error, "column", -1)),
                getattr(error, "message", ""),
            )
            for error in errors.errors()
        ]


def _error_text(error: object, root: str, shifted: set[str]) -> str:
    """protoc's words, as its command line prints them: ``file:line:column: message`` (1-based)."""

    def text(value: object) -> str:
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)

    filename = text(getattr(error, "filename", "")).removeprefix(root + os.sep)
    line, column = int(getattr(error, "line", -1)), int(getattr(error, "column", -1))
    message = text(getattr(error, "message", ""))
    if line < 0:
        return f"{filename}: {message}"
    if line == 0 and filename in shifted:
        column = max(column - len(_PROTO2), 0)
    return f"{filename}:{line + 1}:{column + 1}: {message}"
