"""One 3-node cluster (``raftlog dev``) for the registry's tests of other authors' clients and suites: the
folder's files share it (``file_costs.SHARED_SESSION_FOLDERS`` gives the folder to one worker whole) until
the run leaves the folder (``folder_scope``). Their subjects and topics are named apart; a module that
changes the global compatibility puts it back (``global_compatibility_restored``)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import folder_scope
import pytest

from raftlog_client.local_cluster import LocalCluster

DEFAULT_COMPATIBILITY = "BACKWARD"  # Confluent's default, what a new cluster answers at GET /config


def _cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(str(tmp_path_factory.mktemp("registry")), nodes=3) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def registry_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> LocalCluster:
    """The folder's cluster, every node of it running when a module begins (a module whose test failed
    between a node's kill and its restart leaves it stopped)."""
    cluster = folder_scope.shared(request, lambda: _cluster(tmp_path_factory))
    for node in cluster.stopped():
        cluster.control("start", node)
    return cluster


@pytest.fixture
def running_cluster(registry_cluster: LocalCluster) -> LocalCluster:
    """The folder's cluster with every node running when the test begins (a test that failed between a
    node's kill and its restart leaves it stopped)."""
    for node in registry_cluster.stopped():
        registry_cluster.control("start", node)
    return registry_cluster


def set_global_compatibility(url: str, level: str) -> None:
    body = json.dumps({"compatibility": level}).encode()
    request = urllib.request.Request(
        url + "/config",
        data=body,
        method="PUT",
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert json.loads(answer.read()).get("compatibility") == level


@pytest.fixture
def global_compatibility_restored(registry_cluster: LocalCluster) -> Iterator[None]:
    """The global compatibility level back to Confluent's default after the test (the judges' suites set
    NONE and FULL and leave them)."""
    yield
    set_global_compatibility(registry_cluster.servers[0], DEFAULT_COMPATIBILITY)
