"""The 3-node process cluster most scenario tests run against."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from .cluster import ProcessCluster


@pytest.fixture
def cluster(tmp_path: pathlib.Path) -> Iterator[ProcessCluster]:
    started = ProcessCluster.create(str(tmp_path))
    try:
        started.start_all()
        yield started
    finally:
        started.stop_all()
