"""A consumer of the consumer group protocol (KIP-848) joining a live classic group, Kafka's online
upgrade, the same scenario against raftlog's Kafka listeners and Apache Kafka itself
(``test_differential.py``'s clusters and rules): what Kafka 4.4 does with the classic group and its
members, raftlog does. The other direction, a classic consumer joining a consumer protocol group, is
``test_online_migration.py``."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer
from test_differential import SYSTEMS, _create, _differs, _topic
from test_online_migration import LIMIT_S, PARTITIONS, _poll, _read_once, _split

from tests.waiting import wait_for

pytestmark = pytest.mark.slow


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("strategy", ["range,roundrobin", "cooperative-sticky"])
def test_a_consumer_protocol_member_joining_a_live_classic_group_shares_it_with_the_classic_member(
    servers: dict[str, str], system: str, strategy: str
) -> None:
    """A classic consumer (an eager or a cooperative assignor) holds every partition of its group; a
    consumer of the consumer group protocol (``group.protocol=consumer``) joins the same group: the group
    is converted, the classic member gives two partitions up (it is told to rejoin, and rejoins without
    them), two of the four partitions each, none in both, and the records produced then are each consumed
    once, by the member holding their partition. Then the classic member leaves and the consumer protocol
    member gets every partition."""
    _differs(system, "online-upgrade")
    bootstrap = servers[system]
    topic = _topic("upgrade")
    _create(bootstrap, topic, partitions=PARTITIONS)
    group = f"upgrade-{uuid.uuid4().hex[:8]}"
    common = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    classic = Consumer({**common, "session.timeout.ms": 10_000, "partition.assignment.strategy": strategy})
    modern = Consumer({**common, "group.protocol": "consumer"})
    open_ = [classic, modern]
    seen: dict[tuple[int, int], list[str]] = {}
    try:
        classic.subscribe([topic])
        wait_for(
            lambda: _poll([classic], seen) is None and len(classic.assignment()) == PARTITIONS,
            "the classic member assigned every partition",
            LIMIT_S,
        )
        modern.subscribe([topic])
        wait_for(
            lambda: _poll([classic, modern], seen) is None and _split(classic, modern),
            "the consumer protocol member taken in, two partitions each",
            LIMIT_S,
        )
        assert not seen  # the topic stays empty until the assignment settled: each record has one reader
        _read_once(bootstrap, topic, {"classic": classic, "modern": modern}, seen)
        classic.close()
        open_.remove(classic)
        wait_for(
            lambda: _poll([modern], seen) is None and len(modern.assignment()) == PARTITIONS,
            "every partition with the consumer protocol member",
            LIMIT_S,
        )
    finally:
        for consumer in open_:
            consumer.close()
