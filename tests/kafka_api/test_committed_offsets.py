"""Committed offsets as Kafka's clients meet them: none lost across a kill -9, and each keeps its leader
epoch.

No committed offset is lost across a kill -9, for each Kafka client family: a consumer of a group commits
offsets 1, 2, 3... of a partition in a loop (the partition assigned, as a stream processor commits), reading
the committed offset back every tenth commit, while the node leading that partition is killed with SIGKILL
and restarted, then again while another replica is paused (the partition leaderless for seconds, as a slow
election on a loaded machine leaves it), then the group's coordinator. The four families commit side by
side, each in a group of its own, to one partition whose groups share one coordinator: each kill meets
every family at once (each takes its own code path: its request versions and the codes it retries).

No commit or read may fail with a code a node answered (a client retries what Kafka's coordinator answers; any
other code ends the commit, and its offset is lost): one fails only when its client could not reach a node
just killed, as with Kafka's brokers. Every read finds at least the last commit (an offset not read is not
"none"), and after all of it the group's offset read afresh is at least the last commit the client saw
succeed.

Committed offsets live on each partition's leader (docs/decisions/0003): while the partition elects a
new leader, a commit and a read wait for it (``partitions.consumers.offsets``), and answer
COORDINATOR_LOAD_IN_PROGRESS only when the time runs out."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import pytest
from commit_loop import STOP_TIMEOUT_S, PythonCommitter
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from go_client import build_go_client
from java_client import JavaClient, JavaRun
from kafka_fixtures import http_client
from waiting import wait_for

from partitions.groups.coordinator import GROUP_PARTITIONS_DEFAULT
from raftlog.storage.partitioner import partition_for_key
from raftlog_client.local_cluster import LocalCluster

COMMITS_BETWEEN = 15  # commits each client must see succeed before a kill, without the node, and after
PROGRESS_TIMEOUT_S = 90.0  # a kill -9's election is a few seconds; a loaded 2-core machine is slower
# A node just killed is dialled before the client learns where the coordinator went (as with Kafka's
# brokers); franz-go gives a commit up after its dial retries: the client sees that commit fail, loses
# nothing it was told it had, and commits the next
# A node restarted a moment ago may answer before it knows the topic again (a known gap of its own: it
# should not serve until its metadata caught up, as Kafka's brokers do not); franz-go does not retry that
# code for a commit, which fails visibly, nothing lost
# a node just killed, as each client words it (kafka-python 3.0: "111 ECONNREFUSED", or "socket
# disconnected" for a request in flight when the node went)
UNREACHED = (
    "unable to dial", "connection refused", "ECONNREFUSED", "socket disconnected", "_TRANSPORT",
    "UNKNOWN_TOPIC_OR_PARTITION",
)  # fmt: skip
STALL_S = 4.0  # how long a partition stays leaderless: past Router's 3 s, within GroupOffsets' 8 s


class Committer(Protocol):
    """A client committing in a loop (module docstring) until ``stop``."""

    def committed(self) -> int: ...  # the last offset it saw committed

    def stop(self) -> dict[str, Any]: ...  # {"committed": n, "failures": [...], "behind": [...]}


def _last_commit(lines: list[str]) -> int:
    committed = [line for line in lines if line.startswith("COMMITTED ")]
    return int(committed[-1].split()[1]) if committed else 0


class JavaCommitter:
    """The Java client's loop (``Scenarios.java``'s ``commit-loop``): "COMMITTED n" lines until a line
    on stdin, then its RESULT."""

    def __init__(self, run: JavaRun) -> None:
        self._run = run

    def committed(self) -> int:
        return _last_commit(self._run.lines()[-50:])

    def stop(self) -> dict[str, Any]:
        with self._run:
            self._run.send("stop")
            return self._run.result()


class ProcessCommitter:
    """A loop in a process of its own (franz-go's ``go/main.go`` ``commit-loop``, confluent-kafka's
    ``commit_loop.py``): "COMMITTED n" lines until a line on stdin, then its RESULT; a process that ended
    without one fails the test with what it printed on stderr (librdkafka's abort() says why there)."""

    def __init__(self, command: list[str], stderr: pathlib.Path) -> None:
        self._stderr = stderr
        with stderr.open("wb") as errors:
            self._process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True
            )
        self._lines: list[str] = []
        self._result: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._follow, daemon=True).start()

    def _follow(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.append(line.strip())
            if line.startswith("RESULT "):
                self._result.put(json.loads(line[len("RESULT ") :]))
        self._result.put(None)  # ended: a RESULT before this, if any, is taken first

    def committed(self) -> int:
        return _last_commit(self._lines[-50:])

    def stop(self) -> dict[str, Any]:
        assert self._process.stdin is not None
        try:
            with contextlib.suppress(BrokenPipeError):  # ended already: its stderr says why, below
                self._process.stdin.write("stop\n")
                self._process.stdin.flush()
            result = self._result.get(timeout=STOP_TIMEOUT_S)
        finally:
            if self._process.poll() is None:
                self._process.kill()
            self._process.wait(timeout=STOP_TIMEOUT_S)
        ended = self._stderr.read_text(errors="replace")[-3000:]
        assert result is not None, (
            f"{self._process.args[:2]} ended (exit {self._process.returncode}):\n{ended}"
        )
        return result


def _kafka_python(cluster: LocalCluster, topic: str, group: str) -> Committer:
    kafka = pytest.importorskip("kafka")
    structs = pytest.importorskip("kafka.structs")
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers.split(","), group_id=group, enable_auto_commit=False
    )
    partition = structs.TopicPartition(topic, 0)
    consumer.assign([partition])

    def commit(n: int) -> None:
        consumer.commit({partition: structs.OffsetAndMetadata(n, "", -1)})

    def read() -> int:
        found = consumer.committed(partition)
        return -1 if found is None else int(found)

    return PythonCommitter(commit, read, consumer.close)


