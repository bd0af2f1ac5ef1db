"""A replica's log directory asked for, on both systems with the same assertions: Kafka's own
``kafka-reassign-partitions`` with ``log_dirs`` (each replica into the directory its broker's
DescribeLogDirs names: the tool sends AlterReplicaLogDirs to each broker, and ``--verify`` reads the
directories back), then AlterReplicaLogDirs by hand for what the tool never sends (a directory the broker
does not have, a partition it holds no replica of, one there is not). Kafka's brokers here have one log
directory each, as a raftlog node has, so every answer is one both can give."""

from __future__ import annotations

import json
import pathlib
import uuid
from collections.abc import Mapping

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_fixtures import RawKafka
from kafka_tools import KafkaTools

from kafka_api import wire

pytestmark = [pytest.mark.slow, pytest.mark.kafka_answer, pytest.mark.timeout(600)]

SYSTEMS = ("raftlog", "kafka")
PLACED = {0: [1, 2], 1: [2, 3], 2: [3, 1]}  # broker 1 holds partitions 0 and 2, not 1


def _dirs(tools: KafkaTools, bootstrap: str, topic: str) -> dict[int, str]:
    """Each broker's log directory, as ``kafka-log-dirs --describe`` prints it."""
    described = tools.run(
        "kafka-log-dirs", "--bootstrap-server", bootstrap, "--describe", "--topic-list", topic
    )
    assert described.status == 0, described.output
    found = json.loads(next(line for line in described.lines() if line.startswith("{")))
    dirs = {}
    for broker in found["brokers"]:
        (log_dir,) = broker["logDirs"]  # one directory per broker on both systems
        dirs[broker["broker"]] = log_dir["logDir"]
    return dirs


def _alter(
    address: str, version: int, asked: Mapping[str, Mapping[str, list[int]]]
) -> dict[tuple[str, int], int]:
    """AlterReplicaLogDirs sent to one broker: each partition's error code."""
    cls = wire.request_class(34, version)
    dir_cls, topic_cls = wire.sibling(cls, "AlterReplicaLogDir"), wire.sibling(cls, "AlterReplicaLogDirTopic")
    body = wire.build(
        cls,
        dirs=tuple(
            wire.build(
                dir_cls,
                path=path,
                topics=tuple(wire.build(topic_cls, name=t, partitions=tuple(ps)) for t, ps in topics.items()),
            )
            for path, topics in asked.items()
        ),
    )
    raw = RawKafka(address)
    try:
        answer = raw.call(34, version, body)
    finally:
        raw.close()
    return {
        (t.topic_name, p.partition_index): p.error_code.value for t in answer.results for p in t.partitions
    }


@pytest.mark.parametrize("system", SYSTEMS)
def test_a_replica_asked_into_its_broker_s_directory_is_there_and_the_rest_refused_by_partition(
    servers: Mapping[str, str], system: str, tmp_path: pathlib.Path
) -> None:
    bootstrap = servers[system]
    topic = f"logdirs-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    placed = NewTopic(topic, len(PLACED), replica_assignment=list(PLACED.values()))
    admin.create_topics([placed])[topic].result(60)
    brokers = {b.id: f"{b.host}:{b.port}" for b in admin.list_topics(timeout=30).brokers.values()}
    tools = KafkaTools(tmp_path)
    try:
        dirs = _dirs(tools, bootstrap, topic)
        assert sorted(dirs) == [1, 2, 3], dirs
        plan = tmp_path / "plan.json"
        partitions = [
            {"topic": topic, "partition": p, "replicas": r, "log_dirs": [dirs[b] for b in r]}
            for p, r in PLACED.items()
        ]
        plan.write_text(json.dumps({"version": 1, "partitions": partitions}), encoding="utf-8")
        executed = tools.run("kafka-reassign-partitions", "--bootstrap-server", bootstrap, "--execute",
                             "--reassignment-json-file", str(plan))  # fmt: skip
        assert executed.status == 0, executed.output
        assert "Successfully started partition reassignments" in executed.output, executed.output
        verified = tools.run("kafka-reassign-partitions", "--bootstrap-server", bootstrap, "--verify",
                             "--reassignment-json-file", str(plan))  # fmt: skip
        assert verified.status == 0, verified.output
        for p, replicas in PLACED.items():
            assert f"Reassignment of partition {topic}-{p} is completed." in verified.output, verified.output
            for b in replicas:  # each replica's directory, read back by DescribeLogDirs
                moved = f"Reassignment of replica {topic}-{p}-{b} completed successfully."
                assert moved in verified.output, verified.output
    finally:
        tools.close()

    one = brokers[1]
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    for version in (1, 2):
        answered = _alter(one, version, {dirs[1]: {topic: [0, 1, 2, 9], missing: [0]}})
        assert answered == {
            (topic, 0): 0,  # NONE: the replica is in that directory
            (topic, 1): 9,  # REPLICA_NOT_AVAILABLE: broker 1 holds no replica of it
            (topic, 2): 0,
            (topic, 9): 3,  # UNKNOWN_TOPIC_OR_PARTITION
            (missing, 0): 3,
        }, (version, answered)
        elsewhere = _alter(one, version, {dirs[2] + "-not-here": {topic: [0]}, "/no/such/dir": {topic: [2]}})
        assert elsewhere == {(topic, 0): 57, (topic, 2): 57}, (version, elsewhere)  # LOG_DIR_NOT_FOUND
