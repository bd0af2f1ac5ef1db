"""A stream processor from PyPI, unchanged, on a real 3-node cluster: quixstreams running
``examples/quixstreams_totals.py``, a running total per key in its RocksDB state store, as a separate
process. quixstreams creates the store's changelog topic itself, compacted (DescribeConfigs says so); the
test gives it small segments so the nodes' cleaners compact it while the processor runs.

What is asserted, under quixstreams' default at-least-once: after every fault, each key's latest output
reflects every reading produced so far, exactly (its ``seq`` is the key's last reading, its ``sum`` the
sum of all its readings: a reading read twice is skipped by its sequence, never added twice), no output
ever saw a reading missing (``gap``), and ``processed`` (every hand-over, replays included) is at least
the number of readings. The faults: kill -9 of the processor (it restores its store from the changelog),
kill -9 of the node leading the changelog partition (restarted), and, once the changelog is compacted,
kill -9 of the processor with its state directory deleted (it rebuilds its store from the compacted
changelog alone)."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from quixstreams_processes import KEYS, RACES, Processor, Readings

from raftlog_client.local_cluster import LocalCluster
from tests.waiting import node_metric, wait_for

SOURCE, SINK, GROUP = "readings", "totals", "totals"
CHANGELOG_PREFIX = f"changelog__{GROUP}--"
READINGS_PER_STEP = 600


@pytest.fixture(scope="module")
def cluster(compacting_cluster: LocalCluster) -> LocalCluster:
    return compacting_cluster


class Totals:
    """Reads the processor's outputs as they come: each key's latest, and whether any saw a gap."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.consumer = Consumer(
            {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "totals-checker",
             "enable.auto.commit": False, "isolation.level": "read_uncommitted"}
        )  # fmt: skip
        self.consumer.assign([TopicPartition(SINK, 0, 0)])
        self.latest: dict[int, dict[str, Any]] = {}
        self.gaps: list[tuple[bytes, dict[str, Any]]] = []
        self.outputs = 0

    def poll(self, processor: Processor) -> None:
        processor.check_alive()
        for message in self.consumer.consume(500, 0.2):
            if message.error():
                raise KafkaException(message.error())
            total = json.loads(message.value())
            key = int(message.key().decode().removeprefix("k"))
            self.latest[key], self.outputs = total, self.outputs + 1
            if total["gap"]:
                self.gaps.append((message.key(), total))

    def outputs_reach(self, count: int, processor: Processor, timeout_s: float = 90.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.outputs < count:
            assert time.monotonic() < deadline, f"not {count} outputs in {timeout_s} s but {self.outputs}"
            self.poll(processor)

    def caught_up(self, readings: Readings, processor: Processor, timeout_s: float = 90.0) -> None:
        """Every key's latest output shows its last reading; then the totals are checked exactly."""
        deadline = time.monotonic() + timeout_s
        written = [key for key in range(KEYS) if readings.seq[key]]
        while any(self.latest.get(key, {}).get("seq") != readings.seq[key] for key in written):
            assert time.monotonic() < deadline, f"the outputs did not catch up in {timeout_s} s"
            self.poll(processor)
        assert not self.gaps, f"no output ever saw a reading missing: {self.gaps[:5]}"
        for key in written:
            total = self.latest[key]
            assert total["sum"] == readings.sum[key], f"k{key}: every reading added once: {total}"
            assert total["processed"] >= readings.seq[key], f"k{key}: at least once: {total}"


def describe(admin: AdminClient, topic: str) -> dict[str, str]:
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    entries = next(iter(described.values())).result(timeout=30)
    return {name: entry.value for name, entry in entries.items()}


def leader(admin: AdminClient, topic: str) -> str:
    partition = admin.list_topics(topic, timeout=30).topics[topic].partitions[0]
    return f"n{partition.leader}"


def changelog_topic(admin: AdminClient) -> str | None:
    return next((t for t in admin.list_topics(timeout=30).topics if t.startswith(CHANGELOG_PREFIX)), None)


def _watermarks(cluster: LocalCluster, topic: str) -> tuple[int, int] | None:
    """The partition's watermarks, asked by a fresh client (one that met a node not yet knowing the topic
    again after its restart keeps that answer cached); None while the partition is not known."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "changelog-marks"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError._UNKNOWN_PARTITION:
            raise
        return None
    finally:
        consumer.close()
    return low, high


def changelog_records(cluster: LocalCluster, topic: str) -> tuple[int, int]:
    """How many records the changelog holds, and its high watermark (how many were written)."""
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "changelog-reader",
         "enable.auto.commit": False, "enable.partition.eof": True}
    )  # fmt: skip
    try:
        # a node just restarted may answer before it knows the topic again: asked until one knows it
        _, high = wait_for(lambda: _watermarks(cluster, topic), "the changelog's watermarks")
        consumer.assign([TopicPartition(topic, 0, 0)])
        count, deadline = 0, time.monotonic() + 60
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return count, high
                raise KafkaException(message.error())
            count += 1
        raise AssertionError("the changelog was not read to its end")
    finally:
        consumer.close()


def test_quixstreams_keeps_exact_totals_across_processor_and_node_crashes(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for topic in admin.create_topics([NewTopic(SOURCE, 1, 3), NewTopic(SINK, 1, 3)]).values():
        topic.result(timeout=30)
    bootstrap = cluster.bootstrap_servers
    processor = Processor(bootstrap, (SOURCE, SINK), GROUP, tmp_path / "state", tmp_path / "processor.log")
    readings, totals = Readings(bootstrap, SOURCE), Totals(cluster)
    try:
        processor.start()
        # quixstreams creates its store's changelog, compacted, replicated as its source topic is
        changelog = wait_for(lambda: changelog_topic(admin), "quixstreams created its changelog topic")
        assert describe(admin, changelog)["cleanup.policy"] == "compact"
        assert len(admin.list_topics(changelog, timeout=30).topics[changelog].partitions[0].replicas) == 3
        # small segments, so the nodes' cleaners compact the changelog while the processor runs
        small = [
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in (("internal.segment.bytes", "4096"), ("min.cleanable.dirty.ratio", "0.01"))
        ]
        resource = ConfigResource(ConfigResource.Type.TOPIC, changelog, incremental_configs=small)
        next(iter(admin.incremental_alter_configs([resource]).values())).result(timeout=30)

        readings.produce(READINGS_PER_STEP)
        totals.caught_up(readings, processor)

        # kill -9 of the processor in the middle of a stream of readings (between two of its checkpoints,
        # likely): its store comes back from the local RocksDB and the changelog, and what it read since
        # its last commit is read again
        readings.produce(READINGS_PER_STEP * 3)
        totals.outputs_reach(totals.outputs + READINGS_PER_STEP // 2, processor)
        processor.kill()
        readings.produce(READINGS_PER_STEP)
        processor.start()
        totals.caught_up(readings, processor)

        # kill -9 of the node leading the changelog partition, readings arriving while it is down
        node = leader(admin, changelog)
        cluster.control("stop", node, kill=True)
        readings.produce(READINGS_PER_STEP)
        cluster.control("start", node)
        readings.produce(READINGS_PER_STEP // 2)
        totals.caught_up(readings, processor)

        # the changelog was compacted: fewer records than were written to it
        removed = "raftlog_cleaner_records_removed_total"  # the changelog is the one compacted topic
        wait_for(lambda: any(node_metric(url, removed) > 0 for url in cluster.servers), "a cleaner compacted")
        held, written = changelog_records(cluster, changelog)
        assert held < written, f"the changelog holds {held} of the {written} records written to it"

        # kill -9 with the state directory gone: the store is rebuilt from the compacted changelog alone
        processor.kill()
        shutil.rmtree(processor.state_dir)
        readings.produce(READINGS_PER_STEP)
        processor.start()
        totals.caught_up(readings, processor)
    finally:
        processor.kill()
        totals.consumer.close()


@pytest.mark.parametrize("race", RACES)
def test_a_processor_ended_by_a_start_up_race_is_started_again_once(tmp_path: Path, race: str) -> None:
    """quixstreams' seek or coordinator race (``quixstreams_processes.RACES``) restarts the processor once;
    any exit after that, or for another reason, fails the test."""
    processor = Processor("127.0.0.1:9", ("in", "out"), "g", tmp_path / "state", tmp_path / "processor.log")
    processor.argv = [sys.executable, "-c", f"print({race!r})"]
    processor.start()
    assert processor.process is not None
    processor.process.wait(30)
    processor.check_alive()
    assert processor.restarted_after_race
    processor.process.wait(30)
    with pytest.raises(AssertionError, match="the processor exited"):
        processor.check_alive()
