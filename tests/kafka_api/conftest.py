"""The Kafka tests' fixtures live in ``kafka_fixtures`` (a unique module name: every test directory's
conftest is named ``conftest``)."""

from kafka_fixtures import kafka_cluster

__all__ = ["kafka_cluster"]
