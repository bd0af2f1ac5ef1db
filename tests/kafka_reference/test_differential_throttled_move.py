"""A move of a partition holding 10 MiB under a replication throttle, with Kafka's own tool
(``kafka-reassign-partitions --execute --throttle / --verify / --list / --cancel``), ``kafka-log-dirs`` and
``kafka-topics --describe``, step by step against raftlog and against Apache Kafka 4.4.0 (the steps of
``test_differential_tools``, recorded and compared the same way).

At 256 KiB/s the new replica takes 40 s to copy the partition's records. From 2 MiB into the copy (where
raftlog used to have ended the move already: it promoted the new replica and removed the old one once
the new one had installed its leader's snapshot, a second into the move) until past the checks, the move
is in progress (``--verify`` says so and keeps the throttles, ``--list`` lists it), the old replica is
still listed and in sync, and ``--cancel`` finds the move and takes the new replica out. Executed again
at a rate that copies it in moments, the move completes, and the new replica's log is as large as its
peer's."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from conftest import Systems
from kafka_answers import as_recorded, kafka_outcome
from kafka_tools import KafkaTools, Outcome
from test_differential_tools import Normalized, Steps, _without_assignment_json

pytestmark = [pytest.mark.slow, pytest.mark.kafka_answer, pytest.mark.timeout(900)]

KiB, MiB = 1024, 1024 * 1024
RECORD_BYTES = 64 * KiB
TOTAL_BYTES = 10 * MiB
CRAWL = str(256 * KiB)  # bytes/s: 40 s for the 10 MiB, the steps made meanwhile take a few
COPYING = 2 * MiB  # what the new replica holds when the steps begin: well into its copy (raftlog used to
# end the move a second into it, once the snapshot was installed, and Kafka's first fetch is 1 MiB)
RUN = "100000000"  # bytes/s: the whole partition in moments


def _produce(bootstrap: str, topic: str) -> int:
    """TOTAL_BYTES of random records to partition 0, every one acknowledged by all in-sync replicas."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "compression.type": "none"}
    )
    errors: list[Any] = []
    count = TOTAL_BYTES // RECORD_BYTES
    for _ in range(count):
        producer.produce(
            topic, os.urandom(RECORD_BYTES), partition=0, on_delivery=lambda e, m: errors.append(e)
        )
        producer.poll(0)
    producer.flush(120)
    assert len(errors) == count and not any(errors), errors[:3]
    return count


def _sizes(lines: list[str]) -> dict[int, int]:
    """``kafka-log-dirs --describe``: each broker holding T-0, with its size in bytes."""
    found = json.loads(next(line for line in lines if line.startswith("{")))
    sizes = {}
    for broker in found["brokers"]:
        for log_dir in broker["logDirs"]:
            assert log_dir["error"] is None
            for p in log_dir["partitions"]:
                if p["partition"] == "T-0" and not p["isFuture"]:
                    sizes[broker["broker"]] = p["size"]
    return sizes


def _copying(lines: list[str]) -> Normalized:
    """Who holds T-0, and whether the new replica (broker 3) holds less than the old ones."""
    sizes = _sizes(lines)
    return sorted(sizes), sizes.get(3, 0) < min(sizes.get(1, 0), sizes.get(2, 0))


def _moved(lines: list[str]) -> Normalized:
    """Who holds T-0, and whether the new replica holds as much as its peer (all TOTAL_BYTES at least)."""
    sizes = _sizes(lines)
    return sorted(sizes), sizes.get(2) == sizes.get(3), sizes.get(3, 0) >= TOTAL_BYTES


def _described(lines: list[str]) -> Normalized:
    """``kafka-topics --describe``: whether the old replica (1) is listed, and in sync, and the new one
    (3) is in sync (the order of a moving partition's replicas is the systems' own)."""
    [line] = [line for line in lines if "Partition:" in line]
    fields = dict(f.split(": ", 1) for f in line.strip().split("\t") if ": " in f)
    replicas, isr = fields["Replicas"].split(","), fields["Isr"].split(",")
    return "1" in replicas, "1" in isr, "3" in isr


def _replica_set_as_a_set(lines: list[str]) -> list[str]:
    """``--verify`` of a move that is no longer under way, with the partition's replicas as a set: Kafka
    reverts a cancelled reassignment to its replica list without the adding replicas, target first (2,1
    for 1,2 moving to 2,3), raftlog to the original order (docs/kafka-compatibility.md)."""
    found = []
    for line in lines:
        head, is_, rest = line.partition("replica set is ")
        if is_:
            current, rather, target = rest.partition(" rather than ")
            line = head + is_ + ",".join(sorted(current.split(","))) + rather + target
        found.append(line)
    return found


def _rates(lines: list[str]) -> Normalized:
    return sorted(line.split("=", 1)[0].strip() for line in lines if "replication.throttled.rate=" in line)


