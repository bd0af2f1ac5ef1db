"""Before a run's workers start: what every worker's collection would otherwise make for itself on a fresh
clone, made once.

Each pytest-xdist worker collects every test file, and pytest rewrites a test module's asserts before it
compiles it (its own byte-code, ``__pycache__/NAME.cpython-311-pytest-VERSION.pyc``). On a fresh clone none
is there yet, so the six workers each rewrote all of them at once: collection took 15.5 CPU s a worker
instead of 4.7 (``visit_Assert`` most of it), some 65 CPU s a run thrown away. This writes, when a test
module lacks its rewritten byte-code (and does nothing, about 0.1 s, when none does; ``make unit`` and
``make unit-fast`` run it before pytest):

- each such test module's and conftest's rewritten byte-code, with pytest's own functions
  (``_rewrite_test``, ``_write_pyc_fp``; ``tests/test_warm_rewrites.py`` checks the code is the code
  pytest writes), without importing the module;
- the ordinary byte-code of the project's packages, ``scripts/`` and the tests' helpers (``compileall``);
- hypothesis's caches that a collection fills: the literals of each project module
  (``.hypothesis/constants``) and its Unicode tables (``.hypothesis/unicode_data``).

It first did this by collecting the modules in two pytest processes, which imported every test module
and all that each imports: 40.5 CPU s (20.5 s on two cores) where this takes 21.5 (one process, 21.5 s,
beside mypy on the other core), each followed by a worker's collection of 8.9-9.8 CPU s; without the last
two steps a worker's first collection took 13.6-15.9 (a fresh copy of the tree each time, 2026-12-01).

    python tests/warm_rewrites.py [TESTS_DIR]
"""

from __future__ import annotations

import compileall
import os
import pathlib
import re
import sys
import time
import types

from _pytest.assertion.rewrite import PYC_TAIL, _rewrite_test, _write_pyc_fp
from hypothesis.internal.charmap import charmap, intervals_from_codec
from hypothesis.internal.constants_ast import constants_from_module, is_local_module_file


def cache_of(module: pathlib.Path) -> pathlib.Path:
    """Where pytest keeps ``module``'s rewritten byte-code."""
    return module.parent / "__pycache__" / (module.stem + PYC_TAIL)


def unrewritten(root: pathlib.Path) -> list[pathlib.Path]:
    """The test modules under ``root`` that have no rewritten byte-code at all (a fresh clone's, a new
    file's). One edited since keeps its old file until a worker rewrites it (pytest checks the source's
    time and size it recorded), which the workers do for the few a change touches."""
    modules = [*root.rglob("test_*.py"), *root.rglob("conftest.py")]
    return [module for module in sorted(modules) if not cache_of(module).exists()]


def compile_imported(repo: pathlib.Path, tests: pathlib.Path) -> None:
    """The ordinary byte-code of every other module a collection imports: the project's packages and the
    tests' helpers, as the import system writes it (``compileall``), so that the workers, which collect
    at once, find it instead of each compiling the same modules (7 CPU s a worker on a fresh clone)."""
    rewritten_by_pytest = re.compile(r"(^|/)(test_[^/]*|conftest)\.py$")
    for folder in [*packages_of(repo), repo / "scripts", tests]:  # scripts: modules the tests import too
        compileall.compile_dir(folder, quiet=2, rx=rewritten_by_pytest)


def packages_of(repo: pathlib.Path) -> list[pathlib.Path]:
    return [folder for folder in sorted(repo.iterdir()) if (folder / "__init__.py").is_file()]


def hypothesis_caches(repo: pathlib.Path) -> None:
    """Hypothesis's cache of the literals in the project's own modules (``.hypothesis/constants``, one file
    per module's source), which it reads while generating: written here by its own function from each
    module's file, so that the workers do not each parse every module for it (5 CPU s a worker on a
    fresh clone). It caches only what it calls local modules, never tests."""
    for folder in packages_of(repo):
        for path in sorted(folder.rglob("*.py")):
            if is_local_module_file(str(path)):
                module = types.ModuleType(path.stem)
                module.__file__ = str(path)
                constants_from_module(module)
    # and its tables of Unicode characters by category and of what UTF-8 encodes (.hypothesis/unicode_data)
    charmap()
    intervals_from_codec("utf-8")


def rewrite(module: pathlib.Path) -> None:
    """``module``'s rewritten byte-code, as pytest's ``AssertionRewritingHook.exec_module`` writes it
    (``_rewrite_test``, whose one setting, the assertion pass hook, the suite leaves off; then
    ``_write_pyc``'s hash-checked pyc, renamed into place whole), named by its absolute path as pytest's
    import names it. A module that does not parse is left to the run, which reports it."""
    module = module.resolve()
    try:
        source_hash, code = _rewrite_test(module, None)  # type: ignore[arg-type]  # None: no settings
    except SyntaxError:
        return
    pyc = cache_of(module)
    pyc.parent.mkdir(exist_ok=True)
    writing = pyc.with_name(f"{pyc.name}.{os.getpid()}")
    with open(writing, "wb") as out:
        _write_pyc_fp(out, source_hash, code)
    os.replace(writing, pyc)


def main(argv: list[str]) -> int:
    root = pathlib.Path(argv[0] if argv else "tests")
    stale = unrewritten(root)
    if not stale or sys.dont_write_bytecode:  # pytest writes none either then (make clears the setting)
        return 0
    started = time.monotonic()
    print(f"warm_rewrites: rewriting the asserts of {len(stale)} test modules and compiling what they import,"
          " once, before the workers start", file=sys.stderr, flush=True)  # fmt: skip
    for module in stale:
        rewrite(module)
    repo = root.resolve().parent
    compile_imported(repo, root)
    hypothesis_caches(repo)
    left = len(unrewritten(root))
    print(f"warm_rewrites: done in {time.monotonic() - started:.1f} s ({left} modules still without)",
          file=sys.stderr, flush=True)  # fmt: skip
    return 0  # this only saves work: the run collects every module again


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
