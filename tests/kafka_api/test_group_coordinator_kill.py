"""Real processes and real clients: two confluent-kafka consumers share a topic in one group, in four
groups side by side (dynamic members and static ones with a ``group.instance.id``; of the classic protocol
and of the consumer group protocol, KIP-848), all four coordinated by one node, which is killed with kill
-9. The new coordinator loads each group as the old one wrote it, so the members go on in their generation
(group epoch) with their assignments (no rebalance, no partition handed to a member while another holds
it, no record consumed twice) and their commits go on succeeding."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from kafka_fixtures import http_client
from leadership import hand_leadership

from partitions.groups.coordinator import GROUP_PARTITIONS_DEFAULT
from raftlog.storage.partitioner import partition_for_key
from raftlog_client.local_cluster import LocalCluster
from tests.waiting import wait_for

PARTITIONS = 4
BEFORE, AFTER = 400, 400  # records produced before and after the kill
LIMIT_S = 120  # for each phase to finish on a loaded machine


class Member(threading.Thread):
    """A consumer that commits after each batch and notes every assignment change its client sees."""

    def __init__(
        self,
        cluster: LocalCluster,
        name: str,
        instance: str | None,
        protocol: str = "classic",
        session_timeout_ms: int = 45_000,  # Kafka's default: longer than a failover under load
    ) -> None:
        super().__init__(daemon=True)
        config: dict[str, Any] = {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": name,
            "client.id": "kept",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        if protocol == "consumer":  # KIP-848: the coordinator's session timeout (45 s) and assignor
            config.update({"group.protocol": "consumer", "group.remote.assignor": "range"})
        else:
            config.update({
                "session.timeout.ms": session_timeout_ms,
                "heartbeat.interval.ms": 500,
                "partition.assignment.strategy": "range",
            })  # fmt: skip
        if instance is not None:  # a static member (KIP-345)
            config["group.instance.id"] = instance
        self.consumer = Consumer(config)
        self.topic = name
        self.lock = threading.Lock()
        self.events: list[tuple[float, str, tuple[int, ...]]] = []  # (when, what, partitions)
        self.seen: list[tuple[int, int]] = []  # (partition, offset) of every record handed to it
        self.seen_at: list[float] = []  # when each was
        self.commits: list[tuple[float, str | None]] = []  # (when, error or None) of each commit
        self.member_ids: list[tuple[float, str | None]] = []  # (since when, id) as its client knows it
        self.stop = threading.Event()

    def _note(self, what: str, partitions: list[Any]) -> None:
        with self.lock:
            self.events.append((time.monotonic(), what, tuple(sorted(p.partition for p in partitions))))

    def run(self) -> None:
        self.consumer.subscribe(
            [self.topic],
            on_assign=lambda _c, ps: self._note("assign", ps),
            on_revoke=lambda _c, ps: self._note("revoke", ps),
            on_lost=lambda _c, ps: self._note("lost", ps),
        )
        pending = False
        while not self.stop.is_set():
            batch = [m for m in self.consumer.consume(100, 0.2) if m.error() is None]
            member_id = self.consumer.memberid()  # the client's calls stay on its own thread
            with self.lock:
                self.seen.extend((m.partition(), m.offset()) for m in batch)
                self.seen_at.extend([time.monotonic()] * len(batch))
                if not self.member_ids or self.member_ids[-1][1] != member_id:
                    self.member_ids.append((time.monotonic(), member_id))
            if batch or pending:
                pending = not self._commit()
        self._commit()
        self.consumer.close()

    def _commit(self) -> bool:
        """Commit what it consumed; False (to try again after the next batch) when refused."""
        try:
            answer = self.consumer.commit(asynchronous=False) or []
            error = next((str(tp.error) for tp in answer if tp.error is not None), None)
        except KafkaException as exc:
            error = None if "NO_OFFSET" in str(exc) else str(exc)
        with self.lock:
            self.commits.append((time.monotonic(), error))
        return error is None

    def assigned(self) -> tuple[int, ...]:
        """What it holds: its assignments less its revocations (whole with the classic protocol's eager
        rebalances, incremental with the consumer group protocol's)."""
        held: set[int] = set()
        with self.lock:
            for _, what, partitions in self.events:
                held = held | set(partitions) if what == "assign" else held - set(partitions)
        return tuple(sorted(held))

    def offsets_seen(self) -> int:
        with self.lock:
            return len(set(self.seen))


def _produce(cluster: LocalCluster, topic: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True,
                         "message.timeout.ms": LIMIT_S * 1000})  # fmt: skip
    for i in range(start, start + count):
        producer.produce(topic, key=b"%d" % i, value=b"x", partition=i % PARTITIONS)
    assert producer.flush(LIMIT_S) == 0


