"""Kafka Streams on a streams group (KIP-1071: ``group.protocol=streams``, StreamsGroupHeartbeat and
StreamsGroupDescribe), unchanged, against raftlog and against Apache Kafka with the same assertions: the
word count of ``examples/kafka_streams/WordCount.java`` (exactly_once_v2) in two instances whose tasks the
group's coordinator assigns, across a kill -9 of the node coordinating the group and of an instance; then
Kafka's own ``kafka-streams-groups`` on the group: listed, described (its state, members and their tasks,
its offsets), its input's offsets reset once the instances stopped, and deleted. Each tool step's exit
status and the lines a user reads, with the run's names, ids and ports replaced by what they stand for,
are Kafka's (``EXPECTED``) on both."""

from __future__ import annotations

import pathlib
import re
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient
from conftest import Systems
from kafka_tools import KafkaTools, Outcome
from streams_app import StreamsInstance, compile_word_count
from test_exactly_once import Counts, Lines, _committed, _create, coordinator_of

from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

SYSTEMS = ("raftlog", "kafka")
GROUP_KEY = 0  # FindCoordinator's key type of a group
# a killed member leaves the group at the end of its session (the group's, 45 s by default on Kafka)
MEMBERS_TIMEOUT_S = 120.0
PARTITIONS = 2
# the word count's tasks: subtopology 0 (the lines, to the repartition topic) and 1 (the counts), one per
# partition of its input
TASKS = ["0_0", "0_1", "1_0", "1_1"]

# What Kafka 4.4's kafka-streams-groups printed for each step (exit status, lines), as ``Names`` has them:
# the group (application id) is GROUP, the input topic INPUT, the instances' process ids P1 and P2, a
# member id MEMBER, the coordinator's address and id COORDINATOR, a member's tasks their number.
EXPECTED: dict[str, tuple[int, list[str]]] = {
    "describe members": (0, [
        "GROUP MEMBER PROCESS CLIENT-ID ASSIGNMENTS",
        "GROUP MEMBER P1 GROUP-P1-StreamThread-1-consumer ACTIVE: 2",
        "GROUP MEMBER P2 GROUP-P2-StreamThread-1-consumer ACTIVE: 2",
    ]),
    "describe state": (0, [
        "GROUP COORDINATOR (ID) ASSIGNOR STATE #MEMBERS",
        "GROUP COORDINATOR sticky Stable 2",
    ]),
    "list": (0, ["GROUP"]),
    "list state": (0, ["GROUP STATE", "GROUP Stable"]),
    "describe": (0, [
        "GROUP TOPIC PARTITION OFFSET-LAG",
        "GROUP GROUP-counts-repartition 0 0",
        "GROUP GROUP-counts-repartition 1 0",
        "GROUP INPUT 0 0",
        "GROUP INPUT 1 0",
    ]),
    "describe offsets": (0, [
        "GROUP TOPIC PARTITION OFFSET-LAG",
        "GROUP GROUP-counts-repartition 0 0",
        "GROUP GROUP-counts-repartition 1 0",
        "GROUP INPUT 0 0",
        "GROUP INPUT 1 0",
    ]),
    # an empty group: its state said as an error, but the tool ends well; no members, no offsets shown
    "describe state empty": (0, [
        "Error: Streams group 'GROUP' has no active members.",
        "GROUP COORDINATOR (ID) ASSIGNOR STATE #MEMBERS",
        "GROUP COORDINATOR sticky Empty 0",
    ]),
    "describe members empty": (0, []),
    "describe offsets empty": (0, []),
    "reset dry run": (0, ["GROUP TOPIC PARTITION NEW-OFFSET", "GROUP INPUT 0 0", "GROUP INPUT 1 0"]),
    "reset": (0, ["GROUP TOPIC PARTITION NEW-OFFSET", "GROUP INPUT 0 0", "GROUP INPUT 1 0"]),
    # the internal topics outlive the reset (--help says --execute deletes them; Kafka 4.4's does not)
    "internal topics after reset": (0, ["GROUP-counts-changelog", "GROUP-counts-repartition"]),
    "delete": (0, ["Deletion of requested streams groups ('GROUP') was successful."]),
    "list deleted": (0, []),
    "describe deleted": (1, [
        "Error: Executing streams group command failed due to "
        "org.apache.kafka.common.errors.GroupIdNotFoundException: Group GROUP not found."
    ]),
}  # fmt: skip


