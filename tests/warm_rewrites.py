"""Before a run's workers start: pytest's assertion rewriting of the test modules, done once.

Each pytest-xdist worker collects every test file, and pytest rewrites a test module's asserts before it
compiles it (its own byte-code, ``__pycache__/NAME.cpython-311-pytest-VERSION.pyc``). On a fresh clone none
is there yet, so the six workers each rewrote all of them at once: collection took 15.5 CPU s a worker
instead of 4.7 (``visit_Assert`` most of it), some 65 CPU s a run thrown away. This writes them first, in
two collecting processes over halves of the files that lack theirs, and does nothing when none does
(about 0.1 s): ``make unit`` and ``make unit-fast`` run it before pytest.

    python tests/warm_rewrites.py [TESTS_DIR]
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

import pytest

HALVES = 2  # the machine's two cores


def cache_of(module: pathlib.Path) -> pathlib.Path:
    """Where pytest keeps ``module``'s rewritten byte-code (``_pytest.assertion.rewrite.PYC_TAIL``)."""
    tag = f"{sys.implementation.cache_tag}-pytest-{pytest.__version__}"
    return module.parent / "__pycache__" / f"{module.stem}.{tag}.pyc"


def unrewritten(root: pathlib.Path) -> list[pathlib.Path]:
    """The test modules under ``root`` that have no rewritten byte-code at all (a fresh clone's, a new
    file's). One edited since keeps its old file until a worker rewrites it (pytest checks the source's
    time and size it recorded), which the workers do for the few a change touches."""
    return [module for module in sorted(root.rglob("test_*.py")) if not cache_of(module).exists()]


def main(argv: list[str]) -> int:
    root = pathlib.Path(argv[0] if argv else "tests")
    stale = unrewritten(root)
    if not stale:
        return 0
    started = time.monotonic()
    print(f"warm_rewrites: rewriting the asserts of {len(stale)} test modules once, before the workers start",
          file=sys.stderr, flush=True)  # fmt: skip
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--collect-only",
        "-q",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
    ]
    halves = [stale[i::HALVES] for i in range(HALVES)]
    # the run's own options (PYTEST_ADDOPTS, such as --cpu-costs) are not this collection's: a folder
    # without the suite's conftest would refuse them and rewrite nothing
    env = {name: value for name, value in os.environ.items() if name != "PYTEST_ADDOPTS"}
    running = [
        subprocess.Popen(
            [*command, *map(str, half)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )
        for half in halves
        if half
    ]
    for process in running:
        process.communicate()  # a module that fails to collect is reported by the run itself
    left = len(unrewritten(root))
    print(f"warm_rewrites: done in {time.monotonic() - started:.1f} s ({left} modules still without)",
          file=sys.stderr, flush=True)  # fmt: skip
    return 0  # this only saves work: the run collects every module again


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