def _generation(url: str, group: str) -> int | None:
    with urllib.request.urlopen(f"{url}/v1/consumer-groups", timeout=15) as answer:
        groups = json.load(answer)["groups"]
    return next((int(g["generation"]) for g in groups if g["group"] == group), None)


def _describe(cluster: LocalCluster, group: str, into: list[Any]) -> bool:
    """The group described into ``into``; False (to ask again) while its coordinator is being found
    again (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS). Each try is a new admin client, which looks
    the coordinator up again: librdkafka's keeps asking the one it found first (as Kafka's Java admin
    client did before KAFKA-8341)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    try:
        into.append(admin.describe_consumer_groups([group])[group].result(timeout=30))
    except KafkaException as exc:
        if "COORDINATOR" not in str(exc):
            raise
        print(f"{group}: described again after {exc}")
        return False
    return True


def _committed(url: str, group: str, partition: int) -> int:
    """The group's committed offset of a partition of the topic named as the group."""
    with urllib.request.urlopen(f"{url}/consumers/{group}/offsets?topic={group}", timeout=15) as answer:
        rows = json.load(answer)["offsets"]
    return next((int(r["offset"]) for r in rows if r["partition"] == partition), -1)


def _commits_after(members: list[Member], killed: float) -> str:
    """How soon each member committed again after the kill (records produced after it), and what was
    refused meanwhile."""
    first = [min(at for at, error in m.commits if error is None and at > killed) - killed for m in members]
    refused = [(round(at - killed, 2), error) for m in members for at, error in m.commits if error]
    return f"first commits {[round(f, 2) for f in first]} s after it; refused (s, error): {refused}"


class Group:
    """One case: a group of two members (dynamic or static, of the classic protocol or of KIP-848) reading
    a topic named as the group, BEFORE records before the kill and AFTER after it."""

    def __init__(self, cluster: LocalCluster, name: str, static: bool, protocol: str) -> None:
        self.cluster, self.name = cluster, name
        with http_client(cluster) as client:
            client.create_topic(name, PARTITIONS, 3)
        _produce(cluster, name, 0, BEFORE)
        self.members = [Member(cluster, name, f"{name}-{i}" if static else None, protocol) for i in range(2)]
        for member in self.members:
            member.start()

    def settled(self) -> bool:
        return all(len(m.assigned()) == PARTITIONS // 2 for m in self.members) and (
            sum(m.offsets_seen() for m in self.members) >= BEFORE
        )

    def before_the_kill(self, admin: AdminClient) -> str:
        """Notes what the members hold and the generation; the coordinator's node."""
        self.ids = [m.member_ids[-1][1] for m in self.members]
        self.assignments = [m.assigned() for m in self.members]
        assert set(self.assignments[0]).isdisjoint(self.assignments[1]), self.name
        described = admin.describe_consumer_groups([self.name])[self.name].result(timeout=30)
        self.coordinator = f"n{described.coordinator.id}"
        self.generation = _generation(self.cluster.urls[self.coordinator], self.name)
        assert self.generation is not None and self.generation >= 1, self.name
        return self.coordinator

    def consumed_after(self) -> bool:
        return sum(m.offsets_seen() for m in self.members) >= BEFORE + AFTER

    def committed_after(self, killed: float) -> bool:
        with self.members[0].lock, self.members[1].lock:
            return all(
                m.commits and m.commits[-1][1] is None and m.commits[-1][0] > killed for m in self.members
            )

    def check(self, survivor: str, killed: float) -> None:
        members, name = self.members, self.name
        for member in members:
            with member.lock:
                changes = [(round(at - killed, 2), what, p) for at, what, p in member.events if at > killed]
            assert changes == [], f"{name}: the member's assignment changed after the kill: {changes}"
        assert [m.member_ids[-1][1] for m in members] == self.ids, f"{name}: the members kept their ids"
        assert _generation(survivor, name) == self.generation, f"{name}: the generation goes on"
        assert [m.assigned() for m in members] == self.assignments, name
        seen = [pair for m in members for pair in m.seen]
        assert len(seen) == len(set(seen)) == BEFORE + AFTER, (
            f"{name}: every record consumed once by one member"
        )
        for member, assigned in zip(members, self.assignments, strict=True):
            read = {p for (p, _), at in zip(member.seen, member.seen_at, strict=True) if at > killed}
            assert read <= set(assigned), f"{name}: after the kill, a member read a partition another holds"
        wait_for(
            lambda: all(
                _committed(survivor, name, p) == (BEFORE + AFTER) // PARTITIONS for p in range(PARTITIONS)
            ),
            f"{name}: every partition's offset committed to its end",
            LIMIT_S,
        )
        print(f"{name}: coordinator killed, generation {self.generation}: {_commits_after(members, killed)}")

    def stop(self) -> None:
        for member in self.members:
            member.stop.set()
        for member in self.members:
            member.join(30)


