"""Kafka Connect, unchanged, against raftlog and against Apache Kafka with the same assertions: a distributed
worker of Kafka Connect 4.3.1 (``connect_worker.py``; the jars of scripts/kafka/connect/pom.xml, which
``scripts/kafka/install.sh`` copies from Maven Central) creates its internal topics itself (compacted, as it
checks with DescribeConfigs), and a FileStreamSource connector moves the lines of a file into a topic while
a FileStreamSink connector writes the topic into another file, both configured over Connect's REST API.

What Kafka guarantees here, found by running this scenario against Kafka itself (the ``kafka`` cases),
and asserted of both:

- no failure: every line once, in the order written;
- a graceful worker restart (SIGTERM: Connect stops its tasks, the source commits its file position and
  the sink its consumer offsets on the way out), with lines written while the worker is down: still every
  line once, in order;
- a SIGKILL of the worker together with one node (the topic's partition leader), both restarted, lines
  written before and after: at least once, not exactly once. FileStreamSink is at-least-once in Kafka too:
  the source replays lines read after its last committed file position, the sink records after its last
  committed offset. So: every line arrives, none arrives that was never written, and the sink's lines are
  in written order but for replays (a line is never ahead of the next unwritten one: a replay restarts
  from an earlier line and goes on in order).
"""

from __future__ import annotations

import pathlib
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from conftest import Systems
from connect_worker import ConnectWorker

pytestmark = pytest.mark.slow

SYSTEMS = ("raftlog", "kafka")
SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
FIRST_LINES = 2000
MORE_LINES = 500
SINK_TIMEOUT_S = 120.0
REST_RETRY_S = 30.0


def _create(bootstrap: str, topic: str) -> None:
    """One partition (a file's lines keep their order), replication factor 3, led before it is used."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)], operation_timeout=30)[topic].result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = admin.list_topics(topic, timeout=10).topics.get(topic)
        if found is not None and found.error is None and found.partitions[0].leader >= 0:
            return
        time.sleep(0.2)
    raise AssertionError(f"{topic} has no leader after 60 s")


def _leader(bootstrap: str, topic: str) -> int:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    leader: int = metadata.topics[topic].partitions[0].leader
    return leader


class Lines:
    """The source file (appended to in whole lines, as a log is) and what the sink file holds."""

    def __init__(self, directory: pathlib.Path, run: str) -> None:
        self.source = directory / "source.txt"
        self.sink = directory / "sink.txt"
        self.source.touch()
        self.run = run
        self.written: list[str] = []

    def append(self, count: int) -> None:
        start = len(self.written)
        new = [f"{self.run} line {i:06d}" for i in range(start, start + count)]
        with open(self.source, "a", encoding="utf-8") as f:
            f.write("".join(f"{line}\n" for line in new))  # one write: the source never sees half a line
        self.written += new

    def sunk(self) -> list[str]:
        """The sink file's whole lines (a last line without its newline is still being written)."""
        if not self.sink.exists():
            return []
        text = self.sink.read_text(encoding="utf-8")
        return text.split("\n")[:-1]

    def arrived(self) -> bool:
        """Every written line is in the sink (the last one written arrives after the rest: one partition,
        read in order, so any replay of earlier lines is in the file before it)."""
        sunk = self.sunk()
        return bool(sunk) and sunk[-1] == self.written[-1] and set(self.written) <= set(sunk)


def _wait_sink(worker: ConnectWorker, lines: Lines) -> None:
    worker.wait(lines.arrived, SINK_TIMEOUT_S, f"all {len(lines.written)} lines in the sink file")


def _assert_exactly_once(lines: Lines) -> None:
    sunk = lines.sunk()
    assert len(sunk) == len(lines.written), f"{len(sunk) - len(lines.written)} lines more than written"
    assert sunk == lines.written, "every line once, in the order written"


def _assert_at_least_once_in_order(lines: Lines) -> int:
    """Every line, none never written, in order but for replays; the number of replayed lines."""
    index = {line: i for i, line in enumerate(lines.written)}
    phantoms = [line for line in lines.sunk() if line not in index]
    assert phantoms == [], f"lines never written: {phantoms[:5]}"
    positions = [index[line] for line in lines.sunk()]
    assert set(positions) == set(range(len(lines.written))), "every written line arrives"
    highest = -1
    for at, position in enumerate(positions):
        assert position <= highest + 1, (
            f"sink line {at} is written line {position}, ahead of line {highest + 1}, which it skipped"
        )
        highest = max(highest, position)
    return len(positions) - len(lines.written)


def _end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"end-{uuid.uuid4().hex[:8]}"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    finally:
        consumer.close()
    return int(high)


def _sink_offsets(worker: ConnectWorker) -> list[int] | None:
    """The sink connector's committed offsets, as Connect reads them (its consumer group's)."""
    found = worker.request("GET", "/connectors/sink/offsets")
    return None if found is None else [entry["offset"]["kafka_offset"] for entry in found["offsets"]]


