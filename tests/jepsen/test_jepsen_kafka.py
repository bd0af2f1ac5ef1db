"""The checkers' controls: the transactional and the consumer-group workloads against Apache Kafka (three
KRaft brokers, one cluster for both tests: a start costs tens of seconds on a loaded machine).

Transactions, no faults: the reference implementation of the protocol gives a valid history with commits,
deliberate aborts whose records a read_uncommitted reader sees, and consumer offsets sent in transactions;
and the same history, with the read_uncommitted final reads presented as read_committed ones, is invalid,
naming aborted transactions.

Consumer group, with the group's coordinator killed (SIGKILL) and restarted twice while the members
consume, once with members of the classic protocol and once of KIP-848's consumer group protocol: Kafka's
history is valid: rebalances, redeliveries past the last commit and commits refused across the failovers
are all behaviour the checker allows, and both kills landed with the group consuming and committing
before the first and after the last. The same workloads against raftlog run in test_jepsen_txn_run.py and
test_jepsen_group_run.py.

Kafka's histories are recorded (``kafka_histories.py``): while the workloads that write them are as they
were, each run checks the recorded history with today's checker and starts no Kafka."""

from __future__ import annotations

import asyncio
import json
import pathlib
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_histories import kafka_history

from jepsen import group_checker, group_workload, kafka_workload, txn_checker, txn_workload, workload
from jepsen.history import History, parse_lines, read_history
from jepsen.recorder import Recorder
from raftlog_bench.kafka_peer import SHORT_LIVED, KafkaCluster

TOPIC_TIMEOUT_S = 60.0

TXN_WORKLOAD_S = 10.0  # at least this long, then on until ENDS_WANTED ends have succeeded
ENDS_WANTED = 30  # one in ABORT_ONE_IN transactions aborts deliberately: about 22 commits and 8 aborts
TXN_WORKLOAD_MAX_S = 180.0  # a loaded machine slows Kafka's transactions: the bound on waiting for them

GROUP_WORKLOAD_S = 28.0
KILLS_AT_S = (4.0, 14.0)  # the coordinator is killed then (once the group committed), up DOWN_S later
DOWN_S = 5.0
WARM_UP_TIMEOUT_S = 180.0
# the bound on waiting for the group's first commit, and for its work after the last restart and the
# floors below (a loaded machine joins and restarts late, and Kafka's producers stall 6 to 12 s after a
# kill, measured): the workload goes on until all are seen
GROUP_WAIT_MAX_S = 120.0
# What Kafka did in the runs the floors come from, each protocol's. Classic: the history recorded before
# this control had a KIP-848 twin (commit a74aeb8): its producers sent at the 30 a second asked whenever no
# broker was down (123 acknowledged in the 4 s before the first kill), and the two kills stalled them 7.2
# and 5.8 s. Consumer protocol: a live run of this test against Kafka 4.1.1 beside the suite's load (stalled
# 8.2 and 8.4 s). A history must hold three quarters of those acknowledged sends and commits: the material
# on which the checker is shown Kafka's failovers as they are, as much as on record but for a margin, never
# the handful a short run would leave. How long a kill stalls Kafka's producers varies (5.8 to 11.9 s per
# kill, measured), so a live run goes on past GROUP_WORKLOAD_S until it holds them.
RECORDED = {
    group_workload.CLASSIC: {"acked_sends": 439, "commits": 55},
    group_workload.CONSUMER: {"acked_sends": 255, "commits": 28},
}
FLOORS = {
    protocol: {name: count * 3 // 4 for name, count in figures.items()}
    for protocol, figures in RECORDED.items()
}
HISTORY_NAMES = {group_workload.CLASSIC: "group", group_workload.CONSUMER: "group-consumer"}


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], KafkaCluster]]:
    """Apache Kafka's cluster, started the first time a test runs its workload live."""
    started: list[KafkaCluster] = []

    def cluster() -> KafkaCluster:
        if not started:
            started.append(KafkaCluster(str(tmp_path_factory.mktemp("kafka")), performance=SHORT_LIVED))
            started[0].start()
        return started[0]

    try:
        yield cluster
    finally:
        for running in started:
            running.stop()


