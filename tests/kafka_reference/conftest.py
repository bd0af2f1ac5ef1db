"""Apache Kafka beside raftlog for the tests of this folder: both clusters (3 nodes, replication factor
3) for a module, and Kafka's own Java client (``java_client.py``) for the run."""

from __future__ import annotations

import pathlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "kafka_api"))  # kafka_fixtures

from java_client import JavaClient

from raftlog_bench.kafka_peer import KafkaCluster
from raftlog_client.local_cluster import LocalCluster


@dataclass
class Systems:
    """Both clusters of a module: their bootstrap servers, and a node of either killed and restarted."""

    raftlog: LocalCluster
    kafka: KafkaCluster

    def servers(self) -> dict[str, str]:
        return {"raftlog": self.raftlog.bootstrap_servers, "kafka": self.kafka.bootstrap_servers}

    def kill(self, system: str, broker_id: int) -> None:
        """SIGKILL the node with that broker id (raftlog's ``n<id>``)."""
        if system == "kafka":
            self.kafka.kill(broker_id - 1)
        else:
            self.raftlog.control("stop", f"n{broker_id}", kill=True)

    def restart(self, system: str, broker_id: int) -> None:
        if system == "kafka":
            self.kafka.restart(broker_id - 1)
        else:
            self.raftlog.control("start", f"n{broker_id}")


@pytest.fixture(scope="module")
def systems(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Systems]:
    kafka = KafkaCluster(str(tmp_path_factory.mktemp("apache-kafka")))
    kafka.start()
    try:
        with LocalCluster(str(tmp_path_factory.mktemp("raftlog")), nodes=3) as raftlog:
            yield Systems(raftlog, kafka)
    finally:
        kafka.stop()


@pytest.fixture(scope="module")
def servers(systems: Systems) -> dict[str, str]:
    """Bootstrap servers of both systems, for the module."""
    return systems.servers()


@pytest.fixture(scope="session")
def java_client(tmp_path_factory: pytest.TempPathFactory) -> JavaClient:
    return JavaClient(tmp_path_factory.mktemp("java-client"))
