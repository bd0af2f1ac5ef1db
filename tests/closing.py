"""Files a test opened are closed when it ends. A ``Log`` holds a descriptor per segment file and index and
a ``FileJournal`` one per segment, released by ``close`` (a node closes its logs and journals); a test
process that kept them all ran past a thousand descriptors, and ``select()`` then refused a later test's."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from raftlog.consensus.file_journal import FileJournal
from raftlog.errors import RaftlogError
from raftlog.storage import Log

T = TypeVar("T")


def _closing(monkeypatch: pytest.MonkeyPatch, kind: type[T], close: Callable[[T], None]) -> Iterator[None]:
    """Every ``kind`` made while the test runs (``__init__`` done) is closed with ``close`` after it;
    one whose files the test broke on purpose may refuse, which is not this test's failure."""
    made: list[T] = []
    init = kind.__init__

    def tracked(self: T, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)  # type: ignore[misc]
        made.append(self)

    monkeypatch.setattr(kind, "__init__", tracked)
    yield
    for instance in made:
        with contextlib.suppress(RaftlogError, OSError):
            close(instance)


def logs_closed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    return _closing(monkeypatch, Log, lambda log: log.close(seal=False))


def journals_closed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    return _closing(monkeypatch, FileJournal, lambda journal: journal.close(flush=False))