def _create_topics(bootstrap_servers: str, topics: list[NewTopic]) -> None:
    """Create the topics, asking again for those whose request librdkafka lost with its connection: it
    drops its bootstrap brokers' connections once it has learned the cluster's brokers, and a request in
    flight on one fails _DESTROY_BROKER (a loaded whole run saw it); a topic the lost request did create
    answers TOPIC_ALREADY_EXISTS the second time."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    pending = {topic.topic: topic for topic in topics}
    lost: set[str] = set()  # asked again: their first request may have created them
    deadline = time.monotonic() + TOPIC_TIMEOUT_S
    while pending:
        futures = admin.create_topics(list(pending.values()), operation_timeout=TOPIC_TIMEOUT_S)
        for name, future in futures.items():
            try:
                future.result(timeout=TOPIC_TIMEOUT_S)
            except KafkaException as exc:
                code = exc.args[0].code()
                if code == KafkaError._DESTROY_BROKER and time.monotonic() < deadline:
                    lost.add(name)
                    continue  # asked again below
                if not (code == KafkaError.TOPIC_ALREADY_EXISTS and name in lost):
                    raise
            del pending[name]


def _delete_topics(bootstrap_servers: str, names: list[str]) -> None:
    """Delete the topics and wait until the cluster's metadata no longer has them."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    for future in admin.delete_topics(names, operation_timeout=TOPIC_TIMEOUT_S).values():
        future.result(timeout=TOPIC_TIMEOUT_S)
    deadline = time.monotonic() + TOPIC_TIMEOUT_S
    while set(names) & set(admin.list_topics(timeout=TOPIC_TIMEOUT_S).topics):
        assert time.monotonic() < deadline, f"{names} still listed {TOPIC_TIMEOUT_S:.0f} s after deletion"
        time.sleep(0.2)


# -- transactions ---------------------------------------------------------------------------------------


def _txn_keys() -> list[str]:
    return [workload.key_of(t, p) for t, count in sorted(txn_workload.TOPICS.items()) for p in range(count)]


def _create_txn_topics(bootstrap_servers: str) -> None:
    """The workload's topics, replicated 3 ways (raftlog's topic configs are raftlog's: Kafka keeps its
    own; its segments may not be smaller than 1 MiB)."""
    _create_topics(bootstrap_servers, [NewTopic(t, n, 3) for t, n in sorted(txn_workload.TOPICS.items())])


async def _run_txn(bootstrap_servers: str, keys: list[str], directory: pathlib.Path) -> dict[str, object]:
    recorder = Recorder(str(directory / "history.jsonl"))
    logger = kafka_workload.client_logger(str(directory / "kafka-clients.log"))
    run = txn_workload.TxnRun(
        bootstrap_servers, recorder, keys, concurrency=4, run_id="kafka", rng=random.Random(40), logger=logger
    )
    stats = workload.Stats()
    loop = asyncio.get_running_loop()
    began = loop.time()
    try:
        await run.run_workers(rate=20.0, deadline=began + TXN_WORKLOAD_S, stats=stats)
        last = began + TXN_WORKLOAD_MAX_S
        while stats.ops.get("end", {}).get("ok", 0) < ENDS_WANTED and loop.time() < last:
            await run.run_workers(rate=20.0, deadline=min(loop.time() + 5.0, last), stats=stats)
        return await run.finish(stats)
    finally:
        await run.close()
        kafka_workload.close_client_logger(logger)
        recorder.close()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_transactional_workload_against_apache_kafka(
    kafka: Callable[[], KafkaCluster], tmp_path: pathlib.Path, request: pytest.FixtureRequest
) -> None:
    keys = _txn_keys()

    def live(directory: pathlib.Path) -> None:
        bootstrap_servers = kafka().bootstrap_servers
        _create_txn_topics(bootstrap_servers)
        summary = asyncio.run(_run_txn(bootstrap_servers, keys, directory))
        assert set(summary["init"].values()) == {"ok"}, summary  # type: ignore[attr-defined]

    history = kafka_history("txn", request, tmp_path, live)
    results = txn_checker.check(read_history(history))
    stats = results["stats"]
    assert results["verdict"] == "valid", (results["reasons"], results["anomalies"])
    assert stats["transactions"].get("committed", 0) >= 15, stats["transactions"]
    assert stats["transactions"].get("aborted, deliberately", 0) >= 3, stats["transactions"]
    assert stats["aborted_values_seen_by_read_uncommitted"] >= 3, "aborted transactions wrote records"
    assert stats["transactions_sending_offsets"] >= 2
    assert stats["complete_final_read_keys"] == sorted(keys)

    # The negative control on Kafka's own history: what read_uncommitted saw, claimed as read_committed.
    lines = history.read_text().splitlines(keepends=True)
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
    broken = txn_checker.check(parse_lines(relabelled))
    assert broken["verdict"] == "invalid"
    aborted_reads = broken["anomalies"]["aborted-read"]
    assert aborted_reads and all(a["outcome"].startswith("abort requested") for a in aborted_reads[:5])
    assert any(f"txn {aborted_reads[0]['txn']}" in reason for reason in broken["reasons"])


