"""What a recorded Apache Kafka side reaches, and so the key it is replayed under (``kafka_reference/
kafka_answers.py``, ``jepsen/kafka_histories.py``): a replay holds only while nothing it reaches changed.

``reach(entries)`` follows, from the entry files (a test module and the fixtures' conftest):

- every module of the repository each file imports, at any depth and wherever in the file the import
  is (a function's own included; not one only a type checker reads): the project's packages and the
  tests' helper modules, the packages' ``__init__.py`` on the way (Python runs them), an extension module
  built in place as its C source (``raftlog/storage/_records.c``). A bare name is looked up beside the
  importing file first, then at the repository's root, in ``tests/``, then in the other test folders
  (their conftests put them on ``sys.path``);
- every file a reached module names by a path of literal parts (``HERE / "go"``, ``parents[2] /
  "examples" / "quixstreams_totals.py"``): the programs it runs (a script, an example, the Java and Go
  clients' sources), looked up beside the module, then from the repository's root; a folder beside the
  module stands for every file under it (a folder of the root, ``... / "kafka_api"``, is put on
  ``sys.path``, not run). Only files git knows or would add count (not ``runs/``, ``build/``), never the
  records themselves (``RECORDS``) nor documentation (``.md``: read, never run);
- the third-party distributions the reached Python files import, with those each requires (its extras
  left out), at the versions installed where they run: this interpreter's environment, or one beside it
  under ``.venv/`` (quixstreams' own, for the example it runs). The test runner (pytest) is left out: it
  decides nothing a Kafka side sends. In this interpreter's environment only what ``make test`` installs
  counts (raftlog's requirements with the ``TEST_EXTRAS``, and theirs): a package a developer added
  (``make bench-setup``'s NATS client, imported by a bench peer no Kafka side runs) would otherwise put a
  key out of reach of every clean checkout, and CI would run every Kafka side live.

``judges`` are modules an entry imports to judge what Kafka did, never to decide it (the fault harness's
checkers read a recorded history): they are not followed, and any reached module importing one is an
error, since the judge would then be on the Kafka side's path. ``tests/test_kafka_side.py`` imports each
Kafka side's modules for real and fails when a file they load is outside its key."""

from __future__ import annotations

import ast
import functools
import glob
import hashlib
import os
import pathlib
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import metadata

from packaging.requirements import InvalidRequirement, Requirement

ROOT = pathlib.Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
# what is recorded under the keys: never part of one
RECORDS = (
    TESTS / "kafka_reference" / "kafka_answers.json",
    TESTS / "jepsen" / "kafka_histories",
)
DOCUMENTS = frozenset({".md"})  # read (a known difference's entry, on raftlog's side), never run
RUNNER = frozenset({"pytest", "_pytest", "pluggy"})  # the test runner's: decides nothing sent to Kafka
PROJECT = "raftlog"
TEST_EXTRAS = ("dev", "spark")  # the extras scripts/bootstrap.sh installs at its test level (make test)


@dataclass(frozen=True)
class Reach:
    files: tuple[pathlib.Path, ...]  # sorted; repository files
    distributions: tuple[str, ...]  # sorted "name version" of the third-party code it runs
    via: dict[pathlib.Path, str] = field(compare=False, repr=False)  # how each file was reached

    def chain(self, path: pathlib.Path) -> list[str]:
        """How ``path`` was reached, from an entry."""
        steps: list[str] = []
        while path in self.via and self.via[path] != "entry" and len(steps) < 50:
            steps.append(self.via[path])
            path = (ROOT / self.via[path].split(" ")[0]).resolve()
        return steps

    def relative(self) -> list[str]:
        return [_name(path) for path in self.files]


@functools.cache
def _known_files() -> frozenset[pathlib.Path]:
    """Files git tracks or would add (not ignored): what a key may hold."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True, timeout=60,
    ).stdout.decode()  # fmt: skip
    return frozenset(path for name in listed.split("\0") if name and (path := ROOT / name).is_file())


def _is_known(path: pathlib.Path) -> bool:
    """A file a key may hold: in the repository, one git knows or would add; elsewhere (a test's planted
    module), any file."""
    return path in _known_files() if ROOT in path.parents else path.is_file()


def _files_under(folder: pathlib.Path) -> tuple[pathlib.Path, ...]:
    if ROOT in folder.parents or folder == ROOT:
        return _known_folders().get(folder, ())
    return tuple(sorted(f for f in folder.rglob("*") if f.is_file())) if folder.is_dir() else ()


def _name(path: pathlib.Path) -> str:
    return os.path.relpath(path, ROOT)


def _is_record(path: pathlib.Path) -> bool:
    return any(path == record or record in path.parents for record in RECORDS)


@functools.cache
def _test_folders() -> tuple[pathlib.Path, ...]:
    return tuple(
        sorted({path.parent for path in _known_files() if path.suffix == ".py" and TESTS in path.parents})
    )


@functools.cache
def _module_file(name: str, near: pathlib.Path) -> pathlib.Path | None:
    """The repository's file of module ``name`` imported from a file in folder ``near`` (None: not ours)."""
    parts = name.split(".")
    first = [near, ROOT, TESTS]
    for base in first:
        found = _existing_module(base, parts)
        if found is not None:
            return found
    if len(parts) > 1 or name in _providers(_environments()[0][1]):
        return None  # a bare helper module of another test folder, never an installed package's name
    others = {f for base in _test_folders() if base not in first if (f := _existing_module(base, parts))}
    if len(others) > 1:
        raise ValueError(f"module {name} imported from {near} is ambiguous: {sorted(others)}")
    return next(iter(others), None)