@pytest.fixture(scope="module")
def go_binary(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return build_go_client(tmp_path_factory.mktemp("go-client"))


@pytest.fixture(scope="module")
def topics(kafka_cluster: LocalCluster) -> Iterator[Callable[[str], str]]:
    """A topic of one partition, replication factor 3, per client family."""

    def create(family: str) -> str:
        topic = f"commits-{family}"
        with http_client(kafka_cluster) as client:
            client.create_topic(topic, 1, 3)
        return topic

    yield create


def _leader(admin: AdminClient, topic: str) -> str:
    def found() -> int | None:
        leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
        return leader if leader >= 0 else None

    return f"n{wait_for(found, f'a leader of {topic}/0', PROGRESS_TIMEOUT_S)}"


def _coordinator(cluster: LocalCluster, group: str) -> str:
    """Asked through a client of its own: one made before a kill may still be dialling the killed node."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})

    def found() -> int:
        (described,) = admin.describe_consumer_groups([group], request_timeout=10).values()
        return int(described.result().coordinator.id)

    # a client error counts as not yet, and the last one is named if none answers in time (seen once in a
    # whole run: 90 s of errors after the second kill, not reproduced since)
    coordinator = wait_for(
        found, f"the coordinator of group {group}", PROGRESS_TIMEOUT_S, retrying=(KafkaException,)
    )
    return f"n{coordinator}"


def _kill_and_restart(cluster: LocalCluster, node: str, committers: Mapping[str, Committer]) -> None:
    """kill -9 of ``node`` while the clients commit: commits go on without it, and after it is back."""
    cluster.control("stop", node, kill=True)
    _commits_go_on(committers, f"the kill of {node}")
    cluster.control("start", node)
    _commits_go_on(committers, f"the restart of {node}")


def _kill_while_another_is_paused(
    cluster: LocalCluster, node: str, coordinator: str, committers: Mapping[str, Committer]
) -> None:
    """kill -9 of ``node`` while another replica is paused (SIGSTOP: a slow election on a loaded machine):
    the partition has no leader until the paused one is let go, once the clients' commits have stalled
    for ``STALL_S``, longer than a call waits for a leader by itself (Router's 3 s). A node other than the
    groups' coordinator is paused when one is left, so the coordinator meets the leaderless partition."""
    others = sorted(n for n in cluster.pids if n != node)
    paused = next((n for n in others if n != coordinator), others[0])
    pid = cluster.pids[paused]
    os.kill(pid, signal.SIGSTOP)
    try:
        cluster.control("stop", node, kill=True)
        _stalled(committers, STALL_S)
    finally:
        os.kill(pid, signal.SIGCONT)
    _commits_go_on(committers, f"the kill of {node} while {paused} was paused")
    cluster.control("start", node)
    _commits_go_on(committers, f"the restart of {node}")


def _stalled(committers: Mapping[str, Committer], for_s: float) -> None:
    """Until no client's commits have moved for ``for_s``."""
    last, since = [c.committed() for c in committers.values()], time.monotonic()

    def stalled() -> bool:
        nonlocal last, since
        now = [c.committed() for c in committers.values()]
        if now != last:
            last, since = now, time.monotonic()
        return time.monotonic() - since >= for_s

    wait_for(stalled, f"commits stalled for {for_s} s", PROGRESS_TIMEOUT_S, every_s=0.1)


class _Behind(Exception):
    """Clients that have not yet committed enough: named when the wait gives up."""


def _commits_go_on(committers: Mapping[str, Committer], after: str) -> None:
    targets = {family: c.committed() + COMMITS_BETWEEN for family, c in committers.items()}

    def moved_on() -> bool:
        behind = [
            f"{family} at {c.committed()} of {targets[family]}"
            for family, c in committers.items()
            if c.committed() < targets[family]
        ]
        if behind:
            raise _Behind(", ".join(behind))
        return True

    wait_for(
        moved_on,
        f"{COMMITS_BETWEEN} commits of every client after {after}",
        PROGRESS_TIMEOUT_S,
        retrying=(_Behind,),
    )


FAMILIES = ["confluent-kafka", "kafka-python", "java", "franz-go"]


def _groups() -> dict[str, str]:
    """A group per family, all coordinated by one partition of ``__consumer_groups`` (so by one node,
    wherever its leadership goes): the coordinator's kill meets every family."""
    chosen = {}
    for family in FAMILIES:
        names = (f"committer-{family}-{i}" for i in range(1000))
        chosen[family] = next(
            n for n in names if partition_for_key(n.encode(), GROUP_PARTITIONS_DEFAULT) == 0
        )
    return chosen


def _committer(
    family: str, cluster: LocalCluster, topic: str, group: str, request: pytest.FixtureRequest
) -> Committer:
    if family == "confluent-kafka":
        script = pathlib.Path(__file__).with_name("commit_loop.py")
        return ProcessCommitter(
            [sys.executable, str(script), cluster.bootstrap_servers, topic, group],
            request.getfixturevalue("tmp_path") / f"{family}.stderr",
        )
    if family == "kafka-python":
        return _kafka_python(cluster, topic, group)
    if family == "java":
        java: JavaClient = request.getfixturevalue("java_client")
        return JavaCommitter(
            java.start("commit-loop", {"bootstrap.servers": cluster.bootstrap_servers}, topic, group)
        )
    binary: pathlib.Path = request.getfixturevalue("go_binary")
    return ProcessCommitter(
        [str(binary), "commit-loop", cluster.bootstrap_servers, topic, group],
        request.getfixturevalue("tmp_path") / f"{family}.stderr",
    )


@pytest.mark.timeout(900)  # three kills and restarts, four clients through each, on a loaded machine
def test_no_commit_is_lost_across_a_kill_9_of_the_partitions_leader_and_of_the_coordinator(
    kafka_cluster: LocalCluster, topics: Callable[[str], str], request: pytest.FixtureRequest
) -> None:
    topic, groups = topics("families"), _groups()
    committers: dict[str, Committer] = {}
    results: dict[str, dict[str, Any]] = {}
    try:
        for family in FAMILIES:
            committers[family] = _committer(family, kafka_cluster, topic, groups[family], request)
        running = dict(committers)
        wait_for(
            lambda: all(c.committed() >= COMMITS_BETWEEN for c in running.values()),
            "the first commits",
            PROGRESS_TIMEOUT_S,
        )
        admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
        coordinators = {_coordinator(kafka_cluster, group) for group in groups.values()}
        assert len(coordinators) == 1, coordinators  # one __consumer_groups partition, one leader
        _kill_and_restart(kafka_cluster, _leader(admin, topic), running)
        coordinator = _coordinator(kafka_cluster, groups[FAMILIES[0]])
        _kill_while_another_is_paused(kafka_cluster, _leader(admin, topic), coordinator, running)
        _kill_and_restart(kafka_cluster, _coordinator(kafka_cluster, groups[FAMILIES[0]]), running)
    finally:
        for family, committer in committers.items():
            results[family] = committer.stop()
    for family, result in results.items():
        answered = [failure for failure in result["failures"] if not any(m in failure for m in UNREACHED)]
        assert answered == [], (family, answered[:5])  # a code the client does not retry, answered by a node
        assert len(result["failures"]) <= 3, (family, result["failures"][:5])
        assert result["behind"] == [], (family, result["behind"][:5])
        assert result["committed"] >= 5 * COMMITS_BETWEEN, family

        reader = Consumer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "group.id": groups[family]})
        try:
            (found,) = reader.committed([TopicPartition(topic, 0)], timeout=60)
        finally:
            reader.close()
        assert found.error is None and found.offset >= result["committed"], (
            family,
            found,
            result["committed"],
        )


