"""Every log a storage test opens is closed when the test ends (tests/closing.py says why); ``memory_path``
is a test's folder in memory, for the tests whose logs fsync thousands of times."""

from __future__ import annotations

import pathlib
import shutil
from collections.abc import Iterator

import pytest
from closing import logs_closed

from .helpers import memory_backed_dir


@pytest.fixture(autouse=True)
def _logs_closed_after_the_test(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from logs_closed(monkeypatch)


@pytest.fixture
def memory_path() -> Iterator[pathlib.Path]:
    """``tmp_path`` in memory (``helpers.memory_backed_dir``): the logs' fsyncs return at once. For a
    test whose property is what a log holds after a kill, a cut or a power loss the test itself makes,
    which no disk's own timing decides. Removed when the test ends."""
    directory = pathlib.Path(memory_backed_dir("raftlog-storage-"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)
