"""A classic consumer joining a live consumer protocol group (KIP-848), Kafka's online migration, the same
scenario against raftlog's Kafka listeners and Apache Kafka itself (``test_differential.py``'s clusters
and rules): what Kafka 4.4 does with the classic member, raftlog does."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Message
from test_differential import SYSTEMS, _create, _differs, _produce, _topic

from tests.waiting import wait_for

pytestmark = pytest.mark.slow

PARTITIONS = 4
RECORDS = 40
LIMIT_S = 120.0


def _poll(consumers: list[Consumer], seen: dict[tuple[int, int], list[str]]) -> None:
    """One short poll of each consumer; each record it hands out noted under its (partition, offset)."""
    for number, consumer in enumerate(consumers):
        message: Message | None = consumer.poll(0.2)
        if message is not None and message.error() is None:
            seen.setdefault((message.partition(), message.offset()), []).append(f"c{number}")


def _split(first: Consumer, second: Consumer) -> bool:
    """Two partitions each, none in both."""
    mine = {tp.partition for tp in first.assignment()}
    theirs = {tp.partition for tp in second.assignment()}
    return len(mine) == len(theirs) == PARTITIONS // 2 and not mine & theirs


def _read_once(
    bootstrap: str, topic: str, holders: dict[str, Consumer], seen: dict[tuple[int, int], list[str]]
) -> None:
    """Records produced now are each consumed once, by the member holding their partition."""
    seen.clear()
    _produce(bootstrap, topic, [f"record-{i}".encode() for i in range(RECORDS)])
    consumers = list(holders.values())
    deadline = time.monotonic() + LIMIT_S
    while sum(len(by) for by in seen.values()) < RECORDS and time.monotonic() < deadline:
        _poll(consumers, seen)
    assert sum(len(by) for by in seen.values()) == RECORDS, seen
    assert all(len(by) == 1 for by in seen.values()), seen  # none consumed twice
    owner = {tp.partition: f"c{n}" for n, c in enumerate(consumers) for tp in c.assignment()}
    for (partition, _), (by,) in seen.items():
        assert by == owner[partition], (partition, by, owner)


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("strategy", ["range,roundrobin", "cooperative-sticky"])
def test_a_classic_consumer_shares_a_consumer_protocol_group_holds_it_alone_and_shares_it_again(
    servers: dict[str, str], system: str, strategy: str
) -> None:
    """A consumer of the consumer group protocol (``group.protocol=consumer``) holds every partition; a
    classic consumer (an eager or a cooperative assignor) of the same group joins and is taken in: two
    of the four partitions each (the uniform assignor), none in both, and the records produced then are
    each consumed once, by the member holding their partition. The consumer protocol member leaves: the
    classic one gets every partition. A new consumer protocol member joins: the classic member gives two
    up (it is told to rejoin, and rejoins without them) and the records are again consumed once each.
    (Kafka turns the group into a classic group when its last consumer protocol member leaves, and back
    when one joins; raftlog keeps it a consumer protocol group throughout: the members see the same.) The
    last step is asked of the eager assignor only: with librdkafka's cooperative one, Kafka 4.4 did not
    give the new member its partitions within the 120 s a step is given (a run of 2026-11-30), and this
    test asks raftlog only what Kafka does."""
    _differs(system, "online-migration")
    bootstrap = servers[system]
    topic = _topic("migration")
    _create(bootstrap, topic, partitions=PARTITIONS)
    group = f"migration-{uuid.uuid4().hex[:8]}"
    common = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    modern = Consumer({**common, "group.protocol": "consumer"})
    classic = Consumer({**common, "session.timeout.ms": 10_000, "partition.assignment.strategy": strategy})
    open_ = [modern, classic]
    seen: dict[tuple[int, int], list[str]] = {}
    try:
        modern.subscribe([topic])
        wait_for(
            lambda: _poll([modern], seen) is None and len(modern.assignment()) == PARTITIONS,
            "the consumer protocol member assigned every partition",
            LIMIT_S,
        )
        classic.subscribe([topic])
        wait_for(
            lambda: _poll([modern, classic], seen) is None and _split(modern, classic),
            "the classic member taken in, two partitions each",
            LIMIT_S,
        )
        assert not seen  # the topic stays empty until the assignment settled: each record has one reader
        _read_once(bootstrap, topic, {"modern": modern, "classic": classic}, seen)

        if strategy == "cooperative-sticky":
            return
        modern.close()
        open_.remove(modern)
        wait_for(
            lambda: _poll([classic], seen) is None and len(classic.assignment()) == PARTITIONS,
            "every partition with the classic member",
            LIMIT_S,
        )
        later = Consumer({**common, "group.protocol": "consumer"})
        open_.append(later)
        later.subscribe([topic])
        wait_for(
            lambda: _poll([later, classic], seen) is None and _split(later, classic),
            "a new consumer protocol member taken in, the classic member giving two up",
            LIMIT_S,
        )
        _read_once(bootstrap, topic, {"later": later, "classic": classic}, seen)
    finally:
        for consumer in open_:
            consumer.close()