def test_a_committed_offset_keeps_its_leader_epoch_committed_or_in_a_transaction(
    kafka_cluster: LocalCluster, topics: Callable[[str], str]
) -> None:
    """KIP-320: OffsetCommit v6+ and TxnOffsetCommit v2+ carry the epoch of the record before the offset;
    OffsetFetch v5+ answers it (-1, None to confluent-kafka, when the commit named none)."""
    topic = topics("epochs")
    consumer = Consumer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "group.id": "epochs",
                         "enable.auto.commit": False})  # fmt: skip
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "transactional.id": "epochs"})
    try:

        def committed() -> tuple[int, int | None]:
            (found,) = consumer.committed([TopicPartition(topic, 0)], timeout=60)
            assert found.error is None, found.error
            return found.offset, found.leader_epoch

        consumer.commit(offsets=[TopicPartition(topic, 0, 7, leader_epoch=3)], asynchronous=False)
        assert committed() == (7, 3)
        consumer.commit(offsets=[TopicPartition(topic, 0, 9)], asynchronous=False)
        assert committed() == (9, None)
        producer.init_transactions(60)
        producer.begin_transaction()
        offsets = [TopicPartition(topic, 0, 11, leader_epoch=4)]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 60)
        producer.commit_transaction(60)
        assert committed() == (11, 4)
    finally:
        consumer.close()


