"""``tests/warm_rewrites.py`` writes pytest's rewritten byte-code of the test modules that have none, once,
and does nothing when every one has it; what it writes is the code pytest itself writes."""

from __future__ import annotations

import marshal
import os
import pathlib
import subprocess
import sys
import types
from collections.abc import Iterator

import pytest
import warm_rewrites
from hypothesis.configuration import set_hypothesis_home_dir

MODULE = '''"""A test module with asserts of the kinds pytest rewrites."""

import pytest


def helper(value):
    return value * 2


def test_compare():
    assert helper(2) == 4, "doubled"


def test_boolean_and_call():
    values = [helper(n) for n in range(3)]
    assert values and all(v % 2 == 0 for v in values)
    assert not [v for v in values if v > 4]


@pytest.mark.parametrize("n", [1, 2])
def test_nested(n):
    def inner():
        assert {"n": n}["n"] in (1, 2)

    inner()
'''


@pytest.fixture
def writing(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Byte-code writing on, as ``make unit`` runs it (``PYTHONDONTWRITEBYTECODE=`` cleared); hypothesis's
    caches where a test puts them, and back to its default after."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    yield
    set_hypothesis_home_dir(None)


def test_modules_without_their_rewritten_byte_code_get_it_once(tmp_path: pathlib.Path, writing: None) -> None:
    set_hypothesis_home_dir(tmp_path / ".hypothesis")  # where hypothesis keeps its caches, for this test
    folder = tmp_path / "tests" / "part"
    folder.mkdir(parents=True)
    for name in ("test_one.py", "test_two.py", "test_three.py", "conftest.py"):
        (folder / name).write_text("def test_it():\n    assert 1 + 1 == 2\n")
    (folder / "helper.py").write_text("X = 1\n")  # a tests' helper: ordinary byte-code, not rewritten
    (folder / "test_broken.py").write_text("def test_it(:\n")  # left to the run, which reports it
    package = tmp_path / "product"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "module.py").write_text("LIMIT = 48213\n")  # a literal hypothesis keeps
    root = tmp_path / "tests"
    names = [m.name for m in warm_rewrites.unrewritten(root)]
    assert names == ["conftest.py", "test_broken.py", "test_one.py", "test_three.py", "test_two.py"]
    assert warm_rewrites.main([str(root)]) == 0
    assert [m.name for m in warm_rewrites.unrewritten(root)] == ["test_broken.py"]
    for name in ("test_one.py", "test_two.py", "conftest.py"):
        assert warm_rewrites.cache_of(folder / name).is_file()
    tag = sys.implementation.cache_tag
    assert (folder / "__pycache__" / f"helper.{tag}.pyc").is_file()
    assert not warm_rewrites.cache_of(folder / "helper.py").exists()
    assert (package / "__pycache__" / f"module.{tag}.pyc").is_file()
    assert not (folder / "__pycache__" / f"test_one.{tag}.pyc").exists()  # only pytest's own for a test
    kept = [p.read_text() for p in (tmp_path / ".hypothesis" / "constants").iterdir()]
    assert sorted(text.splitlines()[0].rsplit("/", 1)[1] for text in kept) == ["__init__.py", "module.py"]
    assert any("48213" in text for text in kept)  # the product's modules, no test's
    (folder / "test_broken.py").unlink()
    written = warm_rewrites.cache_of(folder / "test_one.py").stat().st_mtime_ns
    assert warm_rewrites.main([str(root)]) == 0  # nothing lacks its byte-code: nothing is done
    assert warm_rewrites.cache_of(folder / "test_one.py").stat().st_mtime_ns == written


def test_nothing_is_written_where_byte_code_is_off(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "test_one.py").write_text("def test_it():\n    assert 1 + 1 == 2\n")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # pytest then writes none either
    assert warm_rewrites.main([str(tmp_path)]) == 0
    assert [m.name for m in warm_rewrites.unrewritten(tmp_path)] == ["test_one.py"]


def _same(ours: types.CodeType, theirs: types.CodeType) -> bool:
    """Two code objects alike in everything the interpreter runs and reports (marshal's bytes may still
    differ: it flags objects it saw twice by their reference counts at the time)."""
    fields = (
        "co_code", "co_names", "co_varnames", "co_freevars", "co_cellvars", "co_name", "co_qualname",
        "co_firstlineno", "co_linetable", "co_exceptiontable", "co_flags", "co_argcount",
        "co_posonlyargcount", "co_kwonlyargcount", "co_stacksize", "co_nlocals", "co_filename",
    )  # fmt: skip
    if any(getattr(ours, name) != getattr(theirs, name) for name in fields):
        return False
    if len(ours.co_consts) != len(theirs.co_consts):
        return False
    for mine, other in zip(ours.co_consts, theirs.co_consts, strict=True):
        if isinstance(mine, types.CodeType):
            if not isinstance(other, types.CodeType) or not _same(mine, other):
                return False
        elif type(mine) is not type(other) or mine != other:
            return False
    return True


def _code(pyc: pathlib.Path) -> tuple[bytes, types.CodeType]:
    data = pyc.read_bytes()
    return data[:16], marshal.loads(data[16:])  # magic, flags, source hash; then the code


def test_the_byte_code_written_is_pytests_own(tmp_path: pathlib.Path, writing: None) -> None:
    """What this writes, and what pytest writes when it imports the module itself (``--collect-only`` in a
    process of its own), are the same code: header, instructions, line tables, file name, constants."""
    set_hypothesis_home_dir(tmp_path / ".hypothesis")
    root = tmp_path / "tests"
    root.mkdir()
    module = root / "test_sample.py"
    module.write_text(MODULE)
    assert warm_rewrites.main([str(root)]) == 0
    pyc = warm_rewrites.cache_of(module)
    ours = _code(pyc)
    pyc.unlink()
    env = {name: value for name, value in os.environ.items() if name != "PYTEST_ADDOPTS"}
    env["PYTHONDONTWRITEBYTECODE"] = ""
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly"]
    command += ["-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(module)]
    collected = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert "4 tests collected" in collected.stdout
    theirs = _code(pyc)
    assert ours[0] == theirs[0]
    assert _same(ours[1], theirs[1])
