"""Topic administration through confluent-kafka's AdminClient: create (with configs, defaults, refusals),
describe and change configs (AlterConfigs and IncrementalAlterConfigs), delete, describe the cluster;
adding partitions is refused naming why."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from kafka_fixtures import http_client

from raftlog_client.local_cluster import LocalCluster


def _error(future: object) -> str:
    with pytest.raises(KafkaException) as raised:
        future.result(30)  # type: ignore[attr-defined]
    return str(raised.value)


def test_topics_are_created_configured_and_deleted_through_the_admin_client(
    kafka_cluster: LocalCluster,
) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    created = admin.create_topics([
        NewTopic("adm-a", 3, 3, config={"retention.ms": "3600000"}),
        NewTopic("adm-b", -1, -1),  # the defaults: 1 partition, 3 replicas here
        NewTopic("__consumer_groups", 1, 1),
        NewTopic("adm-bad", 1, 1, config={"no.such.property": "1"}),
    ])  # fmt: skip
    assert created["adm-a"].result(30) is None and created["adm-b"].result(30) is None
    assert "reserved" in _error(created["__consumer_groups"])
    assert "INVALID_CONFIG" in _error(created["adm-bad"])
    assert "TOPIC_ALREADY_EXISTS" in _error(admin.create_topics([NewTopic("adm-a", 1, 1)])["adm-a"])
    with http_client(kafka_cluster) as client:
        assert client.partition_count("adm-a") == 3 and client.partition_count("adm-b") == 1

    resource = ConfigResource("topic", "adm-a")
    described = admin.describe_configs([resource])[resource].result(30)
    assert described["retention.ms"].value == "3600000" and not described["retention.ms"].is_default
    assert described["segment.bytes"].is_default and described["compression.type"].value == "producer"

    changes = ConfigResource("topic", "adm-a", incremental_configs=[
        ConfigEntry("segment.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ])  # fmt: skip
    assert admin.incremental_alter_configs([changes])[changes].result(30) is None
    described = admin.describe_configs([resource])[resource].result(30)
    assert described["segment.bytes"].value == "1048576" and described["retention.ms"].value == "604800000"
    assert described["retention.ms"].is_default, "DELETE removes the property: its default applies again"
    assert not described["segment.bytes"].is_default
    bad = ConfigResource("topic", "adm-a", set_config={"segment.bytes": "12"})
    with pytest.warns(DeprecationWarning):  # AlterConfigs, the whole set at once: still served
        refused = admin.alter_configs([bad])[bad]
    assert "INVALID_CONFIG" in _error(refused)
    with http_client(kafka_cluster) as client:
        configs = json.loads(client.request("GET", "/topics/adm-a").body)["configs"]
    assert configs == {"segment.bytes": 1048576}, "the HTTP API shows the same configs, typed"
    whole = ConfigResource("topic", "adm-a", set_config={"retention.ms": "7200000"})
    with pytest.warns(DeprecationWarning):  # AlterConfigs replaces: what it leaves out goes
        assert admin.alter_configs([whole])[whole].result(30) is None
    with http_client(kafka_cluster) as client:
        configs = json.loads(client.request("GET", "/topics/adm-a").body)["configs"]
    assert configs == {"retention.ms": 7200000}

    more = admin.create_partitions([NewPartitions("adm-a", 6)])["adm-a"]
    assert "cannot add partitions" in _error(more)
    cluster = admin.describe_cluster().result(30)
    assert sorted(node.id for node in cluster.nodes) == [1, 2, 3] and cluster.controller is not None

    deleted = admin.delete_topics(["adm-b", "adm-nosuch"])
    assert deleted["adm-b"].result(30) is None
    assert "UNKNOWN_TOPIC" in _error(deleted["adm-nosuch"])
    assert "adm-b" not in admin.list_topics(timeout=30).topics
