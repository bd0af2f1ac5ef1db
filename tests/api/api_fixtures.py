"""Fixtures: API apps over fake nodes, served on 127.0.0.1 ephemeral ports (the API tests' conftest,
and those of the client and command-line tests, import them)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from fake_node import FakeCluster
from harness import Harness, Node


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    started = Harness()
    yield started
    await started.close()


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    made = FakeCluster(["n1", "n2"])
    yield made
    made.close()


@pytest.fixture
async def n1(cluster: FakeCluster, harness: Harness) -> Node:
    return await harness.start(cluster, "n1")


@pytest.fixture
async def n2(cluster: FakeCluster, harness: Harness) -> Node:
    return await harness.start(cluster, "n2")
