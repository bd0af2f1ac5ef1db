"""The APIs that name topics by id in Kafka 4.4 (Produce v13, DeleteTopics v6, OffsetCommit v10, OffsetFetch
v10) against raftlog and against Apache Kafka, with the same assertions (``tests/kafka_api/
topic_id_scenarios.py``): a known id served, an id no topic has (the zero id too) answered
UNKNOWN_TOPIC_ID, DeleteTopics' INVALID_REQUEST cases with Kafka's words."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from topic_id_scenarios import commits_and_fetches_offsets_by_id, deletes_by_id_and_by_name, produces_by_id

pytestmark = pytest.mark.slow

SYSTEMS = ("raftlog", "kafka")


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_produce_v13_by_topic_id_is_answered_as_kafka_answers_it(
    servers: Mapping[str, str], system: str
) -> None:
    produces_by_id(servers[system])


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_delete_topics_v6_by_name_or_id_is_answered_as_kafka_answers_it(
    servers: Mapping[str, str], system: str
) -> None:
    deletes_by_id_and_by_name(servers[system])


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_offsets_by_topic_id_are_answered_as_kafka_answers_them(
    servers: Mapping[str, str], system: str
) -> None:
    commits_and_fetches_offsets_by_id(servers[system])