def _steps(steps: Steps) -> None:
    topic, run, record = steps.topic, steps.run, steps.record

    def reassign(*args: str) -> Outcome:
        return run("kafka-reassign-partitions", *args)

    def log_dirs() -> Outcome:
        return run("kafka-log-dirs", "--describe", "--topic-list", topic)

    def held_by(*brokers: int, copied: int = 0) -> Callable[[str], bool]:
        """Whether T-0 is on ``brokers`` exactly, broker 3 holding ``copied`` bytes of it at least."""

        def held(output: str) -> bool:
            sizes = _sizes(Outcome(0, output.replace(topic, "T")).lines())
            return sorted(sizes) == sorted(brokers) and (not copied or sizes[3] >= copied)

        return held

    def in_progress(output: str) -> bool:
        return "still in progress" in output

    run("kafka-topics", "--create", "--topic", topic, "--partitions", "1", "--replication-factor", "2")
    placed = steps.plan("placed.json", {0: [1, 2]})
    reassign("--execute", "--reassignment-json-file", placed)
    record("placed", steps.until_reassigned(placed))
    steps.outcomes["records acknowledged"] = _produce(steps.bootstrap, topic)

    moved = steps.plan("moved.json", {0: [2, 3]})
    verify = ("--verify", "--reassignment-json-file", moved)
    crawling = reassign("--execute", "--reassignment-json-file", moved, "--throttle", CRAWL)
    record("execute under a throttle", crawling, _without_assignment_json)
    # the new replica's log lacks records before the checks and after them: they ran while it copied
    record("log dirs: copying", steps.until(log_dirs, held_by(1, 2, 3, copied=COPYING)), _copying)
    record("verify: in progress", reassign(*verify, "--preserve-throttles"))
    record("list: in progress", reassign("--list"))
    record(
        "describe: the old replica still in sync",
        run("kafka-topics", "--describe", "--topic", topic),
        _described,
    )
    record("verify keeps the throttles", reassign(*verify))
    broker_3 = run("kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name", "3")
    record("throttle rates kept", broker_3, _rates)
    record("log dirs: still copying", log_dirs(), _copying)

    record("cancel", reassign("--cancel", "--reassignment-json-file", moved))
    # raftlog walks the move back (the new replica leaves), Kafka reverts it at once
    back = steps.until(lambda: reassign(*verify), lambda out: not in_progress(out))
    record("verify after the cancel", back, _replica_set_as_a_set)
    record("list after the cancel", reassign("--list"))
    record("log dirs after the cancel", steps.until(log_dirs, held_by(1, 2)), _copying)

    running = reassign("--execute", "--reassignment-json-file", moved, "--throttle", RUN)
    record("execute again", running, _without_assignment_json)
    record("verify: completed", steps.until_reassigned(moved))
    record("verify clears the throttles", reassign(*verify))
    record("log dirs after the move", steps.until(log_dirs, held_by(2, 3)), _moved)


@pytest.fixture(scope="module")
def outcomes(
    systems: Systems, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[dict[str, dict[str, Any]]]:
    """Each system's outcome of every step, as recorded; Kafka's replayed while this module is as it was
    when Kafka gave it (``kafka_outcome``)."""
    tools = KafkaTools(tmp_path_factory.mktemp("kafka-tools"))

    def steps_on(system: str) -> dict[str, Any]:
        workdir = tmp_path_factory.mktemp(f"throttled-{system}")
        steps = Steps(tools, systems.servers()[system], workdir, f"throttled-{uuid.uuid4().hex[:8]}")
        _steps(steps)
        return steps.outcomes

    try:
        yield {
            "kafka": kafka_outcome(request, "steps", lambda: steps_on("kafka")),
            "raftlog": as_recorded(steps_on("raftlog")),
        }
    finally:
        tools.close()


STEPS = (
    "placed", "records acknowledged", "execute under a throttle", "log dirs: copying", "verify: in progress",
    "list: in progress", "describe: the old replica still in sync", "verify keeps the throttles",
    "throttle rates kept", "log dirs: still copying", "cancel", "verify after the cancel",
    "list after the cancel", "log dirs after the cancel", "execute again", "verify: completed",
    "verify clears the throttles", "log dirs after the move",
)  # fmt: skip


@pytest.mark.parametrize("step", STEPS)
def test_a_throttled_move_step_answers_as_on_kafka(outcomes: dict[str, dict[str, Any]], step: str) -> None:
    assert outcomes["raftlog"][step] == outcomes["kafka"][step]


def test_the_steps_saw_a_move_in_progress_while_its_new_replica_copied(
    outcomes: dict[str, dict[str, Any]],
) -> None:
    """What both systems answered, spelled out: a comparison of two failures would pass too."""
    kafka = outcomes["kafka"]
    assert kafka["records acknowledged"] == TOTAL_BYTES // RECORD_BYTES
    assert kafka["log dirs: copying"] == kafka["log dirs: still copying"] == [0, [[1, 2, 3], True]]
    in_progress = "Reassignment of partition T-0 is still in progress."
    assert kafka["verify: in progress"][1][-1] == kafka["verify keeps the throttles"][1][-1] == in_progress
    assert kafka["list: in progress"][1][-1] == "T-0: replicas: 2,3,1. adding: 3. removing: 1."
    assert kafka["describe: the old replica still in sync"] == [0, [True, True, False]]
    assert len(kafka["throttle rates kept"][1]) == 2
    assert kafka["cancel"][1][0] == "Successfully cancelled partition reassignment for: T-0"
    assert kafka["list after the cancel"] == [0, ["No partition reassignments found."]]
    assert kafka["log dirs after the cancel"] == [0, [[1, 2], True]]
    assert kafka["verify: completed"][1][-1] == "Reassignment of partition T-0 is completed."
    assert kafka["log dirs after the move"] == [0, [[2, 3], True, True]]