CASES = [(protocol, static) for protocol in ("classic", "consumer") for static in (False, True)]


def _names() -> list[str]:
    """A group per case, all coordinated by one partition of ``__consumer_groups`` (so by one node): the
    coordinator's kill meets every case at once."""
    names = []
    for protocol, static in CASES:
        base = f"kept-{'static' if static else 'dynamic'}" + ("-848" if protocol == "consumer" else "")
        candidates = (f"{base}-{i}" for i in range(1000))
        names.append(
            next(n for n in candidates if partition_for_key(n.encode(), GROUP_PARTITIONS_DEFAULT) == 0)
        )
    return names


@pytest.mark.timeout(600)  # a cluster's start and three phases of up to LIMIT_S on a loaded machine
def test_members_keep_their_generation_and_assignment_when_the_coordinator_is_killed(
    kafka_cluster: LocalCluster,
) -> None:
    """Four groups side by side (classic and consumer protocol, dynamic and static members), one
    coordinator for all, killed once."""
    groups: list[Group] = []
    victim: str | None = None
    try:
        for name, (protocol, static) in zip(_names(), CASES, strict=True):
            groups.append(Group(kafka_cluster, name, static, protocol))
        wait_for(
            lambda: all(g.settled() for g in groups),
            "every group's members assigned, the first records read",
            LIMIT_S,
        )
        admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
        coordinators = {g.before_the_kill(admin) for g in groups}
        assert len(coordinators) == 1, coordinators  # one __consumer_groups partition, one leader
        (victim,) = coordinators

        killed = time.monotonic()
        kafka_cluster.control("stop", victim, kill=True)
        survivor = next(url for node, url in kafka_cluster.urls.items() if node != victim)
        for group in groups:
            _produce(kafka_cluster, group.name, BEFORE, AFTER)
        wait_for(lambda: all(g.consumed_after() for g in groups), "the later records consumed", LIMIT_S)
        wait_for(
            lambda: all(g.committed_after(killed) for g in groups),
            "a commit of each member after the kill",
            LIMIT_S,
        )
        for group in groups:
            group.check(survivor, killed)
    finally:
        for group in groups:
            group.stop()
        if victim is not None:  # back, for the module's next test
            kafka_cluster.control("start", victim)


SESSION_LONG_MS = 120_000  # what the member that left would be waited for, were its leave lost


@pytest.mark.timeout(600)
def test_a_member_that_left_is_not_waited_for_when_the_coordinator_moves(kafka_cluster: LocalCluster) -> None:
    """Two classic members hold two partitions each; one closes (LeaveGroup) and the group's coordinator
    partition is handed to another node at once, as the leader balancer does. The new coordinator goes on
    with the rebalance the leave began, so the member left takes all four partitions at its next
    heartbeat. (Kafka's new coordinator loads the group as of its last generation, with the member that
    left, and waits out that member's session, here two minutes.)"""
    name = next(
        n
        for n in (f"moved-{i}" for i in range(1000))
        if partition_for_key(n.encode(), GROUP_PARTITIONS_DEFAULT) == 1
    )
    with http_client(kafka_cluster) as client:
        client.create_topic(name, PARTITIONS, 3)
    _produce(kafka_cluster, name, 0, BEFORE)
    members = [Member(kafka_cluster, name, None, session_timeout_ms=SESSION_LONG_MS) for _ in range(2)]
    try:
        for member in members:
            member.start()
        wait_for(
            lambda: all(len(m.assigned()) == PARTITIONS // 2 for m in members),
            "both members assigned",
            LIMIT_S,
        )
        admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
        before = admin.describe_consumer_groups([name])[name].result(timeout=30).coordinator.id
        target = next(node for node in kafka_cluster.urls if node != f"n{before}")
        leaving, staying = members
        leaving.stop.set()
        leaving.join(60)  # closed: its LeaveGroup answered
        moved = time.monotonic()
        hand_leadership(kafka_cluster, "__consumer_groups", 1, target, LIMIT_S)
        wait_for(
            lambda: staying.assigned() == tuple(range(PARTITIONS)),
            "the member left holds every partition",
            LIMIT_S,
        )
        took_s = time.monotonic() - moved
        described: list[Any] = []
        wait_for(
            lambda: _describe(kafka_cluster, name, described),
            "the group described by its coordinator",
            LIMIT_S,
        )
        after = described[-1]  # (the leader balancer may have moved the coordinator on since)
        assert [m.member_id for m in after.members] == [staying.member_ids[-1][1]]
        assert took_s < SESSION_LONG_MS / 1000, f"{took_s:.1f} s: the member that left was waited for"
        print(f"{name}: the member left held every partition {took_s:.1f} s after the coordinator moved")
    finally:
        for member in members:
            member.stop.set()
        for member in members:
            member.join(30)