def _existing_module(base: pathlib.Path, parts: Sequence[str]) -> pathlib.Path | None:
    path = base.joinpath(*parts)
    # a module, a package, or an extension module built in place from its C source (raftlog's record reader)
    for candidate in (path.with_suffix(".py"), path / "__init__.py", path.with_suffix(".c")):
        if _is_known(candidate):
            return candidate
    return None


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The nodes under ``if TYPE_CHECKING:``: never run."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            found |= {id(inner) for statement in node.body for inner in ast.walk(statement)}
    return found


def _imported_names(tree: ast.AST, path: pathlib.Path) -> list[str]:
    """Every module name an import in ``tree`` may load (``from a import b``: ``a`` and ``a.b``), but those
    only a type checker reads."""
    names: list[str] = []
    skipped = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = path.parent
                for _ in range(node.level - 1):
                    package = package.parent
                if ROOT not in package.parents:
                    raise ValueError(f"{path}: a relative import outside the repository's packages")
                prefix = ".".join(package.relative_to(ROOT).parts)
                base = f"{prefix}.{base}" if base else prefix
            names.append(base)
            names += [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
    return names


def _path_literals(tree: ast.AST) -> list[tuple[str, ...]]:
    """The literal trailing parts of every ``x / "a" / "b"`` in ``tree``, longest chains only."""
    found: list[tuple[str, ...]] = []
    inner: set[int] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)) or id(node) in inner:
            continue
        parts: list[str] = []
        while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            if not (isinstance(node.right, ast.Constant) and isinstance(node.right.value, str)):
                break
            parts.insert(0, node.right.value)
            inner.add(id(node.left))
            node = node.left
        if parts:
            found.append(tuple(parts))
    return found


@functools.cache
def _known_folders() -> dict[pathlib.Path, tuple[pathlib.Path, ...]]:
    """Each folder of the repository -> the known files under it (at any depth)."""
    found: dict[pathlib.Path, list[pathlib.Path]] = {}
    for path in sorted(_known_files()):
        for folder in path.parents:
            found.setdefault(folder, []).append(path)
            if folder == ROOT:
                break
    return {folder: tuple(files) for folder, files in found.items()}


@functools.cache
def _named_files(parts: tuple[str, ...], folder: pathlib.Path) -> tuple[pathlib.Path, ...]:
    """The repository's files ``parts`` names in a module of ``folder``: a file beside the module or from
    the repository's root, or every file of a folder beside the module (``HERE / "go"``). A folder of the
    root (``... / "kafka_api"``, put on ``sys.path``) is not a program run."""
    for base, folders in ((folder, True), (ROOT, False)):
        target = base.joinpath(*parts)
        if _is_record(target):
            return ()
        if _is_known(target):
            return () if target.suffix in DOCUMENTS else (target,)
        under = _files_under(target) if folders else ()
        if under:
            return tuple(f for f in under if not _is_record(f) and f.suffix not in DOCUMENTS)
    return ()


def _top_level(name: str) -> str | None:
    """The third-party top-level package of import ``name`` (None: the standard library's)."""
    top = name.split(".")[0]
    if not top or top in sys.stdlib_module_names or top in RUNNER:
        return None
    return top