def test_an_offset_fetch_of_every_topic_reads_only_the_groups_own_topics(
    kafka_cluster: LocalCluster, topics: Callable[[str], str]
) -> None:
    """An OffsetFetch of all topics (``topics`` null: franz-go's kadm.FetchOffsets, ``kafka-consumer-groups
    --describe``, the Admin clients' listConsumerGroupOffsets) reads the partitions of the topics the group
    subscribed to or committed an offset of, so a node down with the only replica of another topic's
    partition does not hold it up. (It had read every topic's partitions and answered
    COORDINATOR_LOAD_IN_PROGRESS until that node came back: franz-go's reads gave up after 30 s.)"""
    topic, lone = topics("fetch-all"), "fetch-all-lone"
    with http_client(kafka_cluster) as client:
        client.create_topic(lone, 1, 1)
    holder = _leader(AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers}), lone)
    consumer = Consumer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "group.id": "fetch-all",
                         "enable.auto.commit": False})  # fmt: skip
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    finally:
        consumer.close()
    kafka_cluster.control("stop", holder, kill=True)
    try:

        def fetched() -> list[tuple[str, int, int]] | None:
            # a client of its own each time: none still dialling the node killed
            admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
            asked = [ConsumerGroupTopicPartitions("fetch-all")]
            try:
                found = admin.list_consumer_group_offsets(asked, request_timeout=15)["fetch-all"].result()
            except KafkaException:  # the group's coordinator moving off the node killed: asked again
                return None
            return [(tp.topic, tp.partition, tp.offset) for tp in found.topic_partitions]

        assert wait_for(fetched, "the group's offsets of every topic", PROGRESS_TIMEOUT_S) == [(topic, 0, 5)]
    finally:
        kafka_cluster.control("start", holder)
