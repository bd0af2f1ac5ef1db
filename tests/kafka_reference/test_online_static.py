"""Classic static members (KIP-345, ``group.instance.id``) through Kafka's online migration, the same
scenario against raftlog's Kafka listeners and Apache Kafka itself (``test_differential.py``'s clusters and
rules): a static classic group converted when a consumer protocol member joins it, and a static classic
member restarted under its instance id taking its own place in the consumer protocol group."""

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
def test_a_static_classic_member_keeps_its_place_across_an_upgrade_and_a_restart(
    servers: dict[str, str], system: str
) -> None:
    """A static classic consumer (eager assignor) holds every partition; a consumer of the consumer group
    protocol joins: two partitions each, records consumed once each. The static consumer is closed (a
    static member sends no LeaveGroup) and a new one starts at once with the same instance id: it takes
    its instance's place, two partitions each again, and the records produced then are consumed once
    each, by the member holding their partition."""
    _differs(system, "online-static")
    bootstrap = servers[system]
    topic = _topic("static")
    _create(bootstrap, topic, partitions=PARTITIONS)
    group = f"static-{uuid.uuid4().hex[:8]}"
    common = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    static = {**common, "group.instance.id": "app-1", "session.timeout.ms": 30_000}
    classic = Consumer({**static, "partition.assignment.strategy": "range,roundrobin"})
    modern = Consumer({**common, "group.protocol": "consumer"})
    open_ = [classic, modern]
    seen: dict[tuple[int, int], list[str]] = {}
    try:
        classic.subscribe([topic])
        wait_for(
            lambda: _poll([classic], seen) is None and len(classic.assignment()) == PARTITIONS,
            "the static classic member assigned every partition",
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
        restarted = Consumer({**static, "partition.assignment.strategy": "range,roundrobin"})
        open_.append(restarted)
        restarted.subscribe([topic])
        wait_for(
            lambda: _poll([restarted, modern], seen) is None and _split(restarted, modern),
            "the restarted static member in its instance's place, two partitions each",
            LIMIT_S,
        )
        _read_once(bootstrap, topic, {"restarted": restarted, "modern": modern}, seen)
    finally:
        for consumer in open_:
            consumer.close()
