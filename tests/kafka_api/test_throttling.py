"""What the Kafka door does with a request past a client quota (``kafka_api.throttling``), without a
cluster: the answer's ``throttle_time_ms``, a throttled Fetch answered empty with its bytes taken back,
old versions' answers held back instead, the exempt APIs."""

from __future__ import annotations

import datetime
from typing import Any

from kafka_api import throttling, wire
from partitions.security.quotas import ClientQuotas, Entity

FETCH, PRODUCE = 1, 0
Quotas = dict[Entity, dict[str, float]]


def _fetch_answer(records: bytes) -> Any:
    cls = wire.response_class(FETCH, 12)
    partition = wire.build(
        wire.sibling(cls, "PartitionData"), partition_index=0, error_code=0, high_watermark=1,
        last_stable_offset=1, log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1,
        records=records,
    )  # fmt: skip
    topic = wire.build(wire.sibling(cls, "FetchableTopicResponse"), topic="t", partitions=(partition,))
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, error_code=0, session_id=0, responses=(topic,))


def test_a_fetch_past_its_quota_is_answered_empty_with_the_throttle_and_its_bytes_taken_back() -> None:
    table: Quotas = {(("client-id", "c"),): {"consumer_byte_rate": 100.0}}
    quotas = ClientQuotas(lambda: table)
    within, throttle_ms = throttling.throttle(quotas, FETCH, None, "c", 50, _fetch_answer(b"r" * 500), 0.0, 0)
    assert throttle_ms == 0 and throttling.record_bytes(within) == 500  # 500 B over ten seconds: within
    past, throttle_ms = throttling.throttle(quotas, FETCH, None, "c", 50, _fetch_answer(b"r" * 5000), 0.0, 10)
    assert throttle_ms > 0 and past.responses == ()
    assert past.throttle_time == datetime.timedelta(milliseconds=throttle_ms)
    assert quotas.over("consumer_byte_rate", None, "c", 10) == 0  # the 5000 bytes were not counted
    assert throttling.fetch_max_bytes(quotas, None, "c", 55 * 2**20) == 1000  # the quota's ten seconds
    assert throttling.fetch_max_bytes(quotas, None, "other", 4096) == 4096


def test_a_produce_counts_its_request_bytes_and_old_versions_are_held_back() -> None:
    table: Quotas = {(("user", None),): {"producer_byte_rate": 1000.0}}
    quotas = ClientQuotas(lambda: table)
    answer = wire.build(wire.response_class(PRODUCE, 9), responses=(), throttle_time=wire.NO_THROTTLE)
    _, throttle_ms = throttling.throttle(quotas, PRODUCE, "alice", "p", 50_000, answer, 0.0, 0)
    assert throttle_ms > 0
    _, other = throttling.throttle(quotas, PRODUCE, "bob", "p", 100, answer, 0.0, 0)
    assert other == 0  # the default user's quota meters each user alone
    assert throttling.client_waits(PRODUCE, 9) and not throttling.client_waits(PRODUCE, 5)
    assert throttling.client_waits(FETCH, 8) and not throttling.client_waits(FETCH, 7)
    assert throttling.throttle(quotas, 18, "alice", "p", 10**9, answer, 100.0, 0)[1] == 0  # ApiVersions