def _state(worker: ConnectWorker, connector: str) -> str | None:
    status = worker.request("GET", f"/connectors/{connector}/status")
    return None if status is None else str(status["connector"]["state"])


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_a_worker_refuses_a_config_topic_that_is_not_compacted(
    systems: Systems, system: str, tmp_path: pathlib.Path
) -> None:
    """Connect checks its internal topics' cleanup.policy with DescribeConfigs: a config topic made
    beforehand with cleanup.policy=delete (which would lose connector configs) stops the worker."""
    bootstrap = systems.servers()[system]
    name = f"connect-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = NewTopic(f"{name}-configs", 1, 3, config={"cleanup.policy": "delete"})
    admin.create_topics([configs], operation_timeout=30)[f"{name}-configs"].result(60)
    worker = ConnectWorker(tmp_path / "worker", bootstrap, name)
    refusal = (
        f"Topic '{name}-configs' supplied via the 'config.storage.topic' property is required to have "
        "'cleanup.policy=compact'"
    )
    try:
        worker.launch()
        deadline = time.monotonic() + 120
        while not worker.logged(refusal):
            assert not worker.healthy(), "the worker started on a config topic that is not compacted"
            assert time.monotonic() < deadline, f"no refusal after 120 s:\n{worker.tail()}"
            time.sleep(0.25)
        assert worker.logged("but found the topic currently has 'cleanup.policy=delete'")
    finally:
        worker.kill()


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_a_connect_worker_moves_a_file_through_a_topic_across_a_graceful_restart_and_a_kill(
    systems: Systems, system: str, tmp_path: pathlib.Path
) -> None:
    """The module's scenario: exactly once without failures and across a graceful restart, at least once
    in order but for replays across a SIGKILL of the worker and the topic's leader; then the sink's
    offsets read and reset over REST."""
    bootstrap = systems.servers()[system]
    run = uuid.uuid4().hex[:8]
    topic = f"connect-lines-{run}"
    _create(bootstrap, topic)
    lines = Lines(tmp_path, run)
    worker = ConnectWorker(tmp_path / "worker", bootstrap, f"connect-{run}")
    killed: int | None = None
    started = time.monotonic()
    took: dict[str, float] = {}
    try:
        worker.start()
        lines.append(FIRST_LINES)
        worker.put_connector(
            "source", {"connector.class": SOURCE, "tasks.max": "1", "file": str(lines.source), "topic": topic}
        )
        worker.put_connector(
            "sink", {"connector.class": SINK, "tasks.max": "1", "file": str(lines.sink), "topics": topic}
        )
        worker.wait(
            lambda: worker.running("source") and worker.running("sink"), 120, "both connectors running"
        )
        _wait_sink(worker, lines)
        _assert_exactly_once(lines)
        took["first"] = time.monotonic() - started

        # a graceful restart, lines written while the worker is down and after it is back
        worker.stop()
        lines.append(MORE_LINES)
        worker.start()
        lines.append(MORE_LINES)
        _wait_sink(worker, lines)
        _assert_exactly_once(lines)
        took["graceful"] = time.monotonic() - started

        # SIGKILL of the worker and of the topic's leader while lines flow; both back; more lines
        first_of_phase = len(lines.written)
        lines.append(MORE_LINES)
        worker.wait(lambda: lines.written[first_of_phase] in lines.sunk(), SINK_TIMEOUT_S, "lines flowing")
        killed = _leader(bootstrap, topic)
        worker.kill()
        systems.kill(system, killed)
        lines.append(MORE_LINES)
        systems.restart(system, killed)
        killed = None
        worker.start()
        lines.append(MORE_LINES)
        _wait_sink(worker, lines)
        replayed = _assert_at_least_once_in_order(lines)
        took["kill"] = time.monotonic() - started

        # the sink's offsets over REST (KIP-875): read (OffsetFetch), and reset once stopped (OffsetDelete)
        end = _end_offset(bootstrap, topic)
        worker.wait(lambda: _sink_offsets(worker) == [end], SINK_TIMEOUT_S, f"the sink's offset at {end}")
        worker.wait(lambda: worker.request("PUT", "/connectors/sink/stop") == {}, REST_RETRY_S, "sink stop")
        worker.wait(lambda: _state(worker, "sink") == "STOPPED", SINK_TIMEOUT_S, "sink stopped")
        partition = {"kafka_topic": topic, "kafka_partition": 0}
        answers: list[dict[str, str]] = []

        def reset() -> bool:  # retried while the worker answers 409 (rebalancing) or 5xx (with its log)
            answer = worker.request(
                "PATCH", "/connectors/sink/offsets", {"offsets": [{"partition": partition, "offset": None}]}
            )
            answers.extend([answer] if answer is not None else [])
            return answer is not None

        worker.wait(reset, REST_RETRY_S, "the sink's offsets reset (OffsetDelete)")
        assert "altered successfully" in answers[0]["message"], answers
        assert _sink_offsets(worker) == []
        took["offsets"] = time.monotonic() - started
        print(f"{system}: {len(lines.written)} lines, {replayed} replayed after the SIGKILL; seconds {took}")
    finally:
        worker.kill()
        if killed is not None:
            systems.restart(system, killed)