# -- the consumer group ---------------------------------------------------------------------------------


def _warm_up(bootstrap_servers: str) -> None:
    """Kafka makes __transaction_state (50 partitions) at the first idempotent producer's InitProducerId:
    on a loaded machine that takes a while, which the workload's time should not pay for."""
    producer = Producer({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True})
    producer.produce("warm-up", b"1")
    assert producer.flush(WARM_UP_TIMEOUT_S) == 0, "an idempotent producer could not send"


def _ok(stats: workload.Stats, f: str) -> int:
    return stats.ops.get(f, {}).get("ok", 0)


async def _kill_coordinators(
    kafka: KafkaCluster, recorder: Recorder, run: group_workload.GroupRun, stats: workload.Stats
) -> tuple[list[str], dict[str, int]]:
    """Kill the group's coordinator (as the members' clients found it) at each of KILLS_AT_S, or as soon
    after as one is known and the group has committed, and start it again DOWN_S later; the nodes killed,
    and the acknowledged sends and commits when the last one was up again."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    addresses = kafka.bootstrap_servers.split(",")
    killed: list[str] = []
    for at in KILLS_AT_S:
        await asyncio.sleep(max(0.0, began + at - loop.time()))
        while run.coordinator() not in addresses or not (_ok(stats, "commit") and _ok(stats, "send")):
            assert loop.time() < began + GROUP_WAIT_MAX_S, f"no commit, or no coordinator, in {stats.ops}"
            await asyncio.sleep(0.5)
        index = addresses.index(str(run.coordinator()))
        node = f"kafka{index + 1}"
        recorder.nemesis("start", "kill-coordinator", {"nodes": [node], "coordinator": True})
        await asyncio.to_thread(kafka.kill, index)
        killed.append(node)
        await asyncio.sleep(DOWN_S)
        await asyncio.to_thread(kafka.restart, index)
        recorder.nemesis("stop", "kill-coordinator", {"nodes": [node]})
    return killed, {f: _ok(stats, f) for f in ("send", "commit")}


async def _run_group(
    kafka: KafkaCluster, directory: pathlib.Path, protocol: str
) -> tuple[dict[str, object], list[str]]:
    """The workload through the kills, on until the last restart is behind it, the group sent and
    committed after it, and it has acknowledged the protocol's FLOORS; then the drain."""
    recorder = Recorder(str(directory / "history.jsonl"))
    logger = kafka_workload.client_logger(str(directory / "kafka-clients.log"))
    run = group_workload.GroupRun(
        kafka.bootstrap_servers,
        recorder,
        concurrency=6,
        run_id=f"kafka-{protocol}",
        rng=random.Random(53),
        logger=logger,
        protocol=protocol,
    )
    stats = workload.Stats()
    # at most one send per producer and one commit per member in flight: more acknowledged than that since
    # the last restart means one was sent after it
    in_flight = {"send": len(run.producers), "commit": len(run.members)}
    wanted = {"send": FLOORS[protocol]["acked_sends"], "commit": FLOORS[protocol]["commits"]}
    loop = asyncio.get_running_loop()
    began = loop.time()
    kills = asyncio.create_task(_kill_coordinators(kafka, recorder, run, stats))
    try:
        await run.run_workers(rate=30.0, deadline=began + GROUP_WORKLOAD_S, stats=stats)
        while True:  # on, until the kills are done, the group worked after the last restart, and the floors
            if kills.done() and all(_ok(stats, f) >= wanted[f] for f in wanted):
                restarted = kills.result()[1]
                if all(_ok(stats, f) > restarted[f] + in_flight[f] for f in in_flight):
                    break
            assert loop.time() < began + GROUP_WORKLOAD_S + GROUP_WAIT_MAX_S, (stats.ops, kills)
            await run.run_workers(rate=30.0, deadline=loop.time() + 1.0, stats=stats)
        return await run.finish(stats), (await kills)[0]
    finally:
        if not kills.done():
            kills.cancel()
            await asyncio.gather(kills, return_exceptions=True)
        await run.close()
        kafka_workload.close_client_logger(logger)
        recorder.close()


