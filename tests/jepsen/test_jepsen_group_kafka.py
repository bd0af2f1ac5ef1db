"""The consumer-group workload against Apache Kafka (three KRaft brokers), the control for the checker:
with the group's coordinator killed (SIGKILL) and restarted twice while the members consume, Kafka's
history is valid: rebalances, redeliveries past the last commit and commits refused across the failovers
are all behaviour the checker allows. The same workload against raftlog runs in
test_jepsen_group_run.py."""

from __future__ import annotations

import asyncio
import pathlib
import random

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from jepsen import group_workload, kafka_workload, workload
from jepsen.group_checker import check
from jepsen.history import read_history
from jepsen.recorder import Recorder
from raftlog_bench.kafka_peer import KafkaCluster

WORKLOAD_S = 45.0
KILLS_AT_S = (6.0, 20.0)  # the coordinator is killed then, and started again 5 s later
DOWN_S = 5.0
TOPIC_TIMEOUT_S = 60.0
WARM_UP_TIMEOUT_S = 180.0


def _create_topic(bootstrap_servers: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    topics = [NewTopic(group_workload.TOPIC, group_workload.PARTITIONS, 3), NewTopic("warm-up", 1, 3)]
    for future in admin.create_topics(topics, operation_timeout=TOPIC_TIMEOUT_S).values():
        future.result(timeout=TOPIC_TIMEOUT_S)


def _warm_up(bootstrap_servers: str) -> None:
    """Kafka makes __transaction_state (50 partitions) at the first idempotent producer's InitProducerId:
    on a loaded machine that takes a while, which the workload's time should not pay for."""
    producer = Producer({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True})
    producer.produce("warm-up", b"1")
    assert producer.flush(WARM_UP_TIMEOUT_S) == 0, "an idempotent producer could not send"


async def _kill_coordinators(
    kafka: KafkaCluster, recorder: Recorder, run: group_workload.GroupRun
) -> list[str]:
    """Kill the group's coordinator (as the members' clients found it) at each of KILLS_AT_S, or as soon
    after as one is known, and start it again DOWN_S later; the nodes killed."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    addresses = kafka.bootstrap_servers.split(",")
    killed: list[str] = []
    for at in KILLS_AT_S:
        await asyncio.sleep(max(0.0, began + at - loop.time()))
        while run.coordinator() not in addresses:
            await asyncio.sleep(0.5)
        index = addresses.index(str(run.coordinator()))
        node = f"kafka{index + 1}"
        recorder.nemesis("start", "kill-coordinator", {"nodes": [node], "coordinator": True})
        await asyncio.to_thread(kafka.kill, index)
        killed.append(node)
        await asyncio.sleep(DOWN_S)
        await asyncio.to_thread(kafka.restart, index)
        recorder.nemesis("stop", "kill-coordinator", {"nodes": [node]})
    return killed


async def _run(kafka: KafkaCluster, directory: pathlib.Path) -> tuple[dict[str, object], list[str]]:
    recorder = Recorder(str(directory / "history.jsonl"))
    logger = kafka_workload.client_logger(str(directory / "kafka-clients.log"))
    run = group_workload.GroupRun(
        kafka.bootstrap_servers, recorder, concurrency=6, run_id="kafka", rng=random.Random(53), logger=logger
    )
    stats = workload.Stats()
    try:
        deadline = asyncio.get_running_loop().time() + WORKLOAD_S
        _, killed = await asyncio.gather(
            run.run_workers(rate=30.0, deadline=deadline, stats=stats),
            _kill_coordinators(kafka, recorder, run),
        )
        return await run.finish(stats), killed
    finally:
        await run.close()
        kafka_workload.close_client_logger(logger)
        recorder.close()


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_the_group_workload_against_apache_kafka_through_coordinator_kills(tmp_path: pathlib.Path) -> None:
    kafka = KafkaCluster(str(tmp_path / "kafka"))
    kafka.start()
    try:
        _create_topic(kafka.bootstrap_servers)
        _warm_up(kafka.bootstrap_servers)
        summary, killed = asyncio.run(_run(kafka, tmp_path))
    finally:
        kafka.stop()
    assert len(killed) == len(KILLS_AT_S), killed
    assert summary["drained"], summary
    results = check(read_history(tmp_path / "history.jsonl"))
    stats = results["stats"]
    assert results["verdict"] == "valid", (results["reasons"], results["anomalies"])
    # Kafka's new coordinator loads the group's members: on record, one generation through both kills.
    # Thresholds are low: on a loaded machine Kafka acknowledged 14 records in the run on record.
    assert stats["acked_sends"] >= 10 and stats["deliveries"] >= stats["acked_sends"], stats
    assert stats["commits"].get("ok", 0) >= 3 and stats["generations"], stats