@functools.cache
def _environments() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Where distributions are looked up, each with its label: this interpreter's path (no label), then
    each environment of its own under .venv/ (quixstreams')."""
    nested = sorted(glob.glob(str(pathlib.Path(sys.prefix) / "*" / "lib" / "python*" / "site-packages")))
    return (("", tuple(sys.path)), *((pathlib.Path(p).parents[2].name + ": ", (p,)) for p in nested))


@functools.cache
def _providers(environment: tuple[str, ...]) -> dict[str, list[metadata.Distribution]]:
    """Top-level package -> the distributions providing it, in one environment."""
    found: dict[str, list[metadata.Distribution]] = {}
    for distribution in metadata.distributions(path=list(environment)):
        names = (distribution.read_text("top_level.txt") or "").split()
        if not names:
            names = sorted({pathlib.PurePath(f).parts[0].split(".")[0] for f in distribution.files or ()})
        for name in names:
            found.setdefault(name, []).append(distribution)
    return found


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache
def _test_level() -> frozenset[str]:
    """The distributions ``make test`` installs in this interpreter's environment: raftlog's requirements
    with its ``TEST_EXTRAS``, and everything those require (normalized names)."""
    found: set[str] = set()
    todo = [(PROJECT, TEST_EXTRAS)]
    while todo:
        name, extras = todo.pop()
        if _normal(name) in found:
            continue
        found.add(_normal(name))
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            continue  # another platform's, or an optional one not installed
        for text in requires:
            try:
                requirement = Requirement(text)
            except InvalidRequirement:
                continue
            marker = requirement.marker
            if marker is None or any(marker.evaluate({"extra": extra}) for extra in ("", *extras)):
                todo.append((requirement.name, ()))
    found.discard(_normal(PROJECT))
    return frozenset(found)


def _distribution_closure(tops: Iterable[str]) -> tuple[str, ...]:
    """``name version`` of the distributions providing ``tops`` and of everything they require (extras
    left out), each in the first environment that has the package (labelled when not this one's)."""
    seen: dict[tuple[str, str], str] = {}
    todo: list[tuple[str, str, tuple[str, ...]]] = []
    for top in sorted(set(tops)):
        found = next(((label, path) for label, path in _environments() if top in _providers(path)), None)
        if found is None:
            continue  # installed nowhere: an optional import (a bench peer's) that no Kafka side can run
        todo += [
            (d.metadata["Name"], *found)
            for d in _providers(found[1])[top]
            if found[0] or _normal(d.metadata["Name"]) in _test_level()
        ]
    while todo:
        name, label, environment = todo.pop()
        key = (label, _normal(name))
        if key in seen:
            continue
        try:
            distribution = next(iter(metadata.distributions(name=name, path=list(environment))))
        except StopIteration:
            continue  # a requirement not installed here (another platform's, or optional)
        seen[key] = f"{label}{key[1]} {distribution.version}"
        for text in distribution.requires or ():
            try:
                requirement = Requirement(text)
            except InvalidRequirement:
                continue
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append((requirement.name, label, environment))
    return tuple(sorted(seen.values()))


def reach(entries: Sequence[pathlib.Path], judges: Sequence[str] = ()) -> Reach:
    """Everything the entry files reach (the module docstring says how)."""
    return _reach(tuple(path.resolve() for path in entries), tuple(judges))


@functools.cache
def _reach(entries: tuple[pathlib.Path, ...], judges: tuple[str, ...]) -> Reach:
    via: dict[pathlib.Path, str] = {path: "entry" for path in entries}
    tops: set[str] = set()
    todo = list(entries)
    done: set[pathlib.Path] = set()
    while todo:
        path = todo.pop()
        if path in done or path.suffix != ".py":
            done.add(path)
            continue
        done.add(path)
        here = _name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for name in _imported_names(tree, path):
            if any(name == judge or name.startswith(judge + ".") for judge in judges):
                if path not in entries:
                    raise ValueError(f"{here} imports the judge {name}: it is on the Kafka side")
                continue
            names = name.split(".")
            ours = False
            for end in range(1, len(names) + 1):
                found = _module_file(".".join(names[:end]), path.parent)
                if found is not None:
                    ours = True
                    via.setdefault(found, f"{here} imports {name}")
                    todo.append(found)
            if not ours and (top := _top_level(name)) is not None:
                tops.add(top)
        for parts in _path_literals(tree):
            for found in _named_files(parts, path.parent):
                via.setdefault(found, f"{here} names {'/'.join(parts)}")
                todo.append(found)
    return Reach(tuple(sorted(via)), _distribution_closure(tops), via)


def digest(found: Reach, leave_out: Iterable[pathlib.Path] = ()) -> str:
    """A hash of the reach: each file's path and bytes (but those left out) and each distribution."""
    skipped = set(leave_out)
    hashed = hashlib.sha256()
    for line in found.distributions:
        hashed.update(line.encode() + b"\n")
    for path in found.files:
        if path not in skipped:
            hashed.update(_name(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return hashed.hexdigest()


@functools.cache
def module_parts(path: pathlib.Path) -> tuple[str, dict[str, str]]:
    """The module's source but its tests; and each test's own source (decorators included): a test's
    key holds its own source and the rest, not the other tests'."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    tests: dict[str, str] = {}
    spans: list[tuple[int, int]] = []
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
            assert node.end_lineno is not None
            tests[node.name] = "".join(lines[first : node.end_lineno])
            spans.append((first, node.end_lineno))
    rest = [line for i, line in enumerate(lines) if not any(a <= i < b for a, b in spans)]
    return "".join(rest), tests


def key(
    test_module: pathlib.Path,
    test: str | None,
    case: str,
    *,
    also: Sequence[pathlib.Path] = (),
    judges: Sequence[str] = (),
    versions: str = "",
) -> str:
    """The key of ``test``'s Kafka side (a function of ``test_module``; None: a module fixture's, which only
    the module's other code decides) in its parametrization ``case``: ``versions`` (Kafka's), the reach of
    the module and of ``also`` (the fixtures' conftest) but the module's other tests, its own source."""
    module = test_module.resolve()
    found = reach((module, *also), judges)
    rest, tests = module_parts(module)
    hashed = hashlib.sha256(versions.encode() + b"\0" + digest(found, leave_out=(module,)).encode())
    for part in (rest, "" if test is None else tests[test], case):
        hashed.update(part.encode() + b"\0")
    return hashed.hexdigest()[:32]