def _phases(history: History) -> dict[str, Counter[str]]:
    """Acknowledged sends and commits before the first coordinator kill and after the last restart."""
    kills = [e for e in history.nemesis if e.get("fault") == "kill-coordinator"]
    first = min(e.time for e in kills if e.f == "start")
    last = max(e.time for e in kills if e.f == "stop")
    found: dict[str, Counter[str]] = {"before": Counter(), "after": Counter()}
    for op in history.operations:
        if op.type == "ok" and op.f in ("send", "commit") and op.completion is not None:
            if op.completion.time < first:
                found["before"][op.f] += 1
            elif op.invoke.time > last:
                found["after"][op.f] += 1
    return found


@pytest.mark.slow
@pytest.mark.timeout(480)
@pytest.mark.parametrize("protocol", group_workload.PROTOCOLS)
def test_the_group_workload_against_apache_kafka_through_coordinator_kills(
    kafka: Callable[[], KafkaCluster], tmp_path: pathlib.Path, request: pytest.FixtureRequest, protocol: str
) -> None:
    def live(directory: pathlib.Path) -> None:
        cluster = kafka()
        topics = [NewTopic(group_workload.TOPIC, group_workload.PARTITIONS, 3), NewTopic("warm-up", 1, 3)]
        _create_topics(cluster.bootstrap_servers, topics)
        try:
            _warm_up(cluster.bootstrap_servers)
            summary, killed = asyncio.run(_run_group(cluster, directory, protocol))
        finally:  # the other protocol's run, on the same cluster, starts from empty topics
            _delete_topics(cluster.bootstrap_servers, [t.topic for t in topics])
        assert len(killed) == len(KILLS_AT_S), killed
        assert summary["drained"], summary

    history = read_history(kafka_history(HISTORY_NAMES[protocol], request, tmp_path, live))
    results = group_checker.check(history)
    stats = results["stats"]
    assert results["verdict"] == "valid", (results["reasons"], results["anomalies"])
    assert stats["protocol"] == protocol, stats
    # both kills landed: the coordinator killed and started again twice, in the history as in the run
    kills = [(e.f, e.get("fault")) for e in history.nemesis]
    assert kills == [("start", "kill-coordinator"), ("stop", "kill-coordinator")] * len(KILLS_AT_S), kills
    floors = FLOORS[protocol]
    assert stats["acked_sends"] >= floors["acked_sends"], (floors, stats)
    assert stats["deliveries"] >= stats["acked_sends"], stats
    assert stats["commits"].get("ok", 0) >= floors["commits"], (floors, stats)
    assert stats["generations"], stats
    # the group consumed and committed before the first kill and after the last restart
    phases = _phases(history)
    assert all(phases[p][f] > 0 for p in ("before", "after") for f in ("send", "commit")), phases
