"""Every log a storage test opens is closed when the test ends: a ``Log`` holds a descriptor per segment
file and index, released by ``close`` (a node's ``LogManager`` closes its logs), and a test process that
kept them all ran past a thousand descriptors."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from raftlog.errors import RaftlogError
from raftlog.storage import Log


@pytest.fixture(autouse=True)
def _logs_closed_after_the_test(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    opened: list[Log] = []
    open_log = Log.open.__func__  # type: ignore[attr-defined]

    def tracked(cls: type[Log], *args: Any, **kwargs: Any) -> Log:
        log: Log = open_log(cls, *args, **kwargs)
        opened.append(log)
        return log

    monkeypatch.setattr(Log, "open", classmethod(tracked))
    yield
    for log in opened:
        with contextlib.suppress(RaftlogError, OSError):  # a test that broke its log's files on purpose
            log.close(seal=False)
