"""Every partition log and Raft journal a partitions test opens is closed when the test ends (tests/closing.py
says why): replicas, state machines and recoveries here open both outside any node that would close them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from closing import journals_closed, logs_closed


@pytest.fixture(autouse=True)
def _logs_closed_after_the_test(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from logs_closed(monkeypatch)


@pytest.fixture(autouse=True)
def _journals_closed_after_the_test(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from journals_closed(monkeypatch)