class Names:
    """The run's own names in a tool's output, replaced by what they stand for."""

    def __init__(self, group: str, source: str, processes: list[str]) -> None:
        self.replaced = [(process, f"P{i + 1}") for i, process in enumerate(processes)]
        self.replaced += [(group, "GROUP"), (source, "INPUT")]

    def __call__(self, outcome: Outcome) -> list[str]:
        """The lines a user reads (no stack frames, no exception chained under the first), each with its
        columns one space apart, the run's names replaced; rows of a table in order."""
        lines = []
        for line in outcome.lines():
            if line.startswith(("java.", "Caused by:", "org.apache.kafka.")):
                continue
            for name, stands_for in self.replaced:
                line = line.replace(name, stands_for)
            line = re.sub(r"127\.0\.0\.1:\d+ \(\d+\)", "COORDINATOR", line)
            lines.append(" ".join(line.split()))
        head, rows = lines[:1], lines[1:]
        if head and head[0].startswith("GROUP "):  # a table: its rows in order (Kafka prints them unordered)
            return head + sorted(rows)
        return lines


def _members(outcome: Outcome, names: Names) -> list[str]:
    """``--describe --members`` as ``Names`` has it, each member's id MEMBER and its tasks counted."""
    lines = names(outcome)
    return lines[:1] + sorted(
        re.sub(
            r"^GROUP \S+ (.*?) ACTIVE: .*$",
            lambda m: f"GROUP MEMBER {m.group(1)} ACTIVE: {len(_tasks(m.group(0)))}",
            row,
        )
        for row in lines[1:]
    )


def _tasks(row: str) -> list[str]:
    """The active tasks of a ``--members`` row (``ACTIVE: 0:[0,1]; 1:[0];``), each as
    ``<subtopology>_<partition>``."""
    active = row.split("ACTIVE:", 1)[1].split("TARGET-ACTIVE:", 1)[0]
    return [
        f"{subtopology}_{partition}"
        for subtopology, partitions in re.findall(r"(\d+):\[([\d,]*)\]", active)
        for partition in partitions.split(",")
        if partition
    ]


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaTools]:
    runner = KafkaTools(tmp_path_factory.mktemp("streams-tools"))  # one JVM for every step (kafka_tools.py)
    try:
        yield runner
    finally:
        runner.close()


