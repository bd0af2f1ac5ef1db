"""The transactional workload against Apache Kafka (three KRaft brokers, no faults): the reference
implementation of the protocol gives a valid history with commits, deliberate aborts whose records a
read_uncommitted reader sees, and consumer offsets sent in transactions; and the same history, with the
read_uncommitted final reads presented as read_committed ones, is invalid, naming aborted transactions."""

from __future__ import annotations

import asyncio
import json
import pathlib
import random

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from jepsen import kafka_workload, txn_workload, workload
from jepsen.history import parse_lines, read_history
from jepsen.recorder import Recorder
from jepsen.txn_checker import check
from raftlog_bench.kafka_peer import KafkaCluster

WORKLOAD_S = 20.0  # at least this long, then on until ENDS_WANTED ends have succeeded
ENDS_WANTED = 45  # one in ABORT_ONE_IN transactions aborts deliberately: about 34 commits and 11 aborts
WORKLOAD_MAX_S = 180.0  # a loaded machine slows Kafka's transactions: the bound on waiting for them
TOPIC_TIMEOUT_S = 60.0


def _create_topics(bootstrap_servers: str) -> list[str]:
    """The workload's topics, replicated 3 ways (raftlog's topic configs are raftlog's: Kafka keeps its
    own; its segments may not be smaller than 1 MiB)."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    topics = [NewTopic(topic, count, 3) for topic, count in sorted(txn_workload.TOPICS.items())]
    for future in admin.create_topics(topics, operation_timeout=TOPIC_TIMEOUT_S).values():
        future.result(timeout=TOPIC_TIMEOUT_S)
    return [workload.key_of(t, p) for t, count in sorted(txn_workload.TOPICS.items()) for p in range(count)]


async def _run(bootstrap_servers: str, keys: list[str], directory: pathlib.Path) -> dict[str, object]:
    recorder = Recorder(str(directory / "history.jsonl"))
    logger = kafka_workload.client_logger(str(directory / "kafka-clients.log"))
    run = txn_workload.TxnRun(
        bootstrap_servers, recorder, keys, concurrency=4, run_id="kafka", rng=random.Random(40), logger=logger
    )
    stats = workload.Stats()
    loop = asyncio.get_running_loop()
    began = loop.time()
    try:
        await run.run_workers(rate=20.0, deadline=began + WORKLOAD_S, stats=stats)
        last = began + WORKLOAD_MAX_S
        while stats.ops.get("end", {}).get("ok", 0) < ENDS_WANTED and loop.time() < last:
            await run.run_workers(rate=20.0, deadline=min(loop.time() + 5.0, last), stats=stats)
        return await run.finish(stats)
    finally:
        await run.close()
        kafka_workload.close_client_logger(logger)
        recorder.close()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_transactional_workload_against_apache_kafka(tmp_path: pathlib.Path) -> None:
    kafka = KafkaCluster(str(tmp_path / "kafka"))
    kafka.start()
    try:
        keys = _create_topics(kafka.bootstrap_servers)
        summary = asyncio.run(_run(kafka.bootstrap_servers, keys, tmp_path))
    finally:
        kafka.stop()
    assert set(summary["init"].values()) == {"ok"}, summary  # type: ignore[attr-defined]

    results = check(read_history(tmp_path / "history.jsonl"))
    stats = results["stats"]
    assert results["verdict"] == "valid", (results["reasons"], results["anomalies"])
    assert stats["transactions"].get("committed", 0) >= 30, stats["transactions"]
    assert stats["transactions"].get("aborted, deliberately", 0) >= 5, stats["transactions"]
    assert stats["aborted_values_seen_by_read_uncommitted"] >= 5, "aborted transactions wrote records"
    assert stats["transactions_sending_offsets"] >= 3
    assert stats["complete_final_read_keys"] == sorted(keys)

    # The negative control on Kafka's own history: what read_uncommitted saw, claimed as read_committed.
    lines = (tmp_path / "history.jsonl").read_text().splitlines(keepends=True)
    relabelled = []
    for line in lines:
        event = json.loads(line)
        if (
            event["f"] == "poll"
            and event.get("isolation") == "read_uncommitted"
            and event["type"] == "invoke"
        ):
            event["isolation"] = "read_committed"
        relabelled.append(json.dumps(event) + "\n")
    broken = check(parse_lines(relabelled))
    assert broken["verdict"] == "invalid"
    aborted_reads = broken["anomalies"]["aborted-read"]
    assert aborted_reads and all(a["outcome"].startswith("abort requested") for a in aborted_reads[:5])
    assert any(f"txn {aborted_reads[0]['txn']}" in reason for reason in broken["reasons"])
