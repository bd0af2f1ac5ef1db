"""The Kafka tests' fixtures live in ``kafka_fixtures`` (a unique module name: every test directory's
conftest is named ``conftest``); Kafka's own Java client comes from ``tests/kafka_reference``."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "kafka_reference"))

from java_client import JavaClient
from kafka_fixtures import compacting_cluster, kafka_cluster, shared_kafka_cluster

__all__ = ["compacting_cluster", "kafka_cluster", "shared_kafka_cluster"]


@pytest.fixture(scope="session")
def java_client(tmp_path_factory: pytest.TempPathFactory) -> JavaClient:
    return JavaClient(tmp_path_factory.mktemp("java-client"))