@pytest.fixture(scope="module")
def word_count() -> str:
    """The class path of ``examples/kafka_streams/WordCount.java``, compiled (``java_build``)."""
    return compile_word_count()


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_kafka_streams_on_a_streams_group_counts_every_word_once_and_kafka_streams_groups_manages_it(
    systems: Systems, word_count: str, tools: KafkaTools, system: str, tmp_path: pathlib.Path
) -> None:
    """Two instances of the word count with ``--group-protocol streams``; kill -9 of the node coordinating
    their group while lines stream in, restarted; kill -9 of an instance, restarted. Read with
    read_committed, each word's counts are 1, 2, ..., n once each. ``kafka-streams-groups`` lists the group,
    describes it (Stable, two members of one stream thread each, the four tasks each assigned once, no lag
    once caught up), resets its input to the earliest offsets once the instances stopped (the group
    empty), and deletes it."""
    bootstrap = systems.servers()[system]
    run = uuid.uuid4().hex[:8]
    group, source, sink = f"wcg-{run}", f"wcg-lines-{run}", f"wcg-counts-{run}"
    _create(bootstrap, [source, sink], partitions=PARTITIONS)
    lines, counts = Lines(bootstrap, source, PARTITIONS), Counts(bootstrap, sink, PARTITIONS)
    instances = [
        StreamsInstance(word_count, tmp_path / name, bootstrap, group, (source, sink), 6000, "streams")
        for name in ("a", "b")
    ]
    first = instances[0]
    observed: dict[str, tuple[int, list[str]]] = {}

    def alive() -> None:
        for instance in instances:
            instance.check_alive()

    def tool(*args: str) -> Outcome:
        """Kafka's ``kafka-streams-groups`` with ``args``: its exit status and what it printed."""
        return tools.run("kafka-streams-groups", "--bootstrap-server", bootstrap, *args)

    killed: int | None = None
    started = time.monotonic()
    took: dict[str, float] = {}
    try:
        for instance in instances:
            instance.start()
        # Kafka Streams' transactional id of a thread is <application id>-<process id>-<thread index>
        processes = [
            instance.running()[0].removeprefix(f"{group}-").rsplit("-", 1)[0] for instance in instances
        ]
        names = Names(group, source, processes)
        lines.produce(300)
        counts.caught_up(lines, alive)
        took["start"] = time.monotonic() - started

        # kill -9 of the node coordinating the group, mid-stream: the members find its successor
        lines.produce(1500)
        counts.reach(counts.read + 1000, alive)
        killed = coordinator_of(bootstrap, group, GROUP_KEY)
        systems.kill(system, killed)
        lines.produce(300)
        systems.restart(system, killed)
        killed = None
        counts.caught_up(lines, alive)
        took["coordinator killed"] = time.monotonic() - started

        # kill -9 of an instance, mid-stream: its tasks' open transaction is aborted when it comes back (the
        # same process id, so the same transactional id) and what they did since their last commit redone
        lines.produce(1500)
        counts.reach(counts.read + 1000, alive)
        first.kill()
        lines.produce(300)
        first.start()
        first.running()
        counts.caught_up(lines, alive)
        took["instance killed"] = time.monotonic() - started

        # the killed member gone (its session over), the group stable with both instances, each task once
        def settled() -> tuple[Outcome, Outcome] | None:
            members, state = (
                tool("--describe", "--group", group, "--members"),
                tool("--describe", "--group", group, "--state"),
            )
            rows = names(members)[1:]
            tasks = sorted(task for row in rows for task in _tasks(row))
            stable = names(state)[1:] == ["GROUP COORDINATOR sticky Stable 2"]
            return (members, state) if len(rows) == 2 and tasks == TASKS and stable else None

        members, state = wait_for(
            settled, "two members with a task each and the group stable", MEMBERS_TIMEOUT_S, 0.5
        )
        took["members settled"] = time.monotonic() - started
        observed["describe members"] = (members.status, _members(members, names))
        observed["describe state"] = (state.status, names(state))
        listed = tool("--list")
        observed["list"] = (listed.status, [line for line in names(listed) if "GROUP" in line])
        with_state = tool("--list", "--state")
        observed["list state"] = (with_state.status, [line for line in names(with_state) if "GROUP" in line])

        def caught_up(*args: str) -> Outcome | None:
            described = tool("--describe", "--group", group, *args)
            rows = names(described)[1:]
            return (
                described if len(rows) == 2 * PARTITIONS and all(row.endswith(" 0") for row in rows) else None
            )

        for step, args in (("describe", ()), ("describe offsets", ("--offsets",))):
            described = wait_for(lambda args=args: caught_up(*args), f"{step}: no lag", 60, 0.5)
            observed[step] = (described.status, names(described))

        # stopped (SIGTERM: Kafka Streams leaves the group), the group is empty, its offsets can be reset
        for instance in instances:
            instance.stop()
        wait_for(lambda: "GROUP Empty" in names(tool("--list", "--state")), "the group empty", 60, 0.5)
        for step, args in (
            ("describe state empty", ("--describe", "--group", group, "--state")),
            ("describe members empty", ("--describe", "--group", group, "--members")),
            ("describe offsets empty", ("--describe", "--group", group, "--offsets")),
            (
                "reset dry run",
                ("--reset-offsets", "--group", group, "--input-topic", source, "--to-earliest", "--dry-run"),
            ),
            (
                "reset",
                ("--reset-offsets", "--group", group, "--input-topic", source, "--to-earliest", "--execute"),
            ),
        ):
            done = tool(*args)
            observed[step] = (done.status, names(done))
        assert _committed(bootstrap, group, source, PARTITIONS) == [0] * PARTITIONS, "reset to the earliest"
        internal = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics
        observed["internal topics after reset"] = (
            0,
            sorted(t.replace(group, "GROUP") for t in internal if t.startswith(group)),
        )
        for step, args in (
            ("delete", ("--delete", "--group", group)),
            ("list deleted", ("--list",)),
            ("describe deleted", ("--describe", "--group", group)),
        ):
            done = tool(*args)
            observed[step] = (done.status, [line for line in names(done) if "GROUP" in line])
        took["tool"] = time.monotonic() - started
        uncaught = [line for instance in instances for line in instance.uncaught()]
        print(f"{system}: {lines.lines} lines, {counts.read} counts; seconds {took}; uncaught {uncaught}")
        for step, outcome in observed.items():
            print(f"{step}: {outcome}")
        assert observed == EXPECTED
    finally:
        for instance in instances:
            instance.kill()
        counts.consumer.close()
        if killed is not None:
            systems.restart(system, killed)
