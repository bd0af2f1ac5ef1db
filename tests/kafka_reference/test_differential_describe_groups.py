"""DescribeGroups of a group that is not there, and of one of the consumer group protocol (KIP-848), on
both systems with the same assertions: Kafka 4.4 answers both ``Dead``, and from v6 (KIP-1043) with
GROUP_ID_NOT_FOUND and its words, which admin clients read to fall back or to say why."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_fixtures import RawKafka

from kafka_api import wire

pytestmark = [pytest.mark.slow, pytest.mark.kafka_answer]

SYSTEMS = ("raftlog", "kafka")
ASSIGNED_WITHIN_S = 60.0


def _describe(bootstrap: str, version: int, group: str) -> tuple[int, str | None, str]:
    """The group's DescribeGroups answer from its coordinator: (error code, error message, state)."""
    raw = RawKafka(bootstrap.split(",")[0])
    try:
        found = raw.call(10, 4, wire.build(wire.request_class(10, 4), key_type=0, coordinator_keys=(group,)))
    finally:
        raw.close()
    coordinator = found.coordinators[0]
    assert coordinator.error_code.value == 0, coordinator
    raw = RawKafka(f"{coordinator.host}:{coordinator.port}")
    try:
        cls = wire.request_class(15, version)
        body = wire.build(cls, groups=(group,), include_authorized_operations=False)
        [answer] = raw.call(15, version, body).groups
    finally:
        raw.close()
    return answer.error_code.value, getattr(answer, "error_message", None), answer.group_state


@pytest.mark.parametrize("system", SYSTEMS)
def test_a_group_not_there_or_not_classic_is_dead_and_from_v6_not_found(
    servers: Mapping[str, str], system: str
) -> None:
    bootstrap = servers[system]
    suffix = uuid.uuid4().hex[:8]
    topic, group, missing = f"dg-{suffix}", f"dg-consumer-{suffix}", f"dg-missing-{suffix}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(60)
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer"}
    )  # the consumer group protocol (KIP-848): not a classic group
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + ASSIGNED_WITHIN_S
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment(), f"{group} was assigned nothing within {ASSIGNED_WITHIN_S} s"
        answers: dict[tuple[int, str], Any] = {
            (version, name): _describe(bootstrap, version, name)
            for version in (5, 6)
            for name in (missing, group)
        }
    finally:
        consumer.close()
    assert answers == {
        (5, missing): (0, None, "Dead"),
        (5, group): (0, None, "Dead"),
        (6, missing): (69, f"Group {missing} not found.", "Dead"),
        (6, group): (69, f"Group {group} is not a classic group.", "Dead"),
    }
