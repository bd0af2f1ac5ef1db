"""The APIs that name topics by id in Kafka 4.4 (KIP-516, KIP-848) against raftlog's real 3-node cluster:
Produce v13, DeleteTopics v6, OffsetCommit v10 and OffsetFetch v10, the scenarios of
``topic_id_scenarios`` (Apache Kafka passes the same: ``tests/kafka_reference/
test_differential_topic_ids``)."""

from __future__ import annotations

from topic_id_scenarios import commits_and_fetches_offsets_by_id, deletes_by_id_and_by_name, produces_by_id

from raftlog_client.local_cluster import LocalCluster


def test_produce_v13_writes_to_the_topic_of_the_id_and_answers_an_unknown_id_per_partition(
    kafka_cluster: LocalCluster,
) -> None:
    produces_by_id(kafka_cluster.bootstrap_servers)


def test_delete_topics_v6_deletes_by_id_and_by_name_and_refuses_as_kafka(kafka_cluster: LocalCluster) -> None:
    deletes_by_id_and_by_name(kafka_cluster.bootstrap_servers)


def test_offsets_committed_by_topic_id_are_fetched_back_by_id_and_by_name(
    kafka_cluster: LocalCluster,
) -> None:
    commits_and_fetches_offsets_by_id(kafka_cluster.bootstrap_servers)
