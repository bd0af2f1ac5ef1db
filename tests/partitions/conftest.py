"""Every partition log and Raft journal a partitions test opens is closed when the test ends (tests/closing.py
says why): replicas, state machines and recoveries here open both outside any node that would close them."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator, Iterator

import pytest
from closing import journals_closed, logs_closed
from in_process import configs

from partitions.broker.node import Node


@pytest.fixture(autouse=True)
def _logs_closed_after_the_test(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from logs_closed(monkeypatch)


@pytest.fixture(autouse=True)
def _journals_closed_after_the_test(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from journals_closed(monkeypatch)


@pytest.fixture
async def cluster(tmp_path: pathlib.Path) -> AsyncIterator[list[Node]]:
    """Three nodes in this process, started, closed after the test."""
    nodes = [Node(c) for c in configs(tmp_path)]
    await asyncio.gather(*(n.start() for n in nodes))
    yield nodes
    await asyncio.gather(*(n.close() for n in nodes))
