"""Apache Kafka beside raftlog for the tests of this folder: both clusters (3 nodes, replication factor
3) for a module, and Kafka's own Java client (``java_client.py``) for the run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from java_client import JavaClient

from raftlog_bench.kafka_peer import KafkaCluster
from raftlog_client.local_cluster import LocalCluster


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Bootstrap servers of both systems, for the module."""
    kafka = KafkaCluster(str(tmp_path_factory.mktemp("apache-kafka")))
    kafka.start()
    try:
        with LocalCluster(str(tmp_path_factory.mktemp("raftlog")), nodes=3) as raftlog:
            yield {"raftlog": raftlog.bootstrap_servers, "kafka": kafka.bootstrap_servers}
    finally:
        kafka.stop()


@pytest.fixture(scope="session")
def java_client(tmp_path_factory: pytest.TempPathFactory) -> JavaClient:
    return JavaClient(tmp_path_factory.mktemp("java-client"))
